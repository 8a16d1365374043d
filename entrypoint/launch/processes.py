"""The training process tree, read from /proc: torchrun, its workers (each in a session of its own) and their
data-loader workers. Remembered while torchrun runs, so that workers it leaves behind can still be found and
killed after it is gone (they are reparented away from it)."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    start: int  # start time in clock ticks: tells a live process from a new one that reused its pid
    name: str


def read_proc(pid: int, proc: Path = PROC) -> Proc | None:
    """One process's /proc/<pid>/stat, or None when it is gone or unreadable."""
    try:
        raw = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    name_end = raw.rfind(")")
    fields = raw[name_end + 2 :].split()
    try:
        return Proc(pid, int(fields[1]), fields[0], int(fields[19]), raw[raw.find("(") + 1 : name_end])
    except (IndexError, ValueError):
        return None


def all_processes(proc: Path = PROC) -> list[Proc]:
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if entry.name.isdigit():
            info = read_proc(int(entry.name), proc)
            if info is not None:
                found.append(info)
    return found


def descendants(root: int, processes: list[Proc]) -> list[Proc]:
    """Every process below `root`, parents before children."""
    children: dict[int, list[Proc]] = {}
    for p in processes:
        children.setdefault(p.ppid, []).append(p)
    result, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(0), []):
            result.append(child)
            queue.append(child.pid)
    return result


@dataclass
class ProcessTree:
    """The processes ever seen below `root`; `refresh` while it runs, `kill` at the end."""

    root: int
    seen: dict[int, Proc] = field(default_factory=dict)

    def refresh(self) -> list[Proc]:
        current = descendants(self.root, all_processes())
        for p in current:
            self.seen[p.pid] = p
        return current

    def alive(self) -> list[Proc]:
        """Remembered processes still running (same pid and start time)."""
        living = []
        for p in self.seen.values():
            now = read_proc(p.pid)
            if now is not None and now.start == p.start and now.state != "Z":
                living.append(now)
        return living

    def kill(self) -> list[int]:
        """SIGKILL torchrun's group and every remembered process still alive; return the pids signalled."""
        killed = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.root, signal.SIGKILL)
        for p in self.alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
                killed.append(p.pid)
            except (ProcessLookupError, PermissionError):
                continue
        return killed
