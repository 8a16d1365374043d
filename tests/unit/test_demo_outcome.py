"""A second `scripts/demo` into the same folder trains nothing (the experiment already reached its last save): the
demo says so, in both languages, with the ways to train again; a run that trained gets no such words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.synthetic import make_checkpoint
from tests.unit.conftest import World

REPO = Path(__file__).parents[2]


def outcome(world: World) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.demo_outcome", str(world.assets)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_finished_experiment_is_said_to_have_trained_nothing(world: World) -> None:
    for step in (25, 49, 50):
        make_checkpoint(world.experiment, step)
    assert world.cli("run").code == 0
    said = outcome(world)
    assert "nothing was trained" in said and "trained to step 50" in said and "没有训练" in said
    assert "VLA_OVERWRITE=1 scripts/demo" in said and "VLA_EXP_NAME=<new name> scripts/demo" in said


def test_a_run_that_trained_says_nothing(world: World) -> None:
    assert world.cli("run").code == 0
    assert outcome(world) == ""


def test_no_record_or_a_broken_one_says_nothing(world: World) -> None:
    assert outcome(world) == ""
    (world.assets / "logs").mkdir(exist_ok=True)
    (world.assets / "logs" / "x-node0-1.json").write_text("{not json")
    assert outcome(world) == ""
    (world.assets / "logs" / "x-node0-2.json").write_text(json.dumps({"outcome": {"class": "succeeded"}}))
    assert outcome(world) == ""
