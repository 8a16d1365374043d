"""`vla-entrypoint report`, and the report `run` writes by itself: on node 0 at every end, on any node that fails.

The report covers one experiment (`exp_name`) in one log folder (`log_dir`): every node and every run found
there. It is written to `<log_dir>/<exp_name>-report.html` (or `--out`) atomically — a temporary file beside it,
then a rename — so a reader never sees half a page and two nodes writing at once leave one whole page. `--json`
prints the same content as one JSON object instead of writing the page. Only an earlier report is replaced: a file
of anyone else's at that path (or a folder, a FIFO) is left alone and said. Exit codes: 0 written (or printed); 2 a
mis-specified setting; 3 no file of the experiment in the folder, or the page could not be written.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from entrypoint.core.errors import PreflightFailed
from entrypoint.core.files import FileRefused, read_ends
from entrypoint.core.messages import Lang, Text, render
from entrypoint.report.charts import thin
from entrypoint.report.collect import REPORT_SUFFIX, Experiment, NodeRun, collect
from entrypoint.report.html import GENERATOR, page
from entrypoint.report.messages import MESSAGES as M
from entrypoint.report.summary import cause_summary

JSON_POINTS = 2000  # progress points per run in --json (thinned evenly beyond)


def report_path(log_dir: Path, exp_name: str) -> Path:
    """Where the report of `exp_name` goes by default."""
    return log_dir / f"{exp_name}{REPORT_SUFFIX}"


@dataclass(frozen=True)
class Written:
    """A report written to `path` (None: it could not be; `problem` says why) with its cause line."""

    path: Path | None
    summary: Text
    problem: Text | None = None


def build(log_dir: Path, exp_name: str) -> tuple[Experiment, Text]:
    experiment = collect(log_dir, exp_name)
    return experiment, cause_summary(experiment)


def not_ours(path: Path) -> Text | None:
    """Why `path` must not be replaced: something there that is not an earlier report (a folder, a FIFO, a file of
    someone else's). None when nothing is there or it is a report of ours."""
    if not os.path.lexists(path):
        return None
    try:
        head = read_ends(path, 1024).head
    except FileRefused as refused:
        return M("not-ours-kind", path=str(path), problem=refused.problem.value)
    return None if GENERATOR.encode() in head else M("not-ours", path=str(path))


def write_atomic(path: Path, text: str) -> Text | None:
    """`text` to `path` through a temporary file beside it and a rename; why not, when it was not written. Only an
    earlier report is ever replaced: nothing of the user's is overwritten."""
    refused = not_ours(path)
    if refused is not None:
        return refused
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return M("not-written", path=str(path), error=error.strerror or str(error))
    return None


def write_report(log_dir: Path, exp_name: str, path: Path) -> Written:
    """Collect, render and write the report to `path`."""
    experiment, summary = build(log_dir, exp_name)
    problem = write_atomic(path, page(experiment, summary))
    return Written(path if problem is None else None, summary, problem)


def write_in_time(log_dir: Path, exp_name: str, path: Path, wait_s: float) -> Text:
    """`run`'s report at its end: written by a thread given `wait_s` seconds (storage that stopped answering must
    not keep a node from ending); the line that says where it is, or why it is not there. Never raises."""
    outcome: list[Text | str | None] = []

    def write() -> None:
        try:
            outcome.append(write_report(log_dir, exp_name, path).problem)
        except Exception as error:  # a reporting bug must not change how the job ends
            outcome.append(f"{type(error).__name__}: {error}")

    writer = threading.Thread(target=write, name="report", daemon=True)
    writer.start()
    writer.join(wait_s)
    problem = outcome[0] if outcome else M("auto-slow", seconds=f"{wait_s:.0f}")
    return M("auto-written", path=str(path)) if problem is None else M("auto-failed", problem=problem)


def to_json(experiment: Experiment, summary: Text) -> dict[str, object]:
    """The report as one JSON object (`summary` first)."""
    return {
        "summary": summary.en,
        "summary_zh": summary.zh,
        "exp_name": experiment.exp_name,
        "folder": str(experiment.folder),
        "expected_nodes": experiment.expected_nodes,
        "missing_nodes": experiment.missing_nodes,
        "older_runs": experiment.older_runs,
        "problems": [p.to_json() for p in experiment.problems],
        "runs": [_run_json(run) for run in experiment.runs],
    }


def _run_json(run: NodeRun) -> dict[str, object]:
    scan = run.scan
    kept = thin(scan.points, JSON_POINTS) if scan else []
    return {
        "node_rank": run.rank,
        "stamp": run.stamp,
        "host": run.host,
        "log": str(run.log) if run.log else None,
        "record": str(run.record_path) if run.record_path else None,
        "started_at": run.started_at,
        "outcome": None
        if run.outcome is None
        else {
            "exit_code": run.outcome.exit_code,
            "class": run.outcome.klass,
            "verdict": run.outcome.verdict,
            "root_cause": run.outcome.root_cause,
            "signal": run.outcome.signal,
        },
        "gave_up": run.gave_up,
        "phases": [{"name": p.name, "start_s": p.start_s, "seconds": p.seconds} for p in run.phases],
        "attempts": [a.__dict__ for a in run.attempts],
        "culprit": run.culprit.__dict__ if run.culprit else None,
        "last_step": run.last_step,
        "last_loss": run.last_loss,
        "step_time_s": run.step_time_s,
        "checkpoints": [{"step": s, "path": p} for s, p in run.checkpoints],
        "transport": run.transport,
        "taco": run.taco,
        "health": run.health,
        "stall_report": run.stall_report,
        "log_scan": None
        if scan is None
        else {
            "size": scan.size,
            "read": scan.read,
            "sampled": scan.sampled,
            "progress_lines": scan.progress_lines,
            "points": [[p.step, p.loss, p.step_time, p.attempt] for p in kept],
            "saves": [{"step": s, "path": p} for s, p in scan.saves],
            "restarts": scan.restarts,
            "last_lines": scan.last_lines,
            "not_utf8": scan.not_utf8,
            "binary": scan.binary,
        },
        "problems": [p.to_json() for p in run.problems],
    }


def main(
    log_dir: Path, exp_name: str, out: Path | None, json_mode: bool, lang: Lang, stdout: TextIO | None = None
) -> int:
    """The `report` command for the experiment's folder; raises `PreflightFailed` (exit 3) when the folder holds
    no file of the experiment or the page cannot be written."""
    stdout = stdout or sys.stdout
    started = time.monotonic()
    experiment, summary = build(log_dir, exp_name)
    if not experiment.runs:
        what = experiment.problems[0] if experiment.problems else M("no-runs", exp=exp_name, folder=str(log_dir))
        raise PreflightFailed("report.no-runs", str(log_dir), what, M("no-runs-fix", exp=exp_name))
    if json_mode:
        stdout.write(json.dumps(to_json(experiment, summary), indent=2, ensure_ascii=False) + "\n")
        return 0
    target = out or report_path(log_dir, exp_name)
    problem = write_atomic(target, page(experiment, summary))
    if problem is not None:
        raise PreflightFailed("report.not-written", str(target), problem, M("not-written-fix"))
    stdout.write(render(summary, lang) + "\n")
    seconds = f"{time.monotonic() - started:.1f}"
    stdout.write(render(M("written", path=str(target), runs=len(experiment.runs), seconds=seconds), lang) + "\n")
    return 0
