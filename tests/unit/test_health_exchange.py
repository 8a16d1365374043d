"""The nodes' figures shared through the log folder: each node's newest report of this run is read back bounded,
anything that is not a report is skipped without blocking, a missing node is waited for only as long as allowed,
and node 0's table of the whole job agrees with itself."""

from __future__ import annotations

import json
import os
import time

from entrypoint.core.settings import HealthMode
from entrypoint.health.exchange import GpuRow, NodeReport, gather, scan, write_report
from entrypoint.health.facts import GpuFigures
from entrypoint.health.table import job_rows, node_rows, render_table


def report(node: int, tflops: float = 780.0, written_at: float | None = None, cells=None) -> NodeReport:
    rows = tuple(
        GpuRow(
            i,
            f"00000000:{0x18 + i:02X}:00.0",
            f"SN{node}{i}",
            "NVIDIA H200",
            cells or {"procs": "pass"},
            GpuFigures(i, tflops=tflops, h2d_gbps=55.0, d2d_gbps=2100.0),
        )
        for i in range(2)
    )
    return NodeReport(node, f"host-{node}", written_at or time.time(), "start", "pass", rows, {"count": "pass"}, 400.0)


def test_reports_round_trip_and_the_newest_of_this_run_wins(tmp_path):
    now = time.time()
    assert write_report(tmp_path / "exp-node1-20260101-000000.health.json", report(1, 700.0, now - 10))
    assert write_report(tmp_path / "exp-node1-20260101-000100.health.json", report(1, 780.0, now))
    assert write_report(tmp_path / "exp-node2-20250101-000000.health.json", report(2, 1.0, now - 86400))  # old run
    assert write_report(tmp_path / "other-node2-20260101-000000.health.json", report(2))  # another experiment
    found = scan(tmp_path, "exp", 3, since=now - 60)
    assert list(found) == [1] and found[1].gpus[0].figures.tflops == 780.0
    assert found[1].gpus[1].serial == "SN11" and found[1].allreduce_gbps == 400.0


def test_what_is_not_a_report_is_skipped_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "exp-node1-a.health.json")
    (tmp_path / "exp-node2-a.health.json").mkdir()
    (tmp_path / "exp-node3-a.health.json").write_bytes(b"{" * 3_000_000)
    (tmp_path / "exp-node4-a.health.json").write_text(json.dumps({"format": 1, "node_rank": 4, "gpus": "x"}))
    (tmp_path / "exp-node5-a.health.json").write_text(json.dumps({**report(6).to_json()}))  # claims another node
    assert scan(tmp_path, "exp", 7, since=0) == {}


def test_a_missing_node_is_waited_for_only_as_long_as_allowed(tmp_path):
    write_report(tmp_path / "exp-node1-a.health.json", report(1))
    ticks = iter(range(100))
    naps: list[float] = []
    found, missing = gather(
        tmp_path, "exp", 3, own=0, since=time.time(), wait_s=5, clock=lambda: next(ticks), pause=naps.append
    )
    assert list(found) == [1] and missing == [2] and naps == [1.0] * 4  # clock 0..4, deadline 5


def test_the_job_table_flags_each_slow_gpu_against_the_same_median():
    reports = {0: report(0), 1: report(1), 2: report(2, tflops=600.0, cells={"procs": "fail"})}
    rows = job_rows(reports, HealthMode.WARN)
    slow = [(r["node"], r["gpu"]) for r in rows if r["cells"]["tflops"] == "warn"]
    assert slow == [(2, 0), (2, 1)]
    assert {r["status"] for r in rows if r["node"] == 2} == {"fail"}  # its passive cells failed too
    text = render_table(rows, node_rows(reports, [3]))
    assert "600!" in text and "SN20" in text and "node 3 (?): missing" in text
    header = text.splitlines()[0]
    assert header.split()[:4] == ["node", "gpu", "bus", "id"]
