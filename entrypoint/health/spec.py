"""What the node health gate will run, decided with the plan (pure: reads nothing, starts nothing).

The gate runs on a GPU node unless `VLA_HEALTH=off`: the passive tier before the first torchrun and before every
in-job restart; the active tier on the first start and on a restart after a fault blamed on this node, with the
node's all-reduce when the job has two nodes or more and the node two GPUs or more. `check --assets` (the dev
machine) and `VLA_DEVICE=cpu` never run it.
"""

from __future__ import annotations

from dataclasses import dataclass

from entrypoint.core.messages import Text, flatten
from entrypoint.core.settings import Device, HealthMode
from entrypoint.health.messages import MESSAGES as M

PASSIVE_TIMEOUT_S = 10.0  # the whole passive probe (NVML or nvidia-smi, the kernel log); ~0.1 s when healthy
ACTIVE_TIMEOUT_S = 120.0  # the GPU measurements, torch import included; ~10 s when healthy
GATHER_WAIT_S = 60.0  # the first start: how long a node waits for the other nodes' figures


@dataclass(frozen=True)
class HealthGate:
    mode: HealthMode
    runs: bool
    allreduce: bool
    gpus: int
    reason: Text
    passive_timeout_s: float = PASSIVE_TIMEOUT_S
    active_timeout_s: float = ACTIVE_TIMEOUT_S
    gather_wait_s: float = 0.0

    @property
    def restart_mode(self) -> str | None:
        """What the attempt shim is told (`--health MODE`), or None when the gate does not run."""
        return self.mode.value if self.runs else None

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode.value,
            "runs": self.runs,
            "start": ["passive", "active"] if self.runs else [],
            "restart": ["passive", "active after a fault blamed on this node"] if self.runs else [],
            "allreduce": self.allreduce,
            "gpus": self.gpus,
            "passive_timeout_s": self.passive_timeout_s,
            "active_timeout_s": self.active_timeout_s,
            "gather_wait_s": self.gather_wait_s,
            **flatten(self.reason, "reason"),
        }


def gate_spec(mode: HealthMode, device: Device, nnodes: int, gpus_per_node: int, node_scope: bool) -> HealthGate:
    """The gate for this node: off, skipped (no GPU, or the dev machine) or what it runs."""
    if mode is HealthMode.OFF:
        return HealthGate(mode, False, False, gpus_per_node, M("gate-off"))
    if not node_scope:
        return HealthGate(mode, False, False, gpus_per_node, M("gate-dev-machine"))
    if device is Device.CPU:
        return HealthGate(mode, False, False, gpus_per_node, M("gate-cpu"))
    allreduce = nnodes >= 2 and gpus_per_node >= 2
    reason = M(
        "gate-on",
        mode=mode.value,
        gpus=gpus_per_node,
        allreduce=M("gate-allreduce") if allreduce else "",
        policy=M(f"policy-{mode.value}"),
    )
    return HealthGate(mode, True, allreduce, gpus_per_node, reason, gather_wait_s=GATHER_WAIT_S if nnodes > 1 else 0.0)
