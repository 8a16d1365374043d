"""The node health gate on a real GPU (the lent H200): the real NVML passes an idle GPU with no false flag in 20
gates in a row, and a co-tenant started on the same GPU (matmuls in a loop, holding memory) is caught by the passive
tier (its PID and memory) and by the active tier (throughput). Run on the GPU machine: `python -m pytest tests/gpu -q`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from entrypoint.core.findings import Status
from entrypoint.core.host import Host
from entrypoint.core.settings import Device, HealthMode
from entrypoint.health.facts import ProbeStatus, given_gpus
from entrypoint.health.gate import Context, run_gate
from entrypoint.health.spec import ACTIVE_TIMEOUT_S, PASSIVE_TIMEOUT_S, gate_spec
from entrypoint.health.tiers import ActiveStatus, run_active, run_probe
from entrypoint.health.verdict import Figures, Node, active_findings, match_figures, passive_findings

GATES = 20
COTENANT = """
import sys, torch
hold = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB held
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("ready", flush=True)
while True:
    for _ in range(50):
        torch.mm(a, a)
    torch.cuda.synchronize()
"""


def gpus_here() -> int:
    probe = run_probe(dict(os.environ), PASSIVE_TIMEOUT_S)
    assert probe.status is ProbeStatus.OK, probe
    return len(given_gpus(probe.gpus, os.environ))


def context(tmp_path: Path, count: int) -> Context:
    spec = gate_spec(HealthMode.FAIL, Device.GPU, 1, count, True)  # fail: any outlier would show as a failure
    node = Node(0, "gpu-test", count, 1)
    return Context(spec, node, Host.current(), dict(os.environ), None, None, "exp", time.time(), sys.executable)


def flags(findings) -> list[str]:
    return [f"{f.id}: {f.message.en}" for f in findings if f.status is not Status.PASS]


def test_an_idle_gpu_passes_twenty_gates_in_a_row_without_a_false_flag(tmp_path):
    count = gpus_here()
    ctx = context(tmp_path, count)
    seen: list[str] = []
    passive_ms, active_s = [], []
    for gate in range(GATES):
        result = run_gate(ctx, active=True, wait_s=0)
        seen += [f"gate {gate}: {flag}" for flag in flags(result.findings)]
        passive_ms.append((result.probe.seconds or 0) * 1000 if result.probe else 0)
        assert result.active is not None and result.active.status is ActiveStatus.OK, result.active
        active_s.append(result.active.seconds or 0)
    print(f"passive {sorted(passive_ms)[GATES // 2]:.0f} ms, active {sorted(active_s)[GATES // 2]:.1f} s (medians)")
    assert not seen, "\n".join(seen)


@pytest.fixture
def cotenant():
    """A process of its own on GPU 0 of this node: 1 GiB held and bf16 matmuls in a loop; stopped by its PID."""
    proc = subprocess.Popen([sys.executable, "-c", COTENANT], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def test_a_cotenant_is_caught_by_both_tiers(tmp_path, cotenant):
    count = gpus_here()
    node = Node(0, "gpu-test", count, 1)
    probe = run_probe(dict(os.environ), PASSIVE_TIMEOUT_S)
    ours = given_gpus(probe.gpus, os.environ)
    findings, _ = passive_findings(node, probe, ours, None, HealthMode.WARN, PASSIVE_TIMEOUT_S)
    foreign = [f for f in findings if f.id in ("health.foreign-process", "health.memory-in-use")]
    assert foreign and foreign[0].status is Status.FAIL, flags(findings)
    listed = json.dumps([p.to_json() for g in ours for p in g.processes or ()])
    assert f"PID {cotenant.pid} (" in foreign[0].message.en, f"NVML lists {listed}; the co-tenant is {cotenant.pid}"
    run = run_active(sys.executable, dict(os.environ), False, ACTIVE_TIMEOUT_S)
    assert run.status is ActiveStatus.OK, run
    figures = Figures(0, match_figures(ours, run.gpus))
    measured, _ = active_findings(node, ours, figures, [], HealthMode.WARN, {})
    slow = [f for f in measured if f.id == "health.slow-gpu" and "bf16 matmul" in f.message.en]
    assert slow, f"not caught by throughput: {[g.tflops for g in run.gpus]}"
    print(slow[0].message.en)


def test_check_on_the_gpu_runs_the_passive_tier(gpu_env):
    env = {**gpu_env, "VLA_HEALTH": "warn"}
    done = subprocess.run(
        [sys.executable, "-m", "entrypoint", "check", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    data = json.loads(done.stdout)
    assert data["health"]["passive"]["source"] in ("nvml", "nvidia-smi"), data["health"]
    assert not [c for c in data["checks"] if c["id"].startswith("health.") and c["status"] == "fail"], data["checks"]
