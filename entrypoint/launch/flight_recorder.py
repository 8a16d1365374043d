"""PyTorch's flight recorder after a stall: ask each local rank for a dump, read the dumps safely, run torch's own
analyser on them, and say which rank fell behind.

The plan sets the recorder's variables (`inspect/environment.py`): dumps go to `<node log>.fr/rank_<global
rank>`, and an NCCL rank dumps when a byte reaches its pipe `<pipe prefix><rank>.pipe` (torch's NCCL monitor
thread polls it: the dump lands within seconds, ~6 s measured on torch 2.11). Gloo ranks have no pipe and no dump
on timeout, so a gloo job falls back to stacks. A dump is a pickle of plain values: it is read with an unpickler
that refuses every global, from a regular file of bounded size. The analyser
(`python -m torch.distributed.flight_recorder.fr_trace <folder> -p rank_`) runs in the trainer's Python, in a
session of its own, killed after `ANALYSER_TIMEOUT_S`; torch 2.6 has no such module ("no recorder here").
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from entrypoint.inspect.environment import FR_DUMP_NAMES, FR_DUMP_PREFIX, FR_PIPE_NAMES

ANALYSER_MODULE = "torch.distributed.flight_recorder.fr_trace"
ANALYSER_TIMEOUT_S = 60
ANALYSER_OUTPUT_LIMIT = 1 << 20  # bytes of the analyser's output kept
DUMP_LIMIT = 256 << 20  # a 20000-entry dump with stacks stays well below this
DUMP_WAIT_S = 20.0
SHEBANG_LIMIT = 256
DEFAULT_GROUP = "0"  # the default process group's name in a dump


def locations(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(dump prefix, pipe prefix) the workers were given, whoever chose them."""
    dump = next((env[n] for n in FR_DUMP_NAMES if env.get(n)), None)
    pipe = next((env[n] for n in FR_PIPE_NAMES if env.get(n)), None)
    return dump, pipe


def prepare(env: Mapping[str, str]) -> OSError | None:
    """Create the dump folder before torchrun starts (torch writes no folder itself); the error when it cannot."""
    dump, _ = locations(env)
    if dump is None:
        return None
    try:
        Path(dump).parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return error
    return None


def request_dumps(pipe_prefix: str, ranks: Iterable[int]) -> list[int]:
    """Write one byte to each rank's dump pipe; the ranks asked. A path that is not a FIFO, or a FIFO nobody reads
    (a gloo rank, a rank already gone), is skipped without blocking."""
    asked = []
    for rank in ranks:
        path = f"{pipe_prefix}{rank}.pipe"
        try:
            if not stat.S_ISFIFO(os.stat(path).st_mode):
                continue
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, b"1")
            asked.append(rank)
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked


def wait_for_dumps(
    dump_prefix: str,
    ranks: Iterable[int],
    since: float,
    timeout: float = DUMP_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> list[int]:
    """The ranks whose dump `<prefix><rank>` was written at or after `since` (epoch seconds), waiting up to
    `timeout` for all of them."""
    wanted = sorted(set(ranks))
    deadline = clock() + timeout
    while True:
        fresh = [r for r in wanted if _fresh(Path(f"{dump_prefix}{r}"), since)]
        if len(fresh) == len(wanted) or clock() >= deadline:
            return fresh
        pause(0.5)


def _fresh(path: Path, since: float) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_mtime >= since and info.st_size > 0


class _PlainValues(pickle.Unpickler):
    """Plain containers and scalars only: a dump naming any class or function is refused."""

    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def read_bounded(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes when it holds at most `limit`; None otherwise (FIFOs and folders never block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


@dataclass(frozen=True)
class RankTrace:
    """One rank's dump, summed up for the default process group."""

    rank: int
    entered: int | None  # collective sequence number of the latest collective this rank entered
    entered_name: str | None
    completed: int | None  # the latest one it completed (None when the dump records no completion)
    completed_name: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "last_entered": {"seq": self.entered, "op": self.entered_name},
            "last_completed": {"seq": self.completed, "op": self.completed_name},
        }


def read_dump(path: Path, rank: int) -> RankTrace | None:
    """The rank's trace from its dump; None when the file is missing, too big, or not a dump."""
    data = read_bounded(path, DUMP_LIMIT)
    if data is None:
        return None
    try:
        dump = _PlainValues(io.BytesIO(data)).load()
    except Exception:  # any malformed pickle (it may raise nearly anything) is "not a dump"
        return None
    entries = dump.get("entries") if isinstance(dump, dict) else None
    if not isinstance(entries, list):
        return None
    entered: tuple[int, str] | None = None
    completed: tuple[int, str] | None = None
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        group, seq, name = entry.get("process_group"), entry.get("collective_seq_id"), entry.get("profiling_name")
        group_name = group[0] if isinstance(group, (list, tuple)) and group else group
        if str(group_name) != DEFAULT_GROUP or not isinstance(seq, int):
            continue
        if entered is None or seq > entered[0]:
            entered = (seq, str(name))
        if entry.get("state") == "completed" and (completed is None or seq > completed[0]):
            completed = (seq, str(name))
    return RankTrace(
        rank,
        entered[0] if entered else None,
        entered[1] if entered else None,
        completed[0] if completed else None,
        completed[1] if completed else None,
    )


def behind(traces: Iterable[RankTrace]) -> list[int]:
    """The ranks that entered fewer collectives than the others (the ones every other rank waits for)."""
    known = [t for t in traces if t.entered is not None]
    if len(known) < 2:
        return []
    front = max(t.entered for t in known if t.entered is not None)
    return sorted(t.rank for t in known if t.entered is not None and t.entered < front)


def lagging(traces: Iterable[RankTrace]) -> dict[int, tuple[int, int, str]]:
    """For `culprit.name_culprit`: each rank behind -> (its last entered collective, the front's, the front's op)."""
    known = [t for t in traces if t.entered is not None]
    late = behind(known)
    if not late:
        return {}
    head = max(known, key=lambda t: t.entered or 0)
    return {t.rank: (t.entered or 0, head.entered or 0, head.entered_name or "?") for t in known if t.rank in late}


class AnalyserStatus(StrEnum):
    OK = "ok"
    ABSENT = "absent"  # this torch has no flight-recorder analyser (torch 2.6)
    FAILED = "failed"  # it ran and exited non-zero (torch 2.11 on gloo dumps: KeyError)
    TIMED_OUT = "timed-out"
    NO_PYTHON = "no-python"


@dataclass(frozen=True)
class AnalyserRun:
    status: AnalyserStatus
    exit_code: int | None
    tail: tuple[str, ...]  # the last lines of its output

    def to_json(self) -> dict[str, object]:
        return {"status": self.status.value, "exit_code": self.exit_code, "output_tail": list(self.tail)}


def training_python(torchrun: str, env: Mapping[str, str]) -> str | None:
    """The Python that runs torchrun (its #! line), else `python3` on the trainer's PATH."""
    head = read_bounded(Path(torchrun), 1 << 20)
    if head is not None and head.startswith(b"#!"):
        words = head[2:SHEBANG_LIMIT].split(b"\n", 1)[0].decode(errors="replace").split()
        if words and "python" in os.path.basename(words[0]) and os.access(words[0], os.X_OK):
            return words[0]
    return shutil.which("python3", path=env.get("PATH"))


def analyse(
    folder: Path, python: str | None, env: Mapping[str, str], timeout: float = ANALYSER_TIMEOUT_S
) -> AnalyserRun:
    """Run torch's analyser on `folder` (files `rank_<r>`), bounded by `timeout`."""
    if python is None:
        return AnalyserRun(AnalyserStatus.NO_PYTHON, None, ())
    argv = [python, "-m", ANALYSER_MODULE, str(folder), "-p", FR_DUMP_PREFIX]
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
        )
    except OSError:
        return AnalyserRun(AnalyserStatus.NO_PYTHON, None, ())
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return AnalyserRun(AnalyserStatus.TIMED_OUT, None, _tail(out))
    tail = _tail(out)
    if proc.returncode == 0:
        return AnalyserRun(AnalyserStatus.OK, 0, tail)
    absent = any("No module named 'torch" in line for line in tail)
    return AnalyserRun(AnalyserStatus.ABSENT if absent else AnalyserStatus.FAILED, proc.returncode, tail)


def _tail(out: bytes, lines: int = 20) -> tuple[str, ...]:
    text = out[-ANALYSER_OUTPUT_LIMIT:].decode("utf-8", "replace")
    return tuple(line[:300] for line in text.splitlines()[-lines:])


def collect(dumps: Mapping[int, Path], into: Path) -> list[int]:
    """Link (or copy, bounded) every rank's dump into one folder as `rank_<r>`, the analyser's layout; the ranks
    gathered."""
    into.mkdir(parents=True, exist_ok=True)
    gathered = []
    for rank, source in sorted(dumps.items()):
        target = into / f"{FR_DUMP_PREFIX}{rank}"
        with contextlib.suppress(OSError):
            target.unlink(missing_ok=True)
        try:
            os.link(source, target)
        except OSError:
            data = read_bounded(source, DUMP_LIMIT)
            if data is None:
                continue
            try:
                target.write_bytes(data)
            except OSError:
                continue
        gathered.append(rank)
    return gathered
