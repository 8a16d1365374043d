"""torchrun's worker entry (`python -m entrypoint.launch.attempt`), run as torchrun runs it, in child processes:
attempt 0 starts the trainer exactly as planned; on a restart global rank 0 decides resume again from the folder as
it is now and every other worker of every simulated node uses that one decision (or, without it in time, reads the
folder itself and says so); never passes --overwrite, gets a store of its own, and records the attempt; a finished
experiment trains nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from entrypoint.launch.attempt import AttemptArgs, DecidedBy, attempt_port, decide, shared_decision
from tests.support.files import small_text
from tests.support.jobfiles import shim_trainer_args
from tests.support.synthetic import make_checkpoint

TRAINER = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'pid': os.getpid(), "
TRAINER += "'port': os.environ.get('MASTER_PORT'), 'agent_store': os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}))"


def trainer_args(tmp_path: Path, resume_flag: str = "--no-resume") -> list[str]:
    """The plan's trainer arguments with checkpoints under tmp/ckpt."""
    return shim_trainer_args(tmp_path / "ckpt", resume_flag)


def attempt(tmp_path: Path, restart: int, resume_flag: str = "--no-resume") -> tuple[int, dict | None, Path]:
    """Run the shim with a stand-in trainer that prints what it was given; (exit code, what it printed, facts)."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    facts = tmp_path / "node0.attempts"
    trainer = trainer_args(tmp_path, resume_flag)
    env = {"TORCHELASTIC_RESTART_COUNT": str(restart), "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    env |= {"GROUP_RANK": "0", "MASTER_PORT": "29500", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-m", "entrypoint.launch.attempt", "--facts", str(facts), str(script), *trainer]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    printed = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, printed, facts


def test_first_attempt_runs_the_planned_arguments_in_the_same_process(tmp_path):
    make_checkpoint(tmp_path / "ckpt/pi05_libero/exp", 25)  # appears after planning: attempt 0 keeps the plan
    code, seen, facts = attempt(tmp_path, 0)
    assert code == 0 and seen is not None
    assert "--no-resume" in seen["argv"] and seen["port"] == "29500" and seen["agent_store"] is None
    recorded = json.loads(small_text(facts / "0.json"))
    assert recorded["pid"] == seen["pid"]  # exec: torchrun's worker pid is the trainer's
    assert recorded["ranks"] == [0, 1] and recorded["resume"] is None


def test_a_restart_resumes_from_the_newest_complete_checkpoint(tmp_path):
    exp = tmp_path / "ckpt/pi05_libero/exp"
    make_checkpoint(exp, 25)
    make_checkpoint(exp, 50, missing="optimizer.pt")  # incomplete: never chosen, moved aside by rank 0
    code, seen, facts = attempt(tmp_path, 2)
    assert code == 0 and seen is not None
    assert "--resume" in seen["argv"] and "--no-resume" not in seen["argv"] and "--overwrite" not in seen["argv"]
    assert seen["port"] == str(attempt_port(29500, 2)) == "29503" and seen["agent_store"] == "False"
    assert json.loads(small_text(facts / "2.json"))["resume"]["step"] == 25
    assert not (exp / "50").exists() and any(p.name.startswith("50.incomplete-") for p in exp.iterdir())


def test_a_restart_without_a_checkpoint_starts_fresh_and_never_overwrites(tmp_path):
    code, seen, _ = attempt(tmp_path, 1, resume_flag="--resume")
    assert code == 0 and seen is not None
    assert "--no-resume" in seen["argv"] and "--resume" not in seen["argv"] and "--overwrite" not in seen["argv"]


def test_a_restart_after_the_last_save_trains_nothing(tmp_path):
    make_checkpoint(tmp_path / "ckpt/pi05_libero/exp", 100)
    code, seen, facts = attempt(tmp_path, 1)
    assert (code, seen) == (0, None)
    assert json.loads(small_text(facts / "1.json"))["resume"]["action"] == "finished"


def test_the_store_port_stays_a_port():
    assert attempt_port(65534, 1) == 65532 and attempt_port(29500, 1) == 29502


# ---- one resume decision per restart, shared by every node (several simulated nodes: processes) ----

STAMPS = {0: "20261203-120000", 1: "20261203-120002", 2: "20261203-115959"}  # each node names its files by its clock


def node_folder(logs: Path, node: int) -> Path:
    """Node `node`'s attempts folder, with the `0.json` its first attempt wrote."""
    folder = logs / f"exp-node{node}-{STAMPS[node]}.attempts"
    if not (folder / "0.json").exists():
        folder.mkdir(parents=True)
        (folder / "0.json").write_text("{}")
    return folder


def worker(tmp_path: Path, node: int, local: int, restart: int) -> subprocess.Popen[str]:
    """Worker `local` of node `node` (2 workers a node) of restart `restart`, started as torchrun starts it."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    env = {
        "TORCHELASTIC_RESTART_COUNT": str(restart),
        "RANK": str(2 * node + local),
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": str(node),
        "MASTER_PORT": "29500",
        "VLA_LANG": "en",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    facts = node_folder(tmp_path / "logs", node)
    command = [sys.executable, "-m", "entrypoint.launch.attempt", "--facts", str(facts), str(script)]
    return subprocess.Popen(
        [*command, *trainer_args(tmp_path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict | None, str]:
    """(exit code, what the stand-in trainer printed or None when it never ran, stderr)."""
    out, err = proc.communicate(timeout=60)
    return proc.returncode, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize(
    "before, saved_meanwhile, flag, trains",
    [
        ((), 25, "--no-resume", True),
        ((25,), 100, "--resume", True),
    ],
    ids=["first-save-lands-after-rank-0-decided-fresh", "last-save-lands-after-rank-0-decided-resume"],
)
def test_a_save_completing_during_a_restart_cannot_split_the_nodes(tmp_path, before, saved_meanwhile, flag, trains):
    exp = tmp_path / "ckpt/pi05_libero/exp"
    for step in before:
        make_checkpoint(exp, step)
    node_folder(tmp_path / "logs", 1)
    rank0 = finish(worker(tmp_path, 0, 0, 1))  # global rank 0 decides and records it
    make_checkpoint(exp, saved_meanwhile)  # a save completes before the other workers read the folder
    others = [finish(worker(tmp_path, node, local, 1)) for node, local in ((0, 1), (1, 0), (1, 1))]
    for code, seen, err in [rank0, *others]:
        assert code == 0 and seen is not None, err  # nobody ends as "finished" while the others train
        assert flag in seen["argv"] and seen["argv"].count(flag) == 1 and "--overwrite" not in seen["argv"]
    node0, node1 = (json.loads((node_folder(tmp_path / "logs", n) / "1.json").read_text()) for n in (0, 1))
    assert (node0["resume_decided_by"], node1["resume_decided_by"]) == ("self", "rank-0")
    assert node1["resume"] == node0["resume"] and node1["ranks"] == [2, 3]


def test_workers_started_before_rank_0_decides_wait_for_its_decision(tmp_path):
    make_checkpoint(tmp_path / "ckpt/pi05_libero/exp", 25)
    node_folder(tmp_path / "logs", 1)
    early = [worker(tmp_path, 1, local, 2) for local in (0, 1)]  # they find no decision yet and wait
    code, seen, err = finish(worker(tmp_path, 0, 0, 2))
    assert code == 0 and seen is not None and "--resume" in seen["argv"], err
    for code, seen, err in map(finish, early):
        assert code == 0 and seen is not None and "--resume" in seen["argv"] and not err, err
    recorded = json.loads((node_folder(tmp_path / "logs", 1) / "2.json").read_text())
    assert recorded["resume_decided_by"] == "rank-0" and recorded["resume"]["step"] == 25


def test_the_wait_polls_until_the_decision_appears(tmp_path):
    logs = tmp_path / "logs"
    own, node0 = node_folder(logs, 1), node_folder(logs, 0)
    now = [0.0]
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds
        if len(naps) == 3:  # rank 0 records its decision while this worker waits
            (node0 / "4.json").write_text(json.dumps({"restart_count": 4, "resume": {"action": "fresh", "step": None}}))

    decision = shared_decision(own, 4, 1, wait_s=10, clock=lambda: now[0], sleep=nap)
    assert decision == {"action": "fresh", "step": None} and len(naps) == 3


def test_no_decision_in_time_falls_back_to_reading_the_folder_and_says_so(tmp_path, capsys):
    logs = tmp_path / "logs"
    own = node_folder(logs, 1)
    stale = node_folder(logs, 2)  # not node 0: never read
    (stale / "3.json").write_text(json.dumps({"restart_count": 3, "resume": {"action": "finished", "step": 100}}))
    earlier = logs / "exp-node0-20261101-090000.attempts"  # node 0 of an earlier run: older than this run's 0.json
    earlier.mkdir()
    (earlier / "3.json").write_text(json.dumps({"restart_count": 3, "resume": {"action": "finished", "step": 100}}))
    os.utime(earlier / "3.json", (1, 1))
    garbled = node_folder(logs, 0) / "3.json"  # this run's node 0, but not a decision
    garbled.write_text("{not json")
    make_checkpoint(tmp_path / "ckpt/pi05_libero/exp", 50)
    args = AttemptArgs(own, "train.py", trainer_args(tmp_path))
    env = {"RANK": "2", "LOCAL_RANK": "0", "GROUP_RANK": "1", "VLA_LANG": "en"}
    trainer, decision, left, decided_by = decide(args, 3, env, wait_s=0)
    assert (decided_by, decision["action"], decision["step"], left) == (DecidedBy.FALLBACK, "resume", 50, True)
    assert "--resume" in trainer and "--no-resume" not in trainer
    err = capsys.readouterr().err
    assert "restart 3, node 1: no resume decision from global rank 0 within 0 s" in err
    assert f"{logs}/exp-node0-*.attempts/3.json" in err and "decided from the checkpoint folder itself: resume" in err
