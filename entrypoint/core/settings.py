"""Job settings: one typed dataclass whose fields are the keys, read through the precedence chain and validated.

Lowest to highest precedence: built-in defaults (the seed's `pi05_libero` run) -> the baked
`/etc/vla-entrypoint/job.yaml` -> the user's job file (`VLA_JOB_FILE`, else `<assets_root>/code/job.yaml` when
present) -> `VLA_*` variables -> command-line flags. Any bad value raises `JobMisspecified` (exit code 2).

Each field of `Settings` is one key: its annotation is the type (`| None` means 'none'/'null'/'auto' unset it; a
`StrEnum` lists the choices) and `setting(...)` gives its default and description. `KEYS` is derived from the
fields, so the table the CLI and the README show cannot drift from what the code reads.

Edges: an empty value is an error, never 'none'; integers are at most 2**63-1 (huge text is never converted); a
name in a path, name or id key is at most `NAME_MAX` bytes and a resolved path at most `PATH_MAX`; a job file
that is there but is no regular file (a folder, a FIFO, a dangling link) is an error, never skipped or opened
blocking, and its YAML is read strictly (`core.yamlfile`: bounded, no duplicate keys, plain values only).
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from entrypoint.core.errors import JobMisspecified
from entrypoint.core.files import FileRefused, Problem, describe, read_text
from entrypoint.core.masking import masked, safe_url
from entrypoint.core.messages import Catalogue, Text
from entrypoint.core.numbers import INT64_MAX, whole_number

MESSAGES = Catalogue(
    "core",
    {
        "setting-invalid": ("{where}={raw} is not valid: expected {expected}", "{where}={raw} 无效:应为{expected}"),
        "setting-invalid-fix": ("Set {where} to {expected} ({help}).", "请把 {where} 设为{expected}({help})。"),
        "expected-integer": ("an integer >= {minimum}", "不小于 {minimum} 的整数"),
        "expected-integer-range": ("an integer from {minimum} to {maximum}", "{minimum} 到 {maximum} 之间的整数"),
        "expected-positive": ("a positive number", "正数"),
        "expected-bool": ("true or false (1/0)", "true 或 false(1/0)"),
        "expected-text": ("a non-empty string", "非空字符串"),
        "expected-choice": ("one of {choices}", "以下之一:{choices}"),
        "expected-name": ("a plain name of letters, digits, '_', '.', '-'", "仅含字母、数字、'_'、'.'、'-' 的名称"),
        "expected-relative-id": (
            "a relative id such as physical-intelligence/libero",
            "相对 id,例如 physical-intelligence/libero",
        ),
        "expected-no-nul": ("a string without NUL characters", "不含 NUL 字符的字符串"),
        "expected-shell-words": ("shell-quoted flags ({error})", "按 shell 规则引用的参数({error})"),
        "expected-list": ("a list of strings", "字符串列表"),
        "expected-yaml-mapping": ("a YAML mapping (set it in the job file)", "YAML 映射(请在任务文件中设置)"),
        "expected-env": ("a mapping of VARIABLE: value", "VARIABLE: value 形式的映射"),
        "job-file-unreadable": ("cannot read the job file {path}: {error}", "无法读取任务文件 {path}:{error}"),
        "job-file-unreadable-fix": (
            "Make {path} a readable UTF-8 YAML file, or point {where} elsewhere.",
            "请确保 {path} 是可读的 UTF-8 YAML 文件,或修改 {where}。",
        ),
        "job-file-syntax": (
            "the job file {path} is not valid YAML: {problem}",
            "任务文件 {path} 不是合法的 YAML:{problem}",
        ),
        "job-file-syntax-at": (
            "the job file {path} is not valid YAML (line {line}, column {column}): {problem}",
            "任务文件 {path} 不是合法的 YAML(第 {line} 行,第 {column} 列):{problem}",
        ),
        "job-file-syntax-fix": (
            "Fix the syntax at that line (check indentation and quotes).",
            "请修正该行语法(检查缩进与引号)。",
        ),
        "job-file-not-mapping": (
            "the job file {path} must be a mapping of settings, not a {type}",
            "任务文件 {path} 必须是键值映射,而不是 {type}",
        ),
        "job-file-not-mapping-fix": (
            "Write one 'key: value' per line; see the README's Settings table.",
            "请每行写一个 'key: value';参见 README 的设置表。",
        ),
        "job-file-unknown-key": (
            "unknown key '{name}' in the job file {path}",
            "任务文件 {path} 中有未知的键 '{name}'",
        ),
        "job-file-unknown-key-close": ("Did you mean '{name}'?", "是否应为 '{name}'?"),
        "job-file-unknown-key-fix": (
            "See the README's Settings table for valid keys.",
            "有效的键见 README 的设置表。",
        ),
        "job-file-missing": ("the job file {path} does not exist", "任务文件 {path} 不存在"),
        "job-file-missing-fix": ("Create {path}, or unset {where}.", "请创建 {path},或取消 {where}。"),
        "setting-empty": ("{where} is set but empty", "{where} 已设置,但值为空"),
        "setting-empty-fix": (
            "Unset {where} for the default ({default}), or give it a value: {help}.",
            "如需默认值({default}),请取消设置 {where};否则请填写取值:{help}。",
        ),
        "name-too-long": (
            "{where}: the name '{name}' is {size} bytes; a file or folder name may be at most {limit} bytes",
            "{where}:名称 '{name}' 长 {size} 字节;文件或文件夹名最多 {limit} 字节",
        ),
        "name-too-long-fix": ("Shorten that name in {where}.", "请在 {where} 中缩短该名称。"),
        "path-too-long": (
            "{where}: the path {path} is {size} bytes; a path may be at most {limit} bytes",
            "{where}:路径 {path} 长 {size} 字节;路径最多 {limit} 字节",
        ),
        "path-too-long-fix": ("Choose a shorter path for {where}.", "请为 {where} 选择更短的路径。"),
        "path-not-absolute": ("{name}={value!r} must be an absolute path", "{name}={value!r} 必须是绝对路径"),
        "path-not-absolute-fix": (
            "Set {variable} to an absolute path such as {default}.",
            "请把 {variable} 设为绝对路径,例如 {default}。",
        ),
    },
)

BAKED_JOB_FILE = "/etc/vla-entrypoint/job.yaml"
DEFAULT_ASSETS_ROOT = "/home/tione/notebook/embodied-ai/openpi-assets"
TACO_WHEEL_URL = (
    "https://taco-train-data-1251001002.cos.ap-shanghai.myqcloud.com/taco-train/"
    "taco_train-0.1.0%2Bnv-cp312-cp312-linux_x86_64.whl"
)
# Variables that are ours but are not settings keys.
OTHER_VARIABLES = ("VLA_JOB_FILE", "VLA_BAKED_JOB_FILE", "VLA_HOST_ROOT", "VLA_LANG")
_NONE_WORDS = ("none", "null", "auto")
NAME_MAX = 255  # bytes in one file or folder name (ext4, xfs, the CFS NFS mount)
PATH_MAX = 4095  # bytes in a whole path the kernel accepts
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPEC = "vla-entrypoint.setting"
_T = TypeVar("_T")


class Precision(StrEnum):
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


class Device(StrEnum):
    GPU = "gpu"
    CPU = "cpu"  # demos and tests: gloo, no GPU checks


class StallAction(StrEnum):
    FAIL = "fail"
    WARN = "warn"


class TacoMode(StrEnum):
    OFF = "off"
    AUTO = "auto"
    ON = "on"


class PreflightMode(StrEnum):
    OFF = "off"
    WARN = "warn"
    FAIL = "fail"


class HealthMode(StrEnum):
    OFF = "off"
    WARN = "warn"  # hard faults fail the node; slow or throttled GPUs and slow ports only warn
    FAIL = "fail"  # slow or throttled GPUs and slow ports fail the node too


class Kind(StrEnum):
    """How a key's value is read, derived from its field's annotation."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    CHOICE = "choice"
    PATH = "path"
    ARGS = "args"
    ENV = "env"


class Form(StrEnum):
    """Extra rules for a text key."""

    NAME = "name"  # becomes a folder name: letters, digits, '_', '.', '-'
    RELATIVE_ID = "relative-id"  # a path below a root: never absolute, no '..'
    SOURCE = "source"  # a URL, or a file path


@dataclass(frozen=True)
class _Spec:
    """What `setting(...)` records in a field's metadata."""

    help: str
    help_zh: str
    minimum: int
    path: bool
    form: Form | None


def setting(
    default: _T,
    help: str,
    help_zh: str,
    *,
    minimum: int = 1,
    path: bool = False,
    form: Form | None = None,
) -> _T:
    """A `Settings` field that is a key: its default, its description in both languages and its checks.
    `path=True` makes a text key a path relative to `assets_root`; `minimum` bounds an integer key."""
    metadata = {_SPEC: _Spec(help, help_zh, minimum, path, form)}
    if isinstance(default, Mapping):  # an immutable mapping, shared by every instance
        return field(default_factory=lambda: default, metadata=metadata)
    return field(default=default, metadata=metadata)


_NO_ENV: Mapping[str, str] = types.MappingProxyType({})

PathName = Literal["assets_root", "openpi_dir", "assets_base_dir", "checkpoint_base_dir", "lerobot_home", "log_dir"]
OptionalPathName = Literal["weights", "tensorboard_dir"]


@dataclass(frozen=True)
class Settings:
    """Resolved settings, one field per key; `sources` says where each came from, `files` the job files read."""

    train_config: str = setting(
        "pi05_libero",
        "openpi training config (first positional argument of train_pytorch.py)",
        "openpi 训练配置名(train_pytorch.py 的第一个位置参数)",
        form=Form.NAME,
    )
    exp_name: str = setting(
        "pi05_libero_pytorch",
        "experiment name; checkpoints go to <checkpoint_base_dir>/<train_config>/<exp_name>",
        "实验名;检查点保存在 <checkpoint_base_dir>/<train_config>/<exp_name>",
        form=Form.NAME,
    )
    batch_size: int = setting(
        256,
        "GLOBAL batch size; must divide by the total number of processes",
        "全局 batch 大小;必须能被进程总数整除",
    )
    num_train_steps: int = setting(50, "training steps", "训练步数")
    log_interval: int = setting(10, "log every N steps", "每 N 步记录一次日志")
    save_interval: int = setting(25, "save a checkpoint every N steps", "每 N 步保存一次检查点")
    precision: Precision = setting(Precision.BFLOAT16, "training precision", "训练精度")
    wandb: bool = setting(False, "enable Weights & Biases logging", "启用 Weights & Biases 日志")
    num_workers: int | None = setting(
        None,
        "data-loader workers per process (openpi's default when unset)",
        "每个进程的数据加载 worker 数(未设置时使用 openpi 的默认值)",
        minimum=0,
    )
    assets_root: str = setting(
        DEFAULT_ASSETS_ROOT,
        "the openpi-assets root on CFS (the one storage mount)",
        "CFS 上的 openpi-assets 根目录(唯一的存储挂载)",
        path=True,
    )
    openpi_dir: str = setting(
        "/workspace/openpi",
        "openpi source tree in the image (working directory of training)",
        "镜像中的 openpi 源码目录(训练的工作目录)",
        path=True,
    )
    weights: str | None = setting(
        "checkpoints/pi05_base_pytorch",
        "base weights folder (config.json + model.safetensors); relative to assets_root; 'none' for random init",
        "基座权重目录(config.json + model.safetensors);相对于 assets_root;设为 'none' 表示随机初始化",
        path=True,
    )
    assets_base_dir: str = setting(
        "assets",
        "openpi --assets-base-dir (norm stats); relative to assets_root",
        "openpi 的 --assets-base-dir(归一化统计量);相对于 assets_root",
        path=True,
    )
    checkpoint_base_dir: str = setting(
        "checkpoints",
        "openpi --checkpoint-base-dir (training output); relative to assets_root",
        "openpi 的 --checkpoint-base-dir(训练输出);相对于 assets_root",
        path=True,
    )
    dataset_repo_id: str | None = setting(
        "physical-intelligence/libero",
        "LeRobot dataset id under HF_LEROBOT_HOME; 'none' for configs with fake data",
        "HF_LEROBOT_HOME 下的 LeRobot 数据集 id;使用假数据的配置设为 'none'",
        form=Form.RELATIVE_ID,
    )
    asset_id: str | None = setting(
        "physical-intelligence/libero",
        "norm-stats asset id under <assets_base_dir>/<train_config>; 'none' to skip",
        "<assets_base_dir>/<train_config> 下的归一化统计量 asset id;设为 'none' 跳过",
        form=Form.RELATIVE_ID,
    )
    lerobot_home: str = setting(
        "datasets",
        "HF_LEROBOT_HOME for training; relative to assets_root",
        "训练使用的 HF_LEROBOT_HOME;相对于 assets_root",
        path=True,
    )
    log_dir: str = setting(
        "logs",
        "per-node logs and start-up records; relative to assets_root",
        "各节点日志与启动记录;相对于 assets_root",
        path=True,
    )
    tensorboard_dir: str | None = setting(
        "logs/tensorboard",
        "TensorBoard event files, in <tensorboard_dir>/<exp_name>/node<rank>-<stamp>/ (training scalars from node 0, "
        "GPU samples from every node); relative to assets_root; 'none' writes none",
        "TensorBoard 事件文件,位于 <tensorboard_dir>/<exp_name>/node<节点>-<时间>/(0 号节点写训练指标,"
        "每个节点写 GPU 采样);相对于 assets_root;设为 'none' 则不写",
        path=True,
    )
    metrics_interval: int = setting(
        10,
        "seconds between GPU samples (NVML: utilisation, memory, power, SM clock, temperature, throttle reasons) "
        "in the event files; 0: no GPU samples",
        "事件文件中 GPU 采样的间隔秒数(NVML:利用率、显存、功耗、SM 时钟、温度、降频原因);0 表示不采样",
        minimum=0,
    )
    prefetch: bool = setting(
        True,
        "read the base weights and the checkpoint training resumes from into this node's page cache while the "
        "trainer imports and builds its model (one reader per node, at most half of the available memory)",
        "训练进程导入与构建模型期间,把基座权重和续训所用检查点读入本节点页缓存(每节点一个读取进程,最多占可用内存的一半)",
    )
    device: Device = setting(
        Device.GPU,
        "gpu, or cpu for demos and tests (gloo, no GPU checks)",
        "gpu;演示与测试可用 cpu(gloo,不检查 GPU)",
    )
    overwrite: bool = setting(
        False,
        "move an existing experiment folder aside (never deleted) and start fresh",
        "把已有实验目录移到一旁(不会删除)并重新开始",
    )
    rendezvous_timeout: int = setting(
        600,
        "seconds torchrun waits for every node to join (a node that never starts ends the job after this)",
        "torchrun 等待所有节点加入的秒数(有节点始终未启动时,超时后结束任务)",
    )
    master_wait_timeout: int = setting(
        300,
        "seconds a worker node waits, before torchrun, for MASTER_ADDR to resolve (90 s of them at most) and node "
        "0's port to accept connections; then it exits 3. 0: no wait (torchrun waits alone)",
        "非 0 号节点启动 torchrun 前等待的秒数:等待 MASTER_ADDR 可解析(其中最多 90 秒)、0 号节点端口可连接;"
        "超时后以退出码 3 结束。0 表示不等待(由 torchrun 自行等待)",
        minimum=0,
    )
    storage_timeout: int = setting(
        15,
        "seconds each shared-storage mount (CFS) may take to answer a probe before anything under it is touched; "
        "a mount that does not answer ends the command with exit 3. Read from the variable or flag before the job "
        "file (which lives on that storage)",
        "每个共享存储挂载(CFS)应答探测的最长秒数,应答前不访问其下任何文件;无应答时命令以退出码 3 结束。"
        "在读取任务文件(它就在该存储上)之前,从变量或参数读取",
    )
    stall_timeout: int | None = setting(
        None,
        "seconds without training progress before the stall watchdog acts; unset/auto: max(2 min, 5x the usual "
        "gap between progress lines), longer while a checkpoint save runs; 0 turns the watchdog off",
        "训练无进展多少秒后停滞看门狗介入;未设置或 auto:max(2 分钟, 进度行通常间隔的 5 倍),"
        "保存检查点期间更长;0 关闭看门狗",
        minimum=0,
    )
    stall_startup_timeout: int = setting(
        1800,
        "seconds allowed before the first progress line (model load, compilation, data-loader start)",
        "出现第一条进度行之前允许的秒数(模型加载、编译、数据加载器启动)",
    )
    stall_action: StallAction = setting(
        StallAction.FAIL,
        "on a stall: fail (diagnose, then end the node non-zero so the platform ends the job) or warn (diagnose only)",
        "停滞时:fail(诊断后以非零状态结束本节点,由平台结束任务)或 warn(仅诊断)",
    )
    grace_period: int = setting(
        30,
        "seconds workers get to exit after SIGTERM before they are killed",
        "收到 SIGTERM 后留给 worker 退出的秒数,超时即强制结束",
        minimum=0,
    )
    max_restarts: int = setting(
        3,
        "in-job restarts of every node's workers after a retryable failure (a worker killed, a collective error, "
        "a lost peer, a stall), each resuming from the newest complete checkpoint; 0 turns restarts off",
        "可重试故障(worker 被杀、集合通信错误、对端节点丢失、停滞)后在任务内重启各节点 worker 的次数,"
        "每次从最新的完整检查点续训;0 表示不重启",
        minimum=0,
    )
    taco: TacoMode = setting(
        TacoMode.AUTO,
        "TACO acceleration: off, auto (use it when possible, never fatal) or on (a TACO problem fails the launch)",
        "TACO 加速:off、auto(尽可能使用,从不致命)或 on(TACO 出问题则启动失败)",
    )
    taco_wheel: str | None = setting(
        TACO_WHEEL_URL,
        "TACO wheel to install at start when the image has none baked: a file path or an https URL",
        "镜像未内置 TACO 时在启动阶段安装的 wheel:文件路径或 https URL",
        form=Form.SOURCE,
    )
    taco_wheel_sha256: str | None = setting(
        None,
        "expected sha256 of the TACO wheel (a mismatch refuses the wheel)",
        "TACO wheel 的预期 sha256(不一致则拒绝该 wheel)",
    )
    taco_features: str | None = setting(
        None,
        "TACO_TRAIN_FEATURES override (default from the model profile: openpi, wan2.2, else auto)",
        "覆盖 TACO_TRAIN_FEATURES(默认取自模型类型:openpi、wan2.2,其他为 auto)",
    )
    taco_allow_http: bool = setting(
        False,
        "allow a plain-http TACO wheel URL (https only otherwise)",
        "允许明文 http 的 TACO wheel URL(否则只接受 https)",
    )
    preflight: PreflightMode = setting(
        PreflightMode.OFF,
        "bandwidth preflight before training: off, warn (report) or fail (exit 3 when below the minimum or hung)",
        "训练前的带宽预检:off、warn(仅报告)或 fail(低于下限或卡住时以退出码 3 结束)",
    )
    preflight_timeout: int = setting(
        300,
        "seconds before a hung preflight is stopped (a hang points at peer-to-peer transport)",
        "预检卡住多少秒后被终止(卡住通常指向点对点传输问题)",
    )
    preflight_min_busbw: float | None = setting(
        None,
        "minimum all-reduce bus bandwidth in GB/s (default: half the expectation for the fabric)",
        "all-reduce 总线带宽下限,单位 GB/s(默认:该网络预期值的一半)",
    )
    health: HealthMode = setting(
        HealthMode.WARN,
        "node health gate before training and before every in-job restart: warn (a hard GPU or RDMA fault fails "
        "the node, a slow or throttled GPU warns), fail (a slow or throttled GPU fails too) or off",
        "训练前及每次任务内重启前的节点健康检查:warn(GPU 或 RDMA 硬故障使节点失败,GPU 偏慢或降频仅告警)、"
        "fail(GPU 偏慢或降频也失败)或 off",
    )
    extra_args: tuple[str, ...] = setting(
        (),
        "extra trainer flags appended to the command (YAML list, or a shell-quoted string in the variable)",
        "追加到训练命令末尾的参数(YAML 列表,或在变量中写按 shell 规则引用的字符串)",
    )
    env: Mapping[str, str] = setting(
        _NO_ENV,
        "extra environment variables for training (YAML mapping only)",
        "训练用的额外环境变量(仅限 YAML 映射)",
    )

    sources: Mapping[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    unknown_variables: tuple[str, ...] = ()

    @overload
    def path(self, name: PathName) -> Path: ...

    @overload
    def path(self, name: OptionalPathName) -> Path | None: ...

    def path(self, name: str) -> Path | None:
        """A path key, resolved against `assets_root` when relative; None when set to 'none'."""
        if KEYS_BY_NAME[name].kind is not Kind.PATH:
            raise ValueError(f"{name} is not a path setting")
        value = getattr(self, name)
        if value is None:
            return None
        candidate = Path(value)
        return candidate if candidate.is_absolute() else Path(self.assets_root) / candidate

    @property
    def experiment_dir(self) -> Path:
        return self.path("checkpoint_base_dir") / self.train_config / self.exp_name

    def where(self, name: str) -> str:
        """Where the user set key `name`, as an error names it: its variable, its flag, or `<job file>: <key>`."""
        key = KEYS_BY_NAME[name]
        source = self.sources.get(name, "default")
        if source == "command line":
            return key.flag
        if source in ("environment", "default"):
            return key.env
        return f"{source}: {name}"

    def to_json(self) -> dict[str, object]:
        values = {key.name: _plain(getattr(self, key.name)) for key in KEYS}
        values["env"] = masked(self.env)
        if self.taco_wheel:
            values["taco_wheel"] = safe_url(self.taco_wheel)  # a signed URL's query is a credential
        return {"values": values, "sources": dict(self.sources), "files": list(self.files)}


@dataclass(frozen=True)
class Key:
    """One setting as the CLI, the README and the loader see it: YAML key, variable, flag, kind and default."""

    name: str
    kind: Kind
    default: object  # as JSON shows it: plain strings, lists, dicts
    help: str
    help_zh: str
    choices: tuple[str, ...] = ()
    minimum: int = 1
    nullable: bool = False
    form: Form | None = None
    choice_type: type[StrEnum] | None = field(default=None, repr=False)

    @property
    def env(self) -> str:
        return "VLA_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def description(self) -> Text:
        return _DESCRIPTIONS(_description_id(self.name))


def _plain(value: object) -> object:
    """A value as JSON holds it."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


_PLAIN_KINDS: dict[type, Kind] = {bool: Kind.BOOL, int: Kind.INT, float: Kind.FLOAT, str: Kind.STR}


def _key_of(item: dataclasses.Field[Any], annotation: object, default: object) -> Key:
    """The key a `setting(...)` field declares; its kind, choices and nullability come from the annotation."""
    spec: _Spec = item.metadata[_SPEC]
    nullable = isinstance(annotation, types.UnionType)
    members = [a for a in typing.get_args(annotation) if a is not type(None)] if nullable else [annotation]
    if len(members) != 1:
        raise TypeError(f"setting {item.name}: one type, optionally '| None', expected")
    base = members[0]
    choice_type = base if isinstance(base, type) and issubclass(base, StrEnum) else None
    if spec.path and base is str:
        kind = Kind.PATH
    elif choice_type is not None:
        kind = Kind.CHOICE
    elif isinstance(base, type) and base in _PLAIN_KINDS:
        kind = _PLAIN_KINDS[base]
    elif typing.get_origin(base) is tuple and typing.get_args(base) == (str, ...):
        kind = Kind.ARGS
    elif typing.get_origin(base) is Mapping and typing.get_args(base) == (str, str):
        kind = Kind.ENV
    else:
        raise TypeError(f"setting {item.name}: unsupported type {annotation}")
    return Key(
        item.name,
        kind,
        _plain(default),
        spec.help,
        spec.help_zh,
        tuple(m.value for m in choice_type) if choice_type else (),
        spec.minimum,
        nullable,
        spec.form,
        choice_type,
    )


def _keys() -> tuple[Key, ...]:
    annotations = typing.get_type_hints(Settings)
    defaults = Settings()
    return tuple(
        _key_of(item, annotations[item.name], getattr(defaults, item.name))
        for item in dataclasses.fields(Settings)
        if _SPEC in item.metadata
    )


def _description_id(name: str) -> str:
    return "setting-" + name.replace("_", "-")


KEYS: tuple[Key, ...] = _keys()
KEYS_BY_NAME = {key.name: key for key in KEYS}
_DESCRIPTIONS = Catalogue("core", {_description_id(key.name): (key.help, key.help_zh) for key in KEYS})


def _invalid(where: str, what: Text, fix: Text) -> JobMisspecified:
    return JobMisspecified("settings.invalid", where, what, fix)


def _shown(raw: object, limit: int = 80) -> str:
    """A value as an error quotes it: its repr, cut short (a value may be thousands of characters long)."""
    text = repr(raw) if not isinstance(raw, int) or isinstance(raw, bool) else str(raw)[: limit + 1]
    return text if len(text) <= limit else f"{text[:limit]}… ({len(str(raw))} characters)"


def _cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit] + "…"


def _name_problem(key: Key, text: str, where: str) -> JobMisspecified | None:
    """A name in the value longer than a file system allows (`NAME_MAX` bytes), or a path over `PATH_MAX`."""
    if key.kind is not Kind.PATH and key.form not in (Form.NAME, Form.RELATIVE_ID, Form.SOURCE):
        return None
    if key.form is Form.SOURCE and "://" in text:
        return None
    if len(text.encode("utf-8", "surrogateescape")) > PATH_MAX:
        return _too_long_path(where, text)
    for name in text.split("/"):
        size = len(name.encode("utf-8", "surrogateescape"))
        if size > NAME_MAX:
            return JobMisspecified(
                "settings.name-too-long",
                where,
                MESSAGES("name-too-long", where=where, name=_cut(name, 40), size=size, limit=NAME_MAX),
                MESSAGES("name-too-long-fix", where=where),
            )
    return None


def _too_long_path(where: str, path: str | Path) -> JobMisspecified:
    """The error for a path longer than the kernel accepts (`PATH_MAX` bytes)."""
    size = len(str(path).encode("utf-8", "surrogateescape"))
    return JobMisspecified(
        "settings.path-too-long",
        where,
        MESSAGES("path-too-long", where=where, path=_cut(str(path), 60), size=size, limit=PATH_MAX),
        MESSAGES("path-too-long-fix", where=where),
    )


def _convert(key: Key, raw: object, where: str, from_text: bool) -> object:
    """Turn a YAML value or a variable's text into the key's field type, or raise `JobMisspecified` naming `where`.
    An empty text is never a value: only 'none' (or 'null', 'auto') unsets a key that may be unset."""
    if key.nullable and (raw is None or (isinstance(raw, str) and raw.strip().lower() in _NONE_WORDS)):
        return None
    if key.nullable and isinstance(raw, str) and not raw.strip():
        default = "none" if key.default is None else _shown(key.default, 120)
        fix = MESSAGES("setting-empty-fix", where=where, default=default, help=key.description)
        raise _invalid(where, MESSAGES("setting-empty", where=where), fix)

    def bad(expected: Text) -> JobMisspecified:
        return _invalid(
            where,
            MESSAGES("setting-invalid", where=where, raw=_shown(raw), expected=expected),
            MESSAGES("setting-invalid-fix", where=where, expected=expected, help=key.description),
        )

    if key.kind is Kind.INT:
        number: int | None = None
        if isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit():
            number = whole_number(raw)
            if number is None:  # digits, but more than an int64 holds
                raise bad(MESSAGES("expected-integer-range", minimum=key.minimum, maximum=INT64_MAX))
        elif isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        if number is not None and number > INT64_MAX:
            raise bad(MESSAGES("expected-integer-range", minimum=key.minimum, maximum=INT64_MAX))
        if number is None or number < key.minimum:
            raise bad(MESSAGES("expected-integer", minimum=key.minimum))
        return number
    if key.kind is Kind.FLOAT:
        try:
            value = float(raw) if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else -1.0
        except (ValueError, OverflowError):
            value = -1.0
        if not value > 0 or value == float("inf"):
            raise bad(MESSAGES("expected-positive"))
        return value
    if key.kind is Kind.BOOL:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower() if isinstance(raw, (str, int)) else None
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise bad(MESSAGES("expected-bool"))
    if key.kind in (Kind.STR, Kind.CHOICE, Kind.PATH):
        if not isinstance(raw, (str, int, float)) or isinstance(raw, bool) or not str(raw).strip():
            raise bad(MESSAGES("expected-text"))
        text = str(raw).strip()
        if key.choice_type is not None:
            if text not in key.choices:
                raise bad(MESSAGES("expected-choice", choices="|".join(key.choices)))
            return key.choice_type(text)
        if key.form is Form.NAME and not _SAFE_NAME.match(text):
            raise bad(MESSAGES("expected-name"))
        if key.form is Form.RELATIVE_ID and (".." in text.split("/") or text.startswith("/")):
            raise bad(MESSAGES("expected-relative-id"))
        if "\0" in text:
            raise bad(MESSAGES("expected-no-nul"))
        problem = _name_problem(key, text, where)
        if problem is not None:
            raise problem
        return text
    if key.kind is Kind.ARGS:
        if from_text and isinstance(raw, str):
            try:
                return tuple(shlex.split(raw))
            except ValueError as exc:
                raise bad(MESSAGES("expected-shell-words", error=exc)) from None
        if isinstance(raw, list) and all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in raw):
            return tuple(str(a) for a in raw)
        raise bad(MESSAGES("expected-list"))
    if key.kind is Kind.ENV:
        if from_text:
            raise bad(MESSAGES("expected-yaml-mapping"))
        if (
            isinstance(raw, dict)
            and all(isinstance(k, str) and _VARIABLE_NAME.fullmatch(k) for k in raw)
            and all(isinstance(v, (str, int, float, bool)) for v in raw.values())
        ):
            return types.MappingProxyType(
                {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in raw.items()}
            )
        raise bad(MESSAGES("expected-env"))
    raise AssertionError(key.kind)


def _read_yaml(path: Path, variable: str, required: bool) -> dict[str, object] | None:
    """The job file's settings; None when nothing is at `path` and it is not `required`. Anything else that is not
    a readable regular YAML file of known keys (a folder, a FIFO, a dangling link, a duplicate key) is an error."""
    where = variable if required else str(path)
    try:
        text = read_text(path)
    except FileRefused as refused:
        missing = refused.problem is Problem.MISSING
        if missing and not required:
            return None
        if missing:
            raise _invalid(
                where,
                MESSAGES("job-file-missing", path=path),
                MESSAGES("job-file-missing-fix", path=path, where=variable),
            ) from None
        raise _invalid(
            where,
            MESSAGES("job-file-unreadable", path=path, error=describe(refused)),
            MESSAGES("job-file-unreadable-fix", path=path, where=variable),
        ) from None
    from entrypoint.core.yamlfile import YamlProblem, parse  # PyYAML is slow to import: only for a job file

    try:
        data = parse(text)
    except YamlProblem as exc:
        if exc.line is None:
            at, what = str(path), MESSAGES("job-file-syntax", path=path, problem=exc.problem)
        else:
            at = f"{path} (line {exc.line}, column {exc.column})"
            what = MESSAGES("job-file-syntax-at", path=path, line=exc.line, column=exc.column, problem=exc.problem)
        raise _invalid(at, what, MESSAGES("job-file-syntax-fix")) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _invalid(
            str(path),
            MESSAGES("job-file-not-mapping", path=path, type=type(data).__name__),
            MESSAGES("job-file-not-mapping-fix"),
        )
    for name in data:
        if name not in KEYS_BY_NAME:
            import difflib

            close = difflib.get_close_matches(str(name), KEYS_BY_NAME, n=1)
            raise _invalid(
                f"{path}: {name}",
                MESSAGES("job-file-unknown-key", name=name, path=path),
                MESSAGES("job-file-unknown-key-close", name=close[0])
                if close
                else MESSAGES("job-file-unknown-key-fix"),
            )
    return {str(name): value for name, value in data.items()}


def _unknown_variables(env: Mapping[str, str], extra_known: tuple[str, ...]) -> tuple[str, ...]:
    known = {key.env for key in KEYS} | set(OTHER_VARIABLES) | set(extra_known)
    return tuple(sorted(name for name in env if name.startswith("VLA_") and name not in known))


def suggest_variable(name: str, extra_known: tuple[str, ...] = ()) -> str | None:
    """The closest known `VLA_*` variable to a misspelt one."""
    import difflib

    known = [key.env for key in KEYS] + list(OTHER_VARIABLES) + list(extra_known)
    close = difflib.get_close_matches(name, known, n=1)
    return close[0] if close else None


def load_settings(
    env: Mapping[str, str],
    flags: Mapping[str, object] | None = None,
    extra_known_variables: tuple[str, ...] = (),
    before_job_file: Callable[[Path, Path, int], None] | None = None,
) -> Settings:
    """Resolve every key through the precedence chain. `flags` holds command-line values (None = not given).
    `before_job_file(assets_root, job_file, storage_timeout)` is called before the user's job file is looked at
    (it lives on the shared storage, which may have to answer a probe first)."""
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    values: dict[str, Any] = {}  # each converted by `_convert` to its field's type
    sources = {key.name: "default" for key in KEYS}
    files: list[str] = []

    def apply(data: Mapping[str, object], source: str, from_text: bool, where_of: Callable[[Key], str]) -> None:
        for name, raw in data.items():
            key = KEYS_BY_NAME[name]
            values[name] = _convert(key, raw, where_of(key), from_text)
            sources[name] = source

    baked = Path(env.get("VLA_BAKED_JOB_FILE", BAKED_JOB_FILE))
    baked_data = _read_yaml(baked, "VLA_BAKED_JOB_FILE", required=False)
    if baked_data is not None:
        apply(baked_data, str(baked), False, lambda k: f"{baked}: {k.name}")
        files.append(str(baked))

    env_values = {key.name: env[key.env] for key in KEYS if key.env in env}
    # The user's job file may live under the assets root, so resolve that root before looking for it.
    root_key = KEYS_BY_NAME["assets_root"]
    if "assets_root" in given:
        root = _convert(root_key, given["assets_root"], root_key.flag, False)
    elif "assets_root" in env_values:
        root = _convert(root_key, env_values["assets_root"], root_key.env, True)
    else:
        root = values.get("assets_root", DEFAULT_ASSETS_ROOT)
    explicit = given.get("job_file") or env.get("VLA_JOB_FILE")
    variable = "--job-file" if given.get("job_file") else "VLA_JOB_FILE"
    user_file = Path(str(explicit)) if explicit else Path(str(root)) / "code" / "job.yaml"
    if before_job_file is not None:
        timeout_key = KEYS_BY_NAME["storage_timeout"]
        if "storage_timeout" in given:
            timeout = _convert(timeout_key, given["storage_timeout"], timeout_key.flag, False)
        elif "storage_timeout" in env_values:
            timeout = _convert(timeout_key, env_values["storage_timeout"], timeout_key.env, True)
        else:
            timeout = values.get("storage_timeout", timeout_key.default)
        before_job_file(Path(str(root)), user_file, int(str(timeout)))
    user_data = _read_yaml(user_file, variable, required=bool(explicit))
    if user_data is not None:
        apply(user_data, str(user_file), False, lambda k: f"{user_file}: {k.name}")
        files.append(str(user_file))

    apply(env_values, "environment", True, lambda k: k.env)
    apply({k: v for k, v in given.items() if k in KEYS_BY_NAME}, "command line", False, lambda k: k.flag)

    settings = Settings(
        **values, sources=sources, files=tuple(files), unknown_variables=_unknown_variables(env, extra_known_variables)
    )
    for name in ("assets_root", "openpi_dir"):
        value = getattr(settings, name)
        if not Path(value).is_absolute():
            key = KEYS_BY_NAME[name]
            raise _invalid(
                settings.where(name),
                MESSAGES("path-not-absolute", name=name, value=value),
                MESSAGES("path-not-absolute-fix", variable=key.env, default=key.default),
            )
    _check_path_lengths(settings)
    return settings


def _check_path_lengths(settings: Settings) -> None:
    """Every path key, resolved against `assets_root`, and the experiment folder fit in `PATH_MAX` bytes."""
    root = Path(settings.assets_root)
    resolved = {key.name: getattr(settings, key.name) for key in KEYS if key.kind is Kind.PATH}
    paths = {name: root / value for name, value in resolved.items() if value is not None}
    paths["exp_name"] = settings.experiment_dir
    for name, path in paths.items():
        if len(str(path).encode("utf-8", "surrogateescape")) > PATH_MAX:
            raise _too_long_path(settings.where(name), path)
