"""Stall watchdog: a job that stops making progress (stuck at step 0 in a collective, a data loader that hangs
after hours) becomes a fast, diagnosed failure instead of GPUs held for hours.

Progress events come from the trainer's output (`progress.py`). Until the first event the limit is
`stall_startup_timeout` (30 minutes: model load, compilation, data loader start); after it, `stall_timeout` when
set, otherwise the larger of 10 minutes and 20x the usual gap between events (covers checkpoint writes). On a stall: a loud warning with the last output
lines, then a diagnosis (each local process's Python stack via py-spy, without stopping it; which ranks sit in a
collective; data-loader worker states; GPU utilisation when nvidia-smi is there), then, unless `stall_action`
is warn, the node ends with exit code 124 so the platform ends the whole job.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.launch.processes import PROC, Proc, ProcessTree
from entrypoint.launch.progress import Progress

FLOOR_S = 600.0
GAP_FACTOR = 20
COLLECTIVE_FRAMES = (
    "all_reduce",
    "allreduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "barrier",
    "all_to_all",
    "ProcessGroup",
    "_wait_for",
    "wait_stream",
)
DATALOADER_FRAMES = ("_worker_loop", "dataloader", "DataLoader")
PYSPY_TIMEOUT_S = 30


def stall_limit(setting: int | None, startup: int, progress: Progress) -> float | None:
    """Seconds of silence allowed now; None when the watchdog is off (`stall_timeout: 0`)."""
    if setting == 0:
        return None
    if progress.last_event_at is None:
        return float(startup)
    if setting:
        return float(setting)
    gap = progress.typical_gap()
    return max(FLOOR_S, GAP_FACTOR * gap) if gap is not None else max(FLOOR_S, float(startup))


@dataclass
class Watchdog:
    """Reports a stall once per silence: after it fires it re-arms only when progress resumes."""

    setting: int | None
    startup: int
    progress: Progress
    started_at: float
    clock: Callable[[], float] = time.monotonic
    fired_at_event: float | None = field(default=None, init=False)
    fired: bool = field(default=False, init=False)

    def check(self) -> tuple[float, float] | None:
        """(seconds without progress, the limit) when the limit has just been exceeded, else None."""
        limit = stall_limit(self.setting, self.startup, self.progress)
        if limit is None:
            return None
        last = self.progress.last_event_at if self.progress.last_event_at is not None else self.started_at
        if self.fired and self.fired_at_event == self.progress.last_event_at:
            return None
        silent = self.clock() - last
        if silent <= limit:
            return None
        self.fired, self.fired_at_event = True, self.progress.last_event_at
        return silent, limit


def _cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _wchan(pid: int) -> str:
    try:
        return (PROC / str(pid) / "wchan").read_text().strip()
    except OSError:
        return ""


def py_spy_dump(pid: int) -> str | None:
    """The process's Python stacks from py-spy (it only reads memory; the process keeps running)."""
    tool = shutil.which("py-spy")
    if tool is None:
        return None
    try:
        result = subprocess.run(
            [tool, "dump", "--pid", str(pid)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PYSPY_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    return result.stdout if result.returncode == 0 and result.stdout.strip() else None


def gpu_utilisation() -> str | None:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        result = subprocess.run(
            [tool, "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "nvidia-smi did not answer within 15s"
    return result.stdout.strip() or None


def _role(proc: Proc, root: int) -> str:
    return "rank" if proc.ppid == root else "worker-child"


def diagnose(tree: ProcessTree) -> dict[str, object]:
    """What every local training process is doing, read without stopping any of them."""
    processes = tree.refresh()
    report: list[dict[str, object]] = []
    stacks: dict[str, str] = {}
    in_collective, in_dataloader = [], []
    for proc in processes:
        entry = {
            "pid": proc.pid,
            "ppid": proc.ppid,
            "role": _role(proc, tree.root),
            "state": proc.state,
            "wchan": _wchan(proc.pid),
            "cmdline": _cmdline(proc.pid)[:200],
        }
        report.append(entry)
        stack = py_spy_dump(proc.pid) if "python" in proc.name or "python" in str(entry["cmdline"]) else None
        if stack:
            stacks[str(proc.pid)] = stack
            if any(frame in stack for frame in COLLECTIVE_FRAMES):
                in_collective.append(proc.pid)
            if any(frame in stack for frame in DATALOADER_FRAMES):
                in_dataloader.append(proc.pid)
    return {
        "method": "py-spy" if stacks else "none",
        "processes": report,
        "stacks": stacks,
        "in_collective": in_collective,
        "in_dataloader": in_dataloader,
        "gpu": gpu_utilisation(),
    }


def summary_lines(diagnosis: dict[str, object]) -> list[str]:
    """A few human lines for the log; the full stacks follow them."""
    procs = diagnosis["processes"]
    ranks = [p for p in procs if p["role"] == "rank"]  # type: ignore[index]
    lines = [f"{len(ranks)} local rank process(es), {len(procs) - len(ranks)} child process(es) (data-loader workers):"]  # type: ignore[arg-type]
    for p in procs:  # type: ignore[union-attr]
        lines.append(f"  pid {p['pid']} {p['role']} state={p['state']} wchan={p['wchan'] or '-'}  {p['cmdline'][:100]}")
    lines.append(
        f"in a collective: {diagnosis['in_collective'] or 'none seen'}; "
        f"in data loading: {diagnosis['in_dataloader'] or 'none seen'}"
    )
    if diagnosis["gpu"]:
        lines.append(f"GPU (index, utilisation, memory): {diagnosis['gpu']}")
    if diagnosis["method"] == "none":
        lines.append(
            "no Python stacks: py-spy is not installed or may not read the processes (needs ptrace permission)"
        )
    return lines


def write_stacks(diagnosis: dict[str, object], path: Path) -> None:
    """Every stack in one text file beside the node log."""
    with open(path, "w", encoding="utf-8") as handle:
        for pid, stack in diagnosis["stacks"].items():  # type: ignore[union-attr]
            handle.write(f"==== pid {pid} ====\n{stack}\n")
