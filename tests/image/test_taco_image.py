"""TACO in the image: the openpi-taco target bakes a stand-in wheel tagged for the stand-in's Python (Debian trixie,
CPython 3.13); a wrong-tag, missing or doubled wheel fails the build with a clear message; a 2-node job applies the
features on every rank and prints rank 0's summary in node 0's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest

from entrypoint.net.source import sha256_of
from entrypoint.taco.summary import parse_summary
from tests.image.conftest import CFS_IN_CONTAINER, REPO, STANDIN_BASE, run_container, tione_env
from tests.support.files import small_text
from tests.support.synthetic import make_assets_tree
from tests.support.taco_wheel import CP312, build_wheel

pytestmark = pytest.mark.image
TACO_IMAGE = "vla-entrypoint/openpi-taco-standin:test"
WHEEL_IMAGE = "vla-entrypoint/taco-wheel-standin:test"  # docker-bake.hcl's taco-wheel-standin target


def bake_taco(wheel_dir: Path) -> subprocess.CompletedProcess[str]:
    """Bake openpi-taco-standin with the wheel folder `wheel_dir`: first `taco-wheel-standin` (the folder as a local
    image, since Docker 20.10's BuildKit has no named contexts), then the image. Output of both, in order. buildx
    writes an inline Dockerfile into a `dockerfile*` folder of its TMPDIR and leaves it there: that TMPDIR is a
    folder of our own, removed afterwards."""
    outputs = []
    with tempfile.TemporaryDirectory(prefix="vla-bake-") as scratch:
        env = {**os.environ, "TACO_WHEEL_DIR": str(wheel_dir), "TMPDIR": scratch}
        for target in ("taco-wheel-standin", "openpi-taco-standin"):
            result = subprocess.run(
                ["docker", "buildx", "bake", "--progress", "plain", target],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
            )
            outputs.append(result.stdout + result.stderr)
            if result.returncode != 0:
                break
    return subprocess.CompletedProcess(result.args, result.returncode, "".join(outputs), "")


@pytest.fixture(scope="module")
def standin_tag(docker_client, built_image) -> str:
    """The stand-in's python3 tag in the real wheel's style, e.g. cp313-cp313-linux_x86_64."""
    done = run_container(
        docker_client,
        STANDIN_BASE,
        ["-m", "tests.support.taco_wheel", "--print-tag"],
        entrypoint=["python3"],
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        mounts={str(REPO): "/src"},
        working_dir="/src",
        timeout=60,
    )
    assert done.code == 0, done.logs
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def taco_image(docker_client, tmp_path_factory, standin_tag) -> Iterator[tuple[str, Path, str]]:
    """(image, wheel, build output): openpi-taco-standin baked with a stand-in wheel for the stand-in's Python (a fresh
    version each run, so the step runs instead of coming from the build cache). Both stand-in TACO images are
    removed when the module ends, whatever its outcome: no run reuses them."""
    try:
        wheel = build_wheel(
            tmp_path_factory.mktemp("taco-context"), standin_tag, version=f"0.1.0+standin.{uuid.uuid4().hex[:8]}"
        )
        result = bake_taco(wheel.parent)
        assert result.returncode == 0, result.stdout
        yield TACO_IMAGE, wheel, result.stdout
    finally:
        for ref in (TACO_IMAGE, WHEEL_IMAGE):
            with contextlib.suppress(docker.errors.ImageNotFound):
                docker_client.images.remove(ref)


def test_the_wheel_is_baked_with_its_record_and_no_cache(docker_client, taco_image):
    image, wheel, output = taco_image
    digest = sha256_of(wheel)
    assert f"TACO baked: {wheel.name} (sha256 {digest}) into /opt/taco-train:" in output
    done = run_container(
        docker_client,
        image,
        [
            "-c",
            "cat /opt/taco-train/WHEEL.json; echo ====; "
            "ls /opt/taco-train/taco_train/prelude; "
            "find / -xdev -name 'taco_train-*.whl' -print; ls /root/.cache/pip 2>&1 | head -1",
        ],
        entrypoint=["sh"],
        timeout=60,
    )
    assert done.code == 0, done.logs
    record, listing = done.stdout.split("====\n", 1)
    assert json.loads(record) == {"file": wheel.name, "sha256": digest}
    assert "sitecustomize.py" in listing and ".whl" not in listing  # the wheel itself stays out of the image
    assert "No such file" in listing  # no pip cache
    layer = docker_client.api.history(image)[0]
    assert layer["Size"] < 1 << 20, layer
    print(f"\nTACO layer: {layer['Size']} bytes ({wheel.name})")


@pytest.mark.parametrize(
    "content, message",
    [
        ("cp312", f"is tagged {CP312}, but this image's python3 is CPython 3.13"),
        ("none", "the build context 'taco' must hold exactly one taco_train-*.whl; it holds nothing"),
        ("two", "must hold exactly one taco_train-*.whl; it holds taco_train-"),
    ],
    ids=["wrong-tag", "no-wheel", "two-wheels"],
)
def test_a_bad_wheel_fails_the_build_clearly(tmp_path, taco_image, standin_tag, content, message):
    if content == "cp312":
        build_wheel(tmp_path, CP312)
    elif content == "two":
        build_wheel(tmp_path, standin_tag)
        build_wheel(tmp_path, standin_tag, version="0.2.0")
    result = bake_taco(tmp_path)
    assert result.returncode != 0
    assert message in result.stdout, result.stdout[-3000:]


def test_plan_reports_the_baked_wheel(docker_client, taco_image, cfs):
    """`plan --json` shows the baked wheel and the environment that activates it."""
    done = run_container(
        docker_client, taco_image[0], ["plan", "--json"], env=tione_env(), mounts={str(cfs): CFS_IN_CONTAINER}
    )
    assert done.code == 0, done.logs
    plan = json.loads(done.stdout)
    assert plan["taco"]["status"] == "baked" and plan["taco"]["wheel"] == taco_image[1].name
    assert plan["taco"]["features"] == "openpi_skip_outer_checkpoint,openpi_compile,tf32"
    exported = plan["env"]["set"]
    assert exported["PYTHONPATH"].startswith("/opt/taco-train:/opt/taco-train/taco_train/prelude")
    assert exported["TACO_TRAIN_REPORT"] == "1" and exported["TACO_TRAIN_FEATURES"] == plan["taco"]["features"]


def test_two_node_job_with_taco(docker_client, taco_image, tmp_path):
    """Two containers as two nodes, 2 processes each, VLA_TACO=on: every rank and every DataLoader worker applies the
    features, rank 0's summary is in node 0's log, and the verdict is in the final line and in each node's record."""
    cfs = make_assets_tree(tmp_path / "openpi-assets", episodes=4)
    os.chmod(cfs, 0o777)
    suffix = uuid.uuid4().hex[:8]
    network = docker_client.networks.create(f"vla-taco-{suffix}", driver="bridge")
    names = [f"taco-node{rank}-{suffix}" for rank in (0, 1)]
    containers = []
    try:
        for rank, name in enumerate(names):
            env = tione_env(
                nodes=2,
                per_node=2,
                rank=rank,
                master=names[0],
                NODE_LIST=f"{names[0]}:2,{names[1]}:2",
                VLA_TACO="on",
                VLA_NUM_WORKERS="2",
                TACO_STANDIN_MARKS=f"{CFS_IN_CONTAINER}/taco-marks.jsonl",
            )
            containers.append(
                docker_client.containers.run(
                    taco_image[0],
                    environment=env,
                    name=name,
                    hostname=name,
                    network=network.name,
                    detach=True,
                    volumes={str(cfs): {"bind": CFS_IN_CONTAINER, "mode": "rw"}},
                )
            )
        codes = [c.wait(timeout=600)["StatusCode"] for c in containers]
        logs = [c.logs().decode() for c in containers]
    finally:
        for container in containers:
            container.remove(force=True)
        network.remove()
    assert codes == [0, 0], logs
    marks = [json.loads(line) for line in small_text(cfs / "taco-marks.jsonl").splitlines()]
    # The attempt shim execs the trainer in its own process, so a rank's pid imports the prelude twice: count it once.
    ranks = list({(m["host"], m["pid"]): m for m in marks if m["rank"] is not None and m["role"] == "process"}.values())
    assert sorted(m["rank"] for m in ranks) == ["0", "1", "2", "3"], marks
    assert {m["host"] for m in ranks} == set(names) and all(m["applied"] == ["tf32"] for m in ranks)
    rank_pids = {m["pid"] for m in ranks}
    workers = [m for m in marks if m["rank"] is not None and m["pid"] not in rank_pids]
    assert len(workers) >= 4 * 2 and all(m["applied"] == ["tf32"] for m in workers), (
        marks
    )  # 2 DataLoader workers per rank
    summary = parse_summary(logs[0])
    assert (
        summary is not None
        and summary["tf32"] == "applied ×1"
        and summary["openpi_compile"] == "n/a (openpi not installed)"
    )
    assert parse_summary(logs[1]) is None
    assert "TACO: PARTIAL — 1 of 3 requested feature(s) applied: tf32 applied ×1" in logs[0]
    for rank in (0, 1):
        (log,) = (cfs / "logs").glob(f"pi05_libero_pytorch-node{rank}-*.log")
        record = json.loads(small_text(log.with_suffix(".json")))
        assert record["taco"]["status"] == "active" and record["taco"]["plan_status"] == "baked"
        assert record["taco"]["outcome"]["verdict"] == ("partial" if rank == 0 else "on-node-0")
