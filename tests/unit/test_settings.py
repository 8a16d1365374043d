"""Job settings: the precedence chain, YAML validation and the seed's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.core.errors import UserError
from entrypoint.core.settings import load_settings


def test_defaults_reproduce_the_seed(tmp_path):
    s = load_settings({"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml")})
    assert (
        s.train_config,
        s.exp_name,
        s.batch_size,
        s.num_train_steps,
        s.log_interval,
        s.save_interval,
        s.precision,
        s.wandb,
    ) == ("pi05_libero", "pi05_libero_pytorch", 256, 50, 10, 25, "bfloat16", False)
    assert s.path("weights") == Path("/home/tione/notebook/embodied-ai/openpi-assets/checkpoints/pi05_base_pytorch")


def test_precedence_defaults_baked_user_env_flags(tmp_path):
    baked = tmp_path / "baked.yaml"
    baked.write_text("batch_size: 128\nnum_train_steps: 10\nlog_interval: 5\nsave_interval: 5\n")
    assets = tmp_path / "assets"
    (assets / "code").mkdir(parents=True)
    (assets / "code" / "job.yaml").write_text("num_train_steps: 20\nlog_interval: 2\nsave_interval: 4\n")
    env = {
        "VLA_BAKED_JOB_FILE": str(baked),
        "VLA_ASSETS_ROOT": str(assets),
        "VLA_LOG_INTERVAL": "3",
        "VLA_SAVE_INTERVAL": "6",
    }
    s = load_settings(env, {"save_interval": "7"})
    assert (s.batch_size, s.num_train_steps, s.log_interval, s.save_interval) == (128, 20, 3, 7)
    assert (
        s.sources["batch_size"],
        s.sources["num_train_steps"],
        s.sources["log_interval"],
        s.sources["save_interval"],
    ) == (str(baked), str(assets / "code" / "job.yaml"), "environment", "command line")


def test_explicit_job_file_and_extra_args(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(
        "train_config: debug_pi05\nweights: none\ndataset_repo_id: null\nextra_args: [--model.paligemma-variant, gemma_2b]\n"
        "env: {NCCL_DEBUG: WARN, FOO: 1}\n"
    )
    s = load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert s.train_config == "debug_pi05" and s.weights is None and s.dataset_repo_id is None
    assert s.extra_args == ["--model.paligemma-variant", "gemma_2b"] and s.env == {"NCCL_DEBUG": "WARN", "FOO": "1"}
    s = load_settings({"VLA_EXTRA_ARGS": "--seed 7 --model.x 'a b'", "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert s.extra_args == ["--seed", "7", "--model.x", "a b"]


def test_relative_paths_resolve_against_the_assets_root(tmp_path):
    s = load_settings(
        {
            "VLA_ASSETS_ROOT": "/cfs/root",
            "VLA_CHECKPOINT_BASE_DIR": "out",
            "VLA_LOG_DIR": "/abs/logs",
            "VLA_BAKED_JOB_FILE": str(tmp_path / "x"),
        }
    )
    assert s.path("checkpoint_base_dir") == Path("/cfs/root/out") and s.path("log_dir") == Path("/abs/logs")
    assert s.experiment_dir == Path("/cfs/root/out/pi05_libero/pi05_libero_pytorch")


@pytest.mark.parametrize(
    "text, culprit, hint",
    [
        ("batch_sise: 3\n", "batch_sise", "batch_size"),
        ("batch_size: [1]\n", "batch_size", "integer"),
        ("wandb: maybe\n", "wandb", "true or false"),
        ("precision: fp16\n", "precision", "bfloat16|float32"),
        ("- a\n- b\n", "job.yaml", "key: value"),
        ("batch_size: 3\n  bad: indent\n", "line 2", "syntax"),
        ("env: {1BAD: x}\n", "env", "VARIABLE: value"),
        ("exp_name: ../escape\n", "exp_name", "plain name"),
    ],
    ids=[
        "unknown-key",
        "list-for-int",
        "bad-bool",
        "bad-choice",
        "not-a-mapping",
        "yaml-syntax",
        "bad-env-name",
        "path-in-name",
    ],
)
def test_bad_job_files(tmp_path, text, culprit, hint):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    with pytest.raises(UserError) as caught:
        load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    problem = caught.value
    assert problem.exit_code == 2
    assert culprit in problem.where + problem.what.en
    assert hint in problem.fix.en + problem.what.en
    assert problem.what.zh and problem.fix.zh
