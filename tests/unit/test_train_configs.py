"""A train config openpi does not define is refused before anything is looked up under its name: the names come
from openpi's own config module, read as source text (never imported), wherever the name was set."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from entrypoint.inspect.train_configs import RELEASED, SOURCE_LIMIT, config_names
from tests.support.synthetic import make_openpi_tree
from tests.unit.conftest import World

STANDIN_OPENPI = Path(__file__).parents[1] / "standin" / "workspace" / "openpi"
TYPO = {"VLA_TRAIN_CONFIG": "pi05_librero"}


def checks(result_out: str) -> dict[str, dict[str, object]]:
    return {c["id"]: c for c in json.loads(result_out)["checks"]}


def test_a_misspelt_config_is_refused_with_the_closest_names(world: World) -> None:
    result = world.cli("check", "--json", env=TYPO)
    found = checks(result.out)
    config = found["settings.train-config"]
    assert result.code == 2 and config["status"] == "fail" and config["where"] == "VLA_TRAIN_CONFIG"
    assert "pi05_librero" in str(config["message"]) and "config.py" in str(config["message"])
    assert "pi05_libero" in str(config["hint"]) and "pi05_libero" in str(config["hint_zh"])
    # nothing is looked up under the wrong name: no "download norm stats to …/pi05_librero/…", no model compared
    assert "assets.norm-stats" not in found and "assets.weights-signature" not in found


def test_the_text_names_the_setting_and_the_fix_in_both_languages(world: World) -> None:
    result = world.cli("check", env={**TYPO, "VLA_LANG": "both"})
    assert result.code == 2
    assert "FAIL  settings.train-config" in result.out
    assert "训练配置 'pi05_librero'(VLA_TRAIN_CONFIG)不在" in result.out and "最接近的名称:pi05_libero" in result.out
    assert "pi05_librero/physical-intelligence" not in result.out


@pytest.mark.parametrize(
    "name", ["pi05_libero", "debug_pi05", "pi05_droid_jointpos_polaris"], ids=["libero", "debug", "imported-module"]
)
def test_a_config_openpi_defines_passes(world: World, name: str) -> None:
    env = {"VLA_TRAIN_CONFIG": name, "VLA_WEIGHTS": "none", "VLA_ASSET_ID": "none", "VLA_DATASET_REPO_ID": "none"}
    result = world.cli("check", "--json", env=env)
    config = checks(result.out)["settings.train-config"]
    assert config["status"] == "pass" and name in str(config["message"])


def test_a_config_of_a_users_own_openpi_passes(world: World) -> None:
    make_openpi_tree(world.openpi, ["pi05_libero", "my_robot_pi05"])
    env = {"VLA_TRAIN_CONFIG": "my_robot_pi05", "VLA_ASSET_ID": "none", "VLA_DATASET_REPO_ID": "none"}
    result = world.cli("check", "--json", env=env)
    assert checks(result.out)["settings.train-config"]["status"] == "pass"
    assert world.cli("check", "--json").code == 0


def test_the_dev_machine_without_openpi_says_the_name_was_not_checked(world: World) -> None:
    env = {"VLA_OPENPI_DIR": str(world.root / "no-openpi")}
    result = world.cli("check", "--assets", "--json", env=env)
    config = checks(result.out)["settings.train-config"]
    assert result.code == 0 and config["status"] == "pass"
    assert "not checked against this machine's openpi" in str(config["message"])
    typo = world.cli("check", "--assets", "--json", env={**env, **TYPO})
    config = checks(typo.out)["settings.train-config"]
    assert config["status"] == "warn" and "could not be checked" in str(config["message"])
    assert "pi05_libero" in str(config["hint"]) and typo.code != 2


def fifo(path: Path) -> None:
    os.mkfifo(path)


def folder(path: Path) -> None:
    path.mkdir()


def written(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text)


@pytest.mark.parametrize(
    "plant, reason",
    [
        (fifo, "FIFO"),
        (folder, "folder"),
        (written("_CONFIGS = [TrainConfig(name='pi05_libero'\n"), "not valid Python"),
        (written("_CONFIGS = []\n"), "no TrainConfig(name=...) entry"),
        (written("# " + "x" * SOURCE_LIMIT + "\n"), "bytes"),
        (written("x = " + "(" * 5000 + ")" * 5000 + "\n"), "Python"),
    ],
    ids=["fifo", "folder", "syntax-error", "no-entries", "over-the-limit", "nested-too-deep"],
)
def test_a_config_module_that_cannot_be_read_never_hangs_or_fails(world: World, plant, reason: str) -> None:
    config_py = world.openpi / "src" / "openpi" / "training" / "config.py"
    config_py.unlink()
    plant(config_py)
    result = world.cli("check", "--json", env={**TYPO})
    config = checks(result.out)["settings.train-config"]
    assert config["status"] == "warn" and reason in str(config["message"]) and "pi05_libero" in str(config["hint"])
    assert world.cli("check", "--json").code == 0


def test_the_real_openpi_layout_is_read_through_its_imports(tmp_path: Path) -> None:
    """config.py's own entries plus those of the `openpi.training.misc` module it imports, nothing else."""
    make_openpi_tree(tmp_path, RELEASED)
    other = tmp_path / "src" / "openpi" / "training" / "data_loader_test.py"
    other.write_text("TrainConfig(name='not_a_config_of_openpi')\n")
    assert config_names(tmp_path) == RELEASED


def test_the_standin_trainer_and_its_config_module_agree() -> None:
    """The stand-in image's openpi: the configs its config.py declares are the ones its trainer accepts."""
    names = config_names(STANDIN_OPENPI)
    assert names == {"pi05_libero", "debug", "debug_pi05"}
    trainer = ast.parse((STANDIN_OPENPI / "scripts" / "train_pytorch.py").read_text())
    table = next(n for n in ast.walk(trainer) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "CONFIGS")
    literals = {n.value for n in ast.walk(table.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert names <= literals


def test_every_config_with_a_known_model_is_a_released_config() -> None:
    from entrypoint.inspect.weights import CONFIG_MODELS

    assert set(CONFIG_MODELS) <= RELEASED
