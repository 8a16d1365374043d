"""The nodes' health figures shared through the log folder, the way the stall exchange shares diagnoses.

Every node writes its report beside its log, `<exp>-node<rank>-<stamp>.health.json` (atomically): its GPUs with the
passive checks' marks and the active tier's figures, its all-reduce bus bandwidth, its verdict. Each node then reads
the others' newest reports written since this run began (less a clock margin), waiting (on the first start, up to
`spec.GATHER_WAIT_S`) for the missing ones, so that every GPU is judged against the job's median; node 0 prints the
table of the whole job from them. Files that are not reports (FIFOs, folders, huge or malformed files) are skipped
without blocking.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.files import FileRefused, read_all
from entrypoint.core.findings import Status
from entrypoint.health.facts import GpuFigures, as_float, as_int, as_str, parse_figures
from entrypoint.health.verdict import Figures

REPORT_FORMAT = 1
REPORT_SUFFIX = ".health.json"
REPORT_LIMIT = 1 << 20
CLOCK_MARGIN_S = 60.0  # nodes' clocks may differ this much


@dataclass(frozen=True)
class GpuRow:
    """One GPU in a node's report: identity, the checks' marks, the figures."""

    index: int
    bus_id: str | None
    serial: str | None
    name: str | None
    cells: Mapping[str, str]
    figures: GpuFigures | None


@dataclass(frozen=True)
class NodeReport:
    node_rank: int
    host: str
    written_at: float
    stage: str
    status: str
    gpus: tuple[GpuRow, ...]
    node_cells: Mapping[str, str] = field(default_factory=dict)
    allreduce_gbps: float | None = None

    def figures(self) -> Figures:
        measured = {row.index: row.figures for row in self.gpus if row.figures is not None}
        return Figures(self.node_rank, measured, self.allreduce_gbps)

    def to_json(self) -> dict[str, object]:
        return {
            "format": REPORT_FORMAT,
            "node_rank": self.node_rank,
            "host": self.host,
            "written_at": self.written_at,
            "stage": self.stage,
            "status": self.status,
            "gpus": [
                {
                    "index": row.index,
                    "bus_id": row.bus_id,
                    "serial": row.serial,
                    "name": row.name,
                    "cells": dict(row.cells),
                    "figures": row.figures.to_json() if row.figures else None,
                }
                for row in self.gpus
            ],
            "node_cells": dict(self.node_cells),
            "allreduce_gbps": self.allreduce_gbps,
        }


def report_path(node_log: Path) -> Path:
    return node_log.with_suffix(REPORT_SUFFIX)


def write_report(path: Path, report: NodeReport) -> bool:
    """Atomically (temp file + rename); False when the shared folder refused it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(report.to_json(), ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


_STATUSES = {s.value for s in Status}


def _cells(raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        return {}
    return {str(k)[:40]: str(v) for k, v in list(raw.items())[:64] if str(v) in _STATUSES}


def parse_report(body: Mapping[str, object]) -> NodeReport | None:
    """A report read back; None when it is not one of ours."""
    node, written = as_int(body.get("node_rank"), 1 << 31), as_float(body.get("written_at"))
    raw_gpus = body.get("gpus")
    if body.get("format") != REPORT_FORMAT or node is None or written is None or not isinstance(raw_gpus, list):
        return None
    rows = []
    for position, item in enumerate(raw_gpus[:256]):
        if not isinstance(item, dict):
            continue
        index = as_int(item.get("index"), 1 << 16)
        rows.append(
            GpuRow(
                position if index is None else index,
                as_str(item.get("bus_id")),
                as_str(item.get("serial")),
                as_str(item.get("name")),
                _cells(item.get("cells")),
                parse_figures(item.get("figures"), position),
            )
        )
    return NodeReport(
        node,
        as_str(body.get("host"), 100) or "?",
        written,
        as_str(body.get("stage"), 40) or "?",
        str(body.get("status")) if body.get("status") in _STATUSES else "?",
        tuple(rows),
        _cells(body.get("node_cells")),
        as_float(body.get("allreduce_gbps")),
    )


def _read(path: Path) -> NodeReport | None:
    try:
        body = json.loads(read_all(path, REPORT_LIMIT))
    except (FileRefused, ValueError, RecursionError):
        return None
    return parse_report(body) if isinstance(body, dict) else None


def scan(log_dir: Path, exp_name: str, nnodes: int, since: float, skip: int | None = None) -> dict[int, NodeReport]:
    """Every node's newest report written at or after `since` (epoch seconds); `skip` a node (this one)."""
    found: dict[int, NodeReport] = {}
    try:
        names = [e.name for e in os.scandir(log_dir)]
    except OSError:
        return found
    for node in range(nnodes):
        if node == skip:
            continue
        stem = f"{exp_name}-node{node}-"
        for name in names:
            if not (name.startswith(stem) and name.endswith(REPORT_SUFFIX)):
                continue
            report = _read(log_dir / name)
            if report is None or report.node_rank != node or report.written_at < since:
                continue
            if node not in found or report.written_at > found[node].written_at:
                found[node] = report
    return found


def gather(
    log_dir: Path,
    exp_name: str,
    nnodes: int,
    own: int,
    since: float,
    wait_s: float,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> tuple[dict[int, NodeReport], list[int]]:
    """The other nodes' reports since `since` (less `CLOCK_MARGIN_S`), waiting up to `wait_s` for missing ones;
    returns them and the nodes still missing."""
    deadline = clock() + wait_s
    while True:
        found = scan(log_dir, exp_name, nnodes, since - CLOCK_MARGIN_S, skip=own)
        missing = [n for n in range(nnodes) if n != own and n not in found]
        if not missing or clock() >= deadline:
            return found, missing
        pause(1.0)
