"""Settings that name places: ids below a root must stay below it (never absolute, no `..` segment) and the two
roots must be absolute, whichever layer sets them; each mistake is exit 2 naming the variable or YAML key, with
the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.core.errors import ExitCode, UserError
from entrypoint.core.settings import load_settings


def load(tmp_path: Path, env: dict[str, str], yaml: str | None = None):
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "no-baked.yaml"), "VLA_ASSETS_ROOT": str(tmp_path), **env}
    if yaml is not None:
        job = tmp_path / "job.yaml"
        job.write_text(yaml)
        env["VLA_JOB_FILE"] = str(job)
    return load_settings(env)


@pytest.mark.parametrize(
    "variable, value",
    [
        pytest.param("VLA_DATASET_REPO_ID", "/datasets/libero", id="absolute-dataset-id"),
        pytest.param("VLA_DATASET_REPO_ID", "physical-intelligence/../../etc", id="dataset-id-climbs-out"),
        pytest.param("VLA_DATASET_REPO_ID", "..", id="dataset-id-is-parent"),
        pytest.param("VLA_ASSET_ID", "/physical-intelligence/libero", id="absolute-asset-id"),
        pytest.param("VLA_ASSET_ID", "a/..", id="asset-id-ends-in-parent"),
    ],
)
def test_an_id_outside_its_root_is_refused(tmp_path, variable, value):
    with pytest.raises(UserError) as caught:
        load(tmp_path, {variable: value})
    error = caught.value
    assert (error.exit_code, error.id, error.where) == (ExitCode.JOB_MISSPECIFIED, "settings.invalid", variable)
    assert "expected a relative id such as physical-intelligence/libero" in error.what.en
    assert f"Set {variable} to a relative id" in error.fix.en and "相对 id" in error.what.zh


@pytest.mark.parametrize(
    "value", ["physical-intelligence/libero", "a/..b/c", "libero..v2", "org/name.v1"], ids=["default", "dots", "x", "y"]
)
def test_ids_with_dots_that_stay_below_the_root_are_kept(tmp_path, value):
    assert load(tmp_path, {"VLA_DATASET_REPO_ID": value}).dataset_repo_id == value


def test_an_absolute_id_in_the_job_file_names_the_file_and_key(tmp_path):
    with pytest.raises(UserError) as caught:
        load(tmp_path, {}, yaml="dataset_repo_id: /data/libero\n")
    assert caught.value.where == f"{tmp_path / 'job.yaml'}: dataset_repo_id"
    assert caught.value.exit_code == ExitCode.JOB_MISSPECIFIED


@pytest.mark.parametrize(
    "variable, name, value, default",
    [
        pytest.param("VLA_OPENPI_DIR", "openpi_dir", "workspace/openpi", "/workspace/openpi", id="relative-openpi-dir"),
        pytest.param("VLA_OPENPI_DIR", "openpi_dir", "./openpi", "/workspace/openpi", id="dot-openpi-dir"),
        pytest.param(
            "VLA_ASSETS_ROOT",
            "assets_root",
            "openpi-assets",
            "/home/tione/notebook/embodied-ai/openpi-assets",
            id="relative-assets-root",
        ),
    ],
)
def test_a_relative_root_is_refused_with_the_default_as_example(tmp_path, variable, name, value, default):
    with pytest.raises(UserError) as caught:
        load(tmp_path, {variable: value})
    error = caught.value
    assert (error.exit_code, error.where) == (ExitCode.JOB_MISSPECIFIED, variable)
    assert error.what.en == f"{name}={value!r} must be an absolute path"
    assert error.fix.en == f"Set {variable} to an absolute path such as {default}."


def test_a_relative_openpi_dir_in_the_job_file_names_the_file(tmp_path):
    with pytest.raises(UserError) as caught:
        load(tmp_path, {}, yaml="openpi_dir: openpi\n")
    assert caught.value.where == f"{tmp_path / 'job.yaml'}: openpi_dir"


def test_absolute_roots_are_kept(tmp_path):
    settings = load(tmp_path, {"VLA_OPENPI_DIR": "/opt/openpi"})
    assert (settings.openpi_dir, settings.assets_root) == ("/opt/openpi", str(tmp_path))
