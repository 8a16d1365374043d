"""Asset verification: norm stats, weights (safetensors header and length), the LeRobot dataset, tokenizer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from entrypoint.core.settings import load_settings
from entrypoint.inspect.assets import (
    InvalidAsset,
    check_dataset_folder,
    check_norm_stats,
    check_safetensors,
    check_weights,
    inspect_assets,
)
from tests.support.synthetic import make_dataset, norm_stats, write_safetensors


def settings_for(world, **env):
    return load_settings({**world.env, **env})


def statuses(report):
    return {f.id: f.status.value for f in report.findings}


def test_complete_tree_passes(world):
    report = inspect_assets(settings_for(world), world.env)
    assert set(statuses(report).values()) == {"pass"}
    assert report.dataset_complete and report.tokenizer_home == world.assets / "cache" / "openpi"


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda d: d["norm_stats"].pop("actions"), "'norm_stats.actions' is missing"),
        (lambda d: d["norm_stats"]["state"].pop("q99"), "'norm_stats.state.q99' is missing or empty"),
        (lambda d: d["norm_stats"]["state"]["std"].append(1.0), "'norm_stats.state' lists have different lengths"),
        (lambda d: d["norm_stats"]["state"]["mean"].__setitem__(0, "x"), "'norm_stats.state.mean' holds a non-numeric"),
        (lambda d: d.clear(), "no top-level 'norm_stats' object"),
    ],
    ids=["no-actions", "no-q99", "unequal", "string", "empty-object"],
)
def test_bad_norm_stats(tmp_path, mutate, reason):
    data = norm_stats()
    mutate(data)
    path = tmp_path / "norm_stats.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidAsset) as caught:
        check_norm_stats(path)
    assert str(caught.value).startswith(reason)


def test_norm_stats_with_nan_is_refused(tmp_path):
    path = tmp_path / "norm_stats.json"
    path.write_text(json.dumps(norm_stats()).replace("0.0", "NaN", 1))
    with pytest.raises(InvalidAsset, match="non-finite"):
        check_norm_stats(path)


def test_truncated_weights_are_caught_without_reading_them(tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(path, 14 * 10**9, sparse=True)
    assert check_safetensors(path) > 14 * 10**9
    os.truncate(path, path.stat().st_size - 1)
    with pytest.raises(InvalidAsset, match="truncated"):
        check_safetensors(path)


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"", "too short"),
        (b"\xff" * 8 + b"{}", "header length"),
        ((10).to_bytes(8, "little") + b"not json!!", "not valid JSON"),
        ((2).to_bytes(8, "little") + b"{}", "no tensors"),
    ],
    ids=["empty", "huge-header", "garbage-header", "no-tensors"],
)
def test_corrupt_safetensors(tmp_path, content, reason):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(InvalidAsset, match=reason):
        check_safetensors(path)


def test_missing_episode_files_are_listed(world):
    data = world.assets / "datasets/physical-intelligence/libero/data/chunk-000"
    (data / "episode_000001.parquet").unlink()
    (data / "episode_000002.parquet").write_bytes(b"")
    report = inspect_assets(settings_for(world), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.dataset-files"]
    assert "2 of the 3" in finding.message.en and "episode_000001.parquet" in finding.message.en
    assert not report.dataset_complete


def test_dataset_with_videos_and_chunks(tmp_path, world):
    root = make_dataset(tmp_path / "ds", episodes=5, chunk_size=2, video_keys=("observation.images.top",))
    (root / "videos/chunk-002/observation.images.top/episode_000004.mp4").unlink()
    report = inspect_assets(settings_for(world, VLA_LEROBOT_HOME=str(tmp_path), VLA_DATASET_REPO_ID="ds"), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.dataset-files"]
    assert "1 of the 10" in finding.message.en and "videos/chunk-002" in finding.message.en


def test_tokenizer_missing_is_a_warning_with_the_path(world):
    (world.assets / "cache/openpi/big_vision/paligemma_tokenizer.model").unlink()
    report = inspect_assets(settings_for(world), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.tokenizer"]
    assert finding.status.value == "warn" and "paligemma_tokenizer.model" in finding.hint.en
    assert report.tokenizer_home is None


def test_fake_data_configs_skip_dataset_and_weights(world):
    report = inspect_assets(
        settings_for(
            world, VLA_TRAIN_CONFIG="debug_pi05", VLA_DATASET_REPO_ID="none", VLA_ASSET_ID="none", VLA_WEIGHTS="none"
        ),
        world.env,
    )
    assert [(f.id, f.status.value) for f in report.findings] == [("assets.weights", "pass")]
    assert "random initialisation" in report.findings[0].message.en and report.dataset_bytes == 0


def test_a_bad_file_is_explained_in_both_languages(world):
    model = world.assets / "checkpoints/pi05_base_pytorch/model.safetensors"
    model.write_bytes(b"")
    report = inspect_assets(settings_for(world), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.weights-model"]
    assert finding.message.en == f"{model}: the file is 0 bytes, too short for a safetensors header"
    assert finding.message.zh == f"{model}:文件只有 0 字节,不足以容纳 safetensors 头"
    assert report.weights_bytes is None


def test_a_dataset_folder_is_checked_on_its_own(tmp_path):
    root = make_dataset(tmp_path / "ds", episodes=2)
    findings, complete, size = check_dataset_folder(root)
    assert complete and size > 0 and [f.status.value for f in findings] == ["pass"]
    (root / "meta" / "info.json").unlink()
    findings, complete, size = check_dataset_folder(root)
    assert (complete, size, findings[0].id) == (False, 0, "assets.dataset")
    assert findings[0].message.zh.endswith("info.json:文件不存在")


def test_real_norm_stats_pass_and_a_look_alike_does_not(tmp_path):
    real = Path(__file__).resolve().parents[1] / "support" / "real" / "norm_stats"
    check_norm_stats(real / "pi05-lora-finetune-libero_norm_stats.json")
    with pytest.raises(InvalidAsset, match="no top-level 'norm_stats' object"):
        check_norm_stats(real / "beta-vla_norm_stats.json")


def test_a_weights_path_that_is_a_file_is_not_called_missing(tmp_path):
    (tmp_path / "weights").write_bytes(b"x")
    (finding,), size = check_weights(tmp_path / "weights")
    assert size is None and finding.message.en.endswith("is not a folder")
    (finding,), _ = check_weights(tmp_path / "nowhere")
    assert finding.message.en.endswith("does not exist")


def test_a_broken_tokenizer_where_openpi_looks_fails(world):
    (world.assets / "cache/openpi/big_vision/paligemma_tokenizer.model").unlink()
    home = Path(world.env["HOME"]) / ".cache/openpi/big_vision"
    home.mkdir(parents=True)
    (home / "paligemma_tokenizer.model").write_bytes(b"")
    report = inspect_assets(settings_for(world), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.tokenizer"]
    assert finding.status.value == "fail" and finding.message.en.endswith("the file is empty")
    assert report.tokenizer_home is None


def test_the_synthetic_tree_looks_real_to_the_content_checks(tmp_path):
    root = make_dataset(tmp_path / "ds", episodes=4, video_keys=("observation.images.top",))
    parquet = (root / "data/chunk-000/episode_000000.parquet").read_bytes()
    video = (root / "videos/chunk-000/observation.images.top/episode_000000.mp4").read_bytes()
    assert parquet[:4] == parquet[-4:] == b"PAR1" and int.from_bytes(parquet[-8:-4], "little") + 12 <= len(parquet)
    assert video[4:8] == b"ftyp"
    assert check_dataset_folder(root)[1]
