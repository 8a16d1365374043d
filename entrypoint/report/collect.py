"""Every node's files of one experiment, read within bounds into one typed model.

What `run` leaves in the log folder, per node and run (`<exp>-node<rank>-<stamp>`): the node log (`.log`), the
start-up record (`.json`), the attempts folder (`.attempts/<n>.json`, and `gave-up.json` when that node ended the
job with do-not-requeue) and the stall report (`.stall.json`). Anyone may have written or damaged them: each file
is opened only when it is a regular file, read up to a limit (`core.files`), and a file that is missing, too big,
truncated, not JSON, not UTF-8 or of the wrong shape becomes a problem the report states — never an exception.
Every string taken from them is masked (`core.masking`) and cut to a bounded length. At most `MAX_RUNS` runs (the
newest) are read, and node logs up to `READ_BUDGET` bytes in all, newest first; a node named by a record's topology
but without any file is listed as missing.
"""

from __future__ import annotations

import calendar
import json
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.files import FileRefused, entries, read_all
from entrypoint.core.masking import mask_data, mask_text
from entrypoint.core.messages import Text
from entrypoint.report.logscan import LogScan, scan_log
from entrypoint.report.messages import MESSAGES as M

# The names `run` gives a node's files (`plan.NodeFiles`, `launch.culprit.report_path`, `launch.restarts`); a unit
# test keeps them in step.
RECORD_SUFFIX = ".json"
ATTEMPTS_SUFFIX = ".attempts"
STALL_SUFFIX = ".stall.json"
GAVE_UP_FILE = "gave-up.json"
REPORT_SUFFIX = "-report.html"

RECORD_LIMIT = 4 << 20
SMALL_LIMIT = 64 << 10
STALL_LIMIT = 4 << 20
MAX_RUNS = 24
READ_BUDGET = 160 << 20  # bytes of node logs read for one report (newest runs first): ten logs read to their limit
MAX_LISTED = 200_000  # folder entries looked at
MAX_ATTEMPT_FILES = 64
MAX_ATTEMPTS = 64
MAX_NODES = 4096
TEXT_LIMIT = 1000  # characters of one string taken from a record
_STAMP = r"\d{8}-\d{6}(?:-\d{1,7})?"
_ATTEMPT_FILE = re.compile(r"^(?P<n>\d{1,4})\.json$")


@dataclass(frozen=True)
class Phase:
    """A start-up phase: seconds from the launcher's start to its beginning, and its duration."""

    name: str
    start_s: float
    seconds: float


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of a node's worker group (times in seconds since that node's launcher started)."""

    number: int
    started_s: float | None
    detected_s: float | None = None
    restarted_s: float | None = None
    cause: str | None = None
    detail: str | None = None
    resumed_step: int | None = None
    best_step: int | None = None
    checkpoints: int | None = None


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None
    klass: str | None
    root_cause: str | None = None
    verdict: str | None = None
    signal: int | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class Culprit:
    ranks: list[int]
    nodes: list[int]
    why: str | None
    missing_nodes: list[int]


@dataclass
class NodeRun:
    """One run of the launcher on one node: what its files say, and what could not be read (`problems`)."""

    rank: int
    stamp: str
    log: Path | None = None
    record_path: Path | None = None
    host: str | None = None
    started_at: float | None = None  # epoch seconds
    nnodes: int | None = None
    batch_size: int | None = None
    num_train_steps: int | None = None
    phases: list[Phase] = field(default_factory=list)
    attempts: list[AttemptRow] = field(default_factory=list)
    outcome: Outcome | None = None
    last_step: int | None = None
    last_loss: float | None = None
    step_time_s: float | None = None
    checkpoints: list[tuple[int, str]] = field(default_factory=list)
    transport: list[dict[str, str]] = field(default_factory=list)
    taco: dict[str, str] | None = None
    health: object | None = None
    stall_silent_s: float | None = None
    culprit: Culprit | None = None
    stall_requested: bool = False
    master: dict[str, str] | None = None
    gave_up: str | None = None
    stall_report: dict[str, object] | None = None
    scan: LogScan | None = None
    problems: list[Text] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"node {self.rank} · {self.stamp}"


@dataclass
class Experiment:
    """Every run found for `exp_name` in `folder` (newest last), and what is missing."""

    folder: Path
    exp_name: str
    runs: list[NodeRun] = field(default_factory=list)
    older_runs: int = 0  # runs beyond MAX_RUNS, not read
    expected_nodes: int | None = None
    missing_nodes: list[int] = field(default_factory=list)
    problems: list[Text] = field(default_factory=list)

    def latest(self) -> dict[int, NodeRun]:
        """The newest run of each node, by node rank."""
        found: dict[int, NodeRun] = {}
        for run in self.runs:
            found[run.rank] = run
        return dict(sorted(found.items()))

    def nodes(self) -> list[int]:
        return sorted({run.rank for run in self.runs} | set(self.missing_nodes))


def collect(folder: Path, exp_name: str) -> Experiment:
    """Read every run of `exp_name` in `folder` (a node's log folder on CFS)."""
    experiment = Experiment(folder, exp_name)
    pattern = re.compile(rf"^{re.escape(exp_name)}-node(?P<rank>\d{{1,5}})-(?P<stamp>{_STAMP})(?P<ext>\.log|\.json)$")
    found: dict[tuple[int, str], NodeRun] = {}
    try:
        with os.scandir(folder) as listing:
            for number, entry in enumerate(listing):
                if number >= MAX_LISTED:
                    experiment.problems.append(M("folder-too-big", folder=str(folder), count=MAX_LISTED))
                    break
                match = pattern.match(entry.name)
                if match is None or int(match["rank"]) >= MAX_NODES:
                    continue
                key = (int(match["rank"]), match["stamp"])
                run = found.setdefault(key, NodeRun(*key))
                if match["ext"] == ".log":
                    run.log = Path(entry.path)
                else:
                    run.record_path = Path(entry.path)
    except OSError as error:
        experiment.problems.append(M("folder-unreadable", folder=str(folder), error=error.strerror or str(error)))
        return experiment
    ordered = sorted(found.values(), key=lambda r: (r.stamp, r.rank))
    experiment.older_runs = max(0, len(ordered) - MAX_RUNS)
    experiment.runs = ordered[-MAX_RUNS:]
    budget = [READ_BUDGET]
    for run in reversed(experiment.runs):  # newest first: what the reading budget leaves out is the oldest
        _read_run(run, folder, exp_name, budget)
    _expected_nodes(experiment)
    return experiment


def _expected_nodes(experiment: Experiment) -> None:
    """The job's node count from the newest records, and the nodes that left no file at all."""
    counts = [run.nnodes for run in experiment.runs if run.nnodes is not None]
    if not counts:
        return
    expected = min(counts[-1], MAX_NODES)
    experiment.expected_nodes = expected
    present = {run.rank for run in experiment.runs}
    experiment.missing_nodes = [rank for rank in range(expected) if rank not in present]


def _read_run(run: NodeRun, folder: Path, exp_name: str, budget: list[int]) -> None:
    """One run's files; its log only while `budget` (bytes of logs still to read, shared by the runs) lasts."""
    stem = folder / f"{exp_name}-node{run.rank}-{run.stamp}"
    record = _read_json(run.record_path or stem.with_name(stem.name + RECORD_SUFFIX), RECORD_LIMIT, run, "record")
    if isinstance(record, dict):
        _from_record(run, record)
    if run.log is None:
        run.problems.append(M("log-missing", path=str(stem.with_name(stem.name + ".log"))))
    elif budget[0] <= 0:
        run.problems.append(M("log-over-budget", path=str(run.log), budget=_mib(READ_BUDGET)))
    else:
        try:
            run.scan = scan_log(run.log)
            budget[0] -= run.scan.read
        except FileRefused as refused:
            run.problems.append(M("file-refused", what=M("what-log"), path=refused.path, problem=_refusal(refused)))
        except OSError as error:  # pragma: no cover - FileRefused covers the reads; a guard for the unexpected
            run.problems.append(M("file-refused", what=M("what-log"), path=str(run.log), problem=str(error)))
        else:
            _scan_problems(run)
    _read_attempts(run, stem.with_name(stem.name + ATTEMPTS_SUFFIX))
    stall = stem.with_name(stem.name + STALL_SUFFIX)
    if os.path.lexists(stall):
        report = _read_json(stall, STALL_LIMIT, run, "stall")
        if isinstance(report, dict):
            run.stall_report = _stall_report(report)


def _refusal(refused: FileRefused) -> Text:
    """Why a file was not read, in words."""
    if refused.problem.value == "too-big":
        return M("refused-too-big", size=refused.size, limit=refused.limit)
    return M(
        "refused", problem=refused.problem.value, detail=f" ({mask_text(refused.detail)})" if refused.detail else ""
    )


def _read_json(path: Path, limit: int, run: NodeRun, what: str) -> object:
    """The JSON value in `path`, or None with the problem noted on `run`."""
    kind = M(f"what-{what}")
    try:
        data = read_all(path, limit)
    except FileRefused as refused:
        if refused.problem.value != "missing" or what == "record":
            run.problems.append(M("file-refused", what=kind, path=str(path), problem=_refusal(refused)))
        return None
    text = data.decode("utf-8", "replace")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in data:
        run.problems.append(M("file-not-utf8", what=kind, path=str(path)))
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        detail = mask_text(str(error)[:200]) if isinstance(error, ValueError) else M("json-too-deep")
        run.problems.append(M("json-broken", what=kind, path=str(path), size=len(data), error=detail))
        return None
    if not isinstance(value, dict):
        run.problems.append(M("json-not-object", what=kind, path=str(path), type=type(value).__name__))
        return None
    return value


def _scan_problems(run: NodeRun) -> None:
    scan = run.scan
    assert scan is not None and run.log is not None
    if scan.sampled:
        run.problems.append(M("log-sampled", path=str(run.log), size=_mib(scan.size), read=_mib(scan.read)))
    if scan.binary:
        run.problems.append(M("log-binary", path=str(run.log)))
    elif scan.not_utf8:
        run.problems.append(M("log-not-utf8", path=str(run.log)))
    if scan.size == 0:
        run.problems.append(M("log-empty", path=str(run.log)))


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


# ---- typed reads of hostile JSON ----


def _text(value: object, limit: int = TEXT_LIMIT) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    return mask_text(str(value)[: limit * 2])[:limit]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63 else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _dict(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _list(value: object, limit: int) -> list[object]:
    return value[:limit] if isinstance(value, list) else []


def _ints(value: object, limit: int = 64) -> list[int]:
    return [n for n in (_int(v) for v in _list(value, limit)) if n is not None]


def _epoch(value: object) -> float | None:
    """`2026-12-05T07:05:02Z` (the record's `started_at`) as epoch seconds."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        return float(calendar.timegm(time.strptime(value, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _from_record(run: NodeRun, record: Mapping[str, object]) -> None:
    run.host = _text(record.get("host"), 200)
    run.started_at = _epoch(record.get("started_at"))
    plan = _dict(record.get("plan"))
    topology = _dict(plan.get("topology"))
    run.nnodes = _int(topology.get("nnodes"))
    values = _dict(_dict(plan.get("settings")).get("values"))
    run.batch_size = _int(values.get("batch_size"))
    run.num_train_steps = _int(values.get("num_train_steps"))
    run.phases = _phases(_dict(record.get("phases_s")), _float(record.get("launch_after_s")))
    run.attempts = [a for a in (_attempt(row) for row in _list(record.get("attempts"), MAX_ATTEMPTS)) if a]
    outcome = _dict(record.get("outcome"))
    if outcome:
        run.outcome = Outcome(
            _int(outcome.get("exit_code")),
            _text(outcome.get("class"), 60),
            _text(outcome.get("root_cause")),
            _text(outcome.get("verdict"), 60),
            _int(outcome.get("signal")),
        )
    progress = _dict(record.get("progress"))
    run.last_step = _int(progress.get("last_step_reached"))
    run.last_loss = _float(progress.get("last_loss"))
    run.step_time_s = _float(progress.get("step_time_s"))
    for saved in _list(progress.get("checkpoints_saved"), 1000):
        step = _int(_dict(saved).get("step"))
        if step is not None:
            run.checkpoints.append((step, _text(_dict(saved).get("path"), 400) or ""))
    run.transport = _transport(_dict(record.get("transport")))
    run.taco = _taco(_dict(record.get("taco")))
    if "health" in record:
        run.health = mask_data(_bounded(record["health"]))
    stall = _dict(record.get("stall"))
    if stall:
        run.stall_silent_s = _float(stall.get("silent_s"))
        run.stall_requested = "requested_at" in stall
        culprit = _dict(stall.get("culprit"))
        if culprit:
            run.culprit = Culprit(
                _ints(culprit.get("ranks")),
                _ints(culprit.get("nodes")),
                _text(culprit.get("why")),
                _ints(culprit.get("missing_nodes")),
            )
    master = _dict(record.get("master"))
    if master:
        run.master = {k: _text(master.get(k), 200) or "" for k in ("status", "waited_s", "error") if k in master}


def _phases(phases: Mapping[str, object], launch_after: float | None) -> list[Phase]:
    """Phases in the record's order, each starting where the one before ended; training starts at the record's
    `launch_after_s` when it gives one (the health summary and the record's first write lie between)."""
    found, clock = [], 0.0
    for name, value in list(phases.items())[:32]:
        seconds = _float(value)
        if seconds is None or seconds < 0:
            continue
        start = launch_after if name == "training" and launch_after is not None else clock
        found.append(Phase(mask_text(str(name))[:40], start, seconds))
        clock = start + seconds
    return found


def _attempt(row: object) -> AttemptRow | None:
    data = _dict(row)
    number = _int(data.get("attempt"))
    if number is None:
        return None
    return AttemptRow(
        number,
        _float(data.get("started_s")),
        _float(data.get("detected_s")),
        _float(data.get("restarted_s")),
        _text(data.get("cause"), 60),
        _text(data.get("detail"), 300),
        _int(data.get("resumed_step")),
        _int(data.get("best_step")),
        _int(data.get("checkpoints_saved")),
    )


def _transport(proof: Mapping[str, object]) -> list[dict[str, str]]:
    rows = []
    for node in _list(proof.get("nodes"), 64):
        data = _dict(node)
        rows.append(
            {
                "host": _text(data.get("host"), 200) or "?",
                "kind": _text(data.get("kind"), 40) or "?",
                "net": ", ".join(_text(v, 80) or "" for v in _list(data.get("net"), 8)),
                "gdr_channels": _text(data.get("gdr_channels"), 20) or "-",
                "nics": ", ".join(_text(v, 80) or "" for v in _list(data.get("nics"), 16)),
                "nccl_version": _text(data.get("nccl_version"), 40) or "-",
            }
        )
    return rows


def _taco(taco: Mapping[str, object]) -> dict[str, str] | None:
    if not taco:
        return None
    outcome = _dict(taco.get("outcome"))
    return {
        "status": _text(taco.get("status"), 40) or "?",
        "verdict": _text(outcome.get("verdict"), 40) or "-",
        "message": _text(outcome.get("message"), 400) or "",
        "message_zh": _text(outcome.get("message_zh"), 400) or "",
    }


def _bounded(value: object, depth: int = 0, budget: list[int] | None = None) -> object:
    """A copy of JSON `value` at most 6 levels deep and 500 values in all (the rest dropped), strings cut."""
    budget = [500] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0 or depth > 6:
        return "…"
    if isinstance(value, dict):
        return {str(k)[:80]: _bounded(v, depth + 1, budget) for k, v in list(value.items())[:64] if budget[0] >= 0}
    if isinstance(value, list):
        return [_bounded(v, depth + 1, budget) for v in value[:64] if budget[0] >= 0]
    if isinstance(value, str):
        return value[:TEXT_LIMIT]
    return value


def _read_attempts(run: NodeRun, folder: Path) -> None:
    """The attempts folder: the attempts the record lacks (a run still going, or ended before its record's last
    write) and whether this node gave up."""
    if not os.path.lexists(folder):
        return
    try:
        names = entries(folder)
    except FileRefused as refused:
        run.problems.append(M("file-refused", what=M("what-attempts"), path=refused.path, problem=_refusal(refused)))
        return
    known = {a.number for a in run.attempts}
    numbered = sorted((int(m["n"]), n) for n in names if (m := _ATTEMPT_FILE.match(n)) and names[n] is None)
    for number, name in numbered[:MAX_ATTEMPT_FILES]:
        if number in known:
            continue
        facts = _read_json(folder / name, SMALL_LIMIT, run, "attempt")
        if isinstance(facts, dict):
            resume = _dict(facts.get("resume"))
            run.attempts.append(AttemptRow(number, None, resumed_step=_int(resume.get("step"))))
    run.attempts.sort(key=lambda a: a.number)
    if GAVE_UP_FILE in names:
        gave_up = _read_json(folder / GAVE_UP_FILE, SMALL_LIMIT, run, "gave-up")
        run.gave_up = _text(_dict(gave_up).get("verdict"), 60) or "?"


def _stall_report(report: Mapping[str, object]) -> dict[str, object]:
    ranks = [_dict(r) for r in _list(report.get("ranks"), 256)]
    return {
        "silent_s": _float(report.get("silent_s")),
        "last_step": _int(report.get("last_step")),
        "ranks": [r for r in (_int(r.get("rank")) for r in ranks) if r is not None],
        "in_collective": [
            r for r in (_int(x.get("rank")) for x in ranks if x.get("in_collective") is True) if r is not None
        ],
        "in_dataloader": [
            r for r in (_int(x.get("rank")) for x in ranks if x.get("in_dataloader") is True) if r is not None
        ],
    }
