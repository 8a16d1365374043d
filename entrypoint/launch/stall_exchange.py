"""A stall seen across nodes: every node's diagnosis shared through the log folder, and node 0's verdict on it.

Only node 0 detects a stall (openpi prints progress from global rank 0 only). It asks the other nodes first
(`culprit.request_reports`); a worker node sees the request on its next poll. Each node then shares its own
diagnosis (`share`): it asks its ranks for a flight-recorder dump (NCCL ranks have a dump pipe; gloo ranks have
none, and then nothing is waited for), waits up to `flight_recorder.DUMP_WAIT_S` for the dumps asked, and writes
its report beside its log. Node 0 then gathers every node's report (`verdict`), links the fresh dumps into
`<its dump folder>/all`, reads each rank's last collectives, runs torch's analyser there, and names the culprit:
the ranks behind in the recorder, else the ranks whose stack differs from the dominant group.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.inspect.environment import FR_DUMP_PREFIX
from entrypoint.launch.culprit import (
    GATHER_WAIT_S,
    Culprit,
    NodeReport,
    gather,
    name_culprit,
    node_report,
    request_reports,
    write_report,
)
from entrypoint.launch.flight_recorder import (
    DUMP_WAIT_S,
    AnalyserRun,
    RankTrace,
    analyse,
    collect,
    lagging,
    locations,
    read_dump,
    request_dumps,
    wait_for_dumps,
)
from entrypoint.launch.watchdog import Diagnosis

DUMP_CLOCK_SLACK_S = 5.0  # a dump counts for a report when written this long before the dump wait began, or later


@dataclass(frozen=True)
class Shared:
    """What one node contributed: the ranks asked for a dump, those whose dump arrived, whether its report was
    written, and the report itself."""

    asked: list[int]
    dumped: list[int]
    written: bool
    report: NodeReport


@dataclass(frozen=True)
class Verdict:
    """Node 0's reading of every node's diagnosis (the record's `stall.culprit` and `stall.flight_recorder`)."""

    culprit: Culprit
    dumps: list[int]  # ranks whose fresh dump was collected
    traces: list[RankTrace]
    analyser: AnalyserRun | None  # None: no dump to analyse
    folder: Path | None  # where the dumps were collected

    def flight_recorder_json(self) -> dict[str, object]:
        return {
            "dumps": self.dumps,
            "folder": str(self.folder) if self.folder and self.dumps else None,
            "traces": [t.to_json() for t in self.traces],
            "analyser": self.analyser.to_json() if self.analyser else None,
        }


@dataclass(frozen=True)
class Exchange:
    """This node's part in the stall exchange. `node_log` None: the node has no log folder, so its report cannot be
    shared (node 0 still uses its own)."""

    node_rank: int
    nnodes: int
    log_dir: Path
    exp_name: str
    node_log: Path | None
    env: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None  # the trainer's Python, which runs torch's analyser

    def ask_others(self) -> float | None:
        """Node 0, first thing on a stall: ask every other node for its diagnosis; the request's time (epoch
        seconds), None on a single node or when the shared folder refused it."""
        if self.nnodes < 2:
            return None
        at = time.time()
        return at if request_reports(self.log_dir, self.exp_name, clock=lambda: at) else None

    def share(self, diagnosis: Diagnosis, last_step: int | None, silent: float | None, request: float | None) -> Shared:
        """Ask the local ranks for dumps, wait for those asked (bounded), and write this node's report."""
        dump, pipe = locations(self.env)
        began = time.time()
        asked = request_dumps(pipe, diagnosis.ranks.values()) if pipe else []
        dumped = wait_for_dumps(dump, asked, since=began - 1) if dump and asked else []
        report = node_report(self.node_rank, diagnosis, last_step, silent, dump if dumped else None, request=request)
        written = write_report(report, self.node_log) if self.node_log is not None else False
        return Shared(asked, dumped, written, report)

    def verdict(self, own: NodeReport, request: float | None) -> Verdict:
        """Node 0: every node's report (waiting up to `GATHER_WAIT_S` for the others), the flight recorder's dumps
        and torch's analyser on them, and the culprit named."""
        others = self.nnodes > 1 and request is not None
        gathered = gather(
            self.log_dir,
            self.exp_name,
            self.nnodes,
            since=own.written_at,
            wait_s=GATHER_WAIT_S if others else 0,
            known={self.node_rank: own},
            request=request,
        )
        dumps: dict[int, Path] = {}
        for report in gathered.reports.values():
            if report.fr_dumps is None:
                continue
            since = report.written_at - DUMP_WAIT_S - DUMP_CLOCK_SLACK_S
            fresh = wait_for_dumps(report.fr_dumps, [r.rank for r in report.ranks], since=since, timeout=0)
            dumps.update({rank: Path(f"{report.fr_dumps}{rank}") for rank in fresh})
        own_dump, _ = locations(self.env)
        folder = Path(own_dump).parent / "all" if own_dump else None
        traces: list[RankTrace] = []
        analyser = None
        collected: list[int] = []
        if dumps and folder is not None:
            try:
                collected = collect(dumps, folder)
            except OSError:
                collected = []
            for rank in collected:
                trace = read_dump(folder / f"{FR_DUMP_PREFIX}{rank}", rank)
                if trace is not None:
                    traces.append(trace)
            if collected:
                analyser = analyse(folder, self.python, self.env)
        culprit = name_culprit(gathered, lagging(traces))
        return Verdict(culprit, collected, traces, analyser, folder)
