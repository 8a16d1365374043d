"""The plan: every inspection's findings plus the launch itself, decided once.

`build_plan` reads the machine and the CFS tree and changes nothing on disk; `check` and `plan` print it, `run`
executes it. The plan *is* the launch: torchrun's argv and cwd, the whole environment it gets (what is exported,
kept and removed, TACO's exports, the error file and NCCL's debug routing included), this node's log files under
one timestamp, the locked-memory intent and whether the bandwidth preflight runs. `run` adds no decision; it may
only withdraw TACO's exports when activation fails. Settings or topology that cannot be read raise `UserError`
(nothing else can be decided).
"""

from __future__ import annotations

import os
import shutil
import stat
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, Status, exit_code_of, failed, passed, warned
from entrypoint.core.host import Host, process_age_s
from entrypoint.core.masking import mask_json
from entrypoint.core.messages import Catalogue, Text, flatten
from entrypoint.core.settings import (
    KEYS_BY_NAME,
    NAME_MAX,
    PathName,
    Precision,
    PreflightMode,
    Settings,
    load_settings,
    suggest_variable,
)
from entrypoint.fabric.decide import FabricPlan, plan_fabric
from entrypoint.fabric.inventory import Memlock
from entrypoint.fabric.nccl_debug import DEBUG_VARIABLES, debug_env
from entrypoint.health.spec import HealthGate, gate_spec
from entrypoint.inspect.assets import inspect_assets
from entrypoint.inspect.batch import check_batch
from entrypoint.inspect.environment import EnvPlan, flight_recorder_env, node_datasets_cache, training_env
from entrypoint.inspect.mounts import Mount, mount_table
from entrypoint.inspect.openpi import TRAINER_SCRIPT, TrainerFlags
from entrypoint.inspect.patch import PatchState, PatchStatus, patch_state, transformers_dir
from entrypoint.inspect.prefetch import Prefetch, plan_prefetch
from entrypoint.inspect.resume import ResumeAction, ResumeDecision, decide_resume
from entrypoint.inspect.scope import Scope, StatedShape, assets_findings, stated_shape
from entrypoint.inspect.seal import Seal, SealRole, plan_seal
from entrypoint.inspect.storage import (
    RootStorage,
    cache_demand,
    check_assets_root,
    check_checkpoint_storage,
    check_datasets_cache,
    datasets_cache_dir,
    unwritable_reason,
)
from entrypoint.inspect.storage_probe import StorageProbe, mounts_touched
from entrypoint.inspect.topology import MasterWait, Topology, TopologySource, master_wait, resolve_topology
from entrypoint.inspect.train_configs import check_train_config
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
        "torchrun-broken": ("{path} is on PATH but cannot run: {reason}", "{path} 位于 PATH 中,但无法运行:{reason}"),
        "torchrun-broken-fix": (
            "Reinstall PyTorch in the image (pip install --force-reinstall torch), or fix PATH so that a working "
            "torchrun comes first.",
            "请在镜像中重新安装 PyTorch(pip install --force-reinstall torch),或修正 PATH,让可用的 torchrun 排在前面。",
        ),
        "torchrun-no-permission": (
            "it may not be executed (no execute permission, or its file system is mounted noexec)",
            "它不允许执行(缺少执行权限,或所在文件系统以 noexec 挂载)",
        ),
        "torchrun-directory": ("it is a folder", "它是文件夹"),
        "torchrun-special": ("it is not a regular file", "它不是普通文件"),
        "torchrun-dangling": ("it is a symbolic link to a missing file", "它是指向缺失文件的符号链接"),
        "torchrun-interpreter": (
            "its first line names the interpreter '{interpreter}', which is missing or cannot run",
            "其首行指定的解释器 '{interpreter}' 缺失或无法运行",
        ),
        "torchrun-format": (
            "it is neither a script starting with #! nor a compiled program",
            "它既不是以 #! 开头的脚本,也不是编译好的程序",
        ),
        "node-file-name-too-long": (
            "{where}: this node's file name {name} would be {size} bytes; a file name may be at most {limit} bytes",
            "{where}:本节点的文件名 {name} 将长达 {size} 字节;文件名最多 {limit} 字节",
        ),
        "node-file-name-too-long-fix": (
            "Shorten the experiment name ({where}) by at least {excess} bytes.",
            "请把实验名({where})至少缩短 {excess} 字节。",
        ),
        "argument-too-long": (
            "{where}: an argument of {size} bytes ({start}…) is more than the {limit} bytes Linux passes to a program",
            "{where}:有一个参数长 {size} 字节({start}…),超出 Linux 可传给程序的 {limit} 字节",
        ),
        "argument-too-long-fix": (
            "Shorten it, or pass the value in a file instead.",
            "请缩短该参数,或改为通过文件传递其值。",
        ),
        "command-too-long": (
            "torchrun's command line and environment come to {size} bytes, more than this system's limit of {limit}",
            "torchrun 的命令行与环境变量共 {size} 字节,超出本系统上限 {limit} 字节",
        ),
        "command-too-long-fix": ("Shorten {where} or the environment.", "请缩短 {where} 或环境变量。"),
        "extra-args-owned": (
            "{where} passes {flag} to the trainer, but the launcher sets that flag itself",
            "{where} 向训练脚本传入了 {flag},但该参数由启动器自行设置",
        ),
        "extra-args-owned-fix": ("Remove {flag} from {where}; {instead}", "请从 {where} 中删除 {flag};{instead}"),
        "extra-args-no-training": (
            "{where} passes {flag} to the trainer: openpi's trainer would print its help (or a shell completion "
            "script) and exit 0 without training, so the job would end as a success that trained nothing",
            "{where} 向训练脚本传入了 {flag}:openpi 训练脚本会打印帮助(或 shell 补全脚本)后以 0 退出而不训练,"
            "任务会以“成功”结束却什么也没训练",
        ),
        "extra-args-no-training-fix": (
            "Remove {flag} from {where}. To see the trainer's flags, run `python scripts/train_pytorch.py <config> "
            "--help` in the image yourself.",
            "请从 {where} 中删除 {flag}。如需查看训练脚本的参数,请在镜像中自行运行 "
            "`python scripts/train_pytorch.py <配置名> --help`。",
        ),
        "owned-by-setting": (
            "set {variable} instead (or {key} in the job file).",
            "请改为设置 {variable}(或任务文件中的 {key})。",
        ),
        "owned-resume": (
            "the launcher resumes from the latest complete checkpoint by itself; set VLA_OVERWRITE=1 to start "
            "fresh instead.",
            "启动器会自动从最新的完整检查点续训;如需从头开始,请设置 VLA_OVERWRITE=1。",
        ),
        "owned-overwrite": (
            "set VLA_OVERWRITE=1 instead: the old experiment is moved aside, never deleted (openpi's --overwrite "
            "deletes it on every rank at once).",
            "请改为设置 VLA_OVERWRITE=1:旧实验目录会被移到一旁,不会删除"
            "(openpi 的 --overwrite 会在每个 rank 上同时删除它)。",
        ),
        "owned-generic": (
            "its value comes from the settings (see the README's Settings table).",
            "其取值来自设置(参见 README 的设置表)。",
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
ATTEMPT_MODULE = "entrypoint.launch.attempt"  # torchrun's worker entry for training: see launch/attempt.py
NAMING_MARGIN_S = 30  # training's torchrun gives up on its rendezvous this long after the launcher names a lost node
_MAX_INTERPRETERS = 4  # nested #! interpreters Linux follows
MAX_ARG_BYTES = 131072  # MAX_ARG_STRLEN: the most one argument or variable passed to a program may take, NUL included
STAMP_FORMAT = "%Y%m%d-%H%M%S"
REPORT_SUFFIX = "-report.html"  # <log_dir>/<exp>-report.html: the job's report (entrypoint/report/)


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
    problem: Text | None = None

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

    @property
    def attempts(self) -> Path | None:
        """The folder where each training attempt's workers record it (`launch/attempt.py`)."""
        return self.log.with_suffix(".attempts") if self.log else None

    def to_json(self) -> dict[str, object]:
        def shown(path: Path | None) -> str | None:
            return str(path) if path else None

        return {
            "stamp": self.stamp,
            "log": shown(self.log),
            "record": shown(self.record),
            "nccl_log_dir": shown(self.nccl_dir),
            "stacks": shown(self.stacks),
            "attempts": shown(self.attempts),
            **flatten(self.problem, "log_problem"),
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
    wait_for_master: MasterWait | None  # a worker node waits for node 0's port before its first torchrun
    max_restarts: int = 0  # torchrun's --max_restarts: in-job restarts of every node's workers
    events_dir: Path | None = None  # this node's TensorBoard event files (None: none are written)
    report: Path | None = None  # the job's report, written at the end (node 0) or on this node's failure
    metrics_interval: int = 0  # seconds between GPU samples in the event files (0: none)
    prefetch: Prefetch | None = None  # files read into the page cache while the trainer starts (None: none)

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
            "wait_for_master": self.wait_for_master.to_json() if self.wait_for_master else None,
            "max_restarts": self.max_restarts,
            "rendezvous": "static",
            "events_dir": str(self.events_dir) if self.events_dir else None,
            "report": str(self.report) if self.report else None,
            "metrics_interval_s": self.metrics_interval,
            "prefetch": self.prefetch.to_json() if self.prefetch else None,
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
    stated: StatedShape | None = None  # `check --assets`: the job shape the user states (the dev machine is no node)
    seal: Seal = field(default_factory=lambda: Seal(SealRole.NONE))  # node 0 seals its dataset verdict for the others
    storage: StorageProbe = field(default_factory=lambda: StorageProbe(None, 0))  # CFS mounts probed (and watched)
    health: HealthGate | None = None  # what the node health gate runs (`run`: before the first torchrun and restarts)

    @property
    def scope(self) -> Scope:
        return Scope.NODE if self.stated is None else Scope.ASSETS

    @property
    def watched_mounts(self) -> list[Mount]:
        """The CFS mounts holding the checkpoint and log folders, which `run` keeps probing while training runs."""
        folders = [self.settings.experiment_dir, self.settings.path("log_dir")]
        return mounts_touched(folders, self.storage.mounts)

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
        if self.stated is not None:  # the dev machine: no node here, so no fabric, environment, TACO or patch
            return mask_json(
                {
                    "ok": self.exit_code == 0,
                    "exit_code": self.exit_code,
                    "scope": self.scope.value,
                    "topology": self.stated.to_json(),
                    "checks": [f.to_json() for f in self.findings],
                    "resume": self.resume.to_json(),
                    "settings": self.settings.to_json(),
                }
            )
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
            "dataset_seal": self.seal.to_json(),
            "storage": {"probed": self.storage.to_json(), "watched": [m.point for m in self.watched_mounts]},
            "health": self.health.to_json() if self.health else None,
        }
        if with_command:
            data["command"] = self.command
            data["cwd"] = self.launch.cwd
            data["launch"] = self.launch.to_json()
        return mask_json(data)  # shown, logged and recorded: secrets masked; `command` itself keeps the real values


def torchrun_command(
    topology: Topology,
    trainer_args: list[str],
    env: Mapping[str, str],
    rendezvous_timeout: int,
    max_restarts: int | None = None,
    attempt_facts: Path | None = None,
    health: str | None = None,
) -> list[str]:
    """torchrun with the topology and rendezvous timeout spelled out, so no inherited PET_* default changes them.

    With `max_restarts` (training, not the preflight) torchrun's elastic agent restarts the worker group up to that
    many times, with the static rendezvous (`--node_rank` kept, so global rank 0, which prints progress and saves
    checkpoints, stays on node 0), and every worker starts as `entrypoint.launch.attempt`, which decides resume
    again for each attempt, records it under `attempt_facts`, runs the node health gate before a restart (`health`, the
    mode) and then execs the trainer script. Training's torchrun waits `NAMING_MARGIN_S` longer than the rendezvous
    timeout, so that a node that never joins is named by the launcher (`launch/presence.py`) before torchrun gives
    up on it."""
    torchrun = shutil.which("torchrun", path=env.get("PATH")) or "torchrun"
    restarts: list[str] = []
    timeout = rendezvous_timeout
    if max_restarts is not None:
        timeout += NAMING_MARGIN_S
        facts = ["--facts", str(attempt_facts)] if attempt_facts is not None else []
        gate = ["--health", health] if health is not None and attempt_facts is not None else []
        restarts = ["--max_restarts", str(max_restarts), "-m", ATTEMPT_MODULE, *facts, *gate]
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
        f"timeout={timeout}",
        *restarts,
        *trainer_args,
    ]


def node_files(settings: Settings, node_rank: int, stamp: str) -> NodeFiles:
    """`<log_dir>/<exp>-node<rank>-<stamp>.log` as in the seed, when the log folder can be written."""
    log_dir = settings.path("log_dir")
    problem = unwritable_reason(log_dir)
    if problem is not None:
        return NodeFiles(stamp, None, problem)
    stem = f"{settings.exp_name}-node{node_rank}-"
    chosen = stamp
    for n in range(2, 100):  # a run of this node started in the same second keeps its files: `<stamp>-<n>`
        if not any(os.path.lexists(log_dir / f"{stem}{chosen}{ext}") for ext in (".log", ".json")):
            break
        chosen = f"{stamp}-{n}"
    return NodeFiles(chosen, log_dir / f"{stem}{chosen}.log")


def events_dir(settings: Settings, node_rank: int, files: NodeFiles, root: RootStorage) -> Path | None:
    """`<tensorboard_dir>/<exp>/node<rank>-<stamp>`: one TensorBoard run per node and run. None when turned off,
    when this node writes no files (its log folder cannot be written) or when the folder lies under an unmounted
    assets root."""
    base = settings.path("tensorboard_dir")
    if base is None or files.log is None or root.withheld(base) is not None:
        return None
    return base / settings.exp_name / f"node{node_rank}-{files.stamp}"


def prefetch_files(settings: Settings, resume: ResumeDecision, root: RootStorage) -> Prefetch | None:
    """The files `run` reads into the page cache while the trainer starts: the base weights, and the checkpoint
    training resumes from. None when turned off, when there is no such file or under an unmounted assets root."""
    if not settings.prefetch or root.withheld(resume.experiment_dir) is not None:
        return None
    step = resume.step if resume.action is ResumeAction.RESUME else None
    return plan_prefetch(settings.path("weights"), resume.experiment_dir, step)


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


def _check_trainer(settings: Settings, command: list[str], search_path: str | None) -> list[Finding]:
    """openpi's trainer script exists; torchrun (`command[0]`, found on `search_path`) can really be executed."""
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
    found = Path(command[0]) if Path(command[0]).is_absolute() else _unusable_on_path("torchrun", search_path)
    if found is None:
        findings.append(failed("trainer.torchrun", M("torchrun-missing"), M("torchrun-fix"), "PATH"))
        return findings
    reason = _why_not_executable(found, search_path)
    if reason is not None:
        what = M("torchrun-broken", path=str(found), reason=reason)
        findings.append(failed("trainer.torchrun", what, M("torchrun-broken-fix"), str(found)))
    return findings


def _unusable_on_path(name: str, search_path: str | None) -> Path | None:
    """The first `name` on `search_path` that `shutil.which` passed over (a folder, a file without execute
    permission, a dangling link); None when there is none at all."""
    for folder in (search_path or "").split(os.pathsep):
        candidate = Path(folder or ".") / name
        if os.path.lexists(candidate):
            return candidate
    return None


def _why_not_executable(path: Path, search_path: str | None, depth: int = 0) -> Text | None:
    """Why `execve(path)` would fail, from its mode and its first bytes (read without blocking), following a #!
    interpreter that is itself a script as the kernel does; None when it would start. A file that cannot be read is
    given the benefit of the doubt (a program needs only execute permission)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return M("torchrun-dangling")
    if stat.S_ISDIR(mode):
        return M("torchrun-directory")
    if not stat.S_ISREG(mode):
        return M("torchrun-special")
    if not os.access(path, os.X_OK):
        return M("torchrun-no-permission")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.read(fd, 256)  # the kernel reads no more of a #! line
    except OSError:
        return None
    finally:
        os.close(fd)
    if head.startswith(b"\x7fELF"):
        return None
    if not head.startswith(b"#!"):
        return M("torchrun-format")
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return M("torchrun-format")
    interpreter = words[0]
    runnable = os.path.isabs(interpreter) and os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)
    if not runnable or (depth < _MAX_INTERPRETERS and _why_not_executable(Path(interpreter), search_path, depth + 1)):
        return M("torchrun-interpreter", interpreter=interpreter)
    program = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
    if os.path.basename(interpreter) == "env" and program and shutil.which(program, path=search_path) is None:
        return M("torchrun-interpreter", interpreter=f"{interpreter} {program}")
    return None


def _fit_names(settings: Settings, files: NodeFiles) -> tuple[NodeFiles, list[Finding]]:
    """This node's files when every name fits in `NAME_MAX` bytes; otherwise none (the run would crash creating
    them) and the finding that names the experiment name."""
    if files.log is None:
        return files, []
    names = [p.name for p in (files.log, files.record, files.error_file, files.nccl_dir, files.stacks) if p]
    longest = max(names, key=lambda name: len(name.encode("utf-8", "surrogateescape")))
    size = len(longest.encode("utf-8", "surrogateescape"))
    if size <= NAME_MAX:
        return files, []
    where = settings.where("exp_name")
    what = M("node-file-name-too-long", where=where, name=f"{longest[:32]}…{longest[-32:]}", size=size, limit=NAME_MAX)
    fix = M("node-file-name-too-long-fix", where=where, excess=size - NAME_MAX)
    return NodeFiles(files.stamp, None, what), [
        failed("settings.name-too-long", what, fix, where, ExitCode.JOB_MISSPECIFIED)
    ]


def launcher_flags() -> frozenset[str]:
    """Every trainer flag the launcher sets itself, read from the argv it builds (both polarities of a switch)."""
    flags: set[str] = set()
    for switch in (False, True):
        sample = TrainerFlags(
            exp_name="x",
            batch_size=1,
            num_train_steps=1,
            log_interval=1,
            save_interval=1,
            precision=Precision.BFLOAT16,
            wandb=switch,
            weights=Path("w"),
            assets_base_dir=Path("a"),
            checkpoint_base_dir=Path("c"),
            num_workers=1,
            resume=switch,
        )
        flags.update(arg for arg in sample.argv("config") if arg.startswith("--"))
    return frozenset(flags | {"--" + flag.removeprefix("--no-") for flag in flags if flag.startswith("--no-")})


# What to set instead of each trainer flag the launcher owns (a test keeps this in step with `launcher_flags`).
OWNED_FLAG_SETTINGS = {
    "--exp-name": "exp_name",
    "--pytorch-weight-path": "weights",
    "--pytorch-training-precision": "precision",
    "--batch-size": "batch_size",
    "--num-train-steps": "num_train_steps",
    "--log-interval": "log_interval",
    "--save-interval": "save_interval",
    "--wandb-enabled": "wandb",
    "--no-wandb-enabled": "wandb",
    "--assets-base-dir": "assets_base_dir",
    "--checkpoint-base-dir": "checkpoint_base_dir",
    "--num-workers": "num_workers",
    "--resume": "resume",
    "--no-resume": "resume",
    "--overwrite": "overwrite",
    "--no-overwrite": "overwrite",
}


def _owned_flag_findings(settings: Settings) -> list[Finding]:
    """`extra_args` may not set a flag the launcher sets: the trainer would get it twice, and `--overwrite` (which
    deletes the experiment on every rank) or `--resume` would override the launcher's decisions."""
    owned = launcher_flags()
    where = settings.where("extra_args")
    findings = []
    for arg in settings.extra_args:
        flag = arg.split("=", 1)[0].replace("_", "-")
        if not arg.startswith("--") or flag not in owned:
            continue
        setting = OWNED_FLAG_SETTINGS.get(flag)
        if setting == "resume":
            instead = M("owned-resume")
        elif setting == "overwrite":
            instead = M("owned-overwrite")
        elif setting is not None:
            instead = M("owned-by-setting", variable=KEYS_BY_NAME[setting].env, key=setting)
        else:
            instead = M("owned-generic")
        what = M("extra-args-owned", where=where, flag=flag)
        fix = M("extra-args-owned-fix", flag=flag, where=where, instead=instead)
        findings.append(failed("settings.extra-args", what, fix, where, ExitCode.JOB_MISSPECIFIED))
    return findings


def _no_training_findings(settings: Settings) -> list[Finding]:
    """`extra_args` may not hold a flag that makes the trainer print something and exit 0 without training: tyro's
    `-h`/`--help` and its `--tyro-*` completion flags. The job would end 'successfully' having trained nothing."""
    where = settings.where("extra_args")
    findings = []
    for arg in settings.extra_args:
        flag = arg.split("=", 1)[0]
        if flag in ("-h", "--help") or flag.startswith("--tyro-"):
            what = M("extra-args-no-training", where=where, flag=flag)
            fix = M("extra-args-no-training-fix", flag=flag, where=where)
            findings.append(failed("settings.extra-args", what, fix, where, ExitCode.JOB_MISSPECIFIED))
    return findings


def _exec_size_findings(settings: Settings, command: list[str], env: Mapping[str, str]) -> list[Finding]:
    """torchrun's argv and environment fit what `execve` accepts: each item at most `MAX_ARG_BYTES`, all together
    at most the system's ARG_MAX (otherwise `run` would fail with 'Argument list too long')."""
    where = settings.where("extra_args")
    for item, at in [*((arg, where) for arg in command), *((f"{k}={v}", f"env {k}") for k, v in env.items())]:
        size = len(item.encode("utf-8", "surrogateescape")) + 1
        if size > MAX_ARG_BYTES:
            what = M("argument-too-long", where=at, size=size, start=item[:24], limit=MAX_ARG_BYTES)
            fix = M("argument-too-long-fix")
            return [failed("settings.argument-too-long", what, fix, at, ExitCode.JOB_MISSPECIFIED)]
    items = [*command, *(f"{k}={v}" for k, v in env.items())]
    total = sum(len(item.encode("utf-8", "surrogateescape")) + 1 + 8 for item in items)  # + NUL + pointer
    limit = os.sysconf("SC_ARG_MAX")
    if total > limit:
        what = M("command-too-long", size=total, limit=limit)
        fix = M("command-too-long-fix", where=where)
        return [failed("settings.argument-too-long", what, fix, where, ExitCode.JOB_MISSPECIFIED)]
    return []


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


def storage_paths(settings: Settings) -> list[Path]:
    """Every folder or file of the shared storage this job touches: the assets root and each path setting."""
    paths = [settings.path(name) for name in typing.get_args(PathName)] + [settings.experiment_dir]
    weights = settings.path("weights")
    return paths + ([weights] if weights is not None else [])


def build_plan(
    host: Host,
    flags: Mapping[str, object] | None = None,
    clock: Callable[[], float] = time.time,
    scope: Scope = Scope.NODE,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    wait_for_seal: bool = False,
) -> Plan:
    """Inspect everything and decide the launch; raises `UserError` when settings or topology are unusable.
    `clock` gives the moment that names this node's run files. `Scope.ASSETS` (`check --assets`, the dev machine)
    reads no topology from the machine: the batch is checked for `nodes` x `gpus_per_node` as stated
    (`inspect.scope.stated_shape`), and the checks only a node can make are reported as skipped. Every shared-storage
    mount is probed before it is touched (`inspect.storage_probe`: exit 3 when one does not answer). In a
    multi-node job another node takes node 0's sealed dataset verdict (`inspect.seal`), waiting for it (`run`:
    `wait_for_seal`) up to `storage_timeout` or `master_wait_timeout`, whichever is shorter."""
    inherited = dict(host.env)
    stamp = time.strftime(STAMP_FORMAT, time.localtime(clock()))
    mounts = mount_table(host)
    probe = StorageProbe(mounts, 0)

    def probe_first(root: Path, job_file: Path, timeout: int) -> None:
        probe.timeout = timeout
        probe.require([root, job_file])

    settings = load_settings(inherited, flags, before_job_file=probe_first)
    probe.timeout = settings.storage_timeout
    probe.require(storage_paths(settings))
    stated = stated_shape(host, settings.device, nodes, gpus_per_node) if scope is Scope.ASSETS else None
    topology = stated.topology(settings.device) if stated else resolve_topology(host, settings.device)
    findings: list[Finding] = list(topology.findings) + _unknown_variable_findings(settings) + probe.findings()
    findings.append(check_batch(settings.batch_size, topology))
    config = check_train_config(settings)
    findings.append(config)
    config_known = config.status is not Status.FAIL
    dataset = settings.path("lerobot_home") / settings.dataset_repo_id if settings.dataset_repo_id else None
    seal = plan_seal(inherited, dataset, settings.path("log_dir"), topology.node_rank)
    if scope is not Scope.NODE:
        seal = Seal(SealRole.NONE)
    started_at = time.time() - (process_age_s() or 0.0)
    # A worker waits for node 0's seal as long as it would wait for node 0 itself, at most the storage bound.
    wait_s = float(min(settings.storage_timeout, settings.master_wait_timeout)) if wait_for_seal else 0.0
    assets = inspect_assets(
        settings,
        inherited,
        download=scope is Scope.NODE,
        config_known=config_known,
        seal=seal,
        seal_wait_s=wait_s,
        started_at=started_at,
    )
    required = topology.source is TopologySource.TIONE  # a TI-ONE job sees CFS only through its storage row
    resume = decide_resume(settings)
    root = check_assets_root(settings, mounts, required, [*assets.findings, *resume.findings], topology.nnodes)
    findings += root.findings
    env_plan = training_env(inherited, settings, assets.dataset_complete, assets.tokenizer_home, topology.node_rank)
    training, cache = env_plan.apply(inherited), None
    reads_dataset = settings.dataset_repo_id is not None  # then training builds a datasets cache before its first step
    if reads_dataset and not root.covers(datasets_cache_dir(training)):
        node_folders = [node_datasets_cache(settings, rank) for rank in range(topology.nnodes)]
        cache = cache_demand(training, assets.dataset_bytes, node_folders, topology.node_rank)
    findings += check_checkpoint_storage(settings, resume.step, assets.weights_bytes, root, cache)
    if reads_dataset:  # where the training processes will build it
        cache_default = node_datasets_cache(settings, topology.node_rank)
        findings += check_datasets_cache(training, assets.dataset_bytes, cache_default, root)
    fabric = plan_fabric(host, topology)
    findings += fabric.findings
    env_plan.set.update(fabric.env_set)
    env_plan.kept.update(fabric.env_kept)
    taco = plan_taco(settings, env_plan.apply(inherited), baked_dir=host.path("/opt/taco-train"))
    env_plan.merge(taco.env)
    findings += taco.findings
    files, name_findings = _fit_names(settings, node_files(settings, topology.node_rank, stamp))
    withheld = root.withheld(settings.path("log_dir"))
    if withheld is not None:  # a log would create the unmounted root on the container's disk
        files = NodeFiles(files.stamp, None, withheld)
    findings += name_findings
    nccl_debug, nccl_reason = _route_node_files(env_plan, inherited, fabric, files)
    fr_pipes = f"/tmp/vla-entrypoint-fr-node{topology.node_rank}-{files.stamp}-pipe_"
    fr_folder = files.log.with_suffix(".fr") if files.log else None
    env_plan.merge(flight_recorder_env(inherited, settings.env, fr_folder, fr_pipes))
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
        resume=resume.action in (ResumeAction.RESUME, ResumeAction.FINISHED),  # finished: shown, never started
        extra_args=tuple(settings.extra_args),
    )
    health = gate_spec(settings.health, settings.device, topology.nnodes, topology.nproc_per_node, stated is None)
    command = torchrun_command(
        topology,
        trainer.argv(settings.train_config),
        inherited,
        settings.rendezvous_timeout,
        settings.max_restarts,
        files.attempts,
        health.restart_mode,
    )
    findings += _check_trainer(settings, command, inherited.get("PATH"))
    findings += _owned_flag_findings(settings)
    findings += _no_training_findings(settings)
    findings += _exec_size_findings(settings, command, env_plan.apply(inherited))
    launch = Launch(
        command=command,
        cwd=str(settings.openpi_dir),
        files=files,
        error_file=Path(error_file) if error_file else None,
        memlock=memlock_intent(fabric.memlock),
        preflight=settings.preflight,
        nccl_debug=nccl_debug,
        nccl_reason=nccl_reason,
        wait_for_master=master_wait(
            topology, settings.master_wait_timeout, preflight_first=settings.preflight is not PreflightMode.OFF
        ),
        max_restarts=settings.max_restarts,
        events_dir=events_dir(settings, topology.node_rank, files, root),
        report=files.log.with_name(f"{settings.exp_name}{REPORT_SUFFIX}") if files.log else None,
        metrics_interval=settings.metrics_interval,
        prefetch=prefetch_files(settings, resume, root),
    )
    if stated is not None:
        findings = assets_findings(findings, settings, inherited)
    return Plan(
        settings,
        topology,
        fabric,
        env_plan,
        findings,
        resume,
        patch,
        taco,
        launch,
        inherited,
        stated,
        seal,
        probe,
        health,
    )
