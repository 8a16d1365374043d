"""Resume, decided once before torchrun from the experiment folder on shared storage.

The newest *complete* step folder (with model.safetensors, optimizer.pt and metadata.pt, a safetensors file the
loader accepts, and no empty file or git-lfs pointer) means `--resume`; none means a fresh start. Leftovers
(`tmp_*`, incomplete steps) are reported, never chosen. Because openpi's own `--resume` takes the highest
all-digit folder, incomplete folders above the chosen step are moved aside (renamed, never deleted) by node 0
before launch. Every node reads the same folder before any node trains, so all nodes reach the same decision.

A step folder is named the way openpi names it, `str(step)`: ASCII digits without leading zeros. openpi's own
reading decides the rest: it lists every name `str.isdigit()` accepts, takes the highest `int(name)` and loads
the folder `str(that)`. So a complete folder named `00010` is never resumed from (openpi would look for `10/`),
and a name such as `²` or `①` (a digit to `isdigit()`, not to `int()`) would crash openpi's `--resume`. Both kinds
are reported as leftovers and moved aside whenever openpi could pick them: always for a name `int()` refuses,
otherwise when its number is above the chosen step.

An experiment is *finished* when resuming from its newest complete step would save nothing more under openpi's save
rule (`save_count(num_train_steps, save_interval, step) == 0`: the step is at or past the last save that
num_train_steps makes, N when N is a multiple of the interval, else N - 1). Then nothing is started and nothing moved.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.files import FileRefused, Problem, read_ends
from entrypoint.core.findings import Finding, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.oserror import os_error_text
from entrypoint.core.settings import Settings
from entrypoint.inspect.assets import HEAD_BYTES, InvalidAsset, check_safetensors, is_lfs_pointer, refused_text
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import joined, shown, verbatim
from entrypoint.inspect.openpi import CHECKPOINT_FILES, save_count


class ResumeAction(StrEnum):
    FRESH = "fresh"  # no usable checkpoint: start at step 0
    RESUME = "resume"  # openpi's --resume from the newest complete step
    OVERWRITE = "overwrite"  # VLA_OVERWRITE=1: node 0 moves the experiment aside, then a fresh start
    FINISHED = "finished"  # the newest complete step is openpi's last save: nothing to train, nothing started


@dataclass(frozen=True)
class ResumeDecision:
    """What training starts from. `set_aside`: folders node 0 renames before launch."""

    action: ResumeAction
    step: int | None
    experiment_dir: Path
    complete_steps: tuple[int, ...] = ()
    leftovers: tuple[str, ...] = ()
    set_aside: tuple[Path, ...] = ()
    findings: tuple[Finding, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, object]:
        return {
            "action": str(self.action),
            "step": self.step,
            "experiment_dir": str(self.experiment_dir),
            "complete_steps": list(self.complete_steps),
            "leftovers": list(self.leftovers),
            "set_aside": [str(p) for p in self.set_aside],
        }


def _incomplete_reason(folder: Path) -> Text | None:
    """Why a step folder cannot be resumed from; None when openpi can load it."""
    missing: list[str] = []
    problems: list[Text] = []
    for name in CHECKPOINT_FILES:
        try:
            ends = read_ends(folder / name, HEAD_BYTES)
        except FileRefused as refused:
            if refused.problem is Problem.MISSING:
                missing.append(name)
            else:
                problems.append(M("named-problem", path=name, problem=refused_text(refused)))
            continue
        if not ends.size:
            problems.append(M("named-problem", path=name, problem=M("file-empty")))
        elif is_lfs_pointer(ends.head):
            problems.append(M("named-problem", path=name, problem=M("lfs-pointer")))
    if missing:
        return M("resume-files-missing", names=", ".join(missing))
    if problems:
        return joined(problems)
    try:
        check_safetensors(folder / "model.safetensors")
    except InvalidAsset as exc:
        return M("file-problem", path="model.safetensors", problem=exc.text)
    return None


def _is_step_name(name: str) -> bool:
    """Whether `name` is how openpi names a step folder: `str(step)`, ASCII digits without leading zeros."""
    return name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0"))


def _openpi_number(name: str) -> int | None:
    """The step openpi's `int(name)` reads from a name `isdigit()` accepts; None where `int()` raises."""
    try:
        return int(name)
    except ValueError:
        return None


def decide_resume(settings: Settings) -> ResumeDecision:
    """Read the experiment folder and decide; changes nothing on disk. A finished experiment sets nothing aside."""
    exp = settings.experiment_dir
    if settings.overwrite:
        if exp.exists():
            return ResumeDecision(
                ResumeAction.OVERWRITE,
                None,
                exp,
                set_aside=(exp,),
                findings=(passed("resume", M("resume-overwrite", folder=exp), str(exp)),),
            )
        nothing = M("resume-overwrite-nothing", folder=exp)
        return ResumeDecision(ResumeAction.FRESH, None, exp, findings=(passed("resume", nothing, str(exp)),))
    try:
        names = sorted(os.listdir(exp))
    except FileNotFoundError:
        first = M("resume-no-earlier-run", folder=exp)
        return ResumeDecision(ResumeAction.FRESH, None, exp, findings=(passed("resume", first, str(exp)),))
    except OSError as exc:
        unlistable = warned(
            "resume",
            M("resume-unlistable", folder=exp, error=os_error_text(exc)),
            M("resume-unlistable-fix", folder=exp),
            str(exp),
        )
        return ResumeDecision(ResumeAction.FRESH, None, exp, findings=(unlistable,))
    listed = [n for n in names if n.isdigit() and (exp / n).is_dir()]  # what openpi's --resume looks at
    steps = sorted((int(n) for n in listed if _is_step_name(n)), reverse=True)
    leftovers = [verbatim(shown(n)) for n in names if n.startswith("tmp_")]
    complete: list[int] = []
    incomplete: list[int] = []
    for step in steps:
        reason = _incomplete_reason(exp / str(step))
        if reason is None:
            complete.append(step)
        else:
            incomplete.append(step)
            leftovers.append(M("resume-incomplete-step", step=step, reason=reason))
    chosen = complete[0] if complete else None
    above = [exp / str(step) for step in incomplete if chosen is None or step > chosen]
    misnamed = [n for n in listed if not _is_step_name(n)]
    for name in misnamed:
        number = _openpi_number(name)
        reason = M("resume-name-crashes-openpi") if number is None else M("resume-name-not-a-step", number=number)
        leftovers.append(M("resume-incomplete-step", step=shown(name), reason=reason))
        if number is None or chosen is None or number > chosen:
            above.append(exp / name)
    findings: list[Finding] = []
    if leftovers:
        findings.append(
            warned(
                "resume.leftovers",
                M("resume-leftovers", folder=exp, leftovers=joined(leftovers)),
                joined([M("resume-leftovers-fix"), M("resume-misnamed-fix")], " ")
                if misnamed
                else M("resume-leftovers-fix"),
                str(exp),
            )
        )
    shown_leftovers = tuple(t.en for t in leftovers)
    if chosen is None:
        findings.append(passed("resume", M("resume-no-complete-checkpoint", folder=exp), str(exp)))
        return ResumeDecision(ResumeAction.FRESH, None, exp, (), shown_leftovers, tuple(above), tuple(findings))
    if save_count(settings.num_train_steps, settings.save_interval, chosen) == 0:
        finished = M("resume-finished", step=chosen, steps=settings.num_train_steps, interval=settings.save_interval)
        findings.append(warned("resume", finished, M("resume-finished-fix"), str(exp / str(chosen))))
        return ResumeDecision(
            ResumeAction.FINISHED, chosen, exp, tuple(reversed(complete)), shown_leftovers, (), tuple(findings)
        )
    findings.append(passed("resume", M("resume-from", step=chosen, folder=exp), str(exp / str(chosen))))
    return ResumeDecision(
        ResumeAction.RESUME, chosen, exp, tuple(reversed(complete)), shown_leftovers, tuple(above), tuple(findings)
    )


def aside_name(path: Path, label: str) -> Path:
    """A free sibling name `<name>.<label>-<UTC time>[-n]` for moving `path` out of the way."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    candidate = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while os.path.lexists(candidate):
        n += 1
        candidate = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
    return candidate


def set_aside(decision: ResumeDecision) -> list[tuple[Path, Path]]:
    """Node 0 only, at launch: rename the folders the decision names; a folder already gone is skipped.

    Renaming within one folder is atomic, so two starts at once cannot both move (or lose) the same folder.
    """
    moved: list[tuple[Path, Path]] = []
    label = "old" if decision.action == ResumeAction.OVERWRITE else "incomplete"
    for folder in decision.set_aside:
        target = aside_name(folder, label)
        try:
            os.rename(folder, target)
        except FileNotFoundError:
            continue
        moved.append((folder, target))
    return moved
