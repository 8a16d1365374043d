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
from pathlib import Path
from typing import Any, TextIO

from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.messages import Text
from entrypoint.fabric.nccl_log import debug_env, proof_findings, read_logs
from entrypoint.inspect.topology import Topology
from entrypoint.plan import Plan, torchrun_command

TYPICAL_BUSBW_GBPS = {"local": 370.0, "ib": 360.0, "roce": 360.0, "socket": 2.0}
GPU_SIZES = (1 << 20, 16 << 20, 128 << 20, 512 << 20)
CPU_SIZES = (64 << 10, 1 << 20, 8 << 20)


@dataclass
class PreflightResult:
    status: str  # passed | below | hang | error | skipped
    minimum_gbps: float | None
    results: list[dict[str, Any]] = field(default_factory=list)
    transport: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    output_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "minimum_gbps": self.minimum_gbps,
            "results": self.results,
            "transport": self.transport,
            "findings": [f.to_json() for f in self.findings],
        }


def preflight_topology(topo: Topology) -> Topology:
    """The job's topology on the port next to MASTER_PORT: a node that finishes its preflight early must not
    rendezvous with another node's still-running preflight when it starts training."""
    port = topo.master_port + 1 if topo.master_port < 65535 else topo.master_port - 1
    return dataclasses.replace(topo, master_port=port)


def minimum_busbw(plan: Plan) -> float | None:
    """The bar the largest message must reach; None where there is nothing to compare (CPU, one process)."""
    if plan.settings.preflight_min_busbw is not None:
        return plan.settings.preflight_min_busbw
    if plan.topology.device == "cpu" or plan.topology.world_size < 2:
        return None
    return TYPICAL_BUSBW_GBPS[plan.fabric.transport] / 2


def run_preflight(plan: Plan, env: dict[str, str], out: TextIO) -> PreflightResult:
    """Run the all-reduce with training's environment and topology; never raises for a failing fabric."""
    topo = plan.topology
    minimum = minimum_busbw(plan)
    if topo.world_size < 2:
        return PreflightResult(
            "skipped",
            None,
            findings=[
                passed(
                    "preflight",
                    Text(
                        "one process in the whole job: a single GPU has no peers, so there is no bandwidth to measure",
                        "整个任务只有一个进程:单卡没有对端,无需测量带宽",
                    ),
                )
            ],
        )
    sizes = CPU_SIZES if topo.device == "cpu" else GPU_SIZES
    with tempfile.TemporaryDirectory(prefix="vla-preflight-") as tmp:
        result_file = Path(tmp) / "result.json"
        run_env = {**env, "VLA_DEVICE": topo.device, **debug_env(tmp, {**env, **plan.fabric.env_kept})}
        command = torchrun_command(
            preflight_topology(topo),
            [
                "-m",
                "entrypoint.launch.preflight_worker",
                "--sizes",
                ",".join(map(str, sizes)),
                "--out",
                str(result_file),
            ],
            env,
            plan.settings.rendezvous_timeout,
        )
        out.write(
            f"vla-entrypoint: preflight: all-reduce over {topo.world_size} processes ({topo.nnodes} node(s)), "
            f"timeout {plan.settings.preflight_timeout}s\n"
        )
        proc = subprocess.Popen(
            command,
            env=run_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
            cwd=tmp,
        )
        try:
            output, _ = proc.communicate(timeout=plan.settings.preflight_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            return PreflightResult("hang", minimum, findings=[_hang(plan)], output_tail=output[-4000:])
        proof = read_logs(Path(tmp))
        transport = proof.to_json()
        findings = list(proof_findings(proof, plan.fabric.transport))
        if proc.returncode != 0 or not result_file.is_file():
            return PreflightResult(
                "error",
                minimum,
                transport=transport,
                output_tail=output[-4000:],
                findings=findings
                + [
                    failed(
                        "preflight",
                        Text(
                            f"the preflight all-reduce failed (exit {proc.returncode}); its output ends: {_last_line(output)}",
                            f"预检 all-reduce 失败(退出码 {proc.returncode});输出结尾:{_last_line(output)}",
                        ),
                        Text(
                            "Read the output above; the same failure would stop training at its first step.",
                            "请查看上方输出;同样的故障会让训练在第一步失败。",
                        ),
                    )
                ],
            )
        data = json.loads(result_file.read_text())
    return _judge(data["results"], minimum, transport, findings)


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "(nothing)"


def _hang(plan: Plan) -> Finding:
    hint = (
        Text(
            "Within one node this points at GPU peer-to-peer transport: try this job with env {NCCL_P2P_DISABLE: '1'} in the job file and report the machine.",
            "单节点内卡住通常是 GPU 点对点传输问题:可在任务文件 env 中设置 NCCL_P2P_DISABLE: '1' 重试,并反馈该机器。",
        )
        if plan.topology.nnodes == 1
        else Text(
            "Across nodes this points at the network: check `vla-entrypoint plan` on every node (NCCL_SOCKET_IFNAME, RDMA ports) and the security group.",
            "跨节点卡住通常是网络问题:请在各节点执行 `vla-entrypoint plan` 检查 NCCL_SOCKET_IFNAME 与 RDMA 端口,并检查安全组。",
        )
    )
    return failed(
        "preflight.hang",
        Text(
            f"the preflight all-reduce did not finish within {plan.settings.preflight_timeout}s",
            f"预检 all-reduce 在 {plan.settings.preflight_timeout} 秒内未完成",
        ),
        hint,
        "VLA_PREFLIGHT_TIMEOUT",
    )


def _judge(
    results: list[dict[str, Any]], minimum: float | None, transport: dict[str, Any], findings: list[Finding]
) -> PreflightResult:
    largest = results[-1]["median_gbps"]
    if minimum is None:
        findings.append(
            passed(
                "preflight",
                Text(
                    f"all-reduce bus bandwidth {largest:.2f} GB/s at {results[-1]['bytes'] >> 20} MiB (no expectation on CPU)",
                    f"all-reduce 总线带宽 {largest:.2f} GB/s({results[-1]['bytes'] >> 20} MiB,CPU 无期望值)",
                ),
            )
        )
        return PreflightResult("passed", None, results, transport, findings)
    if largest >= minimum:
        findings.append(
            passed(
                "preflight",
                Text(
                    f"all-reduce bus bandwidth {largest:.1f} GB/s >= {minimum:.1f} GB/s",
                    f"all-reduce 总线带宽 {largest:.1f} GB/s >= {minimum:.1f} GB/s",
                ),
            )
        )
        return PreflightResult("passed", minimum, results, transport, findings)
    findings.append(
        warned(
            "preflight",
            Text(
                f"all-reduce bus bandwidth {largest:.1f} GB/s is below the minimum {minimum:.1f} GB/s",
                f"all-reduce 总线带宽 {largest:.1f} GB/s 低于最低要求 {minimum:.1f} GB/s",
            ),
            Text(
                "Compare `vla-entrypoint plan` (transport, devices) with a healthy node; a socket transport between nodes means RDMA is not used.",
                "请将 `vla-entrypoint plan` 的传输方式与正常节点对比;节点间为 socket 说明未使用 RDMA。",
            ),
            "VLA_PREFLIGHT_MIN_BUSBW",
        )
    )
    return PreflightResult("below", minimum, results, transport, findings)


def table(result: PreflightResult) -> str:
    """The results as a fixed-width table."""
    lines = [f"{'size':>10}  {'busbw GB/s (median)':>20}  repetitions"]
    for row in result.results:
        size = row["bytes"]
        shown = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        lines.append(f"{shown:>10}  {row['median_gbps']:>20.3f}  {', '.join(f'{b:.3f}' for b in row['busbw_gbps'])}")
    if result.minimum_gbps is not None:
        lines.append(f"minimum for the largest size: {result.minimum_gbps:.1f} GB/s")
    return "\n".join(lines)
