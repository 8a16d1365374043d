"""Checkpoint saves in flight, inferred from openpi's save rule: openpi prints nothing when a save starts, only
`Saved checkpoint at step S -> path` when it is done. It saves right after the step that makes `global_step` S,
for S a multiple of `save_interval` or S = num_train_steps - 1 (`inspect/openpi.py`). So once the output shows
a save step due before the next progress event (`done` steps finished; `span` steps between the latest events),
a save may be running until the next `Saved` line. The stall watchdog then allows 3x the longest save seen so far
(a fixed allowance before the first one), and each save's duration is measured from that moment to its line, less
the steps computed in between."""

from __future__ import annotations

from dataclasses import dataclass, field


def next_save(done: int, interval: int, total: int) -> int | None:
    """The first step >= `done` after which openpi saves; None when no save is left (`done` past the last)."""
    if interval <= 0 or total <= 0:
        return None
    multiple = max(interval, -(-done // interval) * interval)
    candidates = [s for s in (multiple, total - 1) if s >= max(done, 1) and s <= total]
    return min(candidates, default=None)


@dataclass
class SaveWatch:
    """Fed the steps finished as the output shows them (`position`) and each `Saved` line (`saved`)."""

    interval: int
    total: int
    started_at: float | None = None  # when the save now possibly running began (None: no save in flight)
    seconds: list[float] = field(default_factory=list)  # each measured save (latest 20)
    _done: int | None = None
    _span: int = 1
    _from: tuple[float, int] | None = None  # (clock, steps finished) when the save in flight was marked
    _saved: int | None = None  # the latest step saved

    def position(self, done: int, now: float, *, before_save: bool) -> None:
        """The output shows `done` steps finished at `now`. `before_save`: the line comes before the save of step
        `done` (openpi's step line), not after it (the progress bar, updated once the save is written)."""
        if self._done is not None and done > self._done:
            self._span = done - self._done
        self._done = done
        first = done if before_save else done + 1  # the first step whose save is still to come
        if self._saved is not None:
            first = max(first, self._saved + 1)
        last = done + self._span - (1 if before_save else 0)  # the last one that can come before the next event
        upcoming = next_save(first, self.interval, self.total)
        if upcoming is None or upcoming > last:
            self.started_at, self._from = None, None
        elif self.started_at is None:
            self.started_at, self._from = now, (now, done)

    def saved(self, step: int, now: float, step_time: float | None) -> None:
        """A `Saved checkpoint at step <step>` line arrived at `now`."""
        if self._from is not None:
            marked_at, done = self._from
            computing = max(0, step - done) * (step_time or 0.0)
            self.seconds = [*self.seconds, max(0.0, now - marked_at - computing)][-20:]
        self.started_at, self._from, self._saved = None, None, step
        self._done = max(self._done or 0, step)

    @property
    def longest(self) -> float | None:
        return max(self.seconds, default=None)
