"""Bandwidth preflight: a short all-reduce over every process of every node, through torchrun, before training.

Bus bandwidth per message size (median of repetitions) is compared with a minimum: half of what the fabric
should give (NVLink within a node ~370 GB/s, 8x400G RDMA ~360 GB/s, TCP sockets ~2 GB/s) unless set. A run
that does not finish within the timeout is a hang, which at this point means peer-to-peer transport. It uses
MASTER_PORT + 1, so that port must be open between nodes too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TextIO, TypedDict

from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.messages import Lang, Text, render
from entrypoint.core.settings import Device
from entrypoint.fabric.inventory import Transport
from entrypoint.fabric.nccl_debug import debug_env
from entrypoint.fabric.nccl_log import proof_findings, read_logs
from entrypoint.inspect.topology import Topology, preflight_port
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.messages import say
from entrypoint.launch.rendezvous_wait import wait_for_master
from entrypoint.plan import Plan, torchrun_command

TYPICAL_BUSBW_GBPS = {Transport.LOCAL: 370.0, Transport.IB: 360.0, Transport.ROCE: 360.0, Transport.SOCKET: 2.0}
GPU_SIZES = (1 << 20, 16 << 20, 128 << 20, 512 << 20)
CPU_SIZES = (64 << 10, 1 << 20, 8 << 20)
OUTPUT_TAIL_CHARS = 4000


class Row(TypedDict):
    """One message size as the worker reports it."""

    bytes: int
    busbw_gbps: list[float]
    median_gbps: float


class PreflightStatus(StrEnum):
    PASSED = "passed"
    BELOW = "below"  # the largest message's bus bandwidth is under the minimum
    HANG = "hang"  # not finished within VLA_PREFLIGHT_TIMEOUT
    ERROR = "error"  # the all-reduce failed or wrote no result
    SKIPPED = "skipped"  # one process in the whole job


# The results that fail the launch with `VLA_PREFLIGHT=fail`, and `vla-entrypoint preflight` (exit 3).
FAILURES = frozenset({PreflightStatus.HANG, PreflightStatus.ERROR, PreflightStatus.BELOW})


@dataclass
class PreflightResult:
    status: PreflightStatus
    minimum_gbps: float | None
    results: list[Row] = field(default_factory=list)
    transport: dict[str, object] | None = None
    findings: list[Finding] = field(default_factory=list)
    output_tail: str = ""

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status.value,
            "minimum_gbps": self.minimum_gbps,
            "results": self.results,
            "transport": self.transport,
            "findings": [f.to_json() for f in self.findings],
        }


def preflight_topology(topo: Topology) -> Topology:
    """The job's topology on the port next to MASTER_PORT: a node that finishes its preflight early must not
    rendezvous with another node's still-running preflight when it starts training."""
    return dataclasses.replace(topo, master_port=preflight_port(topo.master_port))


def minimum_busbw(plan: Plan) -> float | None:
    """The bar the largest message must reach; None where there is nothing to compare (CPU, one process)."""
    if plan.settings.preflight_min_busbw is not None:
        return float(plan.settings.preflight_min_busbw)
    if plan.topology.device is Device.CPU or plan.topology.world_size < 2:
        return None
    return TYPICAL_BUSBW_GBPS[plan.fabric.transport] / 2


def preflight_env(plan: Plan, env: dict[str, str], log_dir: str) -> dict[str, str]:
    """Training's environment for the preflight's torchrun: what the plan points at this run's files (error file,
    NCCL debug routing) is left out, and NCCL's INFO lines go to `log_dir` for the transport proof."""
    own = {k: v for k, v in env.items() if k not in plan.launch.node_file_variables}
    return {**own, "VLA_DEVICE": plan.topology.device, **debug_env(log_dir, {**own, **plan.fabric.env_kept})}


def run_preflight(plan: Plan, env: dict[str, str], out: TextIO, lang: Lang | str = Lang.BOTH) -> PreflightResult:
    """Run the all-reduce with training's environment and topology; never raises for a failing fabric."""
    topo = plan.topology
    minimum = minimum_busbw(plan)
    if topo.world_size < 2:
        return PreflightResult(
            PreflightStatus.SKIPPED, None, findings=[passed("preflight", M("preflight-one-process"))]
        )
    target = plan.launch.wait_for_master
    if target is not None:  # a worker node: node 0's preflight port must answer before this torchrun starts
        master = wait_for_master(dataclasses.replace(target, port=preflight_port(topo.master_port)), out, lang)
        if master.finding is not None:
            return PreflightResult(PreflightStatus.ERROR, minimum, findings=[master.finding])
    sizes = CPU_SIZES if topo.device is Device.CPU else GPU_SIZES
    timeout = plan.settings.preflight_timeout
    with tempfile.TemporaryDirectory(prefix="vla-preflight-") as tmp:
        result_file = Path(tmp) / "result.json"
        worker = ["-m", "entrypoint.launch.preflight_worker", "--sizes", ",".join(map(str, sizes))]
        command = torchrun_command(
            preflight_topology(topo), [*worker, "--out", str(result_file)], env, plan.settings.rendezvous_timeout
        )
        say(out, lang, "preflight-start", world=topo.world_size, nnodes=topo.nnodes, timeout=timeout)
        proc = subprocess.Popen(
            command,
            env=preflight_env(plan, env, tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
            cwd=tmp,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            return PreflightResult(
                PreflightStatus.HANG, minimum, findings=[_hang(plan)], output_tail=output[-OUTPUT_TAIL_CHARS:]
            )
        proof = read_logs(Path(tmp))
        transport = proof.to_json()
        findings = list(proof_findings(proof, plan.fabric.transport))
        if proc.returncode != 0 or not result_file.is_file():
            message = M("preflight-failed", code=proc.returncode, last=_last_line(output))
            return PreflightResult(
                PreflightStatus.ERROR,
                minimum,
                transport=transport,
                output_tail=output[-OUTPUT_TAIL_CHARS:],
                findings=[*findings, failed("preflight", message, M("preflight-failed-fix"))],
            )
        rows: list[Row] = json.loads(result_file.read_text())["results"]
    return _judge(rows, minimum, transport, findings)


def _last_line(output: str) -> str | Text:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else M("preflight-no-output")


def _hang(plan: Plan) -> Finding:
    hint = M("preflight-hang-one-node" if plan.topology.nnodes == 1 else "preflight-hang-nodes")
    return failed(
        "preflight.hang",
        M("preflight-hang", timeout=plan.settings.preflight_timeout),
        hint,
        "VLA_PREFLIGHT_TIMEOUT",
    )


def _judge(
    results: list[Row], minimum: float | None, transport: dict[str, object], findings: list[Finding]
) -> PreflightResult:
    largest, mib = results[-1]["median_gbps"], results[-1]["bytes"] >> 20
    if minimum is None:
        findings.append(passed("preflight", M("preflight-cpu", busbw=largest, mib=mib)))
        return PreflightResult(PreflightStatus.PASSED, None, results, transport, findings)
    if largest >= minimum:
        findings.append(passed("preflight", M("preflight-passed", busbw=largest, minimum=minimum)))
        return PreflightResult(PreflightStatus.PASSED, minimum, results, transport, findings)
    findings.append(
        warned(
            "preflight",
            M("preflight-below", busbw=largest, minimum=minimum),
            M("preflight-below-fix"),
            "VLA_PREFLIGHT_MIN_BUSBW",
        )
    )
    return PreflightResult(PreflightStatus.BELOW, minimum, results, transport, findings)


def table(result: PreflightResult, lang: Lang | str = Lang.BOTH) -> str:
    """The results as a fixed-width table, then the minimum."""
    lines = [f"{'size':>10}  {'busbw GB/s (median)':>20}  repetitions"]
    for row in result.results:
        size = row["bytes"]
        shown = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        repetitions = ", ".join(f"{b:.3f}" for b in row["busbw_gbps"])
        lines.append(f"{shown:>10}  {row['median_gbps']:>20.3f}  {repetitions}")
    if result.minimum_gbps is not None:
        lines.append(render(M("preflight-minimum", minimum=result.minimum_gbps), lang))
    return "\n".join(lines)
