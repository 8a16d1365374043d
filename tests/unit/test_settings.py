"""Job settings: the precedence chain, YAML validation, the seed's defaults, and the typed key table."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path

import pytest

from entrypoint.core.errors import UserError
from entrypoint.core.settings import (
    KEYS,
    KEYS_BY_NAME,
    Kind,
    OptionalPathName,
    PathName,
    Precision,
    Settings,
    TacoMode,
    load_settings,
)


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
        "train_config: debug_pi05\nweights: none\ndataset_repo_id: null\n"
        "extra_args: [--model.paligemma-variant, gemma_2b]\nenv: {NCCL_DEBUG: WARN, FOO: 1}\n"
    )
    s = load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert s.train_config == "debug_pi05" and s.weights is None and s.dataset_repo_id is None
    assert s.extra_args == ("--model.paligemma-variant", "gemma_2b") and s.env == {"NCCL_DEBUG": "WARN", "FOO": "1"}
    s = load_settings({"VLA_EXTRA_ARGS": "--seed 7 --model.x 'a b'", "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert s.extra_args == ("--seed", "7", "--model.x", "a b")


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
    "text, at, what, fix",
    [
        ("batch_sise: 3\n", ": batch_sise", "unknown key 'batch_sise' in the job file", "Did you mean 'batch_size'?"),
        ("batch_size: [1]\n", ": batch_size", "batch_size=[1] is not valid: expected an integer >= 1", "to an integer"),
        ("wandb: maybe\n", ": wandb", "wandb='maybe' is not valid: expected true or false", "to true or false"),
        ("precision: fp16\n", ": precision", "precision='fp16' is not valid: expected one of", "bfloat16|float32"),
        ("- a\n- b\n", "", "must be a mapping of settings, not a list", "Write one 'key: value' per line"),
        ("batch_size: 3\n  bad: indent\n", " (line 2, column 6)", "is not valid YAML (line 2, column 6)", "syntax"),
        ("env: {1BAD: x}\n", ": env", "env={'1BAD': 'x'} is not valid", "a mapping of VARIABLE: value"),
        ("exp_name: ../escape\n", ": exp_name", "exp_name='../escape' is not valid", "a plain name"),
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
def test_bad_job_files(tmp_path, text, at, what, fix):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    with pytest.raises(UserError) as caught:
        load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    problem = caught.value
    assert problem.exit_code == 2
    assert problem.where == f"{job}{at}"
    assert what in problem.what.en
    assert fix in problem.fix.en
    assert problem.what.zh != problem.what.en and problem.fix.zh != problem.fix.en


def _has_type(value: object, annotation: object) -> bool:
    """Whether a value matches a settings field's annotation (the shapes `Settings` uses)."""
    if isinstance(annotation, types.UnionType):
        return any(_has_type(value, member) for member in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if origin is Mapping:
        return isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    assert isinstance(annotation, type), annotation
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


def test_loaded_values_have_their_fields_types(tmp_path):
    """The loader's conversions agree with the field annotations a type checker reads, for every key."""
    job = tmp_path / "job.yaml"
    job.write_text(
        "num_workers: 4\nstall_timeout: 0\npreflight_min_busbw: 12\ntaco_wheel_sha256: " + "a" * 64 + "\n"
        "taco_features: tf32\nextra_args: [--seed, 7]\nenv: {WANDB_MODE: offline, FLAG: true}\n"
        "precision: float32\ndevice: cpu\nstall_action: warn\ntaco: 'off'\npreflight: fail\nwandb: yes\n"
    )
    base = {"VLA_BAKED_JOB_FILE": str(tmp_path / "x")}
    annotations = typing.get_type_hints(Settings)
    for settings in (load_settings(base), load_settings({**base, "VLA_JOB_FILE": str(job)}), Settings()):
        for key in KEYS:
            value = getattr(settings, key.name)
            assert _has_type(value, annotations[key.name]), (key.name, value, annotations[key.name])
    loaded = load_settings({**base, "VLA_JOB_FILE": str(job)})
    assert loaded.precision is Precision.FLOAT32 and loaded.taco is TacoMode.OFF and loaded.preflight_min_busbw == 12.0


def test_the_key_table_is_the_dataclass():
    """One key per field (besides the provenance fields), kinds and choices read from the annotations."""
    names = [f.name for f in dataclasses.fields(Settings)]
    assert names == [key.name for key in KEYS] + ["sources", "files", "unknown_variables"]
    assert KEYS_BY_NAME["precision"].choices == ("bfloat16", "float32") and KEYS_BY_NAME["precision"].kind == "choice"
    assert KEYS_BY_NAME["num_workers"].nullable and KEYS_BY_NAME["num_workers"].minimum == 0
    assert (KEYS_BY_NAME["extra_args"].kind, KEYS_BY_NAME["env"].kind) == ("args", "env")
    assert (KEYS_BY_NAME["extra_args"].default, KEYS_BY_NAME["env"].default) == ([], {})
    assert repr(KEYS_BY_NAME["taco"].default) == "'auto'"  # the CLI's help shows the default's repr
    paths = {key.name: key.nullable for key in KEYS if key.kind is Kind.PATH}
    assert paths == {
        **dict.fromkeys(typing.get_args(PathName), False),
        **dict.fromkeys(typing.get_args(OptionalPathName), True),
    }


def test_settings_are_frozen_and_json_holds_plain_values(tmp_path):
    s = load_settings({"VLA_BAKED_JOB_FILE": str(tmp_path / "x"), "VLA_EXTRA_ARGS": "--a b"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batch_size = 1  # type: ignore[misc]
    values = s.to_json()["values"]
    assert type(values["precision"]) is str and values["extra_args"] == ["--a", "b"] and values["env"] == {}
    assert json.loads(json.dumps(s.to_json())) == s.to_json()


def test_a_bad_value_is_explained_in_both_languages(tmp_path):
    with pytest.raises(UserError) as caught:
        load_settings({"VLA_BAKED_JOB_FILE": str(tmp_path / "x"), "VLA_BATCH_SIZE": "0"})
    problem = caught.value
    assert problem.where == "VLA_BATCH_SIZE"
    assert (
        problem.fix.en
        == "Set VLA_BATCH_SIZE to an integer >= 1 (GLOBAL batch size; must divide by the total number of processes)."
    )
    assert problem.fix.zh == "请把 VLA_BATCH_SIZE 设为不小于 1 的整数(全局 batch 大小;必须能被进程总数整除)。"
