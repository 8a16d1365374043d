"""TACO on the way to launch: make the plan so, and afterwards say whether it worked.

- `activate_taco` acts: download (timeouts, retries, resume, progress), checksum, `pip install --target` into a
  temporary prefix, then a child interpreter run with the training environment proves the prelude is the
  `sitecustomize` every rank and DataLoader worker will import. It exports nothing the plan did not: on success
  training gets exactly the planned environment; on failure TACO's exports are withdrawn.
- `TacoActivation.outcome` reads rank 0's `taco-train — optimization summary` into a verdict one can see at a
  glance (applied, partial, not applied, unconfirmed, not used).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TextIO

from entrypoint.core.findings import Finding, Status
from entrypoint.core.masking import MaskedStream, mask_text, secrets_in
from entrypoint.core.messages import Lang, Text, flatten, render
from entrypoint.core.oserror import os_error_text
from entrypoint.net.source import DownloadError, DownloadOptions, FailureKind
from entrypoint.taco.messages import MESSAGES as M
from entrypoint.taco.plan import TacoPlan, TacoStatus, Trouble, feature_names, prelude_dir, trouble_finding
from entrypoint.taco.summary import applied_count
from entrypoint.taco.wheel import install, write_record

DOWNLOAD = DownloadOptions(timeout_s=30, attempts=4, backoff_s=2, deadline_s=600)
VERIFY_TIMEOUT_S = 120
LEAD = "vla-entrypoint: "


class ActivationStatus(StrEnum):
    ACTIVE = "active"
    FAILED = "failed"  # the plan said baked or install, but activation failed: exports withdrawn
    SKIPPED = "skipped"  # the plan skipped TACO
    OFF = "off"


class Verdict(StrEnum):
    """Whether TACO did its job, judged from rank 0's summary at the end of training."""

    APPLIED = "applied"
    PARTIAL = "partial"
    NOT_APPLIED = "not-applied"
    UNCONFIRMED = "unconfirmed"  # active, but rank 0 printed no summary
    ON_NODE_0 = "on-node-0"  # active; the summary is in node 0's log
    NOT_USED = "not-used"
    OFF = "off"


_HEADS = {
    Verdict.APPLIED: "outcome-applied",
    Verdict.PARTIAL: "outcome-partial",
    Verdict.NOT_APPLIED: "outcome-not-applied",
}


@dataclass(frozen=True)
class TacoOutcome:
    """The end-of-job verdict, its message and rank 0's summary box as printed."""

    verdict: Verdict
    message: Text
    features: dict[str, str] | None = None

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict, **flatten(self.message, "message"), "features": self.features}


@dataclass(frozen=True)
class TacoActivation:
    """What activation did. `env` is the environment to launch training with: the planned one when `status` is
    `active`, else with TACO's exports withdrawn. `finding` is set when activation itself failed (warn with auto,
    fail with on)."""

    status: ActivationStatus
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
            "features": self.env.get("TACO_TRAIN_FEATURES") if self.status is ActivationStatus.ACTIVE else None,
            "seconds": self.seconds,
            "finding": self.finding.to_json() if self.finding else None,
        }

    def outcome(self, summary: dict[str, str] | None, node_rank: int) -> TacoOutcome:
        """The verdict after training, from rank 0's summary box (`taco.summary.SummaryReader`) on node 0."""
        if self.status is ActivationStatus.OFF:
            return TacoOutcome(Verdict.OFF, M("outcome-off"))
        if self.status is not ActivationStatus.ACTIVE:
            return TacoOutcome(Verdict.NOT_USED, M("outcome-not-used", reason=self.reason or self.plan.reason))
        if summary is None:
            if node_rank != 0:
                return TacoOutcome(Verdict.ON_NODE_0, M("outcome-on-node-0"))
            return TacoOutcome(Verdict.UNCONFIRMED, M("outcome-unconfirmed"))
        applied = [name for name, status in summary.items() if applied_count(status)]
        wanted = self.requested
        if wanted is None:  # the wheel chose: judge by what it applied
            verdict, missing = (Verdict.APPLIED if applied else Verdict.NOT_APPLIED), []
            count = M("outcome-count", applied=len(applied))
        else:
            missing = [name for name in wanted if name not in applied]
            if not missing:
                verdict = Verdict.APPLIED
            else:
                verdict = Verdict.PARTIAL if len(missing) < len(wanted) else Verdict.NOT_APPLIED
            count = M("outcome-count-requested", applied=len(wanted) - len(missing), requested=len(wanted))
        done_names = [name for name in applied if wanted is None or name in wanted]
        done = ", ".join(f"{name} {summary[name]}" for name in done_names) if done_names else M("outcome-none")
        head = M(_HEADS[verdict])
        if not missing:
            return TacoOutcome(verdict, M("outcome", head=head, count=count, done=done), dict(summary))
        absent = M("outcome-not-in-summary")
        left = Text(
            ", ".join(f"{name} {summary.get(name, absent.en)}" for name in missing),
            ", ".join(f"{name} {summary.get(name, absent.zh)}" for name in missing),
        )
        return TacoOutcome(
            verdict, M("outcome-missing", head=head, count=count, done=done, missing=left), dict(summary)
        )


class _Failed(Exception):
    """Activation failed: `what` at `where`, the `fix`; `misspecified` when a setting is malformed (exit 2 with on)."""

    def __init__(self, what: Text, fix: Text, where: str, misspecified: bool = False) -> None:
        super().__init__(what.en)
        self.what, self.fix, self.where, self.misspecified = what, fix, where, misspecified


_PROBE = """\
import importlib.metadata, importlib.util, json, sys
site = sys.modules.get("sitecustomize")
spec = importlib.util.find_spec("taco_train")
try:
    version = importlib.metadata.version("taco-train")
except importlib.metadata.PackageNotFoundError:
    version = None
info = {"sitecustomize": getattr(site, "__file__", None), "taco_train": spec and spec.origin, "version": version}
print(json.dumps(info))
"""


def _withdrawn(plan: TacoPlan, env: Mapping[str, str]) -> dict[str, str]:
    """`env` without TACO's exports: the old PYTHONPATH back, TACO_TRAIN_* that we added removed."""
    result = dict(env)
    for name in plan.env.set:
        result.pop(name, None)
    if plan.old_pythonpath is not None and "PYTHONPATH" in plan.env.set:
        result["PYTHONPATH"] = plan.old_pythonpath
    return result


def _masked(text: Text, known: set[str]) -> Text:
    return Text(mask_text(text.en, known), mask_text(text.zh, known))


def _say(out: TextIO, text: Text, lang: Lang | str) -> None:
    out.write(render(text, lang, lead=LEAD) + "\n")


def _install(
    plan: TacoPlan,
    env: dict[str, str],
    out: TextIO,
    lang: Lang | str,
    python: str,
    options: DownloadOptions,
    seconds: dict[str, float],
    clock: Callable[[], float],
) -> str:
    """Fetch, verify and install the wheel into `plan.prefix`; returns its sha256."""
    from entrypoint.net.download import fetch  # the HTTP stack, only when a wheel is installed at start

    assert plan.prefix is not None and plan.source is not None and plan.wheel is not None
    start = clock()
    try:
        got = fetch(
            plan.source,
            plan.prefix.parent / "download",
            sha256=plan.sha256,
            options=options,
            progress=out,
            lang=lang,
            clock=clock,
        )
    except DownloadError as error:  # kind scheme: the URL or a proxy variable is malformed
        raise _Failed(error.what, error.fix, error.where, error.kind is FailureKind.SCHEME) from None
    seconds["fetch"] = round(clock() - start, 3)
    if got.downloaded:
        downloaded = M("downloaded", wheel=plan.wheel, size=got.size, attempts=got.attempts, seconds=seconds["fetch"])
        _say(out, downloaded, lang)
    if plan.sha256 is None:
        _say(out, M("unpinned-log", wheel=plan.wheel, sha256=got.sha256), lang)
    start = clock()
    why = install(got.path, plan.prefix, _withdrawn(plan, env), python)
    if got.downloaded:
        got.path.unlink(missing_ok=True)
    if why is not None:
        failed = M("pip-failed", wheel=plan.wheel, prefix=plan.prefix, why=why)
        raise _Failed(failed, M("pip-failed-fix"), str(plan.prefix))
    write_record(plan.prefix, plan.wheel, got.sha256)
    seconds["install"] = round(clock() - start, 3)
    _say(out, M("installed", wheel=plan.wheel, prefix=plan.prefix, seconds=seconds["install"]), lang)
    return got.sha256


def _verify(plan: TacoPlan, env: Mapping[str, str], python: str) -> str | None:
    """Run a child interpreter with the training environment: the prelude must be the `sitecustomize` it imports
    and `taco_train` must come from the prefix. Returns taco-train's version (None when it has no metadata)."""
    assert plan.prefix is not None
    where = str(prelude_dir(plan.prefix))
    fix = M("verify-fix")
    try:
        result = subprocess.run(
            [python, "-c", _PROBE],
            env={**env, "TACO_TRAIN_REPORT": "0"},  # the probe only: it must not print a summary box
            capture_output=True,
            text=True,
            timeout=VERIFY_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise _Failed(M("verify-unfinished", error=M("verify-timeout", seconds=VERIFY_TIMEOUT_S)), fix, where) from None
    except OSError as error:
        raise _Failed(M("verify-unfinished", error=os_error_text(error)), fix, where) from None
    errors = "\n".join(result.stderr.strip().splitlines()[-6:])
    try:
        seen = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise _Failed(M("verify-failed", code=result.returncode, errors=errors), fix, where) from None
    prelude = prelude_dir(plan.prefix).resolve()
    site = seen.get("sitecustomize")
    if not site or Path(site).resolve().parent != prelude:
        if site:
            detail = M("prelude-shadowed", site=site)
        else:
            detail = M("prelude-not-loaded-errors", errors=errors) if errors else M("prelude-not-loaded")
        raise _Failed(M("prelude-not-run", prelude=prelude, detail=detail), fix, where)
    origin = seen.get("taco_train")
    if not origin or plan.prefix.resolve() not in Path(origin).resolve().parents:
        raise _Failed(M("not-importable", prefix=plan.prefix, origin=origin), fix, where)
    version = seen.get("version")
    return version if isinstance(version, str) else None


def _steps(
    plan: TacoPlan,
    env: dict[str, str],
    out: TextIO,
    lang: Lang | str,
    python: str,
    options: DownloadOptions,
    seconds: dict[str, float],
    clock: Callable[[], float],
) -> tuple[str | None, str | None]:
    """Install when needed, then verify; returns (sha256 of the wheel, taco-train's version). Raises `_Failed`."""
    try:
        sha256: str | None
        if plan.status is TacoStatus.INSTALL:
            sha256 = _install(plan, env, out, lang, python, options, seconds, clock)
        else:
            sha256 = plan.sha256
        verify_start = clock()
        version = _verify(plan, env, python)
        seconds["verify"] = round(clock() - verify_start, 3)
        return sha256, version
    except OSError as error:  # the temp folder: not writable, full
        raise _Failed(
            M("cannot-prepare", prefix=plan.prefix, error=os_error_text(error)),
            M("cannot-prepare-fix"),
            str(plan.prefix),
        ) from None


def activate_taco(
    plan: TacoPlan,
    env: Mapping[str, str],
    out: TextIO,
    *,
    lang: Lang | str = Lang.BOTH,
    python: str = sys.executable,
    options: DownloadOptions | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TacoActivation:
    """Make the plan so, before torchrun starts. `env` is the training environment with the plan's exports in it
    (`plan.env.apply(host.env)`, with `TacoPlan.env` merged into the plan's); on success it is returned as is.
    Never raises for a TACO problem: a failure is returned as `finding` (warn with auto, fail with exit 3 with on)
    and the exports are withdrawn."""
    if plan.status in (TacoStatus.OFF, TacoStatus.SKIPPED):
        return TacoActivation(ActivationStatus(plan.status.value), _withdrawn(plan, env), plan)
    start = clock()
    seconds: dict[str, float] = {}
    env = dict(env)
    options = options or dataclasses.replace(DOWNLOAD, allow_http=plan.allow_http)
    known = secrets_in([plan.source]) if plan.source else set()  # a URL's password, a signed query
    out = MaskedStream(out, known)  # download retries and errors quote the URL, libraries' messages included
    try:
        sha256, version = _steps(plan, env, out, lang, python, options, seconds, clock)
    except _Failed as failure:
        seconds["total"] = round(clock() - start, 3)
        what, fix = _masked(failure.what, known), _masked(failure.fix, known)
        trouble = Trouble(what, fix, mask_text(failure.where, known), failure.misspecified)
        finding = trouble_finding(plan.mode, trouble, "taco.activate")
        label = "FAIL" if finding.status is Status.FAIL else "WARN"
        out.write(render(finding.message, lang, lead=f"{LEAD}{label} [taco.activate] ") + "\n")
        out.write(render(finding.hint or fix, lang, lead="    -> ") + "\n")
        return TacoActivation(ActivationStatus.FAILED, _withdrawn(plan, env), plan, finding, what, seconds=seconds)
    seconds["total"] = round(clock() - start, 3)
    active = M(
        "active",
        wheel=plan.wheel,
        version=f" {version}" if version else "",
        prefix=plan.prefix,
        features=env.get("TACO_TRAIN_FEATURES"),
        seconds=seconds["total"],
    )
    _say(out, active, lang)
    return TacoActivation(ActivationStatus.ACTIVE, env, plan, sha256=sha256, version=version, seconds=seconds)
