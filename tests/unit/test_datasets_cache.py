"""Where `datasets` builds its Arrow cache of the LeRobot dataset: this node's folder under the assets root
(`<assets_root>/cache/datasets/node<rank>`, so that a new container of the same node rank reuses it) unless
HF_DATASETS_CACHE is set; and the storage check looks exactly where the training processes will build it.

Every case drops the unit world's own HF_DATASETS_CACHE unless it is about a value the user set.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.support.files import small_text
from tests.unit.conftest import FAKE_BIN, World

CACHE = "HF_DATASETS_CACHE"


def node_folder(world: World, rank: int) -> Path:
    return world.assets / "cache" / "datasets" / f"node{rank}"


def planned(world: World, env: dict[str, str] | None = None, drop: tuple[str, ...] = (CACHE,)) -> dict:
    result = world.cli("plan", "--json", env=env, drop=drop)
    assert result.code == 0, result.text
    return json.loads(result.out)


def cache_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if "storage.datasets-cache" in line]
    return line


def test_each_node_rank_gets_its_own_folder_under_the_assets_root(world):
    for rank in (0, 1):
        tione = world.tione(nodes=2, per_node=8, rank=rank, VLA_MASTER_WAIT_TIMEOUT="0")
        plan = planned(world, tione)
        assert plan["env"]["set"][CACHE] == str(node_folder(world, rank))
        checked = world.cli("check", env={**tione, "VLA_LANG": "en"}, drop=(CACHE,))
        assert checked.code == 0, checked.text
        line = cache_line(checked.out)
        assert "PASS" in line and str(node_folder(world, rank)) in line and "a new container reuses it" in line
    assert not (world.assets / "cache" / "datasets").exists()  # datasets creates it; inspecting writes nothing


def test_the_trainer_gets_the_node_folder(world, tmp_path):
    saw = tmp_path / "torchrun-saw.json"
    path = os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent), world.env["PATH"]])
    ran = world.cli("run", env={"PATH": path, "FAKE_TORCHRUN_RECORD": str(saw)}, drop=(CACHE,))
    assert ran.code == 0, ran.text
    assert json.loads(small_text(saw))["env"][CACHE] == str(node_folder(world, 0))


def test_a_cache_set_by_the_platform_is_kept_and_checked(world):
    mine = world.root / "hf-datasets"  # the unit world's own value, as a platform would set it
    plan = planned(world, drop=())
    assert plan["env"]["kept"][CACHE] == str(mine) and CACHE not in plan["env"]["set"]
    (world.root / "hf-datasets").write_text("a file where the folder belongs")
    checked = world.cli("check", env={"VLA_LANG": "en"})
    line = cache_line(checked.out)
    assert checked.code == 0 and "WARN" in line and str(mine) in line
    assert "HF_DATASETS_CACHE" in checked.out  # the fix names the variable


def test_the_job_files_cache_is_the_one_checked(world):
    """The job file's `env:` wins over the launcher's folder, and the check looks there, not at the inherited
    environment."""
    blocked = world.root / "blocked"
    blocked.write_text("")
    (world.assets / "code" / "job.yaml").write_text(f"env: {{{CACHE}: {blocked / 'datasets'}}}\n")
    plan = planned(world)
    assert plan["env"]["set"][CACHE] == str(blocked / "datasets")
    checked = world.cli("check", env={"VLA_LANG": "en"}, drop=(CACHE,))
    line = cache_line(checked.out)
    assert checked.code == 0 and "WARN" in line and "not a folder" in line and str(blocked) in line


def test_an_unusable_node_folder_is_a_warning_naming_it(world):
    (world.assets / "cache" / "datasets").write_text("a file where the folder belongs")
    checked = world.cli("check", env={"VLA_LANG": "en"}, drop=(CACHE,))
    line = cache_line(checked.out)
    assert checked.code == 0 and "WARN" in line and str(world.assets / "cache" / "datasets") in line


def test_no_dataset_no_cache(world):
    variables = {"VLA_DATASET_REPO_ID": "none", "VLA_ASSET_ID": "none"}
    plan = planned(world, variables)
    assert CACHE not in plan["env"]["set"]
    checked = world.cli("check", env={**variables, "VLA_LANG": "en"}, drop=(CACHE,))
    assert checked.code == 0 and "storage.datasets-cache" not in checked.out


def test_the_chinese_line_says_the_same(world):
    checked = world.cli("check", env={"VLA_LANG": "zh"}, drop=(CACHE,))
    line = cache_line(checked.out)
    assert str(node_folder(world, 0)) in line and "新容器可直接复用" in line


def test_under_an_unmounted_assets_root_the_mount_is_the_one_cause(world):
    """A TI-ONE job whose assets root is the container's own disk stops on the mount: no line about a cache
    folder below that root, and nothing created there."""
    mountinfo = world.host / "proc" / "self" / "mountinfo"
    mountinfo.parent.mkdir(parents=True, exist_ok=True)
    mountinfo.write_text(
        "1 0 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
        "2 1 0:51 / /proc rw,nosuid - proc proc rw\n"
    )
    tione = world.tione(nodes=2, per_node=8, rank=0)
    ran = world.cli("run", env={**tione, "VLA_LANG": "en"}, drop=(CACHE,))
    assert ran.code == 3 and "storage.assets-mount" in ran.out
    assert "storage.datasets-cache" not in ran.out
    assert not (world.assets / "cache" / "datasets").exists()


# ---- the cache and the checkpoints on one file system: the free space must hold both ----


def space_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if "storage.checkpoint-space" in line]
    return line


@pytest.mark.parametrize(
    "room, status, code",
    [("every-save", "WARN", 0), ("one-save", "FAIL", 3)],
    ids=["room-for-every-save-but-not-the-cache-too-warns", "room-for-one-save-but-not-the-cache-too-fails"],
)
def test_the_checkpoint_space_counts_a_cache_on_the_same_file_system(world, monkeypatch, room, status, code):
    from entrypoint.inspect import storage

    weights = (world.assets / "checkpoints/pi05_base_pytorch/model.safetensors").stat().st_size
    saves = 3 if room == "every-save" else 1  # the seed's run saves at 25, 49 and 50
    monkeypatch.setattr(storage, "free_bytes", lambda path: saves * 3 * weights + 1)  # the checkpoints alone fit
    checked = world.cli("check", env={"VLA_LANG": "en"}, drop=(CACHE,))
    line = space_line(checked.out)
    assert checked.code == code and f"{status}  storage.checkpoint-space" in line, checked.text
    assert f"together with the datasets cache {node_folder(world, 0)} on the same file system" in line
    assert "HF_DATASETS_CACHE to a folder on another file system" in checked.out  # the fix offers moving it


def test_a_cache_already_built_needs_no_more_room(world, monkeypatch):
    from entrypoint.inspect import storage

    weights = (world.assets / "checkpoints/pi05_base_pytorch/model.safetensors").stat().st_size
    built = node_folder(world, 0) / "parquet" / "default-1" / "cache-0001.arrow"
    built.parent.mkdir(parents=True)
    with built.open("wb") as handle:
        handle.truncate(10**12)  # sparse: as large as any dataset
    monkeypatch.setattr(storage, "free_bytes", lambda path: 9 * weights + 1)
    checked = world.cli("check", env={"VLA_LANG": "en"}, drop=(CACHE,))
    line = space_line(checked.out)
    assert checked.code == 0 and "PASS  storage.checkpoint-space" in line and "datasets cache" not in line


def test_every_node_ranks_cache_folder_counts_and_a_cache_elsewhere_does_not(tmp_path, monkeypatch):
    from entrypoint.core.settings import Settings
    from entrypoint.inspect import storage

    folders = [tmp_path / "cache" / f"node{rank}" for rank in range(3)]
    (folders[2]).mkdir(parents=True)
    (folders[2] / "half.arrow").write_bytes(b"x" * 400)  # node rank 2 built half of it in an earlier job
    default = storage.cache_demand({CACHE: str(folders[1])}, 800, folders, node_rank=1)
    assert default == storage.CacheDemand((folders[1], folders[0], folders[2]), 800 + 800 + 400)
    own = storage.cache_demand({CACHE: str(tmp_path / "mine")}, 800, folders, node_rank=1)
    assert own == storage.CacheDemand((tmp_path / "mine",), 800)

    settings = Settings(checkpoint_base_dir=str(tmp_path / "ckpt"), num_train_steps=50, save_interval=25)
    monkeypatch.setattr(storage, "free_bytes", lambda path: 2400)  # one save of 300 bytes and the caches, not two
    same = storage.check_checkpoint_storage(settings, None, 100, cache=default)
    elsewhere = storage.CacheDemand((Path("/proc/vla-no-such-cache"),), 2000)  # /proc: another file system
    apart = storage.check_checkpoint_storage(settings, None, 100, cache=elsewhere)
    assert [(f.id, f.status.value) for f in same if f.id == "storage.checkpoint-space"] == [
        ("storage.checkpoint-space", "warn")
    ]
    assert "all 3 node ranks" in next(f.message.en for f in same if f.id == "storage.checkpoint-space")
    (space,) = [f for f in apart if f.id == "storage.checkpoint-space"]
    assert space.status.value == "pass" and "cache" not in space.message.en


def test_counting_a_cache_folder_is_bounded(tmp_path):
    from entrypoint.inspect.storage import held_bytes

    folder = tmp_path / "cache"
    folder.mkdir()
    for i in range(30):
        (folder / f"shard-{i}.arrow").write_bytes(b"x" * 10)
    assert held_bytes(folder) == 300 and held_bytes(tmp_path / "missing") == 0
    assert held_bytes(folder, limit=10) is None  # too many entries to count: taken as built
    assert held_bytes(folder, deadline=time.monotonic() - 1) is None  # out of time: taken as built too
