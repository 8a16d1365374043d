"""One training progress line as numbers: openpi's `step=10 loss=0.1234 lr=2.50e-05 grad_norm=1.67 time=19.1s`.

Every `name=number` pair on the line is kept (loss, lr, grad_norm and whatever else the trainer adds); `time` is
the seconds the trainer measured since its previous progress line (openpi resets its clock at each one), so the
seconds per step are `time` over the steps between the two lines. A line carries at most `MAX_VALUES` values and
only names of letters, digits and `_./-`, so a garbled line cannot make unbounded tags; a name that looks like a
secret's (`core.masking.secret_name`) is skipped with its value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from entrypoint.core.masking import secret_name
from entrypoint.inspect.openpi import STEP_LINE

MAX_VALUES = 16
_PAIR = re.compile(
    r"(?<![\w./-])(?P<name>[A-Za-z_][\w./-]{0,47})=(?P<value>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))s?\b"
)
_CLOCK = re.compile(r"^(?P<h>[0-2]\d):(?P<m>[0-5]\d):(?P<s>[0-5]\d)(?:\.(?P<ms>\d{3}))?\b")


@dataclass(frozen=True)
class StepLine:
    """`step` and the line's other values by name (`loss`, `lr`, `grad_norm`, `time`, ...)."""

    step: int
    values: dict[str, float]
    clock_s: float | None = None  # the line's `HH:MM:SS.mmm` prefix as seconds of the day, when it has one

    @property
    def loss(self) -> float | None:
        value = self.values.get("loss")
        return value if value is not None and math.isfinite(value) else None


def parse_step(line: str) -> StepLine | None:
    """The progress line's numbers, or None when `line` is no progress line."""
    match = STEP_LINE.search(line)
    if match is None:
        return None
    values: dict[str, float] = {}
    for pair in _PAIR.finditer(line, match.start()):
        name = pair["name"]
        if name == "step" or name in values or secret_name(name):  # a secret-looking name's value is never kept
            continue
        try:
            values[name] = float(pair["value"])
        except ValueError:  # pragma: no cover - the pattern admits only numbers
            continue
        if len(values) >= MAX_VALUES:
            break
    clock = _CLOCK.match(line)
    seconds = None
    if clock is not None:
        seconds = int(clock["h"]) * 3600 + int(clock["m"]) * 60 + int(clock["s"]) + int(clock["ms"] or 0) / 1000
    return StepLine(int(match["step"]), values, seconds)


def seconds_per_step(line: StepLine, previous: StepLine | None) -> float | None:
    """Seconds per step between `previous` and `line` (consecutive progress lines of one attempt): the trainer's own
    `time` when it gives one, else the lines' clock prefixes; None for a first line (its time includes start-up) or
    when neither is known."""
    if previous is None or line.step <= previous.step:
        return None
    steps = line.step - previous.step
    measured = line.values.get("time")
    if measured is not None and math.isfinite(measured) and measured >= 0:
        return measured / steps
    if line.clock_s is not None and previous.clock_s is not None:
        elapsed = (line.clock_s - previous.clock_s) % 86400  # past midnight
        return elapsed / steps
    return None
