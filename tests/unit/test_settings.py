"""Job settings: the precedence chain, YAML validation, the seed's defaults, and the typed key table."""

from __future__ import annotations

import dataclasses
import json
import os
import time
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


# ---- edges: empty values, numbers, names, where, job files that are not files, strict YAML ----


@pytest.mark.parametrize(
    "variable", ["VLA_WEIGHTS", "VLA_DATASET_REPO_ID", "VLA_ASSET_ID", "VLA_TACO_WHEEL_SHA256", "VLA_NUM_WORKERS"]
)
def test_an_empty_value_is_an_error_and_only_none_unsets(tmp_path, variable):
    base = {"VLA_BAKED_JOB_FILE": str(tmp_path / "x")}
    for empty in ("", "  "):
        with pytest.raises(UserError) as caught:
            load_settings({**base, variable: empty})
        assert caught.value.exit_code == 2 and caught.value.where == variable
        assert caught.value.what.en == f"{variable} is set but empty" and "none" in caught.value.fix.en.lower()
        assert caught.value.what.zh == f"{variable} 已设置,但值为空"
    name = variable.removeprefix("VLA_").lower()
    assert getattr(load_settings({**base, variable: "none"}), name) is None
    job = tmp_path / "job.yaml"
    job.write_text(f"{name}: null\n")
    assert getattr(load_settings({**base, "VLA_JOB_FILE": str(job)}), name) is None
    job.write_text(f"{name}: ''\n")
    with pytest.raises(UserError, match="is set but empty"):
        load_settings({**base, "VLA_JOB_FILE": str(job)})


def test_integers_are_bounded_without_converting_huge_text(tmp_path):
    base = {"VLA_BAKED_JOB_FILE": str(tmp_path / "x")}
    assert load_settings({**base, "VLA_NUM_TRAIN_STEPS": str(2**63 - 1)}).num_train_steps == 2**63 - 1
    assert load_settings({**base, "VLA_BATCH_SIZE": " 0064 "}).batch_size == 64
    for text in (str(2**63), "9" * 5000, "9" * 100_000):
        with pytest.raises(UserError) as caught:
            load_settings({**base, "VLA_NUM_TRAIN_STEPS": text})
        assert "an integer from 1 to 9223372036854775807" in caught.value.what.en
        assert len(caught.value.what.en) < 300  # the value is quoted cut short
    for text in ("²⁵⁶", "١٠", "1_000", "+5", "0x10"):
        with pytest.raises(UserError, match="expected an integer >= 1"):
            load_settings({**base, "VLA_BATCH_SIZE": text})


@pytest.mark.parametrize(
    "variable, value, accepted",
    [
        ("VLA_EXP_NAME", "e" * 255, True),
        ("VLA_EXP_NAME", "e" * 256, False),
        ("VLA_LOG_DIR", "日" * 85, True),  # 255 bytes
        ("VLA_LOG_DIR", "日" * 86, False),  # 258 bytes: the limit is in bytes, not characters
        ("VLA_TRAIN_CONFIG", "c" * 256, False),
        ("VLA_WEIGHTS", "w/" + "w" * 256, False),
        ("VLA_ASSETS_ROOT", "/" + "a" * 256, False),
        ("VLA_DATASET_REPO_ID", "org/" + "d" * 256, False),
        ("VLA_TACO_WHEEL", "/w/" + "t" * 256 + ".whl", False),
        ("VLA_TACO_WHEEL", "https://example.com/" + "t" * 300 + ".whl", True),  # a URL is not a file name
        ("VLA_CHECKPOINT_BASE_DIR", "/".join(["c" * 250] * 17), False),  # 4266 bytes in all
    ],
)
def test_names_and_paths_fit_the_file_system(tmp_path, variable, value, accepted):
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "x"), variable: value}
    if accepted:
        load_settings(env)
        return
    with pytest.raises(UserError) as caught:
        load_settings(env)
    assert caught.value.exit_code == 2 and caught.value.where == variable
    assert caught.value.id in ("settings.name-too-long", "settings.path-too-long")
    assert ("255 bytes" in caught.value.what.en) or ("4095 bytes" in caught.value.what.en)


def test_where_names_how_a_key_was_set(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("batch_size: 64\n")
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "x"), "VLA_JOB_FILE": str(job), "VLA_LOG_INTERVAL": "5"}
    s = load_settings(env, {"save_interval": "5"})
    assert (s.where("batch_size"), s.where("log_interval"), s.where("save_interval"), s.where("exp_name")) == (
        f"{job}: batch_size",
        "VLA_LOG_INTERVAL",
        "--save-interval",
        "VLA_EXP_NAME",
    )


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling", "loop", "too-big", "not-utf8"])
def test_a_job_file_that_cannot_be_read_is_reported_never_skipped(tmp_path, kind):
    root = tmp_path / "assets"
    target = root / "code" / "job.yaml"
    target.parent.mkdir(parents=True)
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)  # opening it for reading would block: it must not be opened
    elif kind == "dangling":
        target.symlink_to(tmp_path / "gone.yaml")
    elif kind == "loop":
        target.symlink_to(target)
    elif kind == "too-big":
        target.write_text("#" * (300 << 10))
    else:
        target.write_bytes(b"batch_size: \xff\xfe\n")
    with pytest.raises(UserError) as caught:
        load_settings({"VLA_BAKED_JOB_FILE": str(tmp_path / "x"), "VLA_ASSETS_ROOT": str(root)})
    assert caught.value.exit_code == 2 and caught.value.where == str(target)
    assert caught.value.what.en.startswith(f"cannot read the job file {target}: ")
    assert "VLA_JOB_FILE" in caught.value.fix.en


def test_a_missing_job_file_is_fine_unless_it_was_asked_for(tmp_path):
    base = {"VLA_BAKED_JOB_FILE": str(tmp_path / "x"), "VLA_ASSETS_ROOT": str(tmp_path)}
    assert load_settings(base).files == ()
    with pytest.raises(UserError, match="does not exist"):
        load_settings({**base, "VLA_JOB_FILE": str(tmp_path / "nowhere.yaml")})
    with pytest.raises(UserError) as caught:
        load_settings(base, {"job_file": str(tmp_path)})
    assert caught.value.where == "--job-file" and "it is a folder" in caught.value.what.en


@pytest.mark.parametrize(
    "text, problem, line",
    [
        ("batch_size: 64\nwandb: true\nbatch_size: 128\n", "the key 'batch_size' is given twice (lines 1 and 3)", 3),
        ("env:\n  A: 1\n  A: 2\n", "the key 'A' is given twice (lines 2 and 3)", 3),
        ("env: " + "[" * 100 + "]" * 100 + "\n", "nested more than 32 levels deep", 1),
        ("extra_args: &a [--seed, *a]\n", "the alias *a refers to the value it is part of", 1),
        ("batch_size: " + "9" * 65 + "\n", "an integer of 65 characters (at most 64)", 1),
        ("batch_size: !!python/object:os.system 1\n", "the tag !!python/object:os.system is not supported", 1),
        ("exp_name: !!binary aGVsbG8=\n", "the tag !!binary is not supported", 1),
        ("extra_args: !!set {a, b}\n", "the tag !!set is not supported", 1),
        ("env: {X: !vault x}\n", "the tag !vault is not supported", 1),
    ],
    ids=["duplicate-key", "duplicate-nested-key", "deep", "recursive-alias", "long-int", "python-tag", "binary",
         "set", "custom-tag"],
)  # fmt: skip
def test_job_yaml_is_strict(tmp_path, text, problem, line):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    with pytest.raises(UserError) as caught:
        load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert problem in caught.value.what.en and f"(line {line}," in caught.value.where
    assert caught.value.what.zh != caught.value.what.en


def test_an_alias_bomb_stops_early(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    job = tmp_path / "job.yaml"
    job.write_text(bomb)
    started = time.monotonic()
    with pytest.raises(UserError, match="more than 10000 values in all"):
        load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert time.monotonic() - started < 5


def test_plain_yaml_still_reads_as_before(tmp_path):
    """Dates stay strings (an experiment named by its day), merge keys still override, aliases still work."""
    job = tmp_path / "job.yaml"
    job.write_text(
        "exp_name: 2024-06-01\nextra_args: [--seed, '1']\nenv:\n  <<: {NCCL_DEBUG: INFO, A: '1'}\n  A: '2'\n"
    )
    s = load_settings({"VLA_JOB_FILE": str(job), "VLA_BAKED_JOB_FILE": str(tmp_path / "x")})
    assert s.exp_name == "2024-06-01" and s.extra_args == ("--seed", "1") and s.env == {"NCCL_DEBUG": "INFO", "A": "2"}
