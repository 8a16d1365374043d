"""The global batch must split evenly across every training process (openpi does not check)."""

from __future__ import annotations

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, failed, passed
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import verbatim
from entrypoint.inspect.topology import Topology


def nearest_valid(batch_size: int, processes: int) -> list[int]:
    """The multiples of `processes` just below and above `batch_size` (below omitted when it would be 0)."""
    below = batch_size // processes * processes
    above = below + processes
    return [b for b in (below, above) if b > 0]


def check_batch(batch_size: int, topology: Topology) -> Finding:
    processes = topology.world_size
    shape = M("batch-shape", nnodes=topology.nnodes, per_node=topology.nproc_per_node)
    per_process = batch_size // processes
    if batch_size % processes == 0:
        return passed(
            "batch",
            M("batch-divides", batch=batch_size, per_process=per_process, processes=processes, shape=shape),
            "VLA_BATCH_SIZE",
        )
    first, *rest = nearest_valid(batch_size, processes)
    choices = M("either", first=first, second=rest[0]) if rest else verbatim(str(first))
    return failed(
        "batch",
        M("batch-indivisible", batch=batch_size, processes=processes, shape=shape, per_process=per_process),
        M("batch-indivisible-fix", processes=processes, choices=choices),
        "VLA_BATCH_SIZE",
        ExitCode.JOB_MISSPECIFIED,
    )
