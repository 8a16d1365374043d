"""The stand-in `torch.cuda.nccl`."""

from __future__ import annotations

import time


def all_reduce(tensors: list[object]) -> None:
    time.sleep(0.002)
