"""The node health gate, run by the launcher before the first torchrun, by `check`, and by the attempt shim before
a restart: the passive tier (a bounded child reading NVML or nvidia-smi and the kernel log; the RDMA ports from the
fabric inventory), then, when asked and no hard fault was found, the active tier (a bounded child measuring every
GPU at once); this node's report shared through the log folder; the other nodes' reports read for the job's median
(waited for on the first start); the verdict, and the job's table from every report.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.findings import Finding, Status, failed, warned
from entrypoint.core.host import Host
from entrypoint.fabric.inventory import inspect_fabric
from entrypoint.health.exchange import GpuRow, NodeReport, gather, write_report
from entrypoint.health.facts import Gpu, Probe, ProbeStatus, given_gpus
from entrypoint.health.messages import MESSAGES as M
from entrypoint.health.ports import PortVerdict, fabric_ports, judge_ports
from entrypoint.health.spec import HealthGate
from entrypoint.health.table import job_rows, node_rows, render_table
from entrypoint.health.tiers import ActiveRun, ActiveStatus, run_active, run_probe
from entrypoint.health.verdict import Figures, Mark, Node, active_findings, match_figures, passive_findings


@dataclass(frozen=True)
class Context:
    """Where and how the gate runs on this node. `env` is what the children get (the GPUs training will be given);
    `share` this node's report file (None: nothing shared); `since` the epoch time this run began."""

    spec: HealthGate
    node: Node
    host: Host
    env: Mapping[str, str]
    share: Path | None
    log_dir: Path | None
    exp_name: str
    since: float
    python: str | None
    stage: str = "start"


@dataclass
class GateResult:
    spec: HealthGate
    node: Node
    findings: list[Finding]
    probe: Probe | None = None
    ports: PortVerdict | None = None
    active: ActiveRun | None = None
    reports: dict[int, NodeReport] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(f.status is Status.FAIL for f in self.findings)

    @property
    def status(self) -> Status:
        if self.failed:
            return Status.FAIL
        return Status.WARN if any(f.status is Status.WARN for f in self.findings) else Status.PASS

    def faulty_serials(self) -> list[str]:
        """The serials of the GPUs a failing finding names (for the restart's advice)."""
        serials = []
        for gpu in self.probe.gpus if self.probe else ():
            if gpu.serial and any(f.status is Status.FAIL and f.where and gpu.serial in f.where for f in self.findings):
                serials.append(gpu.serial)
        return serials

    def rows(self) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        return job_rows(self.reports, self.spec.mode), node_rows(self.reports, self.missing)

    def table(self) -> str:
        return render_table(*self.rows())

    def to_json(self) -> dict[str, object]:
        gpus, nodes = self.rows()
        return {
            "gate": self.spec.to_json(),
            "status": self.status.value,
            "seconds": round(self.seconds, 3),
            "checks": [f.to_json() for f in self.findings],
            "passive": self.probe.to_json() if self.probe else None,
            "rdma": self.ports.to_json() if self.ports else None,
            "active": self.active.to_json() if self.active else None,
            "table": {"gpus": gpus, "nodes": nodes},
            "missing_nodes": self.missing,
        }


_RANK = {Status.PASS.value: 0, Status.SKIP.value: 0, Status.WARN.value: 1, Status.FAIL.value: 2}


def _cells(marks: Sequence[Mark], gpu: int | None) -> dict[str, str]:
    """Each check's worst status for one GPU (or the node)."""
    cells: dict[str, str] = {}
    for mark in marks:
        if mark.gpu == gpu and _RANK[mark.status.value] >= _RANK.get(cells.get(mark.check, ""), -1):
            cells[mark.check] = mark.status.value
    return cells


def _report(
    ctx: Context, ours: Sequence[Gpu], marks: Sequence[Mark], active: ActiveRun | None, status: Status
) -> NodeReport:
    measured = match_figures(ours, active.gpus) if active else {}
    rows = tuple(
        GpuRow(g.index, g.bus_id, g.serial, g.name, _cells(marks, g.index), measured.get(g.index)) for g in ours
    )
    allreduce = active.allreduce_gbps if active else None
    return NodeReport(
        ctx.node.rank, ctx.node.host, time.time(), ctx.stage, status.value, rows, _cells(marks, None), allreduce
    )


def _active_problem(node: Node, active: ActiveRun) -> list[Finding]:
    if active.status is ActiveStatus.SKIPPED:
        why = active.why or M("unknown")
        return [warned("health.active", M("active-skipped", node=node.label, why=why), M("active-skipped-fix"))]
    fix = M("fault-fix", node=node.label, serial=M("unknown"))
    if active.status is ActiveStatus.TIMED_OUT:
        return [failed("health.active", M("active-timed-out", node=node.label, seconds=active.detail or "?"), fix)]
    if active.status is ActiveStatus.CRASHED:
        what = M("active-crashed", node=node.label, code="?", last=active.detail or "?")
        return [failed("health.active", what, fix)]
    if active.allreduce_error:
        return [failed("health.allreduce", M("allreduce-error", node=node.label, error=active.allreduce_error), fix)]
    return []


def run_gate(ctx: Context, active: bool, wait_s: float) -> GateResult:
    """The passive tier, then (`active`, and no hard fault so far) the active tier and the exchange of figures."""
    start = time.monotonic()
    node = ctx.node
    probe = run_probe(ctx.env, ctx.spec.passive_timeout_s)
    ours = given_gpus(probe.gpus, ctx.env) if probe.status is ProbeStatus.OK else ()
    ports = judge_ports(fabric_ports(inspect_fabric(ctx.host), ctx.env)) if node.nnodes > 1 else None
    findings, marks = passive_findings(node, probe, ours, ports, ctx.spec.mode, ctx.spec.passive_timeout_s)
    result = GateResult(ctx.spec, node, findings, probe, ports)
    measure = active and probe.status is ProbeStatus.OK and not result.failed and bool(ours)
    run = run_active(ctx.python, ctx.env, ctx.spec.allreduce, ctx.spec.active_timeout_s) if measure else None
    result.active = run
    if run is not None:
        findings += _active_problem(node, run)
    own = _report(ctx, ours, marks, run, result.status)
    if ctx.share is not None:
        write_report(ctx.share, own)
    if ctx.log_dir is not None and node.nnodes > 1:
        wait = wait_s if run is not None and run.status is ActiveStatus.OK else 0.0
        result.reports, result.missing = gather(ctx.log_dir, ctx.exp_name, node.nnodes, node.rank, ctx.since, wait)
    if run is not None and run.status is ActiveStatus.OK:
        figures = Figures(node.rank, match_figures(ours, run.gpus), run.allreduce_gbps)
        peers = [r.figures() for r in result.reports.values()]
        timings = {"seconds": run.seconds or 0.0, "import_s": run.import_s or 0.0}
        more, active_marks = active_findings(node, ours, figures, peers, ctx.spec.mode, timings)
        findings += more
        marks = [*marks, *active_marks]
        if result.missing:
            nodes = ", ".join(map(str, result.missing))
            what = M("peers-missing", nodes=nodes, seconds=f"{wait_s:g}")
            findings.append(warned("health.peers", what, M("peers-missing-fix")))
        own = _report(ctx, ours, marks, run, result.status)
        if ctx.share is not None:
            write_report(ctx.share, own)
    result.reports[node.rank] = own
    result.seconds = time.monotonic() - start
    return result


def this_host() -> str:
    return socket.gethostname()[:100]
