"""Storage checks: the checkpoint folder is writable and has room for the saves this run will make.

openpi keeps every checkpoint (model + optimizer, about 3x the base weights file: 21 GB for pi05), so the
estimate is (saves still to come) x (3 x weights size), or a pi05-sized default when no weights are used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.settings import Settings
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.openpi import final_step_saved, save_count

CHECKPOINT_TO_WEIGHTS = 3  # model.safetensors (~1x, fp32 weights) + optimizer.pt (~2x, AdamW moments)
DEFAULT_CHECKPOINT_BYTES = 21 * 10**9  # measured for pi05: 7.47 GB model + 13.47 GB optimizer
GB = 10**9


def nearest_existing(path: Path) -> Path:
    """The path itself or its closest existing ancestor (what a later mkdir -p would write into)."""
    current = path
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    return current


def unwritable_reason(path: Path) -> Text | None:
    """Why files cannot be created under `path` (or where it would be created); None when they can."""
    target = nearest_existing(path)
    if not target.is_dir():
        return M("folder-not-a-folder", target=target)
    try:
        if os.statvfs(target).f_flag & os.ST_RDONLY:
            return M("folder-read-only", target=target)
    except OSError as exc:
        return M("folder-unusable", target=target, error=exc.strerror)
    if not os.access(target, os.W_OK | os.X_OK):
        return M("folder-not-writable", target=target, uid=os.getuid())
    return None


def writable(path: Path) -> tuple[bool, str]:
    """`unwritable_reason` for an English log line: (True, the folder written into) or (False, why not)."""
    reason = unwritable_reason(path)
    return (True, str(nearest_existing(path))) if reason is None else (False, reason.en)


def free_bytes(path: Path) -> int | None:
    try:
        stats = os.statvfs(nearest_existing(path))
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def check_checkpoint_storage(settings: Settings, resume_step: int | None, weights_bytes: int | None) -> list[Finding]:
    """Writable checkpoint folder and room for one checkpoint (fail, exit 3); room for every coming save and the
    final step being saved (warn)."""
    folder = settings.experiment_dir
    reason = unwritable_reason(folder)
    if reason is not None:
        return [
            failed(
                "storage.checkpoint-writable",
                M("checkpoint-unwritable", reason=reason),
                M("checkpoint-unwritable-fix", folder=settings.path("checkpoint_base_dir")),
                str(folder),
            )
        ]
    findings = [passed("storage.checkpoint-writable", M("checkpoint-writable", folder=folder), str(folder))]
    target = nearest_existing(folder)
    saves = save_count(settings.num_train_steps, settings.save_interval, resume_step or 0)
    per_save = CHECKPOINT_TO_WEIGHTS * weights_bytes if weights_bytes else DEFAULT_CHECKPOINT_BYTES
    needed = saves * per_save
    free = free_bytes(folder)
    if free is not None and saves and free < per_save:
        findings.append(
            failed(
                "storage.checkpoint-space",
                M("checkpoint-no-room", free=free / GB, target=target, per_save=per_save / GB),
                M("checkpoint-no-room-fix"),
                str(folder),
            )
        )
    elif free is not None and free < needed:
        findings.append(
            warned(
                "storage.checkpoint-space",
                M(
                    "checkpoint-short-of-room",
                    free=free / GB,
                    target=target,
                    saves=saves,
                    per_save=per_save / GB,
                    needed=needed / GB,
                ),
                M("checkpoint-short-of-room-fix"),
                str(folder),
            )
        )
    elif free is not None:
        findings.append(
            passed(
                "storage.checkpoint-space",
                M("checkpoint-room", free=free / GB, saves=saves, per_save=per_save / GB),
                str(folder),
            )
        )
    steps, interval = settings.num_train_steps, settings.save_interval
    if not final_step_saved(steps, interval):
        findings.append(
            warned(
                "storage.final-step",
                M("final-step-not-saved", steps=steps, interval=interval, before_last=steps - 1),
                M("final-step-not-saved-fix", example=(steps // interval + 1) * interval),
                "VLA_NUM_TRAIN_STEPS",
            )
        )
    return findings


def datasets_cache_dir(env: Mapping[str, str]) -> Path:
    """Where `datasets` builds its Arrow cache: HF_DATASETS_CACHE, else HF_HOME/datasets, else
    ~/.cache/huggingface/datasets."""
    if env.get("HF_DATASETS_CACHE"):
        return Path(env["HF_DATASETS_CACHE"])
    home = Path(env["HF_HOME"]) if env.get("HF_HOME") else Path(env.get("HOME", "/root")) / ".cache" / "huggingface"
    return home / "datasets"


def check_datasets_cache(env: Mapping[str, str], dataset_bytes: int) -> list[Finding]:
    """The Arrow cache needs a writable folder with about the dataset's size free (warn otherwise)."""
    cache = datasets_cache_dir(env)
    reason = unwritable_reason(cache)
    fix = M("datasets-cache-fix")
    if reason is not None:
        return [warned("storage.datasets-cache", M("datasets-cache-unwritable", reason=reason), fix, str(cache))]
    free = free_bytes(cache)
    if free is not None and free < dataset_bytes:
        small = M("datasets-cache-small", free=free / GB, cache=cache, size=dataset_bytes / GB)
        return [warned("storage.datasets-cache", small, fix, str(cache))]
    return [passed("storage.datasets-cache", M("datasets-cache-writable", cache=cache), str(cache))]
