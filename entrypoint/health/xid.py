"""Xid errors in the kernel log: the NVIDIA driver's own report of a GPU fault (`NVRM: Xid (PCI:<bus>): <code>, ...`).

Read from `/dev/kmsg` (under `VLA_HOST_ROOT`), opened non-blocking and read record by record until the ring buffer
is drained, bounded in records and bytes; a container is often not allowed to read it, which is reported, never
fatal. Only `Xid` lines count: a healthy boot logs other `NVRM:` lines. The fatal classes follow Azure's H200 node
health checks (48, 56-58, 62-65, 68, 69, 73, 74, 79-81, 92, 119, 120) plus 95 (uncontained ECC error); an event
counts within `WINDOW_S` of now (the kernel's timestamps are seconds since boot, compared with `/proc/uptime`).

Standard library only: this runs inside the passive probe's child process.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

KMSG = "/dev/kmsg"
UPTIME = "/proc/uptime"
FATAL_XIDS = frozenset({48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 95, 119, 120})
WINDOW_S = 2 * 3600.0
MAX_RECORDS = 200_000
MAX_BYTES = 32 << 20
LINE_KEPT = 240

_RECORD = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d+)")


@dataclass(frozen=True)
class XidEvent:
    code: int
    bus: str  # "0000:18:00", as the driver names the GPU (domain:bus:device)
    age_s: float | None  # seconds before now; None when uptime is unknown
    line: str

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_XIDS

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "bus": self.bus, "age_s": self.age_s, "line": self.line}


@dataclass(frozen=True)
class KernelLog:
    readable: bool
    problem: str | None  # why it could not be read
    events: tuple[XidEvent, ...]

    def to_json(self) -> dict[str, object]:
        return {"readable": self.readable, "problem": self.problem, "events": [e.to_json() for e in self.events]}


def bus_key(bus: str) -> str:
    """A PCI address as `dddd:bb:dd` in lower case, whatever its source (NVML's 8-digit domain, a function suffix)."""
    text = bus.strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        domain, number, rest = parts
        return f"{domain[-4:].rjust(4, '0')}:{number.rjust(2, '0')}:{rest.split('.')[0].rjust(2, '0')}"
    if len(parts) == 2:  # bus:device.function without a domain
        return f"0000:{parts[0].rjust(2, '0')}:{parts[1].split('.')[0].rjust(2, '0')}"
    return text


def parse_records(lines: list[str], uptime_s: float | None) -> list[XidEvent]:
    """Xid events among `/dev/kmsg` records (`prio,seq,usec,flags;message`); continuation lines are skipped."""
    events = []
    for text in lines:
        record = _RECORD.match(text)
        if record is None:
            continue
        found = _XID.search(record.group(4))
        if found is None:
            continue
        at_s = int(record.group(3)) / 1e6
        age = max(0.0, uptime_s - at_s) if uptime_s is not None else None
        events.append(XidEvent(int(found.group(2)), bus_key(found.group(1)), age, record.group(4)[:LINE_KEPT]))
    return events


def read_uptime(root: str) -> float | None:
    try:
        with open(os.path.join(root, UPTIME.lstrip("/")), "rb") as handle:
            return float(handle.read(128).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_kernel_log(root: str = "/") -> KernelLog:
    """Every Xid event still in the kernel's ring buffer; never blocks (non-blocking reads, bounded)."""
    path = os.path.join(root, KMSG.lstrip("/"))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as error:
        return KernelLog(False, f"{path}: {error.strerror or error}", ())
    lines: list[str] = []
    pending = b""
    total = 0
    try:
        for _ in range(MAX_RECORDS):
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break  # drained
            except OSError as error:
                if error.errno == errno.EPIPE:  # the record was overwritten while we read: go on with the next
                    continue
                if error.errno == errno.EINVAL and not lines:
                    return KernelLog(False, f"{path}: {error.strerror}", ())
                break
            if not chunk:  # a plain file (tests, a copy) ends
                break
            total += len(chunk)
            data = pending + chunk
            *complete, pending = data.split(b"\n")
            lines.extend(part.decode("utf-8", "replace") for part in complete)
            if total > MAX_BYTES:
                break
    finally:
        os.close(fd)
    if pending:
        lines.append(pending.decode("utf-8", "replace"))
    return KernelLog(True, None, tuple(parse_records(lines, read_uptime(root))))
