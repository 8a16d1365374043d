"""A node log read within bounds: its progress lines, saves, restarts and last lines, whatever its size or content.

A log up to `FULL_LIMIT` bytes is read whole, a megabyte at a time. A larger one (a long run, or garbage someone
wrote there) is read in bounded windows: its head, its tail and `WINDOWS` windows spread evenly between them, so a
1 GiB log costs about `FULL_LIMIT` bytes of reading and the loss curve still spans the whole run, with gaps
(`sampled` says so). Bytes that are not UTF-8 are replaced (`not_utf8`), NUL bytes noted (`binary`); a line is
looked at only around a keyword, so a log without newlines costs no more than one with them. At most
`MAX_POINTS` progress lines are kept: beyond that every second one is dropped, keeping an even spread. The file is
opened the way `core.files` opens what others made: a FIFO or folder in its place is refused, never read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.files import Opened
from entrypoint.core.masking import mask_text
from entrypoint.inspect.openpi import SAVED_LINE
from entrypoint.report.steps import StepLine, parse_step, seconds_per_step

FULL_LIMIT = 16 << 20
HEAD = 2 << 20
TAIL = 8 << 20
WINDOW = 256 << 10
WINDOWS = 24
CHUNK = 1 << 20
LAST_BYTES = 64 << 10
LAST_LINES = 20
LINE_SHOWN = 300  # characters of a log line kept for the report
MAX_POINTS = 20000
MAX_SAVES = 1000
MAX_RESTARTS = 200
_KEYWORD = re.compile(r"\bstep=\d|Saved checkpoint at step|RESTART \d|重启 \d")
_RESTART = re.compile(r"(?:RESTART|重启) (?P<n>\d{1,6})/")


@dataclass(frozen=True)
class StepPoint:
    """One progress line: its step, loss, seconds per step since the line before (None for an attempt's first line
    or when unknown) and the attempt it belongs to (restart lines seen before it)."""

    step: int
    loss: float | None
    step_time: float | None
    attempt: int


@dataclass
class LogScan:
    size: int
    read: int = 0  # bytes read
    sampled: bool = False  # only windows of the log were read
    points: list[StepPoint] = field(default_factory=list)
    thinned: int = 1  # every `thinned`-th progress line is kept (1: all of them)
    progress_lines: int = 0  # progress lines found in what was read
    saves: list[tuple[int, str]] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)
    last_lines: list[str] = field(default_factory=list)
    not_utf8: bool = False
    binary: bool = False


def _segments(size: int) -> list[tuple[int, int]]:
    """(offset, length) of each range read: the whole log, or its head, evenly spread windows and its tail."""
    if size <= FULL_LIMIT:
        return [(0, size)]
    middle_start, middle_end = HEAD, size - TAIL
    spacing = (middle_end - middle_start) / WINDOWS
    windows = [(int(middle_start + spacing * i + (spacing - WINDOW) / 2), WINDOW) for i in range(WINDOWS)]
    return [(0, HEAD), *windows, (size - TAIL, TAIL)]


def _lines_of(opened: Opened, offset: int, length: int, scan: LogScan) -> Iterator[str]:
    """The complete lines of one range, decoded: a range that starts inside the file drops its first (partial) line,
    one that ends before the file's end its last."""
    end = offset + length
    carry = b""
    first = offset > 0
    position = offset
    while position < end:
        data = opened.read(position, min(CHUNK, end - position))
        if not data:
            break
        position += len(data)
        scan.read += len(data)
        block = carry + data
        cut = max(block.rfind(b"\n"), block.rfind(b"\r"))
        if cut < 0:
            carry = block if len(block) <= CHUNK else b""  # a line longer than a chunk is never a progress line
            continue
        carry = block[cut + 1 :]
        text = _decode(block[: cut + 1], scan)
        if first:
            first = False
            newline = min((i for i in (text.find("\n"), text.find("\r")) if i >= 0), default=-1)
            text = text[newline + 1 :]
        yield text
    if carry and position >= opened.size and not first:
        yield _decode(carry, scan)


def _decode(data: bytes, scan: LogScan) -> str:
    text = data.decode("utf-8", "replace")
    if "\ufffd" in text:
        scan.not_utf8 = True
    if "\x00" in text:
        scan.binary = True
    return text


def scan_log(path: Path) -> LogScan:
    """Read the log at `path` within bounds. Raises `core.files.FileRefused` when it is no readable regular file."""
    with Opened(path) as opened:
        scan = LogScan(opened.size)
        segments = _segments(opened.size)
        scan.sampled = len(segments) > 1
        attempt = 0
        last: StepPoint | None = None
        for offset, length in segments:
            previous: StepLine | None = None  # continuity is lost between windows
            for text in _lines_of(opened, offset, length, scan):
                for line in _interesting(text):
                    restart = _RESTART.search(line)
                    if restart is not None and "step=" not in line:
                        attempt = max(attempt, int(restart["n"]))
                        previous = None
                        if len(scan.restarts) < MAX_RESTARTS:
                            scan.restarts.append(_shown(line))
                        continue
                    saved = SAVED_LINE.search(line)
                    if saved is not None:
                        if len(scan.saves) < MAX_SAVES:
                            scan.saves.append((int(saved["step"]), mask_text(saved["path"][:LINE_SHOWN])))
                        continue
                    parsed = parse_step(line)
                    if parsed is None:
                        continue
                    before = previous if previous is not None and parsed.step > previous.step else None
                    previous = parsed
                    last = StepPoint(parsed.step, parsed.loss, seconds_per_step(parsed, before), attempt)
                    _keep(scan, last)
        if last is not None and (not scan.points or scan.points[-1] is not last):
            scan.points.append(last)  # the curve always ends where the log does
        scan.last_lines = _last_lines(opened, scan)
    return scan


def _interesting(text: str) -> Iterator[str]:
    """Each line of `text` holding a keyword, once, in order."""
    end = -1
    for match in _KEYWORD.finditer(text):
        if match.start() < end:
            continue
        start = max(text.rfind("\n", 0, match.start()), text.rfind("\r", 0, match.start())) + 1
        ends = [i for i in (text.find("\n", match.end()), text.find("\r", match.end())) if i >= 0]
        end = min(ends) if ends else len(text)
        yield text[start:end]


def _keep(scan: LogScan, point: StepPoint) -> None:
    """Keep every `thinned`-th point; past `MAX_POINTS`, drop every second one kept and double the stride."""
    scan.progress_lines += 1
    if (scan.progress_lines - 1) % scan.thinned:
        return
    scan.points.append(point)
    if len(scan.points) >= MAX_POINTS:
        scan.points = scan.points[::2]
        scan.thinned *= 2


def _last_lines(opened: Opened, scan: LogScan) -> list[str]:
    """The log's last non-empty lines, masked and cut to `LINE_SHOWN` characters."""
    start = max(0, opened.size - LAST_BYTES)
    data = opened.read(start, LAST_BYTES)
    scan.read += len(data)
    text = _decode(data, scan).replace("\r", "\n")
    lines = [line for line in text.split("\n")[1 if start else 0 :] if line.strip()]
    return [_shown(line) for line in lines[-LAST_LINES:]]


def _shown(line: str) -> str:
    """A log line as the report shows it: masked, control characters but tabs dropped, at most `LINE_SHOWN` long."""
    cleaned = "".join(c for c in line[: LINE_SHOWN * 2] if c >= " " or c == "\t")
    return mask_text(cleaned)[:LINE_SHOWN]
