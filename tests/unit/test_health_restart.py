"""The gate before an in-job restart: the launcher notes why an attempt ended and whom it blames; local rank 0 of
the restarted attempt runs the passive tier (and the active tier when this node is blamed), the other local ranks
follow its verdict; a faulty node ends every worker with 93 and its launcher ends the job naming the cause and the
serial, with the advice to resubmit."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from entrypoint.core.errors import ExitCode
from entrypoint.health.restart import blamed_here, blamed_nodes, gate_restart, node_fault, verdict_path, write_note
from entrypoint.launch.progress import Progress
from entrypoint.launch.restarts import Attempts, Cause, Verdict
from entrypoint.launch.supervisor import Supervisor, Tee
from tests.support import health as fake

REPO = Path(__file__).resolve().parents[2]

BLAME = [
    ("killed-by-signal", "worker-exited", None, 1, (), [1]),
    (
        "gpu-error-exception",
        "trainer-exception",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        1,
        (),
        [1],
    ),
    (
        "xid-in-collective",
        "collective-error",
        "DistBackendError: NCCL error: unhandled cuda error (Xid 79)",
        0,
        (),
        [0],
    ),
    ("plain-exception", "trainer-exception", "ValueError: batch_size=0", 1, (), []),
    ("peer-lost", "collective-error", "DistNetworkError: Connection closed by peer", 1, (), []),
    ("stall-culprit", "stall", "300 s without progress", 0, (2, 3, 2), [2, 3]),
    ("peer-restarted", "peer-restarted", "node 1's attempt 2", 0, (), []),
]


@pytest.mark.parametrize("cause, detail, node, culprits, expected", [c[1:] for c in BLAME], ids=[c[0] for c in BLAME])
def test_the_blame_rule(cause, detail, node, culprits, expected):
    assert blamed_nodes(cause, detail, node, culprits) == expected


def attempts_folder(logs: Path, node: int) -> Path:
    folder = logs / f"exp-node{node}-20260101-000000.attempts"
    folder.mkdir(parents=True)
    (folder / "0.json").write_text("{}")
    return folder


def test_a_note_and_the_give_up_record_are_written_whole(tmp_path):
    folder = attempts_folder(tmp_path, 2)
    attempts = Attempts(3, 0.0, Progress(), folder, clock=lambda: 1.0, node_rank=2)
    attempts.observe(frozenset({100}))
    attempts.feed(
        "[rank16]: Traceback (most recent call last):\n[rank16]: RuntimeError: CUDA error: an illegal memory "
        "access was encountered\n"
    )
    attempts.observe(frozenset())  # the workers are gone: the attempt ended on a GPU fault of this node
    attempts.observe(frozenset({200}))  # the next attempt starts: the ended one is noted
    assert json.loads((folder / "0.ended.json").read_text()) == {
        "attempt": 0,
        "cause": "trainer-exception",
        "detail": "RuntimeError: CUDA error: an illegal memory access was encountered",
        "node_rank": 2,
        "blamed_nodes": [2],
    }
    attempts.record_gave_up(Verdict.BUDGET_SPENT)
    assert json.loads((folder / "gave-up.json").read_text()) == {"verdict": "budget-spent", "node_rank": 2}
    assert Attempts(3, 0.0, Progress()).node_fault() is None  # no attempts folder: nothing to read


def test_the_launcher_notes_each_ended_attempt_and_a_stalls_culprits(tmp_path):
    folder = attempts_folder(tmp_path, 0)
    attempts = Attempts(3, 0.0, Progress(), folder, clock=lambda: 1.0, node_rank=0)
    attempts.observe(frozenset({100}))
    attempts.stalled("300 s without progress", culprit_nodes=(1,))
    note = json.loads((folder / "0.ended.json").read_text())
    assert note["cause"] == "stall" and note["blamed_nodes"] == [1]
    attempts.observe(frozenset({200}))  # attempt 1 starts
    attempts.observe(frozenset())  # ... and its workers die without a word
    attempts.observe(frozenset({300}))
    assert json.loads((folder / "1.ended.json").read_text())["blamed_nodes"] == [0]
    assert attempts.attempts[1].cause is Cause.WORKER_EXITED


def test_blame_is_read_from_this_nodes_note_or_another_nodes(tmp_path):
    node0, node1 = attempts_folder(tmp_path, 0), attempts_folder(tmp_path, 1)
    ticks = iter(range(100))
    waits: list[float] = []
    assert not blamed_here(node1, 0, 1, wait_s=3, clock=lambda: next(ticks), pause=waits.append)
    assert waits == [0.1, 0.1]  # waited for its own note (clock 0 -> deadline 3), bounded
    write_note(node0, 0, "stall", "300 s", 0, [1])  # node 0 named node 1 the culprit
    assert blamed_here(node1, 0, 1, wait_s=0)
    assert not blamed_here(node0, 0, 0, wait_s=0)
    write_note(node1, 1, "worker-exited", None, 1, [1])
    assert blamed_here(node1, 1, 1, wait_s=0)


def shim_env(tmp_path: Path, scenario: dict, local_rank: int = 0) -> dict[str, str]:
    child = fake.child_env(tmp_path / "nvml", scenario)
    return {
        **child,
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": "8",
        "WORLD_SIZE": "8",
        "GROUP_RANK": "0",
        "VLA_HOST_ROOT": str(tmp_path / "host"),
    }


def test_a_faulty_node_ends_the_restart_with_93_and_says_what_to_report(tmp_path):
    folder = attempts_folder(tmp_path / "logs", 0)
    write_note(folder, 0, "trainer-exception", "ValueError", 0, [])
    scenario = fake.node()
    scenario["gpus"][5] = fake.gpu(5, remap=[0, 3, 1, 0])
    out = io.StringIO()
    assert gate_restart(folder, 1, "warn", shim_env(tmp_path, scenario), out) == ExitCode.DO_NOT_REQUEUE
    text = out.getvalue()
    assert "FAIL  health.row-remap" in text and "DO NOT REQUEUE" in text and "请勿重新排队" in text
    assert f"GPU serial(s) {fake.serial(5)}" in text and "resubmit the job" in text
    verdict = json.loads(verdict_path(folder, 1).read_text())
    assert verdict["status"] == "fail" and verdict["blamed"] is False and verdict["active"] is None
    message = node_fault(folder)
    assert message is not None and fake.serial(5) in message.en and fake.serial(5) in message.zh
    follower = io.StringIO()
    assert gate_restart(folder, 1, "warn", shim_env(tmp_path, scenario, local_rank=3), follower) == 93
    assert "local rank 0 found this node faulty" in follower.getvalue()


def test_a_healthy_node_restarts_and_a_blamed_one_is_measured_too(tmp_path):
    folder = attempts_folder(tmp_path / "logs", 0)
    write_note(folder, 0, "worker-exited", None, 0, [0])
    python, answer = fake.active_python(tmp_path / "python", fake.figures())
    env = {**shim_env(tmp_path, fake.node()), **answer}
    out = io.StringIO()
    previous = sys.executable
    try:
        sys.executable = str(python)  # the shim measures with its own (the training) Python
        assert gate_restart(folder, 1, "warn", env, out) == 0
    finally:
        sys.executable = previous
    assert "RESTART 1: node health gate before the restart (passive checks and GPU measurements" in out.getvalue()
    verdict = json.loads(verdict_path(folder, 1).read_text())
    assert verdict["blamed"] is True and verdict["active"]["status"] == "ok"
    assert node_fault(folder) is None
    assert json.loads(folder.with_suffix(".health.json").read_text())["stage"] == "restart-1"


def test_the_launcher_ends_the_job_when_its_node_failed_the_restart_gate(tmp_path):
    folder = attempts_folder(tmp_path, 0)
    verdict_path(folder, 2).write_text(
        json.dumps({"status": "fail", "message": {"en": "DO NOT REQUEUE: GPU SN9", "zh": "请勿重新排队:SN9"}})
    )
    attempts = Attempts(3, 0.0, Progress(), folder, node_rank=0)
    out = io.StringIO()
    supervisor = Supervisor(["torchrun"], str(tmp_path), {}, Tee(out), [], 1, attempts=attempts, lang="both")

    class Tree:
        root = os.getpid()
        killed = False

        def kill(self) -> list[int]:
            self.killed = True
            return []

    supervisor.tree = Tree()  # type: ignore[assignment]
    supervisor._follow_attempts(frozenset())
    assert supervisor.gave_up is Verdict.NODE_FAULT and supervisor.tree.killed
    assert "DO NOT REQUEUE: GPU SN9" in out.getvalue() and "请勿重新排队:SN9" in out.getvalue()
    assert json.loads((folder / "gave-up.json").read_text())["verdict"] == "node-fault"  # the peers stop too


def test_the_attempt_shim_runs_the_gate_before_the_trainer(tmp_path):
    folder = attempts_folder(tmp_path / "logs", 0)
    write_note(folder, 0, "collective-error", "DistNetworkError", 0, [])  # blamed elsewhere: passive tier only
    scenario = fake.node(1)
    scenario["gpus"][0] = fake.gpu(0, processes=[[4242, 900]], used_mib=900)
    script = tmp_path / "train.py"
    script.write_text("print('TRAINER RAN')")
    env = shim_env(tmp_path, scenario) | {"TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    env["WORLD_SIZE"] = "1"
    trainer = ["cfg", "--exp-name", "exp", "--num-train-steps", "100", "--save-interval", "25"]
    trainer += ["--checkpoint-base-dir", str(tmp_path / "ckpt"), "--no-resume", "--no-overwrite"]
    command = [
        sys.executable,
        "-m",
        "entrypoint.launch.attempt",
        "--facts",
        str(folder),
        "--health",
        "warn",
        str(script),
    ]
    done = subprocess.run([*command, *trainer], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 93, done.stdout + done.stderr
    assert "TRAINER RAN" not in done.stdout and "PID 4242 (900 MiB)" in done.stdout and "Traceback" not in done.stderr


def test_the_shim_refuses_an_unknown_gate_mode(tmp_path):
    command = [sys.executable, "-m", "entrypoint.launch.attempt", "--health", "maybe", "train.py"]
    done = subprocess.run(
        command, env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and "--health maybe: warn or fail expected" in done.stderr
