"""Which files the trainer will read at its start, for `run` to read into the page cache first (`launch.prefetch`).

openpi's trainer reads the base weights (`<weights>/model.safetensors`) and, on a resume, the files of the
checkpoint it resumes from, in that order, after its imports and model build. The plan lists those that are regular
files now, with their sizes; the reader may use at most `MEMORY_SHARE` of the memory the kernel says is available.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from entrypoint.core.host import Host
from entrypoint.core.messages import Catalogue, Text
from entrypoint.inspect.openpi import CHECKPOINT_FILES

WEIGHTS_FILE = "model.safetensors"  # what openpi's trainer reads from `--pytorch-weight-path`
MEMORY_SHARE = 0.5  # of MemAvailable: the trainer, its data loader and the datasets cache need the rest

M = Catalogue(
    "prefetch-plan",
    {
        "what-weights": ("base weights", "基座权重"),
        "what-checkpoint": ("checkpoint of step {step}", "第 {step} 步的检查点"),
        "what-both": ("base weights and the checkpoint of step {step}", "基座权重与第 {step} 步的检查点"),
    },
)


@dataclass(frozen=True)
class Prefetch:
    """The files to read ahead, in the trainer's order, with their sizes when planned; `step` is the checkpoint's."""

    files: tuple[tuple[Path, int], ...]
    step: int | None = None
    weights: bool = True  # the base weights file comes first

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.files)

    def what(self) -> Text:
        if self.step is None:
            return M("what-weights")
        return M("what-both", step=self.step) if self.weights else M("what-checkpoint", step=self.step)

    def to_json(self) -> dict[str, object]:
        return {
            "files": [{"path": str(path), "bytes": size} for path, size in self.files],
            "bytes": self.bytes,
            "checkpoint_step": self.step,
            "memory_share": MEMORY_SHARE,
        }


def _bytes_to_read(path: Path) -> int | None:
    """The size of a regular file worth reading ahead; None for anything else, an empty file, or a file mostly of
    holes (a sparse file: its holes come from no storage, and reading them would only fill memory with zeros)."""
    try:
        info = path.stat()
    except OSError:
        return None
    if not path.is_file() or info.st_size == 0 or info.st_blocks * 512 < info.st_size // 2:
        return None
    return info.st_size


def plan_prefetch(weights: Path | None, experiment_dir: Path, step: int | None) -> Prefetch | None:
    """The base weights file, then the files of checkpoint `step` (when resuming), those worth reading now; None
    when there is nothing to read."""
    base = weights / WEIGHTS_FILE if weights is not None else None
    base_size = _bytes_to_read(base) if base is not None else None
    head = [(base, base_size)] if base is not None and base_size is not None else []
    saved = [experiment_dir / str(step) / name for name in CHECKPOINT_FILES] if step is not None else []
    checkpoint = [(path, size) for path in saved if (size := _bytes_to_read(path)) is not None]
    if not head and not checkpoint:
        return None
    return Prefetch(tuple(head + checkpoint), step if checkpoint else None, weights=bool(head))


def memory_budget(host: Host) -> int | None:
    """Half of `MemAvailable` in bytes, or None when the kernel does not say."""
    for row in (host.read("/proc/meminfo") or "").splitlines():
        name, _, value = row.partition(":")
        if name == "MemAvailable" and value.split() and value.split()[0].isdigit():
            return int(int(value.split()[0]) * 1024 * MEMORY_SHARE)
    return None
