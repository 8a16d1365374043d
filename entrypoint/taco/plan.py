"""TACO acceleration (the taco-train wheel): decide how training gets it, make it so, and say whether it worked.

- `plan_taco` is pure (it reads files, changes nothing): the wheel baked into the image (`/opt/taco-train`, with
  `WHEEL.json`) wins; otherwise `VLA_TACO_WHEEL` (a path, relative to the assets root, or an https URL) is
  checked by its file name against this interpreter's tags before anything is fetched. It yields a status
  (baked | install | skipped | off), findings `taco.*`, and the exports: `PYTHONPATH = prefix : prefix/taco_train/
  prelude : the old value`, `TACO_TRAIN_FEATURES` (from the model profile unless overridden) and
  `TACO_TRAIN_REPORT=1`, the last two only when the user has not set them.
- `activate_taco` acts, on the way to launch: download (timeouts, retries, resume, progress), checksum, `pip
  install --target` into a temporary prefix, then a child interpreter run with the training environment proves
  the prelude is the `sitecustomize` every rank and DataLoader worker will import.
- `TacoActivation.outcome` reads rank 0's `taco-train — optimization summary` into a verdict one can see at a
  glance (applied, partial, not applied, unconfirmed, not used).

Modes (`VLA_TACO`): `off`; `auto` (default): any TACO problem is a warning and training starts without it;
`on`: a TACO problem fails the launch with exit 3 (exit 2 when a TACO setting itself is malformed).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from packaging.tags import Tag

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, Status, failed, passed, warned
from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text, render
from entrypoint.core.settings import Settings
from entrypoint.inspect.environment import EnvPlan
from entrypoint.net.download import (
    DownloadError,
    DownloadOptions,
    check_scheme,
    fetch,
    local_path,
    source_name,
)
from entrypoint.taco.summary import applied_count
from entrypoint.taco.wheel import (
    describe_interpreter,
    fits,
    install,
    interpreter_tags,
    parse_wheel_name,
    read_record,
    write_record,
)

BAKED_DIR = Path("/opt/taco-train")
DIST_NAME = "taco-train"
PROFILE_FEATURES = {
    "openpi": "openpi_skip_outer_checkpoint,openpi_compile,tf32",
    "wan2.2": "wan_disable_addmm,wan_compile,wan_vae_chunk,wan_fused_padcat,wan_rope_f32,wan_rmsnorm",
    "generic": "auto",
}
# The features the wheel documents; a name outside this list is passed on but reported (the wheel may ignore it).
KNOWN_FEATURES = frozenset(
    {
        "openpi_compile",
        "openpi_sdpa",
        "openpi_skip_outer_checkpoint",
        "tf32",
        "compile",
        "cudnn_benchmark",
        "dataloader",
        "cuda_prefetch",
        "thread_affinity",
        "gc_tuning",
        "memory",
        "fused_adamw",
        "split_k_batchnorm",
        "ulimit",
        "wan_disable_addmm",
        "wan_compile",
        "wan_vae_chunk",
        "wan_fused_padcat",
        "wan_rope_f32",
        "wan_rmsnorm",
    }
)
DOWNLOAD = DownloadOptions(timeout_s=30, attempts=4, backoff_s=2, deadline_s=600)
VERIFY_TIMEOUT_S = 120
_SHA256 = re.compile(r"[0-9a-f]{64}")


def model_profile(train_config: str) -> str:
    """`openpi` for pi0*/pi05*/debug* configs, `wan2.2` for wan*, else `generic`."""
    name = train_config.lower()
    if name.startswith(("pi0", "debug")):
        return "openpi"
    if name.startswith("wan"):
        return "wan2.2"
    return "generic"


def prelude_dir(prefix: Path) -> Path:
    return prefix / "taco_train" / "prelude"


def compose_pythonpath(prefix: Path, old: str | None) -> str:
    """`prefix:prefix/taco_train/prelude[:old]`; an empty old value adds nothing (an empty entry would mean the cwd)."""
    return ":".join([str(prefix), str(prelude_dir(prefix))] + ([old] if old else []))


def default_install_prefix() -> Path:
    """Where a start-time install goes: a fixed folder under the temp dir, so `plan` can show the exact PYTHONPATH."""
    return Path(tempfile.gettempdir()) / "vla-taco-train" / "site-packages"


def feature_names(features: str) -> list[str]:
    return [f.strip() for f in features.split(",") if f.strip()]


@dataclass(frozen=True)
class TacoPlan:
    """What will happen to TACO at launch. `env` holds the exports (already merged into the plan's environment)."""

    mode: str  # off | auto | on
    status: str  # baked | install | skipped | off
    reason: Text
    profile: str
    findings: tuple[Finding, ...]
    env: EnvPlan = field(default_factory=EnvPlan)
    features: str | None = None  # what TACO_TRAIN_FEATURES will be
    wheel: str | None = None  # the wheel's file name
    source: str | None = None  # baked: the prefix; install: the path or URL it comes from
    sha256: str | None = None  # pinned (install) or recorded (baked)
    prefix: Path | None = None
    allow_http: bool = False
    old_pythonpath: str | None = None  # restored when activation fails

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "mode": self.mode,
            "reason": self.reason.en,
            "reason_zh": self.reason.zh,
            "wheel": self.wheel,
            "source": safe_url(self.source) if self.source else None,
            "sha256": self.sha256,
            "pinned": self.sha256 is not None if self.status == "install" else None,
            "prefix": str(self.prefix) if self.prefix else None,
            "profile": self.profile,
            "features": self.features,
        }


@dataclass(frozen=True)
class _Trouble:
    """Why TACO cannot be used. `misspecified`: a TACO setting is malformed (exit 2 with VLA_TACO=on)."""

    what: Text
    fix: Text
    where: str
    misspecified: bool = False


def _trouble_finding(mode: str, trouble: _Trouble, id: str = "taco.wheel") -> Finding:
    if mode == "on":
        code = ExitCode.JOB_MISSPECIFIED if trouble.misspecified else ExitCode.PREFLIGHT_FAILED
        return failed(
            id,
            Text(
                f"TACO is required (VLA_TACO=on) but cannot be used: {trouble.what.en}",
                f"要求使用 TACO(VLA_TACO=on),但无法使用:{trouble.what.zh}",
            ),
            trouble.fix,
            trouble.where,
            code,
        )
    return warned(
        id,
        Text(
            f"TACO skipped, training starts without it: {trouble.what.en}",
            f"已跳过 TACO,训练将在无加速的情况下启动:{trouble.what.zh}",
        ),
        Text(f"{trouble.fix.en} (VLA_TACO=off silences this.)", f"{trouble.fix.zh}(设置 VLA_TACO=off 可不再提示。)"),
        trouble.where,
    )


def _wrong_python(file: str, wheel_tags: str, tags: list[Tag], where: str) -> _Trouble:
    interpreter = describe_interpreter(tags)
    return _Trouble(
        Text(
            f"{file} is built for {wheel_tags}, which this interpreter, {interpreter}, cannot load",
            f"{file} 为 {wheel_tags} 构建,当前解释器 {interpreter} 无法加载",
        ),
        Text(
            "Use the VLA base image (CPython 3.12), or a taco_train wheel built for this Python.",
            "请使用 VLA 基础镜像(CPython 3.12),或为当前 Python 构建的 taco_train wheel。",
        ),
        where,
    )


def _baked(baked_dir: Path, sha256: str | None, tags: list[Tag]) -> tuple[dict[str, str] | None, _Trouble | None]:
    """The baked wheel's record when the image has a usable one; a trouble when it has a broken one."""
    if not baked_dir.exists():
        return None, None
    record = read_record(baked_dir)
    where = str(baked_dir)
    rebuild = Text("Rebuild the image with the openpi-taco bake target.", "请用 openpi-taco 构建目标重新构建镜像。")
    if record is None or not (prelude_dir(baked_dir) / "sitecustomize.py").is_file():
        return None, _Trouble(
            Text(
                f"the image's {baked_dir} has no valid WHEEL.json or no taco_train/prelude/sitecustomize.py",
                f"镜像中的 {baked_dir} 缺少有效的 WHEEL.json 或 taco_train/prelude/sitecustomize.py",
            ),
            rebuild,
            where,
        )
    try:
        wheel = parse_wheel_name(record["file"])
    except ValueError as error:
        return None, _Trouble(
            Text(f"the image's WHEEL.json names no wheel: {error}", f"镜像的 WHEEL.json 未给出合法 wheel:{error}"),
            rebuild,
            where,
        )
    if not fits(wheel, tags):
        return None, _wrong_python(record["file"], wheel.tag_text, tags, where)
    if sha256 is not None and sha256 != record["sha256"]:
        return None, _Trouble(
            Text(
                f"the baked wheel {record['file']} has sha256 {record['sha256']}, not the pinned {sha256}",
                f"镜像内置的 {record['file']} 的 sha256 为 {record['sha256']},与固定值 {sha256} 不符",
            ),
            Text(
                "Pin the baked wheel's checksum, or rebuild the image with the wheel you pinned.",
                "请固定内置 wheel 的校验和,或用所固定的 wheel 重新构建镜像。",
            ),
            "VLA_TACO_WHEEL_SHA256",
        )
    return record, None


def _wheel_source(settings: Settings, tags: list[Tag]) -> tuple[str, str] | _Trouble:
    """(source, file name) of the wheel to install at start, or why it cannot be."""
    where = "VLA_TACO_WHEEL"
    source = settings.taco_wheel
    if source is None:
        return _Trouble(
            Text(
                "the image has no baked TACO wheel and VLA_TACO_WHEEL is none",
                "镜像未内置 TACO wheel,且 VLA_TACO_WHEEL 为 none",
            ),
            Text(
                "Set VLA_TACO_WHEEL to the wheel's path or https URL, or use the openpi-taco image.",
                "请把 VLA_TACO_WHEEL 设为 wheel 的路径或 https 地址,或使用 openpi-taco 镜像。",
            ),
            where,
        )
    try:
        check_scheme(source, settings.taco_allow_http)
        path = local_path(source)
    except DownloadError as error:
        return _Trouble(
            error.what,
            Text(
                f"{error.fix.en} (Plain http needs VLA_TACO_ALLOW_HTTP=1.)",
                f"{error.fix.zh}(明文 http 需设置 VLA_TACO_ALLOW_HTTP=1。)",
            ),
            where,
            True,
        )
    if path is not None and not path.is_absolute():
        path = Path(settings.assets_root) / path
        source = str(path)
    file = source_name(source)
    try:
        wheel = parse_wheel_name(file)
    except ValueError as error:
        return _Trouble(
            Text(
                f"{safe_url(source)} is not a wheel file name: {error}", f"{safe_url(source)} 不是 wheel 文件名:{error}"
            ),
            Text(
                "Point VLA_TACO_WHEEL at a taco_train-<version>-<tags>.whl file.",
                "请让 VLA_TACO_WHEEL 指向 taco_train-<版本>-<标签>.whl 文件。",
            ),
            where,
            True,
        )
    if wheel.name != DIST_NAME:
        return _Trouble(
            Text(
                f"{file} is a {wheel.name} wheel, not taco_train", f"{file} 是 {wheel.name} 的 wheel,而不是 taco_train"
            ),
            Text("Point VLA_TACO_WHEEL at the taco_train wheel.", "请让 VLA_TACO_WHEEL 指向 taco_train 的 wheel。"),
            where,
            True,
        )
    if not fits(wheel, tags):
        return _wrong_python(file, wheel.tag_text, tags, where)
    if path is not None and not path.is_file():
        return _Trouble(
            Text(f"the TACO wheel {path} does not exist", f"TACO wheel {path} 不存在"),
            Text(
                "Check the path (relative paths are under the assets root) and that the storage is mounted.",
                "请检查路径(相对路径基于资源根目录)以及存储是否已挂载。",
            ),
            where,
        )
    return source, file


def plan_taco(
    settings: Settings,
    env: Mapping[str, str],
    python_tags: Iterable[Tag] | None = None,
    baked_dir: Path = BAKED_DIR,
    install_prefix: Path | None = None,
) -> TacoPlan:
    """Decide TACO for this launch. `env` is the environment training would get without TACO (the plan's
    `EnvPlan.apply(host.env)`); `python_tags` default to this interpreter's. Pure: reads files, changes nothing."""
    mode, profile = settings.taco, model_profile(settings.train_config)
    if mode == "off":
        reason = Text("VLA_TACO=off", "VLA_TACO=off")
        return TacoPlan(
            mode,
            "off",
            reason,
            profile,
            (
                passed(
                    "taco.wheel",
                    Text("TACO acceleration is off (VLA_TACO=off)", "TACO 加速已关闭(VLA_TACO=off)"),
                    "VLA_TACO",
                ),
            ),
        )
    tags = list(python_tags) if python_tags is not None else interpreter_tags()
    findings: list[Finding] = []

    def skipped(trouble: _Trouble) -> TacoPlan:
        return TacoPlan(mode, "skipped", trouble.what, profile, tuple(findings) + (_trouble_finding(mode, trouble),))

    sha256 = settings.taco_wheel_sha256
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if not _SHA256.fullmatch(sha256):
            return skipped(
                _Trouble(
                    Text(
                        f"VLA_TACO_WHEEL_SHA256={settings.taco_wheel_sha256!r} is not a sha256 (64 hex digits)",
                        f"VLA_TACO_WHEEL_SHA256={settings.taco_wheel_sha256!r} 不是 sha256(64 位十六进制)",
                    ),
                    Text(
                        "Set it to the output of `sha256sum <wheel>`, or unset it.",
                        "请设为 `sha256sum <wheel>` 的输出,或取消设置。",
                    ),
                    "VLA_TACO_WHEEL_SHA256",
                    True,
                )
            )
    record, trouble = _baked(baked_dir, sha256, tags)
    if trouble is not None:
        return skipped(trouble)
    features = settings.taco_features or PROFILE_FEATURES[profile]
    if record is not None:
        status, prefix, wheel, source, sha256 = "baked", baked_dir, record["file"], str(baked_dir), record["sha256"]
        reason = Text(f"the image has {wheel} baked in", f"镜像已内置 {wheel}")
        if settings.sources.get("taco_wheel", "default") != "default":
            findings.append(
                warned(
                    "taco.wheel-ignored",
                    Text(
                        f"VLA_TACO_WHEEL is ignored: the image has {wheel} baked in",
                        f"VLA_TACO_WHEEL 被忽略:镜像已内置 {wheel}",
                    ),
                    Text(
                        "Use the openpi image (without TACO baked in) to install another wheel at start.",
                        "如需在启动时安装其他 wheel,请使用未内置 TACO 的 openpi 镜像。",
                    ),
                    "VLA_TACO_WHEEL",
                )
            )
    else:
        chosen = _wheel_source(settings, tags)
        if isinstance(chosen, _Trouble):
            return skipped(chosen)
        source, wheel = chosen
        status, prefix = "install", install_prefix or default_install_prefix()
        reason = Text(
            f"no wheel baked into the image; {wheel} is installed at start", f"镜像未内置 wheel;启动时安装 {wheel}"
        )
        if sha256 is None:
            findings.append(
                warned(
                    "taco.checksum",
                    Text(
                        f"the TACO wheel {safe_url(source)} is not pinned: it is installed unverified",
                        f"TACO wheel {safe_url(source)} 未固定校验和:将不经校验安装",
                    ),
                    Text(
                        "Set VLA_TACO_WHEEL_SHA256 to the wheel's sha256 so a changed or corrupted file is refused.",
                        "请设置 VLA_TACO_WHEEL_SHA256 为 wheel 的 sha256,以拒绝被篡改或损坏的文件。",
                    ),
                    "VLA_TACO_WHEEL_SHA256",
                )
            )

    exports = EnvPlan()
    old = env.get("PYTHONPATH")
    exports.set["PYTHONPATH"] = compose_pythonpath(prefix, old)
    exports.offer(env, "TACO_TRAIN_FEATURES", features)
    exports.offer(env, "TACO_TRAIN_REPORT", "1")
    effective = exports.kept.get("TACO_TRAIN_FEATURES", features)
    unknown = [f for f in feature_names(effective) if f not in KNOWN_FEATURES and f != "auto"]
    if unknown:
        findings.append(
            warned(
                "taco.features",
                Text(
                    f"TACO feature(s) {', '.join(unknown)} are not documented; the wheel may ignore them",
                    f"TACO 特性 {', '.join(unknown)} 不在文档列表中,wheel 可能忽略它们",
                ),
                Text(
                    f"Check the spelling; documented: {', '.join(sorted(KNOWN_FEATURES))}, or auto.",
                    f"请检查拼写;文档中的特性:{', '.join(sorted(KNOWN_FEATURES))},或 auto。",
                ),
                "TACO_TRAIN_FEATURES" if "TACO_TRAIN_FEATURES" in exports.kept else "VLA_TACO_FEATURES",
            )
        )
    how = (
        Text(f"baked into the image at {prefix}", f"已内置于镜像 {prefix}")
        if status == "baked"
        else Text(
            f"installed at start from {safe_url(source)} into {prefix}", f"启动时从 {safe_url(source)} 安装到 {prefix}"
        )
    )
    findings.insert(
        0,
        passed(
            "taco.wheel",
            Text(
                f"TACO: {wheel} {how.en}; features {effective} (profile {profile})",
                f"TACO:{wheel} {how.zh};特性 {effective}(模型类型 {profile})",
            ),
            safe_url(source),
        ),
    )
    return TacoPlan(
        mode,
        status,
        reason,
        profile,
        tuple(findings),
        exports,
        effective,
        wheel,
        source,
        sha256,
        prefix,
        settings.taco_allow_http,
        old,
    )


@dataclass(frozen=True)
class TacoOutcome:
    """The end-of-job verdict: applied | partial | not-applied | unconfirmed | on-node-0 | not-used | off."""

    verdict: str
    message: Text
    features: dict[str, str] | None = None  # rank 0's summary box, as printed

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "message": self.message.en,
            "message_zh": self.message.zh,
            "features": self.features,
        }


@dataclass(frozen=True)
class TacoActivation:
    """What activation did. `env` is the environment to launch training with: TACO's exports withdrawn unless
    `status` is `active`. `finding` is set when activation itself failed (warn with auto, fail with on)."""

    status: str  # active | failed | skipped | off
    env: dict[str, str]
    plan: TacoPlan
    finding: Finding | None = None
    reason: Text | None = None  # why activation failed
    sha256: str | None = None  # of the wheel actually used
    version: str | None = None  # taco-train's version as the child interpreter saw it
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def requested(self) -> list[str] | None:
        """The features asked for by name; None when the wheel chooses (`auto`, or TACO_TRAIN_ALL=1)."""
        names = feature_names(self.env.get("TACO_TRAIN_FEATURES", self.plan.features or ""))
        if self.env.get("TACO_TRAIN_ALL") == "1" or not names or "auto" in names:
            return None
        return names

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "plan_status": self.plan.status,
            "wheel": self.plan.wheel,
            "sha256": self.sha256,
            "pinned": self.plan.sha256 is not None,
            "prefix": str(self.plan.prefix) if self.plan.prefix else None,
            "version": self.version,
            "features": self.env.get("TACO_TRAIN_FEATURES") if self.status == "active" else None,
            "seconds": self.seconds,
            "finding": self.finding.to_json() if self.finding else None,
        }

    def outcome(self, summary: dict[str, str] | None, node_rank: int) -> TacoOutcome:
        """The verdict after training, from rank 0's summary box (`taco_summary.SummaryReader`) on node 0."""
        if self.status == "off":
            return TacoOutcome("off", Text("TACO: off (VLA_TACO=off)", "TACO:已关闭(VLA_TACO=off)"))
        if self.status != "active":
            reason = self.reason or self.plan.reason
            return TacoOutcome(
                "not-used",
                Text(
                    f"TACO: NOT USED — training ran without acceleration ({reason.en})",
                    f"TACO:未使用 — 训练在无加速的情况下运行({reason.zh})",
                ),
            )
        if summary is None:
            if node_rank != 0:
                return TacoOutcome(
                    "on-node-0",
                    Text(
                        "TACO: active on this node; rank 0's optimization summary is in node 0's log",
                        "TACO:本节点已启用;rank 0 的优化汇总见节点 0 的日志",
                    ),
                )
            return TacoOutcome(
                "unconfirmed",
                Text(
                    "TACO: UNCONFIRMED — rank 0 printed no taco-train optimization summary; compare step time or samples/s to confirm a speed-up",
                    "TACO:未确认 — rank 0 未输出 taco-train 优化汇总;请对比步时或每秒样本数确认是否加速",
                ),
                None,
            )
        applied = [name for name, status in summary.items() if applied_count(status)]
        wanted = self.requested
        if wanted is None:  # the wheel chose: judge by what it applied
            verdict, missing = ("applied" if applied else "not-applied"), []
            count, count_zh = f"{len(applied)} feature(s) applied", f"{len(applied)} 项特性已应用"
        else:
            missing = [name for name in wanted if name not in applied]
            verdict = "applied" if not missing else ("partial" if len(missing) < len(wanted) else "not-applied")
            count = f"{len(wanted) - len(missing)} of {len(wanted)} requested feature(s) applied"
            count_zh = f"请求的 {len(wanted)} 项特性中 {len(wanted) - len(missing)} 项已应用"
        done = ", ".join(f"{name} {summary[name]}" for name in applied if wanted is None or name in wanted) or "none"
        left = ", ".join(f"{name} {summary.get(name, '(not in the summary)')}" for name in missing)
        left_zh = ", ".join(f"{name} {summary.get(name, '(汇总中未出现)')}" for name in missing)
        head = {
            "applied": ("APPLIED", "已生效"),
            "partial": ("PARTIAL", "部分生效"),
            "not-applied": ("NOT APPLIED", "未生效"),
        }[verdict]
        return TacoOutcome(
            verdict,
            Text(
                f"TACO: {head[0]} — {count}: {done}" + (f"; not applied: {left}" if left else ""),
                f"TACO:{head[1]} — {count_zh}:{done}" + (f";未应用:{left_zh}" if left else ""),
            ),
            dict(summary),
        )


class _Failed(Exception):
    def __init__(self, what: Text, fix: Text, where: str) -> None:
        super().__init__(what.en)
        self.what, self.fix, self.where = what, fix, where


_PROBE = """\
import importlib.metadata, importlib.util, json, sys
site = sys.modules.get("sitecustomize")
spec = importlib.util.find_spec("taco_train")
try:
    version = importlib.metadata.version("taco-train")
except importlib.metadata.PackageNotFoundError:
    version = None
print(json.dumps({"sitecustomize": getattr(site, "__file__", None), "taco_train": spec and spec.origin, "version": version}))
"""


def _withdrawn(plan: TacoPlan, env: Mapping[str, str]) -> dict[str, str]:
    """`env` without TACO's exports: the old PYTHONPATH back, TACO_TRAIN_* that we added removed."""
    result = dict(env)
    for name in plan.env.set:
        result.pop(name, None)
    if plan.old_pythonpath is not None and "PYTHONPATH" in plan.env.set:
        result["PYTHONPATH"] = plan.old_pythonpath
    return result


def _install(
    plan: TacoPlan,
    env: dict[str, str],
    out: TextIO,
    python: str,
    options: DownloadOptions,
    seconds: dict[str, float],
    clock: Callable[[], float],
) -> str:
    """Fetch, verify and install the wheel into `plan.prefix`; returns its sha256."""
    assert plan.prefix is not None and plan.source is not None and plan.wheel is not None
    start = clock()
    try:
        got = fetch(
            plan.source, plan.prefix.parent / "download", sha256=plan.sha256, options=options, progress=out, clock=clock
        )
    except DownloadError as error:
        raise _Failed(error.what, error.fix, error.where) from None
    seconds["fetch"] = round(clock() - start, 3)
    if got.downloaded:
        out.write(
            f"vla-entrypoint: TACO: downloaded {plan.wheel} ({got.size} bytes, {got.attempts} attempt(s)) in {seconds['fetch']:.1f}s\n"
        )
    if plan.sha256 is None:
        out.write(
            f"vla-entrypoint: TACO: {plan.wheel} is unpinned (sha256 {got.sha256}); set VLA_TACO_WHEEL_SHA256 to enforce it\n"
        )
    start = clock()
    ok, output = install(got.path, plan.prefix, _withdrawn(plan, env), python)
    if got.downloaded:
        got.path.unlink(missing_ok=True)
    if not ok:
        raise _Failed(
            Text(
                f"pip could not install {plan.wheel} into {plan.prefix}: {output[-800:]}",
                f"pip 无法把 {plan.wheel} 安装到 {plan.prefix}:{output[-800:]}",
            ),
            Text(
                "Check that the wheel is intact and that the temp folder is writable with free space.",
                "请确认 wheel 完好,且临时目录可写并有剩余空间。",
            ),
            str(plan.prefix),
        )
    write_record(plan.prefix, plan.wheel, got.sha256)
    seconds["install"] = round(clock() - start, 3)
    out.write(f"vla-entrypoint: TACO: installed {plan.wheel} into {plan.prefix} in {seconds['install']:.1f}s\n")
    return got.sha256


def _verify(plan: TacoPlan, env: Mapping[str, str], python: str) -> str | None:
    """Run a child interpreter with the training environment: the prelude must be the `sitecustomize` it imports
    and `taco_train` must come from the prefix. Returns taco-train's version (None when it has no metadata)."""
    assert plan.prefix is not None
    where = str(prelude_dir(plan.prefix))
    fix = Text(
        "Check that nothing earlier on PYTHONPATH shadows the prelude, and that the wheel matches this Python.",
        "请确认 PYTHONPATH 中没有更靠前的条目遮蔽 prelude,且 wheel 与当前 Python 匹配。",
    )
    try:
        result = subprocess.run(
            [python, "-c", _PROBE],
            env={**env, "TACO_TRAIN_REPORT": "0"},
            capture_output=True,
            text=True,
            timeout=VERIFY_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise _Failed(
            Text(
                f"the TACO check in a child interpreter did not finish: {error}",
                f"子解释器中的 TACO 检查未完成:{error}",
            ),
            fix,
            where,
        ) from None
    errors = "\n".join(result.stderr.strip().splitlines()[-6:])
    try:
        seen = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise _Failed(
            Text(
                f"the TACO check in a child interpreter failed (exit {result.returncode}): {errors}",
                f"子解释器中的 TACO 检查失败(退出码 {result.returncode}):{errors}",
            ),
            fix,
            where,
        ) from None
    prelude = prelude_dir(plan.prefix).resolve()
    site = seen.get("sitecustomize")
    if not site or Path(site).resolve().parent != prelude:
        detail = f"it imported {site}" if site else f"the prelude did not load{': ' + errors if errors else ''}"
        raise _Failed(
            Text(
                f"training processes would not run the TACO prelude {prelude}/sitecustomize.py ({detail})",
                f"训练进程不会执行 TACO prelude {prelude}/sitecustomize.py({detail})",
            ),
            fix,
            where,
        )
    origin = seen.get("taco_train")
    if not origin or plan.prefix.resolve() not in Path(origin).resolve().parents:
        raise _Failed(
            Text(
                f"taco_train is not importable from {plan.prefix} (found: {origin})",
                f"无法从 {plan.prefix} 导入 taco_train(实际:{origin})",
            ),
            fix,
            where,
        )
    return seen.get("version")


def _steps(
    plan: TacoPlan,
    env: dict[str, str],
    out: TextIO,
    python: str,
    options: DownloadOptions,
    seconds: dict[str, float],
    clock: Callable[[], float],
) -> tuple[str | None, str | None]:
    """Install when needed, then verify; returns (sha256 of the wheel, taco-train's version). Raises `_Failed`."""
    try:
        sha256 = _install(plan, env, out, python, options, seconds, clock) if plan.status == "install" else plan.sha256
        verify_start = clock()
        version = _verify(plan, env, python)
        seconds["verify"] = round(clock() - verify_start, 3)
        return sha256, version
    except OSError as error:  # the temp folder: not writable, full
        raise _Failed(
            Text(f"cannot prepare TACO in {plan.prefix}: {error}", f"无法在 {plan.prefix} 准备 TACO:{error}"),
            Text("Make the temp folder (TMPDIR) writable with free space.", "请确保临时目录(TMPDIR)可写且有剩余空间。"),
            str(plan.prefix),
        ) from None


def activate_taco(
    plan: TacoPlan,
    env: Mapping[str, str],
    out: TextIO,
    *,
    lang: str = "both",
    python: str = sys.executable,
    options: DownloadOptions | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TacoActivation:
    """Make the plan so, before torchrun starts. `env` is the training environment with the plan's exports in it
    (`plan.env.apply(host.env)`, with `TacoPlan.env` merged into the plan's). Never raises for a TACO problem: a failure
    is returned as `finding` (warn with auto, fail with exit 3 with on) and the exports are withdrawn."""
    if plan.status in ("off", "skipped"):
        return TacoActivation(plan.status, _withdrawn(plan, env), plan)
    start = clock()
    seconds: dict[str, float] = {}
    env = dict(env)
    options = options or dataclasses.replace(DOWNLOAD, allow_http=plan.allow_http)
    try:
        sha256, version = _steps(plan, env, out, python, options, seconds, clock)
    except _Failed as failure:
        seconds["total"] = round(clock() - start, 3)
        trouble = _Trouble(failure.what, failure.fix, failure.where)
        finding = _trouble_finding(plan.mode, trouble, "taco.activate")
        out.write(
            f"vla-entrypoint: {'FAIL' if finding.status is Status.FAIL else 'WARN'} [taco.activate] "
            f"{render(finding.message, lang)}\n    -> {render(finding.hint or trouble.fix, lang)}\n"
        )
        return TacoActivation("failed", _withdrawn(plan, env), plan, finding, failure.what, seconds=seconds)
    seconds["total"] = round(clock() - start, 3)
    out.write(
        f"vla-entrypoint: TACO active: {plan.wheel}{f' {version}' if version else ''} from {plan.prefix}, "
        f"features {env.get('TACO_TRAIN_FEATURES')}; ready in {seconds['total']:.2f}s\n"
    )
    return TacoActivation("active", env, plan, sha256=sha256, version=version, seconds=seconds)
