"""The node health gate as `run` and `check` carry it out: the gate's context from the plan, its summary, and on
node 0 the table of the whole job.

The children get the launcher's own environment with the GPUs and NCCL settings training will get (the plan's
`CUDA_VISIBLE_DEVICES` and `NCCL_*`, never widened, minus NCCL's debug routing into this run's files), so the gate
checks and loads exactly the GPUs this node was given. The GPU measurements run in the training Python (torchrun's).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TextIO

from entrypoint.core.host import Host
from entrypoint.core.messages import Lang, render
from entrypoint.core.report import health_summary
from entrypoint.health.exchange import report_path
from entrypoint.health.gate import Context, GateResult, run_gate, this_host
from entrypoint.health.messages import MESSAGES as H
from entrypoint.health.verdict import Node
from entrypoint.launch.flight_recorder import training_python
from entrypoint.plan import Plan

LEAD = "vla-entrypoint: "


def gate_env(plan: Plan) -> dict[str, str]:
    """The environment of the gate's children (see the module's docstring)."""
    training = plan.environment()
    env = {k: v for k, v in plan.inherited.items() if k != "CUDA_VISIBLE_DEVICES" and not k.startswith("NCCL_")}
    env.update({k: v for k, v in training.items() if k == "CUDA_VISIBLE_DEVICES" or k.startswith("NCCL_")})
    for name in plan.launch.nccl_debug:
        env.pop(name, None)
    return env


def context(plan: Plan, host: Host, since: float) -> Context:
    assert plan.health is not None
    topo, files = plan.topology, plan.launch.files
    env = gate_env(plan)
    return Context(
        spec=plan.health,
        node=Node(topo.node_rank, this_host(), topo.nproc_per_node, topo.nnodes),
        host=host,
        env=env,
        share=report_path(files.log) if files.log else None,
        log_dir=plan.settings.path("log_dir") if files.log else None,
        exp_name=plan.settings.exp_name,
        since=since,
        python=training_python(plan.launch.command[0], env) or sys.executable,
    )


def start_gate(plan: Plan, host: Host, out: TextIO, lang: Lang | str, since: float) -> GateResult:
    """The gate before the first torchrun: both tiers, the nodes' figures exchanged; node 0 prints the job's table."""
    assert plan.health is not None
    result = run_gate(context(plan, host, since), active=True, wait_s=plan.health.gather_wait_s)
    health_summary(result.findings, H("heading").en, lang, out)
    if plan.topology.node_rank == 0:
        print_table(result, out, lang)
    return result


def passive_gate(plan: Plan, host: Host, since: float) -> GateResult:
    """`check`: the passive tier only (read-only, nothing shared)."""
    ctx = dataclasses.replace(context(plan, host, since), share=None, log_dir=None)
    return run_gate(ctx, active=False, wait_s=0.0)


def print_table(result: GateResult, out: TextIO, lang: Lang | str) -> None:
    out.write(render(H("table-heading", nodes=len(result.reports)), lang, lead=LEAD) + "\n")
    out.write(result.table() + "\n")
