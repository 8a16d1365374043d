"""Reading taco-train's end-of-training summary box out of the training output.

With `TACO_TRAIN_REPORT=1`, rank 0 prints at exit a box titled `taco-train — optimization summary` with one
line per feature and its status (`applied ×N`, `off`, `n/a (openpi not installed)` …). The parser accepts
Unicode or ASCII box borders or none, a per-line prefix (torchrun's `[rank0]:`, a timestamp) as long as the
title line has it too, ANSI colours, and other processes' lines interleaved inside a bordered box. The last
complete box wins. `SummaryReader` does the same on a stream, keeping only the box's lines in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from entrypoint.core.numbers import whole_number

TITLE = "taco-train — optimization summary"
_TITLE = re.compile(r"taco-train\s*(?:—|–|-{1,2})\s*optimi[sz]ation\s+summary", re.IGNORECASE)
_TAIL = re.compile(r"^[\s│┃║|]*$")  # nothing but a right border after the title: a mention in prose is no box
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BORDERS = "│┃║|"
_RULE = re.compile(r"^[\s─━═\-=+*~┌┐└┘├┤┬┴┼╭╮╯╰╔╗╚╝╠╣╟╢╞╡]+$")
_BOTTOM = re.compile(r"[└┘╰╯╚╝]")
_FEATURE = re.compile(
    r"^(?P<name>[A-Za-z][\w.-]*)\s*(?:[:│┃║|]\s*|\s+)(?P<status>\S.*?)\s*$"
)  # name, a column rule or space, status
_MAX_LINES = 200  # a box longer than this is not a summary box


@dataclass
class _Box:
    """A box being read: the prefix its title line had, whether it is bordered, and the features so far."""

    prefix: str
    bordered: bool
    features: dict[str, str] = field(default_factory=dict)
    lines: int = 0


class SummaryReader:
    """Feed output chunks; `summary` is the last complete box's {feature: status}, or None."""

    def __init__(self) -> None:
        self.summary: dict[str, str] | None = None
        self._box: _Box | None = None
        self._pending = ""

    def feed(self, chunk: str) -> None:
        """Consume output; complete lines (ended by \\n or \\r) are read, the rest waits for more."""
        text = (self._pending + chunk).replace("\r", "\n")
        *lines, self._pending = text.split("\n")
        for line in lines:
            self._line(_ANSI.sub("", line))

    def close(self) -> dict[str, str] | None:
        """End of output: a box still open (no bottom border came) counts if it has features."""
        if self._pending:
            self._line(_ANSI.sub("", self._pending))
            self._pending = ""
        self._finish()
        return self.summary

    def _finish(self) -> None:
        if self._box is not None and self._box.features:
            self.summary = dict(self._box.features)
        self._box = None

    def _line(self, line: str) -> None:
        title = _TITLE.search(line)
        if title and _TAIL.match(line[title.end() :]):
            self._finish()
            head = line[: title.start()]
            border = max(head.rfind(c) for c in _BORDERS)
            self._box = _Box(prefix=(head[:border] if border >= 0 else head).strip(), bordered=border >= 0)
            return
        box = self._box
        if box is None:
            return
        box.lines += 1
        if box.lines > _MAX_LINES:
            self._finish()  # never closed: keep what it had
            return
        stripped = line.strip()
        if box.prefix:
            if not stripped.startswith(box.prefix):
                return  # another process's line, interleaved
            stripped = stripped[len(box.prefix) :].strip()
        first = min((i for i in (stripped.find(c) for c in _BORDERS) if i >= 0), default=-1)
        if first >= 0:
            box.bordered = True
            last = max(stripped.rfind(c) for c in _BORDERS)
            content = stripped[first + 1 : last if last > first else None].strip()
        elif _RULE.match(stripped):
            if box.features or _BOTTOM.search(stripped):
                self._finish()
            return
        elif box.bordered:
            return  # unbordered text between bordered rows: interleaved output
        else:
            content = stripped
        if not content:
            if not box.bordered and box.features:
                self._finish()
            return
        match = _FEATURE.match(content)
        if match is None or match["status"].lower() == "status":
            if not box.bordered and box.features:
                self._finish()
            return
        box.features[match["name"]] = match["status"]


def parse_summary(text: str) -> dict[str, str] | None:
    """{feature: status} from the last summary box in `text`, or None when there is none."""
    reader = SummaryReader()
    reader.feed(text)
    return reader.close()


def applied_count(status: str) -> int | None:
    """N for `applied ×N` (or `applied xN`, `applied` alone = 1); None when the status is not `applied` or N is
    no plausible count (past int64)."""
    match = re.match(r"\s*applied\b(?:\s*[×x*]\s*(\d+))?", status, re.IGNORECASE)
    if match is None:
        return None
    return whole_number(match[1]) if match[1] else 1
