"""Bring the files the trainer will read into this node's page cache while the trainer imports and builds its model.

openpi's trainer reads the base weights (`<weights>/model.safetensors`, 7.47 GB for pi05) and, on a resume, the
checkpoint it resumes from (~21 GB) only after its imports and model build, more than a minute after it starts; on a
cold page cache every byte then comes from CFS while the GPUs wait, and every node pays it. The plan knows which
files these are, so one reader per node reads them, in the order the trainer will, from the moment torchrun
starts; the node's ranks then find them in memory. On an in-job restart it reads the newest complete checkpoint,
which the restarted trainer resumes from.

Bounds: never more than half of the memory the kernel says is available (`MemAvailable`, read when the reader
starts), a file larger than what is left read only up to it; files on the plan only, each a regular file when
planned. The reader is a child process (`python -m entrypoint.launch.prefetch`, niced), not a thread: a read that
waits on a CFS that stopped answering cannot be interrupted, and a child is simply left to its fate and killed,
while the launcher goes on. It reports one JSON line per file; the launcher prints one line when it is done and
keeps the figures for the start-up record.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from entrypoint.core.host import Host
from entrypoint.core.messages import Catalogue, Lang
from entrypoint.core.numbers import human_bytes
from entrypoint.inspect.prefetch import Prefetch, memory_budget
from entrypoint.launch.messages import line

CHUNK = 8 << 20  # bytes per read: large enough for CFS's sequential throughput, small enough to stop promptly

M = Catalogue(
    "prefetch",
    {
        "started": (
            "reading {count} file(s), {size}, into this node's page cache while the trainer starts ({what})",
            "训练进程启动期间,把 {count} 个文件({size})读入本节点的页缓存({what})",
        ),
        "done": (
            "page cache: {size} read in {seconds:.1f} s ({rate}/s) while the trainer started",
            "页缓存:训练进程启动期间 {seconds:.1f} 秒读入 {size}({rate}/s)",
        ),
        "capped": (
            "page cache: {size} of {planned} read, capped at half of the memory available ({budget})",
            "页缓存:已读入 {size}(计划 {planned}),上限为可用内存的一半({budget})",
        ),
        "failed": (
            "page cache: {path} could not be read ahead ({error}); the trainer reads it itself",
            "页缓存:无法预读 {path}({error});训练进程将自行读取",
        ),
    },
)


@dataclass
class Outcome:
    """What the reader did: bytes read per file, the time, and why it stopped early (if it did)."""

    budget: int | None
    started: float = field(default_factory=time.monotonic)
    files: list[dict[str, object]] = field(default_factory=list)
    seconds: float | None = None
    capped: bool = False
    stopped: str | None = None  # "ended": the run ended first

    @property
    def bytes(self) -> int:
        return sum(int(str(f.get("bytes", 0))) for f in self.files)

    def to_json(self) -> dict[str, object]:
        return {
            "budget_bytes": self.budget,
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3) if self.seconds is not None else None,
            "capped": self.capped,
            "stopped": self.stopped,
        }


class Reader:
    """One read-ahead at a time on this node: `start(prefetch)` begins one (ending any still running), `stop()` ends
    it. A thread reads the child's JSON lines and prints the outcome line. `follow_restarts` starts another on each
    in-job restart; `close()` ends all."""

    def __init__(self, host: Host, out: TextIO, lang: Lang, python: str = sys.executable) -> None:
        self._host, self._out, self._lang, self._python = host, out, lang, python
        self._child: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()  # start and stop come from the launcher's thread and the restart watch
        self.outcomes: list[Outcome] = []

    def follow_restarts(
        self, attempts: Callable[[], int], replan: Callable[[], Prefetch | None], poll_s: float = 1.0
    ) -> None:
        """Each time `attempts()` (the workers' attempts seen so far) grows past 1, read `replan()`'s files: the
        restarted trainer resumes from the newest complete checkpoint, which this node may never have read."""

        def watch() -> None:
            seen = max(attempts(), 1)
            while not self._closed.wait(poll_s):
                now = attempts()
                if now > seen:
                    seen = now
                    prefetch = replan()
                    if prefetch is not None:
                        self.start(prefetch)

        threading.Thread(target=watch, name="prefetch-restarts", daemon=True).start()

    def close(self) -> None:
        """End the read-ahead and the restart watch."""
        self._closed.set()
        self.stop()

    def start(self, prefetch: Prefetch) -> None:
        with self._lock:
            if not self._closed.is_set():
                self._stop()
                self._start(prefetch)

    def _start(self, prefetch: Prefetch) -> None:
        outcome = Outcome(memory_budget(self._host))
        self.outcomes.append(outcome)
        size = human_bytes(prefetch.bytes)
        line(self._out, self._lang, M("started", count=len(prefetch.files), size=size, what=prefetch.what()))
        spec = {"files": [[str(p), n] for p, n in prefetch.files], "budget": outcome.budget}
        try:
            self._child = subprocess.Popen(
                [self._python, "-m", "entrypoint.launch.prefetch", json.dumps(spec)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                close_fds=True,
                start_new_session=True,  # a signal to the launcher's group is the launcher's to pass on, not ours
            )
        except OSError as error:
            outcome.stopped = f"not started: {error.strerror or error}"
            return
        child = self._child
        self._thread = threading.Thread(target=self._follow, args=(child, outcome, prefetch), daemon=True)
        self._thread.start()

    def _follow(self, child: subprocess.Popen[str], outcome: Outcome, prefetch: Prefetch) -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            with contextlib.suppress(ValueError):
                report = json.loads(raw)
                if not isinstance(report, dict):
                    continue
                if "error" in report:
                    line(self._out, self._lang, M("failed", path=report.get("path"), error=report["error"]))
                if "path" in report:
                    outcome.files.append(report)
                if report.get("done"):
                    outcome.seconds = time.monotonic() - outcome.started
                    outcome.capped = bool(report.get("capped"))
                    self._say_done(outcome, prefetch)

    def _say_done(self, outcome: Outcome, prefetch: Prefetch) -> None:
        read, seconds = outcome.bytes, outcome.seconds or 0.0
        if outcome.capped:
            budget = human_bytes(outcome.budget or 0)
            text = M("capped", size=human_bytes(read), planned=human_bytes(prefetch.bytes), budget=budget)
        else:
            rate = human_bytes(int(read / seconds)) if seconds > 0 else "?"
            text = M("done", size=human_bytes(read), seconds=seconds, rate=rate)
        line(self._out, self._lang, text)

    def stop(self) -> None:
        """End a read-ahead still running (never waits on the storage: the child is killed, not joined)."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            with contextlib.suppress(OSError):
                child.kill()
            if self.outcomes and self.outcomes[-1].seconds is None:
                self.outcomes[-1].stopped = "ended"
        if self._thread is not None:
            self._thread.join(timeout=1)  # its pipe closes when the child dies; a child stuck in the kernel is left

    def to_json(self) -> list[dict[str, object]]:
        return [outcome.to_json() for outcome in self.outcomes]


def read_ahead(files: Sequence[tuple[str, int]], budget: int | None, emit: Callable[[dict[str, object]], None]) -> None:
    """The child's work: read each file once, sequentially, up to its planned size and within `budget` bytes in all,
    into one reused buffer (the page cache keeps the pages; nothing is kept here)."""
    left = budget if budget is not None else sum(size for _, size in files)
    buffer = memoryview(bytearray(CHUNK))
    capped = False
    for path, planned in files:
        if left <= 0:
            capped = True
            break
        start, done = time.monotonic(), 0
        want = min(planned, left)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put there since the plan: no wait
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file")
                with contextlib.suppress(OSError, AttributeError):
                    os.posix_fadvise(fd, 0, want, os.POSIX_FADV_SEQUENTIAL)
                while done < want:
                    got = os.readv(fd, [buffer[: min(CHUNK, want - done)]])
                    if got <= 0:
                        break
                    done += got
            finally:
                os.close(fd)
        except OSError as error:
            emit({"path": path, "bytes": done, "error": error.strerror or str(error)})
            continue
        left -= done
        capped = capped or want < planned
        emit({"path": path, "bytes": done, "seconds": round(time.monotonic() - start, 3)})
    emit({"done": True, "capped": capped})


def main(argv: Sequence[str]) -> int:
    spec = json.loads(argv[0])
    with contextlib.suppress(OSError):
        os.nice(10)

    def emit(report: dict[str, object]) -> None:
        print(json.dumps(report), flush=True)

    read_ahead([(str(p), int(n)) for p, n in spec["files"]], spec.get("budget"), emit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
