"""This node's GPUs as NVML sees them (`pynvml`, from the `nvidia-ml-py` package): one sample per GPU of its
utilisation, memory, power, SM clock, temperature and clock-event (throttle) reasons.

Each query is answered by the local driver in microseconds (30 queries take about 9 ms on an H200); a query the
GPU does not support is left out of the sample, never fatal. Without the package, the library or a GPU, `open_nvml`
says why instead (the caller says it once and samples nothing).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from entrypoint.core.messages import Text
from entrypoint.core.nvml import memory_info
from entrypoint.report.messages import MESSAGES as M

MAX_GPUS = 64  # more is not a machine, it is a garbled answer


@dataclass(frozen=True)
class GpuSample:
    """One GPU's values by name: `utilization_pct`, `memory_used_mib`, `memory_total_mib`, `power_w`,
    `sm_clock_mhz`, `temperature_c`, `throttle_reasons` (NVML's bit mask: 0x1 idle and 0x4 the software power cap
    are normal; 0x8 hardware slowdown, 0x20/0x40 thermal, 0x80 power brake are trouble)."""

    index: int
    values: dict[str, float] = field(default_factory=dict)


class Nvml:
    """An initialised NVML and the handles of this node's GPUs; `close` shuts NVML down."""

    def __init__(self, module: Any, handles: list[Any]) -> None:
        self.module, self.handles = module, handles

    def sample(self) -> list[GpuSample]:
        nvml = self.module
        queries = (
            ("utilization_pct", lambda h: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
            ("memory_used_mib", lambda h: memory_info(nvml, h).used / 2**20),
            ("memory_total_mib", lambda h: memory_info(nvml, h).total / 2**20),
            ("power_w", lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000),
            ("sm_clock_mhz", lambda h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
            ("temperature_c", lambda h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)),
            ("throttle_reasons", _throttle_reasons(nvml)),
        )
        found = []
        for index, handle in enumerate(self.handles):
            values: dict[str, float] = {}
            for name, query in queries:
                try:
                    values[name] = float(query(handle))
                except Exception:  # NVMLError (not supported, GPU lost), or an odd binding: leave it out
                    continue
            found.append(GpuSample(index, values))
        return found

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.module.nvmlShutdown()


def _throttle_reasons(nvml: Any) -> Any:
    """NVML's clock-event reasons query (its newer name first)."""
    query = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return query or nvml.nvmlDeviceGetCurrentClocksThrottleReasons


def open_nvml(binding: ModuleType | None = None) -> Nvml | Text:
    """NVML with every GPU's handle, or why not (no pynvml, no driver library, no GPU). `binding` stands in for
    the `pynvml` module (tests)."""
    module: Any = binding
    if module is None:
        try:
            import pynvml

            module = pynvml
        except ImportError:
            return M("nvml-no-module")
    try:
        module.nvmlInit()
    except Exception as error:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return M("nvml-init-failed", error=_reason(error))
    try:
        count = min(int(module.nvmlDeviceGetCount()), MAX_GPUS)
        handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except Exception as error:
        handles, reason = [], _reason(error)
    else:
        reason = M("nvml-none-listed").en
    if not handles:
        with contextlib.suppress(Exception):
            module.nvmlShutdown()
        return M("nvml-no-gpu", detail=reason)
    return Nvml(module, handles)


def _reason(error: BaseException) -> str:
    return (str(error) or type(error).__name__)[:200]
