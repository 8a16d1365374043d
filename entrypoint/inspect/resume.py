"""Resume, decided once before torchrun from the experiment folder on shared storage.

The newest *complete* step folder (digits only, with model.safetensors, optimizer.pt and metadata.pt and a
sound safetensors header) means `--resume`; none means a fresh start. Leftovers (`tmp_*`, incomplete steps)
are reported, never chosen. Because openpi's own `--resume` takes the highest all-digit folder, incomplete
folders above the chosen step are moved aside (renamed, never deleted) by node 0 before launch. Every node
reads the same folder before any node trains, so all nodes reach the same decision.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.findings import Finding, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.settings import Settings
from entrypoint.inspect.assets import InvalidAsset, check_safetensors
from entrypoint.inspect.openpi import CHECKPOINT_FILES


@dataclass(frozen=True)
class ResumeDecision:
    """`action`: fresh | resume | overwrite. `set_aside`: folders node 0 renames before launch."""

    action: str
    step: int | None
    experiment_dir: Path
    complete_steps: tuple[int, ...] = ()
    leftovers: tuple[str, ...] = ()
    set_aside: tuple[Path, ...] = ()
    findings: tuple[Finding, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, object]:
        return {
            "action": self.action,
            "step": self.step,
            "experiment_dir": str(self.experiment_dir),
            "complete_steps": list(self.complete_steps),
            "leftovers": list(self.leftovers),
            "set_aside": [str(p) for p in self.set_aside],
        }


def _incomplete_reason(folder: Path) -> str | None:
    missing = [name for name in CHECKPOINT_FILES if not (folder / name).is_file()]
    if missing:
        return "missing " + ", ".join(missing)
    try:
        check_safetensors(folder / "model.safetensors")
    except InvalidAsset as exc:
        return "model.safetensors: " + str(exc)
    return None


def decide_resume(settings: Settings) -> ResumeDecision:
    """Read the experiment folder and decide; changes nothing on disk."""
    exp = settings.experiment_dir
    if settings.overwrite:
        exists = exp.exists()
        message = (
            Text(
                f"VLA_OVERWRITE=1: node 0 moves {exp} aside (kept, not deleted) and training starts fresh",
                f"VLA_OVERWRITE=1:0 号节点会把 {exp} 移到一旁(保留,不删除)并重新开始训练",
            )
            if exists
            else Text(
                f"VLA_OVERWRITE=1 but {exp} does not exist: fresh start", f"VLA_OVERWRITE=1,但 {exp} 不存在:全新开始"
            )
        )
        return ResumeDecision(
            "overwrite" if exists else "fresh",
            None,
            exp,
            set_aside=(exp,) if exists else (),
            findings=(passed("resume", message, str(exp)),),
        )
    try:
        names = sorted(os.listdir(exp))
    except FileNotFoundError:
        return ResumeDecision(
            "fresh",
            None,
            exp,
            findings=(
                passed(
                    "resume", Text(f"no earlier run in {exp}: fresh start", f"{exp} 中没有历史训练:全新开始"), str(exp)
                ),
            ),
        )
    except OSError as exc:
        return ResumeDecision(
            "fresh",
            None,
            exp,
            findings=(
                warned(
                    "resume",
                    Text(
                        f"cannot list {exp} ({exc.strerror}): fresh start", f"无法读取 {exp}({exc.strerror}):全新开始"
                    ),
                    Text(f"Check the permissions of {exp}.", f"请检查 {exp} 的权限。"),
                    str(exp),
                ),
            ),
        )
    steps = sorted((int(n) for n in names if n.isdigit() and (exp / n).is_dir()), reverse=True)
    leftovers = [n for n in names if n.startswith("tmp_")]
    complete: list[int] = []
    incomplete: list[tuple[int, str]] = []
    for step in steps:
        reason = _incomplete_reason(exp / str(step))
        if reason is None:
            complete.append(step)
        else:
            incomplete.append((step, reason))
    leftovers += [f"{step} ({reason})" for step, reason in incomplete]
    chosen = complete[0] if complete else None
    above = tuple(exp / str(step) for step, _ in incomplete if chosen is None or step > chosen)
    findings: list[Finding] = []
    if leftovers:
        findings.append(
            warned(
                "resume.leftovers",
                Text(
                    f"ignored incomplete checkpoints in {exp}: {', '.join(leftovers)}",
                    f"已忽略 {exp} 中不完整的检查点:{', '.join(leftovers)}",
                ),
                Text(
                    "They come from an interrupted save; they are never resumed from. Folders above the resumed step are renamed to *.incomplete-<time>, not deleted.",
                    "它们来自中断的保存,不会被用于恢复;高于恢复步的目录会被重命名为 *.incomplete-<time>,不会删除。",
                ),
                str(exp),
            )
        )
    if chosen is None:
        findings.append(
            passed(
                "resume",
                Text(f"no complete checkpoint in {exp}: fresh start", f"{exp} 中没有完整检查点:全新开始"),
                str(exp),
            )
        )
        return ResumeDecision("fresh", None, exp, (), tuple(leftovers), above, tuple(findings))
    findings.append(
        passed(
            "resume",
            Text(f"resuming from step {chosen} in {exp}", f"将从 {exp} 的第 {chosen} 步恢复训练"),
            str(exp / str(chosen)),
        )
    )
    if chosen >= settings.num_train_steps:
        findings.append(
            warned(
                "resume.finished",
                Text(
                    f"the experiment already reached step {chosen} >= num_train_steps={settings.num_train_steps}: nothing left to train",
                    f"该实验已到第 {chosen} 步,不小于 num_train_steps={settings.num_train_steps}:没有剩余训练",
                ),
                Text(
                    "Raise VLA_NUM_TRAIN_STEPS, choose a new VLA_EXP_NAME, or set VLA_OVERWRITE=1.",
                    "请调大 VLA_NUM_TRAIN_STEPS、更换 VLA_EXP_NAME,或设置 VLA_OVERWRITE=1。",
                ),
                "VLA_NUM_TRAIN_STEPS",
            )
        )
    return ResumeDecision("resume", chosen, exp, tuple(reversed(complete)), tuple(leftovers), above, tuple(findings))


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
    label = "old" if decision.action == "overwrite" else "incomplete"
    for folder in decision.set_aside:
        target = aside_name(folder, label)
        try:
            os.rename(folder, target)
        except FileNotFoundError:
            continue
        moved.append((folder, target))
    return moved
