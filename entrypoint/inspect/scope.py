"""What a check covers on this machine: everything (a training node), or the CFS tree alone (the dev machine).

`check --assets` is for TI-ONE's dev machine: the CFS is mounted, but there is no GPU, no torchrun, no openpi and
none of TI-ONE's node variables. It checks what lives on the CFS and in the settings (assets, `code/job.yaml`,
resume, checkpoint storage and free space, the batch against the job shape the user states) and reports each check
only a node can make (its GPUs, network, health gate, trainer, torchrun, transformers patch, TACO wheel, local
datasets cache) as SKIP, which never changes the exit code. A node-only inspection's misspecification (exit 2) is
kept: a malformed setting is malformed on every machine.

The stated shape, first match wins: `--nodes` / `--gpus-per-node`; TI-ONE's `WORLD_SIZE` / `GPU_NUM_PER_NODE` when
set (validated as a node validates them, without looking for GPUs); one whole 8-GPU node (one process with
`VLA_DEVICE=cpu`, as a CPU node runs).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from entrypoint.core.errors import ExitCode, JobMisspecified
from entrypoint.core.findings import Finding, Status, passed, skipped
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.core.settings import BAKED_JOB_FILE, Device, HealthMode, Settings, TacoMode
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import joined, verbatim
from entrypoint.inspect.openpi import TRAINER_SCRIPT
from entrypoint.inspect.topology import DEFAULT_MASTER_PORT, Topology, TopologySource, resolve_topology

DEFAULT_GPUS_PER_NODE = 8  # TI-ONE's HCC machines are whole 8-GPU nodes
SHAPE_LIMIT = 65536  # more nodes or GPUs per node than any job has: a typo, said so rather than computed with


class Scope(StrEnum):
    """What `check` covers here."""

    NODE = "node"  # this machine is a training node: every check
    ASSETS = "assets"  # the dev machine (`check --assets`): the CFS tree and the settings; node checks skipped


class ShapeSource(StrEnum):
    """Where the stated job shape came from."""

    FLAGS = "flags"  # --nodes / --gpus-per-node (either one)
    TIONE = "tione"  # TI-ONE's WORLD_SIZE / GPU_NUM_PER_NODE
    DEFAULT = "default"  # one whole node


@dataclass(frozen=True)
class StatedShape:
    """The job shape `check --assets` checks the batch against: `nnodes` x `per_node` training processes."""

    nnodes: int
    per_node: int
    source: ShapeSource

    def topology(self, device: Device) -> Topology:
        """The topology the CFS checks run against: node 0 (the node that saves) of the stated shape. Nothing was
        read from this machine's node variables, hence the source `single`; `to_json` shows the shape's own."""
        return Topology(
            nnodes=self.nnodes,
            node_rank=0,
            nproc_per_node=self.per_node,
            master_addr="127.0.0.1",
            master_port=DEFAULT_MASTER_PORT,
            source=TopologySource.SINGLE,
            device=device,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "nnodes": self.nnodes,
            "nproc_per_node": self.per_node,
            "world_size": self.nnodes * self.per_node,
            "source": self.source.value,
        }


def _within_limit(value: int | None, flag: str, what: str, example: int) -> int | None:
    if value is None or 1 <= value <= SHAPE_LIMIT:
        return value
    raise JobMisspecified(
        "check.shape",
        flag,
        M("scope-shape-range", flag=flag, value=value, limit=SHAPE_LIMIT),
        M("scope-shape-range-fix", flag=flag, what=M(what), example=example),
    )


def stated_shape(host: Host, device: Device, nodes: int | None, gpus_per_node: int | None) -> StatedShape:
    """The shape from the flags, else TI-ONE's variables, else one whole node; raises `JobMisspecified` for a flag
    out of range or a malformed TI-ONE variable. Reads no GPU."""
    nodes = _within_limit(nodes, "--nodes", "scope-nodes", 2)
    gpus_per_node = _within_limit(gpus_per_node, "--gpus-per-node", "scope-gpus-per-node", DEFAULT_GPUS_PER_NODE)
    if "GPU_NUM_PER_NODE" in host.env:
        tione = resolve_topology(host, Device.CPU)  # CPU: validate the variables, never look for GPUs
        base = StatedShape(tione.nnodes, tione.nproc_per_node, ShapeSource.TIONE)
    else:
        base = StatedShape(1, DEFAULT_GPUS_PER_NODE if device is Device.GPU else 1, ShapeSource.DEFAULT)
    if nodes is None and gpus_per_node is None:
        return base
    return StatedShape(nodes or base.nnodes, gpus_per_node or base.per_node, ShapeSource.FLAGS)


@dataclass(frozen=True)
class _NodeCheck:
    """A node-only check: its SKIP line's id, the prefix of the finding ids a node reports for it, what it checks."""

    id: str
    prefix: str
    what: Text


def _node_checks(settings: Settings) -> list[_NodeCheck]:
    """The node-only checks that apply to these settings, in the order a node reports them."""
    openpi = Path(settings.openpi_dir)
    checks = [
        _NodeCheck("topology.gpus", "topology.", M("scope-skip-gpus")),
        _NodeCheck("fabric", "fabric.", M("scope-skip-fabric")),
    ]
    if settings.health is not HealthMode.OFF:
        checks.append(_NodeCheck("health", "health.", M("scope-skip-health")))
    if settings.dataset_repo_id is not None:
        checks.append(_NodeCheck("storage.datasets-cache", "storage.datasets-cache", M("scope-skip-datasets-cache")))
    if settings.taco is not TacoMode.OFF:  # off is a setting, the same everywhere: its PASS line stays
        checks.append(_NodeCheck("taco.wheel", "taco.", M("scope-skip-taco")))
    checks.append(_NodeCheck("transformers-patch", "transformers-patch", M("scope-skip-patch")))
    if not openpi.is_relative_to(settings.assets_root):  # an openpi checkout on the CFS is checked like the assets
        what = M("scope-skip-trainer", script=str(openpi / TRAINER_SCRIPT))
        checks.append(_NodeCheck("trainer.script", "trainer.script", what))
    checks.append(_NodeCheck("trainer.torchrun", "trainer.torchrun", M("scope-skip-torchrun")))
    return checks


def _misspecified(finding: Finding) -> bool:
    return finding.status is Status.FAIL and finding.exit_code is ExitCode.JOB_MISSPECIFIED


def assets_findings(findings: Sequence[Finding], settings: Settings, env: Mapping[str, str]) -> list[Finding]:
    """A node's `findings` as the dev machine reports them: the job file first, each node-only check's findings
    replaced by one SKIP (its misspecifications kept), the rest unchanged. `env` names the image's job file."""
    checks = _node_checks(settings)
    node_only = tuple(check.prefix for check in checks)
    kept = [f for f in findings if not f.id.startswith(node_only) or _misspecified(f)]
    skips = [skipped(check.id, M("scope-skip", what=check.what)) for check in checks]
    baked = str(Path(env.get("VLA_BAKED_JOB_FILE", BAKED_JOB_FILE)))  # as `load_settings` names it
    return [job_file_finding(settings, baked), *kept, *skips]


def job_file_finding(settings: Settings, baked: str) -> Finding:
    """Which user job file was read and what was taken from it, or where none was found (`load_settings` has
    already refused a malformed one). `baked`, the image's job file, is the node's, not the user's: not reported."""
    user_files = [f for f in settings.files if f != baked]
    if not user_files:
        default = os.path.join(settings.assets_root, "code", "job.yaml")
        return passed("settings.job-file", M("scope-job-file-none", path=default), default)
    path = user_files[-1]
    keys = sorted(name for name, source in settings.sources.items() if source == path)
    if not keys:
        return passed("settings.job-file", M("scope-job-file-unused", path=path), path)
    return passed("settings.job-file", M("scope-job-file", path=path, keys=_listed(keys)), path)


def _listed(names: Iterable[str]) -> Text:
    return joined(verbatim(name) for name in names)
