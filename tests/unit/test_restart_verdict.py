"""The restart verdict: whether another in-job attempt may follow, a pure function of the attempts' records
(`restarts.judge`), at every boundary; and the same verdict reached from a node's own output (`Attempts`), as the
supervisor reaches it, including torchrun's own failure after the last allowed attempt (exit 93, not torchrun's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from entrypoint.launch.attempt_files import peer_file
from entrypoint.launch.progress import Progress
from entrypoint.launch.restarts import Attempt, Attempts, Cause, Verdict, judge

W, C, T = Cause.WORKER_EXITED, Cause.COLLECTIVE_ERROR, Cause.TRAINER_EXCEPTION


def ended(*rows: tuple[Cause, str | None, int | None, int | None]) -> list[Attempt]:
    """Attempts 0, 1, … from (cause, detail, best logged step, best saved step)."""
    return [
        Attempt(n, float(n), 0, None, best_step=best, saves=int(saved is not None), best_saved=saved, cause=cause,
                detail=detail)
        for n, (cause, detail, best, saved) in enumerate(rows)
    ]  # fmt: skip


BOOM = "RuntimeError: boom"


@pytest.mark.parametrize(
    "rows, max_restarts, seen, expected",
    [
        pytest.param((), 3, True, Verdict.RETRY, id="nothing-ended"),
        pytest.param(((W, None, 10, None),), 3, True, Verdict.RETRY, id="first-failure-retries"),
        pytest.param(((W, None, 10, None),), 0, True, Verdict.BUDGET_SPENT, id="restarts-off-attempt-0-is-the-last"),
        pytest.param(
            ((W, None, 10, None), (W, None, 20, None), (W, None, 30, None)),
            3,
            True,
            Verdict.RETRY,
            id="one-below-the-budget-with-progress",
        ),
        pytest.param(
            ((W, None, 10, None), (W, None, 20, None), (W, None, 30, None), (W, None, 40, None)),
            3,
            True,
            Verdict.BUDGET_SPENT,
            id="last-allowed-attempt-failed",
        ),
        pytest.param(((T, BOOM, 10, None), (T, BOOM, 20, None)), 3, True, Verdict.SAME_EXCEPTION, id="same-exception"),
        pytest.param(
            ((W, None, 10, None), (W, None, 20, None), (T, BOOM, 30, None), (T, BOOM, 40, None)),
            3,
            True,
            Verdict.BUDGET_SPENT,
            id="budget-named-before-same-exception",
        ),
        pytest.param(((T, BOOM, 10, None), (T, "RuntimeError: other", 20, None)), 3, True, Verdict.RETRY, id="other"),
        pytest.param(((C, BOOM, 10, None), (C, BOOM, 20, None)), 3, True, Verdict.RETRY, id="collective-twice"),
        pytest.param(((C, BOOM, 10, None), (T, BOOM, 20, None)), 3, True, Verdict.RETRY, id="collective-then-trainer"),
        pytest.param(((T, BOOM, 10, None), (C, BOOM, 20, None)), 3, True, Verdict.RETRY, id="trainer-then-collective"),
        pytest.param(
            ((T, BOOM, 10, None), (W, None, 20, None), (T, BOOM, 30, None)),
            3,
            True,
            Verdict.RETRY,
            id="same-exception-not-in-a-row",
        ),
        pytest.param(((W, None, None, None), (W, None, None, None)), 3, True, Verdict.NO_PROGRESS, id="no-step-twice"),
        pytest.param(
            ((W, None, None, None), (W, None, None, None)), 3, False, Verdict.RETRY, id="worker-node-sees-none"
        ),
        pytest.param(((W, None, 0, None), (W, None, None, None)), 3, True, Verdict.RETRY, id="first-attempt-step-0"),
        pytest.param(((W, None, None, None), (W, None, 0, None)), 3, True, Verdict.RETRY, id="second-attempt-step-0"),
        pytest.param(
            ((W, None, 40, None), (W, None, 40, None), (W, None, 40, None)),
            3,
            True,
            Verdict.NO_PROGRESS,
            id="back-to-the-same-step-is-no-progress",
        ),
        pytest.param(
            ((W, None, 40, None), (W, None, 41, None), (W, None, 30, None)),
            3,
            True,
            Verdict.RETRY,
            id="one-step-further-is-progress",
        ),
        pytest.param(
            ((W, None, 40, None), (W, None, 30, None), (W, None, 41, None)),
            3,
            True,
            Verdict.RETRY,
            id="the-last-one-further-is-progress",
        ),
        pytest.param(
            ((W, None, 30, 25), (W, None, 30, 25), (W, None, 30, 25)),
            3,
            True,
            Verdict.NO_PROGRESS,
            id="saving-the-same-step-again-is-no-progress",
        ),
        pytest.param(
            ((W, None, 40, None), (W, None, 40, 50), (W, None, 45, None)),
            3,
            True,
            Verdict.RETRY,
            id="a-new-checkpoint-is-progress",
        ),
        pytest.param(
            ((W, None, 40, None), (W, None, 50, None), (W, None, None, None)),
            3,
            True,
            Verdict.RETRY,
            id="only-the-last-without-progress",
        ),
        pytest.param(
            ((W, None, 50, None), (W, None, 10, None), (W, None, 20, None), (W, None, 45, None)),
            5,
            True,
            Verdict.NO_PROGRESS,
            id="measured-against-every-attempt-before-not-only-the-previous",
        ),
    ],
)
def test_the_verdict_is_a_function_of_the_records(rows, max_restarts, seen, expected):
    assert judge(ended(*rows), max_restarts, progress_seen=seen) is expected


class Node:
    """A node's launcher as the supervisor drives it: workers appear and vanish (pids), the output flows through
    `Progress` and `Attempts`, and a fake clock ticks once per event."""

    def __init__(
        self, max_restarts: int, facts_dir: Path | None = None, node_rank: int = 0, t0: float = 0.0, tick: float = 1.0
    ) -> None:
        self.now, self.tick = t0, tick
        self.progress = Progress(clock=self.clock)
        self.attempts = Attempts(max_restarts, t0, self.progress, facts_dir, self.clock, node_rank)
        self.pid = 100

    def clock(self) -> float:
        self.now += self.tick
        return self.now

    def attempt(self, *lines: str) -> Verdict:
        """One attempt: its two workers start, print `lines` and end; the verdict as the next attempt starts."""
        self.pid += 2
        self.attempts.observe(frozenset({self.pid, self.pid + 1}))
        for line in lines:
            self.progress.feed(line + "\n")
            self.attempts.feed(line + "\n")
        self.attempts.observe(frozenset())
        return self.attempts.verdict()


def steps(*numbers: int) -> list[str]:
    return [f"step={n} loss=0.5 time=1.0s" for n in numbers]


TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>', BOOM]


def test_attempts_that_return_to_the_same_step_end_the_job():
    node = Node(max_restarts=5)
    node.attempt(*steps(10, 20, 30, 40))
    node.attempt(*steps(30, 40))  # resumed, back to 40 only
    node.attempt(*steps(30, 40))
    node.attempts.observe(frozenset({1, 2}))  # the next attempt starts: the one before is settled
    assert node.attempts.verdict() is Verdict.NO_PROGRESS
    assert [a.reached for a in node.attempts.attempts[:3]] == [40, 40, 40]
    text = node.attempts.verdict_text(Verdict.NO_PROGRESS, 93)
    assert "attempt 2 ended at step 40 without getting past step 40 or saving a new checkpoint" in text.en
    assert "exit 93." in text.en and "退出码 93" in text.zh


def test_an_attempt_that_saves_further_is_progress_and_a_resave_is_not():
    node = Node(max_restarts=5)
    node.attempt(*steps(10, 20), "Saved checkpoint at step 25 -> /ckpt/25", *steps(30))
    node.attempt("Saved checkpoint at step 25 -> /ckpt/25", *steps(30))  # started afresh, same save again
    node.attempt(*steps(30), "Saved checkpoint at step 50 -> /ckpt/50")
    node.attempts.observe(frozenset({1, 2}))
    first, second, third = node.attempts.attempts[:3]
    assert (first.best_saved, second.best_saved, third.best_saved) == (25, 25, 50)
    assert (second.saves, third.reached) == (1, 50)
    assert node.attempts.verdict() is Verdict.RETRY  # the third went past every step before it


def test_the_same_exception_twice_is_named_with_both_attempts():
    node = Node(max_restarts=3)
    assert node.attempt(*steps(10), *TRACEBACK) is Verdict.RETRY
    node.attempt(*steps(20), *TRACEBACK)
    node.attempts.observe(frozenset({1, 2}))
    assert node.attempts.verdict() is Verdict.SAME_EXCEPTION
    assert node.attempts.attempts[1].detail == BOOM
    text = node.attempts.verdict_text(Verdict.SAME_EXCEPTION, 93)
    assert text.en.startswith(f"DO NOT REQUEUE: attempts 0 and 1 ended with the same exception in the trainer: {BOOM};")
    assert text.en.endswith("exit 93. Fix the trainer or its settings.")


@pytest.mark.parametrize(
    "max_restarts, attempts, expected",
    [
        pytest.param(2, 3, Verdict.BUDGET_SPENT, id="the-last-allowed-attempt-failed"),
        pytest.param(1, 2, Verdict.BUDGET_SPENT, id="the-one-restart-failed"),
        pytest.param(2, 2, None, id="torchrun-ended-before-the-budget-was-spent"),
        pytest.param(0, 1, None, id="restarts-off-keeps-the-trainers-code"),
        pytest.param(2, 0, None, id="no-attempt-was-seen"),
    ],
)
def test_torchrun_failing_after_the_last_allowed_attempt_is_do_not_requeue(max_restarts, attempts, expected):
    node = Node(max_restarts)
    for n in range(attempts):
        node.attempt(*steps(10 * (n + 1)))  # each one further: never no-progress
    assert node.attempts.torchrun_failed(node.clock()) is expected
    if expected is not None:
        last = node.attempts.attempts[-1]
        assert last.cause is Cause.WORKER_EXITED and last.number == max_restarts
        text = node.attempts.verdict_text(expected, 93)
        assert (
            text.en.startswith(f"DO NOT REQUEUE: all {max_restarts} in-job restarts are spent")
            and "exit 93." in text.en
        )


def test_no_progress_named_for_attempts_that_showed_no_step():
    node = Node(max_restarts=5)
    node.attempt("starting")
    node.attempt("starting")
    node.attempts.observe(frozenset({1, 2}))
    text = node.attempts.verdict_text(Verdict.NO_PROGRESS, 93)
    assert "attempt 1 ended at step - without getting past step 0 " in text.en


def test_an_earlier_attempts_step_is_not_this_attempts_when_only_a_bar_or_save_moved():
    node = Node(max_restarts=5)
    node.attempt(*steps(10, 20, 30, 40))
    node.attempt(" 40%|####      | 20/50 [00:10<00:15]", "Saved checkpoint at step 25 -> /ckpt/25")
    node.attempts.observe(frozenset({1, 2}))
    second = node.attempts.attempts[1]
    assert (second.best_step, second.first_step_at, second.best_saved, second.reached) == (None, None, 25, 25)
    node.attempt(" 10%|#         | 5/50 [00:10<00:15]")  # a bar only, with no step seen in this whole run yet
    assert node.attempts.attempts[2].best_step is None


def test_the_record_says_when_each_attempt_was_detected_restarted_and_stepped():
    node = Node(max_restarts=3)
    node.attempts.observe(frozenset({1, 2}))  # t=1: attempt 0 starts
    node.progress.feed("step=10 loss=0.5 time=1.0s\n")  # t=2
    node.attempts.observe(frozenset({1}))  # t=3: a worker ended: the failure is detected
    node.attempts.observe(frozenset({1}))  # t=4
    node.attempts.observe(frozenset({3, 4}))  # t=5: attempt 1 starts
    rows = node.attempts.to_json()
    assert [(r["attempt"], r["started_s"], r["detected_s"], r["restarted_s"]) for r in rows] == [
        (0, 1.0, 3.0, 5.0),
        (1, 5.0, None, None),
    ]
    assert (rows[0]["first_step_s"], rows[0]["best_step"], rows[0]["cause"]) == (3.0, 10, "worker-exited")


def test_workers_of_one_attempt_that_start_one_by_one_are_one_attempt():
    node = Node(max_restarts=3)
    assert node.attempts.observe(frozenset({1})) is not None
    assert node.attempts.observe(frozenset({1, 2})) is None  # the second worker of attempt 0
    assert len(node.attempts.attempts) == 1
    node.attempts.observe(frozenset())
    started = node.attempts.observe(frozenset({3}))
    assert started is not None and started.number == 1 and node.attempts.attempts[0].cause is Cause.WORKER_EXITED


@pytest.mark.parametrize(
    "line, cause",
    [
        ("torch.distributed.DistNetworkError: Connection reset by peer", Cause.COLLECTIVE_ERROR),
        ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1", Cause.COLLECTIVE_ERROR),
        ("RuntimeError: [../third_party/gloo/transport.cc] Connection closed by peer", Cause.COLLECTIVE_ERROR),
        (BOOM, Cause.TRAINER_EXCEPTION),
    ],
)
def test_a_collective_error_is_told_from_the_trainers_own(line, cause):
    node = Node(max_restarts=3)
    node.attempt("Traceback (most recent call last):", "  File x", line)
    node.attempts.observe(frozenset({1}))
    assert (node.attempts.attempts[0].cause, node.attempts.attempts[0].detail) == (cause, line)


def test_the_exception_after_a_progress_bar_carriage_return_and_a_long_one_cut():
    node = Node(max_restarts=3)
    node.attempts.observe(frozenset({1}))
    node.attempts.feed("Traceback (most recent call last):\n  File x\n 10%|#  | 1/10\rValueError: bad batch\n")
    node.attempts.observe(frozenset())
    node.attempts.observe(frozenset({2}))
    assert node.attempts.attempts[0].detail == "ValueError: bad batch"
    node.attempts.feed("Traceback (most recent call last):\nValueError: " + "x" * 400 + "\n")
    node.attempts.observe(frozenset())
    node.attempts.observe(frozenset({3}))
    assert len(node.attempts.attempts[1].detail or "") == 300


def facts_dirs(tmp_path: Path, exp: str, nodes: int) -> list[Path]:
    folders = []
    for rank in range(nodes):
        folder = tmp_path / f"{exp}-node{rank}-20261203-120000.attempts"
        folder.mkdir()
        (folder / "0.json").write_text("{}")
        folders.append(folder)
    return folders


def test_an_experiment_named_like_a_node_still_finds_its_peers(tmp_path):
    own, peer = facts_dirs(tmp_path, "run-node1-x", 2)
    (peer / "1.json").write_text("{}")
    assert peer_file(own, 0, "1.json") == peer / "1.json"


@pytest.mark.parametrize("holder", [1, 2])
def test_every_peer_is_looked_at_whichever_comes_first(tmp_path, holder):
    folders = facts_dirs(tmp_path, "exp", 3)
    (folders[holder] / "1.json").write_text("{}")
    assert peer_file(folders[0], 0, "1.json") == folders[holder] / "1.json"


def test_a_peer_file_written_the_same_second_the_run_began_counts(tmp_path):
    own, peer = facts_dirs(tmp_path, "exp", 2)
    since = (own / "0.json").stat().st_mtime
    (peer / "1.json").write_text("{}")
    os.utime(peer / "1.json", (since, since))
    assert peer_file(own, 0, "1.json") is not None
    os.utime(peer / "1.json", (since - 1, since - 1))  # an earlier run's
    assert peer_file(own, 0, "1.json") is None


def test_the_record_of_each_attempt_with_what_its_workers_recorded(tmp_path):
    (own,) = facts_dirs(tmp_path, "exp", 1)
    node = Node(3, own)
    node.attempt(*steps(10), "Saved checkpoint at step 25 -> /ckpt/25")
    (own / "1.json").write_text(json.dumps({"resume": {"step": 25, "action": "resume"}, "ranks": [0, 1]}))
    node.attempt(*steps(30))
    (own / "2.json").write_text("[1, 2]")  # not an object: no facts
    node.attempts.observe(frozenset({1}))
    node.attempts.stalled("no progress for 600 s")
    (own / "3.json").write_text("{not json")
    node.attempts.observe(frozenset())
    node.attempts.observe(frozenset({2}))
    rows = node.attempts.to_json()
    assert [r["attempt"] for r in rows] == [0, 1, 2, 3]
    assert [r["resumed_step"] for r in rows] == [None, 25, None, None]
    assert [r["checkpoints_saved"] for r in rows] == [1, 0, 0, 0]
    assert [r["best_step"] for r in rows] == [10, 30, None, None]
    assert [r["cause"] for r in rows] == ["worker-exited", "worker-exited", "stall", None]
    assert rows[2]["detail"] == "no progress for 600 s" and rows[1]["detail"] is None
    assert rows[0]["facts"] == {} and rows[1]["facts"] == {"resume": {"step": 25, "action": "resume"}, "ranks": [0, 1]}
    assert rows[2]["facts"] is None and rows[3]["facts"] is None
    assert set(rows[0]) == {
        "attempt", "started_s", "resumed_step", "first_step_s", "best_step", "checkpoints_saved", "cause", "detail",
        "detected_s", "restarted_s", "facts",
    }  # fmt: skip
    assert rows[2]["detected_s"] is not None and rows[2]["restarted_s"] == rows[3]["started_s"]


@pytest.mark.parametrize(
    "facts, step",
    [
        ({"resume": {"step": 25}}, 25),
        ({"resume": {"step": "25"}}, None),
        ({"resume": None}, None),
        ({"resume": [25]}, None),
        ({}, None),
    ],
)
def test_the_resumed_step_is_read_only_from_a_well_formed_record(tmp_path, facts, step):
    (own,) = facts_dirs(tmp_path, "exp", 1)
    node = Node(3, own)
    node.attempt(*steps(10))
    node.attempts.observe(frozenset({1}))
    (own / "1.json").write_text(json.dumps(facts))
    assert node.attempts.resumed_step(node.attempts.attempts[1]) == step


def test_the_record_counts_seconds_since_the_launcher_started_to_the_millisecond():
    node = Node(max_restarts=3, t0=1000.0, tick=1.2342)
    node.attempts.observe(frozenset({1, 2}))  # 1001.2342: attempt 0 starts
    node.progress.feed("step=10 loss=0.5 time=1.0s\n")  # 1002.4684
    node.attempts.observe(frozenset({1}))  # 1003.7026: a worker ended
    node.attempts.observe(frozenset({3, 4}))  # 1004.9368: attempt 1 starts
    rows = node.attempts.to_json()
    assert [(r["started_s"], r["first_step_s"], r["detected_s"], r["restarted_s"]) for r in rows] == [
        (1.234, 3.703, 3.703, 4.937),
        (4.937, None, None, None),
    ]


def test_the_first_attempt_has_no_resumed_step_in_the_record_whatever_its_workers_wrote(tmp_path):
    (own,) = facts_dirs(tmp_path, "exp", 1)
    (own / "0.json").write_text(json.dumps({"resume": {"step": 25, "action": "resume"}}))  # an earlier job's save
    node = Node(3, own)
    node.attempt(*steps(30))
    node.attempts.observe(frozenset({1}))
    (own / "1.json").write_text(json.dumps({"resume": {"step": 25, "action": "resume"}}))
    assert [r["resumed_step"] for r in node.attempts.to_json()] == [None, 25]


def test_torchrun_ending_before_the_workers_were_seen_gone_is_when_the_failure_is_detected():
    node = Node(max_restarts=1)
    node.attempt(*steps(10))  # attempt 0: t=1 .. t=3
    node.attempts.observe(frozenset({7}))  # t=4: attempt 1 starts
    node.progress.feed("step=20 loss=0.5 time=1.0s\n")  # t=5
    assert node.attempts.torchrun_failed(node.clock()) is Verdict.BUDGET_SPENT  # t=6
    row = node.attempts.to_json()[1]
    assert (row["started_s"], row["first_step_s"], row["best_step"], row["cause"], row["detected_s"]) == (
        4.0,
        6.0,
        20,
        "worker-exited",
        6.0,
    )


def test_a_stall_is_detected_when_the_watchdog_ends_the_workers_not_when_they_are_seen_gone():
    node = Node(max_restarts=3)
    node.attempts.observe(frozenset({1, 2}))  # t=1
    node.progress.feed("step=10 loss=0.5 time=1.0s\n")  # t=2
    node.attempts.observe(frozenset({1, 2}))  # t=3: the step is seen
    node.attempts.stalled("no progress for 600 s")  # t=4
    node.attempts.observe(frozenset())  # t=5: the workers are gone
    node.attempts.observe(frozenset({3, 4}))  # t=6
    row = node.attempts.to_json()[0]
    assert (row["cause"], row["detail"], row["first_step_s"], row["detected_s"], row["restarted_s"]) == (
        "stall",
        "no progress for 600 s",
        3.0,
        4.0,
        6.0,
    )


def test_a_stall_after_a_worker_died_keeps_the_time_the_worker_was_seen_gone():
    node = Node(max_restarts=3)
    node.attempts.observe(frozenset({1, 2}))  # t=1
    node.attempts.observe(frozenset({2}))  # t=2: worker 1 died; worker 2 hangs in a collective
    node.attempts.stalled("no progress for 600 s")  # no new time: the failure was already detected
    node.attempts.observe(frozenset())  # t=3
    node.attempts.observe(frozenset({3, 4}))  # t=4
    row = node.attempts.to_json()[0]
    assert (row["cause"], row["detected_s"], row["restarted_s"]) == ("stall", 2.0, 4.0)


def test_the_next_attempts_workers_start_while_one_of_the_failed_attempts_still_exits():
    node = Node(max_restarts=3)
    node.attempts.observe(frozenset({1, 2}))  # t=1: attempt 0
    node.attempts.observe(frozenset({2}))  # t=2: worker 1 died
    started = node.attempts.observe(frozenset({2, 3, 4}))  # t=3: torchrun restarted; worker 2 not gone yet
    assert started is not None and started.number == 1
    assert [(a.number, a.started_at, a.cause, a.detected_at) for a in node.attempts.attempts] == [
        (0, 1.0, Cause.WORKER_EXITED, 2.0),
        (1, 3.0, None, None),
    ]


def test_an_attempt_that_logged_only_step_0_reached_step_0():
    node = Node(max_restarts=3)
    node.attempt(*steps(0))
    node.attempts.observe(frozenset({1}))
    assert [r["best_step"] for r in node.attempts.to_json()] == [0, None]
    assert node.attempts.attempts[0].reached == 0


def test_no_progress_names_the_furthest_step_of_any_attempt_before_the_last():
    node = Node(max_restarts=5)
    node.attempt(*steps(10))
    node.attempt(*steps(50))  # the furthest: neither the first attempt nor the one before the last
    node.attempt(*steps(30))
    node.attempt(*steps(40))
    node.attempts.observe(frozenset({1}))
    assert node.attempts.verdict() is Verdict.NO_PROGRESS
    text = node.attempts.verdict_text(Verdict.NO_PROGRESS, 93)
    assert text.en == (
        "DO NOT REQUEUE: attempt 3 ended at step 40 without getting past step 50 or saving a new checkpoint; "
        "restarting makes no progress; exit 93. Read the attempts in the start-up record."
    )
    assert text.zh == (
        "请勿重新排队:第 3 次尝试结束于第 40 步,未超过第 50 步,也未保存新的检查点;重启没有进展;"
        "退出码 93。请查看启动记录中的各次尝试。"
    )
