"""Which mounted file system holds a path: read from the mount table, `/proc/self/mountinfo`.

A TI-ONE job sees its CFS tree only through the job's storage row, a mount at the container path. Without that
row the same path is a plain folder on the container's own root file system (or absent), and every later check
would pass or fail against the wrong disk. `locate` answers, for one path: does it exist, which mount holds it
(the longest mount point that is a prefix of its nearest existing folder, links resolved), and whether that is the
root file system mounted at `/` with nothing mounted further down the path.

The table is read bounded (`MOUNTINFO_LIMIT`), only when it is a regular file, never blocking (a FIFO or a folder
in its place reads as unknown). Lines the kernel would not write (missing fields, no ` - ` separator, longer than
`LINE_LIMIT`) are skipped; mount points are unescaped as the kernel escapes them (`\\040` for a space). Nothing
here writes.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import shown

MOUNTINFO = "/proc/self/mountinfo"
MOUNTINFO_LIMIT = 4 << 20  # a container's table is a few KB; a host with thousands of mounts stays under this
LINE_LIMIT = 64 << 10  # a mount point is at most PATH_MAX (4096) bytes, four times that escaped
_ESCAPED = re.compile(rb"\\([0-7]{3})")
# What a container runtime mounts at `/`: the image's layers under a writable layer, gone with the container.
CONTAINER_ROOT_TYPES = frozenset({"overlay", "overlayfs", "aufs", "rootfs", "fuse.fuse-overlayfs"})
# File systems shared over a network (CFS is NFS; CFS Turbo, GooseFS and similar clients mount through FUSE).
NETWORK_TYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "cephfs", "glusterfs", "lustre", "gpfs"})


@dataclass(frozen=True)
class Mount:
    """One line of the mount table: where it is mounted, its file system type and its source."""

    point: str
    fs_type: str
    source: str
    options: str = field(
        default="", compare=False
    )  # the mount's options, then the file system's own (`rw,relatime,vers=3,hard,timeo=600`)

    @property
    def container_root(self) -> bool:
        """Whether this is a container's own root file system (overlay layers mounted at `/`)."""
        return self.point == "/" and self.fs_type in CONTAINER_ROOT_TYPES

    @property
    def network(self) -> bool:
        """Whether the file system is shared over a network (NFS, SMB, Ceph, Lustre, any FUSE client)."""
        return self.fs_type in NETWORK_TYPES or self.fs_type.startswith(("fuse", "nfs"))


class Placement(StrEnum):
    """Where a path lives."""

    MOUNTED = "mounted"  # on a file system mounted apart from the root file system (or one is mounted inside it)
    OWN_DISK = "own-disk"  # on the root file system mounted at `/`: the container's (or machine's) own disk
    MISSING = "missing"  # the path does not exist
    UNKNOWN = "unknown"  # the mount table could not be read, or no mount in it holds the path


@dataclass(frozen=True)
class Location:
    """Where `path` lives: `existing` is the path itself or its nearest existing folder (links resolved), `mount`
    the mount holding it (None when the table is unknown) and `inside` whether some mount lies below `path`."""

    path: Path
    exists: bool
    existing: Path
    mount: Mount | None
    inside: bool = False

    @property
    def on_own_disk(self) -> bool:
        """The nearest existing folder is on the file system mounted at `/`, and nothing is mounted below `path`."""
        return self.mount is not None and self.mount.point == "/" and not self.inside

    @property
    def on_container_disk(self) -> bool:
        """`on_own_disk`, and that file system is a container's own (overlay layers, gone with the container)."""
        return self.on_own_disk and self.mount is not None and self.mount.container_root

    @property
    def placement(self) -> Placement:
        if not self.exists:
            return Placement.MISSING
        if self.mount is None:
            return Placement.UNKNOWN
        return Placement.OWN_DISK if self.on_own_disk else Placement.MOUNTED

    def described(self) -> Text:
        """The holding mount in words: `nfs4 mounted at /x (from 10.0.0.9:/cfs)`; unknown when there is none."""
        if self.mount is None:
            return M("mount-unknown")
        mount = self.mount
        if mount.container_root:
            kind = "mount-container-disk"
        elif mount.point == "/":
            kind = "mount-machine-disk"
        else:
            kind = "mount-network" if mount.network else "mount-local"
        return M(kind, fs=shown(mount.fs_type, 40), point=shown(mount.point), source=shown(mount.source, 80))


def _unescape(field: bytes) -> str:
    """A mountinfo field as a path string: the kernel writes space, tab, newline and backslash as `\\ooo`."""
    return os.fsdecode(_ESCAPED.sub(lambda m: bytes([int(m[1], 8) & 0xFF]), field))


def parse_mountinfo(data: bytes) -> tuple[Mount, ...]:
    """Every well-formed line of a mountinfo table, in order (later lines are mounted over earlier ones).

    A line is `id parent major:minor root point options [optional...] - fstype source superoptions`; one that
    lacks a field, the separator or an absolute mount point, or is longer than `LINE_LIMIT`, is skipped."""
    mounts = []
    for line in data.split(b"\n"):
        if len(line) > LINE_LIMIT:
            continue
        fields = line.split(b" ")
        try:
            separator = fields.index(b"-", 6)
        except ValueError:
            continue
        if len(fields) < separator + 2 or not fields[4].startswith(b"/") or not fields[separator + 1]:
            continue
        source = fields[separator + 2] if len(fields) > separator + 2 else b""
        extra = fields[separator + 3] if len(fields) > separator + 3 else b""
        options = ",".join(_unescape(f) for f in (fields[5], extra) if f)
        mounts.append(Mount(_unescape(fields[4]), _unescape(fields[separator + 1]), _unescape(source), options))
    return tuple(mounts)


def read_mountinfo(path: Path, limit: int = MOUNTINFO_LIMIT) -> tuple[Mount, ...] | None:
    """The mount table at `path`; None when it is not a readable regular file, is empty, or is longer than
    `limit` (a table cut short could miss the mount that matters). `/proc` files report size 0, so the file is
    read in blocks up to `limit` + 1 bytes, never past."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    blocks, size = [], 0
    try:
        while size <= limit:
            block = os.read(fd, min(1 << 16, limit + 1 - size))
            if not block:
                break
            blocks.append(block)
            size += len(block)
    except OSError:
        return None
    finally:
        os.close(fd)
    if size > limit:
        return None
    return parse_mountinfo(b"".join(blocks)) or None


def mount_table(host: Host) -> tuple[Mount, ...] | None:
    """This machine's mount table (`/proc/self/mountinfo` under the host's root); None when it cannot be read."""
    return read_mountinfo(host.path(MOUNTINFO))


def _under(path: str, point: str) -> bool:
    """Whether `path` is `point` or lies below it (whole path components)."""
    return point == "/" or path == point or path.startswith(point + "/")


def holding_mount(path: str, mounts: Sequence[Mount]) -> Mount | None:
    """The mount that holds the absolute, resolved `path`: the longest mount point above it, the last one
    mounted when several share that point."""
    best: Mount | None = None
    for mount in mounts:
        if _under(path, mount.point) and (best is None or len(mount.point) >= len(best.point)):
            best = mount
    return best


def nearest_existing(path: Path) -> Path:
    """The path itself or its closest existing ancestor (what a later mkdir -p would write into)."""
    current = path
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    return current


def locate(path: Path, mounts: Sequence[Mount] | None) -> Location:
    """Where `path` lives (see `Location`); `mounts` None (an unreadable table) gives no mount."""
    absolute = Path(os.path.abspath(path))
    exists = os.path.exists(absolute)
    try:
        existing = Path(os.path.realpath(nearest_existing(absolute)))
    except (OSError, ValueError):
        existing = nearest_existing(absolute)
    if not mounts:
        return Location(absolute, exists, existing, None)
    here = str(existing)
    inside = exists and any(m.point != here and _under(m.point, here) for m in mounts if m.point != "/")
    return Location(absolute, exists, existing, holding_mount(here, mounts), inside)
