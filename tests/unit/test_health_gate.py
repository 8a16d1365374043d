"""The node health gate through the real command line: `plan` shows what it will run (and the attempt shim is told
its mode), `check` runs the passive tier, `run` runs both tiers before the first torchrun and fails a faulty node with
exit 3 before torchrun starts, node 0 prints the job's table, the start-up record keeps it; off, the dev machine and
a CPU job skip it, the last in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.health.exchange import GpuRow, NodeReport, write_report
from entrypoint.health.facts import GpuFigures
from tests.support import health as fake
from tests.unit.conftest import World


def gate_env(world: World, tmp_path: Path, scenario: dict, active: dict | None = None, **extra: str) -> dict[str, str]:
    """VLA_HEALTH=warn with the fake NVML (and, for `run`, a stand-in training Python that answers `active`)."""
    child = fake.child_env(tmp_path / "nvml", scenario)
    env = {"VLA_HEALTH": "warn", "PYTHONPATH": child["PYTHONPATH"], "FAKE_NVML": child["FAKE_NVML"], **extra}
    python, answer = fake.active_python(tmp_path / "python", active or fake.figures())
    env["PATH"] = f"{python.parent}:{world.env['PATH']}"
    return env | answer


def record_of(world: World) -> dict:
    (path,) = (world.assets / "logs").glob("*-node0-*[0-9].json")
    return json.loads(path.read_text())


def test_plan_shows_the_gate_and_tells_the_attempt_shim(world, tmp_path):
    result = world.cli("plan", "--json", env={"VLA_HEALTH": "fail"})
    data = json.loads(result.out)
    health = data["health"]
    assert health["mode"] == "fail" and health["runs"] is True and health["start"] == ["passive", "active"]
    assert "before the first torchrun and before every in-job restart" in health["reason"]
    command = data["command"]
    facts = command.index("--facts")
    assert command[facts + 2 : facts + 4] == ["--health", "fail"]
    text = world.cli("plan", env={"VLA_HEALTH": "fail"}).out
    assert "health: node health gate (VLA_HEALTH=fail)" in text


@pytest.mark.parametrize(
    "env, runs, reason",
    [
        ({"VLA_HEALTH": "off"}, False, "node health gate off (VLA_HEALTH=off)"),
        ({"VLA_HEALTH": "warn", "VLA_DEVICE": "cpu"}, False, "no GPU here (VLA_DEVICE=cpu)"),
    ],
    ids=["off", "cpu"],
)
def test_off_and_cpu_run_nothing_and_the_shim_is_not_told(world, env, runs, reason):
    data = json.loads(world.cli("plan", "--json", env=env).out)
    assert data["health"]["runs"] is runs and reason in data["health"]["reason"]
    assert "--health" not in data["command"]


def test_check_runs_the_passive_tier_and_holds_its_table(world, tmp_path):
    result = world.cli("check", "--json", env=gate_env(world, tmp_path, fake.node()))
    data = json.loads(result.out)
    assert result.code == 0 and data["ok"] is True
    assert data["health"]["status"] == "pass" and data["health"]["active"] is None
    assert len(data["health"]["table"]["gpus"]) == 8
    assert any(c["id"] == "health.gpus" and c["status"] == "pass" for c in data["checks"])


def test_check_fails_a_foreign_process_naming_it_in_both_languages(world, tmp_path):
    scenario = fake.node()
    scenario["gpus"][6] = fake.gpu(6, processes=[[31337, 1002]], used_mib=1002)
    result = world.cli("check", env=gate_env(world, tmp_path, scenario))
    assert result.code == 3
    assert "FAIL  health.foreign-process" in result.out and "PID 31337 (1002 MiB)" in result.out
    assert fake.serial(6) in result.out and "GPU 6(总线 " in result.out  # the Chinese line too (LANG=C.UTF-8: both)
    assert "node health, whole job: 1 node(s) reported" in result.out


def test_run_fails_a_faulty_node_before_torchrun_and_records_why(world, tmp_path):
    scenario = fake.node()
    scenario["gpus"][2] = fake.gpu(2, ecc=4)
    started = tmp_path / "torchrun.json"
    env = gate_env(world, tmp_path, scenario, FAKE_TORCHRUN_RECORD=str(started))
    result = world.cli("run", env=env)
    assert result.code == 3 and not started.exists()
    assert "health.ecc" in result.out and "4 uncorrected ECC error(s)" in result.out
    record = record_of(world)
    assert record["outcome"]["class"] == "preflight-failed"
    assert record["health"]["status"] == "fail" and record["health"]["active"] is None  # no GPU time spent
    assert "health" in record["phases_s"]


def test_run_measures_then_trains_and_node_0_prints_the_job_table(world, tmp_path):
    result = world.cli("run", env=gate_env(world, tmp_path, fake.node()))
    assert result.code == 0, result.out
    out = result.out
    assert out.index("health.active") < out.index("node health, whole job") < out.index("start command:")
    assert "780" in out.split("node health, whole job")[1]
    health = record_of(world)["health"]
    assert health["status"] == "pass" and [g["tflops"] for g in health["active"]["gpus"]] == [780.0] * 8
    (report,) = (world.assets / "logs").glob("*.health.json")
    assert json.loads(report.read_text())["gpus"][0]["serial"] == fake.serial(0)


def test_a_slow_gpu_warns_by_default_and_fails_under_fail(world, tmp_path):
    slow = fake.figures(g5={"tflops": 500.0})
    warned = world.cli("run", env=gate_env(world, tmp_path / "w", fake.node(), slow))
    assert warned.code == 0 and "WARN  health.slow-gpu" in warned.out
    failed = world.cli("run", env=gate_env(world, tmp_path / "f", fake.node(), slow, VLA_HEALTH="fail"))
    assert failed.code == 3 and "FAIL  health.slow-gpu" in failed.out and fake.serial(5) in failed.out


def test_two_nodes_compare_with_the_peers_report_and_table_both(world, tmp_path):
    logs = world.assets / "logs"
    logs.mkdir(exist_ok=True)
    rows = tuple(
        GpuRow(
            i,
            fake.bus(i),
            f"PEER{i}",
            "NVIDIA H200",
            {"procs": "pass"},
            GpuFigures(i, tflops=780.0, h2d_gbps=55.0, d2d_gbps=2100.0),
        )
        for i in range(8)
    )
    write_report(
        logs / "pi05_libero_pytorch-node1-20990101-000000.health.json",
        NodeReport(1, "node-b", 4e9, "start", "pass", rows),
    )
    env = gate_env(world, tmp_path, fake.node(), fake.figures(tflops=600.0)) | world.tione(nodes=2, per_node=8, rank=0)
    env["FAKE_TORCHRUN_RECORD"] = str(tmp_path / "torchrun.json")
    result = world.cli("run", env=env)
    assert "node health, whole job: 2 node(s) reported" in result.out and "PEER7" in result.out
    assert result.out.count("WARN  health.slow-gpu") == 8  # 600 is 13% below the job's median, (600 + 780) / 2


def test_the_dev_machine_skips_the_gate_in_one_line(world):
    result = world.cli("check", "--assets", env={"VLA_HEALTH": "warn"})
    assert result.code == 0
    assert "SKIP  health" in result.out and "the node health gate (VLA_HEALTH" in result.out


def test_a_cpu_job_says_so_in_one_line_and_runs(world):
    result = world.cli("run", env={"VLA_HEALTH": "warn", "VLA_DEVICE": "cpu"})
    assert result.code == 0 and result.out.count("node health gate skipped: no GPU here (VLA_DEVICE=cpu)") == 1
    assert record_of(world)["health"]["status"] == "skipped"


def test_a_bad_mode_is_a_misspecified_job(world):
    result = world.cli("check", env={"VLA_HEALTH": "strict"})
    assert result.code == 2 and "VLA_HEALTH" in result.text and "off|warn|fail" in result.text
