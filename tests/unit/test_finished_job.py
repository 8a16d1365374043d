"""A job that is already finished: re-running it ends at once with exit 0, starting nothing and moving nothing.

Each case runs the real command line in a child process on a tree whose newest complete checkpoint is openpi's last
save for num_train_steps (the seed's 50 steps at interval 25 save 25, 49 and 50). The stand-in torchrun records
that it was started (`FAKE_TORCHRUN_RECORD`); its record stays absent when nothing was started.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.edges import run_cli
from tests.support.files import small_text
from tests.support.synthetic import make_checkpoint
from tests.unit.conftest import World

FINISHED_LINE = (
    "vla-entrypoint: already trained to step 50; raise num_train_steps or set VLA_OVERWRITE=1 to start again "
    "(torchrun was not started)"
)
FINISHED_LINE_ZH = " " * len("vla-entrypoint: ") + (
    "已训练到第 50 步;如需继续训练请调大 num_train_steps,如需重新开始请设置 VLA_OVERWRITE=1(未启动 torchrun)"
)
LIMIT_S = 30.0  # a hang fails the case instead of stalling the suite; the measured time is asserted separately


def finished_experiment(world: World) -> None:
    for step in (25, 49, 50):
        make_checkpoint(world.experiment, step)


def two_nodes(world: World, rank: int, record: Path) -> dict[str, str]:
    """Node `rank` of a 2 x 8 TI-ONE job with the bandwidth preflight on (its own torchrun would run first)."""
    return world.tione(nodes=2, per_node=8, rank=rank) | {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "VLA_PREFLIGHT": "fail",
        "FAKE_TORCHRUN_RECORD": str(record),
    }


def startup_record(world: World, rank: int) -> dict[str, object]:
    (path,) = (world.assets / "logs").glob(f"*-node{rank}-*.json")
    record: dict[str, object] = json.loads(small_text(path))
    return record


@pytest.mark.parametrize("rank", [0, 1], ids=["node-0", "worker-node-1"])
def test_a_finished_job_exits_0_at_once_and_starts_nothing(world: World, tmp_path: Path, rank: int) -> None:
    """Every node reads the same experiment folder, so every node ends here: no torchrun, no preflight, no move."""
    finished_experiment(world)
    before = {str(p): p.stat().st_mtime_ns for p in world.experiment.rglob("*")}
    record = tmp_path / "torchrun-saw.json"
    if rank:  # node 0 first, as in a job: it seals its dataset verdict, which the worker takes instead of waiting
        assert run_cli(world, ("run",), two_nodes(world, 0, tmp_path / "node0-saw.json"), LIMIT_S).code == 0
    ran = run_cli(world, ("run",), two_nodes(world, rank, record), LIMIT_S)
    assert ran.code == 0, ran.text
    assert not record.exists(), "torchrun was started"
    assert ran.out.splitlines()[-2:] == [FINISHED_LINE, FINISHED_LINE_ZH], ran.out
    assert "start command:" not in ran.out and "Traceback" not in ran.text
    assert {str(p): p.stat().st_mtime_ns for p in world.experiment.rglob("*")} == before
    assert list(world.experiment.parent.iterdir()) == [world.experiment]  # nothing moved aside
    outcome = startup_record(world, rank)["outcome"]
    assert outcome == {"exit_code": 0, "class": "already-finished"}
    assert ran.seconds < 10, f"took {ran.seconds:.1f}s"


def test_overwrite_starts_a_finished_job_again(world: World, tmp_path: Path) -> None:
    finished_experiment(world)
    record = tmp_path / "torchrun-saw.json"
    ran = run_cli(world, ("run",), {"VLA_OVERWRITE": "1", "FAKE_TORCHRUN_RECORD": str(record)}, LIMIT_S)
    assert ran.code == 0, ran.text
    assert record.exists() and "--resume" not in json.loads(small_text(record))["argv"]
    (old,) = [p for p in world.experiment.parent.iterdir() if p.name.startswith("pi05_libero_pytorch.old-")]
    assert (old / "50" / "model.safetensors").is_file()
    assert "already trained" not in ran.out
    assert startup_record(world, 0)["outcome"]["class"] == "succeeded"  # type: ignore[index]


def test_raising_num_train_steps_resumes_a_finished_job(world: World, tmp_path: Path) -> None:
    finished_experiment(world)
    record = tmp_path / "torchrun-saw.json"
    ran = run_cli(world, ("run",), {"VLA_NUM_TRAIN_STEPS": "100", "FAKE_TORCHRUN_RECORD": str(record)}, LIMIT_S)
    assert ran.code == 0, ran.text
    assert "--resume" in json.loads(small_text(record))["argv"]


@pytest.mark.parametrize("command", ["check", "plan"])
def test_check_and_plan_warn_that_the_job_is_finished_and_exit_0(world: World, command: str) -> None:
    finished_experiment(world)
    before = world.snapshot()
    shown = run_cli(world, (command,), {}, LIMIT_S)
    assert shown.code == 0, shown.text
    (warning,) = [line for line in shown.out.splitlines() if line.startswith("  WARN  resume ")]
    assert warning.split(None, 2)[2].startswith("already trained to step 50: with num_train_steps=50")
    assert "VLA_OVERWRITE=1" in shown.out and "已训练到第 50 步" in shown.out
    as_json = run_cli(world, (command, "--json"), {}, LIMIT_S)
    plan = json.loads(as_json.out)
    assert as_json.code == 0 and plan["ok"] is True
    assert {k: plan["resume"][k] for k in ("action", "step", "set_aside")} == {
        "action": "finished",
        "step": 50,
        "set_aside": [],
    }
    (finding,) = [f for f in plan["checks"] if f["id"] == "resume"]
    assert finding["status"] == "warn" and finding["message"].startswith("already trained to step 50")
    assert world.snapshot() == before
