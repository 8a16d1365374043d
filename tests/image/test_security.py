"""Security properties of the image and the launcher, on real containers: secrets given to a job never reach
its logs, start-up record or plan output (masked `***` where the launcher reports the variable); a build
never takes in registry credentials; the image adds no listening service.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image.conftest import REPO, tione_env
from tests.image.containers import Sandbox
from tests.support.files import holding, small_text

pytestmark = pytest.mark.image

SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL", re.IGNORECASE)


@pytest.fixture
def sandbox(docker_client, built_image) -> Iterator[Sandbox]:
    """Containers and networks a test starts, removed when it ends (whatever the outcome)."""
    with Sandbox(docker_client, built_image) as box:
        yield box


def leaked_into_files(root: Path, secrets: list[str]) -> dict[str, list[str]]:
    """Files under `root` (node logs, start-up records, error files, NCCL logs) that hold any of `secrets`, by
    relative path, scanned in bounded chunks."""
    needles = [secret.encode() for secret in secrets]
    found = {str(p.relative_to(root)): holding(p, needles) for p in sorted(root.rglob("*")) if p.is_file()}
    return {where: sorted(hit.decode() for hit in hits) for where, hits in found.items() if hits}


def test_planted_secrets_never_reach_logs_records_or_plan(sandbox, cfs):
    tag = uuid.uuid4().hex[:12]
    container_secrets = {
        "HF_TOKEN": f"plantedtoken-{tag}",
        "MY_SECRET_KEY": f"plantedkey-{tag}",
        "VLA_HUB_TOKEN": f"plantedvla-{tag}",
    }  # the last: an unknown VLA_ variable, reported by name
    job_secret = f"plantedwandb-{tag}"
    (cfs / "code" / "job.yaml").write_text(f"env:\n  WANDB_API_KEY: {job_secret}\n")
    planted = [*container_secrets.values(), job_secret]
    env = tione_env(
        per_node=1, VLA_NUM_TRAIN_STEPS="4", VLA_SAVE_INTERVAL="2", STANDIN_STEP_SECONDS="0.3", **container_secrets
    )

    run = sandbox.start("run", env, cfs)
    run.wait_for(r"step=0 ")
    (worker,) = run.workers()
    code, environ = run.exec(["cat", f"/proc/{worker}/environ"])
    assert code == 0
    training_env = dict(item.partition("=")[::2] for item in environ.split("\0") if item)
    assert (
        training_env["WANDB_API_KEY"] == job_secret and training_env["HF_TOKEN"] == container_secrets["HF_TOKEN"]
    )  # masked in output only
    assert run.exit(120) == 0, run.output[-3000:]

    inspections = {
        args: sandbox.start(args.replace(" ", "-").replace("--", ""), env, cfs, command=args.split())
        for args in ("plan --json", "plan", "check --json", "check")
    }
    outputs = {"run stdout": run.stdout(), "run stderr": run.stderr()}
    for args, node in inspections.items():
        assert node.exit(60) == 0, node.output[-3000:]
        outputs[f"{args} stdout"], outputs[f"{args} stderr"] = node.stdout(), node.stderr()
    logs = sorted(str(p.relative_to(cfs)) for p in (cfs / "logs").rglob("*") if p.is_file())
    print(f"\nsearched for {len(planted)} planted secrets in: {', '.join(sorted(outputs) + logs)}")
    leaks = {where: [s for s in planted if s in text] for where, text in outputs.items()}
    leaks.update({f"logs/{where}": found for where, found in leaked_into_files(cfs / "logs", planted).items()})
    assert not {where: found for where, found in leaks.items() if found}

    plan = json.loads(outputs["plan --json stdout"])
    (log,) = (cfs / "logs").glob("pi05_libero_pytorch-node0-*.log")
    record = json.loads(small_text(log.with_suffix(".json")))
    for data in (plan, record["plan"]):
        assert data["env"]["set"]["WANDB_API_KEY"] == "***"
        assert data["settings"]["values"]["env"] == {"WANDB_API_KEY": "***"}
    assert "WANDB_API_KEY=***" in outputs["plan stdout"]
    assert any(c["id"] == "settings.unknown-variable" and "VLA_HUB_TOKEN" in json.dumps(c) for c in plan["checks"])


def _planted_credentials() -> dict[str, str]:
    tag = uuid.uuid4().hex[:12]
    return {
        "TCR_USERNAME": f"plantedtcruser-{tag}",
        "TCR_PASSWORD": f"plantedtcr-{tag}",
        "DOCKER_PASSWORD": f"planteddocker-{tag}",
        "REGISTRY_TOKEN": f"plantedregistry-{tag}",
    }


def _secret_looking_env(config: dict) -> list[str]:
    return [
        item
        for item in config.get("Env") or []
        if SECRET_NAME.search(item.partition("=")[0]) and item.partition("=")[2]
    ]


def _scan_saved_image(client, ref: str, needles: list[bytes]) -> tuple[set[bytes], int]:
    """`docker save` streamed and searched (layers are stored uncompressed); returns the needles found and the bytes
    read."""
    found: set[bytes] = set()
    keep = max(map(len, needles)) - 1
    tail, total = b"", 0
    for chunk in client.images.get(ref).save(named=True):
        window = tail + chunk
        found.update(n for n in needles if n in window)
        tail = window[-keep:]
        total += len(chunk)
    return found, total


def test_build_takes_in_no_registry_credentials(docker_client, built_image, sandbox):
    """Bake the image with the push procedure's credentials exported (README: `export TCR_USERNAME …
    TCR_PASSWORD`), under a throwaway tag: the credentials reach neither the resolved bake definition, the
    image's config and history, nor any byte of the saved image. The test image itself carries no
    secret-looking variable."""
    image = docker_client.images.get(built_image)
    assert not _secret_looking_env(image.attrs["Config"]), image.attrs["Config"]["Env"]
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", built_image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not re.search(r"docker login|--password|TCR_PASSWORD|\.docker/config\.json", history), history
    credentials = _planted_credentials()
    env = {**os.environ, **credentials}
    resolved = subprocess.run(
        ["docker", "buildx", "bake", "--print", "openpi", "openpi-push", "openpi-standin"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not [v for v in credentials.values() if v in resolved], resolved

    ref = f"vla-entrypoint/openpi-standin:credcheck-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "buildx", "bake", "--progress", "quiet", "--set", f"openpi-standin.tags={ref}", "openpi-standin"],
        cwd=REPO,
        env=env,
        check=True,
    )
    try:
        image = docker_client.images.get(ref)
        inspect = json.dumps(image.attrs)
        history = subprocess.run(
            ["docker", "history", "--no-trunc", ref], capture_output=True, text=True, check=True
        ).stdout
        for where, text in (("docker inspect", inspect), ("docker history", history)):
            assert not [v for v in credentials.values() if v in text], where
        assert not _secret_looking_env(image.attrs["Config"])
        control = (REPO / "entrypoint/data/job.yaml").read_bytes().splitlines()[0]  # baked by the Dockerfile's COPY
        needles = [v.encode() for v in credentials.values()] + [control]
        found, size = _scan_saved_image(docker_client, ref, needles)
        print(f"\nsaved image scanned: {size / 1e9:.2f} GB; planted credentials found: {sorted(found - {control})}")
        assert control in found, "the scan must see layer contents"
        assert found == {control}
        node = sandbox.start("probe", {}, entrypoint=["sh", "-c", "ls -a /root/.docker 2>&1; env"], image=ref)
        node.exit(60)
        probe = node.output
        assert "No such file" in probe and not [v for v in credentials.values() if v in probe]
    finally:
        sandbox.close()  # the probe container first: it holds the image
        docker_client.images.remove(ref, noprune=True)  # only untags when the test image has the same id


LISTENERS = r"""
import json, subprocess, sys

def listening():
    found = set()
    for name in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/net/{name}") as table:
            for line in list(table)[1:]:
                fields = line.split()
                if not name.startswith("tcp") or fields[3] == "0A":  # TCP LISTEN; any bound UDP socket
                    found.add(f"{name} {fields[1]}")
    return found

before = listening()
check = subprocess.Popen(["vla-entrypoint", "check"], stdout=subprocess.DEVNULL)
during, polls = set(), 0
while check.poll() is None:
    during |= listening()
    polls += 1
during |= listening()
print(json.dumps({"before": sorted(before), "during": sorted(during), "polls": polls, "check": check.returncode}))
"""


def test_image_adds_no_listening_service(docker_client, built_image, cfs, sandbox):
    image = docker_client.images.get(built_image)
    assert not image.attrs["Config"].get("ExposedPorts")
    entrypoint = image.attrs["Config"]["Entrypoint"]
    assert entrypoint[-1] == "vla-entrypoint"
    # the image's own entrypoint chain (tini, the NGC hooks), ending in a probe that runs `check` and reads the
    # container's socket tables before and throughout it
    node = sandbox.start(
        "listeners", tione_env(), cfs, command=["python3", "-c", LISTENERS], entrypoint=entrypoint[:-1]
    )
    assert node.exit(60) == 0, node.output
    result = json.loads(node.stdout().strip().splitlines()[-1])
    print(f"\nlistening sockets: before {result['before']}, during check {result['during']} ({result['polls']} polls)")
    assert result["check"] == 0 and result["polls"] > 0
    assert result["before"] == [] and result["during"] == []
