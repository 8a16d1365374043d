"""The stall watchdog: limits derived from progress (max(2 min, 5x the usual gap)), fires once per silence, ends a
stuck job with 124."""

from __future__ import annotations

import json

import pytest

from entrypoint.launch.progress import Progress
from entrypoint.launch.watchdog import FLOOR_S, Watchdog, stall_limit

STARTUP = 1800


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


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
    result = world.cli(
        "run", env={"FAKE_TORCHRUN_BLOCK": "1", "VLA_STALL_TIMEOUT": "1", "VLA_STALL_STARTUP_TIMEOUT": "1"}
    )
    assert result.code == 124, result.text
    assert "STALL: no training progress" in result.out and "fake-torchrun: waiting" in result.out
    record = json.loads(next((world.assets / "logs").glob("*.json")).read_text())
    assert record["outcome"]["class"] == "stalled" and record["stall"]["limit_s"] == 1.0
    assert record["stall"]["action"] == "fail"


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
