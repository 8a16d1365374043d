"""NVML queries that the health probe and the GPU sampler both make, where the binding's versions differ."""

from __future__ import annotations

from typing import Any


def memory_info(nvml: Any, handle: Any) -> Any:
    """The GPU's memory (`used`, `total` in bytes) as nvidia-smi reports it: NVML's v2 query, whose `used` leaves out
    what the driver reserves for itself. The v1 query counts that reservation as used (615 MiB on an idle H200 with
    driver 580, where nvidia-smi says 0 MiB), which would read as another process's memory. v1 only where the
    binding or the driver has no v2."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except (TypeError, nvml.NVMLError) as error:  # an older binding, or a driver without the v2 function
            if getattr(error, "value", None) not in (None, getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", None)):
                raise
    return nvml.nvmlDeviceGetMemoryInfo(handle)
