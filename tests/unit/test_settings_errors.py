"""What a user reads when a setting is wrong, word for word: where (the variable, flag or job file and key), what is
wrong (the value, what was expected) and the fix; and what the loader hands on (the storage probe's arguments, the
record's JSON, the unknown variables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.core.errors import UserError
from entrypoint.core.settings import INT64_MAX, PATH_MAX, TACO_WHEEL_URL, Settings, load_settings, suggest_variable


def _base(tmp_path: Path) -> dict[str, str]:
    return {"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"), "VLA_ASSETS_ROOT": str(tmp_path)}


def _refused(env: dict[str, str], flags: dict[str, object] | None = None) -> UserError:
    with pytest.raises(UserError) as caught:
        load_settings(env, flags)
    problem = caught.value
    assert problem.what.zh and problem.fix.zh and problem.what.zh != problem.what.en
    return problem


def _help(variable: str) -> str:
    """A key's description as the fix quotes it."""
    from entrypoint.core.settings import KEYS

    return next(str(key.description.en) for key in KEYS if key.env == variable)


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("VLA_BATCH_SIZE", str(INT64_MAX + 1), f"an integer from 1 to {INT64_MAX}"),
        ("VLA_PREFLIGHT_MIN_BUSBW", "0", "a positive number"),
        ("VLA_PREFLIGHT_MIN_BUSBW", "-1", "a positive number"),
        ("VLA_PREFLIGHT_MIN_BUSBW", "inf", "a positive number"),
        ("VLA_PREFLIGHT_MIN_BUSBW", "fast", "a positive number"),
        ("VLA_WANDB", "maybe", "true or false (1/0)"),
        ("VLA_LOG_DIR", "/logs/a\0b", "a string without NUL characters"),
        ("VLA_EXTRA_ARGS", "--a 'b", "shell-quoted flags (No closing quotation)"),
        ("VLA_ENV", "A=1", "a YAML mapping (set it in the job file)"),
    ],
)
def test_a_bad_variable_names_itself_its_value_and_what_is_expected(tmp_path, variable, value, expected):
    problem = _refused({**_base(tmp_path), variable: value})
    assert problem.where == variable
    assert problem.what.en == f"{variable}={value!r} is not valid: expected {expected}"
    assert problem.fix.en == f"Set {variable} to {expected} ({_help(variable)})."
    assert variable in problem.what.zh and variable in problem.fix.zh


@pytest.mark.parametrize(
    "line, shown, expected",
    [
        ("extra_args: [true]", "[True]", "a list of strings"),
        ("extra_args: --a b", "'--a b'", "a list of strings"),  # a job file's string is no shell line
        ("env: {A: [1]}", "{'A': [1]}", "a mapping of VARIABLE: value"),
        ("exp_name: ''", "''", "a non-empty string"),
        ("exp_name: true", "True", "a non-empty string"),
        ("preflight_min_busbw: true", "True", "a positive number"),
        ("wandb: [1]", "[1]", "true or false (1/0)"),
    ],
)
def test_a_bad_job_file_value_names_the_file_and_key(tmp_path, line, shown, expected):
    job = tmp_path / "job.yaml"
    job.write_text(line + "\n", encoding="utf-8")
    key = line.split(":")[0]
    problem = _refused({**_base(tmp_path), "VLA_JOB_FILE": str(job)})
    where = f"{job}: {key}"
    assert problem.where == where
    assert problem.what.en == f"{where}={shown} is not valid: expected {expected}"


@pytest.mark.parametrize(
    "text, value",
    [
        ("1", True), ("TRUE", True), ("Yes", True), ("on", True),
        ("0", False), ("False", False), ("NO", False), ("off", False), ("", False),
    ],
)  # fmt: skip
def test_every_yes_and_no_word_in_any_case(tmp_path, text, value):
    assert load_settings({**_base(tmp_path), "VLA_WANDB": text}).wandb is value


def test_a_job_file_reads_yaml_types_and_a_variable_reads_text(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("wandb: 1\npreflight_min_busbw: 2\nextra_args: [--a, 2, 1.5]\nenv: {A: true, B: 3}\n")
    s = load_settings({**_base(tmp_path), "VLA_JOB_FILE": str(job)})
    assert (s.wandb, s.preflight_min_busbw, s.extra_args) == (True, 2.0, ("--a", "2", "1.5"))
    assert dict(s.env) == {"A": "true", "B": "3"}  # a YAML true becomes the text a shell would write
    baked = tmp_path / "baked.yaml"
    baked.write_text("extra_args: [--x, 'two words']\n")
    s = load_settings({**_base(tmp_path), "VLA_BAKED_JOB_FILE": str(baked)}, {"extra_args": ["--y", "a b"]})
    assert s.extra_args == ("--y", "a b")  # flags hand a list on as it is, never split again
    s = load_settings({**_base(tmp_path), "VLA_BAKED_JOB_FILE": str(baked)})
    assert s.extra_args == ("--x", "two words") and s.files == (str(baked),)


@pytest.mark.parametrize(
    "variable, default",
    [
        ("VLA_STALL_TIMEOUT", "none"),
        ("VLA_TACO_WHEEL", repr(TACO_WHEEL_URL)[:120] + f"… ({len(TACO_WHEEL_URL)} characters)"),
    ],
)
def test_an_empty_value_says_what_unsetting_it_gives(tmp_path, variable, default):
    problem = _refused({**_base(tmp_path), variable: " "})
    assert (problem.where, problem.what.en) == (variable, f"{variable} is set but empty")
    assert problem.fix.en == f"Unset {variable} for the default ({default}), or give it a value: {_help(variable)}."


def test_a_long_bad_value_is_quoted_cut_short(tmp_path):
    value = "x" * 200
    problem = _refused({**_base(tmp_path), "VLA_BATCH_SIZE": value})
    assert problem.what.en.startswith(f"VLA_BATCH_SIZE={repr(value)[:80]}… (200 characters) is not valid")
    exactly = "y" * 78  # its repr is 80 characters: shown whole
    assert f"={exactly!r} is not" in _refused({**_base(tmp_path), "VLA_BATCH_SIZE": exactly}).what.en


@pytest.mark.parametrize("flag", [False, True])
def test_a_missing_job_file_names_how_it_was_asked_for(tmp_path, flag):
    missing = tmp_path / "missing.yaml"
    env, flags = (
        (_base(tmp_path), {"job_file": str(missing)})
        if flag
        else ({**_base(tmp_path), "VLA_JOB_FILE": str(missing)}, None)
    )
    where = "--job-file" if flag else "VLA_JOB_FILE"
    problem = _refused(env, flags)
    assert problem.where == where
    assert problem.what.en == f"the job file {missing} does not exist"
    assert problem.fix.en == f"Create {missing}, or unset {where}."


def test_an_unreadable_job_file_names_the_file_and_the_variable(tmp_path):
    job = tmp_path / "job.yaml"
    job.mkdir()
    problem = _refused({**_base(tmp_path), "VLA_JOB_FILE": str(job)})
    assert problem.what.en.startswith(f"cannot read the job file {job}: ")
    assert problem.fix.en == f"Make {job} a readable UTF-8 YAML file, or point VLA_JOB_FILE elsewhere."


@pytest.mark.parametrize(
    "text, what, fix",
    [
        ("- a\n", "the job file {job} must be a mapping of settings, not a list", "Write one 'key: value' per line"),
        ("batch_sise: 3\n", "unknown key 'batch_sise' in the job file {job}", "Did you mean 'batch_size'?"),
        ("zzzz: 3\n", "unknown key 'zzzz' in the job file {job}", "See the README's Settings table for valid keys."),
    ],
)
def test_a_job_file_of_the_wrong_shape_says_what_to_write(tmp_path, text, what, fix):
    job = tmp_path / "job.yaml"
    job.write_text(text, encoding="utf-8")
    problem = _refused({**_base(tmp_path), "VLA_JOB_FILE": str(job)})
    assert problem.what.en == what.format(job=job) and problem.fix.en.startswith(fix)


def test_a_name_too_long_for_the_file_system_is_quoted_cut_short(tmp_path):
    name = "n" * 256
    problem = _refused({**_base(tmp_path), "VLA_EXP_NAME": name})
    assert problem.where == "VLA_EXP_NAME"
    assert problem.what.en == (
        f"VLA_EXP_NAME: the name '{'n' * 40}…' is 256 bytes; a file or folder name may be at most 255 bytes"
    )
    assert problem.fix.en == "Shorten that name in VLA_EXP_NAME."
    assert _refused({**_base(tmp_path), "VLA_LOG_DIR": f"/logs/{name}/x"}).where == "VLA_LOG_DIR"


def test_a_path_too_long_for_the_kernel_is_quoted_cut_short(tmp_path):
    path = "/" + "/".join(["d" * 200] * 21)  # 4221 bytes
    problem = _refused({**_base(tmp_path), "VLA_LOG_DIR": path})
    assert problem.where == "VLA_LOG_DIR"
    assert (
        problem.what.en == f"VLA_LOG_DIR: the path {path[:60]}… is {len(path)} bytes; a path may be at most 4095 bytes"
    )
    assert problem.fix.en == "Choose a shorter path for VLA_LOG_DIR."


def test_a_path_of_exactly_the_kernel_limit_is_accepted(tmp_path):
    root = Path("/r")
    log_dir = "/" + "/".join(["d" * 200] * 20)
    log_dir += "/" + "e" * (PATH_MAX - len(log_dir) - 1)
    assert len(log_dir) == PATH_MAX
    s = load_settings({**_base(tmp_path), "VLA_ASSETS_ROOT": str(root), "VLA_LOG_DIR": log_dir})
    assert s.log_dir == log_dir


def test_an_experiment_folder_too_long_names_the_experiment(tmp_path):
    base = "/" + "/".join(["c" * 250] * 16)
    problem = _refused({**_base(tmp_path), "VLA_CHECKPOINT_BASE_DIR": base, "VLA_EXP_NAME": "e" * 250})
    assert problem.where == "VLA_EXP_NAME" and "a path may be at most 4095 bytes" in problem.what.en


def test_the_storage_probe_gets_the_root_job_file_and_timeout_from_where_they_are_set(tmp_path):
    seen: list[tuple[Path, Path, int]] = []
    probe = lambda root, job, timeout: seen.append((root, job, timeout))  # noqa: E731
    baked = tmp_path / "baked.yaml"
    baked.write_text(f"assets_root: {tmp_path / 'b'}\nstorage_timeout: 7\n")
    env = {"VLA_BAKED_JOB_FILE": str(baked)}
    load_settings(env, before_job_file=probe)
    load_settings({**env, "VLA_ASSETS_ROOT": str(tmp_path / "e"), "VLA_STORAGE_TIMEOUT": "8"}, before_job_file=probe)
    flags = {"assets_root": str(tmp_path / "f"), "storage_timeout": "9"}
    load_settings(
        {**env, "VLA_ASSETS_ROOT": str(tmp_path / "e"), "VLA_STORAGE_TIMEOUT": "8"}, flags, before_job_file=probe
    )
    load_settings({"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml")}, before_job_file=probe)
    assert seen == [
        (tmp_path / "b", tmp_path / "b" / "code" / "job.yaml", 7),
        (tmp_path / "e", tmp_path / "e" / "code" / "job.yaml", 8),
        (tmp_path / "f", tmp_path / "f" / "code" / "job.yaml", 9),
        (
            Path("/home/tione/notebook/embodied-ai/openpi-assets"),
            Path("/home/tione/notebook/embodied-ai/openpi-assets/code/job.yaml"),
            15,
        ),
    ]


@pytest.mark.parametrize(
    "env, flags, where",
    [
        ({"VLA_ASSETS_ROOT": "rel"}, None, "VLA_ASSETS_ROOT"),
        ({"VLA_STORAGE_TIMEOUT": "0"}, None, "VLA_STORAGE_TIMEOUT"),
        ({}, {"assets_root": ""}, "--assets-root"),
        ({}, {"storage_timeout": "x"}, "--storage-timeout"),
    ],
)
def test_a_bad_root_or_timeout_is_refused_before_the_storage_is_probed(tmp_path, env, flags, where):
    probed: list[object] = []
    with pytest.raises(UserError) as caught:
        load_settings(
            {"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"), **env},
            flags,
            before_job_file=lambda *a: probed.append(a),
        )
    assert caught.value.where == where and (probed == [] or where == "VLA_ASSETS_ROOT")


def test_a_bad_baked_job_file_names_the_file(tmp_path):
    baked = tmp_path / "baked.yaml"
    baked.write_text("batch_size: 0\n")
    problem = _refused({**_base(tmp_path), "VLA_BAKED_JOB_FILE": str(baked)})
    assert problem.where == f"{baked}: batch_size"
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    assert _refused({**_base(tmp_path), "VLA_BAKED_JOB_FILE": str(folder)}).where == str(folder)


def test_the_record_of_the_settings_masks_secrets_and_keeps_where_they_came_from(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("env: {HF_TOKEN: hf-secret-1, MODE: fast}\ntaco_wheel: https://u:pw@h/t.whl?sig=abc\n")
    s = load_settings({**_base(tmp_path), "VLA_JOB_FILE": str(job), "VLA_LOG_INTERVAL": "5"})
    record = s.to_json()
    assert record["values"]["env"] == {"HF_TOKEN": "***", "MODE": "fast"}  # type: ignore[index]
    assert record["values"]["taco_wheel"] == "https://h/t.whl?…"  # type: ignore[index]
    assert record["sources"]["env"] == str(job) and record["sources"]["log_interval"] == "environment"  # type: ignore[index]
    assert record["sources"]["batch_size"] == "default" and record["files"] == [str(job)]  # type: ignore[index]
    off = load_settings({**_base(tmp_path), "VLA_TACO_WHEEL": "none"}).to_json()
    assert off["values"]["taco_wheel"] is None  # type: ignore[index]


def test_path_settings_resolve_and_other_keys_are_no_paths(tmp_path):
    s = load_settings({**_base(tmp_path), "VLA_LOG_DIR": "/abs/logs", "VLA_LEROBOT_HOME": "rel/home"})
    assert s.path("log_dir") == Path("/abs/logs") and s.path("lerobot_home") == tmp_path / "rel/home"
    with pytest.raises(ValueError, match="batch_size is not a path setting"):
        s.path("batch_size")  # type: ignore[call-overload]
    assert Settings(sources={}).where("batch_size") == "VLA_BATCH_SIZE"  # never set: the variable to set


def test_unknown_variables_and_the_closest_known_one(tmp_path):
    env = {**_base(tmp_path), "VLA_BATCH_SIZ": "3", "VLA_LANG": "zh", "VLA_MINE": "1", "OTHER": "x", "vla_low": "1"}
    s = load_settings(env, extra_known_variables=("VLA_MINE",))
    assert s.unknown_variables == ("VLA_BATCH_SIZ",)
    assert suggest_variable("VLA_BATCH_SIZ") == "VLA_BATCH_SIZE"
    assert suggest_variable("VLA_JOB_FIL") == "VLA_JOB_FILE"  # ours, though no key
    assert suggest_variable("VLA_MINF", ("VLA_MINE",)) == "VLA_MINE"
    assert suggest_variable("ZZZZ") is None


@pytest.mark.parametrize(
    "text, at, what",
    [
        ("a: \0\n", "", "is not valid YAML: unacceptable character #x0000"),
        (
            "batch_size: *x\n",
            " (line 1, column 13)",
            "is not valid YAML (line 1, column 13): found undefined alias 'x'",
        ),
    ],
)
def test_a_job_file_that_is_no_yaml_names_the_file_and_where_in_it(tmp_path, text, at, what):
    job = tmp_path / "job.yaml"
    job.write_text(text, encoding="utf-8")
    problem = _refused({**_base(tmp_path), "VLA_JOB_FILE": str(job)})
    assert problem.where == f"{job}{at}"
    assert problem.what.en.startswith(f"the job file {job} {what}")
    assert problem.fix.en == "Fix the syntax at that line (check indentation and quotes)."


@pytest.mark.parametrize(
    "where, env, line, shown",
    [
        ("VLA_BATCH_SIZE", {"VLA_BATCH_SIZE": "1" * 30}, "", repr("1" * 30)),  # too many digits to convert
        ("{job}: batch_size", {}, "batch_size: 99999999999999999999", "99999999999999999999"),  # a YAML integer
    ],
)
def test_an_integer_above_what_64_bits_hold_says_the_range(tmp_path, where, env, line, shown):
    job = tmp_path / "job.yaml"
    job.write_text(line + "\n", encoding="utf-8")
    problem = _refused({**_base(tmp_path), "VLA_JOB_FILE": str(job), **env})
    where = where.format(job=job)
    expected = f"an integer from 1 to {INT64_MAX}"
    assert problem.what.en == f"{where}={shown} is not valid: expected {expected}"


def test_a_bus_bandwidth_below_one_is_still_positive(tmp_path):
    assert load_settings({**_base(tmp_path), "VLA_PREFLIGHT_MIN_BUSBW": "0.5"}).preflight_min_busbw == 0.5


def test_the_baked_job_file_is_read_as_yaml_from_its_default_place(tmp_path, monkeypatch):
    from entrypoint.core import settings

    baked = tmp_path / "baked.yaml"
    baked.write_text("extra_args: --a b\n")  # a YAML string, not a shell line
    monkeypatch.setattr(settings, "BAKED_JOB_FILE", str(baked))
    problem = _refused({"VLA_ASSETS_ROOT": str(tmp_path)})
    assert problem.where == f"{baked}: extra_args" and "expected a list of strings" in problem.what.en
    baked.unlink()
    baked.mkdir()
    problem = _refused({"VLA_ASSETS_ROOT": str(tmp_path)})
    assert problem.fix.en == f"Make {baked} a readable UTF-8 YAML file, or point VLA_BAKED_JOB_FILE elsewhere."


def test_an_experiment_folder_too_long_quotes_its_path(tmp_path):
    base = "/" + "/".join(["c" * 250] * 16)
    problem = _refused({**_base(tmp_path), "VLA_CHECKPOINT_BASE_DIR": base, "VLA_EXP_NAME": "e" * 250})
    path = f"{base}/pi05_libero/{'e' * 250}"
    assert (
        problem.what.en == f"VLA_EXP_NAME: the path {path[:60]}… is {len(path)} bytes; a path may be at most 4095 bytes"
    )


def test_a_bad_flag_names_the_flag(tmp_path):
    problem = _refused(_base(tmp_path), {"batch_size": "0"})
    assert problem.where == "--batch-size" and problem.what.en.startswith("--batch-size='0' is not valid")
