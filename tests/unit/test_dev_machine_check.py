"""`check --assets` on TI-ONE's dev machine: the CFS mounted, no GPU, no torchrun, no openpi, no TI-ONE variables.

Each test runs the real command line in a child process on such a machine (`dev` below) and asserts what the user
sees: the exit code, the FAIL/SKIP lines and the summary, the JSON, nothing written to the tree, and how long it
took.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.edges import Outcome, run_cli
from tests.support.synthetic import CONFIG, REPO_ID
from tests.unit.conftest import World

# The checks only a node can make, reported as SKIP on the dev machine (TACO on its default, auto).
NODE_ONLY = {
    "topology.gpus",
    "fabric",
    "storage.datasets-cache",
    "taco.wheel",
    "transformers-patch",
    "trainer.script",
    "trainer.torchrun",
}
FAST_S = 10.0  # the dev machine's whole check; a test machine with 2 busy cores does it in well under a second


@pytest.fixture
def dev(world: World, tmp_path: Path) -> World:
    """The dev machine: the seed's good CFS tree, no GPU device, an empty PATH (no torchrun), no openpi checkout,
    none of TI-ONE's variables, TACO on its default."""
    world.gpus(0)
    shutil.rmtree(world.openpi)
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    world.env["PATH"] = str(empty_bin)
    del world.env["VLA_TACO"]
    return world


def cli(world: World, *argv: str, **env: str) -> Outcome:
    return run_cli(world, argv, env, limit_s=60)


def lines(outcome: Outcome, label: str) -> dict[str, str]:
    """The summary's `label` lines (PASS, FAIL, SKIP, WARN) by check id."""
    found = {}
    for line in outcome.out.splitlines():
        if line.startswith(f"  {label}  "):
            check_id, _, text = line[8:].partition(" ")
            found[check_id] = text.strip()
    return found


def checks(outcome: Outcome) -> dict[str, str]:
    """Check id -> status from `--json`."""
    return {c["id"]: c["status"] for c in json.loads(outcome.out)["checks"]}


def test_a_good_tree_passes_on_the_dev_machine_and_node_checks_are_skipped(dev: World) -> None:
    before = dev.snapshot()
    result = cli(dev, "check", "--assets")
    assert result.code == 0, result.text
    assert result.seconds < FAST_S
    assert set(lines(result, "SKIP")) == NODE_ONLY
    assert not lines(result, "FAIL") and not lines(result, "WARN"), result.out
    assert {"assets.norm-stats", "assets.weights", "assets.dataset", "assets.tokenizer", "batch"} <= set(
        lines(result, "PASS")
    )
    assert "checked by each node when the job starts, not here" in lines(result, "SKIP")["trainer.torchrun"]
    assert "for a job of 1 node(s) x 8 GPU(s)" in result.out.splitlines()[0]
    assert result.out.rstrip().endswith(f"0 warn, 0 fail, {len(NODE_ONLY)} skip) ==")
    assert "health check summary: PASS" in result.out
    assert dev.snapshot() == before


def test_without_the_flag_check_still_stops_at_no_gpu_and_names_the_flag(dev: World) -> None:
    result = cli(dev, "check")
    assert result.code == 3, result.text
    assert "[topology.no-gpu]" in result.err
    fix_en, fix_zh = (line for line in result.err.splitlines() if line.lstrip().startswith(("fix:", "解决:")))
    assert "vla-entrypoint check --assets" in fix_en and "vla-entrypoint check --assets" in fix_zh
    assert "health check summary" not in result.out


def test_json_has_the_stated_shape_and_skip_statuses(dev: World) -> None:
    result = cli(dev, "check", "--assets", "--nodes", "2", "--json")
    assert result.code == 0, result.text
    data = json.loads(result.out)
    assert set(data) == {"ok", "exit_code", "scope", "topology", "checks", "resume", "settings"}
    assert (data["ok"], data["exit_code"], data["scope"]) == (True, 0, "assets")
    assert data["topology"] == {"nnodes": 2, "nproc_per_node": 8, "world_size": 16, "source": "flags"}
    statuses = checks(result)
    assert {i for i, s in statuses.items() if s == "skip"} == NODE_ONLY
    assert {s for i, s in statuses.items() if i not in NODE_ONLY} == {"pass"}
    skip = next(c for c in data["checks"] if c["id"] == "fabric")
    assert skip["message"] and skip["message_zh"] and skip["hint"] is None


def test_missing_norm_stats_fail_with_3_and_name_the_file(dev: World) -> None:
    stats = dev.assets / "assets" / CONFIG / REPO_ID / "norm_stats.json"
    stats.unlink()
    result = cli(dev, "check", "--assets")
    assert result.code == 3, result.text
    assert set(lines(result, "FAIL")) == {"assets.norm-stats"}
    assert str(stats) in result.out and "health check summary: FAIL" in result.out
    assert set(lines(result, "SKIP")) == NODE_ONLY  # a node check is never what failed
    assert result.seconds < FAST_S


def test_the_batch_is_checked_for_the_stated_nodes(dev: World) -> None:
    result = cli(dev, "check", "--assets", "--nodes", "3")
    assert result.code == 2, result.text
    assert "does not divide by 24 processes (3 node(s) x 8)" in lines(result, "FAIL")["batch"]
    assert "Set VLA_BATCH_SIZE to a multiple of 24: 240 or 264." in result.out
    assert cli(dev, "check", "--assets", "--nodes", "2", "--gpus-per-node", "4").code == 0


def test_a_broken_tree_with_a_bad_batch_exits_2_and_shows_both(dev: World) -> None:
    (dev.assets / "assets" / CONFIG / REPO_ID / "norm_stats.json").unlink()
    result = cli(dev, "check", "--assets", "--json", "--nodes", "3")
    assert result.code == 2, result.text
    statuses = checks(result)
    assert statuses["batch"] == statuses["assets.norm-stats"] == "fail"
    assert json.loads(result.out)["exit_code"] == 2


def test_shape_defaults_to_tione_variables_when_they_are_set(dev: World) -> None:
    tione = dev.tione(nodes=2, per_node=8, rank=1)
    result = cli(dev, "check", "--assets", "--json", **tione)
    assert result.code == 0, result.text  # no GPU here, and that is not a failure
    assert json.loads(result.out)["topology"] == {"nnodes": 2, "nproc_per_node": 8, "world_size": 16, "source": "tione"}
    overridden = cli(dev, "check", "--assets", "--json", "--gpus-per-node", "3", **tione)
    assert overridden.code == 2 and checks(overridden)["batch"] == "fail"
    bad = cli(dev, "check", "--assets", **{**tione, "WORLD_SIZE": "two"})
    assert bad.code == 2 and "WORLD_SIZE" in bad.err


def test_cpu_device_states_one_process_per_node(dev: World) -> None:
    result = cli(dev, "check", "--assets", "--json", VLA_DEVICE="cpu", VLA_BATCH_SIZE="3")
    assert result.code == 0, result.text
    assert json.loads(result.out)["topology"]["world_size"] == 1


@pytest.mark.parametrize(
    "argv, culprit",
    [
        (("check", "--assets", "--nodes", "0"), "--nodes"),
        (("check", "--assets", "--gpus-per-node", "-8"), "--gpus-per-node"),
        (("check", "--assets", "--nodes", "9" * 30), "--nodes"),
        (("check", "--assets", "--nodes", "9" * 5000), "--nodes"),
        (("check", "--assets", "--nodes", "two"), "--nodes"),
        (("check", "--nodes", "2"), "--nodes"),
        (("check", "--gpus-per-node", "8"), "--gpus-per-node"),
        (("plan", "--assets"), "--assets"),
    ],
    ids=["zero", "negative", "huge", "past-int-limit", "word", "nodes-without-assets", "gpus-without-assets", "plan"],
)
def test_shape_flags_are_refused_clearly(dev: World, argv: tuple[str, ...], culprit: str) -> None:
    result = cli(dev, *argv)
    assert result.code == 2, result.text
    assert culprit in result.err and "Traceback" not in result.text
    assert "fix:" in result.err and "解决:" in result.err
    assert result.seconds < FAST_S


def test_the_job_file_is_reported_and_a_bad_one_exits_2(dev: World) -> None:
    job = dev.assets / "code" / "job.yaml"
    job.write_text("batch_size: 128\nnum_train_steps: 100\n")
    result = cli(dev, "check", "--assets")
    assert result.code == 0, result.text
    assert lines(result, "PASS")["settings.job-file"].endswith(f"{job} (batch_size, num_train_steps taken from it)")
    job.write_text("batch_sise: 128\n")
    bad = cli(dev, "check", "--assets")
    assert bad.code == 2 and str(job) in bad.err and "batch_size" in bad.err


def test_without_a_job_file_says_where_it_looked(dev: World) -> None:
    result = cli(dev, "check", "--assets")
    expected = f"no job file at {dev.assets / 'code' / 'job.yaml'}"
    assert lines(result, "PASS")["settings.job-file"].startswith(expected)


def test_an_openpi_checkout_on_the_cfs_is_checked_not_skipped(dev: World) -> None:
    openpi = dev.assets / "openpi"
    result = cli(dev, "check", "--assets", VLA_OPENPI_DIR=str(openpi))
    assert result.code == 3, result.text
    assert "trainer.script" in lines(result, "FAIL") and "trainer.script" not in lines(result, "SKIP")


def test_a_malformed_node_setting_is_still_exit_2(dev: World) -> None:
    result = cli(dev, "check", "--assets", VLA_TACO="on", VLA_TACO_WHEEL_SHA256="not-a-digest")
    assert result.code == 2, result.text
    assert "taco.wheel" in lines(result, "FAIL") and "VLA_TACO_WHEEL_SHA256" in result.out


def test_help_describes_the_flags(dev: World) -> None:
    result = cli(dev, "check", "--help")
    assert result.code == 0
    text = " ".join(result.out.split())
    for phrase in ("--assets", "the dev machine", "SKIP", "--nodes N", "--gpus-per-node G", "Exit 0 on a good tree"):
        assert phrase in text, phrase
