"""Why training failed: the root cause from torchrun's error file, else the last Python exception in the output.

torchrun writes the first failed worker's error to `TORCHELASTIC_ERROR_FILE` when that worker recorded one
(`@record`); openpi's trainer does not, so the last traceback in the node's output is the fallback.
"""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path
from typing import Iterable

_EXCEPTION_LINE = re.compile(r"^(?:\[[^\]]*\]:?\s*)?(?P<line>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b.*)$")
TAIL_LINES = 200


class OutputTail:
    """The last `TAIL_LINES` lines of the training output (fed raw chunks, like `Progress`)."""

    def __init__(self, size: int = TAIL_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=size)
        self._pending = ""

    def feed(self, chunk: str) -> None:
        text = (self._pending + chunk).replace("\r", "\n")
        *lines, self._pending = text.split("\n")
        self.lines.extend(line for line in lines if line.strip())


def from_error_file(path: Path) -> str | None:
    """The message torchrun recorded, or None when the file is absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict):
        message = message.get("message")
    return str(message).strip().splitlines()[-1] if message else None


def from_output(lines: Iterable[str]) -> str | None:
    """The exception line that ends the last traceback in the output."""
    lines = list(lines)
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        match = _EXCEPTION_LINE.match(line.strip())
        if match:
            return match["line"]
    return None


def root_cause(error_file: Path | None, tail: OutputTail) -> str | None:
    return (from_error_file(error_file) if error_file else None) or from_output(tail.lines)
