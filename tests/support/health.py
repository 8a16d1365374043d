"""Scenarios for the node health gate's fakes (`tests/support/fakenvml`): GPUs as NVML and nvidia-smi show them, a
kernel log, and the environment that points a child process at them."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FAKES = Path(__file__).resolve().parent / "fakenvml"
REPO = Path(__file__).resolve().parents[2]


def serial(index: int) -> str:
    return f"165202300{index:04d}"


def bus(index: int) -> str:
    return f"00000000:{0x18 + 0x10 * index:02X}:00.0"


def gpu(index: int, **changes: Any) -> dict[str, Any]:
    """A healthy idle H200 as NVML shows it (idle clock reason 0x1), changed by `changes`."""
    healthy = {
        "name": "NVIDIA H200",
        "uuid": f"GPU-{index:08x}-1111-2222-3333-444455556666",
        "serial": serial(index),
        "bus_id": bus(index),
        "used_mib": 0,
        "reserved_mib": 615,  # what driver 580 keeps for itself on an idle H200: NVML's v1 query counts it as used
        "total_mib": 143771,
        "processes": [],
        "ecc": 0,
        "remap": [0, 0, 0, 0],
        "recovery": 0,
        "reasons": 0x1,
    }
    return {**healthy, **changes}


def node(count: int = 8, **extra: Any) -> dict[str, Any]:
    """A scenario of `count` healthy GPUs; `extra` sets scenario keys (init, missing, driver)."""
    return {"init": "ok", "driver": "580.159.04", "gpus": [gpu(i) for i in range(count)], **extra}


def smi_rows(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The same GPUs as `nvidia-smi --query-gpu` fields."""
    rows = []
    for i, g in enumerate(scenario["gpus"]):
        rows.append(
            {
                "index": i,
                "uuid": g["uuid"],
                "serial": g["serial"],
                "pci.bus_id": g["bus_id"],
                "name": g["name"],
                "memory.used": g["used_mib"],
                "memory.total": g["total_mib"],
                "ecc.errors.uncorrected.volatile.total": g["ecc"],
                "remapped_rows.pending": "Yes" if g["remap"][2] else "No",
                "remapped_rows.failure": "Yes" if g["remap"][3] else "No",
                "clocks_event_reasons.active": f"0x{g['reasons']:016X}",
                "driver_version": scenario.get("driver", "580.159.04"),
            }
        )
    apps = [[g["uuid"], pid, mib] for g in scenario["gpus"] for pid, mib in g["processes"]]
    return {"gpus": rows, "apps": apps}


def kmsg_line(seconds: float, message: str, seq: int = 1) -> str:
    return f"3,{seq},{int(seconds * 1e6)},-;{message}\n"


def xid_line(seconds: float, bus_id: str, code: int, seq: int = 1) -> str:
    """A driver's Xid record: `NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.`"""
    domain, number, device = bus_id.split(":")[0][-4:], bus_id.split(":")[1], bus_id.split(":")[2][:2]
    text = f"NVRM: Xid (PCI:{domain}:{number.lower()}:{device}): {code}, pid=4242, name=python, Ch 00000008"
    return kmsg_line(seconds, text, seq)


def kernel_log(root: Path, lines: list[str], uptime_s: float = 100_000.0) -> None:
    """`/dev/kmsg` (a plain file, read to its end) and `/proc/uptime` under the fake host `root`."""
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "dev" / "kmsg").write_text("".join(lines), encoding="utf-8")
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "uptime").write_text(f"{uptime_s:.2f} 1234.00\n", encoding="utf-8")


def child_env(
    tmp: Path, scenario: Mapping[str, Any] | None, smi: Mapping[str, Any] | None = None, **extra: str
) -> dict[str, str]:
    """The environment a probe child needs to meet the fakes: the fake pynvml on PYTHONPATH (unless `scenario` is
    None: no pynvml at all), the fake nvidia-smi on PATH when `smi` is given (else none)."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    if scenario is not None:
        (tmp / "nvml.json").write_text(json.dumps(scenario), encoding="utf-8")
        env |= {"PYTHONPATH": f"{FAKES}{os.pathsep}{REPO}", "FAKE_NVML": str(tmp / "nvml.json")}
    if smi is not None:
        (tmp / "smi.json").write_text(json.dumps(smi), encoding="utf-8")
        env |= {"PATH": f"{FAKES / 'bin'}{os.pathsep}{env['PATH']}", "FAKE_SMI": str(tmp / "smi.json")}
    return {**env, **extra}


ACTIVE_PYTHON = """#!{python}
import json, os, signal, sys
if not any(arg.endswith("active.py") for arg in sys.argv[1:]):  # anything else (a stand-in torchrun): real Python
    os.execv({python!r}, [{python!r}, *sys.argv[1:]])
with open(os.environ["FAKE_ACTIVE"], encoding="utf-8") as handle:
    scenario = json.load(handle)
if scenario.get("hang"):
    while True:
        signal.pause()
if scenario.get("crash"):
    sys.stderr.write("Traceback (most recent call last):\\nRuntimeError: CUDA error: an illegal memory access\\n")
    sys.exit(1)
print(json.dumps(scenario["answer"]), flush=True)
"""


def active_python(folder: Path, answer: Mapping[str, Any] | None = None, **flags: bool) -> tuple[Path, dict[str, str]]:
    """A stand-in training Python (`<folder>/python3`) that answers as `active.py` would (`answer`), or hangs or
    crashes (`flags`), and runs anything else with the real Python; returns it and the variable that points it at
    its scenario."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "python3"
    script.write_text(ACTIVE_PYTHON.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    (folder / "active.json").write_text(json.dumps({"answer": answer, **flags}), encoding="utf-8")
    return script, {"FAKE_ACTIVE": str(folder / "active.json")}


def figures(count: int = 8, tflops: float = 780.0, **per_gpu: dict[str, Any]) -> dict[str, Any]:
    """What `active.py` prints for `count` healthy H200s; `per_gpu` changes GPU `g<i>`'s figures."""
    gpus = []
    for i in range(count):
        row = {
            "device": i,
            "name": "NVIDIA H200",
            "uuid": gpu(i)["uuid"],
            "bus_id": bus(i),
            "tflops": tflops,
            "h2d_gbps": 55.0,
            "d2d_gbps": 2100.0,
        }
        row.update(per_gpu.get(f"g{i}", {}))
        gpus.append(row)
    return {"format": 1, "status": "ok", "import_s": 4.1, "seconds": 6.2, "torch": "2.11.0", "gpus": gpus}
