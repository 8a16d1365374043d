"""The image, for real: bake builds it over the stand-in base; containers train, refuse bad assets, explain
themselves and stop cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.image.conftest import CFS_IN_CONTAINER, REPO, STANDIN_BASE, run_container, tione_env
from tests.support.files import small_text

pytestmark = pytest.mark.image
EXPERIMENT = "checkpoints/pi05_libero/pi05_libero_pytorch"


def test_bake_file_resolves_without_a_daemon():
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock", "TAG": "v1"}
    result = subprocess.run(
        ["docker", "buildx", "bake", "--print", "openpi", "openpi-push", "openpi-standin"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    targets = json.loads(result.stdout)["target"]
    assert targets["openpi"]["tags"] == ["ccr.ccs.tencentyun.com/vla/vla-openpi:v1"]
    assert "attest" not in targets["openpi"] and "cache-to" not in targets["openpi"]
    assert any("sbom" in a for a in targets["openpi-push"]["attest"]) and targets["openpi-push"]["cache-to"]
    assert targets["openpi-standin"]["args"]["BASE_IMAGE"] == STANDIN_BASE


def test_image_metadata_and_size(docker_client, built_image):
    image = docker_client.images.get(built_image)
    base = docker_client.images.get(STANDIN_BASE)
    config = image.attrs["Config"]
    assert config["Entrypoint"] == [
        "tini",
        "-g",
        "--",
        "/usr/local/lib/vla-entrypoint/base-entrypoint",
        "vla-entrypoint",
    ]
    assert config["Cmd"] == ["run"]
    labels = config["Labels"]
    for key in ("title", "version", "revision", "source", "created", "base.name"):
        assert labels[f"org.opencontainers.image.{key}"]
    assert labels["org.opencontainers.image.base.name"] == STANDIN_BASE
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    assert labels["org.opencontainers.image.revision"].removesuffix("-dirty") == head.stdout.strip()
    assert labels["org.opencontainers.image.created"].startswith("20")  # the commit's ISO 8601 time, not "unknown"
    added = image.attrs["Size"] - base.attrs["Size"]
    layers = [layer for layer in image.history() if layer["Size"]][: len(image.history()) - len(base.history())]
    package = next(
        layer for layer in layers if "pip install" in layer["CreatedBy"] and "--no-deps" in layer["CreatedBy"]
    )
    print(
        f"\nbytes the openpi target adds over its base: {added} (package layer {package['Size']}, "
        f"largest layer {max(layer['Size'] for layer in layers)})"
    )
    assert added < 16 * 1024 * 1024  # py-spy (~7 MB) is most of it
    # the often-changed layer is last and small: the launcher's sources and their bytecode (2.9 MB with the health gate,
    # the report and the storage probes), never a dependency
    assert package["Size"] < 4 * 1024 * 1024 and layers[0] is package
    check = run_container(
        docker_client,
        built_image,
        entrypoint=["sh", "-c"],
        command=[
            "ls /root/.cache/pip 2>&1; test -f /workspace/openpi/install_transformers_replace.sh "
            "&& python3 -c 'import transformers, pathlib; print(pathlib.Path(transformers.__file__).parent)'"
        ],
    )
    assert "No such file" in check.logs
    patched = check.stdout.strip().splitlines()[-1]
    probe = run_container(docker_client, built_image, entrypoint=["test", "-f", f"{patched}/models/siglip/check.py"])
    assert probe.code == 0, "the transformers patch must be baked into the image"


def test_default_command_trains_with_one_mount(docker_client, built_image, cfs):
    result = run_container(docker_client, built_image, env=tione_env(per_node=2), mounts={str(cfs): CFS_IN_CONTAINER})
    assert result.code == 0, result.logs
    assert sorted(p.name for p in (cfs / EXPERIMENT).iterdir()) == ["25", "49", "50"]
    for step in ("25", "49", "50"):
        names = {p.name for p in (cfs / EXPERIMENT / step).iterdir()}
        assert {"model.safetensors", "optimizer.pt", "metadata.pt", "assets"} <= names
        assert (cfs / EXPERIMENT / step / "assets/physical-intelligence/libero/norm_stats.json").is_file()
    out = result.stdout
    assert (
        out.index("health check summary: PASS")
        < out.index("transformers_replace already present")
        < out.index("start command:")  # printed when torchrun really starts
        < out.index("step=0 ")
    )
    assert "== NGC-style entrypoint hook ran ==" in result.stderr
    (log,) = (cfs / "logs").glob("pi05_libero_pytorch-node0-*.log")
    record = json.loads(small_text(log.with_suffix(".json")))
    assert record["outcome"]["exit_code"] == 0
    assert [s["step"] for s in record["progress"]["checkpoints_saved"]] == [25, 49, 50]


def test_restarted_job_resumes(docker_client, built_image, cfs):
    env = tione_env(per_node=1, VLA_NUM_TRAIN_STEPS="6", VLA_SAVE_INTERVAL="3", VLA_LOG_INTERVAL="1")
    first = run_container(docker_client, built_image, env=env, mounts={str(cfs): CFS_IN_CONTAINER})
    assert first.code == 0, first.logs
    env["VLA_NUM_TRAIN_STEPS"] = "9"
    second = run_container(docker_client, built_image, env=env, mounts={str(cfs): CFS_IN_CONTAINER})
    assert second.code == 0, second.logs
    assert "resuming from step 6" in second.stdout and "--resume" in second.stdout
    assert sorted(int(p.name) for p in (cfs / EXPERIMENT).iterdir()) == [3, 5, 6, 8, 9]


def test_seed_four_mount_layout(docker_client, built_image, cfs):
    mounts = {
        str(cfs): CFS_IN_CONTAINER,
        str(cfs / "checkpoints"): "/workspace/openpi/checkpoints",
        str(cfs / "assets"): "/workspace/openpi/assets",
        str(cfs / "code"): "/workspace/openpi/code",
    }
    env = tione_env(per_node=1, VLA_NUM_TRAIN_STEPS="4", VLA_SAVE_INTERVAL="2")
    result = run_container(docker_client, built_image, env=env, mounts=mounts)
    assert result.code == 0, result.logs
    assert sorted(p.name for p in (cfs / EXPERIMENT).iterdir()) == ["2", "3", "4"]


def test_missing_assets_exit_3_quickly_and_write_no_checkpoint(docker_client, built_image, cfs):
    (cfs / "assets/pi05_libero/physical-intelligence/libero/norm_stats.json").unlink()
    result = run_container(docker_client, built_image, env=tione_env(), mounts={str(cfs): CFS_IN_CONTAINER})
    assert result.code == 3
    assert "norm_stats.json" in result.stdout and "health check summary: FAIL" in result.stdout
    assert not (cfs / "checkpoints/pi05_libero").exists()
    print(f"\nmissing assets refused in {result.seconds:.1f}s (container start included)")
    assert result.seconds < 30


def test_plan_and_check_in_the_container(docker_client, built_image, cfs):
    plan = run_container(
        docker_client,
        built_image,
        command=["plan", "--json"],
        env=tione_env(nodes=2, rank=1, master="node0"),
        mounts={str(cfs): CFS_IN_CONTAINER},
    )
    assert plan.code == 0, plan.logs
    data = json.loads(plan.stdout)
    assert (data["topology"]["nnodes"], data["topology"]["node_rank"], data["topology"]["nproc_per_node"]) == (2, 1, 2)
    assert data["command"][0].endswith("torchrun")
    assert "== NGC-style entrypoint hook ran ==" in plan.stderr
    check = run_container(
        docker_client, built_image, command=["check"], env=tione_env(), mounts={str(cfs): CFS_IN_CONTAINER}
    )
    assert check.code == 0 and "health check summary: PASS" in check.stdout
    assert not (cfs / "checkpoints/pi05_libero").exists() and not list((cfs / "logs").iterdir())


def test_sigterm_stops_workers_and_exits_143(docker_client, built_image, cfs):
    env = tione_env(per_node=2, STANDIN_STEP_SECONDS="0.5", VLA_GRACE_PERIOD="10")
    container = docker_client.containers.run(
        built_image, environment=env, detach=True, volumes={str(cfs): {"bind": CFS_IN_CONTAINER, "mode": "rw"}}
    )
    try:
        seen = b""
        for chunk in container.logs(stream=True, follow=True):  # synchronise on training output, not on time
            seen += chunk
            if b"step=0 " in seen:
                break
        start = time.monotonic()
        container.kill(signal="SIGTERM")
        code = container.wait(timeout=60)["StatusCode"]
        elapsed = time.monotonic() - start
        top = container.logs().decode()
    finally:
        container.remove(force=True)
    print(f"\nSIGTERM to exit: {elapsed:.2f}s (grace period 10s)")
    assert code == 143, top
    assert elapsed < 10
    assert "received SIGTERM" in top


def test_preflight_measures_allreduce_on_cpu(docker_client, built_image, cfs):
    result = run_container(
        docker_client,
        built_image,
        command=["preflight", "--json"],
        env=tione_env(per_node=2),
        mounts={str(cfs): CFS_IN_CONTAINER},
    )
    assert result.code == 0, result.logs
    data = json.loads(result.stdout)
    assert data["status"] == "passed" and [r["bytes"] for r in data["results"]] == [64 << 10, 1 << 20, 8 << 20]
    assert all(r["median_gbps"] > 0 for r in data["results"])
    text = run_container(
        docker_client,
        built_image,
        command=["preflight"],
        env=tione_env(per_node=1),
        mounts={str(cfs): CFS_IN_CONTAINER},
    )
    assert text.code == 0 and "single GPU has no peers" in text.stdout
