"""`<assets>/.vla-fetch/`: where `fetch-assets` stages, records and locks, and how it moves things into the tree.

Per entry, `<entry>/` holds `state.json` (how far an interrupted run got, rewritten atomically), `members.jsonl`
(the journal of unpacked members, `unpack.Journal`), `tree/` (the staging folder) and, once the entry is in place,
`done.json` (the completion record). `tarballs/` keeps archives (`--keep-tarballs`); `lock` keeps a second run
out. Nothing in the user's tree is deleted: what is in the way is renamed aside (`<name>.<label>-<time>`). A write
that fails becomes one clear `PreflightFailed` (disk full, read-only, anything else).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypedDict, cast

from entrypoint.core.errors import PreflightFailed, UserError
from entrypoint.core.masking import safe_url
from entrypoint.core.oserror import os_error_text
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.net.download import human_bytes

if TYPE_CHECKING:
    from entrypoint.fetch.manifest import Entry

STATE_DIR = ".vla-fetch"
STATE_VERSION = 1


class Phase(StrEnum):
    """Where an interrupted entry stopped: still fetching, or verified and being moved into place."""

    FETCH = "fetch"
    PLACE = "place"


class SavedState(TypedDict, total=False):
    """`<entry>/state.json`: the source it was fetched from and how far it got."""

    version: int
    name: str
    file: str
    url: str
    size: int | None
    validator: str | None
    phase: Phase
    extract: dict[str, Any]  # unpack.ExtractState.to_json() (an archive)
    tee: bool  # a kept tarball is being written alongside
    have: int  # bytes of a single file on disk
    sha256: str | None  # once verified


class DoneRecord(TypedDict, total=False):
    """`<entry>/done.json`: what a finished entry put in place; `files` is `[path, size, kind]` per member."""

    name: str
    adopted: bool  # found in place (made without this tool) rather than fetched
    url: str
    size: int | None
    sha256: str | None
    validator: str | None
    finished: str
    files: list[tuple[str, int, str]]


def stamp() -> str:
    """The time as used in names set aside (`tree.bad-<stamp>`, `<file>.old-<stamp>`)."""
    return time.strftime("%Y%m%d-%H%M%S")


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def write_json(path: Path, data: Mapping[str, object]) -> None:
    """Atomically: a crash leaves the old file or the new one, never half of one."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`; None when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def aside(path: Path, label: str, when: str) -> Path:
    """Rename `path` to `<name>.<label>-<when>` (a free name) and return the new path; nothing is deleted."""
    candidate = path.with_name(f"{path.name}.{label}-{when}")
    number = 1
    while os.path.lexists(candidate):
        number += 1
        candidate = path.with_name(f"{path.name}.{label}-{when}-{number}")
    os.replace(path, candidate)
    return candidate


def merge_tree(staging: Path, dest: Path, when: str) -> list[Path]:
    """Rename everything under `staging` into `dest`; returns the existing paths moved aside (never deleted)."""
    moved: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(staging):
        here = Path(dirpath)
        target_dir = dest / here.relative_to(staging)
        descend = []
        for name in dirnames:
            source, target = here / name, target_dir / name
            if source.is_symlink():
                filenames.append(name)
            elif target.is_dir():
                descend.append(name)
            else:
                if os.path.lexists(target):
                    moved.append(aside(target, "old", when))
                _move(source, target)
        dirnames[:] = descend
        for name in filenames:
            source, target = here / name, target_dir / name
            if os.path.lexists(target):
                same = (
                    target.is_file()
                    and not target.is_symlink()
                    and not source.is_symlink()
                    and target.stat().st_size == source.lstat().st_size
                )
                if not same:
                    moved.append(aside(target, "old", when))
            _move(source, target)
    for dirpath, _, _ in sorted(os.walk(staging), key=lambda item: -len(item[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)
    return moved


def _move(source: Path, target: Path) -> None:
    try:
        os.replace(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.move(str(source), str(target))  # another file system under the tree: copy, then drop our staged copy


def free_bytes(path: Path) -> int:
    """Free bytes on the file system of `path` or of its nearest existing parent (0 when none answers)."""
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 0


def io_problem(error: OSError, where: Path) -> UserError:
    """A clear message for a write that failed: disk full, read-only, permission, anything else."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return PreflightFailed(
            "fetch.disk-full",
            str(where),
            M("disk-full", where=where, free=human_bytes(free_bytes(where))),
            M("disk-full-fix"),
        )
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return PreflightFailed(
            "fetch.not-writable",
            str(where),
            M("not-writable", where=where, reason=os_error_text(error)),
            M("not-writable-fix"),
        )
    return PreflightFailed(
        "fetch.io",
        str(getattr(error, "filename", None) or where),
        M("io-failed", error=os_error_text(error)),
        M("io-failed-fix"),
    )


class Workspace:
    """`<root>/.vla-fetch/`: per-entry state, staging, journal and records; kept tarballs; the lock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock_handle: TextIO | None = None

    @property
    def dir(self) -> Path:
        return self.root / STATE_DIR

    def entry_dir(self, entry: Entry) -> Path:
        return self.dir / entry.name

    def state_file(self, entry: Entry) -> Path:
        return self.entry_dir(entry) / "state.json"

    def journal_file(self, entry: Entry) -> Path:
        return self.entry_dir(entry) / "members.jsonl"

    def done_file(self, entry: Entry) -> Path:
        return self.entry_dir(entry) / "done.json"

    def staging(self, entry: Entry) -> Path:
        return self.entry_dir(entry) / "tree"

    def tarball(self, entry: Entry) -> Path:
        return self.dir / "tarballs" / entry.file_name

    def open(self) -> None:
        """Create the folder and take the lock; exit 3 when the destination cannot be written or is busy."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe_file = self.dir / f"write-test-{os.getpid()}"
            probe_file.write_bytes(b"ok")
            probe_file.unlink()
            self.lock_handle = (self.dir / "lock").open("a+")
        except OSError as error:
            raise io_problem(error, self.root) from None
        try:
            import fcntl

            fcntl.flock(self.lock_handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PreflightFailed(
                "fetch.busy", str(self.dir / "lock"), M("busy", root=self.root), M("busy-fix")
            ) from None
        except (OSError, ImportError):
            pass  # a file system without locks: proceed

    def close(self) -> None:
        if self.lock_handle is not None:
            self.lock_handle.close()

    # -- records
    def state(self, entry: Entry) -> SavedState | None:
        """The saved state of an interrupted run, if any."""
        return cast("SavedState | None", read_json(self.state_file(entry)))

    def done(self, entry: Entry) -> DoneRecord | None:
        """The completion record, if any."""
        return cast("DoneRecord | None", read_json(self.done_file(entry)))

    def record(self, entry: Entry, record: DoneRecord) -> None:
        """Write the completion record (atomically); OSError for the caller to report."""
        write_json(self.done_file(entry), record)

    def record_adopted(self, entry: Entry) -> None:
        """Record an entry found in place, so that later runs need only the quick check (best effort)."""
        with contextlib.suppress(OSError):
            self.entry_dir(entry).mkdir(parents=True, exist_ok=True)
            self.record(
                entry,
                DoneRecord(
                    name=entry.name, adopted=True, url=safe_url(entry.url), size=entry.size, sha256=None, finished=now()
                ),
            )

    def resume_offset(self, entry: Entry) -> int:
        """The compressed offset an interrupted unpacking resumes from (0 when there is none)."""
        extract = (self.state(entry) or {}).get("extract") or {}
        return int((extract.get("checkpoint") or {}).get("in_offset", 0))

    def ensure_space(self, needed: int) -> None:
        """Exit 3 up front when the file system visibly lacks `needed` bytes."""
        free = free_bytes(self.root)
        if needed > free:
            raise PreflightFailed(
                "fetch.space",
                str(self.root),
                M("no-space", needed=human_bytes(needed), free=human_bytes(free), root=self.root),
                M("no-space-fix"),
            )
