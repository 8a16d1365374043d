"""What `fetch-assets` prints while it runs: messages, and per-file and overall progress (bytes, rate, ETA).

On a terminal the progress line is redrawn in place (with a bar); otherwise a line is written every `every_s`
seconds. Messages go through the same object so they never garble the line. A progress line is one line, so with
both languages wanted it is shown in English (its words are few: of, ETA, all); messages follow the language.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO, cast

from entrypoint.core.messages import Lang, Text, render
from entrypoint.core.numbers import human_bytes
from entrypoint.fetch.messages import MESSAGES as M

_BAR = 20  # characters of the terminal bar
_WIDTH = 200  # a redrawn line is cut here so that it never wraps on a usual terminal


@dataclass
class _File:
    """The file being fetched: `done` bytes of `size`, `session` of them in this run, since `started`."""

    label: str
    size: int | None
    done: int
    started: float
    session: int = 0


class Progress:
    """Per-file and overall progress of one run, and its messages, written to `out` in `lang`."""

    def __init__(
        self,
        out: TextIO,
        lang: Lang,
        *,
        tty: bool,
        every_s: float,
        total: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out, self.lang, self.tty, self.every_s, self.clock = out, lang, tty, every_s, clock
        self.line_lang = Lang.EN if lang is Lang.BOTH else lang
        self.total = total
        self.lock = threading.RLock()
        self.done = 0
        self.session = 0
        self.started = clock()
        self.last = 0.0
        self.shown = False
        self.file: _File | None = None

    def expect(self, total: int | None) -> None:
        """The bytes all files together will bring (None: unknown); the overall ETA needs it."""
        with self.lock:
            self.total = total
            self.started = self.clock()

    def begin(self, label: str, size: int | None, already: int) -> None:
        """A new file of `size` bytes, of which `already` were fetched by an earlier run."""
        with self.lock:
            self.done += already
            self.file = _File(label, size, already, self.clock())
            self.last = 0.0

    def add(self, count: int) -> None:
        """`count` more bytes arrived; shows the line when it is due, and when these bytes complete the file."""
        with self.lock:
            self.done += count
            self.session += count
            file, completed = self.file, False
            if file is not None:
                file.done += count
                file.session += count
                completed = file.size is not None and file.done - count < file.size <= file.done
            now = self.clock()
            if completed or now - self.last >= self.every_s:
                self.last = now
                self._show(now)

    def _show(self, now: float) -> None:
        file = self.file
        if file is None:
            return
        parts = [file.label, self._amount(file.done, file.size)]
        if self.tty and file.size:
            filled = int(_BAR * min(1.0, file.done / file.size))
            parts.append("[" + "#" * filled + "-" * (_BAR - filled) + "]")
        rate = file.session / max(now - file.started, 1e-6)
        parts.append(f"{human_bytes(rate)}/s")
        if file.size and rate > 0:
            parts.append(self._eta(max(0, file.size - file.done) / rate))
        overall = [render(M("progress-overall", amount=self._amount(self.done, self.total)), self.line_lang)]
        total_rate = self.session / max(now - self.started, 1e-6)
        if self.total and total_rate > 0:
            overall.append(self._eta(max(0, self.total - self.done) / total_rate))
        line = "  ".join(parts) + "  " + " ".join(overall)
        if self.tty:
            self.out.write("\r" + line[:_WIDTH] + "\033[K")
        else:
            self.out.write(line + "\n")
        self.out.flush()
        self.shown = self.tty

    def _amount(self, done: int, total: int | None) -> str:
        if not total:
            return human_bytes(done)
        text = M("progress-amount", done=human_bytes(done), total=human_bytes(total), percent=100 * done // total)
        return render(text, self.line_lang)

    def _eta(self, seconds: float) -> str:
        return render(M("progress-eta", left=duration(seconds)), self.line_lang)

    def log(self, line: str) -> None:
        """A line of its own, clearing a progress line drawn in place first."""
        with self.lock:
            if self.shown:
                self.out.write("\r\033[K")
                self.shown = False
            self.out.write(line + "\n")
            self.out.flush()

    def say(self, text: Text) -> None:
        """A message in the run's language(s)."""
        self.log(render(text, self.lang))

    def writer(self, prefix: str) -> TextIO:
        """A text stream for `OrderedStream`'s retry notices: each line logged as `  <prefix>: <line>`."""
        return cast("TextIO", _LineWriter(lambda line: self.log(f"  {prefix}: {line}")))  # it uses write and flush


class _LineWriter:
    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit, self.buffer = emit, ""

    def write(self, text: str) -> int:
        self.buffer += text
        while "\n" in self.buffer:
            line, self.buffer = self.buffer.split("\n", 1)
            self.emit(line.removeprefix("download "))
        return len(text)

    def flush(self) -> None:
        pass


def duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`."""
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
