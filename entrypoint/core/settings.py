"""Job settings: one table of keys, read through the precedence chain and validated.

Lowest to highest precedence: built-in defaults (the seed's `pi05_libero` run) -> the baked
`/etc/vla-entrypoint/job.yaml` -> the user's job file (`VLA_JOB_FILE`, else `<assets_root>/code/job.yaml` when
present) -> `VLA_*` variables -> command-line flags. Any bad value raises `UserError` with exit code 2.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from entrypoint.core.errors import JobMisspecified, UserError
from entrypoint.core.masking import masked, safe_url
from entrypoint.core.messages import Text

BAKED_JOB_FILE = "/etc/vla-entrypoint/job.yaml"
DEFAULT_ASSETS_ROOT = "/home/tione/notebook/embodied-ai/openpi-assets"
TACO_WHEEL_URL = (
    "https://taco-train-data-1251001002.cos.ap-shanghai.myqcloud.com/taco-train/"
    "taco_train-0.1.0%2Bnv-cp312-cp312-linux_x86_64.whl"
)


@dataclass(frozen=True)
class Key:
    """One setting: its YAML key, variable, flag, type and default."""

    name: str
    kind: str  # int | float | bool | str | choice | path | args | env
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: int = 1
    nullable: bool = False

    @property
    def env(self) -> str:
        return "VLA_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


KEYS: tuple[Key, ...] = (
    Key("train_config", "str", "pi05_libero", "openpi training config (first positional argument of train_pytorch.py)"),
    Key(
        "exp_name",
        "str",
        "pi05_libero_pytorch",
        "experiment name; checkpoints go to <checkpoint_base_dir>/<train_config>/<exp_name>",
    ),
    Key("batch_size", "int", 256, "GLOBAL batch size; must divide by the total number of processes"),
    Key("num_train_steps", "int", 50, "training steps"),
    Key("log_interval", "int", 10, "log every N steps"),
    Key("save_interval", "int", 25, "save a checkpoint every N steps"),
    Key("precision", "choice", "bfloat16", "training precision", choices=("bfloat16", "float32")),
    Key("wandb", "bool", False, "enable Weights & Biases logging"),
    Key(
        "num_workers",
        "int",
        None,
        "data-loader workers per process (openpi's default when unset)",
        minimum=0,
        nullable=True,
    ),
    Key("assets_root", "path", DEFAULT_ASSETS_ROOT, "the openpi-assets root on CFS (the one storage mount)"),
    Key("openpi_dir", "path", "/workspace/openpi", "openpi source tree in the image (working directory of training)"),
    Key(
        "weights",
        "path",
        "checkpoints/pi05_base_pytorch",
        "base weights folder (config.json + model.safetensors); relative to assets_root; 'none' for random init",
        nullable=True,
    ),
    Key("assets_base_dir", "path", "assets", "openpi --assets-base-dir (norm stats); relative to assets_root"),
    Key(
        "checkpoint_base_dir",
        "path",
        "checkpoints",
        "openpi --checkpoint-base-dir (training output); relative to assets_root",
    ),
    Key(
        "dataset_repo_id",
        "str",
        "physical-intelligence/libero",
        "LeRobot dataset id under HF_LEROBOT_HOME; 'none' for configs with fake data",
        nullable=True,
    ),
    Key(
        "asset_id",
        "str",
        "physical-intelligence/libero",
        "norm-stats asset id under <assets_base_dir>/<train_config>; 'none' to skip",
        nullable=True,
    ),
    Key("lerobot_home", "path", "datasets", "HF_LEROBOT_HOME for training; relative to assets_root"),
    Key("log_dir", "path", "logs", "per-node logs and start-up records; relative to assets_root"),
    Key("device", "choice", "gpu", "gpu, or cpu for demos and tests (gloo, no GPU checks)", choices=("gpu", "cpu")),
    Key("overwrite", "bool", False, "move an existing experiment folder aside (never deleted) and start fresh"),
    Key(
        "rendezvous_timeout",
        "int",
        600,
        "seconds torchrun waits for every node to join (a node that never starts ends the job after this)",
    ),
    Key(
        "stall_timeout",
        "int",
        None,
        "seconds without training progress before the stall watchdog acts; unset/auto: max(10 min, 20x the usual gap between progress lines); 0 turns the watchdog off",
        minimum=0,
        nullable=True,
    ),
    Key(
        "stall_startup_timeout",
        "int",
        1800,
        "seconds allowed before the first progress line (model load, compilation, data-loader start)",
    ),
    Key(
        "stall_action",
        "choice",
        "fail",
        "on a stall: fail (diagnose, then end the node non-zero so the platform ends the job) or warn (diagnose only)",
        choices=("fail", "warn"),
    ),
    Key("grace_period", "int", 30, "seconds workers get to exit after SIGTERM before they are killed", minimum=0),
    Key(
        "taco",
        "choice",
        "auto",
        "TACO acceleration: off, auto (use it when possible, never fatal) or on (a TACO problem fails the launch)",
        choices=("off", "auto", "on"),
    ),
    Key(
        "taco_wheel",
        "str",
        TACO_WHEEL_URL,
        "TACO wheel to install at start when the image has none baked: a file path or an https URL",
        nullable=True,
    ),
    Key(
        "taco_wheel_sha256",
        "str",
        None,
        "expected sha256 of the TACO wheel (a mismatch refuses the wheel)",
        nullable=True,
    ),
    Key(
        "taco_features",
        "str",
        None,
        "TACO_TRAIN_FEATURES override (default from the model profile: openpi, wan2.2, else auto)",
        nullable=True,
    ),
    Key("taco_allow_http", "bool", False, "allow a plain-http TACO wheel URL (https only otherwise)"),
    Key(
        "preflight",
        "choice",
        "off",
        "bandwidth preflight before training: off, warn (report) or fail (exit 3 when below the minimum or hung)",
        choices=("off", "warn", "fail"),
    ),
    Key(
        "preflight_timeout",
        "int",
        300,
        "seconds before a hung preflight is stopped (a hang points at peer-to-peer transport)",
    ),
    Key(
        "preflight_min_busbw",
        "float",
        None,
        "minimum all-reduce bus bandwidth in GB/s (default: half the expectation for the fabric)",
        nullable=True,
    ),
    Key(
        "extra_args",
        "args",
        [],
        "extra trainer flags appended to the command (YAML list, or a shell-quoted string in the variable)",
    ),
    Key("env", "env", {}, "extra environment variables for training (YAML mapping only)"),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}
# Variables that are ours but are not settings keys.
OTHER_VARIABLES = ("VLA_JOB_FILE", "VLA_BAKED_JOB_FILE", "VLA_HOST_ROOT", "VLA_LANG")
_NONE_WORDS = ("", "none", "null", "auto")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Settings:
    """Resolved settings: `values` by key name, `sources` saying where each came from, and the job files read."""

    values: dict[str, Any]
    sources: dict[str, str]
    files: tuple[str, ...] = ()
    unknown_variables: tuple[str, ...] = field(default=())

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def path(self, name: str) -> Path | None:
        """A path setting, resolved against `assets_root` when relative; None when set to 'none'."""
        value = self.values[name]
        if value is None:
            return None
        candidate = Path(value)
        return candidate if candidate.is_absolute() else Path(self.values["assets_root"]) / candidate

    @property
    def experiment_dir(self) -> Path:
        return self.path("checkpoint_base_dir") / self.train_config / self.exp_name

    def to_json(self) -> dict[str, Any]:
        values = {**self.values, "env": masked(self.values["env"])}
        if values["taco_wheel"]:
            values["taco_wheel"] = safe_url(values["taco_wheel"])  # a signed URL's query is a credential
        return {"values": values, "sources": self.sources, "files": list(self.files)}


def _error(where: str, en: str, zh: str, fix_en: str, fix_zh: str) -> UserError:
    return JobMisspecified("settings.invalid", where, Text(en, zh), Text(fix_en, fix_zh))


def _convert(key: Key, raw: Any, where: str, from_text: bool) -> Any:
    """Turn a YAML value or a variable's text into the key's type, or raise a UserError naming `where`."""
    if key.nullable and (raw is None or (isinstance(raw, str) and raw.strip().lower() in _NONE_WORDS)):
        return None
    kind = key.kind

    def bad(expected_en: str, expected_zh: str) -> UserError:
        return _error(
            where,
            f"{where}={raw!r} is not valid: expected {expected_en}",
            f"{where}={raw!r} 无效:应为{expected_zh}",
            f"Set {where} to {expected_en} ({key.help}).",
            f"请把 {where} 设为{expected_zh}。",
        )

    if kind == "int":
        if isinstance(raw, bool):
            raise bad(f"an integer >= {key.minimum}", f"不小于 {key.minimum} 的整数")
        if isinstance(raw, str) and re.fullmatch(r"\s*\d+\s*", raw):
            raw_int = int(raw)
        elif isinstance(raw, int):
            raw_int = raw
        else:
            raise bad(f"an integer >= {key.minimum}", f"不小于 {key.minimum} 的整数")
        if raw_int < key.minimum:
            raise bad(f"an integer >= {key.minimum}", f"不小于 {key.minimum} 的整数")
        return raw_int
    if kind == "float":
        try:
            value = float(raw) if not isinstance(raw, bool) else -1.0
        except (TypeError, ValueError):
            value = -1.0
        if not value > 0 or value == float("inf"):
            raise bad("a positive number", "正数")
        return value
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower() if isinstance(raw, (str, int)) else None
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise bad("true or false (1/0)", "true 或 false(1/0)")
    if kind in ("str", "choice", "path"):
        if not isinstance(raw, (str, int, float)) or isinstance(raw, bool) or not str(raw).strip():
            raise bad("a non-empty string", "非空字符串")
        text = str(raw).strip()
        if kind == "choice" and text not in key.choices:
            raise bad("one of " + "|".join(key.choices), "以下之一:" + "|".join(key.choices))
        if key.name in ("train_config", "exp_name") and not _SAFE_NAME.match(text):
            raise bad("a plain name of letters, digits, '_', '.', '-'", "仅含字母、数字、'_'、'.'、'-' 的名称")
        if key.name in ("dataset_repo_id", "asset_id") and (".." in text.split("/") or text.startswith("/")):
            raise bad("a relative id such as physical-intelligence/libero", "相对 id,例如 physical-intelligence/libero")
        if "\0" in text:
            raise bad("a string without NUL characters", "不含 NUL 字符的字符串")
        return text
    if kind == "args":
        if from_text and isinstance(raw, str):
            try:
                return shlex.split(raw)
            except ValueError as exc:
                raise bad(f"shell-quoted flags ({exc})", f"按 shell 规则引用的参数({exc})") from None
        if isinstance(raw, list) and all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in raw):
            return [str(a) for a in raw]
        raise bad("a list of strings", "字符串列表")
    if kind == "env":
        if from_text:
            raise bad("a YAML mapping (set it in the job file)", "YAML 映射(请在任务文件中设置)")
        if isinstance(raw, dict) and all(
            isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in raw
        ):
            if all(isinstance(v, (str, int, float, bool)) for v in raw.values()):
                return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in raw.items()}
        raise bad("a mapping of VARIABLE: value", "VARIABLE: value 形式的映射")
    raise AssertionError(kind)


def _read_yaml(path: Path, where: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _error(
            where,
            f"cannot read the job file {path}: {exc}",
            f"无法读取任务文件 {path}:{exc}",
            f"Make {path} a readable UTF-8 YAML file, or point {where} elsewhere.",
            f"请确保 {path} 是可读的 UTF-8 YAML 文件,或修改 {where}。",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise _error(
            f"{path}{at}",
            f"the job file {path} is not valid YAML{at}: {getattr(exc, 'problem', exc)}",
            f"任务文件 {path} 不是合法的 YAML{at}:{getattr(exc, 'problem', exc)}",
            "Fix the syntax at that line (check indentation and quotes).",
            "请修正该行语法(检查缩进与引号)。",
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _error(
            str(path),
            f"the job file {path} must be a mapping of settings, not a {type(data).__name__}",
            f"任务文件 {path} 必须是键值映射,而不是 {type(data).__name__}",
            "Write one 'key: value' per line; see the README's Settings table.",
            "请每行写一个 'key: value';参见 README 的设置表。",
        )
    for name in data:
        if name not in KEYS_BY_NAME:
            close = difflib.get_close_matches(str(name), KEYS_BY_NAME, n=1)
            hint_en = f"Did you mean '{close[0]}'?" if close else "See the README's Settings table for valid keys."
            hint_zh = f"是否应为 '{close[0]}'?" if close else "有效的键见 README 的设置表。"
            raise _error(
                f"{path}: {name}",
                f"unknown key '{name}' in the job file {path}",
                f"任务文件 {path} 中有未知的键 '{name}'",
                hint_en,
                hint_zh,
            )
    return data


def _unknown_variables(env: Mapping[str, str], extra_known: tuple[str, ...]) -> tuple[str, ...]:
    known = {key.env for key in KEYS} | set(OTHER_VARIABLES) | set(extra_known)
    return tuple(sorted(name for name in env if name.startswith("VLA_") and name not in known))


def suggest_variable(name: str, extra_known: tuple[str, ...] = ()) -> str | None:
    """The closest known `VLA_*` variable to a misspelt one."""
    known = [key.env for key in KEYS] + list(OTHER_VARIABLES) + list(extra_known)
    close = difflib.get_close_matches(name, known, n=1)
    return close[0] if close else None


def load_settings(
    env: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
    extra_known_variables: tuple[str, ...] = (),
    exists: Callable[[Path], bool] = Path.is_file,
) -> Settings:
    """Resolve every key through the precedence chain. `flags` holds command-line values (None = not given)."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    values = {key.name: key.default for key in KEYS}
    sources = {key.name: "default" for key in KEYS}
    files: list[str] = []

    def apply(data: Mapping[str, Any], source: str, from_text: bool, where_of: Callable[[Key], str]) -> None:
        for name, raw in data.items():
            key = KEYS_BY_NAME[name]
            values[name] = _convert(key, raw, where_of(key), from_text)
            sources[name] = source

    baked = Path(env.get("VLA_BAKED_JOB_FILE", BAKED_JOB_FILE))
    if exists(baked):
        apply(_read_yaml(baked, "VLA_BAKED_JOB_FILE"), str(baked), False, lambda k: f"{baked}: {k.name}")
        files.append(str(baked))

    env_values = {key.name: env[key.env] for key in KEYS if key.env in env}
    # The user's job file may live under the assets root, so resolve that root before looking for it.
    root = flags.get("assets_root") or env_values.get("assets_root") or values["assets_root"]
    explicit = flags.get("job_file") or env.get("VLA_JOB_FILE")
    user_file = Path(explicit) if explicit else Path(str(root)) / "code" / "job.yaml"
    if explicit and not exists(user_file):
        where = "--job-file" if flags.get("job_file") else "VLA_JOB_FILE"
        raise _error(
            where,
            f"the job file {user_file} does not exist",
            f"任务文件 {user_file} 不存在",
            f"Create {user_file}, or unset {where}.",
            f"请创建 {user_file},或取消 {where}。",
        )
    if exists(user_file):
        apply(_read_yaml(user_file, "VLA_JOB_FILE"), str(user_file), False, lambda k: f"{user_file}: {k.name}")
        files.append(str(user_file))

    apply(env_values, "environment", True, lambda k: k.env)
    apply({k: v for k, v in flags.items() if k in KEYS_BY_NAME}, "command line", False, lambda k: k.flag)

    for name in ("assets_root", "openpi_dir"):
        if not Path(values[name]).is_absolute():
            key = KEYS_BY_NAME[name]
            raise _error(
                key.env,
                f"{name}={values[name]!r} must be an absolute path",
                f"{name}={values[name]!r} 必须是绝对路径",
                f"Set {key.env} to an absolute path such as {key.default}.",
                f"请把 {key.env} 设为绝对路径,例如 {key.default}。",
            )
    return Settings(values, sources, tuple(files), _unknown_variables(env, extra_known_variables))
