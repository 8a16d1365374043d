"""The global batch must split evenly across every training process (openpi does not check)."""

from __future__ import annotations

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, failed, passed
from entrypoint.core.messages import Text
from entrypoint.inspect.topology import Topology


def nearest_valid(batch_size: int, processes: int) -> list[int]:
    """The multiples of `processes` just below and above `batch_size` (below omitted when it would be 0)."""
    below = batch_size // processes * processes
    above = below + processes
    return [b for b in (below, above) if b > 0]


def check_batch(batch_size: int, topology: Topology) -> Finding:
    processes = topology.world_size
    shape = f"{topology.nnodes} node(s) x {topology.nproc_per_node}"
    if batch_size % processes == 0:
        return passed(
            "batch",
            Text(
                f"global batch {batch_size} = {batch_size // processes} per process x {processes} processes ({shape})",
                f"全局 batch {batch_size} = 每进程 {batch_size // processes} x {processes} 个进程({shape})",
            ),
            "VLA_BATCH_SIZE",
        )
    choices = " or ".join(str(b) for b in nearest_valid(batch_size, processes))
    return failed(
        "batch",
        Text(
            f"global batch size {batch_size} does not divide by {processes} processes ({shape}); openpi would silently train {batch_size // processes} per process",
            f"全局 batch {batch_size} 不能被 {processes} 个进程({shape})整除;openpi 会静默地按每进程 {batch_size // processes} 训练",
        ),
        Text(
            f"Set VLA_BATCH_SIZE to a multiple of {processes}: {choices}.",
            f"请把 VLA_BATCH_SIZE 设为 {processes} 的倍数:{choices}。",
        ),
        "VLA_BATCH_SIZE",
        ExitCode.JOB_MISSPECIFIED,
    )
