"""TACO acceleration (the taco-train wheel): decide how training gets it. Pure: reads files, changes nothing.

`plan_taco`: the wheel baked into the image (`/opt/taco-train`, with `WHEEL.json`) wins; otherwise
`VLA_TACO_WHEEL` (a path, relative to the assets root, or an https URL) is checked by its file name against this
interpreter's tags before anything is fetched, and a local file pinned by `VLA_TACO_WHEEL_SHA256` is hashed now,
so a wrong file is refused by the plan rather than at launch (an https wheel is verified when it is downloaded).
It yields a status (baked | install | skipped | off), findings `taco.*`, and every export training gets with TACO:
`PYTHONPATH = prefix : prefix/taco_train/prelude : the old value`, `TACO_TRAIN_FEATURES` (from the model profile
unless overridden) and `TACO_TRAIN_REPORT=1`, the last two only when the user has not set them. Activation
(`taco.activate`) makes the plan so and may only withdraw these exports, never add to them.

Modes (`VLA_TACO`): `off`; `auto` (default): any TACO problem is a warning and training starts without it;
`on`: a TACO problem fails the launch with exit 3 (exit 2 when a TACO setting itself is malformed).

The wheel and source helpers (packaging's tags, hashing) are imported only once TACO is not off, so `check` and
`run` with `VLA_TACO=off` do not pay for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text, flatten
from entrypoint.core.oserror import os_error_text
from entrypoint.core.settings import Settings, TacoMode
from entrypoint.inspect.environment import EnvPlan
from entrypoint.taco.messages import MESSAGES as M

if TYPE_CHECKING:
    from packaging.tags import Tag

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
_SHA256 = re.compile(r"[0-9a-f]{64}")


class TacoStatus(StrEnum):
    """How training gets TACO: from the image, installed at start, not at all (a problem), or not wanted."""

    BAKED = "baked"
    INSTALL = "install"
    SKIPPED = "skipped"
    OFF = "off"


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
    import tempfile

    return Path(tempfile.gettempdir()) / "vla-taco-train" / "site-packages"


def feature_names(features: str) -> list[str]:
    return [f.strip() for f in features.split(",") if f.strip()]


@dataclass(frozen=True)
class TacoPlan:
    """What will happen to TACO at launch. `env` holds every export (already merged into the plan's environment)."""

    mode: TacoMode
    status: TacoStatus
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
            **flatten(self.reason, "reason"),
            "wheel": self.wheel,
            "source": safe_url(self.source) if self.source else None,
            "sha256": self.sha256,
            "pinned": self.sha256 is not None if self.status is TacoStatus.INSTALL else None,
            "prefix": str(self.prefix) if self.prefix else None,
            "profile": self.profile,
            "features": self.features,
        }


@dataclass(frozen=True)
class Trouble:
    """Why TACO cannot be used. `misspecified`: a TACO setting is malformed (exit 2 with VLA_TACO=on)."""

    what: Text
    fix: Text
    where: str
    misspecified: bool = False


def trouble_finding(mode: TacoMode, trouble: Trouble, id: str = "taco.wheel") -> Finding:
    """A failure under `on` (exit 2 when misspecified, else 3), a warning otherwise."""
    if mode is TacoMode.ON:
        code = ExitCode.JOB_MISSPECIFIED if trouble.misspecified else ExitCode.PREFLIGHT_FAILED
        return failed(id, M("required", what=trouble.what), trouble.fix, trouble.where, code)
    return warned(id, M("skipped", what=trouble.what), M("skipped-fix", fix=trouble.fix), trouble.where)


def _wrong_python(file: str, wheel_tags: str, tags: list[Tag], where: str) -> Trouble:
    from entrypoint.taco.wheel import describe_interpreter

    interpreter = describe_interpreter(tags)
    return Trouble(
        M("wrong-python", file=file, wheel_tags=wheel_tags, interpreter=interpreter), M("wrong-python-fix"), where
    )


def _baked(baked_dir: Path, sha256: str | None, tags: list[Tag]) -> tuple[dict[str, str] | None, Trouble | None]:
    """The baked wheel's record when the image has a usable one; a trouble when it has a broken one."""
    from entrypoint.taco.wheel import fits, parse_wheel_name, read_record

    if not baked_dir.exists():
        return None, None
    record = read_record(baked_dir)
    where = str(baked_dir)
    if record is None or not (prelude_dir(baked_dir) / "sitecustomize.py").is_file():
        return None, Trouble(M("baked-broken", folder=baked_dir), M("rebuild-fix"), where)
    try:
        wheel = parse_wheel_name(record["file"])
    except ValueError as error:
        return None, Trouble(M("baked-no-wheel", error=error), M("rebuild-fix"), where)
    if not fits(wheel, tags):
        return None, _wrong_python(record["file"], wheel.tag_text, tags, where)
    if sha256 is not None and sha256 != record["sha256"]:
        what = M("baked-mismatch", file=record["file"], actual=record["sha256"], expected=sha256)
        return None, Trouble(what, M("baked-mismatch-fix"), "VLA_TACO_WHEEL_SHA256")
    return record, None


def _wheel_source(settings: Settings, tags: list[Tag], sha256: str | None) -> tuple[str, str] | Trouble:
    """(source, file name) of the wheel to install at start, or why it cannot be. A local wheel must exist and,
    when `sha256` is pinned, have that sha256 (hashed here: a wheel is tens of MB)."""
    from entrypoint.net.source import DownloadError, check_scheme, local_path, sha256_of, source_name
    from entrypoint.taco.wheel import fits, parse_wheel_name

    where = settings.where("taco_wheel")
    source = settings.taco_wheel
    if source is None:
        return Trouble(M("no-wheel"), M("no-wheel-fix"), where)
    try:
        check_scheme(source, settings.taco_allow_http)
        path = local_path(source)
    except DownloadError as error:
        what = M("wheel-setting", where=where, what=error.what)
        return Trouble(what, M("scheme-fix", where=where, fix=error.fix), where, True)
    if path is not None and not path.is_absolute():
        path = Path(settings.assets_root) / path
        source = str(path)
    file = source_name(source)
    try:
        wheel = parse_wheel_name(file)
    except ValueError:
        what = M("wheel-setting", where=where, what=M("not-a-wheel", source=safe_url(source)))
        return Trouble(what, M("not-a-wheel-fix", where=where), where, True)
    if wheel.name != DIST_NAME:
        what = M("wheel-setting", where=where, what=M("another-package", file=file, name=wheel.name))
        return Trouble(what, M("another-package-fix", where=where), where, True)
    if not fits(wheel, tags):
        return _wrong_python(file, wheel.tag_text, tags, where)
    if path is not None:
        if not path.is_file():
            what = M("wheel-setting", where=where, what=M("wheel-missing", path=path))
            return Trouble(what, M("wheel-missing-fix"), where)
        if sha256 is not None:
            try:
                actual = sha256_of(path)
            except OSError as error:
                what = M("wheel-unreadable", path=path, error=os_error_text(error))
                return Trouble(what, M("wheel-unreadable-fix"), where)
            if actual != sha256:
                what = M("wheel-mismatch", path=path, actual=actual, expected=sha256)
                return Trouble(what, M("wheel-mismatch-fix", path=path), "VLA_TACO_WHEEL_SHA256")
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
    if mode is TacoMode.OFF:
        off = passed("taco.wheel", M("off"), "VLA_TACO")
        return TacoPlan(mode, TacoStatus.OFF, M("off-reason"), profile, (off,))
    from entrypoint.taco.wheel import interpreter_tags

    tags = list(python_tags) if python_tags is not None else interpreter_tags()
    findings: list[Finding] = []

    def skipped(trouble: Trouble) -> TacoPlan:
        return TacoPlan(mode, TacoStatus.SKIPPED, trouble.what, profile, (*findings, trouble_finding(mode, trouble)))

    sha256 = settings.taco_wheel_sha256
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if not _SHA256.fullmatch(sha256):
            bad = M("bad-sha256", value=settings.taco_wheel_sha256)
            return skipped(Trouble(bad, M("bad-sha256-fix"), "VLA_TACO_WHEEL_SHA256", True))
    record, trouble = _baked(baked_dir, sha256, tags)
    if trouble is not None:
        return skipped(trouble)
    features = settings.taco_features or PROFILE_FEATURES[profile]
    if record is not None:
        status, prefix, source = TacoStatus.BAKED, baked_dir, str(baked_dir)
        wheel, sha256 = record["file"], record["sha256"]
        reason = M("baked-reason", wheel=wheel)
        how = M("how-baked", prefix=prefix)
        if settings.sources.get("taco_wheel", "default") != "default":
            findings.append(
                warned("taco.wheel-ignored", M("wheel-ignored", wheel=wheel), M("wheel-ignored-fix"), "VLA_TACO_WHEEL")
            )
    else:
        chosen = _wheel_source(settings, tags, sha256)
        if isinstance(chosen, Trouble):
            return skipped(chosen)
        source, wheel = chosen
        status, prefix = TacoStatus.INSTALL, install_prefix or default_install_prefix()
        reason = M("install-reason", wheel=wheel)
        how = M("how-install", source=safe_url(source), prefix=prefix)
        if sha256 is None:
            findings.append(
                warned(
                    "taco.checksum",
                    M("unpinned", source=safe_url(source)),
                    M("unpinned-fix"),
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
                M("unknown-features", names=", ".join(unknown)),
                M("unknown-features-fix", known=", ".join(sorted(KNOWN_FEATURES))),
                "TACO_TRAIN_FEATURES" if "TACO_TRAIN_FEATURES" in exports.kept else "VLA_TACO_FEATURES",
            )
        )
    ready = M("ready", wheel=wheel, how=how, features=effective, profile=profile)
    findings.insert(0, passed("taco.wheel", ready, safe_url(source)))
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
