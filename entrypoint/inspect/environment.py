"""The training processes' environment: what we export, what we keep, what we must remove.

Rules: a variable the user or platform already set is kept, never overwritten (reported as kept); the seed's
useful defaults are added otherwise; TI-ONE's node-level `WORLD_SIZE`/`RANK` and every inherited `PET_*`
variable are removed so that neither torchrun nor the trainer mistakes them for process-level values.
No `CUDA_VISIBLE_DEVICES` is ever set.

PyTorch's flight recorder (a ring buffer of each rank's recent collectives) is on by default
(`flight_recorder_env`): its dumps land in this node's folder beside its log, one file per global rank, and a
named pipe per rank lets the launcher ask a live rank for a dump when the stall watchdog fires.

The `datasets` library converts every parquet file of the LeRobot dataset into Arrow files (as large as the dataset)
under HF_DATASETS_CACHE before the first step. Its default, the container's own disk, is lost whenever TI-ONE starts
a new container, and the real LIBERO dataset takes minutes to convert. So the cache goes to this node's folder under
the assets root (`node_datasets_cache`), unless HF_DATASETS_CACHE is set: every later start of the same node rank,
in any container, reuses it. One folder per node rank, because the ranks of one node share `datasets`' own file
lock, which is not relied on between machines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.masking import masked
from entrypoint.core.settings import Settings

# TI-ONE's node-level names, which torch would read as process-level ones.
NODE_LEVEL_VARIABLES = ("WORLD_SIZE", "RANK")

# Flight-recorder settings: each group is one setting under the names torch has read over time, newest first
# (torch 2.11 reads TORCH_FR_* first and falls back to the TORCH_NCCL_* names that torch 2.6 reads). A user who set
# any name of a group keeps that group as it is: we add none of its other names, which newer torch would prefer.
FR_BUFFER_ENTRIES = 20000  # the entries each rank keeps: a few hours of a DDP job's collectives
FR_BUFFER_NAMES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
FR_DUMP_NAMES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")  # `<prefix><global rank>` files
FR_ON_TIMEOUT_NAMES = ("TORCH_NCCL_DUMP_ON_TIMEOUT",)  # NCCL's watchdog dumps every rank when a collective times out
FR_PIPE_NAMES = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE",)  # NCCL ranks dump when a byte reaches `<prefix><rank>.pipe`
FR_DUMP_PREFIX = "rank_"  # torch's own analyser wants exactly `<prefix><rank>` file names

DATASETS_CACHE_FOLDER = Path("cache", "datasets")  # under the assets root, one `node<rank>` folder per node rank


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


def node_datasets_cache(settings: Settings, node_rank: int) -> Path:
    """This node's datasets cache when the user set none: `<assets_root>/cache/datasets/node<rank>`."""
    return settings.path("assets_root") / DATASETS_CACHE_FOLDER / f"node{node_rank}"


def training_env(
    inherited: Mapping[str, str],
    settings: Settings,
    dataset_complete: bool,
    tokenizer_home: Path | None,
    node_rank: int,
) -> EnvPlan:
    """The seed's environment, adapted: offline once the dataset checked complete, no hard-coded GPU list, and
    the datasets cache in this node's folder under the assets root (`node_rank`) when training reads a dataset."""
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
        defaults["HF_DATASETS_CACHE"] = str(node_datasets_cache(settings, node_rank))
        if dataset_complete:
            defaults["HF_HUB_OFFLINE"] = "1"  # every file present: lerobot makes no hub call
    if tokenizer_home is not None:
        defaults["OPENPI_DATA_HOME"] = str(tokenizer_home)
    for name, value in defaults.items():
        if name not in plan.set:
            plan.offer(inherited, name, value)
    return plan


def flight_recorder_env(
    inherited: Mapping[str, str], chosen: Mapping[str, str], dump_folder: Path | None, pipe_prefix: str
) -> EnvPlan:
    """The flight recorder's variables: a 20000-entry buffer, a dump on an NCCL timeout, dumps as
    `<dump_folder>/rank_<global rank>` (none of the location when `dump_folder` is None: the node has no log
    folder) and the dump-request pipes at `<pipe_prefix><rank>.pipe` (a node-local folder: a FIFO belongs on local
    disk). A group the user set (in `inherited`, or in the job file's env, `chosen`) is kept untouched."""
    plan = EnvPlan()
    wanted: list[tuple[tuple[str, ...], str]] = [
        (FR_BUFFER_NAMES, str(FR_BUFFER_ENTRIES)),
        (FR_ON_TIMEOUT_NAMES, "1"),
        (FR_PIPE_NAMES, pipe_prefix),
    ]
    if dump_folder is not None:
        wanted.append((FR_DUMP_NAMES, str(dump_folder / FR_DUMP_PREFIX)))
    for names, value in wanted:
        own = [n for n in names if n in chosen]
        present = [n for n in names if n in inherited and n not in chosen]
        if own:
            continue  # the job file's value is already in `set`
        if present:
            plan.kept.update({n: inherited[n] for n in present})
            continue
        plan.set.update(dict.fromkeys(names, value))
    return plan
