"""Stall watchdog: a job that stops making progress (stuck at step 0 in a collective, a data loader that hangs
after hours) becomes a fast, diagnosed failure instead of GPUs held for hours.

Progress events come from the trainer's output (`progress.py`). Until the first event the limit is
`stall_startup_timeout` (30 minutes: model load, compilation, data loader start), and so it stays until a few gaps
between events have been seen; after that, `stall_timeout` when set, otherwise the larger of 2 minutes and 5x the
usual gap between events. While a checkpoint save may be running (`saves.py`: openpi announces only its end), the
limit is at least 3x the longest save seen so far, and 15 minutes before the first save was measured (the
automatic limit only: a fixed `stall_timeout` is the user's word). After an in-job restart the start-up allowance
applies again until the new attempt's first progress event (`Watchdog.new_attempt`).

Only node 0 watches: openpi prints progress from global rank 0 only, so a worker node's silence means nothing. On a
stall: a loud warning with the last output lines, then a diagnosis (each local process's Python stack via py-spy,
without stopping it; each worker's global rank from its environment; which ranks sit in a collective; data-loader
worker states; GPU utilisation when nvidia-smi is there), shared with the other nodes' (`stall_exchange.py`,
`culprit.py` names the rank that differs); then, unless `stall_action` is warn, an in-job restart while restarts
are left, else exit code 124 so the platform ends the job.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.messages import Text
from entrypoint.core.numbers import whole_number
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.processes import PROC, ProcessTree
from entrypoint.launch.progress import Progress

FLOOR_S = 120.0
GAP_FACTOR = 5
SAVE_FACTOR = 3  # while a save runs: 3x the longest save seen so far
FIRST_SAVE_S = 900.0  # while the first save runs, nothing measured yet: 21 GB (pi05) at 25 MB/s
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
# Setting up the process group: waiting for every rank to connect (a rank that never joins keeps all of them here).
# A rank waiting here is never a culprit: it waits for a missing one (`culprit.name_culprit`).
SETUP_FRAMES = (
    "_new_process_group_helper",
    "init_process_group",
    "_store_based_barrier",
    "rendezvous",
    "connectFullMesh",
    "TCPStore",
    "_create_c10d_store",
)
DATALOADER_FRAMES = ("_worker_loop", "dataloader", "DataLoader")
PYSPY_TIMEOUT_S = 30
ENVIRON_LIMIT = 1 << 20  # bytes of /proc/<pid>/environ read (the kernel caps a process's environment lower)
_FRAME = re.compile(r"^\s+(?P<function>\S.*?) \((?P<file>[^()]*?)(?::\d+)?\)\s*$")
NVIDIA_SMI_TIMEOUT_S = 15


def stall_limit(setting: int | None, startup: int, progress: Progress) -> float | None:
    """Seconds of silence allowed now; None when the watchdog is off (`stall_timeout: 0`)."""
    if setting == 0:
        return None
    if progress.last_event_at is None:
        return float(startup)
    if setting:
        limit = float(setting)
    else:
        gap = progress.typical_gap()
        limit = max(FLOOR_S, GAP_FACTOR * gap) if gap is not None else max(FLOOR_S, float(startup))
    saving = progress.saving
    if saving is None or saving.started_at is None:
        return limit
    if saving.longest is not None:
        return max(limit, SAVE_FACTOR * saving.longest)
    return limit if setting else max(limit, FIRST_SAVE_S)


@dataclass
class Watchdog:
    """Reports a stall once per silence: after it fires it re-arms only when progress resumes. Runs on node 0
    only: openpi prints progress from global rank 0, so a worker node's output never shows any."""

    setting: int | None
    startup: int
    progress: Progress
    started_at: float
    clock: Callable[[], float] = time.monotonic
    fired_at_event: float | None = field(default=None, init=False)
    fired: bool = field(default=False, init=False)
    _restarted: bool = field(default=False, init=False)
    _event_before: float | None = field(default=None, init=False)  # the ended attempt's last progress event

    def new_attempt(self, now: float) -> None:
        """A restarted attempt began at `now`: until its first progress event the limit is the start-up allowance
        again, counted from `now` (the model is built again), and the watchdog is armed afresh."""
        self.started_at, self._restarted, self._event_before = now, True, self.progress.last_event_at
        self.fired, self.fired_at_event = False, None

    def check(self) -> tuple[float, float] | None:
        """(seconds without progress, the limit) when the limit has just been exceeded, else None."""
        if self._restarted and self.progress.last_event_at == self._event_before:  # no progress since the restart
            limit = None if self.setting == 0 else float(self.startup)
            last = self.started_at
        else:
            limit = stall_limit(self.setting, self.startup, self.progress)
            last = self.progress.last_event_at if self.progress.last_event_at is not None else self.started_at
        if limit is None:
            return None
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


def global_rank(pid: int) -> int | None:
    """The `RANK` torchrun gave worker `pid`, read from its environment (what the node really runs, whatever
    rendezvous assigned it); None when unreadable."""
    try:
        with open(PROC / str(pid) / "environ", "rb") as handle:
            raw = handle.read(ENVIRON_LIMIT)
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        if entry.startswith(b"RANK="):
            value = entry[5:].decode(errors="replace")
            return whole_number(value)
    return None


def main_frames(stack: str) -> tuple[str, ...]:
    """The main thread's frames in a py-spy dump, innermost first, as `function (file)` without line numbers: two
    ranks waiting in the same place give the same tuple. A dump that names no main thread with frames gives the
    first thread that has frames."""
    threads: list[tuple[str, list[str]]] = []  # each thread's header line and its frames
    for text in stack.splitlines():
        if text.startswith("Thread "):
            threads.append((text, []))
        elif threads and (match := _FRAME.match(text)):
            threads[-1][1].append(f"{match['function']} ({match['file']})")
    with_frames = [(header, frames) for header, frames in threads if frames]
    main = [frames for header, frames in with_frames if "MainThread" in header]
    chosen = main[0] if main else with_frames[0][1] if with_frames else []
    return tuple(chosen)


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
            errors="replace",  # a stray byte must not cost the stall its diagnosis
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return M("nvidia-smi-silent", seconds=NVIDIA_SMI_TIMEOUT_S).en
    return result.stdout.strip() or None


class DiagnosisMethod(StrEnum):
    """How the stacks of a stalled job were taken (the record's `stall.diagnosis.method`)."""

    PY_SPY = "py-spy"
    NONE = "none"
    FAULTHANDLER = "faulthandler (stacks in the node log)"  # SIGABRT to the ranks when py-spy gave nothing


class Role(StrEnum):
    RANK = "rank"  # a worker torchrun started
    WORKER_CHILD = "worker-child"  # below a rank: data-loader workers and the like


@dataclass(frozen=True)
class ProcessReport:
    pid: int
    ppid: int
    role: Role
    state: str
    wchan: str
    cmdline: str

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "role": self.role.value,
            "state": self.state,
            "wchan": self.wchan,
            "cmdline": self.cmdline,
        }


@dataclass
class Diagnosis:
    """What every local training process was doing when the job stalled; `stacks` by pid (text)."""

    method: DiagnosisMethod
    processes: list[ProcessReport]
    stacks: dict[str, str]
    in_collective: list[int]
    in_dataloader: list[int]
    gpu: str | None
    ranks: dict[int, int] = field(default_factory=dict)  # pid -> global rank, for the workers whose RANK was read
    in_setup: list[int] = field(default_factory=list)  # waiting in process-group setup (`SETUP_FRAMES`)

    def to_json(self) -> dict[str, object]:
        """The record's form: the stacks go to their own file and the node log."""
        return {
            "method": self.method.value,
            "ranks": {str(pid): rank for pid, rank in self.ranks.items()},
            "processes": [p.to_json() for p in self.processes],
            "in_collective": self.in_collective,
            "in_dataloader": self.in_dataloader,
            "in_setup": self.in_setup,
            "gpu": self.gpu,
        }


def diagnose(tree: ProcessTree) -> Diagnosis:
    """What every local training process is doing, read without stopping any of them."""
    report: list[ProcessReport] = []
    stacks: dict[str, str] = {}
    in_collective: list[int] = []
    in_dataloader: list[int] = []
    in_setup: list[int] = []
    ranks: dict[int, int] = {}
    for proc in tree.refresh():
        entry = ProcessReport(
            proc.pid,
            proc.ppid,
            Role.RANK if proc.ppid == tree.root else Role.WORKER_CHILD,
            proc.state,
            _wchan(proc.pid),
            _cmdline(proc.pid)[:200],
        )
        report.append(entry)
        rank = global_rank(proc.pid) if entry.role is Role.RANK else None
        if rank is not None:
            ranks[proc.pid] = rank
        stack = py_spy_dump(proc.pid) if "python" in proc.name or "python" in entry.cmdline else None
        if stack:
            stacks[str(proc.pid)] = stack
            if in_setup_frames(main_frames(stack)):
                in_setup.append(proc.pid)
            elif any(frame in stack for frame in COLLECTIVE_FRAMES):
                in_collective.append(proc.pid)
            if any(frame in stack for frame in DATALOADER_FRAMES):
                in_dataloader.append(proc.pid)
    method = DiagnosisMethod.PY_SPY if stacks else DiagnosisMethod.NONE
    return Diagnosis(method, report, stacks, in_collective, in_dataloader, gpu_utilisation(), ranks, in_setup)


def in_setup_frames(frames: tuple[str, ...]) -> bool:
    """Whether a rank's main-thread frames (`main_frames`) show it setting up the process group."""
    return any(name in frame for frame in frames for name in SETUP_FRAMES)


def summary_lines(diagnosis: Diagnosis) -> list[Text]:
    """A few lines for the log, each `STALL: …`; the full stacks follow them."""
    ranks = sum(1 for p in diagnosis.processes if p.role is Role.RANK)
    lines = [M("stall-processes", ranks=ranks, children=len(diagnosis.processes) - ranks)]
    for p in diagnosis.processes:
        fields = {"pid": p.pid, "role": p.role.value, "state": p.state, "wchan": p.wchan or "-"}
        lines.append(M("stall-process", **fields, cmdline=p.cmdline[:100]))
    none = M("none-seen")
    lines.append(
        M(
            "stall-where",
            collective=str(diagnosis.in_collective) if diagnosis.in_collective else none,
            loading=str(diagnosis.in_dataloader) if diagnosis.in_dataloader else none,
        )
    )
    if diagnosis.in_setup:
        lines.append(M("stall-setup", pids=str(diagnosis.in_setup)))
    if diagnosis.gpu:
        lines.append(M("stall-gpu", gpu=diagnosis.gpu))
    if diagnosis.method is DiagnosisMethod.NONE:
        lines.append(M("stall-no-stacks"))
    return [M("stall-line", line=text) for text in lines]


def write_stacks(diagnosis: Diagnosis, path: Path) -> None:
    """Every stack in one text file beside the node log."""
    with open(path, "w", encoding="utf-8") as handle:
        for pid, stack in diagnosis.stacks.items():
            handle.write(f"==== pid {pid} ====\n{stack}\n")
