"""The job's health table (node x GPU x check), printed by node 0 and kept in the start-up record and `check --json`.

Passive cells come from each node's own report; the active figures' flags are recomputed here for every node
against the same job median, so the table agrees with itself whatever order the nodes finished in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from entrypoint.core.findings import Status
from entrypoint.core.settings import HealthMode
from entrypoint.health.exchange import NodeReport
from entrypoint.health.facts import Gpu
from entrypoint.health.verdict import METRICS, Node, active_findings

PASSIVE_COLUMNS = ("procs", "ecc", "remap", "recovery", "clocks", "xid")
NODE_CHECKS = ("count", "rdma", "allreduce_gbps", "probe")
_CELL = {Status.PASS.value: "ok", Status.WARN.value: "warn", Status.FAIL.value: "FAIL", Status.SKIP.value: "skip"}


def _gpus(report: NodeReport) -> list[Gpu]:
    return [Gpu(row.index, row.name, None, row.serial, row.bus_id) for row in report.gpus]


def _worst(statuses: Sequence[str]) -> str:
    for status in (Status.FAIL.value, Status.WARN.value, Status.PASS.value):
        if status in statuses:
            return status
    return "-"


def job_rows(reports: Mapping[int, NodeReport], mode: HealthMode) -> list[dict[str, object]]:
    """One row per GPU of every node that reported: identity, each check's status, the figures."""
    everyone = [r.figures() for r in reports.values()]
    rows: list[dict[str, object]] = []
    for rank in sorted(reports):
        report = reports[rank]
        own = report.figures()
        node = Node(rank, report.host, len(report.gpus), len(reports))
        peers = [f for f in everyone if f.node != rank]
        _, marks = active_findings(node, _gpus(report), own, peers, mode, {})
        flagged = {(m.gpu, m.check): m.status.value for m in marks}
        for row in report.gpus:
            cells = {name: row.cells.get(name, "-") for name in PASSIVE_COLUMNS}
            figures = {metric: getattr(row.figures, metric) if row.figures else None for metric, _ in METRICS}
            for metric, _ in METRICS:
                cells[metric] = flagged.get((row.index, metric), "-")
            if row.figures is not None and row.figures.error:
                cells["active"] = Status.FAIL.value
            rows.append(
                {
                    "node": rank,
                    "host": report.host,
                    "gpu": row.index,
                    "bus_id": row.bus_id,
                    "serial": row.serial,
                    "cells": cells,
                    "figures": figures,
                    "status": _worst([*cells.values(), *(v for k, v in row.cells.items() if k not in cells)]),
                }
            )
    return rows


def node_rows(reports: Mapping[int, NodeReport], missing: Sequence[int]) -> list[dict[str, object]]:
    """Node-level checks per node (GPU count, RDMA ports, all-reduce) and the nodes that sent nothing."""
    rows: list[dict[str, object]] = [
        {
            "node": rank,
            "host": reports[rank].host,
            "stage": reports[rank].stage,
            "status": reports[rank].status,
            "cells": {name: reports[rank].node_cells.get(name, "-") for name in NODE_CHECKS},
            "allreduce_gbps": reports[rank].allreduce_gbps,
        }
        for rank in sorted(reports)
    ]
    rows += [{"node": rank, "host": None, "stage": None, "status": "missing", "cells": {}} for rank in missing]
    return rows


def _figure(value: object, status: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    mark = "!" if status in (Status.WARN.value, Status.FAIL.value) else ""
    return f"{value:.0f}{mark}" if value >= 100 else f"{value:.1f}{mark}"


def render_table(rows: Sequence[Mapping[str, object]], nodes: Sequence[Mapping[str, object]]) -> str:
    """Fixed-width text: one line per GPU, then one per node."""
    header = ["node", "gpu", "bus id", "serial", *PASSIVE_COLUMNS, "TFLOPS", "H2D GB/s", "D2D GB/s", "verdict"]
    lines = [header]
    for row in rows:
        cells = row["cells"]
        figures = row["figures"]
        assert isinstance(cells, Mapping) and isinstance(figures, Mapping)
        lines.append(
            [
                str(row["node"]),
                str(row["gpu"]),
                str(row["bus_id"] or "?"),
                str(row["serial"] or "?"),
                *(_CELL.get(str(cells.get(name)), "-") for name in PASSIVE_COLUMNS),
                *(_figure(figures.get(metric), cells.get(metric)) for metric, _ in METRICS),
                _CELL.get(str(row["status"]), "-"),
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in lines]
    for node in nodes:
        cells = node.get("cells")
        assert isinstance(cells, Mapping)
        listed = ", ".join(f"{name} {_CELL[str(v)]}" for name, v in cells.items() if str(v) in _CELL)
        allreduce = node.get("allreduce_gbps")
        extra = f", all-reduce {allreduce:.0f} GB/s" if isinstance(allreduce, int | float) else ""
        status = str(node["status"])
        text.append(f"node {node['node']} ({node.get('host') or '?'}): {_CELL.get(status, status)}; {listed}{extra}")
    return "\n".join(text)
