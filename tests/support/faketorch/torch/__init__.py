"""A stand-in `torch` for the active tier's worker (`entrypoint/health/active.py`) on a machine without a GPU: just
enough of the API it calls, with `FAKE_TORCH_GPUS` devices; `FAKE_TORCH_FAIL` names a device whose matmul raises (a
CUDA error) and `FAKE_TORCH_SLOW` one whose matmul takes longer (a co-tenant)."""

from __future__ import annotations

import os
import time

from torch import cuda

__version__ = "0.0-fake"
bfloat16, uint8, float32 = "bfloat16", "uint8", "float32"
__all__ = ["cuda"]


class Tensor:
    def __init__(self, size: int, device: object = None) -> None:
        self.size, self.device = size, device

    def copy_(self, other: Tensor, non_blocking: bool = False) -> Tensor:
        return self

    def pin_memory(self) -> Tensor:
        return self


def _elements(shape: tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def empty(*shape: int, dtype: object = None, device: object = None) -> Tensor:
    return Tensor(_elements(shape), device)


def randn(*shape: int, dtype: object = None, device: object = None) -> Tensor:
    return Tensor(_elements(shape), device)


def ones(*shape: int, dtype: object = None, device: object = None) -> Tensor:
    return Tensor(_elements(shape), device)


def empty_like(other: Tensor) -> Tensor:
    return Tensor(other.size, other.device)


def mm(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    if str(a.device) == os.environ.get("FAKE_TORCH_FAIL"):
        raise RuntimeError("CUDA error: uncorrectable ECC error encountered")
    time.sleep(0.004 if str(a.device) == os.environ.get("FAKE_TORCH_SLOW") else 0.001)
    return out or a
