"""Bounded looks at files a test did not size itself: what a command under test created or changed, scanned in
chunks, and small files read whole only below a limit.

A world holds sparse weights whose header claims ~7.5 GB; a test that read every file whole would read all of
it, so tests look only at what changed (`written_since`) and never hold more than a chunk (`holding`), a limit
(`small_bytes`, `small_text`) or a tail (`tail_text`) in memory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

CHUNK = 1 << 20  # bytes held at once while scanning
SMALL = 16 << 20  # the most a test reads whole: records, logs and state files are far smaller

FileState = tuple[int, int, int, int]  # inode, size, modification and change time (ns)


def file_states(root: Path) -> dict[Path, FileState]:
    """Every regular file under `root` (symbolic links not followed) with what any write or replacement changes."""
    states: dict[Path, FileState] = {}
    for path in root.rglob("*"):
        try:
            info = path.lstat()
        except OSError:  # gone between listing and looking
            continue
        if stat.S_ISREG(info.st_mode):
            states[path] = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    return states


def written_since(before: dict[Path, FileState], root: Path) -> list[Path]:
    """Regular files under `root` that are new, or changed in any way, since `before` (from `file_states`). Time
    stamps tick as coarsely as the file system's clock: a command started after `before` was taken always shows."""
    return sorted(path for path, state in file_states(root).items() if before.get(path) != state)


def holding(path: Path, needles: Iterable[bytes], chunk: int = CHUNK) -> set[bytes]:
    """The needles found in the file at `path`, read `chunk` bytes at a time; each chunk is searched together with
    the last `len(needle) - 1` bytes of the one before, so a needle across a chunk border is found too."""
    wanted = {needle for needle in needles if needle}
    if not wanted:
        return set()
    keep = max(len(needle) for needle in wanted) - 1
    found: set[bytes] = set()
    tail = b""
    with open(path, "rb", buffering=0) as handle:
        while wanted - found:
            block = handle.read(chunk)
            if not block:
                break
            window = tail + block
            found |= {needle for needle in wanted if needle in window}
            tail = window[-keep:] if keep else b""
    return found


def small_bytes(path: Path, limit: int = SMALL) -> bytes:
    """The whole file at `path`; an AssertionError (the test fails, nothing huge is read) when it holds more than
    `limit` bytes."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        assert size <= limit, f"{path} holds {size} bytes, more than the {limit} a test reads whole"
        data = handle.read(limit + 1)
    assert len(data) <= limit, f"{path} grew past the {limit} bytes a test reads whole"
    return data


def small_text(path: Path, limit: int = SMALL) -> str:
    """`small_bytes` as UTF-8 text (undecodable bytes replaced)."""
    return small_bytes(path, limit).decode("utf-8", "replace")


def tail_text(path: Path, count: int = 2000) -> str:
    """The last `count` bytes of the file at `path` as UTF-8 text (undecodable bytes replaced), whatever its size."""
    with open(path, "rb") as handle:
        handle.seek(max(0, os.fstat(handle.fileno()).st_size - count))
        return handle.read(count).decode("utf-8", "replace")
