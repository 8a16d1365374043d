"""Why training failed, in one line: the failed worker's own exception, and torchrun's verdict on it.

torchrun writes the first failed worker's error to `TORCHELASTIC_ERROR_FILE` only when that worker recorded one
(`@record`; openpi's trainer does not); otherwise the worker's last traceback in the output names the exception,
and torchrun's "Root Cause (first observed failure)" block names the rank, exit code and signal. The explanation
is masked (`core.masking`): an exception message may quote a secret flag or a signed URL.
"""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path

from entrypoint.core.masking import mask_text

_LAUNCHER_EXCEPTIONS = ("ChildFailedError", "SignalException")
_ROOT_FIELD = re.compile(r"^\s*(?P<key>rank|exitcode|traceback|host)\s*:\s*(?P<value>.+?)\s*$")
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


def worker_exception(lines: list[str]) -> str | None:
    """The exception line ending the last traceback that is not torchrun's own."""
    found = None
    in_traceback = False
    for line in lines:
        if "Traceback (most recent call last)" in line:
            in_traceback = True
            continue
        match = _EXCEPTION_LINE.match(line.strip()) if in_traceback else None
        if match:
            in_traceback = False
            if not any(name in match["line"] for name in _LAUNCHER_EXCEPTIONS):
                found = match["line"]
    return found


def torchrun_verdict(lines: list[str]) -> str | None:
    """torchrun's first observed failure, e.g. `rank 1 (local_rank: 1) on node0: exitcode -9, Signal 9 (SIGKILL) …`."""
    starts = [i for i, line in enumerate(lines) if "Root Cause (first observed failure)" in line]
    if not starts:
        return None
    fields: dict[str, str] = {}
    for line in lines[starts[-1] + 1 : starts[-1] + 12]:
        match = _ROOT_FIELD.match(line)
        if match and match["key"] not in fields:
            fields[match["key"]] = match["value"]
    if "rank" not in fields:
        return None
    text = f"rank {fields['rank']}" + (f" on {fields['host']}" if "host" in fields else "")
    text += f": exitcode {fields.get('exitcode', '?')}"
    if fields.get("traceback") and not fields["traceback"].startswith("To enable traceback"):
        text += f", {fields['traceback']}"
    return text


def root_cause(error_file: Path | None, tail: OutputTail) -> str | None:
    """The best one-line explanation available (masked), or None."""
    recorded = from_error_file(error_file) if error_file else None
    if recorded and not any(name in recorded for name in _LAUNCHER_EXCEPTIONS):
        return mask_text(recorded)
    lines = list(tail.lines)
    parts = [p for p in (worker_exception(lines), torchrun_verdict(lines)) if p]
    cause = " — ".join(parts) or recorded
    return mask_text(cause) if cause else None
