"""The active tier: its child read back (measured, skipped, crashed or hung: bounded, never a traceback) and the
relative verdict: each GPU against the node's best GPU and the job's median, with a floor per SKU that only catches
the absurd; outliers warn, and fail under VLA_HEALTH=fail; a GPU whose measurement failed is a hard fault."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

from entrypoint.core.findings import Status
from entrypoint.core.settings import HealthMode
from entrypoint.health.facts import Gpu, GpuFigures, parse_figures
from entrypoint.health.sku import floor_for
from entrypoint.health.tiers import ActiveStatus, run_active
from entrypoint.health.verdict import Figures, Node, active_findings, match_figures
from tests.support import health as fake

NODE = Node(rank=0, host="node-a", stated_gpus=8, nnodes=2)
OURS = [Gpu(i, "NVIDIA H200", fake.gpu(i)["uuid"], fake.serial(i), fake.bus(i)) for i in range(8)]


def own(answer: dict) -> Figures:
    measured = [f for i, g in enumerate(answer["gpus"]) if (f := parse_figures(g, i)) is not None]
    return Figures(0, match_figures(OURS, measured), answer.get("allreduce_gbps"))


def peer(node: int, tflops: float, allreduce: float | None = None) -> Figures:
    return Figures(node, {i: GpuFigures(i, tflops=tflops, h2d_gbps=55.0, d2d_gbps=2100.0) for i in range(8)}, allreduce)


def judge(answer: dict, peers=(), mode=HealthMode.WARN):
    return active_findings(NODE, OURS, own(answer), list(peers), mode, {"seconds": 6.2, "import_s": 4.1})


def outliers(findings) -> list[tuple[str, str]]:
    return [(f.id, f.where or "") for f in findings if f.status is not Status.PASS]


def test_a_healthy_node_passes_with_its_figures_in_one_line():
    findings, marks = judge(fake.figures(), [peer(1, 780.0)])
    (line,) = findings
    assert line.status is Status.PASS
    assert "8 GPU(s) measured in 6.2 s (torch import 4.1 s): bf16 matmul 780 TFLOPS" in line.message.en
    assert "the GPUs of 2 node(s) and the H200 floor" in line.message.en
    assert {m.status for m in marks} == {Status.PASS}


CASES = [
    ("node-best", fake.figures(g3={"tflops": 680.0}), [], ["health.slow-gpu"], "13% below the node's best GPU (780"),
    ("within-10pct", fake.figures(g3={"tflops": 710.0}), [], [], None),
    (
        "job-median",
        fake.figures(tflops=600.0),
        [peer(1, 780.0), peer(2, 780.0)],
        ["health.slow-gpu"] * 8,
        "the job's median",
    ),
    ("floor-single-gpu-co-tenant", fake.figures(1, tflops=270.0), [], ["health.slow-gpu"], "below the H200 floor (440"),
    (
        "h2d-link-trained-down",
        fake.figures(g6={"h2d_gbps": 12.0}),
        [],
        ["health.slow-gpu"],
        "host-to-device bandwidth 12.0 GB/s",
    ),
    ("device-copy", fake.figures(g1={"d2d_gbps": 1500.0}), [], ["health.slow-gpu"], "device copy bandwidth 1500 GB/s"),
]


@pytest.mark.parametrize("answer, peers, expected, named", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("mode", [HealthMode.WARN, HealthMode.FAIL])
def test_outliers_are_relative_to_the_node_and_the_job_with_a_floor(answer, peers, expected, named, mode):
    findings, _ = judge(answer, peers, mode)
    assert [i for i, _ in outliers(findings)] == expected
    status = Status.FAIL if mode is HealthMode.FAIL else Status.WARN
    assert {f.status for f in findings if f.id == "health.slow-gpu"} <= {status}
    if named:
        first = next(f for f in findings if f.id == "health.slow-gpu")
        assert named in first.message.en and "serial" in first.message.en and "序列号" in first.message.zh


def test_a_slow_all_reduce_is_judged_against_the_other_nodes():
    answer = {**fake.figures(), "allreduce_gbps": 200.0}
    findings, _ = judge(answer, [peer(1, 780.0, 420.0), peer(2, 780.0, 430.0)])
    (slow,) = [f for f in findings if f.status is not Status.PASS]
    assert slow.id == "health.slow-node" and "all-reduce bus bandwidth 200 GB/s" in slow.message.en


def test_a_gpu_whose_measurement_failed_is_a_hard_fault_even_in_warn_mode():
    answer = fake.figures(g4={"tflops": None, "error": "RuntimeError: CUDA error: uncorrectable ECC error encountered"})
    findings, _ = judge(answer)
    (fault,) = [f for f in findings if f.status is Status.FAIL]
    assert (
        fault.id == "health.active-error"
        and fake.serial(4) in fault.message.en
        and "uncorrectable ECC" in fault.message.en
    )


def test_figures_are_matched_to_nvml_by_uuid_then_bus_then_position():
    measured = [
        GpuFigures(0, uuid=fake.gpu(5)["uuid"], tflops=1.0),  # CUDA device 0 is NVML GPU 5
        GpuFigures(1, bus_id=fake.bus(7).lower(), tflops=2.0),
        GpuFigures(2, tflops=3.0),  # neither: its position in CUDA_VISIBLE_DEVICES order
    ]
    assert {i: f.tflops for i, f in match_figures(OURS, measured).items()} == {5: 1.0, 7: 2.0, 2: 3.0}


@pytest.mark.parametrize(
    "name, sku",
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H800", "H800"),
        ("NVIDIA H100 PCIe", "H100/H800 PCIe"),
        ("NVIDIA H100 NVL", "H100/H800 PCIe"),
        ("NVIDIA H800 PCIe", "H100/H800 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA L40S", None),
        (None, None),
    ],
)
def test_floors_by_model_name(name, sku):
    floor = floor_for(name)
    assert (floor.sku if floor else None) == sku


def test_the_child_measures_every_gpu(tmp_path):
    python, env = fake.active_python(tmp_path, {**fake.figures(2), "allreduce_gbps": 410.0})
    run = run_active(str(python), env, allreduce=True, timeout=20)
    assert run.status is ActiveStatus.OK and [g.tflops for g in run.gpus] == [780.0, 780.0]
    assert (run.allreduce_gbps, run.import_s, run.seconds) == (410.0, 4.1, 6.2)


SKIPS = [
    (
        "no-torch",
        {"format": 1, "status": "no-torch", "error": "ModuleNotFoundError: No module named 'torch'"},
        "torch cannot be imported",
    ),
    ("no-cuda", {"format": 1, "status": "no-cuda", "import_s": 3.0}, "torch sees no CUDA device"),
]


@pytest.mark.parametrize("answer, why", [c[1:] for c in SKIPS], ids=[c[0] for c in SKIPS])
def test_no_torch_or_no_cuda_skips_the_tier(tmp_path, answer, why):
    python, env = fake.active_python(tmp_path, answer)
    run = run_active(str(python), env, allreduce=False, timeout=20)
    assert run.status is ActiveStatus.SKIPPED and run.why is not None and why in run.why.en


def test_a_crash_and_a_hang_are_named_and_bounded(tmp_path):
    python, env = fake.active_python(tmp_path / "crash", crash=True)
    crashed = run_active(str(python), env, allreduce=False, timeout=20)
    assert crashed.status is ActiveStatus.CRASHED and "CUDA error: an illegal memory access" in (crashed.detail or "")
    python, env = fake.active_python(tmp_path / "hang", hang=True)
    start = time.monotonic()
    hung = run_active(str(python), env, allreduce=False, timeout=1.0)
    assert hung.status is ActiveStatus.TIMED_OUT and time.monotonic() - start < 1.0 + 4.0


def test_no_python_to_measure_with_skips(tmp_path):
    run = run_active(None, {}, allreduce=False, timeout=1)
    assert run.status is ActiveStatus.SKIPPED


FAKE_TORCH = Path(__file__).resolve().parents[1] / "support" / "faketorch"


def worker(tmp_path: Path, allreduce: bool = False, **env: str):
    """`active.py` itself, in a child, over a stand-in torch of `FAKE_TORCH_GPUS` devices."""
    full = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(FAKE_TORCH), **env}
    return run_active(sys.executable, full, allreduce=allreduce, timeout=60)


def test_the_worker_measures_every_gpu_at_once_and_reports_each_by_its_identity(tmp_path):
    run = worker(tmp_path, allreduce=True, FAKE_TORCH_GPUS="3", FAKE_TORCH_SLOW="1")
    assert run.status is ActiveStatus.OK and run.import_s is not None and run.allreduce_gbps is not None
    assert [g.bus_id for g in run.gpus] == ["00000000:18:00.0", "00000000:28:00.0", "00000000:38:00.0"]
    assert run.gpus[0].uuid == fake.gpu(0)["uuid"] and all(g.h2d_gbps and g.d2d_gbps for g in run.gpus)
    tflops = [g.tflops or 0 for g in run.gpus]
    assert tflops[1] < tflops[0] / 2 and tflops[1] < tflops[2] / 2  # the slow device is the slow figure


def test_the_worker_names_a_gpu_whose_work_raised_and_skips_the_all_reduce(tmp_path):
    run = worker(tmp_path, allreduce=True, FAKE_TORCH_GPUS="2", FAKE_TORCH_FAIL="1")
    assert run.status is ActiveStatus.OK and run.allreduce_gbps is None
    assert run.gpus[0].error is None and "uncorrectable ECC" in (run.gpus[1].error or "")


@pytest.mark.parametrize(
    "env, why", [({}, "no-torch"), ({"FAKE_TORCH_GPUS": "0"}, "no-cuda")], ids=["no-torch", "no-cuda"]
)
def test_the_worker_without_torch_or_cuda_says_so(tmp_path, env, why):
    if why == "no-torch":
        if importlib.util.find_spec("torch") is not None:
            pytest.skip("torch is installed for this Python")
        run = run_active(sys.executable, {"PATH": "/usr/bin:/bin"}, allreduce=False, timeout=60)
    else:
        run = worker(tmp_path, **env)
    assert run.status is ActiveStatus.SKIPPED and run.why is not None
