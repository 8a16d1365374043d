"""On a real GPU: the entrypoint drives NCCL bf16 training, installs the cp312 TACO wheel, keeps JAX off the GPU,
and reports a one-GPU preflight sensibly. Run on the lent GPU machine: `python -m pytest tests/gpu -q`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.gpu.conftest import NGC_ENTRYPOINT
from tests.support.files import small_text
from tests.support.taco_wheel import CP312

EXPERIMENT = "checkpoints/pi05_libero/pi05_libero_pytorch"


def launch(env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`vla-entrypoint ARGS` through NGC's entrypoint when the machine has it, as the image's ENTRYPOINT chain does."""
    chain = [str(NGC_ENTRYPOINT)] if NGC_ENTRYPOINT.exists() else []
    return subprocess.run(
        [*chain, sys.executable, "-m", "entrypoint", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def record_of(env: dict[str, str]) -> dict:
    """The start-up record beside the node's log (the health gate's report, `.health.json`, lies there too)."""
    (log,) = (Path(env["VLA_ASSETS_ROOT"]) / "logs").glob("*-node0-*.log")
    return json.loads(small_text(log.with_suffix(".json")))


def test_run_trains_with_nccl_in_bf16_and_writes_the_seed_layout(gpu_env):
    result = launch(gpu_env, "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(p.name for p in (Path(gpu_env["VLA_ASSETS_ROOT"]) / EXPERIMENT).iterdir()) == ["25", "49", "50"]
    assert "Training precision: bfloat16" in result.stdout + result.stderr
    record = record_of(gpu_env)
    assert record["outcome"]["class"] == "succeeded"
    assert record["progress"]["last_step"] == 40 and [s["step"] for s in record["progress"]["checkpoints_saved"]] == [
        25,
        49,
        50,
    ]
    assert record["plan"]["topology"]["device"] == "gpu" and record["plan"]["fabric"]["transport"] == "local"
    assert record["progress"]["first_step_after_s"] > 0 and {"plan", "prepare", "training"} <= set(record["phases_s"])


def test_cp312_taco_wheel_installs_and_activates(gpu_env, tmp_path):
    subprocess.run(
        [sys.executable, "-m", "tests.support.taco_wheel", str(tmp_path / "wheel"), "--tag", CP312],
        check=True,
        env=gpu_env,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    env = {**gpu_env, "VLA_TACO": "on", "VLA_TACO_WHEEL": str(wheel)}
    result = launch(env, "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    taco = record_of(env)["taco"]
    assert taco["status"] == "active" and taco["outcome"]["verdict"] in ("applied", "partial")
    assert "taco-train — optimization summary" in result.stdout + result.stderr


def test_jax_takes_no_gpu_memory(gpu_env):
    env = {**gpu_env, "STANDIN_USE_JAX": "1", "VLA_NUM_TRAIN_STEPS": "4", "VLA_SAVE_INTERVAL": "4"}
    result = launch(env, "run")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    line = next(text for text in output.splitlines() if "stand-in: jax backend=" in text)
    print(f"\n{line.strip()}")
    assert "jax backend=cpu" in line
    used_mib = int(line.split("GPU memory of this process: ")[1].split()[0])
    assert used_mib < 4096  # torch's context and the tiny model only; JAX on the GPU would preallocate ~75% (~100 GiB)


def test_preflight_on_one_gpu_says_there_are_no_peers(gpu_env):
    result = launch(gpu_env, "preflight")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "single GPU has no peers" in result.stdout


def test_gpu_samples_from_the_real_nvml_reach_tensorboard(gpu_env):
    """Every second during training, NVML's figures of the GPU that trains land in the node's event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    env = {**gpu_env, "VLA_METRICS_INTERVAL": "1", "VLA_NUM_TRAIN_STEPS": "3000", "VLA_SAVE_INTERVAL": "3000"}
    result = launch(env, "run")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder,) = (Path(env["VLA_ASSETS_ROOT"]) / "logs" / "tensorboard").glob("*/node0-*")
    events = EventAccumulator(str(folder))
    events.Reload()
    tags = set(events.Tags()["scalars"])

    def values(name: str) -> list[float]:
        return [e.value for e in events.Scalars(f"gpu0/{name}")]

    assert {"gpu0/utilization_pct", "gpu0/power_w", "gpu0/sm_clock_mhz", "train/loss"} <= tags, sorted(tags)
    print(f"\n{len(values('utilization_pct'))} samples; utilisation {values('utilization_pct')}")
    assert max(values("utilization_pct")) > 0  # the GPU that trains was seen busy
    assert min(values("memory_total_mib")) > 16 * 1024 and max(values("memory_used_mib")) > 0
    assert all(0 < watts < 2000 for watts in values("power_w")) and max(values("sm_clock_mhz")) > 100
