"""The command line end to end over a fake machine: exit codes, messages, JSON, and `run` with a stand-in torchrun."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.files import small_text
from tests.support.synthetic import make_checkpoint


def test_plan_json_for_node_1_of_2x8(world):
    result = world.cli("plan", "--json", env=world.tione(nodes=2, per_node=8, rank=1))
    assert result.code == 0, result.text
    plan = json.loads(result.out)
    assert {
        k: plan["topology"][k]
        for k in ("nnodes", "node_rank", "nproc_per_node", "master_addr", "master_port", "source")
    } == {
        "nnodes": 2,
        "node_rank": 1,
        "nproc_per_node": 8,
        "master_addr": "10.0.0.1",
        "master_port": 23456,
        "source": "tione",
    }
    command = plan["command"]
    assert Path(command[0]).name == "torchrun"
    assert command[1:11] == [
        "--nnodes",
        "2",
        "--nproc_per_node",
        "8",
        "--node_rank",
        "1",
        "--master_addr",
        "10.0.0.1",
        "--master_port",
        "23456",
    ]
    # in-job restarts (by design): torchrun restarts the workers, each starting through the attempt shim
    attempts = plan["launch"]["attempts"]
    assert command[11:13] == ["--rdzv_conf", "timeout=630"]  # 600 s, and 30 s for the launcher to name a lost node
    assert command[13:19] == ["--max_restarts", "3", "-m", "entrypoint.launch.attempt", "--facts", attempts]
    assert command[19:21] == ["scripts/train_pytorch.py", "pi05_libero"]
    for flag, value in (
        ("--exp-name", "pi05_libero_pytorch"),
        ("--batch-size", "256"),
        ("--num-train-steps", "50"),
        ("--log-interval", "10"),
        ("--save-interval", "25"),
        ("--pytorch-training-precision", "bfloat16"),
        ("--pytorch-weight-path", str(world.assets / "checkpoints/pi05_base_pytorch")),
        ("--assets-base-dir", str(world.assets / "assets")),
        ("--checkpoint-base-dir", str(world.assets / "checkpoints")),
    ):
        assert command[command.index(flag) + 1] == value
    assert "--no-wandb-enabled" in command and "--no-overwrite" in command and "--no-resume" in command
    assert "--overwrite" not in command and "--resume" not in command
    assert sorted(plan["env"]["removed"]) == ["RANK", "WORLD_SIZE"]
    assert plan["env"]["set"]["HF_HUB_OFFLINE"] == "1" and "CUDA_VISIBLE_DEVICES" not in plan["env"]["set"]
    # a fake machine without RDMA: a 2-node job runs on sockets, loudly
    assert plan["fabric"]["transport"] == "socket"
    assert {c["id"] for c in plan["checks"] if c["status"] != "pass"} == {"fabric.socket-fallback"}


def test_check_json_has_no_command_and_changes_nothing(world):
    make_checkpoint(world.experiment, 25)
    make_checkpoint(world.experiment, 50, missing="model.safetensors")
    before = world.snapshot()
    result = world.cli("check", "--json", env={"VLA_OVERWRITE": "1"})
    assert result.code == 0, result.text
    assert "command" not in json.loads(result.out)
    assert world.snapshot() == before


def test_resume_flag_is_passed_when_a_complete_step_exists(world):
    make_checkpoint(world.experiment, 25)
    plan = json.loads(world.cli("plan", "--json").out)
    assert plan["resume"]["action"] == "resume" and plan["resume"]["step"] == 25
    assert "--resume" in plan["command"]


def test_user_set_environment_is_kept(world):
    plan = json.loads(world.cli("plan", "--json", env={"OMP_NUM_THREADS": "4", "JAX_PLATFORMS": ""}).out)
    kept = plan["env"]["kept"]
    assert kept.pop("HF_DATASETS_CACHE") == str(world.root / "hf-datasets")  # the world's own choice, kept too
    assert kept == {"OMP_NUM_THREADS": "4", "JAX_PLATFORMS": ""}
    assert "OMP_NUM_THREADS" not in plan["env"]["set"] and "JAX_PLATFORMS" not in plan["env"]["set"]


def test_secret_values_are_masked_in_json(world):
    job = world.assets / "code" / "job.yaml"
    job.write_text("env: {HF_TOKEN: hf_planted_secret_123}\n")
    result = world.cli("plan", "--json")
    assert "hf_planted_secret_123" not in result.out and json.loads(result.out)["env"]["set"]["HF_TOKEN"] == "***"


def test_help_lists_every_variable(world):
    result = world.cli("run", "--help")
    for name in ("VLA_BATCH_SIZE", "VLA_ASSETS_ROOT", "VLA_OVERWRITE", "VLA_TRAIN_CONFIG", "VLA_JOB_FILE"):
        assert name in result.out
    assert result.code == 0


def test_run_end_to_end_with_stand_in_torchrun(world, tmp_path):
    record = tmp_path / "torchrun.json"
    env = world.tione(nodes=2, per_node=8, rank=0) | {
        "FAKE_TORCHRUN_RECORD": str(record),
        "PET_NNODES": "9",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    }
    result = world.cli("run", env=env)
    assert result.code == 0, result.text
    seen = json.loads(small_text(record))
    assert seen["cwd"] == str(world.openpi)
    assert seen["argv"][:10] == [
        "--nnodes",
        "2",
        "--nproc_per_node",
        "8",
        "--node_rank",
        "0",
        "--master_addr",
        "10.0.0.1",
        "--master_port",
        "23456",
    ]
    for name in ("WORLD_SIZE", "RANK", "PET_NNODES"):
        assert name not in seen["env"]
    assert seen["env"]["JAX_PLATFORMS"] == "cpu" and seen["env"]["HF_LEROBOT_HOME"] == str(world.assets / "datasets")
    assert seen["env"]["HF_HUB_OFFLINE"] == "1" and seen["env"]["TRANSFORMERS_OFFLINE"] == "1"
    out = result.out
    assert out.index("health check summary: PASS") < out.index("start command:") < out.index("step=0 loss=1.6075")
    logs = sorted((world.assets / "logs").glob("pi05_libero_pytorch-node0-*.log"))
    assert len(logs) == 1 and "step=10 loss=0.9000" in small_text(logs[0])
    startup = json.loads(small_text(logs[0].with_suffix(".json")))
    assert startup["outcome"] == {"exit_code": 0, "class": "succeeded", "signal": None, "root_cause": None}
    assert startup["progress"]["last_step"] == 10 and startup["progress"]["last_loss"] == 0.9
    assert startup["progress"]["checkpoints_saved"] == [{"step": 25, "path": "/ckpt/25"}]
    assert set(startup["phases_s"]) >= {"plan", "prepare", "training"}
    assert startup["process_age_at_launch_s"] > startup["launch_after_s"] > 0


def test_run_returns_the_training_exit_code_and_root_cause(world):
    result = world.cli("run", env={"FAKE_TORCHRUN_EXIT": "7", "FAKE_TORCHRUN_TRACEBACK": "1"})
    assert result.code == 7
    outcome = json.loads(small_text(next((world.assets / "logs").glob("*.json"))))["outcome"]
    assert outcome["class"] == "training-crashed"
    assert outcome["root_cause"] == "ValueError: batch_size=0 on rank 3"
    assert "root cause: ValueError: batch_size=0 on rank 3" in result.out


def test_failed_preflight_launches_nothing(world, tmp_path):
    (world.assets / "checkpoints/pi05_base_pytorch/model.safetensors").unlink()
    record = tmp_path / "torchrun.json"
    result = world.cli("run", env={"FAKE_TORCHRUN_RECORD": str(record)})
    assert result.code == 3 and not record.exists()
    assert "health check summary: FAIL" in result.out and "model.safetensors" in result.out


def test_overwrite_at_run_moves_old_experiment_aside(world):
    make_checkpoint(world.experiment, 25)
    assert world.cli("run", env={"VLA_OVERWRITE": "1"}).code == 0
    moved = [p for p in world.experiment.parent.iterdir() if p.name.startswith("pi05_libero_pytorch.old-")]
    assert len(moved) == 1 and (moved[0] / "25" / "model.safetensors").exists()


def _start_run(world, tmp_path, extra: dict[str, str]) -> subprocess.Popen:
    env = {**world.env, "FAKE_TORCHRUN_BLOCK": "1", "PYTHONPATH": str(Path(__file__).parents[2]), **extra}
    proc = subprocess.Popen(
        [sys.executable, "-m", "entrypoint", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for line in proc.stdout:  # synchronise on the trainer's own output, not on time
        if "fake-torchrun: waiting" in line:
            return proc
    raise AssertionError("the stand-in torchrun never started")


@pytest.mark.parametrize("ignore_term", ["0", "1"], ids=["exits-on-term", "ignores-term-killed-after-grace"])
def test_sigterm_is_forwarded_and_exit_code_is_143(world, tmp_path, ignore_term):
    proc = _start_run(world, tmp_path, {"FAKE_TORCHRUN_IGNORE_TERM": ignore_term, "VLA_GRACE_PERIOD": "1"})
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 143
    assert "received SIGTERM" in rest
    assert ("grace period over" in rest) == (ignore_term == "1")
    startup = json.loads(small_text(next((world.assets / "logs").glob("*.json"))))
    assert startup["outcome"]["class"] == "killed" and startup["outcome"]["signal"] == signal.SIGTERM


def test_storage_too_small_for_one_checkpoint_fails_before_launch(world, monkeypatch):
    from entrypoint.inspect import storage

    weights = (world.assets / "checkpoints/pi05_base_pytorch/model.safetensors").stat().st_size
    monkeypatch.setattr(storage, "free_bytes", lambda path: 2 * weights)  # a checkpoint is ~3x the weights
    result = world.cli("check")
    assert result.code == 3 and "storage.checkpoint-space" in result.out


def test_storage_short_of_all_saves_warns(world, monkeypatch):
    from entrypoint.inspect import storage

    weights = (world.assets / "checkpoints/pi05_base_pytorch/model.safetensors").stat().st_size
    monkeypatch.setattr(storage, "free_bytes", lambda path: 7 * weights)  # room for 2 of the 3 saves (25, 49, 50)
    result = world.cli("check")
    assert result.code == 0 and "WARN  storage.checkpoint-space" in result.out


def test_preflight_of_one_process_is_skipped_in_the_health_summary_shape(world):
    result = world.cli("preflight", env={"VLA_DEVICE": "cpu"})
    assert result.code == 0, result.text
    assert "health check: bandwidth preflight" in result.out and "PASS  preflight" in result.out


def test_preflight_runs_torchrun_without_the_runs_own_files(world, tmp_path):
    record = tmp_path / "torchrun.json"
    result = world.cli("preflight", "--json", env={"FAKE_TORCHRUN_RECORD": str(record)})
    assert result.code == 3 and json.loads(result.out)["status"] == "error"  # the stand-in writes no result
    seen = json.loads(small_text(record))
    assert seen["argv"][seen["argv"].index("--master_port") + 1] == "29501"  # next to training's port
    worker = seen["argv"].index("entrypoint.launch.preflight_worker")
    assert seen["argv"][worker - 1] == "-m"
    assert "TORCHELASTIC_ERROR_FILE" not in seen["env"]  # planned for training's node files, not the preflight's
    nccl_log = Path(seen["env"]["NCCL_DEBUG_FILE"])
    assert nccl_log.parent.name.startswith("vla-preflight-") and world.assets not in nccl_log.parents


# ---- edges: usage errors, help, output that cannot be written, a torchrun that cannot start ----


README_EXIT_CODE = re.compile(r"^\| (\d+|other) \| ", re.MULTILINE)
HELP_EXIT_CODE = re.compile(r"^  (\d+|other|其他) +\S", re.MULTILINE)


@pytest.mark.parametrize("argv", [("--help",), ("run", "--help"), ("check", "--help")], ids=["top", "run", "check"])
def test_help_lists_every_exit_code_the_readme_lists_in_both_languages(world, argv):
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    documented = README_EXIT_CODE.findall(readme[readme.index("### Exit codes") :])
    result = world.cli(*argv, env={"VLA_LANG": "both"})
    english, chinese = result.out.split("\n退出码:")
    assert HELP_EXIT_CODE.findall(english) == documented and "93" in documented and "124" in documented
    assert HELP_EXIT_CODE.findall(chinese) == [*documented[:-1], "其他"]
    assert "do not requeue" in english and "请勿重新排队" in chinese and "训练卡住" in chinese


ZH_FLAG, EN_FLAG = "每 N 步保存一次检查点", "save a checkpoint every N steps"


@pytest.mark.parametrize(
    "env, shown, hidden",
    [
        ({"VLA_LANG": "en"}, ["exit codes:", EN_FLAG], ["退出码", ZH_FLAG]),
        ({"VLA_LANG": "zh"}, ["退出码:", ZH_FLAG], ["exit codes", EN_FLAG]),
        ({"LANG": "zh_CN.UTF-8"}, ["在 TI-ONE 上启动 openpi 训练", ZH_FLAG], ["Launch openpi training", EN_FLAG]),
        ({"LANG": "en_US.UTF-8"}, ["Launch openpi training", EN_FLAG], ["在 TI-ONE 上启动", ZH_FLAG]),
        ({"LANG": "C.UTF-8"}, ["Launch openpi training", "在 TI-ONE 上启动", EN_FLAG, ZH_FLAG], []),
    ],
    ids=["vla-lang-en", "vla-lang-zh", "lang-zh", "lang-en", "c-locale-both"],
)
def test_help_follows_the_language(world, env, shown, hidden):
    text = world.cli("--help", env=env).out + world.cli("check", "--help", env=env).out
    assert all(s in text for s in shown) and not any(h in text for h in hidden)


def test_preflight_help_lists_only_the_flags_it_uses(world):
    text = world.cli("preflight", "--help").out
    for flag in ("--json", "--job-file", "--device", "--preflight-timeout", "--preflight-min-busbw"):
        assert flag in text
    for flag in ("--batch-size", "--exp-name", "--extra-args", "--taco-wheel", "--weights"):
        assert flag not in text


@pytest.mark.parametrize(
    "argv, where, en, zh",
    [
        (["check", "--precision", "fp8"], "--precision", "'fp8' is not one of 'bfloat16', 'float32'", "不在可选值"),
        (["chekc"], "chekc", "unknown command 'chekc'", "未知命令 'chekc'"),
        (["chek"], "chek", "Did you mean 'check'? Use one of", "是否应为 'check'?请使用以下命令之一"),
        (["fetch-asset"], "fetch-asset", "Did you mean 'fetch-assets'?", "是否应为 'fetch-assets'?"),
        (["plan", "--batch-size"], "--batch-size", "--batch-size needs a value", "--batch-size 缺少取值"),
        (["check", "--batch-sise", "8"], "--batch-sise", "does not know --batch-sise 8", "无法识别 --batch-sise 8"),
        (["check", "--wandb=1"], "--wandb/--no-wandb", "takes no value", "不接受取值"),
        (["fetch-assets", "--segments", "x"], "--segments", "'x' is not a whole number", "'x' 不是整数"),
    ],
    ids=[
        "choice",
        "command",
        "command-did-you-mean",
        "command-did-you-mean-plural",
        "missing-value",
        "unknown-flag",
        "switch-with-value",
        "not-a-number",
    ],
)
def test_usage_errors_come_out_in_both_languages(world, argv, where, en, zh):
    result = world.cli(*argv)
    assert result.code == 2 and result.out == ""
    assert f"error [cli.usage] at {where}\n" in result.err and en in result.err and zh in result.err
    assert "  fix:     " in result.err and "  解决:    " in result.err and "usage:" not in result.err


def test_an_unknown_flag_gets_the_closest_one_and_json_mode_stays_json(world):
    result = world.cli("check", "--json", "--batch-sise", "8")
    error = json.loads(result.out)["error"]
    assert (
        result.code == 2 and error["where"] == "--batch-sise" and error["hint"].startswith("Did you mean --batch-size?")
    )


def _entrypoint(world, *argv: str, stdout) -> subprocess.CompletedProcess:
    env = {**world.env, **world.tione(), "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "entrypoint", *argv], env=env, stdout=stdout, stderr=subprocess.PIPE, timeout=60
    )


def test_a_closed_pipe_ends_quietly_with_141(world):
    """`vla-entrypoint plan --json | head -1` once `head` has gone: no traceback, the SIGPIPE exit code."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written: every write fails
    try:
        done = _entrypoint(world, "plan", "--json", stdout=write_end)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == b""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_stdout_ends_with_74_and_says_so(world):
    with open("/dev/full", "w") as full:
        done = _entrypoint(world, "check", stdout=full)
    text = done.stderr.decode()
    assert done.returncode == 74 and "Traceback" not in text
    assert "cannot write the output (No space left on device)" in text and "无法写出输出" in text


def test_a_torchrun_that_cannot_start_at_run_time_is_reported_not_raised(world, monkeypatch):
    """The check passed (here: made to pass), then exec fails: exit 3, a bilingual line, the outcome recorded."""
    import entrypoint.plan

    folder = world.root / "broken-bin"
    folder.mkdir()
    (folder / "torchrun").write_text("#!/bin/sh\n")
    (folder / "torchrun").chmod(0o644)
    monkeypatch.setattr(entrypoint.plan, "_check_trainer", lambda settings, command, search_path: [])
    monkeypatch.setattr(entrypoint.plan.shutil, "which", lambda name, path=None: str(folder / "torchrun"))
    result = world.cli("run")
    assert result.code == 3 and "Traceback" not in result.text
    assert "torchrun could not be started: Permission denied; nothing ran" in result.out
    assert "无法启动" in result.out and "vla-entrypoint check" in result.out
    record = json.loads(small_text(next((world.assets / "logs").glob("*.json"))))
    assert record["outcome"] == {"exit_code": 3, "class": "preflight-failed"}


def test_the_supervisor_raises_start_failed_and_restores_signals(tmp_path):
    from entrypoint.launch.supervisor import StartFailed, Supervisor, Tee

    before = signal.getsignal(signal.SIGTERM)
    supervisor = Supervisor([str(tmp_path / "missing")], str(tmp_path), {}, Tee(sys.stdout), [], 1)
    with pytest.raises(StartFailed) as caught:
        supervisor.run()
    assert caught.value.error.errno == 2 and signal.getsignal(signal.SIGTERM) is before
