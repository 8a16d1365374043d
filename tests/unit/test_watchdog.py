"""The stall watchdog: limits derived from progress (max(2 min, 5x the usual gap)), fires once per silence, ends a
stuck job with 124."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from entrypoint.launch.culprit import NodeReport, RankReport, request_reports, requested_since, write_report
from entrypoint.launch.progress import Progress
from entrypoint.launch.watchdog import FLOOR_S, Watchdog, stall_limit
from tests.support.files import small_text
from tests.support.stall import BARRIER, SLEEP, STARTUP, Clock

EXP = "pi05_libero_pytorch"


def progress_with_gaps(clock: Clock, gaps: list[float]) -> Progress:
    progress = Progress(clock=clock)
    for step, gap in enumerate([0.0, *gaps]):
        clock.now += gap
        progress.feed(f"step={step * 10} loss=0.5 lr=1e-4 time=1.0s\n")
    return progress


@pytest.mark.parametrize(
    "setting, gaps, expected",
    [
        (0, [], None),
        (42, None, STARTUP),  # no progress yet: the start-up allowance holds whatever the setting
        (42, [], 42.0),
        (None, None, STARTUP),
        (None, [5.0, 5.0], STARTUP),  # too few gaps seen to judge
        (None, [5.0, 5.0, 5.0], FLOOR_S),
        (None, [60.0, 60.0, 60.0, 60.0], 300.0),
    ],
    ids=["off", "fixed-before-first-step", "fixed", "before-first-step", "few-gaps", "floor", "slow-steps"],
)
def test_stall_limit(setting, gaps, expected):
    progress = progress_with_gaps(Clock(), gaps) if gaps is not None else Progress()
    assert stall_limit(setting, STARTUP, progress) == expected


def test_progress_events_include_saves_and_bar_counts():
    clock = Clock()
    progress = Progress(clock=clock)
    clock.now = 3
    progress.feed("Training:  10%|#   | 5/50 [00:01<00:09]\r")
    clock.now = 7
    progress.feed("Training:  10%|#   | 5/50 [00:02<00:09]\r")  # same count: not progress
    assert progress.last_event_at == 3
    progress.feed("Saved checkpoint at step 25 -> /x/25\n")
    assert progress.last_event_at == 7


def test_watchdog_fires_once_per_silence_and_rearms_on_progress():
    clock = Clock()
    progress = Progress(clock=clock)
    dog = Watchdog(10, 5, progress, started_at=0.0, clock=clock)
    clock.now = 4
    assert dog.check() is None
    clock.now = 6
    assert dog.check() == (6, 5)  # nothing printed within the start-up allowance
    progress.feed("step=0 loss=1.0\n")
    clock.now = 15
    assert dog.check() is None
    clock.now = 17
    assert dog.check() == (11, 10)
    clock.now = 30
    assert dog.check() is None  # already reported this silence
    progress.feed("step=10 loss=1.0\n")
    clock.now = 41
    assert dog.check() == (11, 10)


def test_stuck_job_is_diagnosed_and_ends_with_124(world):
    """Restarts are left (the default), but torchrun has no workers to end: the node ends with 124 at once instead
    of waiting for a restart that cannot come; the culprit verdict is the node's last line."""
    started = time.monotonic()
    result = world.cli(
        "run", env={"FAKE_TORCHRUN_BLOCK": "1", "VLA_STALL_TIMEOUT": "1", "VLA_STALL_STARTUP_TIMEOUT": "1"}
    )
    assert result.code == 124, result.text
    assert time.monotonic() - started < 10
    assert "STALL: no training progress" in result.out and "fake-torchrun: waiting" in result.out
    (record_path,) = (world.assets / "logs").glob("*[0-9].json")  # beside it: the node's `.stall.json` report
    record = json.loads(small_text(record_path))
    assert record["outcome"]["class"] == "stalled" and record["stall"]["limit_s"] == 1.0
    assert record["stall"]["action"] == "fail"
    assert record["stall"]["culprit"]["method"] == "none" and record["stall"]["culprit"]["missing_nodes"] == []
    assert "no flight recorder here" in result.out
    assert result.out.rstrip().splitlines()[-2].startswith("vla-entrypoint: STALL: no single rank stands out")


def test_a_worker_nodes_silence_is_not_a_stall(world):
    """openpi prints progress from global rank 0 only: node 1 with the same quiet spell that stalls node 0
    (`test_a_quiet_job_is_left_alone_only_when_the_watchdog_is_off`) finishes."""
    quiet = {"FAKE_TORCHRUN_QUIET_S": "3", "VLA_STALL_STARTUP_TIMEOUT": "1", "VLA_STALL_TIMEOUT": "1"}
    result = world.cli("run", env=world.tione(nodes=2, per_node=8, rank=1, VLA_MASTER_WAIT_TIMEOUT="0", **quiet))
    assert result.code == 0, result.text
    assert "STALL" not in result.out


def answer_as_node1(logs: Path, stop: threading.Event) -> None:
    """Node 1's part: once node 0's request appears, report rank 8 asleep and ranks 9-15 in a barrier."""
    while not stop.wait(0.1):
        asked = requested_since(logs, EXP, time.time())
        if asked is None:
            continue
        ranks = [RankReport(8, 108, SLEEP, False, False)]
        ranks += [RankReport(r, 100 + r, BARRIER, True, False) for r in range(9, 16)]
        write_report(NodeReport(1, tuple(ranks), time.time(), request=asked), logs / f"{EXP}-node1-x.log")
        return


def test_node_zero_names_the_culprit_on_another_node(world):
    """Node 0 stalls, asks node 1, reads its report and names rank 8 on node 1 in the record and the last line."""
    logs = world.assets / "logs"
    logs.mkdir(exist_ok=True)
    stop = threading.Event()
    node1 = threading.Thread(target=answer_as_node1, args=(logs, stop))
    node1.start()
    stuck = {"FAKE_TORCHRUN_BLOCK": "1", "VLA_STALL_TIMEOUT": "1", "VLA_STALL_STARTUP_TIMEOUT": "1"}
    try:
        started = time.monotonic()
        result = world.cli("run", env=world.tione(nodes=2, per_node=8, rank=0, **stuck))
    finally:
        stop.set()
        node1.join()
    assert result.code == 124, result.text
    assert time.monotonic() - started < 20  # node 1 answered: no waiting out the gathering bound
    (record_path,) = logs.glob(f"{EXP}-node0-*[0-9].json")
    culprit = json.loads(small_text(record_path))["stall"]["culprit"]
    assert (culprit["method"], culprit["ranks"], culprit["nodes"]) == ("stacks", [8], [1])
    named = "vla-entrypoint: STALL: culprit rank(s) 8 on node(s) 1: their stack differs from the 7 rank(s)"
    assert result.out.rstrip().splitlines()[-2].startswith(named)


def test_a_worker_node_answers_node_zeros_request_with_its_diagnosis(world):
    """Node 0 asked (its request file in the shared log folder): node 1 diagnoses, writes its report for node 0,
    and training goes on to its own end."""
    logs = world.assets / "logs"
    logs.mkdir(exist_ok=True)
    asked_at = time.time()
    assert request_reports(logs, "pi05_libero_pytorch", clock=lambda: asked_at)
    env = world.tione(nodes=2, per_node=8, rank=1, VLA_MASTER_WAIT_TIMEOUT="0", FAKE_TORCHRUN_QUIET_S="4")
    result = world.cli("run", env=env)
    assert result.code == 0, result.text
    assert "STALL: node 0 found no training progress and asks every node for its diagnosis" in result.out
    (report,) = logs.glob("pi05_libero_pytorch-node1-*.stall.json")
    body = json.loads(small_text(report))
    assert body["node_rank"] == 1 and body["answers_request"] == asked_at
    record = json.loads(small_text(report.with_name(report.name.replace(".stall.json", ".json"))))
    assert record["stall"]["requested_at"] == asked_at and record["outcome"]["class"] == "succeeded"


def test_a_restart_gives_the_start_up_allowance_again_until_the_first_step():
    clock = Clock()
    progress = progress_with_gaps(clock, [2.0, 2.0, 2.0, 2.0])
    dog = Watchdog(None, 100, progress, started_at=0.0, clock=clock)
    clock.now += 130
    assert dog.check() is not None  # 130 s > max(120, 5 x 2)
    dog.new_attempt(clock.now)
    clock.now += 99
    assert dog.check() is None  # the model is built again: 100 s from the restart
    clock.now += 2
    assert dog.check() == (101.0, 100.0)
    progress.feed("step=50 loss=0.5 time=1.0s\n")
    clock.now += 119
    assert dog.check() is None  # progress again: the usual bound, from the latest step


@pytest.mark.parametrize(
    "stall_timeout, code", [("0", 0), ("1", 124)], ids=["watchdog-off-finishes", "watchdog-on-fires"]
)
def test_a_quiet_job_is_left_alone_only_when_the_watchdog_is_off(world, stall_timeout, code):
    quiet = {"FAKE_TORCHRUN_QUIET_S": "3", "VLA_STALL_STARTUP_TIMEOUT": "1", "VLA_STALL_TIMEOUT": stall_timeout}
    result = world.cli("run", env=quiet)
    assert result.code == code, result.text
    assert ("STALL: no training progress" in result.out) == (code == 124)


def test_step_time_leaves_out_checkpoint_writes():
    clock = Clock()
    progress = Progress(clock=clock)
    for step, at, saved in ((0, 0, False), (1, 2, False), (2, 4, True), (3, 30, False), (4, 32, False)):
        clock.now = at
        if saved:
            progress.feed(f"Saved checkpoint at step {step} -> /x/{step}\n")
            clock.now += 24  # the write
        progress.feed(f"step={step} loss=0.5 time=2.0s\n")
    assert progress.step_time == 2.0
