"""Where `datasets` builds its Arrow cache of the LeRobot dataset: this node's folder under the assets root
(`<assets_root>/cache/datasets/node<rank>`, so that a new container of the same node rank reuses it) unless
HF_DATASETS_CACHE is set; and the storage check looks exactly where the training processes will build it.

Every case drops the unit world's own HF_DATASETS_CACHE unless it is about a value the user set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

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
