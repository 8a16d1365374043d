"""The training processes' environment: what we export, what we keep, what we must remove.

Rules: a variable the user or platform already set is kept, never overwritten (reported as kept); the seed's
useful defaults are added otherwise; TI-ONE's node-level `WORLD_SIZE`/`RANK` and every inherited `PET_*`
variable are removed so that neither torchrun nor the trainer mistakes them for process-level values.
No `CUDA_VISIBLE_DEVICES` is ever set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.masking import masked
from entrypoint.core.settings import Settings

# TI-ONE's node-level names, which torch would read as process-level ones.
NODE_LEVEL_VARIABLES = ("WORLD_SIZE", "RANK")


@dataclass
class EnvPlan:
    """`set`: what we export; `kept`: values already present that we left alone; `removed`: names we drop."""

    set: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)

    def offer(self, inherited: Mapping[str, str], name: str, value: str) -> None:
        """Export `name=value` unless the environment already has `name` (even empty): then keep that."""
        if name in inherited:
            self.kept[name] = inherited[name]
        else:
            self.set[name] = value

    def merge(self, other: EnvPlan) -> None:
        self.set.update(other.set)
        self.kept.update(other.kept)
        self.removed += [n for n in other.removed if n not in self.removed]

    def apply(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The environment the training processes get."""
        result = {k: v for k, v in inherited.items() if k not in self.removed}
        result.update(self.set)
        return result

    def to_json(self) -> dict[str, object]:
        """Secret-looking values are masked: this goes into logs and start-up records."""
        return {"set": masked(self.set), "kept": masked(self.kept), "removed": sorted(self.removed)}


def training_env(
    inherited: Mapping[str, str],
    settings: Settings,
    dataset_complete: bool,
    tokenizer_home: Path | None,
) -> EnvPlan:
    """The seed's environment, adapted: offline once the dataset checked complete, no hard-coded GPU list."""
    plan = EnvPlan()
    plan.removed = [n for n in NODE_LEVEL_VARIABLES if n in inherited]
    plan.removed += sorted(n for n in inherited if n.startswith("PET_"))
    for name, value in settings.env.items():  # the user's job file is explicit: it wins over inheritance
        plan.set[name] = value
    defaults = {
        "JAX_PLATFORMS": "cpu",  # JAX inside data transforms would otherwise take ~75% of GPU memory
        "TRANSFORMERS_OFFLINE": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",  # training output reaches the log as it happens
        "PYTHONFAULTHANDLER": "1",  # stacks on a crash, and on the stall watchdog's SIGABRT when py-spy is absent
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",  # a failed or timed-out collective tears the process down
    }
    if settings.dataset_repo_id is not None:
        defaults["HF_LEROBOT_HOME"] = str(settings.path("lerobot_home"))
        if dataset_complete:
            defaults["HF_HUB_OFFLINE"] = "1"  # every file present: lerobot makes no hub call
    if tokenizer_home is not None:
        defaults["OPENPI_DATA_HOME"] = str(tokenizer_home)
    for name, value in defaults.items():
        if name not in plan.set:
            plan.offer(inherited, name, value)
    return plan
