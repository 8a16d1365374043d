"""The stand-in `torch.cuda` (see `torch/__init__.py`)."""

from __future__ import annotations

import os
from types import SimpleNamespace

from torch.cuda import nccl

__all__ = ["nccl"]


def is_available() -> bool:
    return device_count() > 0


def device_count() -> int:
    return int(os.environ.get("FAKE_TORCH_GPUS", "0"))


def get_device_properties(device: int) -> SimpleNamespace:
    return SimpleNamespace(
        name="NVIDIA H200",
        uuid=f"{device:08x}-1111-2222-3333-444455556666",
        pci_domain_id=0,
        pci_bus_id=0x18 + 0x10 * device,
        pci_device_id=0,
    )


def set_device(device: int) -> None:
    pass


def synchronize(device: int | None = None) -> None:
    pass


def empty_cache() -> None:
    pass
