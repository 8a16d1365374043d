"""The passive tier's verdict on every fault the brief names, replayed through a fake NVML: a clean node passes; a
foreign process, memory in use, uncorrected ECC, a row remap pending or failed, a recovery action, a lost or missing
GPU and a fatal Xid fail the node naming its GPU's index, bus id and serial in both languages; throttling warns (and
fails under VLA_HEALTH=fail); a driver without the newer fields passes and says what it could not check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from entrypoint.core.findings import Status
from entrypoint.core.settings import HealthMode
from entrypoint.health.facts import Gpu, Probe, ProbeStatus, given_gpus, parse_probe
from entrypoint.health.probe import read_nvml
from entrypoint.health.verdict import Node, passive_findings
from entrypoint.health.xid import read_kernel_log
from tests.support import health as fake
from tests.support.fakenvml import pynvml as fake_nvml

NODE = Node(rank=1, host="node-b", stated_gpus=8, nnodes=2)


def judge(scenario: dict[str, Any], mode: HealthMode = HealthMode.WARN, kmsg: Path | None = None, **env: str):
    """Read `scenario` as the probe would, keep the GPUs `env` gives this node, and judge them."""
    fake_nvml.load(scenario)
    raw = read_nvml(fake_nvml)
    raw["kernel_log"] = read_kernel_log(str(kmsg) if kmsg else "/nonexistent-root").to_json()
    probe = parse_probe(raw)
    ours = given_gpus(probe.gpus, env)
    return passive_findings(NODE, probe, ours, None, mode, 10.0)


def failing(findings) -> list[str]:
    return [f.id for f in findings if f.status is Status.FAIL]


def one_gpu_fault(index: int, **changes: Any) -> dict[str, Any]:
    scenario = fake.node()
    scenario["gpus"][index] = fake.gpu(index, **changes)
    return scenario


FAULTS = [
    (
        "foreign-process",
        one_gpu_fault(3, processes=[[4242, 1002]], used_mib=1002),
        "health.foreign-process",
        "PID 4242 (1002 MiB)",
    ),
    ("memory-in-use", one_gpu_fault(3, used_mib=612), "health.memory-in-use", "612 MiB"),
    ("ecc", one_gpu_fault(3, ecc=2), "health.ecc", "2 uncorrected ECC"),
    ("remap-pending", one_gpu_fault(3, remap=[0, 1, 1, 0]), "health.row-remap", "row remap pending"),
    ("remap-failure", one_gpu_fault(3, remap=[0, 9, 0, 1]), "health.row-remap", "failed a row remap"),
    ("recovery-action", one_gpu_fault(3, recovery=2), "health.recovery-action", "node reboot"),
    ("gpu-lost", one_gpu_fault(3, **{"raise": {"nvmlDeviceGetHandleByIndex": 15}}), "health.gpu-lost", "GPU is lost"),
]


@pytest.mark.parametrize("scenario, finding, detail", [c[1:] for c in FAULTS], ids=[c[0] for c in FAULTS])
def test_a_hard_fault_fails_the_node_naming_gpu_bus_and_serial(scenario, finding, detail):
    findings, marks = judge(scenario)
    assert failing(findings) == [finding]
    (fault,) = [f for f in findings if f.id == finding]
    assert detail in fault.message.en
    assert "node 1 (node-b)" in fault.message.en and "节点 1(node-b)" in fault.message.zh
    if finding != "health.gpu-lost":  # a lost GPU has no bus id or serial to read any more
        assert fake.serial(3) in fault.message.en and fake.serial(3) in fault.message.zh
        assert fake.bus(3) in fault.message.en and "GPU 3" in fault.message.en
    assert "Resubmit the job" in fault.hint.en and "重新提交任务" in fault.hint.zh
    assert [m.gpu for m in marks if m.status is Status.FAIL] == [3]


def test_a_clean_node_passes_with_one_summary_line():
    findings, marks = judge(fake.node())
    assert {f.status for f in findings} == {Status.PASS}
    assert findings[0].id == "health.gpus" and "8 GPU(s) pass (nvml, driver 580.159.04)" in findings[0].message.en
    assert {m.status for m in marks} == {Status.PASS}


MASKS = [
    ("idle", 0x1, None),
    ("power-cap", 0x4 | 0x1, None),
    ("hw-slowdown", 0x8, "a hardware slowdown"),
    ("sw-thermal", 0x20, "software thermal slowdown"),
    ("hw-thermal", 0x40 | 0x4, "hardware thermal slowdown"),
    ("power-brake", 0x80, "the hardware power brake"),
]


@pytest.mark.parametrize("reasons, named", [c[1:] for c in MASKS], ids=[c[0] for c in MASKS])
@pytest.mark.parametrize("mode", [HealthMode.WARN, HealthMode.FAIL])
def test_clock_event_reasons_are_masked_idle_and_power_cap_are_normal(reasons, named, mode):
    findings, _ = judge(one_gpu_fault(5, reasons=reasons), mode)
    throttled = [f for f in findings if f.id == "health.throttle"]
    if named is None:
        assert not throttled and findings[0].id == "health.gpus"
        return
    (finding,) = throttled
    assert named in finding.message.en and fake.serial(5) in finding.message.en
    assert finding.status is (Status.FAIL if mode is HealthMode.FAIL else Status.WARN)


def test_the_memory_the_driver_reserves_is_not_memory_in_use():
    """An idle H200 under driver 580: NVML's v1 query says 615 MiB used, v2 (and nvidia-smi) 0 MiB and 615 reserved."""
    scenario = fake.node()
    assert all(g["reserved_mib"] == 615 and g["used_mib"] == 0 for g in scenario["gpus"])
    findings, _ = judge(scenario)
    assert failing(findings) == []


def test_a_driver_without_the_v2_memory_query_is_read_with_v1():
    """Drivers before the v2 query reserved nothing that v1 counted; memory in use is still seen."""
    scenario = fake.node(missing=["nvmlDeviceGetMemoryInfo_v2"])
    scenario["gpus"] = [fake.gpu(i, reserved_mib=0, used_mib=612 if i == 3 else 0) for i in range(8)]
    findings, _ = judge(scenario)
    assert failing(findings) == ["health.memory-in-use"]
    assert "612 MiB" in next(f for f in findings if f.id == "health.memory-in-use").message.en


def test_fewer_gpus_than_stated_fails_and_lists_the_ones_present():
    findings, _ = judge(fake.node(6))
    assert failing(findings) == ["health.gpu-count"]
    (count,) = [f for f in findings if f.id == "health.gpu-count"]
    assert "has 6 GPU(s) but 8 are stated" in count.message.en and fake.serial(5) in count.message.en


def test_cuda_visible_devices_narrows_the_gpus_judged():
    scenario = one_gpu_fault(7, processes=[[99, 700]])
    findings, _ = judge(scenario, CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6")  # GPU 7 is not ours
    assert failing(findings) == ["health.gpu-count"]  # but 7 of 8 stated is a missing GPU


def test_a_driver_without_the_newer_fields_passes_and_says_what_it_did_not_check():
    scenario = fake.node(
        missing=["nvmlDeviceGetCurrentClocksEventReasons"],  # an older pynvml: the throttle name only
        gpus=[fake.gpu(i, recovery=None, **{"raise": {"nvmlDeviceGetRemappedRows": 3}}) for i in range(8)],
    )
    findings, _ = judge(scenario)
    assert not failing(findings)
    (note,) = [f for f in findings if f.id == "health.unsupported"]
    assert note.status is Status.PASS and "recovery_action, remap" in note.message.en


def xid_findings(tmp_path: Path, lines: list[str]):
    fake.kernel_log(tmp_path, lines, uptime_s=100_000.0)
    return judge(fake.node(), kmsg=tmp_path)[0]


XIDS = [
    ("fatal-79-on-ours", [fake.xid_line(99_000, fake.bus(2), 79)], ["health.xid"]),
    ("fatal-48-dbe", [fake.xid_line(99_990, fake.bus(0), 48)], ["health.xid"]),
    ("not-fatal-13", [fake.xid_line(99_000, fake.bus(2), 13)], []),
    ("older-than-2h", [fake.xid_line(100_000 - 7201, fake.bus(2), 79)], []),
    ("another-gpu", [fake.xid_line(99_000, "00000000:F1:00.0", 79)], []),
    ("nvrm-noise", [fake.kmsg_line(5, "NVRM: GPU at PCI:0000:18:00: FBHUB Interrupt detected. Clearing it.")], []),
    ("garbage", ["\x00\xff garbage without a header\n", "7,notanumber,;x\n"], []),
]


@pytest.mark.parametrize("lines, expected", [c[1:] for c in XIDS], ids=[c[0] for c in XIDS])
def test_fatal_xid_lines_of_our_gpus_in_the_last_two_hours_fail(tmp_path, lines, expected):
    findings = xid_findings(tmp_path, lines)
    assert failing(findings) == expected
    if expected:
        (xid,) = [f for f in findings if f.id == "health.xid"]
        assert "fatal Xid" in xid.message.en and "致命 Xid" in xid.message.zh
    else:
        assert any(f.id == "health.xid" and "no fatal Xid" in f.message.en for f in findings)


def test_an_unreadable_kernel_log_is_said_never_failed():
    findings, _ = judge(fake.node())  # no /dev/kmsg under the root
    (note,) = [f for f in findings if f.id == "health.xid"]
    assert note.status is Status.PASS and "cannot be read here" in note.message.en


@pytest.mark.parametrize(
    "status, expected",
    [(ProbeStatus.TIMED_OUT, Status.FAIL), (ProbeStatus.FAILED, Status.WARN), (ProbeStatus.UNAVAILABLE, Status.WARN)],
    ids=["hung-driver-fails", "probe-crash-warns", "no-nvml-warns"],
)
def test_a_probe_without_facts_is_judged_by_why(status, expected):
    findings, _ = passive_findings(
        NODE, Probe(status, problems=("pynvml: No module named 'pynvml'",)), (), None, HealthMode.WARN, 7.0
    )
    (finding,) = findings
    assert finding.id == "health.probe" and finding.status is expected


VISIBLE = [
    ("unset", {}, [0, 1, 2, 3]),
    ("indices", {"CUDA_VISIBLE_DEVICES": "2,0"}, [2, 0]),
    ("uuid-prefix", {"CUDA_VISIBLE_DEVICES": "GPU-00000001"}, [1]),
    ("stops-at-invalid", {"CUDA_VISIBLE_DEVICES": "1,-1,2"}, [1]),
    ("empty", {"CUDA_VISIBLE_DEVICES": ""}, []),
    ("nvidia-visible-privileged", {"NVIDIA_VISIBLE_DEVICES": "1,3"}, [1, 3]),
    ("nvidia-visible-all", {"NVIDIA_VISIBLE_DEVICES": "all"}, [0, 1, 2, 3]),
    ("nvidia-visible-already-isolated", {"NVIDIA_VISIBLE_DEVICES": "4,5,6,7"}, [0, 1, 2, 3]),
    ("mig-instances", {"CUDA_VISIBLE_DEVICES": "MIG-4f2a1c3e-0000-1111-2222-333344445555"}, [0, 1, 2, 3]),
]


@pytest.mark.parametrize("env, expected", [c[1:] for c in VISIBLE], ids=[c[0] for c in VISIBLE])
def test_the_gpus_given_follow_cuda_then_nvidia_visible_devices(env, expected):
    gpus = [Gpu(i, uuid=fake.gpu(i)["uuid"]) for i in range(4)]
    assert [g.index for g in given_gpus(gpus, env)] == expected
