"""The passive probe, run as a child process (`python -m entrypoint.health.probe`) so that a driver call that never
returns can be abandoned: every GPU's facts through NVML (`pynvml`), else through `nvidia-smi`, and the kernel
log's Xid events, printed as one JSON object on stdout.

A field the driver or `pynvml` does not have is listed under `unsupported` (never a fault); a call that fails
otherwise is kept under `errors`; "GPU is lost" marks the GPU `lost`. Standard library only, besides `pynvml`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from entrypoint.core.nvml import memory_info
from entrypoint.health.xid import read_kernel_log

SMI_TIMEOUT_S = 6.0
SMI_OUTPUT_LIMIT = 1 << 20
SMI_DIRS = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin")  # where the container runtime mounts it
RECOVERY_ACTION_FIELD = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (driver r570 and later)
_NOT_THERE = (3, 13)  # NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND
_GPU_IS_LOST = 15
_MIB = 1 << 20

# nvidia-smi's field -> our key; alternatives are tried when a driver does not know a field
SMI_FIELDS = {
    "index": "index",
    "uuid": "uuid",
    "serial": "serial",
    "pci.bus_id": "bus_id",
    "name": "name",
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "remapped_rows.pending": "remap_pending",
    "remapped_rows.failure": "remap_failure",
    "clocks_event_reasons.active": "clock_reasons",
    "driver_version": "driver",
}
SMI_ALTERNATIVES = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
_ABSENT = {"", "n/a", "[n/a]", "not supported", "[not supported]", "[unknown error]", "unknown error"}


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class _Device:
    """One GPU's reading: each call through `ask`, which sorts failures into unsupported, lost and errors."""

    def __init__(self, nvml: ModuleType, index: int) -> None:
        self.nvml = nvml
        self.facts: dict[str, Any] = {"index": index, "lost": False, "unsupported": [], "errors": {}}

    def ask(self, key: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except AttributeError:  # an older pynvml without this function
            self.facts["unsupported"].append(key)
        except self.nvml.NVMLError as error:
            code = getattr(error, "value", None)
            if code in _NOT_THERE:
                self.facts["unsupported"].append(key)
            else:
                self.facts["errors"][key] = _text(error)[:200]
                self.facts["lost"] = self.facts["lost"] or code == _GPU_IS_LOST
        return None


def _recovery_action(nvml: ModuleType, handle: object) -> int | None:
    field = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", RECOVERY_ACTION_FIELD)
    (value,) = nvml.nvmlDeviceGetFieldValues(handle, [field])
    if value.nvmlReturn != 0:
        raise nvml.NVMLError(value.nvmlReturn)
    return int(value.value.uiVal)


def _clock_reasons(nvml: ModuleType, handle: object) -> int:
    read = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return int(read(handle))


def read_device(nvml: ModuleType, index: int) -> dict[str, Any]:
    device = _Device(nvml, index)
    facts = device.facts
    handle = device.ask("handle", lambda: nvml.nvmlDeviceGetHandleByIndex(index))
    if handle is None:
        facts["lost"] = True
        return facts
    facts["name"] = device.ask("name", lambda: _text(nvml.nvmlDeviceGetName(handle)))
    facts["uuid"] = device.ask("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(handle)))
    facts["serial"] = device.ask("serial", lambda: _text(nvml.nvmlDeviceGetSerial(handle)))
    facts["bus_id"] = device.ask("bus_id", lambda: _text(nvml.nvmlDeviceGetPciInfo(handle).busId))
    memory = device.ask("memory", lambda: memory_info(nvml, handle))
    facts["memory_used_mib"] = int(memory.used) // _MIB if memory is not None else None
    facts["memory_total_mib"] = int(memory.total) // _MIB if memory is not None else None
    processes = device.ask("processes", lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    facts["processes"] = (
        [
            {
                "pid": int(p.pid),
                "used_mib": int(p.usedGpuMemory) // _MIB
                if isinstance(p.usedGpuMemory, int) and p.usedGpuMemory < 1 << 62
                else None,
            }
            for p in processes
        ]
        if processes is not None
        else None
    )
    facts["ecc_uncorrected"] = device.ask(
        "ecc_uncorrected",
        lambda: int(
            nvml.nvmlDeviceGetTotalEccErrors(handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)
        ),
    )
    remap = device.ask("remap", lambda: nvml.nvmlDeviceGetRemappedRows(handle))
    facts["remap_pending"] = bool(remap[2]) if remap is not None else None
    facts["remap_failure"] = bool(remap[3]) if remap is not None else None
    facts["recovery_action"] = device.ask("recovery_action", lambda: _recovery_action(nvml, handle))
    facts["clock_reasons"] = device.ask("clock_reasons", lambda: _clock_reasons(nvml, handle))
    return facts


def read_nvml(nvml: ModuleType) -> dict[str, Any]:
    """Every GPU NVML enumerates in this container; raises `nvml.NVMLError` when NVML cannot start at all."""
    nvml.nvmlInit()
    try:
        try:
            driver: str | None = _text(nvml.nvmlSystemGetDriverVersion())
        except nvml.NVMLError:
            driver = None
        count = int(nvml.nvmlDeviceGetCount())
        return {"source": "nvml", "driver": driver, "gpus": [read_device(nvml, i) for i in range(count)]}
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _smi_value(key: str, raw: str) -> object:
    text = raw.strip()
    if text.lower() in _ABSENT:
        return None
    if key in ("index", "memory_used_mib", "memory_total_mib", "ecc_uncorrected"):
        return int(text) if text.isdigit() else None
    if key in ("remap_pending", "remap_failure"):
        return {"yes": True, "no": False, "1": True, "0": False}.get(text.lower())
    if key == "clock_reasons":
        try:
            return int(text, 16) if text.lower().startswith("0x") else int(text)
        except ValueError:
            return None
    return text


def _run_smi(smi: str, args: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            [smi, *args], capture_output=True, timeout=SMI_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return -1, f"no answer within {SMI_TIMEOUT_S:.0f} s"
    except OSError as error:
        return -1, error.strerror or str(error)
    output = (done.stdout + done.stderr)[:SMI_OUTPUT_LIMIT].decode("utf-8", "replace")
    return done.returncode, output


def read_smi(smi: str) -> dict[str, Any]:
    """The same facts through `nvidia-smi --query-gpu` (no recovery action there); a field this driver does not
    know is replaced by its older name or dropped, and listed under `unsupported`."""
    columns = list(SMI_FIELDS.items())  # (nvidia-smi's field, our key)
    unsupported: list[str] = []
    code, output = -1, ""
    for _ in range(len(SMI_FIELDS)):
        names = [name for name, _ in columns]
        code, output = _run_smi(smi, [f"--query-gpu={','.join(names)}", "--format=csv,noheader,nounits"])
        invalid = _INVALID_FIELD.search(output)
        if code == 0 or invalid is None or invalid.group(1) not in names:
            break
        index = names.index(invalid.group(1))
        name, key = columns[index]
        if name in SMI_ALTERNATIVES:
            columns[index] = (SMI_ALTERNATIVES[name], key)
        else:
            del columns[index]
            unsupported.append(key)
    if code != 0:
        first = output.strip().splitlines()[0][:200] if output.strip() else ""
        raise RuntimeError(f"nvidia-smi exit {code}: {first}")
    keys = [key for _, key in columns]
    gpus: list[dict[str, Any]] = []
    driver = None
    for row in output.strip().splitlines():
        values = [v.strip() for v in row.split(",")]
        if len(values) != len(keys):
            continue
        gpu: dict[str, Any] = {
            "lost": False,
            "unsupported": [*unsupported, "recovery_action"],
            "errors": {},
            "recovery_action": None,
            "processes": [],
        }
        for key, raw in zip(keys, values, strict=True):
            value = _smi_value(key, raw)
            if key == "driver":
                driver = value
            else:
                gpu[key] = value
        gpus.append(gpu)
    code, apps = _run_smi(smi, ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"])
    by_uuid = {g.get("uuid"): g for g in gpus}
    if code != 0:
        for gpu in gpus:
            gpu["processes"] = None
    for row in apps.strip().splitlines() if code == 0 else []:
        parts = [p.strip() for p in row.split(",")]
        if len(parts) == 3 and parts[0] in by_uuid and parts[1].isdigit():
            used = int(parts[2]) if parts[2].isdigit() else None
            by_uuid[parts[0]]["processes"].append({"pid": int(parts[1]), "used_mib": used})
    return {"source": "nvidia-smi", "driver": driver, "gpus": gpus}


def find_smi(path: str | None) -> str | None:
    found = shutil.which("nvidia-smi", path=path)
    return found or shutil.which("nvidia-smi", path=os.pathsep.join(SMI_DIRS))


def probe(env: dict[str, str]) -> dict[str, Any]:
    """NVML first, `nvidia-smi` when NVML cannot be used, then the kernel log."""
    problems: list[str] = []
    facts: dict[str, Any] | None = None
    try:
        import pynvml  # type: ignore[import-untyped, import-not-found, unused-ignore]  # nvidia-ml-py (torch's)
    except ImportError as error:
        problems.append(f"pynvml: {error}"[:200])
    else:
        try:
            facts = read_nvml(pynvml)
        except pynvml.NVMLError as error:
            problems.append(f"NVML: {_text(error)}"[:200])
    if facts is None:
        smi = find_smi(env.get("PATH"))
        if smi is None:
            problems.append("nvidia-smi: not found")
        else:
            try:
                facts = read_smi(smi)
            except RuntimeError as error:
                problems.append(str(error))
    facts = facts or {"source": "none", "driver": None, "gpus": []}
    facts["problems"] = problems
    facts["kernel_log"] = read_kernel_log(env.get("VLA_HOST_ROOT") or "/").to_json()
    return facts


def main() -> int:
    sys.stdout.write(json.dumps(probe(dict(os.environ))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
