"""`run`: print the health check, then execute the plan: start torchrun, relay its output and signals, report.

Every decision is the plan's (`plan.Launch`): the node's files, torchrun's argv, cwd and environment, the
locked-memory change, the preflight. Here they are carried out: moving an old experiment or incomplete steps aside
(node 0), the transformers patch, TACO's activation (whose failure withdraws TACO's exports: an outcome, recorded),
the node log and start-up record. The exit code is training's own, or 128+N when the job was ended by signal N.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TextIO

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, Status, failed
from entrypoint.core.host import Host, process_age_s
from entrypoint.core.messages import Catalogue, Lang, language
from entrypoint.core.oserror import os_error_text
from entrypoint.core.report import command_line, health_summary, problem_block
from entrypoint.core.settings import HealthMode, PreflightMode, Settings, StallAction
from entrypoint.fabric.memlock import MemlockChange, raise_memlock
from entrypoint.fabric.nccl_log import proof_findings, read_logs
from entrypoint.inspect.patch import MARKER, PatchState, PatchStatus
from entrypoint.inspect.prefetch import Prefetch, plan_prefetch
from entrypoint.inspect.resume import ResumeAction, decide_resume, set_aside
from entrypoint.inspect.seal import Seal, SealRole
from entrypoint.inspect.storage_probe import Answer, StorageNotAnswering
from entrypoint.launch import flight_recorder
from entrypoint.launch.failure import OutputTail, root_cause
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.messages import line, say
from entrypoint.launch.prefetch import Reader
from entrypoint.launch.presence import JobEnd, Presence, node_hosts, run_folder
from entrypoint.launch.progress import Progress
from entrypoint.launch.record import StartupRecord
from entrypoint.launch.rendezvous_wait import WaitStatus, wait_for_master
from entrypoint.launch.restarts import Attempts, is_collective
from entrypoint.launch.saves import SaveWatch
from entrypoint.launch.stall_exchange import Exchange
from entrypoint.launch.storage_watch import StorageWatch
from entrypoint.launch.supervisor import StartFailed, Supervisor, Tee
from entrypoint.launch.watchdog import Watchdog
from entrypoint.plan import MemlockIntent, Plan, build_plan
from entrypoint.report.metrics import Metrics
from entrypoint.taco.activate import TacoActivation, activate_taco
from entrypoint.taco.summary import SummaryReader

RUN = Catalogue(
    "launch",
    {
        "start-heading": ("starting torchrun", "启动 torchrun"),
        "path-error": ("{path}: {error}", "{path}:{error}"),
        "start-failed": (
            "{program} could not be started: {error}; nothing ran",
            "无法启动 {program}:{error};训练未运行",
        ),
        "start-failed-fix": (
            "Run `vla-entrypoint check`: it names what is wrong with torchrun (permissions, its #! line, PATH).",
            "请运行 `vla-entrypoint check`:它会指出 torchrun 的问题(权限、#! 行、PATH)。",
        ),
        "nccl-dir-failed": (
            "cannot create {folder} ({error}): NCCL's debug lines will be missing",
            "无法创建 {folder}({error}):将缺少 NCCL 调试日志",
        ),
        "sealed": (
            "dataset verdict sealed for the other nodes: {path}",
            "数据集校验结论已写入校验记录,供其他节点采信:{path}",
        ),
        "record-local": (
            "the start-up record is on this node's own disk instead: {path} (the log folder's storage is not "
            "answering)",
            "启动记录改写到本节点自己的磁盘:{path}(日志目录所在存储无响应)",
        ),
        "fr-dir-failed": (
            "cannot create the flight-recorder folder for {prefix} ({error}): a stall's collective traces will be "
            "missing; check that the log folder is writable",
            "无法为 {prefix} 创建飞行记录器目录({error}):停滞时将缺少集合通信记录;请检查日志目录可写",
        ),
    },
)


STORAGE_GIVE_UP_S = 300.0  # without VLA_STALL_TIMEOUT: how long a CFS may not answer before the job is ended
PEER_FIRST_S = 10.0  # a collective error here: how long another node's own cause is waited for once all are alive
REPORT_WAIT_S = 60.0  # the job's report at the end: written within this, or said and left (`vla-entrypoint report`)
REPORT_PEERS_WAIT_S = 30.0  # node 0's wait for the other nodes' clean ends before it writes the report


class OutcomeClass(StrEnum):
    """How the job ended, as the start-up record's `outcome.class` says."""

    SUCCEEDED = "succeeded"
    JOB_MISSPECIFIED = "job-misspecified"
    PREFLIGHT_FAILED = "preflight-failed"
    TRAINING_CRASHED = "training-crashed"
    KILLED = "killed"  # a signal ended the job
    STALLED = "stalled"  # the stall watchdog ended it
    ALREADY_FINISHED = "already-finished"  # the experiment had reached its last save: nothing was started
    DO_NOT_REQUEUE = "do-not-requeue"  # in-job restarts cannot help (budget spent, no progress, same exception)
    STORAGE_NOT_ANSWERING = "storage-not-answering"  # a CFS mount gave no answer before anything was started
    NODE_LOST = "node-lost"  # a node of the job was lost or never started (`presence.py`)


def outcome_class(code: int, signalled: bool) -> OutcomeClass:
    """succeeded | killed (a signal ended the job) | training-crashed (training exited non-zero)."""
    if code == 0:
        return OutcomeClass.SUCCEEDED
    return OutcomeClass.KILLED if signalled else OutcomeClass.TRAINING_CRASHED


def run(host: Host, flags: Mapping[str, object], console: TextIO | None = None) -> int:
    """The container's default command. Returns the process exit code."""
    out = Tee(console or sys.stdout)
    lang = language(host.env)
    record = StartupRecord(None)
    try:
        with record.phase("plan"):
            plan = build_plan(host, flags, wait_for_seal=True)
    except StorageNotAnswering as stalled:
        return _storage_not_answering(stalled, host, out, record, lang)
    files = plan.launch.files
    with contextlib.ExitStack() as closing:
        if files.log is None:
            say(out, lang, "log-open-failed", detail=files.problem)
        else:
            try:
                files.log.parent.mkdir(parents=True, exist_ok=True)
                out.file = closing.enter_context(open(files.log, "ab"))
                closing.callback(out.close_file, plan.settings.storage_timeout)  # before the file is closed
                record.path = files.record
            except OSError as error:  # the folder changed since the plan looked: an outcome, not a decision
                say(out, lang, "log-open-failed", detail=RUN("path-error", path=files.log, error=os_error_text(error)))
        return _run(plan, out, record, lang)


def _record_locally(
    record: StartupRecord, node: str, code: int, cause: str, answer: Answer, out: Tee, lang: Lang
) -> None:
    """The log folder's CFS does not answer: this node's start-up record goes to its own disk, and the console
    says where."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(record.started_at))
    node = "".join(c for c in node if c.isdigit())[:6] or "0"
    record.path = Path(tempfile.gettempdir()) / "vla-entrypoint" / f"node{node}-{stamp}-{os.getpid()}.json"
    record.claimed = True  # a new name of its own: nothing to claim
    outcome = {"exit_code": code, "class": OutcomeClass.STORAGE_NOT_ANSWERING.value, "root_cause": cause}
    record.data["outcome"] = {**outcome, "storage": answer.to_json()}
    try:
        record.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    record.write()
    line(out, lang, RUN("record-local", path=str(record.path)))


def _storage_not_answering(
    stalled: StorageNotAnswering, host: Host, out: Tee, record: StartupRecord, lang: Lang
) -> int:
    """A CFS mount did not answer before anything started: say so, and record it on the node's own disk."""
    out.write(problem_block(stalled) + "\n")
    code = int(stalled.exit_code)
    _record_locally(record, host.env.get("RANK", "0"), code, stalled.what.en, stalled.answer, out, lang)
    return code


def _watch_storage(plan: Plan, supervisor: Supervisor, record: StartupRecord, out: Tee, lang: Lang) -> StorageWatch:
    """Keep probing the CFS mounts of the checkpoint and log folders while training runs; when one has not answered
    for the stall bound (stall action fail), end the job with 124 from the watch's thread: the launcher's other
    threads may be waiting on that storage themselves."""
    settings = plan.settings

    def give_up(answer: Answer, seconds: float) -> None:
        if supervisor.tree is not None:
            supervisor.tree.kill()
        cause = f"CFS not answering at {answer.mount.point} for {seconds:.0f} s"
        _record_locally(record, str(plan.topology.node_rank), int(ExitCode.STALLED), cause, answer, out, lang)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os._exit(ExitCode.STALLED)

    timeout = float(settings.storage_timeout)
    limit = float(settings.stall_timeout or STORAGE_GIVE_UP_S)
    give_up_after = limit if settings.stall_action is StallAction.FAIL else None
    watch = StorageWatch(plan.watched_mounts, timeout, timeout, give_up_after, out, lang, give_up)
    supervisor.storage_cause = watch.cause
    return watch


def write_seal(seal: Seal) -> bool:
    """Node 0, once its plan passed: write the dataset seal (`inspect.seal`) atomically; False when there is
    nothing to seal or it cannot be written (the other nodes then verify by themselves)."""
    if seal.role is not SealRole.WRITE or seal.path is None or seal.payload is None:
        return False
    tmp = seal.path.with_name(f".{seal.path.name}.{os.getpid()}.tmp")
    try:
        seal.path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({**seal.payload, "written_at": time.time()}), encoding="utf-8")
        os.replace(tmp, seal.path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def _ended_early(plan: Plan, out: Tee, lang: Lang, record: StartupRecord, code: int, outcome: OutcomeClass) -> int:
    record.data["outcome"] = {"exit_code": code, "class": outcome.value}
    record.write()
    job_report(plan, out, lang, code)
    return code


def _ended_by_another(out: Tee, lang: Lang, record: StartupRecord, end: JobEnd) -> int:
    """Another node ended the job before training started here: say it in one line, and record its end as this
    node's outcome (its exit code, class and cause)."""
    fields = {"node": end.node, "host": end.host, "code": end.code}
    line(out, lang, M("job-ended-waiting", cause=end.cause, **fields))
    record.data["outcome"] = {
        "exit_code": end.code,
        "class": end.outcome,
        "root_cause": end.cause.en,
        "ended_by": {"node": end.node, "host": end.host},
        "lost_nodes": [n.to_json() for n in end.lost],
        **({"verdict": end.verdict} if end.verdict is not None else {}),
    }
    record.write()
    return end.code


def job_report(plan: Plan, out: Tee, lang: Lang, code: int, presence: Presence | None = None) -> None:
    """The whole job's report (`entrypoint.report`): node 0 at every end, any node on its own failure. After a clean
    end of a multi-node job, node 0 first waits up to `REPORT_PEERS_WAIT_S` for the other nodes' clean ends, so that
    their records are in it. A report that cannot be written (in time) is said; it never changes the exit code."""
    path = plan.launch.report
    if path is None or (code == 0 and plan.topology.node_rank != 0):
        return
    from entrypoint.report.command import write_in_time

    if code == 0 and presence is not None:
        presence.look()
        pending = presence.running()
        if pending:
            say(out, lang, "report-waits", nodes=", ".join(map(str, pending)), seconds=f"{REPORT_PEERS_WAIT_S:.0f}")
            presence.wait_done(REPORT_PEERS_WAIT_S)

    line(out, lang, write_in_time(plan.settings.path("log_dir"), plan.settings.exp_name, path, REPORT_WAIT_S))


def apply_patch(state: PatchState, openpi_dir: Path) -> tuple[bool, str]:
    """Run the base image's patch script (only for status APPLY); return (ok, its combined output)."""
    result = subprocess.run(
        ["bash", str(state.script)],
        cwd=openpi_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        check=False,
    )
    ok = result.returncode == 0 and state.transformers_dir is not None and (state.transformers_dir / MARKER).is_file()
    return ok, result.stdout


def _prepare(plan: Plan, out: Tee, lang: Lang) -> dict[str, object]:
    """Node 0 sets old experiments aside; the transformers patch; the locked-memory change. Returns the latter."""
    if plan.topology.node_rank == 0:
        for old, new in set_aside(plan.resume):
            say(out, lang, "moved-aside", old=str(old), new=str(new))
    if plan.patch.status is PatchStatus.APPLY:
        applied, output = apply_patch(plan.patch, Path(plan.launch.cwd))
        if applied:
            say(out, lang, "patch-applied")
        else:
            out.write(output)
            say(out, lang, "patch-failed", script=str(plan.patch.script))
    elif plan.patch.status is PatchStatus.PRESENT:
        say(out, lang, "patch-present")
    limits = plan.fabric.memlock
    if plan.launch.memlock is MemlockIntent.RAISE:  # RDMA registration in the workers needs it
        change = raise_memlock()
    else:  # the plan keeps the limits only when it read both and they are equal
        assert limits.soft is not None and limits.hard is not None
        change = MemlockChange((limits.soft, limits.hard), (limits.soft, limits.hard))
    return {"intent": plan.launch.memlock.value, **change.to_json()}


def _presence(plan: Plan, out: Tee) -> Presence | None:
    """This node's beat and its view of the other nodes (`presence.py`): a multi-node job with a log folder only."""
    folder = run_folder(plan.settings.path("log_dir"), plan.settings.exp_name, plan.inherited)
    topo = plan.topology
    if folder is None or out.file is None or topo.nnodes < 2:
        return None
    hosts = node_hosts(plan.inherited, topo.nnodes)
    bound = float(plan.settings.rendezvous_timeout)
    presence = Presence(folder, topo.node_rank, topo.nnodes, hosts, bound)
    if hosts[topo.node_rank] != "?":  # named as NODE_LIST names it, as a lost node is
        presence.host = hosts[topo.node_rank]
    return presence


def _run(plan: Plan, out: Tee, record: StartupRecord, lang: Lang) -> int:
    """`_run_job`, with this node's presence in the run's folder from start to end: however this node ends with a
    failure (before training, by a signal, …), the other nodes are told and end with the same exit code."""
    presence = _presence(plan, out)
    if presence is None:
        return _run_job(plan, out, record, lang, None)[0]
    presence.start()
    record.data["presence"] = presence.to_json()
    code, tell = 1, True
    try:
        code, tell = _run_job(plan, out, record, lang, presence)
    finally:
        if code and tell and presence.look() is None:
            outcome = record.data.get("outcome")
            klass = outcome.get("class") if isinstance(outcome, dict) else None
            node, host = presence.node_rank, presence.host
            why = M("end-other", node=node, host=host, outcome=klass or "-", code=code)
            presence.announce(JobEnd(code, str(klass or OutcomeClass.TRAINING_CRASHED.value), why, node, host))
        presence.finish(clean=code == 0)
    return code


def _run_job(plan: Plan, out: Tee, record: StartupRecord, lang: Lang, presence: Presence | None) -> tuple[int, bool]:
    """The job on this node: (exit code, whether the other nodes may be told how it ended here: not when the log
    folder's storage is not answering)."""
    topo, launch = plan.topology, plan.launch
    heading = M(
        "run-heading",
        rank=topo.node_rank,
        nnodes=topo.nnodes,
        nproc=topo.nproc_per_node,
        world=topo.world_size,
        source=topo.source,
    )
    health_summary(plan.findings, heading.en, lang, out)
    record.data.update({"log": str(launch.files.log) if out.file else None, "plan": plan.to_json()})
    if plan.exit_code:
        misspecified = plan.exit_code == ExitCode.JOB_MISSPECIFIED
        failed_as = OutcomeClass.JOB_MISSPECIFIED if misspecified else OutcomeClass.PREFLIGHT_FAILED
        return _ended_early(plan, out, lang, record, plan.exit_code, failed_as), True
    if write_seal(plan.seal):  # the other nodes take this verdict instead of reading every episode file again
        line(out, lang, RUN("sealed", path=str(plan.seal.path)))
    if plan.resume.action is ResumeAction.FINISHED:  # every node reads the same folder, so every node ends here
        code = _ended_early(plan, out, lang, record, ExitCode.OK, OutcomeClass.ALREADY_FINISHED)
        say(out, lang, "already-finished", step=plan.resume.step)  # the node's last line says why nothing ran
        return code, True
    if plan.health is not None and plan.health.runs:  # before any GPU time is spent, and before anything is moved
        from entrypoint.launch.health_gate import start_gate

        with record.phase("health"):
            gate = start_gate(plan, Host.current(plan.inherited), out, lang, record.started_at)
        record.data["health"] = gate.to_json()
        if gate.failed:
            return _ended_early(plan, out, lang, record, ExitCode.PREFLIGHT_FAILED, OutcomeClass.PREFLIGHT_FAILED), True
    elif plan.health is not None and plan.health.mode is not HealthMode.OFF:  # no GPU here: said in one line
        line(out, lang, plan.health.reason)
        record.data["health"] = {"gate": plan.health.to_json(), "status": "skipped"}
    reader = Reader(Host.current(plan.inherited), out, lang)
    if launch.prefetch is not None:  # the trainer reads these files after a minute of imports and model build
        reader.start(launch.prefetch)
    try:
        return _launch(plan, out, record, lang, reader, presence)
    finally:
        reader.close()  # an early end (TACO, the master wait, the preflight) ends the read too


def _launch(
    plan: Plan, out: Tee, record: StartupRecord, lang: Lang, reader: Reader, presence: Presence | None
) -> tuple[int, bool]:
    """From the node's preparation to training's end: TACO, the master wait, the preflight, torchrun; as
    `_run_job`."""
    topo, launch = plan.topology, plan.launch
    with record.phase("prepare"):
        record.data["memlock"] = _prepare(plan, out, lang)
    with record.phase("taco"):
        taco = activate_taco(plan.taco, plan.environment(), out, lang=lang)
    record.data["taco"] = taco.to_json()
    if taco.finding is not None and taco.finding.status is Status.FAIL:
        health_summary([taco.finding], M("taco-heading").en, lang, out)
        misspecified = taco.finding.exit_code == ExitCode.JOB_MISSPECIFIED
        failed_as = OutcomeClass.JOB_MISSPECIFIED if misspecified else OutcomeClass.PREFLIGHT_FAILED
        return _ended_early(plan, out, lang, record, taco.finding.exit_code, failed_as), True
    target = launch.wait_for_master
    if target is not None:  # a worker node: node 0 must answer before any torchrun starts here
        with record.phase("master"):
            master = wait_for_master(target, out, lang, (lambda: presence.look() is not None) if presence else None)
        record.data["master"] = master.to_json()
        end = presence.look() if presence is not None and master.status is WaitStatus.JOB_ENDED else None
        if end is not None:  # nothing ran here: this node ends as the job did, and tells nobody
            return _ended_by_another(out, lang, record, end), False
        if master.finding is not None:
            fields = {"variable": target.variable, "addr": target.addr, "port": target.port}
            health_summary([master.finding], M("master-heading", rank=topo.node_rank, **fields).en, lang, out)
            return _ended_early(plan, out, lang, record, ExitCode.PREFLIGHT_FAILED, OutcomeClass.PREFLIGHT_FAILED), True
    env = taco.env
    if launch.preflight is not PreflightMode.OFF:
        from entrypoint.launch.preflight import run_preflight, table

        with record.phase("preflight"):
            preflight = run_preflight(plan, env, out, lang)
        record.data["preflight"] = preflight.to_json()
        if preflight.results:
            out.write(table(preflight, lang) + "\n")
        health_summary(preflight.findings, M("preflight-heading").en, lang, out)
        if launch.preflight is PreflightMode.FAIL and preflight.failed:
            return _ended_early(plan, out, lang, record, ExitCode.PREFLIGHT_FAILED, OutcomeClass.PREFLIGHT_FAILED), True
    nccl_dir = launch.files.nccl_dir if launch.nccl_debug else None
    if nccl_dir is not None:
        try:
            nccl_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # the folder changed since the plan looked: an outcome, not a decision
            line(out, lang, RUN("nccl-dir-failed", folder=str(nccl_dir), error=os_error_text(error)))
        record.data["nccl_debug"] = dict(launch.nccl_debug)
    problem = flight_recorder.prepare(env)  # torch writes its dumps into the folder but never creates it
    if problem is not None:
        prefix = flight_recorder.locations(env)[0]
        line(out, lang, RUN("fr-dir-failed", prefix=str(prefix), error=os_error_text(problem)))
    # torchrun starts now, nothing can end the run before it: the line and the record's launch moment go together
    say(out, lang, "start-command", command=command_line(launch.command, launch.cwd))
    record.data["launch_after_s"] = round(record.since_start(), 4)
    record.data["process_age_at_launch_s"] = process_age_s()  # process start (python included) -> torchrun exec
    record.write()
    settings = plan.settings
    progress = Progress(saving=SaveWatch(settings.save_interval, settings.num_train_steps))
    tail, taco_reader = OutputTail(), SummaryReader()
    # Only node 0 watches for a stall: openpi prints progress from global rank 0 only, so a worker node's output
    # shows none and its own watchdog would fire on every healthy run longer than the start-up allowance.
    watchdog = (
        Watchdog(settings.stall_timeout, settings.stall_startup_timeout, progress, time.monotonic())
        if topo.node_rank == 0
        else None
    )
    exchange = Exchange(
        topo.node_rank,
        topo.nnodes,
        settings.path("log_dir"),
        settings.exp_name,
        launch.files.log if out.file else None,
        env,
        flight_recorder.training_python(launch.command[0], env),
    )
    attempts = Attempts(launch.max_restarts, record.t0, progress, launch.files.attempts, node_rank=topo.node_rank)
    metrics = Metrics(
        launch.events_dir,
        batch_size=settings.batch_size,
        interval_s=launch.metrics_interval,
        say=lambda text: line(out, lang, text),
        attempts=lambda: [(a.number, a.cause.value if a.cause else None) for a in list(attempts.attempts)],
    )
    metrics.start()
    if launch.prefetch is not None:
        reader.follow_restarts(lambda: len(attempts.attempts), lambda: restart_prefetch(settings))
    supervisor = Supervisor(
        launch.command,
        launch.cwd,
        env,
        out,
        [progress, tail, taco_reader, metrics],
        settings.grace_period,
        watchdog,
        tail,
        settings.stall_action,
        launch.files.stacks,
        lang,
        attempts,
        exchange,
        presence,
    )
    watch = _watch_storage(plan, supervisor, record, out, lang)
    watch.start()
    try:
        with record.phase("training"):
            code = supervisor.run()
    except StartFailed as failure:
        what = RUN("start-failed", program=failure.program, error=os_error_text(failure.error))
        finding = failed("trainer.torchrun", what, RUN("start-failed-fix"), failure.program)
        health_summary([finding], RUN("start-heading").en, lang, out)
        metrics.close(ExitCode.PREFLIGHT_FAILED, OutcomeClass.PREFLIGHT_FAILED.value)
        return _ended_early(plan, out, lang, record, ExitCode.PREFLIGHT_FAILED, OutcomeClass.PREFLIGHT_FAILED), True
    finally:
        watch.stop()
        reader.close()
        if reader.outcomes:
            record.data["prefetch"] = reader.to_json()
    if watch.stalled is not None and (cause := watch.cause()) is not None:  # the record cannot go to the log folder
        line(out, lang, cause)
        _record_locally(record, str(topo.node_rank), code, cause.en, watch.stalled, out, lang)
        return code, False
    if presence is not None and code and supervisor.job_end is None and supervisor.signalled is None:
        code = _conclude(plan, presence, supervisor, tail, code)
    return _report(plan, out, record, lang, code, supervisor, progress, tail, taco, taco_reader, metrics), True


def _conclude(plan: Plan, presence: Presence, supervisor: Supervisor, tail: OutputTail, code: int) -> int:
    """torchrun failed on this node: settle how the job ends before saying so (`Presence.settle`: another node's
    end, a lost node, or this node's own cause once every node is seen alive), and end the job that way on every
    node. A collective error is most often another node's failure seen from here: that node's own cause is waited
    for a little longer."""
    cause = root_cause(plan.launch.error_file, tail)
    since = supervisor.ended_at if supervisor.ended_at is not None else time.monotonic()
    end = presence.settle(since, PEER_FIRST_S if cause and is_collective(cause) else 0.0)
    if end is None:
        node, host = presence.node_rank, presence.host
        klass = OutcomeClass.DO_NOT_REQUEUE if supervisor.gave_up is not None else OutcomeClass.TRAINING_CRASHED
        why = supervisor.verdict_line or M("end-training-failed", node=node, host=host, code=code, cause=cause or "-")
        end = JobEnd(code, klass.value, why, node, host)
    return supervisor.end_job(end).code


def restart_prefetch(settings: Settings) -> Prefetch | None:
    """After an in-job restart: the base weights and the newest complete checkpoint, which the trainer resumes from."""
    decision = decide_resume(settings)
    step = decision.step if decision.action is ResumeAction.RESUME else None
    return plan_prefetch(settings.path("weights"), decision.experiment_dir, step)


def _report(
    plan: Plan,
    out: Tee,
    record: StartupRecord,
    lang: Lang,
    code: int,
    supervisor: Supervisor,
    progress: Progress,
    tail: OutputTail,
    taco: TacoActivation,
    taco_reader: SummaryReader,
    metrics: Metrics,
) -> int:
    """The record's progress, transport proof and outcome, the event files' end, the closing lines and the job's
    report."""
    files = plan.launch.files
    summary = progress.to_json()
    if progress.first_step_at is not None:
        summary["first_step_after_s"] = round(progress.first_step_at - record.t0, 3)
    record.data["progress"] = summary
    if plan.launch.nccl_debug and files.nccl_dir is not None and files.nccl_dir.is_dir():
        proof = read_logs(files.nccl_dir)
        record.data["transport"] = proof.to_json()
        for finding in proof_findings(proof, plan.fabric.transport):
            _proof_line(out, lang, finding)
    cause = root_cause(plan.launch.error_file, tail) if code else None
    outcome: dict[str, object] = {
        "exit_code": code,
        "class": outcome_class(code, supervisor.signalled is not None).value,
        "signal": supervisor.signalled,
        "root_cause": cause,
    }
    if supervisor.stall is not None:
        record.data["stall"] = supervisor.stall
        own = "silent_s" in supervisor.stall  # this node's own stall, not its answer to node 0's request
        if code == ExitCode.STALLED and own:
            cause = M("stalled-root-cause", silent=supervisor.stall["silent_s"]).en
            outcome.update({"class": OutcomeClass.STALLED.value, "root_cause": cause})
    if supervisor.attempts is not None and supervisor.attempts.attempts:
        record.data["attempts"] = supervisor.attempts.to_json()
    if supervisor.gave_up is not None:
        outcome.update({"class": OutcomeClass.DO_NOT_REQUEUE.value, "verdict": supervisor.gave_up.value})
    end = supervisor.job_end
    if end is not None and (end.node != plan.topology.node_rank or end.lost):  # another node's end, or a lost node
        outcome.update(
            {"class": end.outcome, "root_cause": end.cause.en, "ended_by": {"node": end.node, "host": end.host}}
        )
        outcome["lost_nodes"] = [n.to_json() for n in end.lost]
        if end.verdict is not None:
            outcome["verdict"] = end.verdict
    record.data["outcome"] = outcome
    metrics.close(code, str(outcome["class"]))
    taco_outcome = taco.outcome(taco_reader.close(), plan.topology.node_rank)
    record.data["taco"] = {**taco.to_json(), "outcome": taco_outcome.to_json()}
    record.write()
    done = progress.summary(plan.topology.node_rank, str(plan.settings.path("log_dir")))
    say(out, lang, "training-ended", code=code, progress=done)
    line(out, lang, taco_outcome.message)
    if cause:
        say(out, lang, "root-cause", cause=cause)
    job_report(plan, out, lang, code, supervisor.presence)
    if out.file is not None:
        say(out, lang, "node-files", log=str(files.log), record=str(record.path))
    if supervisor.culprit_line is not None:  # the stall's culprit, where a reader of the last line looks
        line(out, lang, supervisor.culprit_line)
    return code


def _proof_line(out: Tee, lang: Lang, finding: Finding) -> None:
    say(out, lang, "transport-proof", status=finding.status.value.upper(), id=finding.id, message=finding.message)
