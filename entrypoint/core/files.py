"""Reading files someone else made without trusting them: never blocking, never unbounded, never changing them.

Before a file is opened it is stat-ed, or seen as a regular file in a directory listing just made (links
followed: Hugging Face caches and hand-staged trees are made of links), and anything but a regular file is refused
unopened: a FIFO would block its reader forever, a device may act when opened. The open itself is non-blocking (a
FIFO swapped in after the stat cannot block either, and reading one fails) and asks the kernel not to touch the
access time where it allows that; a file opened whole (`Opened`, `read_all`, `read_text`) is checked again once
open, so nothing but a regular file is ever read from; reads are `pread`s of a bounded number of bytes, and a file
read whole that turns out longer than its limit (it grew since it was measured) is refused too. A refusal is a
`FileRefused` naming its `Problem`; `describe` puts it in words (callers with a context of their own use theirs).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple, TypeVar

from entrypoint.core.messages import Catalogue, Text
from entrypoint.core.oserror import os_error_text

T = TypeVar("T")
R = TypeVar("R")

MESSAGES = Catalogue(
    "core",
    {
        "file-missing": ("nothing is there", "该路径下没有任何文件"),
        "file-directory": ("it is a folder", "它是文件夹"),
        "file-fifo": (
            "it is a FIFO (named pipe): never read, reading it could block forever",
            "它是 FIFO(命名管道):不会读取,读取可能永远阻塞",
        ),
        "file-special": ("it is a device or socket, not a regular file", "它是设备或套接字,不是普通文件"),
        "file-dangling": (
            "it is a symbolic link to {target}, which is missing",
            "它是指向 {target} 的符号链接,但链接目标缺失",
        ),
        "file-loop": ("it is a loop of symbolic links", "它是循环的符号链接"),
        "file-name-too-long": (
            "the path is too long for the file system (a name over 255 bytes, or over 4095 in all)",
            "路径超出文件系统的长度限制(单个名称超过 255 字节,或总长超过 4095 字节)",
        ),
        "file-too-big": (
            "it is {size} bytes; a file like this is at most {limit} bytes",
            "文件大小为 {size} 字节;此类文件最多 {limit} 字节",
        ),
        "file-not-utf8": (
            "it is not UTF-8 text (byte {position} cannot be decoded)",
            "它不是 UTF-8 文本(第 {position} 字节无法解码)",
        ),
        "file-os-error": ("the system refused: {error}", "系统拒绝访问:{error}"),
    },
)

TEXT_LIMIT = 256 << 10  # a job file or manifest is a few KB
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_PROBE = 64  # files read in turn before `read_ends_of` judges the storage
_SLOW_S = 30e-6  # a file's read from a warm cache takes under 10 µs; from a disk or a network, far more
_WORKERS = 4  # enough to overlap the waits; more only contend for the interpreter
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
    NOT_UTF8 = "not-utf8"
    OS_ERROR = "os-error"


class FileRefused(Exception):
    """`path` was not read: `problem` says why; `detail` is a link's target or the system's words (`errno` their
    number), `size` and `limit` the numbers of a file too big."""

    def __init__(
        self,
        path: str | Path,
        problem: Problem,
        detail: str = "",
        size: int = 0,
        limit: int = 0,
        errno: int | None = None,
    ) -> None:
        super().__init__(f"{path}: {problem}{f' ({detail})' if detail else ''}")
        self.path, self.problem, self.detail, self.size, self.limit = str(path), problem, detail, size, limit
        self.errno = errno


class Ends(NamedTuple):
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
        errno.ESPIPE: Problem.FIFO,
    }
    problem = problems.get(error.errno or 0)
    if problem is not None:
        return FileRefused(path, problem)
    return FileRefused(path, Problem.OS_ERROR, str(error.strerror or error), errno=error.errno)


def problem_at(path: str | Path) -> Problem | None:
    """None when `path` is (a link to) a regular file, else why it cannot be read as one."""
    try:
        return mode_problem(os.stat(path).st_mode)
    except OSError as error:
        return refusal(path, error).problem


def _require_regular(path: str | Path) -> None:
    try:
        problem = mode_problem(os.stat(path).st_mode)
    except OSError as error:
        raise refusal(path, error) from None
    if problem is not None:
        raise FileRefused(path, problem)


def _open(path: str | Path) -> int:
    """A read-only, non-blocking descriptor of `path`; raises `OSError`."""
    global _noatime
    try:
        return os.open(path, _FLAGS | _noatime)
    except PermissionError:
        if not _noatime:
            raise
        _noatime = 0
        return os.open(path, _FLAGS)


def _ends(fd: int, head: int, tail: int) -> Ends:
    """See `read_ends`; the size is asked only when the head read did not reach the end."""
    first = os.pread(fd, head, 0) if head else b""
    if head and len(first) < head:
        return Ends(len(first), first, first[-tail:] if tail else b"")
    size = os.lseek(fd, 0, os.SEEK_END)
    return Ends(size, first, os.pread(fd, tail, max(size - tail, 0)) if tail else b"")


def read_ends(path: str | Path, head: int, tail: int = 0) -> Ends:
    """The size and the first `head` and last `tail` bytes of the regular file `path` (the whole file when it is
    shorter): one stat, one open, two `pread`s at most. Raises `FileRefused`."""
    _require_regular(path)
    try:
        fd = _open(path)
    except OSError as error:
        raise refusal(path, error) from None
    try:
        return _ends(fd, head, tail)
    except OSError as error:
        raise refusal(path, error) from None
    finally:
        os.close(fd)


def read_ends_of(paths: Sequence[str], head: int, tail: int = 0) -> list[Ends | FileRefused]:
    """`read_ends` of each path, in order, for files a directory listing has just shown to be regular: no stat
    before opening (the listing's file type stands for it), each result an `Ends` or the `FileRefused` why not.
    Should something else have taken a file's place since the listing, the non-blocking open cannot block and a
    FIFO's or folder's read fails; a device's yields at most `head` + `tail` bytes. `tail` is at most `head`.
    Slow storage is read by a few threads at once (`overlapped`)."""
    return overlapped(paths, lambda part: _read_run(part, head, tail))


def overlapped(items: Sequence[T], run: Callable[[Sequence[T]], list[R]]) -> list[R]:
    """`run` over `items` (a function of a slice of them, one result per item, in order), with the waits of slow
    storage overlapped: the first items are done in turn; when they show slow storage (a cold cache, a network
    file system: each read waits on a disk or a round trip), the rest is shared among a few threads. From a warm
    cache one loop is faster: the reads do not wait, and threads would only contend."""
    started = time.perf_counter()
    found = run(items[:_PROBE])
    rest = items[_PROBE:]
    if not rest or (time.perf_counter() - started) < _SLOW_S * len(found):
        return found + run(rest)
    import threading

    size = -(-len(rest) // _WORKERS)
    parts: list[list[R]] = [[] for _ in range(_WORKERS)]
    failures: list[BaseException] = []

    def work(index: int) -> None:
        try:
            parts[index] = run(rest[index * size : (index + 1) * size])
        except BaseException as failure:  # handed to the caller's thread below
            failures.append(failure)

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(_WORKERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]
    return found + [result for part in parts for result in part]


def _read_run(paths: Sequence[str], head: int, tail: int) -> list[Ends | FileRefused]:
    """`read_ends_of` for `paths` in one tight loop. Each folder is opened once and its files opened relative to it:
    on a network file system a path is looked up one component at a time, and the folder's part of that walk
    would otherwise be repeated for every file in it."""
    found: list[Ends | FileRefused] = []
    append, open_, pread, lseek, close = found.append, os.open, os.pread, os.lseek, os.close
    folder, folder_fd = None, None
    try:
        for path in paths:
            parent, _, name = path.rpartition("/")
            if parent != folder:
                if folder_fd is not None:
                    close(folder_fd)
                    folder_fd = None
                folder = parent
                try:
                    folder_fd = open_(parent or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError:
                    folder_fd = None  # each file by its whole path: the error is then the file's own
            try:
                fd = open_(name, _FLAGS | _noatime, dir_fd=folder_fd) if folder_fd is not None else _open(path)
            except OSError:
                try:
                    fd = _open(path)
                except OSError as error:
                    append(refusal(path, error))
                    continue
            try:
                first = pread(fd, head, 0)
                if len(first) < head:
                    append(Ends(len(first), first, first[-tail:] if tail else b""))
                else:
                    size = lseek(fd, 0, os.SEEK_END)
                    append(Ends(size, first, pread(fd, tail, size - tail) if tail else b""))
            except OSError as error:
                append(refusal(path, error))
            finally:
                close(fd)
    finally:
        if folder_fd is not None:
            close(folder_fd)
    return found


def read_all(path: str | Path, limit: int) -> bytes:
    """Every byte of the regular file `path`, which must be at most `limit` bytes long (also when it grows while it
    is read). Raises `FileRefused`."""
    with Opened(path) as opened:
        if opened.size > limit:
            raise FileRefused(path, Problem.TOO_BIG, size=opened.size, limit=limit)
        data = opened.pread(0, opened.size + 1)
        while opened.size < len(data) <= limit:  # it grew since it was measured: on to its end, or past the limit
            block = opened.pread(len(data), min(1 << 16, limit + 1 - len(data)))
            if not block:
                break
            data += block
    if len(data) > limit:
        raise FileRefused(path, Problem.TOO_BIG, size=len(data), limit=limit)
    return data


def read_text(path: str | Path, limit: int = TEXT_LIMIT) -> str:
    """The UTF-8 text of the regular file `path` (a job file, a manifest: someone wrote it), at most `limit` bytes.
    Raises `FileRefused` (problem `not-utf8` for bytes that are not UTF-8)."""
    data = read_all(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileRefused(path, Problem.NOT_UTF8, str(error.start)) from None


def describe(refused: FileRefused) -> Text:
    """Why a file was not read, in words that follow its path ("cannot read …: it is a folder")."""
    match refused.problem:
        case Problem.MISSING:
            return MESSAGES("file-missing")
        case Problem.FOLDER:
            return MESSAGES("file-directory")
        case Problem.FIFO:
            return MESSAGES("file-fifo")
        case Problem.DEVICE | Problem.SOCKET:
            return MESSAGES("file-special")
        case Problem.DANGLING_LINK:
            return MESSAGES("file-dangling", target=refused.detail)
        case Problem.LINK_LOOP:
            return MESSAGES("file-loop")
        case Problem.NAME_TOO_LONG:
            return MESSAGES("file-name-too-long")
        case Problem.TOO_BIG:
            return MESSAGES("file-too-big", size=refused.size, limit=refused.limit)
        case Problem.NOT_UTF8:
            return MESSAGES("file-not-utf8", position=refused.detail)
        case Problem.PERMISSION_DENIED:
            return MESSAGES("file-os-error", error=os_error_text(PermissionError(errno.EACCES, "")))
        case _:
            error = OSError(refused.errno, refused.detail) if refused.errno else None
            return MESSAGES("file-os-error", error=os_error_text(error) if error else refused.detail)


class Opened:
    """A regular file, open for bounded reads at any offset: `size`, and `read`s that never go past its end. The
    file is checked again once open: a FIFO or device swapped in after the stat is refused, never read."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        _require_regular(path)
        try:
            self._fd = _open(path)
        except OSError as error:
            raise refusal(path, error) from None
        try:
            problem = mode_problem(os.fstat(self._fd).st_mode)
            if problem is not None:
                raise FileRefused(path, problem)
            self.size = os.lseek(self._fd, 0, os.SEEK_END)
        except OSError as error:
            os.close(self._fd)
            raise refusal(path, error) from None
        except FileRefused:
            os.close(self._fd)
            raise

    def read(self, offset: int, count: int) -> bytes:
        """Up to `count` bytes from `offset` (fewer at the end of the file). Raises `FileRefused`."""
        count = min(count, self.size - offset)
        if count <= 0:
            return b""
        return self.pread(offset, count)

    def pread(self, offset: int, count: int) -> bytes:
        """Up to `count` bytes from `offset`, wherever the file ends now. Raises `FileRefused`."""
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
