"""The gate's verdict: pure functions from facts to findings, and to marks (node x GPU x check) for the job's table.

Hard faults fail the node whatever the mode (a GPU missing or lost, another process or memory already in use on our
GPU, an uncorrected ECC error, a row remap pending or failed, a recovery action the driver asks for, a fatal Xid, an
RDMA port down while its peers are up, a GPU measurement that failed or hung). Performance outliers (throttling
clock event reasons, a GPU more than `OUTLIER` below the node's best GPU or the job's median, a figure below its
SKU's floor, a slow RDMA port) warn, and fail under `VLA_HEALTH=fail`. Every finding names the node, the GPU's index,
bus id and serial, and says what to do, in both languages.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from entrypoint.core.findings import Finding, Status, failed, passed, warned
from entrypoint.core.messages import Text, joined
from entrypoint.core.settings import HealthMode
from entrypoint.health.facts import Gpu, GpuFigures, Probe, ProbeStatus
from entrypoint.health.messages import MESSAGES as M
from entrypoint.health.ports import PortVerdict
from entrypoint.health.sku import floor_for
from entrypoint.health.xid import WINDOW_S, bus_key

OUTLIER = 0.10  # more than 10% below the node's best GPU or the job's median
MEMORY_IN_USE_MIB = 256  # one CUDA context takes ~600 MiB; an idle GPU shows 0
THROTTLE_MASK = {0x8: "reason-8", 0x20: "reason-32", 0x40: "reason-64", 0x80: "reason-128"}
# Idle (0x1), the software power cap (0x4), sync boost and application clocks are normal.
CHECKED_FIELDS = ("processes", "ecc_uncorrected", "remap", "recovery_action", "clock_reasons", "serial")
METRICS = (("tflops", "TFLOPS"), ("h2d_gbps", "GB/s"), ("d2d_gbps", "GB/s"))


@dataclass(frozen=True)
class Node:
    """Who is judged: this node's rank and host, the GPUs stated per node, the job's node count."""

    rank: int
    host: str
    stated_gpus: int
    nnodes: int

    @property
    def label(self) -> Text:
        return M("node", node=self.rank, host=self.host)


@dataclass(frozen=True)
class Mark:
    """One cell of the job's table: a check's status for a GPU (NVML index) or for the node (`gpu` None)."""

    gpu: int | None
    check: str
    status: Status


def gpu_label(gpu: Gpu) -> Text:
    unknown = M("unknown")
    return M("gpu", index=gpu.index, bus=gpu.bus_id or unknown, serial=gpu.serial or unknown)


def _serial(gpu: Gpu) -> Text:
    return Text(gpu.serial, gpu.serial) if gpu.serial else M("unknown")


class _Judge:
    """Collects findings and marks for one node."""

    def __init__(self, node: Node, mode: HealthMode) -> None:
        self.node, self.mode = node, mode
        self.findings: list[Finding] = []
        self.marks: list[Mark] = []

    def fault(self, id: str, gpu: Gpu | None, check: str, message: Text, fix: Text) -> None:
        self.findings.append(failed(f"health.{id}", message, fix, self._where(gpu)))
        self.marks.append(Mark(gpu.index if gpu else None, check, Status.FAIL))

    def outlier(
        self, id: str, gpu: Gpu | None, check: str, message: Text, fixes: tuple[Text, Text] | None = None
    ) -> None:
        """A performance outlier: warns, fails under `VLA_HEALTH=fail`; `fixes` (warn, fail) replace the GPU's."""
        serial = _serial(gpu) if gpu else M("unknown")
        warn_fix, fail_fix = fixes or (
            M("outlier-warn-fix"),
            M("outlier-fail-fix", node=self.node.label, serial=serial),
        )
        if self.mode is HealthMode.FAIL:
            self.findings.append(failed(f"health.{id}", message, fail_fix, self._where(gpu)))
            self.marks.append(Mark(gpu.index if gpu else None, check, Status.FAIL))
        else:
            self.findings.append(warned(f"health.{id}", message, warn_fix, self._where(gpu)))
            self.marks.append(Mark(gpu.index if gpu else None, check, Status.WARN))

    def ok(self, gpu: Gpu | None, check: str) -> None:
        self.marks.append(Mark(gpu.index if gpu else None, check, Status.PASS))

    def _where(self, gpu: Gpu | None) -> str:
        where = f"node {self.node.rank}"
        return f"{where} GPU {gpu.index} {gpu.bus_id or ''} {gpu.serial or ''}".rstrip() if gpu else where

    def failed_gpus(self) -> set[int | None]:
        return {m.gpu for m in self.marks if m.status is Status.FAIL}


def _probe_findings(judge: _Judge, probe: Probe, timeout_s: float) -> bool:
    """The probe's own trouble; True when there are GPU facts to judge."""
    node = judge.node
    if probe.status is ProbeStatus.TIMED_OUT:
        fix = M("fault-fix", node=node.label, serial=M("unknown"))
        judge.fault("probe", None, "probe", M("probe-timed-out", node=node.label, seconds=f"{timeout_s:g}"), fix)
        return False
    if probe.status is ProbeStatus.FAILED:
        what = M("probe-failed", node=node.label, detail=probe.detail or "?")
        judge.findings.append(warned("health.probe", what, M("probe-failed-fix")))
        judge.marks.append(Mark(None, "probe", Status.WARN))
        return False
    if probe.status is ProbeStatus.UNAVAILABLE:
        what = M("probe-unavailable", node=node.label, problems="; ".join(probe.problems) or "?")
        judge.findings.append(warned("health.probe", what, M("probe-unavailable-fix")))
        judge.marks.append(Mark(None, "probe", Status.WARN))
        return False
    return True


def _gpu_findings(judge: _Judge, gpu: Gpu) -> None:
    node, label = judge.node.label, gpu_label(gpu)
    fix = M("fault-fix", node=node, serial=_serial(gpu))
    if gpu.lost:
        error = next(iter(gpu.errors.values()), "GPU is lost")
        judge.fault("gpu-lost", gpu, "gpu", M("lost", node=node, gpu=label, error=error), fix)
        return
    if gpu.processes:
        listed = joined(
            M("process", pid=p.pid, mib=p.used_mib if p.used_mib is not None else "?") for p in gpu.processes
        )
        message = M("foreign", node=node, gpu=label, processes=listed)
        judge.fault("foreign-process", gpu, "procs", message, M("foreign-fix", node=node, serial=_serial(gpu)))
    elif gpu.memory_used_mib is not None and gpu.memory_used_mib > MEMORY_IN_USE_MIB:
        message = M("memory-in-use", node=node, gpu=label, used=gpu.memory_used_mib)
        judge.fault("memory-in-use", gpu, "procs", message, M("foreign-fix", node=node, serial=_serial(gpu)))
    else:
        judge.ok(gpu, "procs")
    if gpu.ecc_uncorrected:
        judge.fault("ecc", gpu, "ecc", M("ecc", node=node, gpu=label, count=gpu.ecc_uncorrected), fix)
    else:
        judge.ok(gpu, "ecc")
    if gpu.remap_failure:
        judge.fault("row-remap", gpu, "remap", M("remap-failure", node=node, gpu=label), fix)
    elif gpu.remap_pending:
        judge.fault("row-remap", gpu, "remap", M("remap-pending", node=node, gpu=label), fix)
    else:
        judge.ok(gpu, "remap")
    if gpu.recovery_action:
        code = gpu.recovery_action
        action = M(f"action-{code}") if code in (1, 2, 3, 4) else M("action-other", code=code)
        judge.fault("recovery-action", gpu, "recovery", M("recovery", node=node, gpu=label, action=action), fix)
    else:
        judge.ok(gpu, "recovery")
    reasons = [M(name) for bit, name in THROTTLE_MASK.items() if (gpu.clock_reasons or 0) & bit]
    if reasons:
        judge.outlier("throttle", gpu, "clocks", M("throttle", node=node, gpu=label, reasons=joined(reasons)))
    else:
        judge.ok(gpu, "clocks")


def _xid_findings(judge: _Judge, probe: Probe, ours: Sequence[Gpu]) -> None:
    node = judge.node.label
    kernel = probe.kernel
    if not kernel.readable:
        judge.findings.append(
            passed("health.xid", M("xid-unreadable", node=node, problem=kernel.problem or "?"), "/dev/kmsg")
        )
        return
    by_bus = {g.bus: g for g in ours if g.bus_id}
    fatal = [e for e in kernel.events if e.fatal and (e.age_s is None or e.age_s <= WINDOW_S) and e.bus in by_bus]
    for event in fatal:
        gpu = by_bus[bus_key(event.bus)]
        age = M("xid-age", minutes=round(event.age_s / 60)) if event.age_s is not None else M("xid-age-unknown")
        message = M("xid", node=node, gpu=gpu_label(gpu), code=event.code, age=age, line=event.line)
        judge.fault("xid", gpu, "xid", message, M("fault-fix", node=node, serial=_serial(gpu)))
    flagged = {bus_key(e.bus) for e in fatal}
    for gpu in ours:
        if gpu.bus not in flagged:
            judge.ok(gpu, "xid")
    if not fatal:
        judge.findings.append(
            passed("health.xid", M("xid-clean", node=node, hours=round(WINDOW_S / 3600)), "/dev/kmsg")
        )


def _port_findings(judge: _Judge, ports: PortVerdict) -> None:
    node = judge.node.label
    for port, peers in ports.down:
        message = M(
            "port-down", node=node, port=port.name, state=port.state_name, peers=", ".join(p.name for p in peers)
        )
        judge.fault("rdma-port-down", None, "rdma", message, M("port-fix", node=node, port=port.name))
    for port, best in ports.slow:
        message = M("port-slow", node=node, port=port.name, rate=f"{port.rate_gbps:g}", best=f"{best:g}")
        fixes = (M("port-slow-fix"), M("port-fix", node=node, port=port.name))
        judge.outlier("rdma-port-slow", None, "rdma", message, fixes)
    if ports.healthy and not ports.down and not ports.slow:
        rates = ", ".join(sorted({f"{p.rate_gbps:g}" for p in ports.healthy if p.rate_gbps is not None})) or "?"
        judge.findings.append(passed("health.rdma", M("ports-ok", node=node, count=len(ports.healthy), rates=rates)))
        judge.ok(None, "rdma")


def passive_findings(
    node: Node, probe: Probe, ours: Sequence[Gpu], ports: PortVerdict | None, mode: HealthMode, timeout_s: float
) -> tuple[list[Finding], list[Mark]]:
    """Every passive check of this node: the probe, the GPU count, each GPU given to it, the kernel log, the ports."""
    judge = _Judge(node, mode)
    if _probe_findings(judge, probe, timeout_s):
        if len(ours) < node.stated_gpus:
            present = joined(gpu_label(g) for g in ours) if ours else M("none-present")
            message = M("count", node=node.label, seen=len(ours), stated=node.stated_gpus, present=present)
            judge.fault("gpu-count", None, "count", message, M("count-fix", node=node.label))
        else:
            judge.ok(None, "count")
        for gpu in ours:
            _gpu_findings(judge, gpu)
        _xid_findings(judge, probe, ours)
        if not judge.failed_gpus() and ours and not any(f.id == "health.throttle" for f in judge.findings):
            ok = M("gpus-ok", node=node.label, count=len(ours), source=probe.source, driver=probe.driver or "?")
            judge.findings.insert(0, passed("health.gpus", ok))
        missing = sorted({u for g in ours for u in g.unsupported if u in CHECKED_FIELDS})
        if missing:
            judge.findings.append(
                passed("health.unsupported", M("unsupported", node=node.label, fields=", ".join(missing)))
            )
    if ports is not None:
        _port_findings(judge, ports)
    return judge.findings, judge.marks


# -- the active tier ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """One node's measured figures as the verdict needs them: per NVML GPU index, and the node's all-reduce."""

    node: int
    gpus: Mapping[int, GpuFigures]
    allreduce_gbps: float | None = None


def match_figures(ours: Sequence[Gpu], measured: Sequence[GpuFigures]) -> dict[int, GpuFigures]:
    """Each measured GPU (torch's order) matched to a GPU given to this node: by UUID, else bus id, else position
    (CUDA's order is the order of `CUDA_VISIBLE_DEVICES`, which `given_gpus` follows)."""
    matched: dict[int, GpuFigures] = {}
    for position, figures in enumerate(measured):
        gpu = next((g for g in ours if figures.uuid and g.uuid == figures.uuid), None)
        if gpu is None and figures.bus_id:
            gpu = next((g for g in ours if g.bus_id and g.bus == bus_key(figures.bus_id)), None)
        if gpu is None and position < len(ours):
            gpu = ours[position]
        if gpu is not None and gpu.index not in matched:
            matched[gpu.index] = figures
    return matched


def _below(value: float, reference: float) -> int | None:
    """How many percent `value` is below `reference`, when more than `OUTLIER`."""
    if reference <= 0 or value >= reference * (1 - OUTLIER):
        return None
    return round((1 - value / reference) * 100)


def slow_reason(
    value: float, best: float | None, median: float | None, floor: float | None
) -> tuple[str, float, int] | None:
    """(reference, its value, percent below) for the first rule a figure breaks: the node's best, the job's median,
    the SKU floor (any shortfall); None when it breaks none."""
    for name, reference in (("node", best), ("job", median)):
        if reference is not None:
            percent = _below(value, reference)
            if percent is not None:
                return name, reference, percent
    if floor is not None and value < floor:
        return "floor", floor, round((1 - value / floor) * 100)
    return None


def job_median(metric: str, nodes: Iterable[Figures]) -> float | None:
    """The median of a metric over every GPU of every node that reported, when more than one node did."""
    reports = list(nodes)
    if len(reports) < 2:
        return None
    values = [v for f in reports for g in f.gpus.values() if (v := getattr(g, metric)) is not None]
    return statistics.median(values) if values else None


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _span(values: Sequence[float]) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return _fmt(low) if _fmt(low) == _fmt(high) else f"{_fmt(low)}-{_fmt(high)}"


def active_findings(
    node: Node,
    ours: Sequence[Gpu],
    own: Figures,
    peers: Sequence[Figures],
    mode: HealthMode,
    timings: Mapping[str, float],
) -> tuple[list[Finding], list[Mark]]:
    """Each measured GPU against the node's best, the job's median (over `own` and `peers`) and its SKU's floor."""
    judge = _Judge(node, mode)
    by_index = {g.index: g for g in ours}
    everyone = [own, *peers]
    for index, figures in own.gpus.items():
        gpu = by_index.get(index, Gpu(index))
        if figures.error:
            message = M("active-error", node=node.label, gpu=gpu_label(gpu), error=figures.error)
            judge.fault("active-error", gpu, "active", message, M("fault-fix", node=node.label, serial=_serial(gpu)))
    sku = floor_for(next((g.name for g in ours if g.name), None) or next((f.name for f in own.gpus.values()), None))
    for metric, unit in METRICS:
        values = {i: v for i, f in own.gpus.items() if (v := getattr(f, metric)) is not None}
        best = max(values.values(), default=None)
        median = job_median(metric, everyone)
        for index, value in values.items():
            gpu = by_index.get(index, Gpu(index))
            reason = slow_reason(value, best, median, sku.of(metric) if sku else None)
            if reason is None:
                judge.ok(gpu, metric)
                continue
            name, expected, percent = reason
            reference = M("reference-floor", sku=sku.sku) if name == "floor" and sku else M(f"reference-{name}")
            message = M(
                "slow",
                node=node.label,
                gpu=gpu_label(gpu),
                metric=M(f"metric-{metric}"),
                value=_fmt(value),
                unit=unit,
                percent=percent,
                reference=reference,
                expected=_fmt(expected),
            )
            judge.outlier("slow-gpu", gpu, metric, message)
    if own.allreduce_gbps is not None:
        others = [f.allreduce_gbps for f in everyone if f.allreduce_gbps is not None]
        median = statistics.median(others) if len(others) >= 2 else None
        reason = slow_reason(own.allreduce_gbps, None, median, sku.allreduce_gbps if sku else None)
        if reason is None:
            judge.ok(None, "allreduce_gbps")
        else:
            name, expected, percent = reason
            reference = M("reference-floor", sku=sku.sku) if name == "floor" and sku else M("reference-job-nodes")
            message = M(
                "slow-node",
                node=node.label,
                metric=M("metric-allreduce_gbps"),
                value=_fmt(own.allreduce_gbps),
                unit="GB/s",
                percent=percent,
                reference=reference,
                expected=_fmt(expected),
            )
            fixes = (M("allreduce-slow-fix"), M("node-fail-fix", node=node.label))
            judge.outlier("slow-node", None, "allreduce_gbps", message, fixes)
    if own.gpus:  # the figures in one line, whatever the outliers above say
        column = {m: [v for f in own.gpus.values() if (v := getattr(f, m)) is not None] for m, _ in METRICS}
        allreduce = M("active-allreduce", busbw=_fmt(own.allreduce_gbps)) if own.allreduce_gbps is not None else ""
        compared = M("compared-job", nodes=len(everyone)) if len(everyone) > 1 else M("compared-node")
        if sku is not None:
            compared = M("compared-floor", what=compared, sku=sku.sku)
        message = M(
            "active-ok",
            node=node.label,
            count=len(own.gpus),
            seconds=f"{timings.get('seconds', 0):.1f}",
            import_s=f"{timings.get('import_s', 0):.1f}",
            tflops=_span(column["tflops"]),
            h2d=_span(column["h2d_gbps"]),
            d2d=_span(column["d2d_gbps"]),
            allreduce=allreduce,
            compared=compared,
        )
        judge.findings.insert(0, passed("health.active", message))
    return judge.findings, judge.marks
