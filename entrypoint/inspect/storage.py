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
from entrypoint.inspect.openpi import final_step_saved, save_steps

CHECKPOINT_TO_WEIGHTS = 3  # model.safetensors (~1x, fp32 weights) + optimizer.pt (~2x, AdamW moments)
DEFAULT_CHECKPOINT_BYTES = 21 * 10**9  # measured for pi05: 7.47 GB model + 13.47 GB optimizer
GB = 10**9


def nearest_existing(path: Path) -> Path:
    """The path itself or its closest existing ancestor (what a later mkdir -p would write into)."""
    current = path
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    return current


def writable(path: Path) -> tuple[bool, str]:
    """Whether files can be created under `path` (or where it would be created), with the reason if not."""
    target = nearest_existing(path)
    if not target.is_dir():
        return False, f"{target} exists but is not a folder"
    try:
        if os.statvfs(target).f_flag & os.ST_RDONLY:
            return False, f"{target} is on a read-only file system"
    except OSError as exc:
        return False, f"{target}: {exc.strerror}"
    if not os.access(target, os.W_OK | os.X_OK):
        return False, f"{target} is not writable by uid {os.getuid()}"
    return True, str(target)


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
    ok, detail = writable(folder)
    if not ok:
        return [
            failed(
                "storage.checkpoint-writable",
                Text(f"checkpoints cannot be written: {detail}", f"无法写入检查点:{detail}"),
                Text(
                    f"Mount the CFS path of {settings.path('checkpoint_base_dir')} read-write with free space, or set VLA_CHECKPOINT_BASE_DIR.",
                    f"请以读写方式挂载 {settings.path('checkpoint_base_dir')} 对应的 CFS 路径并确保有空间,或设置 VLA_CHECKPOINT_BASE_DIR。",
                ),
                str(folder),
            )
        ]
    findings = [
        passed(
            "storage.checkpoint-writable",
            Text(f"checkpoint folder writable: {folder}", f"检查点目录可写:{folder}"),
            str(folder),
        )
    ]
    saves = save_steps(settings.num_train_steps, settings.save_interval, resume_step or 0)
    per_save = CHECKPOINT_TO_WEIGHTS * weights_bytes if weights_bytes else DEFAULT_CHECKPOINT_BYTES
    needed = len(saves) * per_save
    free = free_bytes(folder)
    if free is not None and saves and free < per_save:
        findings.append(
            failed(
                "storage.checkpoint-space",
                Text(
                    f"only {free / GB:.2f} GB free under {detail}: not even one checkpoint of about {per_save / GB:.1f} GB fits",
                    f"{detail} 仅剩 {free / GB:.2f} GB:连一个约 {per_save / GB:.1f} GB 的检查点都放不下",
                ),
                Text(
                    "Free space on the CFS (or move old experiments away) before starting the job.",
                    "请在启动任务前清理 CFS 空间(或移走旧实验)。",
                ),
                str(folder),
            )
        )
    elif free is not None and free < needed:
        findings.append(
            warned(
                "storage.checkpoint-space",
                Text(
                    f"{free / GB:.1f} GB free under {detail} but this run saves {len(saves)} checkpoint(s) of about {per_save / GB:.1f} GB ({needed / GB:.1f} GB); openpi keeps every one",
                    f"{detail} 仅剩 {free / GB:.1f} GB,但本次训练将保存 {len(saves)} 个约 {per_save / GB:.1f} GB 的检查点(共 {needed / GB:.1f} GB),openpi 会全部保留",
                ),
                Text(
                    "Free space on the CFS, raise VLA_SAVE_INTERVAL, or move old experiments away.",
                    "请清理 CFS 空间、调大 VLA_SAVE_INTERVAL,或移走旧实验。",
                ),
                str(folder),
            )
        )
    elif free is not None:
        findings.append(
            passed(
                "storage.checkpoint-space",
                Text(
                    f"{free / GB:.1f} GB free for {len(saves)} save(s) of about {per_save / GB:.1f} GB",
                    f"剩余 {free / GB:.1f} GB,可容纳 {len(saves)} 次约 {per_save / GB:.1f} GB 的保存",
                ),
                str(folder),
            )
        )
    if not final_step_saved(settings.num_train_steps, settings.save_interval):
        n = settings.num_train_steps
        findings.append(
            warned(
                "storage.final-step",
                Text(
                    f"the weights after the last step ({n}) will not be saved: openpi saves at multiples of {settings.save_interval} and at step {n - 1}",
                    f"最后一步({n})的权重不会被保存:openpi 只在 {settings.save_interval} 的倍数步和第 {n - 1} 步保存",
                ),
                Text(
                    f"Make VLA_NUM_TRAIN_STEPS a multiple of VLA_SAVE_INTERVAL (e.g. {((n // settings.save_interval) + 1) * settings.save_interval}).",
                    f"请把 VLA_NUM_TRAIN_STEPS 设为 VLA_SAVE_INTERVAL 的整数倍(例如 {((n // settings.save_interval) + 1) * settings.save_interval})。",
                ),
                "VLA_NUM_TRAIN_STEPS",
            )
        )
    return findings


def datasets_cache_dir(env: Mapping[str, str]) -> Path:
    """Where `datasets` builds its Arrow cache: HF_DATASETS_CACHE, else HF_HOME/datasets, else ~/.cache/huggingface/datasets."""
    if env.get("HF_DATASETS_CACHE"):
        return Path(env["HF_DATASETS_CACHE"])
    home = Path(env["HF_HOME"]) if env.get("HF_HOME") else Path(env.get("HOME", "/root")) / ".cache" / "huggingface"
    return home / "datasets"


def check_datasets_cache(env: Mapping[str, str], dataset_bytes: int) -> list[Finding]:
    """The Arrow cache needs a writable folder with about the dataset's size free (warn otherwise)."""
    cache = datasets_cache_dir(env)
    ok, detail = writable(cache)
    fix = Text(
        "Set HF_DATASETS_CACHE to a writable folder with room (e.g. under /tmp or the CFS).",
        "请把 HF_DATASETS_CACHE 设为可写且空间充足的目录(例如 /tmp 或 CFS 下)。",
    )
    if not ok:
        return [
            warned(
                "storage.datasets-cache",
                Text(f"the datasets cache is not writable: {detail}", f"datasets 缓存目录不可写:{detail}"),
                fix,
                str(cache),
            )
        ]
    free = free_bytes(cache)
    if free is not None and free < dataset_bytes:
        return [
            warned(
                "storage.datasets-cache",
                Text(
                    f"{free / GB:.1f} GB free for the datasets cache {cache}, the dataset is {dataset_bytes / GB:.1f} GB",
                    f"datasets 缓存 {cache} 仅剩 {free / GB:.1f} GB,数据集为 {dataset_bytes / GB:.1f} GB",
                ),
                fix,
                str(cache),
            )
        ]
    return [
        passed(
            "storage.datasets-cache",
            Text(f"datasets cache writable: {cache}", f"datasets 缓存可写:{cache}"),
            str(cache),
        )
    ]
