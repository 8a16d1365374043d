"""Floors per GPU model: the active tier's figures below which a GPU is absurdly slow, whatever its peers show.

The verdict is relative (each GPU against the node's best and the job's median); a floor only catches what a
relative rule cannot see, such as a one-GPU node or a whole node slowed alike. Each floor is about two thirds of
what a healthy GPU sustains under load (an H200: bf16 matmul 670-690 TFLOPS at its power cap, 770-790 in a short
burst; a 4 GiB device copy 2.1 TB/s; pinned host to device 55 GB/s), so a co-tenant or a link trained down to an
older PCIe generation falls below it while a warm, power-capped GPU never does. Unknown models get no floor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Floor:
    sku: str
    tflops: float  # bf16 matmul
    h2d_gbps: float  # pinned host to device
    d2d_gbps: float  # device to device copy
    allreduce_gbps: float  # intra-node all-reduce bus bandwidth (all GPUs of the node)

    def of(self, metric: str) -> float:
        return float(getattr(self, metric))


# First match wins: the PCIe and NVL boards (350-400 W) before the SXM parts of the same name; H200 before H20, whose
# name is a prefix of it. An H100 or H800 SXM (`NVIDIA H100 80GB HBM3`, `NVIDIA H800`) is the H200's die at the same
# clocks and power: the same matmul floor (an H100 SXM sharing its GPU with the test's co-tenant measured 307).
FLOORS = (
    (
        re.compile(r"\bH(?:100|800)\b.*\b(?:PCIe|NVL)\b"),
        Floor("H100/H800 PCIe", tflops=300.0, h2d_gbps=20.0, d2d_gbps=800.0, allreduce_gbps=70.0),
    ),
    (re.compile(r"\bH200\b"), Floor("H200", tflops=440.0, h2d_gbps=20.0, d2d_gbps=1000.0, allreduce_gbps=150.0)),
    (re.compile(r"\bH100\b"), Floor("H100", tflops=440.0, h2d_gbps=20.0, d2d_gbps=800.0, allreduce_gbps=150.0)),
    (re.compile(r"\bH800\b"), Floor("H800", tflops=440.0, h2d_gbps=20.0, d2d_gbps=800.0, allreduce_gbps=70.0)),
    (re.compile(r"\bA100\b"), Floor("A100", tflops=150.0, h2d_gbps=10.0, d2d_gbps=600.0, allreduce_gbps=100.0)),
    (re.compile(r"\bH20\b"), Floor("H20", tflops=80.0, h2d_gbps=20.0, d2d_gbps=1500.0, allreduce_gbps=150.0)),
)


def floor_for(name: str | None) -> Floor | None:
    """The floor for a GPU named as NVML names it (`NVIDIA H200`, `NVIDIA A100-SXM4-80GB`); None when unknown."""
    for pattern, floor in FLOORS:
        if name and pattern.search(name):
            return floor
    return None
