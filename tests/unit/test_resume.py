"""Resume decided once: the newest complete step, never a leftover; overwrite moves aside, never deletes."""

from __future__ import annotations

import pytest

from entrypoint.core.settings import load_settings
from entrypoint.inspect.openpi import save_steps
from entrypoint.inspect.resume import ResumeAction, decide_resume, set_aside
from tests.support.synthetic import make_checkpoint


def decide(world, **env):
    return decide_resume(load_settings({**world.env, **env}))


@pytest.mark.parametrize(
    "layout, action, step",
    [
        ([], "fresh", None),
        ([(25, True, None)], "resume", 25),
        ([(25, True, None), (49, True, None)], "resume", 49),
        ([(25, True, None), (49, False, None)], "resume", 25),  # tmp_49 leftover
        ([(25, True, None), (49, True, "model.safetensors")], "resume", 25),
        ([(25, True, None), (49, True, "optimizer.pt")], "resume", 25),
        ([(25, True, "metadata.pt")], "fresh", None),
        ([(3, False, None)], "fresh", None),
    ],
    ids=["empty", "one", "newest", "tmp-leftover", "no-model", "no-optimizer", "only-incomplete", "only-tmp"],
)
def test_resume_decisions(world, layout, action, step):
    world.experiment.mkdir(parents=True)
    for s, complete, missing in layout:
        make_checkpoint(world.experiment, s, complete, missing)
    decision = decide(world)
    assert (decision.action, decision.step) == (action, step)


def test_truncated_model_is_not_resumed_from(world):
    make_checkpoint(world.experiment, 25)
    bad = make_checkpoint(world.experiment, 50)
    (bad / "model.safetensors").write_bytes(b"\x00" * 4)
    decision = decide(world)
    assert decision.step == 25 and decision.set_aside == (bad,)


def test_incomplete_steps_above_the_choice_are_set_aside_not_deleted(world):
    make_checkpoint(world.experiment, 25)
    make_checkpoint(world.experiment, 50, missing="model.safetensors")
    decision = decide(world)
    moved = set_aside(decision)
    assert [old.name for old, _ in moved] == ["50"]
    assert moved[0][1].name.startswith("50.incomplete-") and (moved[0][1] / "optimizer.pt").exists()
    assert sorted(p.name for p in world.experiment.iterdir() if p.name.isdigit()) == ["25"]


def test_overwrite_moves_the_experiment_aside(world):
    make_checkpoint(world.experiment, 25)
    decision = decide(world, VLA_OVERWRITE="1")
    assert decision.action == "overwrite" and decision.step is None
    ((old, new),) = set_aside(decision)
    assert not old.exists() and (new / "25" / "model.safetensors").exists()
    assert set_aside(decision) == []  # a second node (or start) finds nothing left to move, and loses nothing


def test_leftovers_are_listed_in_each_language(world):
    make_checkpoint(world.experiment, 25)
    make_checkpoint(world.experiment, 50, missing="optimizer.pt")
    make_checkpoint(world.experiment, 75, complete=False)
    decision = decide(world)
    assert decision.action is ResumeAction.RESUME and decision.to_json()["action"] == "resume"
    assert decision.leftovers == ("tmp_75", "50 (missing optimizer.pt)")
    (finding,) = [f for f in decision.findings if f.id == "resume.leftovers"]
    assert finding.message.en.endswith(": tmp_75, 50 (missing optimizer.pt)")
    assert finding.message.zh.endswith(":tmp_75, 50(缺少 optimizer.pt)")


def test_finished_experiment_warns(world):
    make_checkpoint(world.experiment, 50)
    decision = decide(world)
    assert "resume.finished" in [f.id for f in decision.findings]


@pytest.mark.parametrize(
    "steps, interval, after, expected",
    [
        (50, 25, 0, [25, 49, 50]),
        (30, 10, 0, [10, 20, 29, 30]),
        (7, 3, 0, [3, 6]),
        (50, 25, 25, [49, 50]),
        (1, 5, 0, []),
    ],
)
def test_openpi_save_rule(steps, interval, after, expected):
    assert save_steps(steps, interval, after) == expected
