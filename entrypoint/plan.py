"""The plan: every inspection's findings plus the launch itself, decided once.

`build_plan` reads the machine and the CFS tree and changes nothing on disk; `check` and `plan` print it, `run`
executes it. The plan *is* the launch: torchrun's argv and cwd, the whole environment it gets (what is exported,
kept and removed, TACO's exports, the error file and NCCL's debug routing included), this node's log files under
one timestamp, the locked-memory intent and whether the bandwidth preflight runs. `run` adds no decision; it may
only withdraw TACO's exports when activation fails. Settings or topology that cannot be read raise `UserError`
(nothing else can be decided).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.findings import Finding, exit_code_of, failed, passed, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Catalogue, Text, flatten
from entrypoint.core.settings import PreflightMode, Settings, load_settings, suggest_variable
from entrypoint.fabric.decide import FabricPlan, plan_fabric
from entrypoint.fabric.inventory import Memlock
from entrypoint.fabric.nccl_debug import DEBUG_VARIABLES, debug_env
from entrypoint.inspect.assets import inspect_assets
from entrypoint.inspect.batch import check_batch
from entrypoint.inspect.environment import EnvPlan, training_env
from entrypoint.inspect.openpi import TRAINER_SCRIPT, TrainerFlags
from entrypoint.inspect.patch import PatchState, PatchStatus, patch_state, transformers_dir
from entrypoint.inspect.resume import ResumeAction, ResumeDecision, decide_resume
from entrypoint.inspect.storage import check_checkpoint_storage, check_datasets_cache, writable
from entrypoint.inspect.topology import Topology, resolve_topology
from entrypoint.taco.plan import TacoPlan, plan_taco

M = Catalogue(
    "plan",
    {
        "trainer-script-missing": ("openpi's trainer {script} does not exist", "openpi 训练脚本 {script} 不存在"),
        "trainer-script-fix": (
            "Use the VLA base image (openpi in /workspace/openpi), or set VLA_OPENPI_DIR to your openpi checkout.",
            "请使用 VLA 基础镜像(openpi 位于 /workspace/openpi),或把 VLA_OPENPI_DIR 设为 openpi 代码目录。",
        ),
        "torchrun-missing": ("torchrun is not on PATH", "PATH 中找不到 torchrun"),
        "torchrun-fix": (
            "Use an image with PyTorch installed (the VLA base has it), or fix PATH.",
            "请使用已安装 PyTorch 的镜像(VLA 基础镜像已包含),或修正 PATH。",
        ),
        "patch-present": ("transformers patch already present", "transformers 补丁已存在"),
        "patch-apply": (
            "transformers patch missing: {script} runs before training",
            "transformers 补丁缺失:训练前将执行 {script}",
        ),
        "patch-no-transformers": (
            "transformers is not installed for this interpreter: no patch needed",
            "当前解释器未安装 transformers:无需补丁",
        ),
        "patch-unavailable": (
            "the transformers patch is missing and {script} does not exist",
            "transformers 补丁缺失,且 {script} 不存在",
        ),
        "patch-unavailable-fix": (
            "Use the VLA base image, which ships the patch script, or apply openpi's transformers_replace yourself.",
            "请使用自带补丁脚本的 VLA 基础镜像,或自行应用 openpi 的 transformers_replace。",
        ),
        "unknown-variable": ("{name} is not a known setting and is ignored", "{name} 不是已知设置,已忽略"),
        "unknown-variable-suggest": ("Did you mean {close}?", "是否应为 {close}?"),
        "unknown-variable-table": ("See the README's Settings table.", "请参阅 README 的设置表。"),
        "nccl-debug-routed": (
            "NCCL INFO lines for INIT and NET go to {folder}, read after training as proof of the transport",
            "NCCL 的 INIT 与 NET 信息日志写入 {folder},训练结束后据此确认实际使用的传输方式",
        ),
        "nccl-debug-users": (
            "NCCL's debug output is left as set ({variables}); the transport is read from the node log instead",
            "NCCL 调试输出保持原设置({variables});改从节点日志读取实际传输方式",
        ),
        "nccl-debug-no-log": (
            "no node log folder: NCCL's debug output is not routed",
            "没有节点日志目录:不重定向 NCCL 调试输出",
        ),
        "memlock-raise": (
            "the soft locked-memory limit is raised to the hard limit before torchrun starts (training inherits it)",
            "启动 torchrun 前把锁定内存软限制提升到硬限制(训练进程继承该限制)",
        ),
        "memlock-keep": (
            "the locked-memory limit is left as it is (soft equals hard)",
            "锁定内存限制保持不变(软限制等于硬限制)",
        ),
        "preflight-off": ("no bandwidth preflight (VLA_PREFLIGHT=off)", "不进行带宽预检(VLA_PREFLIGHT=off)"),
        "preflight-warn": (
            "a bandwidth preflight runs before training and only reports (VLA_PREFLIGHT=warn)",
            "训练前进行带宽预检,仅报告结果(VLA_PREFLIGHT=warn)",
        ),
        "preflight-fail": (
            "a bandwidth preflight runs before training; a hang or low bandwidth ends the job with exit 3 "
            "(VLA_PREFLIGHT=fail)",
            "训练前进行带宽预检;卡住或带宽过低时任务以退出码 3 结束(VLA_PREFLIGHT=fail)",
        ),
    },
)

ERROR_FILE_VARIABLE = "TORCHELASTIC_ERROR_FILE"
STAMP_FORMAT = "%Y%m%d-%H%M%S"


class MemlockIntent(StrEnum):
    """What launch does to this process's RLIMIT_MEMLOCK before torchrun (whose workers inherit it)."""

    RAISE = "raise"  # soft limit up to the hard limit (also when the limits could not be read)
    KEEP = "keep"  # soft already equals hard


@dataclass(frozen=True)
class NodeFiles:
    """This node's files for one run, `<log_dir>/<exp>-node<rank>-<stamp>.*`, named once with the plan's timestamp.
    `log` is None when the log folder cannot be written (`problem` says why): the run logs to the console only and
    writes no record, error file or NCCL log."""

    stamp: str
    log: Path | None
    problem: str | None = None

    @property
    def record(self) -> Path | None:
        return self.log.with_suffix(".json") if self.log else None

    @property
    def error_file(self) -> Path | None:
        return self.log.with_suffix(".error.json") if self.log else None

    @property
    def nccl_dir(self) -> Path | None:
        return self.log.with_suffix(".nccl") if self.log else None

    @property
    def stacks(self) -> Path | None:
        return self.log.with_suffix(".stacks.txt") if self.log else None

    def to_json(self) -> dict[str, object]:
        def shown(path: Path | None) -> str | None:
            return str(path) if path else None

        return {
            "stamp": self.stamp,
            "log": shown(self.log),
            "record": shown(self.record),
            "nccl_log_dir": shown(self.nccl_dir),
            "stacks": shown(self.stacks),
            "log_problem": self.problem,
        }


@dataclass(frozen=True)
class Launch:
    """How `run` starts training: `command` in `cwd` with the plan's environment, after the preflight (`preflight`)
    and the locked-memory change (`memlock`). `error_file` is where torchrun records a failed worker's error (this
    node's file, or the user's own `TORCHELASTIC_ERROR_FILE`); `nccl_debug` is NCCL's debug routing into `files`
    (also among the exports), `nccl_reason` why it is routed or not."""

    command: list[str]
    cwd: str
    files: NodeFiles
    error_file: Path | None
    memlock: MemlockIntent
    preflight: PreflightMode
    nccl_debug: dict[str, str]
    nccl_reason: Text

    @property
    def memlock_reason(self) -> Text:
        return M(f"memlock-{self.memlock.value}")

    @property
    def preflight_reason(self) -> Text:
        return M(f"preflight-{self.preflight.value}")

    @property
    def node_file_variables(self) -> tuple[str, ...]:
        """Variables the plan points at this node's run files (a preflight must not write there)."""
        ours = self.error_file is not None and self.error_file == self.files.error_file
        return tuple(self.nccl_debug) + ((ERROR_FILE_VARIABLE,) if ours else ())

    def to_json(self) -> dict[str, object]:
        return {
            **self.files.to_json(),
            "error_file": str(self.error_file) if self.error_file else None,
            "memlock": self.memlock.value,
            **flatten(self.memlock_reason, "memlock_reason"),
            "preflight": self.preflight.value,
            **flatten(self.preflight_reason, "preflight_reason"),
            "nccl_debug": dict(self.nccl_debug),
            **flatten(self.nccl_reason, "nccl_debug_reason"),
        }


@dataclass
class Plan:
    """Findings plus the launch. `inherited` is the launcher's environment as read once; torchrun gets
    `environment()`: that minus `env.removed`, plus `env.set`."""

    settings: Settings
    topology: Topology
    fabric: FabricPlan
    env: EnvPlan
    findings: list[Finding]
    resume: ResumeDecision
    patch: PatchState
    taco: TacoPlan
    launch: Launch
    inherited: dict[str, str] = field(repr=False)

    @property
    def command(self) -> list[str]:
        """torchrun's argv."""
        return self.launch.command

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.findings)

    def environment(self) -> dict[str, str]:
        """Exactly the environment torchrun is started with (TACO's exports included)."""
        return self.env.apply(self.inherited)

    def to_json(self, with_command: bool = True) -> dict[str, object]:
        hidden = ("findings", "env_set", "env_kept")
        data: dict[str, object] = {
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "topology": self.topology.to_json(),
            "fabric": {k: v for k, v in self.fabric.to_json().items() if k not in hidden},
            "env": self.env.to_json(),
            "checks": [f.to_json() for f in self.findings],
            "resume": self.resume.to_json(),
            "transformers_patch": self.patch.to_json(),
            "taco": self.taco.to_json(),
            "settings": self.settings.to_json(),
        }
        if with_command:
            data["command"] = self.command
            data["cwd"] = self.launch.cwd
            data["launch"] = self.launch.to_json()
        return data


def torchrun_command(
    topology: Topology, trainer_args: list[str], env: Mapping[str, str], rendezvous_timeout: int
) -> list[str]:
    """torchrun with the topology and rendezvous timeout spelled out, so no inherited PET_* default changes them."""
    torchrun = shutil.which("torchrun", path=env.get("PATH")) or "torchrun"
    return [
        torchrun,
        "--nnodes",
        str(topology.nnodes),
        "--nproc_per_node",
        str(topology.nproc_per_node),
        "--node_rank",
        str(topology.node_rank),
        "--master_addr",
        topology.master_addr,
        "--master_port",
        str(topology.master_port),
        "--rdzv_conf",
        f"timeout={rendezvous_timeout}",
        *trainer_args,
    ]


def node_files(settings: Settings, node_rank: int, stamp: str) -> NodeFiles:
    """`<log_dir>/<exp>-node<rank>-<stamp>.log` as in the seed, when the log folder can be written."""
    log_dir = settings.path("log_dir")
    ok, detail = writable(log_dir)
    if not ok:
        return NodeFiles(stamp, None, detail)
    return NodeFiles(stamp, log_dir / f"{settings.exp_name}-node{node_rank}-{stamp}.log")


def memlock_intent(memlock: Memlock) -> MemlockIntent:
    """Raise unless the limits are known and the soft one already equals the hard one."""
    if memlock.soft is not None and memlock.hard is not None and memlock.soft == memlock.hard:
        return MemlockIntent.KEEP
    return MemlockIntent.RAISE


def _route_node_files(
    env_plan: EnvPlan, inherited: Mapping[str, str], fabric: FabricPlan, files: NodeFiles
) -> tuple[dict[str, str], Text]:
    """Export the error file and NCCL's debug routing into this node's files; returns the NCCL variables routed
    and why they are (not) routed."""
    if files.error_file is not None and ERROR_FILE_VARIABLE not in env_plan.set:
        env_plan.offer(inherited, ERROR_FILE_VARIABLE, str(files.error_file))
    if files.nccl_dir is None:
        return {}, M("nccl-debug-no-log")
    training = {**env_plan.apply(inherited), **fabric.env_kept}
    routed = debug_env(str(files.nccl_dir), training)
    if not routed:
        return {}, M("nccl-debug-users", variables=", ".join(n for n in DEBUG_VARIABLES if n in training))
    env_plan.set.update(routed)
    return routed, M("nccl-debug-routed", folder=str(files.nccl_dir))


def _check_trainer(settings: Settings, command: list[str]) -> list[Finding]:
    findings: list[Finding] = []
    script = Path(settings.openpi_dir) / TRAINER_SCRIPT
    if not script.is_file():
        findings.append(
            failed(
                "trainer.script",
                M("trainer-script-missing", script=str(script)),
                M("trainer-script-fix"),
                str(script),
            )
        )
    if not Path(command[0]).is_absolute():
        findings.append(failed("trainer.torchrun", M("torchrun-missing"), M("torchrun-fix"), "PATH"))
    return findings


def _patch_finding(state: PatchState) -> Finding:
    if state.status is PatchStatus.PRESENT:
        return passed("transformers-patch", M("patch-present"), str(state.transformers_dir))
    if state.status is PatchStatus.APPLY:
        return passed("transformers-patch", M("patch-apply", script=str(state.script)), str(state.script))
    if state.status is PatchStatus.NO_TRANSFORMERS:
        return passed("transformers-patch", M("patch-no-transformers"), None)
    return warned(
        "transformers-patch",
        M("patch-unavailable", script=str(state.script)),
        M("patch-unavailable-fix"),
        str(state.script),
    )


def _unknown_variable_findings(settings: Settings) -> list[Finding]:
    findings = []
    for name in settings.unknown_variables:
        close = suggest_variable(name)
        hint = M("unknown-variable-suggest", close=close) if close else M("unknown-variable-table")
        findings.append(warned("settings.unknown-variable", M("unknown-variable", name=name), hint, name))
    return findings


def build_plan(host: Host, flags: Mapping[str, object] | None = None, clock: Callable[[], float] = time.time) -> Plan:
    """Inspect everything and decide the launch; raises `UserError` when settings or topology are unusable.
    `clock` gives the moment that names this node's run files."""
    inherited = dict(host.env)
    stamp = time.strftime(STAMP_FORMAT, time.localtime(clock()))
    settings = load_settings(inherited, flags)
    topology = resolve_topology(host, settings.device)
    findings: list[Finding] = list(topology.findings) + _unknown_variable_findings(settings)
    findings.append(check_batch(settings.batch_size, topology))
    assets = inspect_assets(settings, inherited)
    findings += assets.findings
    resume = decide_resume(settings)
    findings += resume.findings
    findings += check_checkpoint_storage(settings, resume.step, assets.weights_bytes)
    if settings.dataset_repo_id is not None:
        findings += check_datasets_cache(inherited, assets.dataset_bytes)
    env_plan = training_env(inherited, settings, assets.dataset_complete, assets.tokenizer_home)
    fabric = plan_fabric(host, topology)
    findings += fabric.findings
    env_plan.set.update(fabric.env_set)
    env_plan.kept.update(fabric.env_kept)
    taco = plan_taco(settings, env_plan.apply(inherited), baked_dir=host.path("/opt/taco-train"))
    env_plan.merge(taco.env)
    findings += taco.findings
    files = node_files(settings, topology.node_rank, stamp)
    nccl_debug, nccl_reason = _route_node_files(env_plan, inherited, fabric, files)
    error_file = env_plan.apply(inherited).get(ERROR_FILE_VARIABLE)
    patch = patch_state(Path(settings.openpi_dir), transformers_dir())
    findings.append(_patch_finding(patch))
    trainer = TrainerFlags(
        exp_name=settings.exp_name,
        batch_size=settings.batch_size,
        num_train_steps=settings.num_train_steps,
        log_interval=settings.log_interval,
        save_interval=settings.save_interval,
        precision=settings.precision,
        wandb=settings.wandb,
        weights=settings.path("weights"),
        assets_base_dir=settings.path("assets_base_dir"),
        checkpoint_base_dir=settings.path("checkpoint_base_dir"),
        num_workers=settings.num_workers,
        resume=resume.action is ResumeAction.RESUME,
        extra_args=tuple(settings.extra_args),
    )
    command = torchrun_command(topology, trainer.argv(settings.train_config), inherited, settings.rendezvous_timeout)
    findings += _check_trainer(settings, command)
    launch = Launch(
        command=command,
        cwd=str(settings.openpi_dir),
        files=files,
        error_file=Path(error_file) if error_file else None,
        memlock=memlock_intent(fabric.memlock),
        preflight=settings.preflight,
        nccl_debug=nccl_debug,
        nccl_reason=nccl_reason,
    )
    return Plan(settings, topology, fabric, env_plan, findings, resume, patch, taco, launch, inherited)
