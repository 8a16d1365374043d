"""Training progress read from the trainer's output: last step, loss, step time and checkpoints saved.

Fed with raw output chunks (tqdm's carriage returns included); understands openpi's `step=… loss=…` and
`Saved checkpoint at step N -> path` lines (see `openpi.py`), and a progress bar's `N/M` count moving. Each of
these is a progress event; the stall watchdog measures the time since the last one.

Everything here is what this run's own output said: a checkpoint found on disk from an earlier run is never counted.
openpi prints progress from global rank 0 only, so a worker node's trainer output carries none (`summary` says so).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from entrypoint.core.messages import Text
from entrypoint.core.numbers import whole_number
from entrypoint.inspect.openpi import SAVED_LINE, STEP_LINE
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.saves import SaveWatch

_BAR_COUNT = re.compile(r"\|\s*(?P<done>\d+)/(?P<total>\d+)\s*\[")


@dataclass(frozen=True)
class Saved:
    """One `Saved checkpoint at step N -> path` line of this run."""

    step: int
    path: str


@dataclass
class Progress:
    clock: Callable[[], float] = time.monotonic
    last_step: int | None = None
    last_loss: float | None = None
    step_times: list[float] = field(default_factory=list)  # seconds per step between logged steps, saves excluded
    first_step_at: float | None = None  # clock value when the first step line arrived
    saves: list[Saved] = field(default_factory=list)
    last_event_at: float | None = None  # clock value of the latest progress event
    last_step_at: float | None = None  # clock value of the latest step line
    gaps: list[float] = field(default_factory=list)  # seconds between consecutive progress events (latest 50)
    _pending: str = ""
    _last_seen: tuple[int, float] | None = None
    _bar: int | None = None
    saving: SaveWatch | None = None  # checkpoint saves in flight, when openpi's save rule is known (`saves.py`)

    def _event(self, now: float) -> None:
        if self.last_event_at is not None:
            self.gaps = [*self.gaps, now - self.last_event_at][-50:]
        self.last_event_at = now

    def typical_gap(self) -> float | None:
        """The median time between progress events, once a few have been seen."""
        return statistics.median(self.gaps) if len(self.gaps) >= 3 else None

    def feed(self, chunk: str) -> None:
        """Consume output; complete lines (ended by \\n or \\r) are parsed, the rest waits for more."""
        text = (self._pending + chunk).replace("\r", "\n")
        *lines, self._pending = text.split("\n")
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        saved = SAVED_LINE.search(line)
        saved_step = whole_number(saved["step"]) if saved else None
        if saved and saved_step is not None:
            self.saves.append(Saved(saved_step, saved["path"]))
            if self.saving is not None:
                self.saving.saved(saved_step, self.clock(), self.step_time)
            self._event(self.clock())
            self._last_seen = None  # the next gap includes the checkpoint write: not a step time
            return
        bar = _BAR_COUNT.search(line)
        done = whole_number(bar["done"]) if bar else None
        if done is not None and done != self._bar:
            self._bar = done
            self._event(self.clock())
            if self.saving is not None:
                self.saving.position(self._bar, self.clock(), before_save=False)
        match = STEP_LINE.search(line)
        step = whole_number(match["step"]) if match else None
        if match is None or step is None:  # no step line, or a step number past any run's
            return
        now = self.clock()
        self._event(now)
        if self.saving is not None:
            self.saving.position(step + 1, now, before_save=True)  # openpi logs step N, then saves step N+1
        if self.first_step_at is None:
            self.first_step_at = now
        if self._last_seen is not None and step > self._last_seen[0]:
            seconds = (now - self._last_seen[1]) / (step - self._last_seen[0])
            self.step_times = [*self.step_times, seconds][-100:]
        self._last_seen = (step, now)
        self.last_step, self.last_step_at = step, now
        try:
            self.last_loss = float(match["loss"])
        except ValueError:
            self.last_loss = None

    @property
    def step_time(self) -> float | None:
        """Median seconds per step over the latest logged intervals that contain no checkpoint write."""
        return statistics.median(self.step_times) if self.step_times else None

    @property
    def step_reached(self) -> int | None:
        """The last step this run reached: its newest logged step or saved checkpoint, whichever is later (a run
        that logged step 40 and then saved step 50 reached 50); None when its output showed neither."""
        steps = [save.step for save in self.saves]
        if self.last_step is not None:
            steps.append(self.last_step)
        return max(steps, default=None)

    def summary(self, node_rank: int, log_dir: str) -> Text:
        """What this run's output showed, in words: the step reached, the last loss and the checkpoints saved; on
        a node whose output showed no progress at all, that node 0's log has it (workers never see any)."""
        reached = self.step_reached
        if reached is None and node_rank != 0:
            return M("progress-not-seen", rank=node_rank, folder=log_dir)
        if reached is None:
            return M("progress-none")
        saves = ", ".join(str(save.step) for save in self.saves) or M("no-saves")
        if self.last_loss is None or self.last_step is None:
            return M("progress-reached", step=reached, saves=saves)
        if self.last_step == reached:
            return M("progress-reached-loss", step=reached, loss=self.last_loss, saves=saves)
        return M("progress-reached-logged", step=reached, loss=self.last_loss, logged=self.last_step, saves=saves)

    def to_json(self) -> dict[str, object]:
        return {
            "last_step": self.last_step,
            "last_loss": self.last_loss,
            "last_step_reached": self.step_reached,
            "step_time_s": round(self.step_time, 4) if self.step_time is not None else None,
            "checkpoints_saved": [{"step": save.step, "path": save.path} for save in self.saves],
        }
