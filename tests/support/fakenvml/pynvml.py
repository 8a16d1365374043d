"""A stand-in for nvidia-ml-py's `pynvml`, replaying a scenario (a dict; in a child, the JSON file `FAKE_NVML`).

Scenario keys: `init` ("ok", "raise:<code>", "hang"), `driver`, `gpus` (see `tests.support.health.gpu`), `missing`
(functions this older pynvml lacks). A GPU may `raise` {function: code} or `hang` in a function (it never returns,
as a stuck driver call) or `crash` in one (a non-NVML exception).
"""

from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace
from typing import Any

NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
nvmlMemory_v2 = 0x02000028
_TEXT = {3: "Not Supported", 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 15: "GPU is lost"}
_MIB = 1 << 20


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"Unknown Error {self.value}")


_scenario: dict[str, Any] = {}
_removed: dict[str, Any] = {}


def load(scenario: dict[str, Any]) -> None:
    """Replay `scenario` from now on; functions it lists as `missing` disappear (an older pynvml)."""
    global _scenario
    _scenario = scenario
    module = globals()
    module.update(_removed)
    _removed.clear()
    for name in scenario.get("missing", []):
        if name in module:
            _removed[name] = module.pop(name)


def _act(step: str | None) -> None:
    if step is None or step == "ok":
        return
    if step == "hang":
        while True:
            signal.pause()
    if step == "crash":
        raise RuntimeError("the driver library misbehaved")
    raise NVMLError(int(step.split(":")[1]))


def _gpu(handle: Any, function: str) -> dict[str, Any]:
    gpu = _scenario["gpus"][handle]
    if gpu.get("hang") == function:
        _act("hang")
    if gpu.get("crash") == function:
        _act("crash")
    code = gpu.get("raise", {}).get(function)
    if code is not None:
        raise NVMLError(code)
    return gpu


def nvmlInit() -> None:
    _act(_scenario.get("init", "ok"))


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    return _scenario.get("driver", "580.159.04")


def nvmlDeviceGetCount() -> int:
    return len(_scenario["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    _gpu(index, "nvmlDeviceGetHandleByIndex")
    return index


def nvmlDeviceGetName(handle: int) -> bytes:
    return _gpu(handle, "nvmlDeviceGetName")["name"].encode()


def nvmlDeviceGetUUID(handle: int) -> str:
    return _gpu(handle, "nvmlDeviceGetUUID")["uuid"]


def nvmlDeviceGetSerial(handle: int) -> str:
    return _gpu(handle, "nvmlDeviceGetSerial")["serial"]


def nvmlDeviceGetPciInfo(handle: int) -> SimpleNamespace:
    return SimpleNamespace(busId=_gpu(handle, "nvmlDeviceGetPciInfo")["bus_id"].encode())


def nvmlDeviceGetMemoryInfo(handle: int, version: int | None = None) -> SimpleNamespace:
    """v1 counts the driver's reservation (`reserved_mib`) as used; v2 reports it apart, as drivers since 510 do."""
    gpu = _gpu(handle, "nvmlDeviceGetMemoryInfo")
    reserved = gpu.get("reserved_mib", 0) * _MIB
    if version is None:
        return SimpleNamespace(used=gpu["used_mib"] * _MIB + reserved, total=gpu["total_mib"] * _MIB)
    if "nvmlDeviceGetMemoryInfo_v2" in _scenario.get("missing", []):
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
    return SimpleNamespace(used=gpu["used_mib"] * _MIB, reserved=reserved, total=gpu["total_mib"] * _MIB)


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list[SimpleNamespace]:
    gpu = _gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
    return [
        SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * _MIB) for pid, mib in gpu["processes"]
    ]


def nvmlDeviceGetTotalEccErrors(handle: int, error_type: int, counter_type: int) -> int:
    assert (error_type, counter_type) == (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)
    return _gpu(handle, "nvmlDeviceGetTotalEccErrors")["ecc"]


def nvmlDeviceGetRemappedRows(handle: int) -> tuple[int, int, int, int]:
    return tuple(_gpu(handle, "nvmlDeviceGetRemappedRows")["remap"])  # type: ignore[return-value]


def nvmlDeviceGetFieldValues(handle: int, fields: list[int]) -> list[SimpleNamespace]:
    gpu = _gpu(handle, "nvmlDeviceGetFieldValues")
    assert fields == [NVML_FI_DEV_GET_GPU_RECOVERY_ACTION]
    action = gpu["recovery"]
    if action is None:  # a driver before r570 does not know the field
        return [SimpleNamespace(nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=SimpleNamespace(uiVal=0))]
    return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(uiVal=action))]


def nvmlDeviceGetCurrentClocksEventReasons(handle: int) -> int:
    return _gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons")["reasons"]


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: int) -> int:
    return _gpu(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")["reasons"]


if os.environ.get("FAKE_NVML"):
    with open(os.environ["FAKE_NVML"], encoding="utf-8") as _handle:
        load(json.load(_handle))
