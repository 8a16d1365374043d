"""Resume decided once: the newest complete step, never a leftover; overwrite moves aside, never deletes."""

from __future__ import annotations

import os

import pytest

from entrypoint.core.settings import load_settings
from entrypoint.inspect.openpi import save_count
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


@pytest.mark.parametrize(
    "steps, interval, newest, action",
    [
        (50, 25, 50, "finished"),  # the seed: saves 25, 49, 50
        (50, 25, 49, "resume"),  # one step left, and openpi saves it at 50
        (50, 25, 25, "resume"),
        (51, 25, 50, "finished"),  # the last save of 51 steps is 50 (N - 1): step 51 would never be saved
        (30, 25, 29, "finished"),  # 30 is no multiple of 25: the last save is 29
        (30, 10, 29, "resume"),  # 30 is a multiple of 10: step 30 is still to be saved
        (40, 25, 60, "finished"),  # an earlier, longer run of the same experiment
    ],
)
def test_an_experiment_at_its_last_save_is_finished(world, steps, interval, newest, action):
    make_checkpoint(world.experiment, newest)
    decision = decide(world, VLA_NUM_TRAIN_STEPS=str(steps), VLA_SAVE_INTERVAL=str(interval))
    assert (decision.action, decision.step, decision.to_json()["action"]) == (action, newest, action)


def test_finished_is_exactly_where_openpi_would_save_nothing_more():
    """The rule against openpi's loop itself: a resume from `newest` is finished iff it would save no checkpoint."""
    for steps in range(1, 30):
        for interval in range(1, 8):
            for newest in range(0, steps + 2):
                assert (save_count(steps, interval, newest) == 0) == (openpi_saves(steps, interval, newest) == [])


def test_a_finished_experiment_is_one_warning_naming_the_step_and_the_way_on(world):
    make_checkpoint(world.experiment, 25)
    make_checkpoint(world.experiment, 50)
    (finding,) = [f for f in decide(world).findings if f.id == "resume"]
    assert finding.status == "warn" and finding.exit_code == 3 and finding.where.endswith("/50")
    assert finding.message.en.startswith("already trained to step 50: with num_train_steps=50 and save_interval=25")
    assert finding.message.zh.startswith("已训练到第 50 步")
    assert "VLA_NUM_TRAIN_STEPS" in finding.hint.en and "VLA_OVERWRITE=1" in finding.hint.zh


def test_a_finished_experiment_sets_nothing_aside(world):
    """Nothing is started, so nothing is moved: an incomplete folder above the last save stays where it is."""
    make_checkpoint(world.experiment, 50)
    make_checkpoint(world.experiment, 75, missing="optimizer.pt")
    decision = decide(world)
    assert decision.action is ResumeAction.FINISHED and decision.set_aside == () and set_aside(decision) == []
    assert (world.experiment / "75").is_dir() and decision.leftovers == ("75 (missing optimizer.pt)",)


def test_overwrite_starts_a_finished_experiment_again(world):
    make_checkpoint(world.experiment, 50)
    decision = decide(world, VLA_OVERWRITE="1")
    assert decision.action is ResumeAction.OVERWRITE and decision.set_aside == (world.experiment,)


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
    assert save_count(steps, interval, after) == len(expected) == len(openpi_saves(steps, interval, after))
    assert openpi_saves(steps, interval, after) == expected


def openpi_saves(steps: int, interval: int, after: int) -> list[int]:
    """openpi's loop, step by step: the step counter goes 1..N after each increment, and it saves when the counter
    is a multiple of the interval or equals N - 1."""
    return [s for s in range(1, steps + 1) if (s % interval == 0 or s == steps - 1) and s > after]


def test_the_save_count_matches_the_rule_everywhere_small():
    for steps in range(1, 40):
        for interval in range(1, 12):
            for after in range(0, steps + 3):
                assert save_count(steps, interval, after) == len(openpi_saves(steps, interval, after)), (
                    steps,
                    interval,
                    after,
                )


def test_the_save_count_does_not_grow_with_the_step_count():
    assert save_count(10**12, 1) == 10**12
    assert save_count(2**63 - 1, 1, 2**63 - 10) == 9
    assert save_count(10**18, 10**18) == 2


def openpi_latest_step(experiment):
    """openpi's own `--resume` reading of the folder (scripts/train_pytorch.py): every name `isdigit()` accepts that
    is a folder and not tmp_*, `int()` of each, the highest; it then loads `<experiment>/<str(step)>`."""
    steps = [
        int(d.name) for d in experiment.iterdir() if d.is_dir() and d.name.isdigit() and not d.name.startswith("tmp_")
    ]
    return max(steps) if steps else None


@pytest.mark.parametrize(
    "names, step, moved",
    [
        (["00010"], None, ["00010"]),
        (["10", "00010"], 10, []),
        (["5", "00010"], 5, ["00010"]),
        (["25", "010"], 25, []),
        (["²"], None, ["²"]),
        (["25", "①"], 25, ["①"]),
        (["25", "٣"], 25, []),
        (["1", "٣"], 1, ["٣"]),
        (["1", "１０"], 1, ["１０"]),
        (["0"], 0, []),
    ],
    ids=["zero-padded", "beside-its-twin", "above-the-choice", "below-the-choice", "superscript", "circled",
         "arabic-indic-below", "arabic-indic-above", "full-width", "step-zero"],
)  # fmt: skip
def test_after_set_aside_openpi_reads_the_step_we_chose(world, names, step, moved):
    """Only ASCII digits without leading zeros count as steps; a name openpi would misread is set aside whenever
    openpi could pick it, so after node 0's renames openpi's own parsing lands on the decided step (or on none)."""
    for name in names:
        make_checkpoint(world.experiment, name)
    decision = decide(world)
    assert decision.step == step
    assert sorted(p.name for p in decision.set_aside) == sorted(moved)
    set_aside(decision)
    assert openpi_latest_step(world.experiment) == step
    if step is not None:
        assert (world.experiment / str(step) / "model.safetensors").is_file()


def test_names_openpi_would_misread_are_listed_with_the_reason(world):
    make_checkpoint(world.experiment, 25)
    make_checkpoint(world.experiment, "²")
    make_checkpoint(world.experiment, "00030")
    decision = decide(world)
    assert decision.step == 25
    assert "² (digits to Python's isdigit() but no number to int(): openpi's --resume would crash on it)" in (
        decision.leftovers
    )
    assert any(t.startswith("00030 (") and "would load the folder 30" in t for t in decision.leftovers)
    (finding,) = [f for f in decision.findings if f.id == "resume.leftovers"]
    assert "00010 -> 10" in finding.hint.en


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"optimizer.pt": "fifo"}, "optimizer.pt (a FIFO"),
        ({"metadata.pt": b""}, "metadata.pt (the file is empty)"),
        ({"model.safetensors": b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n"}, "git-lfs"),
        ({"optimizer.pt": "folder"}, "optimizer.pt (a folder is where a file should be)"),
    ],
    ids=["fifo", "empty", "lfs-pointer", "folder"],
)
def test_a_step_with_a_file_openpi_cannot_load_is_not_resumed(world, change, reason):
    make_checkpoint(world.experiment, 25)
    folder = make_checkpoint(world.experiment, 50)
    for name, value in change.items():
        (folder / name).unlink()
        if value == "fifo":
            os.mkfifo(folder / name)
        elif value == "folder":
            (folder / name).mkdir()
        else:
            (folder / name).write_bytes(value)
    decision = decide(world)
    assert decision.step == 25 and decision.set_aside == (folder,)
    assert reason in decision.leftovers[0]


def test_a_tmp_folder_with_an_undecodable_name_is_shown_escaped(world):
    os.makedirs(os.fsencode(world.experiment) + b"/tmp_\xff")
    decision = decide(world)
    assert decision.leftovers == ("tmp_\\udcff",)
    decision.to_json()["leftovers"][0].encode("utf-8")  # printable, encodable: no surrogate left
