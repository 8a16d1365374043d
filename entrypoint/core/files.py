"""Reading files someone else made without trusting them: never blocking, never unbounded, never changing them.

Before a file is opened it is stat-ed (links followed: Hugging Face caches and hand-staged trees are made of
links) and anything but a regular file is refused unopened: a FIFO would block its reader forever, a device may
act when opened. The open itself is non-blocking (a FIFO swapped in after the stat cannot block either), asks
the kernel not to touch the access time where it allows that, and is checked again with `fstat`; reads are
`pread`s of a bounded number of bytes. A refusal is a `FileRefused` naming its `Problem`; callers put it in
their own words.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_noatime = getattr(os, "O_NOATIME", 0)  # cleared after the first EPERM: only the owner (or root) may ask for it


class Problem(StrEnum):
    """Why a path cannot be read as a regular file."""

    MISSING = "missing"
    DANGLING_LINK = "dangling-link"
    LINK_LOOP = "link-loop"
    FOLDER = "folder"
    FIFO = "fifo"
    DEVICE = "device"
    SOCKET = "socket"
    NAME_TOO_LONG = "name-too-long"
    PERMISSION_DENIED = "permission-denied"
    TOO_BIG = "too-big"
    OS_ERROR = "os-error"


class FileRefused(Exception):
    """`path` was not read: `problem` says why; `detail` is a link's target or the system's words, `size` and
    `limit` the numbers of a file too big."""

    def __init__(self, path: str | Path, problem: Problem, detail: str = "", size: int = 0, limit: int = 0) -> None:
        super().__init__(f"{path}: {problem}{f' ({detail})' if detail else ''}")
        self.path, self.problem, self.detail, self.size, self.limit = str(path), problem, detail, size, limit


@dataclass(frozen=True, slots=True)
class Ends:
    """A regular file's size and its first and last bytes (each at most what was asked for)."""

    size: int
    head: bytes
    tail: bytes


def mode_problem(mode: int) -> Problem | None:
    """None for a regular file, else what the file is instead."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return Problem.FOLDER
    if stat.S_ISFIFO(mode):
        return Problem.FIFO
    if stat.S_ISSOCK(mode):
        return Problem.SOCKET
    return Problem.DEVICE


def refusal(path: str | Path, error: OSError) -> FileRefused:
    """The refusal an `OSError` from stat-ing, listing or opening `path` stands for."""
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        try:
            return FileRefused(path, Problem.DANGLING_LINK, os.readlink(path))
        except OSError:
            return FileRefused(path, Problem.MISSING)
    problems = {
        errno.ELOOP: Problem.LINK_LOOP,
        errno.ENAMETOOLONG: Problem.NAME_TOO_LONG,
        errno.EACCES: Problem.PERMISSION_DENIED,
        errno.EPERM: Problem.PERMISSION_DENIED,
        errno.EISDIR: Problem.FOLDER,
    }
    problem = problems.get(error.errno or 0)
    return FileRefused(path, problem or Problem.OS_ERROR, "" if problem else str(error.strerror or error))


def problem_at(path: str | Path) -> Problem | None:
    """None when `path` is (a link to) a regular file, else why it cannot be read as one."""
    try:
        return mode_problem(os.stat(path).st_mode)
    except OSError as error:
        return refusal(path, error).problem


def _open(path: str | Path, checked: bool, limit: int | None) -> tuple[int, int]:
    """A read-only descriptor of the regular file `path` and its size (see `read_ends`)."""
    global _noatime
    if not checked:
        try:
            problem = mode_problem(os.stat(path).st_mode)
        except OSError as error:
            raise refusal(path, error) from None
        if problem is not None:
            raise FileRefused(path, problem)
    try:
        try:
            fd = os.open(path, _FLAGS | _noatime)
        except PermissionError:
            if not _noatime:
                raise
            _noatime = 0
            fd = os.open(path, _FLAGS)
    except OSError as error:
        raise refusal(path, error) from None
    try:
        found = os.fstat(fd)
    except OSError as error:
        os.close(fd)
        raise refusal(path, error) from None
    problem = mode_problem(found.st_mode)
    if problem is None and limit is not None and found.st_size > limit:
        os.close(fd)
        raise FileRefused(path, Problem.TOO_BIG, size=found.st_size, limit=limit)
    if problem is not None:
        os.close(fd)
        raise FileRefused(path, problem)
    return fd, found.st_size


def read_ends(path: str | Path, head: int, tail: int = 0, *, checked: bool = False, limit: int | None = None) -> Ends:
    """The first `head` and last `tail` bytes of the regular file `path` (the whole file when it is shorter), two
    `pread`s at most. `checked`: the caller has just seen a regular file there (a directory listing's type), so
    the stat before opening is skipped; the check after opening is not. A file over `limit` bytes is refused
    unread. Raises `FileRefused`."""
    fd, size = _open(path, checked, limit)
    try:
        first = os.pread(fd, min(head, size), 0) if head and size else b""
        if tail <= 0:
            last = b""
        elif size <= len(first):
            last = first[-tail:]
        else:
            last = os.pread(fd, tail, max(size - tail, 0))
    except OSError as error:
        raise refusal(path, error) from None
    finally:
        os.close(fd)
    return Ends(size, first, last)


def read_all(path: str | Path, limit: int) -> bytes:
    """Every byte of the regular file `path`, which must be at most `limit` bytes long. Raises `FileRefused`."""
    return read_ends(path, limit, limit=limit).head


class Opened:
    """A regular file opened by `open_regular`: its size, and reads that never go past its end."""

    def __init__(self, path: str | Path, checked: bool = False) -> None:
        self.path = str(path)
        self._fd, self.size = _open(path, checked, None)

    def read(self, offset: int, count: int) -> bytes:
        """Up to `count` bytes from `offset` (fewer at the end of the file). Raises `FileRefused`."""
        count = min(count, self.size - offset)
        if count <= 0:
            return b""
        try:
            return os.pread(self._fd, count, offset)
        except OSError as error:
            raise refusal(self.path, error) from None

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self._fd)


def entries(folder: str | Path) -> dict[str, Problem | None]:
    """Every name in `folder` with None for a regular file (links followed), else what it is instead. Only the
    folder is read and links stat-ed: no file is opened. Raises `FileRefused` when the folder cannot be listed."""
    found: dict[str, Problem | None] = {}
    try:
        listing = os.scandir(folder)
    except OSError as error:
        raise refusal(folder, error) from None
    with listing:
        for entry in listing:
            try:
                if entry.is_file():
                    found[entry.name] = None
                elif entry.is_dir():
                    found[entry.name] = Problem.FOLDER
                else:
                    found[entry.name] = mode_problem(entry.stat().st_mode) or Problem.DEVICE
            except OSError as error:
                found[entry.name] = refusal(entry.path, error).problem
    return found
