"""The passive probe as the launcher runs it, a bounded child process: NVML first, nvidia-smi when NVML cannot be
used (also a driver that rejects newer fields), and no facts at all when neither can; a call that never returns is
cut at the bound and named, never a hang; a crash is a warning with its last line, never a traceback."""

from __future__ import annotations

import os
import time

import pytest

from entrypoint.health.facts import ProbeStatus
from entrypoint.health.tiers import run_probe
from tests.support import health as fake

BOUND_S = 3.0


def probe(tmp_path, scenario, smi=None, timeout: float = BOUND_S):
    return run_probe(fake.child_env(tmp_path, scenario, smi), timeout)


def test_nvml_answers_with_every_gpu(tmp_path):
    scenario = fake.node(2)
    scenario["gpus"][1] = fake.gpu(1, processes=[[4242, 1002]], used_mib=1002)
    result = probe(tmp_path, scenario)
    assert result.status is ProbeStatus.OK and result.source == "nvml" and result.driver == "580.159.04"
    assert [g.serial for g in result.gpus] == [fake.serial(0), fake.serial(1)]
    assert [(p.pid, p.used_mib) for p in result.gpus[1].processes or ()] == [(4242, 1002)]
    assert result.seconds is not None and result.seconds < BOUND_S


def test_nvml_failing_to_start_falls_back_to_nvidia_smi(tmp_path):
    scenario = fake.node(2, init="raise:12")
    scenario["gpus"][0] = fake.gpu(0, ecc=3, remap=[0, 1, 1, 0], processes=[[77, 640]], used_mib=640)
    result = probe(tmp_path, scenario, fake.smi_rows(scenario))
    assert result.status is ProbeStatus.OK and result.source == "nvidia-smi"
    assert "NVML: NVML Shared Library Not Found" in result.problems
    first = result.gpus[0]
    assert (first.ecc_uncorrected, first.remap_pending, first.serial, first.bus_id) == (
        3,
        True,
        fake.serial(0),
        fake.bus(0),
    )
    assert [(p.pid, p.used_mib) for p in first.processes or ()] == [(77, 640)]
    assert "recovery_action" in first.unsupported  # nvidia-smi has no such field


def test_an_older_driver_gets_the_older_field_names_and_drops_unknown_ones(tmp_path):
    scenario = fake.node(1)
    smi = fake.smi_rows(scenario)
    smi["gpus"][0]["clocks_throttle_reasons.active"] = "0x0000000000000040"
    smi["unknown"] = ["clocks_event_reasons.active", "remapped_rows.pending", "remapped_rows.failure"]
    result = probe(tmp_path, None, smi)  # no pynvml at all
    (only,) = result.gpus
    assert result.source == "nvidia-smi" and only.clock_reasons == 0x40
    assert only.remap_pending is None and {"remap_pending", "remap_failure"} <= set(only.unsupported)


def test_neither_nvml_nor_nvidia_smi_is_unavailable_not_an_error(tmp_path):
    result = probe(tmp_path, None)
    assert result.status is ProbeStatus.UNAVAILABLE and result.gpus == ()
    assert any(p.startswith(("pynvml", "NVML")) for p in result.problems) and "nvidia-smi: not found" in result.problems


HANGS = [
    ("nvml-init", fake.node(1, init="hang"), None),
    ("nvml-query", fake.node(1, gpus=[fake.gpu(0, hang="nvmlDeviceGetRemappedRows")]), None),
    ("nvidia-smi", None, {"hang": True, "gpus": []}),
]


@pytest.mark.parametrize("scenario, smi", [c[1:] for c in HANGS], ids=[c[0] for c in HANGS])
def test_a_call_that_never_returns_is_cut_at_the_bound(tmp_path, scenario, smi):
    start = time.monotonic()
    result = probe(tmp_path, scenario, smi, timeout=1.5)
    assert result.status is ProbeStatus.TIMED_OUT
    assert time.monotonic() - start < 1.5 + 4.0  # the bound plus the reap wait, never the call's own time
    # the whole process group was killed: no probe (or nvidia-smi under it) is left once the kernel has ended what
    # SIGKILL reached (a grandchild is reaped by init, not by the probe: allow it a moment to go)
    deadline = time.monotonic() + 5
    while (left := ours(str(tmp_path))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left


def ours(marker: str) -> list[str]:
    """Processes whose environment mentions `marker` (the test's own temp folder)."""
    left = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    if marker.encode() in handle.read():
                        left.append(pid)
            except OSError:
                continue
    return left


def test_a_probe_that_crashes_is_a_failed_probe_with_its_last_line(tmp_path):
    scenario = fake.node(1, gpus=[fake.gpu(0, crash="nvmlDeviceGetSerial")])
    result = probe(tmp_path, scenario)
    assert result.status is ProbeStatus.FAILED and "RuntimeError: the driver library misbehaved" in (
        result.detail or ""
    )


def test_a_broken_nvidia_smi_is_reported_as_unavailable(tmp_path):
    result = probe(tmp_path, None, {"exit": 15, "message": "Unable to determine the device handle for GPU0000:18:00.0"})
    assert result.status is ProbeStatus.UNAVAILABLE
    assert any("nvidia-smi exit 15: Unable to determine the device handle" in p for p in result.problems)
