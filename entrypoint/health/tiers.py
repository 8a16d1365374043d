"""The two tiers' child processes, started and read back by the launcher: the passive probe
(`python -m entrypoint.health.probe`, the launcher's own Python) and the GPU measurements (`active.py` run by the
training Python as a file, so it needs torch there and nothing of ours). Each is bounded as a whole."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from entrypoint.core.messages import Text
from entrypoint.health.children import run_child
from entrypoint.health.facts import GpuFigures, Probe, ProbeStatus, as_float, parse_figures, parse_probe
from entrypoint.health.messages import MESSAGES as M

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
ACTIVE_SCRIPT = Path(__file__).with_name("active.py")
_RUN_FILE = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


def _importable(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this package importable by the child, whichever way the launcher itself was started."""
    path = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": PACKAGE_PARENT + (os.pathsep + path if path else "")}


def run_probe(env: Mapping[str, str], timeout: float, python: str = sys.executable) -> Probe:
    """The passive facts of this node; a probe that outlives `timeout` is killed and reported as timed out."""
    done = run_child([python, "-m", "entrypoint.health.probe"], _importable(env), timeout)
    if done.timed_out:
        return Probe(ProbeStatus.TIMED_OUT, detail=done.last_line() or None, seconds=done.seconds)
    answer = done.json_line()
    if done.error is not None or done.code != 0 or answer is None:
        detail = done.error or f"exit {done.code}: {done.last_line()}"
        return Probe(ProbeStatus.FAILED, detail=detail[:300], seconds=done.seconds)
    return parse_probe(answer, done.seconds)


class ActiveStatus(StrEnum):
    OK = "ok"
    SKIPPED = "skipped"  # no torch, no CUDA device, no Python to run it: nothing measured
    TIMED_OUT = "timed-out"
    CRASHED = "crashed"


@dataclass(frozen=True)
class ActiveRun:
    status: ActiveStatus
    gpus: tuple[GpuFigures, ...] = ()
    allreduce_gbps: float | None = None
    allreduce_error: str | None = None
    import_s: float | None = None
    seconds: float | None = None
    why: Text | None = None  # skipped: why
    detail: str | None = None  # crashed: the last line; timed out: the bound

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status.value,
            "gpus": [g.to_json() for g in self.gpus],
            "allreduce_gbps": self.allreduce_gbps,
            "allreduce_error": self.allreduce_error,
            "import_s": self.import_s,
            "seconds": self.seconds,
            "why": self.why.en if self.why else None,
            "detail": self.detail,
        }


def run_active(python: str | None, env: Mapping[str, str], allreduce: bool, timeout: float) -> ActiveRun:
    """Measure every GPU of `env`'s CUDA_VISIBLE_DEVICES at once with `python`, bounded by `timeout`."""
    if python is None:
        return ActiveRun(ActiveStatus.SKIPPED, why=M("no-python"))
    argv = [python, "-c", _RUN_FILE, str(ACTIVE_SCRIPT), *(["--allreduce"] if allreduce else [])]
    done = run_child(argv, env, timeout, cwd="/")
    if done.timed_out:
        return ActiveRun(ActiveStatus.TIMED_OUT, seconds=done.seconds, detail=f"{timeout:g}")
    answer = done.json_line()
    if done.error is not None or answer is None:
        return ActiveRun(ActiveStatus.CRASHED, seconds=done.seconds, detail=done.error or done.last_line() or None)
    status = answer.get("status")
    if status == "no-torch":
        return ActiveRun(ActiveStatus.SKIPPED, why=M("no-torch", error=str(answer.get("error"))[:200]))
    if status == "no-cuda":
        return ActiveRun(ActiveStatus.SKIPPED, why=M("no-cuda"), import_s=as_float(answer.get("import_s")))
    raw = answer.get("gpus")
    gpus = (
        tuple(f for i, g in enumerate(raw[:256]) if (f := parse_figures(g, i)) is not None)
        if isinstance(raw, list)
        else ()
    )
    if status != "ok" or done.code != 0:
        return ActiveRun(
            ActiveStatus.CRASHED, gpus, seconds=done.seconds, detail=f"exit {done.code}: {done.last_line()}"
        )
    error = answer.get("allreduce_error")
    return ActiveRun(
        ActiveStatus.OK,
        gpus,
        as_float(answer.get("allreduce_gbps")),
        str(error)[:400] if error else None,
        as_float(answer.get("import_s")),
        as_float(answer.get("seconds")) or done.seconds,
    )
