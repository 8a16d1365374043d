"""Typed facts of the health gate: what the passive probe read of each GPU and the kernel log, which GPUs this node
was given, and what the active tier measured. Everything read back from a child or a peer's file is parsed
defensively: a missing or odd value reads as unknown, never as an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from entrypoint.health.xid import KernelLog, XidEvent, bus_key


def as_int(value: object, limit: int = 1 << 62) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < limit else None


def as_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and 0 <= number < 1e15 else None  # NaN and absurd values are unknown


def as_str(value: object, limit: int = 200) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def as_bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


@dataclass(frozen=True)
class Process:
    pid: int
    used_mib: int | None

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "used_mib": self.used_mib}


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML (or nvidia-smi) showed it; None means the driver did not say."""

    index: int
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    bus_id: str | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    processes: tuple[Process, ...] | None = ()
    ecc_uncorrected: int | None = 0
    remap_pending: bool | None = False
    remap_failure: bool | None = False
    recovery_action: int | None = 0
    clock_reasons: int | None = 1
    lost: bool = False
    unsupported: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)

    @property
    def bus(self) -> str:
        """The bus id as the kernel log names it (`dddd:bb:dd`), or `?`."""
        return bus_key(self.bus_id) if self.bus_id else "?"

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "serial": self.serial,
            "bus_id": self.bus_id,
            "memory_used_mib": self.memory_used_mib,
            "memory_total_mib": self.memory_total_mib,
            "processes": [p.to_json() for p in self.processes] if self.processes is not None else None,
            "ecc_uncorrected": self.ecc_uncorrected,
            "remap_pending": self.remap_pending,
            "remap_failure": self.remap_failure,
            "recovery_action": self.recovery_action,
            "clock_reasons": self.clock_reasons,
            "lost": self.lost,
            "unsupported": list(self.unsupported),
            "errors": dict(self.errors),
        }


def parse_gpu(raw: Mapping[str, object], position: int) -> Gpu:
    processes_raw = raw.get("processes")
    processes: tuple[Process, ...] | None = None
    if isinstance(processes_raw, list):
        processes = tuple(
            Process(pid, as_int(item.get("used_mib")))
            for item in processes_raw[:1024]
            if isinstance(item, dict) and (pid := as_int(item.get("pid"), 1 << 31)) is not None
        )
    unsupported = raw.get("unsupported")
    errors = raw.get("errors")
    index = as_int(raw.get("index"), 1 << 16)
    return Gpu(
        index=position if index is None else index,
        name=as_str(raw.get("name")),
        uuid=as_str(raw.get("uuid")),
        serial=as_str(raw.get("serial")),
        bus_id=as_str(raw.get("bus_id")),
        memory_used_mib=as_int(raw.get("memory_used_mib")),
        memory_total_mib=as_int(raw.get("memory_total_mib")),
        processes=processes,
        ecc_uncorrected=as_int(raw.get("ecc_uncorrected")),
        remap_pending=as_bool(raw.get("remap_pending")),
        remap_failure=as_bool(raw.get("remap_failure")),
        recovery_action=as_int(raw.get("recovery_action")),
        clock_reasons=as_int(raw.get("clock_reasons")),
        lost=raw.get("lost") is True,
        unsupported=tuple(str(u)[:60] for u in unsupported[:64]) if isinstance(unsupported, list) else (),
        errors={str(k)[:60]: str(v)[:200] for k, v in list(errors.items())[:64]} if isinstance(errors, dict) else {},
    )


class ProbeStatus(StrEnum):
    OK = "ok"  # NVML or nvidia-smi answered
    UNAVAILABLE = "unavailable"  # neither could be used (no driver in this container, no pynvml, no nvidia-smi)
    TIMED_OUT = "timed-out"  # the probe did not finish within its bound: a driver call that never returned
    FAILED = "failed"  # the probe itself failed (its output is kept)


@dataclass(frozen=True)
class Probe:
    """The passive probe's reading of this node."""

    status: ProbeStatus
    source: str = "none"  # nvml | nvidia-smi | none
    driver: str | None = None
    gpus: tuple[Gpu, ...] = ()
    problems: tuple[str, ...] = ()
    kernel: KernelLog = field(default_factory=lambda: KernelLog(False, "not read", ()))
    detail: str | None = None
    seconds: float | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status.value,
            "source": self.source,
            "driver": self.driver,
            "gpus": [g.to_json() for g in self.gpus],
            "problems": list(self.problems),
            "kernel_log": self.kernel.to_json(),
            "detail": self.detail,
            "seconds": self.seconds,
        }


def parse_kernel_log(raw: object) -> KernelLog:
    if not isinstance(raw, dict):
        return KernelLog(False, "not read", ())
    events = []
    for item in raw.get("events", [])[:4096] if isinstance(raw.get("events"), list) else []:
        if not isinstance(item, dict) or as_int(item.get("code"), 1 << 16) is None:
            continue
        events.append(
            XidEvent(
                item["code"], str(item.get("bus", "?"))[:40], as_float(item.get("age_s")), str(item.get("line"))[:240]
            )
        )
    return KernelLog(raw.get("readable") is True, as_str(raw.get("problem")), tuple(events))


def parse_probe(raw: Mapping[str, object], seconds: float | None = None) -> Probe:
    """The probe's JSON as typed facts; no GPU and no source means NVML could not be used here."""
    gpus_raw = raw.get("gpus")
    listed = gpus_raw[:256] if isinstance(gpus_raw, list) else []
    gpus = tuple(parse_gpu(g, i) for i, g in enumerate(listed) if isinstance(g, dict))
    problems = raw.get("problems")
    source = as_str(raw.get("source")) or "none"
    status = ProbeStatus.OK if source in ("nvml", "nvidia-smi") else ProbeStatus.UNAVAILABLE
    return Probe(
        status=status,
        source=source,
        driver=as_str(raw.get("driver")),
        gpus=gpus,
        problems=tuple(str(p)[:200] for p in problems[:16]) if isinstance(problems, list) else (),
        kernel=parse_kernel_log(raw.get("kernel_log")),
        seconds=seconds,
    )


_OFF_WORDS = ("", "all", "none", "void")


def given_gpus(gpus: Sequence[Gpu], env: Mapping[str, str]) -> tuple[Gpu, ...]:
    """The GPUs this node was given, in CUDA's order: `CUDA_VISIBLE_DEVICES` (indices or UUID prefixes; CUDA stops at
    the first entry it cannot use) when set, else `NVIDIA_VISIBLE_DEVICES` when NVML sees more GPUs than it lists (a
    privileged container sees every GPU of the host), else every GPU NVML enumerates (also for MIG instances)."""
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        listed = env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
        if listed.lower() in _OFF_WORDS or len(listed.split(",")) >= len(gpus):
            return tuple(gpus)
        raw = listed
    if "MIG-" in raw.upper():  # MIG instances are not whole GPUs NVML lists here: judge every GPU NVML shows
        return tuple(gpus)
    chosen: list[Gpu] = []
    for entry in raw.split(","):
        entry = entry.strip()
        match: Gpu | None = None
        if entry.isdigit():
            match = next((g for g in gpus if g.index == int(entry)), None)
        elif entry.upper().startswith("GPU-"):
            hits = [g for g in gpus if g.uuid and g.uuid.upper().startswith(entry.upper())]
            match = hits[0] if len(hits) == 1 else None
        if match is None or match in chosen:
            break
        chosen.append(match)
    return tuple(chosen)


@dataclass(frozen=True)
class GpuFigures:
    """What the active tier measured on one GPU (None: not measured, `error` says why)."""

    device: int  # torch's index, in CUDA_VISIBLE_DEVICES order
    uuid: str | None = None
    bus_id: str | None = None
    name: str | None = None
    tflops: float | None = None  # bf16 matmul, wall clock over a batch
    h2d_gbps: float | None = None  # host to device, pinned
    d2d_gbps: float | None = None  # device to device copy (bytes copied per second)
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "device": self.device,
            "uuid": self.uuid,
            "bus_id": self.bus_id,
            "name": self.name,
            "tflops": self.tflops,
            "h2d_gbps": self.h2d_gbps,
            "d2d_gbps": self.d2d_gbps,
            "error": self.error,
        }


def parse_figures(raw: object, position: int) -> GpuFigures | None:
    if not isinstance(raw, dict):
        return None
    device = as_int(raw.get("device"), 1 << 16)
    return GpuFigures(
        device=device if device is not None else position,
        uuid=as_str(raw.get("uuid")),
        bus_id=as_str(raw.get("bus_id")),
        name=as_str(raw.get("name")),
        tflops=as_float(raw.get("tflops")),
        h2d_gbps=as_float(raw.get("h2d_gbps")),
        d2d_gbps=as_float(raw.get("d2d_gbps")),
        error=as_str(raw.get("error"), 400),
    )
