"""`check` agrees with openpi's real trainer (docs/validation.md): what the trainer refuses is a FAIL, what it
accepts is not. Each case is one difference the agreement matrix found on the H200 (openpi 15a9616, pi05_libero on
a LeRobot-written LIBERO dataset), run through the real command line in a child process.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.inspect.weights import shipped_signatures
from tests.support.edges import Edge, Outcome, WorldLike, check_edge, run_cli, without_passes
from tests.support.synthetic import ACTION_DIM, STATE_DIM, norm_stats
from tests.unit.conftest import World

NORM_STATS = "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
WEIGHTS = "checkpoints/pi05_base_pytorch"
STAGED_TOKENIZER = "cache/openpi/big_vision/paligemma_tokenizer.model"


def stats_of(state: int, actions: int):
    def setup(world: WorldLike) -> None:
        data = norm_stats(state, actions)
        (world.assets / NORM_STATS).write_text(json.dumps(data))

    return setup


def job_file(text: str):
    def setup(world: WorldLike) -> None:
        (world.assets / "code" / "job.yaml").write_text(text)

    return setup


def no_tokenizer(world: WorldLike) -> None:
    (world.assets / STAGED_TOKENIZER).unlink()


def run(world: World, edge: Edge) -> Outcome:
    return check_edge(world, edge, world.tione(nodes=1, per_node=8, rank=0))


# --- norm stats shorter than the data: the trainer fails at its first batch ("could not be broadcast") ----------


def test_norm_stats_shorter_than_the_data_fail_naming_both_dimensions(world: World) -> None:
    edge = Edge("norm-dim-short", "assets", 3, "norm_stats.json", setup=stats_of(STATE_DIM - 2, ACTION_DIM - 2))
    shown = without_passes(run(world, edge).text)
    assert f"'norm_stats.state' has {STATE_DIM - 2} values, the dataset's 'state' {STATE_DIM}" in shown
    assert f"'norm_stats.actions' has {ACTION_DIM - 2} values, the dataset's 'actions' {ACTION_DIM}" in shown
    assert "compute_norm_stats.py --config-name pi05_libero" in shown


def test_norm_stats_padded_past_the_data_pass(world: World) -> None:
    stats_of(32, 32)(world)
    outcome = run_cli(world, ("check",), world.tione(nodes=1, per_node=8, rank=0), limit_s=60)
    assert outcome.code == 0, outcome.text[-3000:]
    assert "norm stats valid" in outcome.out


def test_one_value_is_broadcast_by_the_trainer_and_warned_about(world: World) -> None:
    """openpi's Normalize slices the stats to the data and numpy broadcasts one value to every dimension: the trainer
    starts, so `check` does not fail, but it warns (the stats were not computed for this data)."""
    edge = Edge("norm-dim-one", "assets", 0, "norm_stats.json", setup=stats_of(1, ACTION_DIM))
    shown = without_passes(run(world, edge).text)
    assert f"'norm_stats.state' has 1 values, the dataset's 'state' {STATE_DIM}" in shown
    assert "broadcasts a single value to every dimension" in shown and "广播到每一维" in shown
    assert "'norm_stats.actions'" not in shown and "compute_norm_stats.py --config-name pi05_libero" in shown


def test_other_configs_are_not_compared(world: World) -> None:
    """Only configs whose data mapping is known (openpi's LIBERO configs) are compared with the dataset."""
    stats_of(2, 2)(world)
    env = {**world.tione(nodes=1, per_node=8, rank=0), "VLA_TRAIN_CONFIG": "pi05_aloha", "VLA_ASSET_ID": "trossen"}
    (world.assets / "assets/pi05_aloha/trossen").mkdir(parents=True)
    (world.assets / "assets/pi05_aloha/trossen/norm_stats.json").write_text(json.dumps(norm_stats(2, 2)))
    outcome = run_cli(world, ("check", "--json"), env, limit_s=60)
    norm = [c for c in json.loads(outcome.out)["checks"] if c["id"] == "assets.norm-stats"]
    assert [c["status"] for c in norm] == ["pass"]


# --- the tokenizer, not staged: the trainer fails in 32 s without gcsfs ("Please install gcsfs") ----------------


@pytest.fixture
def gcsfs_importable(tmp_path: Path) -> dict[str, str]:
    """A child environment whose Python finds a `gcsfs` package (an empty stand-in: only found, never imported)."""
    (tmp_path / "site" / "gcsfs").mkdir(parents=True)
    (tmp_path / "site" / "gcsfs" / "__init__.py").write_text("")
    return {"PYTHONPATH": str(tmp_path / "site")}


@pytest.fixture
def listening() -> Iterator[str]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def closed_port() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused, and no other test takes it
        yield f"127.0.0.1:{probe.getsockname()[1]}"


def test_without_gcsfs_a_missing_tokenizer_fails_naming_where_to_stage_it(world: World) -> None:
    edge = Edge("tokenizer-no-gcsfs", "assets", 3, "gcsfs", setup=no_tokenizer)
    shown = without_passes(run(world, edge).text)
    assert "FAIL  assets.tokenizer-download" in shown
    assert str(world.assets / STAGED_TOKENIZER) in shown


def test_an_unreachable_storage_endpoint_fails(world: World, gcsfs_importable, closed_port) -> None:
    env = {**gcsfs_importable, "STORAGE_EMULATOR_HOST": f"http://{closed_port}"}
    edge = Edge("tokenizer-offline", "assets", 3, f"{closed_port}", env=env, setup=no_tokenizer)
    outcome = run(world, edge)
    assert "is unreachable from this machine" in without_passes(outcome.text)
    assert outcome.seconds < 10


def test_a_reachable_endpoint_with_gcsfs_only_warns(world: World, gcsfs_importable, listening) -> None:
    env = {**gcsfs_importable, "STORAGE_EMULATOR_HOST": listening}
    edge = Edge("tokenizer-downloadable", "assets", 0, "paligemma_tokenizer.model", env=env, setup=no_tokenizer)
    outcome = run(world, edge)
    assert "PASS  assets.tokenizer-download" in outcome.out and f"{listening} accepts connections" in outcome.out


def test_the_dev_machine_only_warns(world: World) -> None:
    """`check --assets` runs on the dev machine, whose Python and network are not the node's: no download verdict."""
    no_tokenizer(world)
    outcome = run_cli(world, ("check", "--assets"), {}, limit_s=60)
    assert outcome.code == 0, outcome.text[-3000:]
    assert "WARN  assets.tokenizer " in outcome.out and "assets.tokenizer-download" not in outcome.out


def test_a_staged_tokenizer_needs_no_download(world: World) -> None:
    outcome = run_cli(world, ("check",), world.tione(nodes=1, per_node=8, rank=0), limit_s=60)
    assert outcome.code == 0 and "assets.tokenizer-download" not in outcome.out


# --- weights: config.json is never read by the trainer; `weights: none` meets pi05_libero's placeholder ---------


@pytest.mark.parametrize(
    "damage",
    [lambda p: p.unlink(), lambda p: p.write_text("[1, 2")],
    ids=["missing", "not-json"],
)
def test_a_weights_config_json_problem_is_only_a_warning(world: World, damage) -> None:
    edge = Edge(
        "weights-no-config", "assets", 0, "config.json", setup=lambda w: damage(w.assets / WEIGHTS / "config.json")
    )
    outcome = run(world, edge)
    assert "reads only model.safetensors" in outcome.text
    assert "PASS  assets.weights-signature" in outcome.out


@pytest.mark.parametrize(
    "job",
    ["weights: none\n", "train_config: debug_pi05\nweights: none\ndataset_repo_id: none\nasset_id: none\n"],
    ids=["pi05-libero", "debug-pi05"],
)
def test_weights_none_starts_from_random_initialisation(world: World, job: str) -> None:
    """openpi's `pytorch_weight_path` is `str | None` and tyro reads `None` as None: `--pytorch-weight-path None`
    loads nothing, and replaces pi05_libero's own placeholder path (which would fail to load)."""
    job_file(job)(world)
    outcome = run_cli(world, ("plan", "--json"), world.tione(nodes=1, per_node=8, rank=0), limit_s=60)
    plan = json.loads(outcome.out)
    assert outcome.code == 0, outcome.text[-3000:]
    command = plan["command"]
    assert command[command.index("--pytorch-weight-path") + 1] == "None"
    (weights,) = [c for c in plan["checks"] if c["id"].startswith("assets.weights")]
    assert weights["status"] == "pass" and "random initialisation" in weights["message"]
    assert "随机初始化" in weights["message_zh"]


# --- the weights of another model fail; the real model's pass (690 BF16 + 122 F32 tensors, as recorded) --------


def test_the_shipped_signature_is_the_recorded_checkpoints() -> None:
    (signature,) = [s for s in shipped_signatures() if s.model.family == "pi05"]
    dtypes = [dtype for dtype, _ in signature.tensors.values()]
    assert (dtypes.count("BF16"), dtypes.count("F32"), len(dtypes)) == (690, 122, 812)


def test_another_models_weights_fail_and_the_real_models_pass(world: World) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    outcome = run_cli(world, ("check",), world.tione(nodes=1, per_node=8, rank=0), limit_s=60)
    assert outcome.code == 0 and "PASS  assets.weights-signature" in outcome.out  # the synthetic tree: the signature's
    model = world.assets / WEIGHTS / "model.safetensors"
    model.unlink()
    save_file({"model.embed_tokens.weight": np.zeros((1024, 256), np.float32)}, str(model))
    edge = Edge("weights-variant", "assets", 3, "model.safetensors")
    assert "FAIL  assets.weights-signature" in run(world, edge).out
