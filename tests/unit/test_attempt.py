"""torchrun's worker entry (`python -m entrypoint.launch.attempt`), run as torchrun runs it, in a child process:
attempt 0 starts the trainer exactly as planned; a restart decides resume again from the folder as it is now, never
passes --overwrite, gets a store of its own, and records the attempt; a finished experiment trains nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from entrypoint.launch.attempt import attempt_port
from entrypoint.launch.progress import Progress
from entrypoint.launch.restarts import Attempts, Verdict
from tests.support.files import small_text
from tests.support.synthetic import make_checkpoint

TRAINER = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'pid': os.getpid(), "
TRAINER += "'port': os.environ.get('MASTER_PORT'), 'agent_store': os.environ.get('TORCHELASTIC_USE_AGENT_STORE')}))"


def attempt(tmp_path: Path, restart: int, resume_flag: str = "--no-resume") -> tuple[int, dict | None, Path]:
    """Run the shim with a stand-in trainer that prints what it was given; (exit code, what it printed, facts)."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    facts = tmp_path / "node0.attempts"
    trainer = [
        "pi05_libero",
        "--exp-name",
        "exp",
        "--num-train-steps",
        "100",
        "--save-interval",
        "25",
        "--checkpoint-base-dir",
        str(tmp_path / "ckpt"),
        resume_flag,
        "--no-overwrite",
    ]
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


def _node_attempts(logs: Path, rank: int) -> Attempts:
    facts = logs / f"exp-node{rank}-20261203-120000.attempts"
    facts.mkdir(parents=True)
    (facts / "0.json").write_text("{}")
    return Attempts(max_restarts=3, t0=0.0, progress=Progress(), facts_dir=facts, node_rank=rank)


def test_a_node_that_gives_up_stops_its_peers(tmp_path: Path) -> None:
    """A node ending the job with 93 tells the others: a node that judged the failure differently (the peer's
    exception reached it as a collective error) must not start an attempt that waits for ranks that are gone."""
    node0, node1 = _node_attempts(tmp_path, 0), _node_attempts(tmp_path, 1)
    assert node0.peer_gave_up() is None
    node1.record_gave_up(Verdict.SAME_EXCEPTION)
    found = node0.peer_gave_up()
    assert found is not None and found[1] is Verdict.SAME_EXCEPTION and "exp-node1-" in found[0]
    assert node1.peer_gave_up() is None  # its own verdict is not a peer's


def test_a_verdict_left_by_an_earlier_run_or_garbled_is_handled(tmp_path: Path) -> None:
    node0, node1 = _node_attempts(tmp_path, 0), _node_attempts(tmp_path, 1)
    stale = node1.facts_dir / "gave-up.json"  # type: ignore[operator]
    stale.write_text("not json")
    os.utime(stale, (1, 1))  # written before this run's first attempt
    assert node0.peer_gave_up() is None
    os.utime(stale, None)
    found = node0.peer_gave_up()
    assert found is not None and found[1] is Verdict.BUDGET_SPENT  # unreadable: still the end of the job
