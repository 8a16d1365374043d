"""Live metrics in TensorBoard's format: this node's event files, written by one background thread.

Fed the training output as it arrives (`feed`, called by the supervisor's relay thread): each progress line
(`steps.parse_step`) becomes scalars under `train/` at its step — every value the line carries (loss, lr,
grad_norm, ...), plus `train/step_time_s` and `train/samples_per_s` (the global batch over the seconds per step);
each `Saved checkpoint` line an `events/checkpoint` scalar and text. Every `interval_s` seconds each GPU's NVML
sample goes under `gpu<i>/` (step: seconds since the launcher started the writer). A new attempt of the worker
group (`attempts`, polled) writes `events/restart`; `close` writes `events/exit_code`.

The relay thread only parses and enqueues (never blocks: a full queue drops the line and counts it), so a slow or
hung shared file system can delay the event files but never training or its log. The files are written with
tensorboardX's own event writer (`EventsWriter`: records with their CRCs); anything that fails there is said once
and the writer stops, training goes on. Only openpi's global rank 0 prints progress, so only node 0's files have
`train/` scalars; every node has its GPUs'. Text written to the files is masked like every other output.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.core.masking import mask_text
from entrypoint.core.messages import Text
from entrypoint.inspect.openpi import SAVED_LINE
from entrypoint.report.gpus import Nvml, open_nvml
from entrypoint.report.messages import MESSAGES as M
from entrypoint.report.steps import StepLine, parse_step, seconds_per_step

QUEUE_SIZE = 4096  # progress lines waiting for the writer; more are dropped (and counted)
LINE_LIMIT = 65536  # characters of one output line looked at; a longer line is no progress line
POLL_S = 1.0  # how often the writer looks for a new attempt when nothing else wakes it
FLUSH_S = 5.0  # event files are flushed (and fsync-ed) at most this often, and at the end
CLOSE_WAIT_S = 5.0  # `close` waits this long for the last events to be written


@dataclass(frozen=True)
class _Step:
    line: StepLine
    at: float  # wall-clock time the line arrived


@dataclass(frozen=True)
class _Saved:
    step: int
    path: str
    at: float


@dataclass(frozen=True)
class _End:
    code: int
    outcome: str
    at: float


class EventFile:
    """One TensorBoard event file in `folder`, written through tensorboardX's `EventsWriter`."""

    def __init__(self, folder: Path) -> None:
        from tensorboardX import summary
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event

        folder.mkdir(parents=True, exist_ok=True)
        self._summary, self._event = summary, Event
        self._writer = EventsWriter(str(folder / "events"))

    def scalar(self, tag: str, value: float, step: int, at: float) -> None:
        self._writer.write_event(self._event(wall_time=at, step=step, summary=self._summary.scalar(tag, value)))

    def text(self, tag: str, text: str, step: int, at: float) -> None:
        summary = self._summary.text(tag, mask_text(text))
        self._writer.write_event(self._event(wall_time=at, step=step, summary=summary))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class Metrics:
    """This node's event files (`folder`; None: none) and GPU samples every `interval_s` seconds (0: none).
    `say` prints a launcher line; `attempts` lists (attempt number, why the attempt ended or None) so far."""

    def __init__(
        self,
        folder: Path | None,
        *,
        batch_size: int,
        interval_s: float,
        say: Callable[[Text], None],
        attempts: Callable[[], Sequence[tuple[int, str | None]]] | None = None,
        nvml: Callable[[], Nvml | Text] = open_nvml,
        sink: Callable[[Path], Any] = EventFile,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder, self.batch_size, self.interval_s = folder, batch_size, interval_s
        self.say, self.attempts, self._nvml, self._sink, self.clock = say, attempts, nvml, sink, clock
        self.queue: queue.Queue[_Step | _Saved | _End] = queue.Queue(QUEUE_SIZE)
        self.dropped = 0
        self.written = 0  # events written so far
        self._pending = ""
        self._thread: threading.Thread | None = None
        self._ending: _End | None = None
        self._file: Any = None
        self._previous: StepLine | None = None
        self._last_step = 0
        self._attempts_seen = 1
        self._flushed_at = 0.0
        self._dirty = False

    # ---- the relay thread's side: parse and enqueue, never block ----

    def feed(self, chunk: str) -> None:
        """Training output as it arrives (complete lines are looked at; tqdm's carriage returns end a line)."""
        if self._thread is None:
            return
        text = (self._pending + chunk).replace("\r", "\n")
        *lines, pending = text.split("\n")
        self._pending = pending if len(pending) <= LINE_LIMIT else ""
        now = self.clock()
        for line in lines:
            if len(line) > LINE_LIMIT:
                continue
            if "step=" in line:
                parsed = parse_step(line)
                if parsed is not None:
                    self._offer(_Step(parsed, now))
            elif "Saved checkpoint" in line:
                saved = SAVED_LINE.search(line)
                if saved is not None:
                    self._offer(_Saved(int(saved["step"]), saved["path"], now))

    def _offer(self, item: _Step | _Saved) -> None:
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    # ---- the launcher's side ----

    def start(self) -> None:
        """Start the writer thread (nothing to do without a folder and without GPU samples)."""
        if self.folder is None:
            return
        self._thread = threading.Thread(target=self._run, name="metrics", daemon=True)
        self._thread.start()

    def close(self, code: int, outcome: str, wait_s: float = CLOSE_WAIT_S) -> None:
        """Write the end (exit code and outcome), flush, close; bounded by `wait_s` seconds."""
        thread = self._thread
        if thread is None:
            return
        self._ending = _End(code, outcome, self.clock())  # read by the writer once its queue is empty
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(self._ending)  # wakes it at once when there is room
        thread.join(wait_s)
        if thread.is_alive():
            self.say(M("events-slow", folder=str(self.folder), seconds=f"{wait_s:.0f}"))
        elif self.dropped:
            self.say(M("events-dropped", count=self.dropped, folder=str(self.folder)))

    # ---- the writer thread ----

    def _run(self) -> None:
        assert self.folder is not None
        try:
            self._file = self._sink(self.folder)
        except Exception as error:  # no tensorboardX, an unwritable or vanished folder, a full disk
            self.say(M("events-not-written", folder=str(self.folder), error=_reason(error)))
            self._file = None
        nvml = self._open_gpus()
        started = self.clock()
        next_sample = started
        try:
            while True:
                now = self.clock()
                wait = min(POLL_S, max(0.0, next_sample - now)) if nvml is not None else POLL_S
                item: _Step | _Saved | _End | None
                try:
                    item = self.queue.get(timeout=wait)
                except queue.Empty:
                    item = self._ending  # closing, and everything queued before is written
                if isinstance(item, _End):
                    self._restarts()
                    self._end(item)
                    return
                if item is not None:
                    self._item(item)
                self._restarts()
                now = self.clock()
                if nvml is not None and now >= next_sample:
                    self._gpus(nvml, int(now - started), now)
                    next_sample = max(next_sample + self.interval_s, now + self.interval_s / 2)
                self._maybe_flush(now)
        finally:
            if nvml is not None:
                nvml.close()
            self._close_file()

    def _open_gpus(self) -> Nvml | None:
        if self.interval_s <= 0 or self._file is None:
            return None
        found = self._nvml()
        if isinstance(found, Nvml):
            return found
        self.say(M("gpu-samples-none", reason=found))
        return None

    def _scalar(self, tag: str, value: float, step: int, at: float) -> None:
        if self._file is not None:
            self._attempt(lambda: self._file.scalar(tag, value, step, at))

    def _text(self, tag: str, text: Text, step: int, at: float) -> None:
        if self._file is not None:
            self._attempt(lambda: self._file.text(tag, _both(text), step, at))

    def _attempt(self, write: Callable[[], None]) -> None:
        """One write to the event file; the first failure is said and ends the writing (never training)."""
        try:
            write()
            self.written += 1
            self._dirty = True
        except Exception as error:
            self.say(M("events-stopped", folder=str(self.folder), error=_reason(error)))
            self._close_file()

    def _item(self, item: _Step | _Saved) -> None:
        if isinstance(item, _Saved):
            self._last_step = max(self._last_step, item.step)
            self._scalar("events/checkpoint", float(item.step), item.step, item.at)
            self._text("events", M("event-checkpoint", step=item.step, path=item.path), item.step, item.at)
            return
        line = item.line
        previous = self._previous if self._previous is not None and line.step > self._previous.step else None
        self._previous, self._last_step = line, line.step
        for name, value in line.values.items():
            self._scalar("train/interval_s" if name == "time" else f"train/{name}", value, line.step, item.at)
        step_time = seconds_per_step(line, previous)
        if step_time is not None and step_time > 0:
            self._scalar("train/step_time_s", step_time, line.step, item.at)
            self._scalar("train/samples_per_s", self.batch_size / step_time, line.step, item.at)

    def _restarts(self) -> None:
        """A new attempt of the worker group since the last look: an `events/restart` at the last step seen."""
        if self.attempts is None:
            return
        seen = list(self.attempts())
        while self._attempts_seen < len(seen):
            number = seen[self._attempts_seen][0]
            cause = seen[self._attempts_seen - 1][1] or "?"
            at = self.clock()
            self._previous = None  # the new attempt's first line includes its start-up: no step time
            self._scalar("events/restart", float(number), self._last_step, at)
            self._text("events", M("event-restart", n=number, before=number - 1, cause=cause), self._last_step, at)
            self._attempts_seen += 1

    def _gpus(self, nvml: Nvml, elapsed: int, at: float) -> None:
        for sample in nvml.sample():
            for name, value in sample.values.items():
                self._scalar(f"gpu{sample.index}/{name}", value, elapsed, at)

    def _end(self, end: _End) -> None:
        self._scalar("events/exit_code", float(end.code), self._last_step, end.at)
        self._text("events", M("event-end", code=end.code, outcome=end.outcome), self._last_step, end.at)

    def _maybe_flush(self, now: float) -> None:
        if self._file is None or not self._dirty or now - self._flushed_at < FLUSH_S:
            return
        self._flushed_at, self._dirty = now, False
        try:
            self._file.flush()
        except Exception as error:
            self.say(M("events-stopped", folder=str(self.folder), error=_reason(error)))
            self._close_file()

    def _close_file(self) -> None:
        if self._file is None:
            return
        file, self._file = self._file, None
        with contextlib.suppress(Exception):
            file.close()  # flushes


def _both(text: Text) -> str:
    """An event's text in both languages (TensorBoard shows it as it is)."""
    return f"{text.en}\n\n{text.zh}"


def _reason(error: BaseException) -> str:
    return mask_text(getattr(error, "strerror", None) or str(error) or type(error).__name__)[:300]
