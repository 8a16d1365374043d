"""Shared pieces of the watchdog and culprit tests: a hand-driven clock, the start-up bound they use, and two
stacks (a rank waiting in a collective, a rank stuck in its own code)."""

from __future__ import annotations

STARTUP = 1800
BARRIER = ("barrier (torch/distributed/distributed_c10d.py)", "main (train.py)")
SLEEP = ("_hang_forever (train.py)", "main (train.py)")


class Clock:
    """A monotonic clock the test moves by setting `now`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now
