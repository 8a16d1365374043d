"""Training progress read from the trainer's output: last step, loss, step time and checkpoints saved.

Fed with raw output chunks (tqdm's carriage returns included); understands openpi's `step=… loss=…` and
`Saved checkpoint at step N -> path` lines (see `openpi.py`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from entrypoint.openpi import SAVED_LINE, STEP_LINE


@dataclass
class Progress:
    clock: Callable[[], float] = time.monotonic
    last_step: int | None = None
    last_loss: float | None = None
    step_time: float | None = None  # seconds per step between the last two logged steps
    first_step_at: float | None = None  # clock value when the first step line arrived
    saves: list[dict[str, object]] = field(default_factory=list)
    _pending: str = ""
    _last_seen: tuple[int, float] | None = None

    def feed(self, chunk: str) -> None:
        """Consume output; complete lines (ended by \\n or \\r) are parsed, the rest waits for more."""
        text = (self._pending + chunk).replace("\r", "\n")
        *lines, self._pending = text.split("\n")
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        saved = SAVED_LINE.search(line)
        if saved:
            self.saves.append({"step": int(saved["step"]), "path": saved["path"]})
            return
        match = STEP_LINE.search(line)
        if not match:
            return
        step, now = int(match["step"]), self.clock()
        if self.first_step_at is None:
            self.first_step_at = now
        if self._last_seen is not None and step > self._last_seen[0]:
            self.step_time = (now - self._last_seen[1]) / (step - self._last_seen[0])
        self._last_seen = (step, now)
        self.last_step = step
        try:
            self.last_loss = float(match["loss"])
        except ValueError:
            self.last_loss = None

    def to_json(self) -> dict[str, object]:
        return {
            "last_step": self.last_step,
            "last_loss": self.last_loss,
            "step_time_s": round(self.step_time, 4) if self.step_time is not None else None,
            "checkpoints_saved": list(self.saves),
        }
