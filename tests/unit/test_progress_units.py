"""Training progress read from the trainer's output (`progress.py`) and the checkpoint saves inferred from it
(`saves.py`): which lines are progress events and when, the gaps and step times the stall bound is built from,
the steps and checkpoints a run reached, its record and closing sentence, and when a save may be running and how
long each one took."""

from __future__ import annotations

import pytest

from entrypoint.launch.progress import Progress, Saved
from entrypoint.launch.saves import SaveWatch, next_save
from tests.support.stall import Clock

TOO_BIG = "99999999999999999999"  # past any step number a run can have


def fed(clock: Clock, *timed: tuple[float, str], saving: SaveWatch | None = None) -> Progress:
    """A Progress fed each (clock value, text) in turn."""
    progress = Progress(clock=clock, saving=saving)
    for at, text in timed:
        clock.now = at
        progress.feed(text)
    return progress


def started(saving: SaveWatch) -> float | None:
    """When the save now possibly running began (read through a call: no type narrowing between the asserts)."""
    return saving.started_at


# -- lines and events ------------------------------------------------------------------------------------------------


def test_only_complete_lines_count_and_carriage_returns_end_lines() -> None:
    clock = Clock()
    progress = fed(clock, (10.0, "step=1 lo"))
    assert (progress.last_step, progress.last_event_at) == (None, None)
    clock.now = 12.0
    progress.feed("ss=0.25\rstep=2 loss=0.125\rstep=3 loss=9")
    assert (progress.last_step, progress.last_loss, progress.last_event_at) == (2, 0.125, 12.0)
    clock.now = 15.0
    progress.feed("\n")
    assert (progress.last_step, progress.last_loss, progress.last_event_at, progress.gaps) == (3, 9.0, 15.0, [0.0, 3.0])


def test_gaps_between_events_keep_the_latest_fifty() -> None:
    clock = Clock()
    progress = Progress(clock=clock)
    at = 100.0
    for step in range(53):
        at += step
        clock.now = at
        progress.feed(f"step={step} loss=1.0\n")
    assert progress.gaps == [float(gap) for gap in range(3, 53)]
    assert progress.last_event_at == at


def test_the_typical_gap_is_the_median_once_three_are_seen() -> None:
    clock = Clock()
    progress = fed(clock, (100.0, "step=0 loss=1\n"), (104.0, "step=1 loss=1\n"), (105.0, "step=2 loss=1\n"))
    assert progress.typical_gap() is None
    progress = fed(clock, *[(at, f"step={i} loss=1\n") for i, at in enumerate((100.0, 104.0, 105.0, 115.0))])
    assert progress.gaps == [4.0, 1.0, 10.0] and progress.typical_gap() == 4.0
    clock.now = 117.0
    progress.feed("step=4 loss=1\n")
    assert progress.typical_gap() == 3.0


def test_a_progress_bar_is_an_event_only_when_its_count_moves() -> None:
    clock = Clock()
    progress = fed(
        clock,
        (3.0, "Training:  10%|#   | 5/50 [00:01<00:09]\r"),
        (7.0, "Training:  10%|#   | 5/50 [00:02<00:09]\r"),
        (8.0, "loading shards\n"),
        (9.0, "Training:  12%|#   | 6/50 [00:03<00:09]\r"),
    )
    assert (progress.last_event_at, progress.gaps, progress.last_step) == (9.0, [6.0], None)


def test_other_lines_are_no_event_and_numbers_past_any_run_are_ignored() -> None:
    clock = Clock()
    progress = fed(
        clock,
        (1.0, "step=4 loss=0.5\n"),
        (2.0, "Loading checkpoint shards\n"),
        (3.0, f"step={TOO_BIG} loss=0.1\n"),
        (4.0, f"Saved checkpoint at step {TOO_BIG} -> /c/x\n"),
        (5.0, f"Training: | {TOO_BIG}/{TOO_BIG} [\n"),
    )
    assert (progress.last_event_at, progress.last_step, progress.last_loss, progress.saves) == (1.0, 4, 0.5, [])


def test_an_unreadable_loss_is_none_and_the_step_still_counts() -> None:
    progress = fed(Clock(), (6.0, "step=1 loss=0.5\n"), (8.0, "step=2 loss=1.2.3\n"))
    assert (progress.last_step, progress.last_loss, progress.last_step_at) == (2, None, 8.0)


# -- step times ------------------------------------------------------------------------------------------------------


def test_step_times_are_seconds_per_step_between_logged_steps() -> None:
    clock = Clock()
    progress = fed(clock, (100.0, "step=0 loss=1\n"))
    assert (progress.step_time, progress.first_step_at) == (None, 100.0)
    for at, step in ((125.0, 10), (130.0, 10), (140.0, 5), (160.0, 15)):
        clock.now = at
        progress.feed(f"step={step} loss=1\n")
    # 10 steps in 25 s; step 10 again and then step 5 (a restart's) measure nothing; 5 -> 15 in 20 s
    assert progress.step_times == [2.5, 2.0] and progress.step_time == 2.25
    assert (progress.first_step_at, progress.last_step_at, progress.last_step) == (100.0, 160.0, 15)


def test_step_times_keep_the_latest_hundred_and_their_median() -> None:
    clock = Clock()
    progress = Progress(clock=clock)
    for step in range(103):
        clock.now = float(step * step)  # step k took 2k - 1 seconds
        progress.feed(f"step={step} loss=1\n")
    assert progress.step_times == [float(2 * k - 1) for k in range(3, 103)]
    assert progress.step_time == 104.0  # the median of 5, 7, ..., 203


def test_a_save_is_an_event_and_the_gap_over_it_is_no_step_time() -> None:
    clock = Clock()
    progress = fed(
        clock,
        (10.0, "step=8 loss=1\n"),
        (12.0, "step=9 loss=1\n"),
        (40.0, "Saved checkpoint at step 10 -> /ckpt/10\n"),
        (42.0, "step=10 loss=1\n"),
        (44.0, "step=11 loss=1\n"),
    )
    assert progress.saves == [Saved(10, "/ckpt/10")]
    assert progress.gaps == [2.0, 28.0, 2.0, 2.0] and progress.step_times == [2.0, 2.0]


# -- what the run reached --------------------------------------------------------------------------------------------


def test_the_step_reached_is_the_latest_of_logged_and_saved() -> None:
    assert Progress().step_reached is None
    saved_only = fed(Clock(), (0.0, "Saved checkpoint at step 50 -> /c/50\nSaved checkpoint at step 49 -> /c/49\n"))
    assert saved_only.step_reached == 50
    logged_later = fed(Clock(), (0.0, "Saved checkpoint at step 50 -> /c/50\nstep=60 loss=0.5\n"))
    assert logged_later.step_reached == 60


def test_the_record_of_a_run() -> None:
    clock = Clock()
    progress = fed(
        clock,
        (0.0, "step=0 loss=1\n"),
        (1.0, "step=3 loss=0.75\n"),  # one third of a second per step
        (5.0, "Saved checkpoint at step 4 -> /c/4\n"),
        (9.0, "Saved checkpoint at step 5 -> /c/5\n"),
    )
    assert progress.to_json() == {
        "last_step": 3,
        "last_loss": 0.75,
        "last_step_reached": 5,
        "step_time_s": 0.3333,
        "checkpoints_saved": [{"step": 4, "path": "/c/4"}, {"step": 5, "path": "/c/5"}],
    }
    assert Progress().to_json() == {
        "last_step": None,
        "last_loss": None,
        "last_step_reached": None,
        "step_time_s": None,
        "checkpoints_saved": [],
    }


@pytest.mark.parametrize(
    "output, rank, en, zh",
    [
        (
            "step=40 loss=0.5\nSaved checkpoint at step 49 -> /c/49\nSaved checkpoint at step 50 -> /c/50\n",
            0,
            "last step reached 50 (last loss 0.5000, logged at step 40); checkpoints saved this run: 49, 50",
            "到达的最后一步 50(最后损失 0.5000,记录于第 40 步);本次保存的检查点:49, 50",
        ),
        (
            "step=40 loss=0.5\n",
            2,
            "last step reached 40, last loss 0.5000; checkpoints saved this run: none",
            "到达的最后一步 40,最后损失 0.5000;本次保存的检查点:无",
        ),
        (
            "Saved checkpoint at step 50 -> /c/50\n",
            0,
            "last step reached 50 (no loss logged); checkpoints saved this run: 50",
            "到达的最后一步 50(未记录损失);本次保存的检查点:50",
        ),
        ("", 0, "no training step was logged and no checkpoint saved this run", "本次未记录到训练步,也未保存检查点"),
        (
            "",
            1,
            "node 1 does not see training progress (openpi prints it from global rank 0 only); see node 0's log in /l",
            "节点 1 看不到训练进度(openpi 只在全局 rank 0 上输出进度);请查看 /l 中节点 0 的日志",
        ),
    ],
    ids=["saved-after-logged", "logged-on-a-worker", "saved-only", "nothing-node-0", "nothing-node-1"],
)
def test_the_closing_sentence_in_both_languages(output: str, rank: int, en: str, zh: str) -> None:
    text = fed(Clock(), (0.0, output)).summary(rank, "/l")
    assert (text.en, text.zh) == (en, zh)


# -- saves in flight, as the output shows them ----------------------------------------------------------------------


def test_a_save_is_in_flight_from_the_step_line_before_it_and_measured_to_its_line() -> None:
    """save_interval 10, a step line each step: step 9 logged, then openpi saves step 10."""
    clock = Clock()
    saving = SaveWatch(interval=10, total=100)
    progress = fed(clock, (100.0, "step=8 loss=1\n"), (102.0, "step=9 loss=1\n"), saving=saving)
    assert started(saving) == 102.0
    clock.now = 152.0
    progress.feed("Saved checkpoint at step 10 -> /c/10\n")
    assert (started(saving), saving.seconds, saving.longest) == (None, [50.0], 50.0)


def test_a_progress_bar_marks_a_save_and_the_step_computed_before_it_is_not_save_time() -> None:
    """The bar shows 9 steps done (it moves once a step is finished): step 10 is computed (3 s, as measured), then
    saved; the save took the rest of the 20 s until its line."""
    clock = Clock()
    saving = SaveWatch(interval=10, total=100)
    progress = fed(clock, (100.0, "step=7 loss=1\n"), (103.0, "step=8 loss=1\n"), saving=saving)
    assert started(saving) is None
    clock.now = 106.0
    progress.feed("Training:   9%|9         | 9/100 [00:18<03:02,  2.00s/it]\r")
    assert started(saving) == 106.0
    clock.now = 126.0
    progress.feed("Saved checkpoint at step 10 -> /c/10\n")
    assert saving.seconds == [17.0]


def test_a_bar_at_a_save_step_shows_that_save_written() -> None:
    saving = SaveWatch(interval=10, total=100)
    fed(Clock(), (5.0, "Training: 10%|#   | 10/100 [00:20<03:00]\r"), saving=saving)
    assert started(saving) is None


@pytest.mark.parametrize(
    "done, interval, total, expected",
    [
        (0, 10, 100, 10),
        (9, 10, 100, 10),
        (10, 10, 100, 10),
        (11, 10, 100, 20),
        (15, 10, 100, 20),
        (95, 10, 100, 99),
        (99, 10, 100, 99),
        (100, 10, 100, 100),
        (101, 10, 100, None),
        (0, 1, 100, 1),
        (0, 1, 1, 1),
        (0, 10, 1, None),
        (5, 0, 100, None),
        (5, -1, 100, None),
        (5, 10, 0, None),
    ],
)
def test_next_save_follows_openpis_rule(done: int, interval: int, total: int, expected: int | None) -> None:
    assert next_save(done, interval, total) == expected


def test_the_span_between_step_lines_sets_how_far_ahead_a_save_can_come() -> None:
    """A step line every 2 steps: after `done` 8 the next line comes at 10, so the save of 10 is still ahead; after
    `done` 10, steps 10 and 11 may be saved before the next line."""
    saving = SaveWatch(interval=10, total=100)
    saving.position(4, 100.0, before_save=True)
    saving.position(6, 102.0, before_save=True)
    saving.position(8, 104.0, before_save=True)
    assert started(saving) is None
    saving.position(10, 106.0, before_save=True)
    assert started(saving) == 106.0
    saving.position(10, 107.0, before_save=True)  # the same count again: the span and the start are kept
    assert started(saving) == 106.0
    saving.saved(10, 126.0, 1.0)
    assert (started(saving), saving.seconds) == (None, [20.0])


def test_a_step_past_the_due_save_without_its_line_ends_the_wait() -> None:
    saving = SaveWatch(interval=10, total=100)
    saving.position(9, 100.0, before_save=True)
    saving.position(10, 102.0, before_save=True)
    assert started(saving) == 102.0
    saving.position(12, 104.0, before_save=True)
    assert started(saving) is None
    saving.position(101, 105.0, before_save=True)  # past the last save: nothing is due
    assert started(saving) is None


def test_a_step_line_repeated_after_its_save_waits_for_the_next_one() -> None:
    saving = SaveWatch(interval=10, total=100)
    saving.position(10, 100.0, before_save=True)
    saving.saved(10, 110.0, None)
    saving.position(10, 111.0, before_save=True)
    assert (started(saving), saving.seconds) == (None, [10.0])


def test_the_last_step_is_saved_after_the_interval_multiple() -> None:
    """total 12, interval 10: saves at 10 and at 11 (the last step); a step line every 2 steps."""
    saving = SaveWatch(interval=10, total=12)
    saving.position(6, 100.0, before_save=True)
    saving.position(8, 101.0, before_save=True)
    assert started(saving) is None
    saving.position(10, 102.0, before_save=True)
    saving.saved(10, 105.0, None)
    saving.position(10, 106.0, before_save=True)  # step 11's save is due before the next line
    assert (started(saving), saving.seconds) == (106.0, [3.0])


def test_a_save_measures_the_time_less_the_steps_computed_before_it() -> None:
    def measured(done: int, step: int, step_time: float | None, took: float) -> list[float]:
        saving = SaveWatch(interval=10, total=100)
        saving.position(done, 100.0, before_save=False)
        assert started(saving) == 100.0
        saving.saved(step, 100.0 + took, step_time)
        return saving.seconds

    assert measured(9, 10, 2.5, 20.0) == [17.5]
    assert measured(9, 10, None, 20.0) == [20.0]
    assert measured(9, 10, 2.0, 1.5) == [0.0]  # a step of 2 s within 1.5 s: never below zero


def test_a_saved_line_without_a_save_in_flight_measures_nothing() -> None:
    saving = SaveWatch(interval=10, total=100)
    saving.saved(10, 100.0, 2.0)
    assert (started(saving), saving.seconds, saving.longest) == (None, [], None)


def test_saves_keep_the_latest_twenty_durations() -> None:
    saving = SaveWatch(interval=10, total=1000)
    for i in range(22):
        saving.position(10 * i + 9, 1000.0 * i, before_save=False)
        saving.saved(10 * (i + 1), 1000.0 * i + i + 1, None)
    assert saving.seconds == [float(s) for s in range(3, 23)] and saving.longest == 22.0


def test_a_late_saved_line_does_not_move_the_steps_done_back() -> None:
    """Steps done reached 15 before save 10's line: the next line (17) is 2 steps on, so save 20 is not yet due."""
    saving = SaveWatch(interval=10, total=100)
    saving.position(15, 100.0, before_save=True)
    saving.saved(10, 101.0, None)
    saving.position(17, 102.0, before_save=True)
    assert started(saving) is None


def test_a_save_of_step_0_counts_as_no_step_done() -> None:
    """Save 0's line, then a step line 5 steps on: the next line is 5 steps later, so save 9 may come before it."""
    saving = SaveWatch(interval=9, total=100)
    saving.saved(0, 100.0, None)
    saving.position(5, 101.0, before_save=True)
    assert started(saving) == 101.0
