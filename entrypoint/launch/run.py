"""`run`: print the health check, act on the plan, start torchrun, relay its output and signals, report.

Side effects live here only: moving an old experiment or incomplete steps aside (node 0), the transformers
patch, the node log and start-up record. torchrun runs in its own session so that, after a signal and the
grace period, the whole process tree can be killed; the exit code is training's own, or 128+N when the job
was ended by signal N.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Status
from entrypoint.core.host import Host
from entrypoint.core.messages import language, render
from entrypoint.core.report import command_line, health_summary
from entrypoint.fabric.decide import raise_memlock
from entrypoint.fabric.nccl_log import debug_env, proof_findings, read_logs
from entrypoint.inspect.patch import apply_patch
from entrypoint.inspect.resume import set_aside
from entrypoint.inspect.storage import writable
from entrypoint.launch.failure import OutputTail, root_cause
from entrypoint.launch.preflight import run_preflight, table
from entrypoint.launch.progress import Progress
from entrypoint.launch.record import StartupRecord, process_age_s
from entrypoint.launch.supervisor import Supervisor, Tee
from entrypoint.launch.watchdog import Watchdog
from entrypoint.plan import Plan, build_plan
from entrypoint.taco.plan import activate_taco
from entrypoint.taco.summary import SummaryReader


def log_paths(plan: Plan, stamp: str) -> tuple[Path, Path]:
    """`<log_dir>/<exp>-node<rank>-<timestamp>.log` as in the seed, and the start-up record beside it."""
    stem = f"{plan.settings.exp_name}-node{plan.topology.node_rank}-{stamp}"
    log_dir = plan.settings.path("log_dir")
    return log_dir / f"{stem}.log", log_dir / f"{stem}.json"


def _outcome_class(code: int, signalled: bool) -> str:
    """succeeded | killed (a signal ended the job) | training-crashed (training exited non-zero)."""
    if code == 0:
        return "succeeded"
    if signalled:
        return "killed"
    return "training-crashed"


def run(host: Host, flags: Mapping[str, Any], console: TextIO | None = None) -> int:
    """The container's default command. Returns the process exit code."""
    console = console or sys.stdout
    out = Tee(console)
    lang = language(host.env)
    record = StartupRecord(None)
    with record.phase("plan"):
        plan = build_plan(host, flags)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path, record.path = log_paths(plan, stamp)
    ok, detail = writable(log_path.parent)
    if ok:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        out.file = open(log_path, "ab")
    else:
        record.path = None
        out.write(f"vla-entrypoint: cannot write the node log ({detail}); logging to the console only\n")
    try:
        return _run(plan, host, out, record, lang, log_path if out.file else None)
    finally:
        if out.file is not None:
            out.file.close()


def _run(plan: Plan, host: Host, out: Tee, record: StartupRecord, lang: str, log_path: Path | None) -> int:
    topo = plan.topology
    heading = (
        f"node {topo.node_rank} of {topo.nnodes}, {topo.nproc_per_node} process(es) per node, "
        f"{topo.world_size} in all, topology from {topo.source}"
    )
    health_summary(plan.findings, heading, lang, out)
    record.data.update({"log": str(log_path) if log_path else None, "plan": plan.to_json()})
    if plan.exit_code:
        record.data["outcome"] = {
            "exit_code": plan.exit_code,
            "class": "job-misspecified" if plan.exit_code == 2 else "preflight-failed",
        }
        record.write()
        return plan.exit_code
    out.write(f"vla-entrypoint: start command: {command_line(plan.command, plan.settings.openpi_dir)}\n")
    with record.phase("prepare"):
        if topo.node_rank == 0:
            for old, new in set_aside(plan.resume):
                out.write(f"vla-entrypoint: moved {old} aside to {new} (kept, not deleted)\n")
        if plan.patch.status == "apply":
            applied, output = apply_patch(plan.patch, Path(plan.settings.openpi_dir))
            if not applied:
                out.write(output)
                out.write(
                    f"vla-entrypoint: transformers_replace FAILED ({plan.patch.script}); training continues unpatched\n"
                )
            else:
                out.write("vla-entrypoint: transformers_replace applied\n")
        elif plan.patch.status == "present":
            out.write("vla-entrypoint: transformers_replace already present\n")
        record.data["memlock"] = raise_memlock().to_json()  # RDMA registration in the workers needs it
    with record.phase("taco"):
        taco = activate_taco(plan.taco, plan.env.apply(host.env), out, lang=lang)
    record.data["taco"] = taco.to_json()
    if taco.finding is not None and taco.finding.status is Status.FAIL:
        health_summary([taco.finding], "TACO acceleration", lang, out)
        record.data["outcome"] = {"exit_code": taco.finding.exit_code, "class": "preflight-failed"}
        record.write()
        return taco.finding.exit_code
    env = taco.env
    progress, tail, taco_reader = Progress(), OutputTail(), SummaryReader()
    error_file = log_path.with_suffix(".error.json") if log_path is not None else None
    if error_file is not None and "TORCHELASTIC_ERROR_FILE" not in env:
        env["TORCHELASTIC_ERROR_FILE"] = str(error_file)
    if plan.settings.preflight != "off":
        with record.phase("preflight"):
            preflight = run_preflight(plan, env, out)
        record.data["preflight"] = preflight.to_json()
        if preflight.results:
            out.write(table(preflight) + "\n")
        health_summary(preflight.findings, "bandwidth preflight", lang, out)
        if plan.settings.preflight == "fail" and preflight.status in ("hang", "error", "below"):
            record.data["outcome"] = {"exit_code": ExitCode.PREFLIGHT_FAILED, "class": "preflight-failed"}
            record.write()
            return ExitCode.PREFLIGHT_FAILED
    nccl_dir = log_path.with_suffix(".nccl") if log_path is not None else None
    if nccl_dir is not None:
        nccl_env = debug_env(str(nccl_dir), {**host.env, **plan.fabric.env_kept})
        if nccl_env:
            nccl_dir.mkdir(exist_ok=True)
            env.update(nccl_env)
            record.data["nccl_debug"] = nccl_env
    record.data["launch_after_s"] = round(record.since_start(), 4)
    record.data["process_age_at_launch_s"] = process_age_s()  # process start (python included) -> torchrun exec
    record.write()
    watchdog = Watchdog(
        plan.settings.stall_timeout, plan.settings.stall_startup_timeout, progress, started_at=time.monotonic()
    )
    supervisor = Supervisor(
        plan.command,
        plan.settings.openpi_dir,
        env,
        out,
        [progress, tail, taco_reader],
        plan.settings.grace_period,
        watchdog,
        tail,
        plan.settings.stall_action,
        log_path.with_suffix(".stacks.txt") if log_path else None,
    )
    with record.phase("training"):
        code = supervisor.run()
    summary = progress.to_json()
    if progress.first_step_at is not None:
        summary["first_step_after_s"] = round(progress.first_step_at - record.t0, 3)
    record.data["progress"] = summary
    if nccl_dir is not None and nccl_dir.is_dir():
        proof = read_logs(nccl_dir)
        record.data["transport"] = proof.to_json()
        for finding in proof_findings(proof, plan.fabric.transport):
            out.write(f"vla-entrypoint: {finding.status.value.upper()} {finding.id}: {render(finding.message, lang)}\n")
    record.data["outcome"] = {
        "exit_code": code,
        "class": _outcome_class(code, supervisor.signalled is not None),
        "signal": supervisor.signalled,
        "root_cause": root_cause(error_file, tail) if code else None,
    }
    if supervisor.stall is not None:
        record.data["stall"] = supervisor.stall
        if code == ExitCode.STALLED:
            record.data["outcome"].update(
                {"class": "stalled", "root_cause": f"no progress for {supervisor.stall['silent_s']}s"}
            )
    taco_outcome = taco.outcome(taco_reader.close(), topo.node_rank)
    record.data["taco"]["outcome"] = taco_outcome.to_json()
    record.write()
    saves = ", ".join(str(s["step"]) for s in progress.saves) or "none"
    out.write(
        f"vla-entrypoint: training ended with exit code {code}; last step {progress.last_step}, "
        f"last loss {progress.last_loss}, checkpoints saved this run: {saves}\n"
    )
    out.write(f"vla-entrypoint: {render(taco_outcome.message, lang)}\n")
    if record.data["outcome"]["root_cause"]:
        out.write(f"vla-entrypoint: root cause: {record.data['outcome']['root_cause']}\n")
    if log_path is not None:
        out.write(f"vla-entrypoint: node log {log_path}; start-up record {record.path}\n")
    return code
