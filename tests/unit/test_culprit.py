"""Naming the culprit of a stall: the detection bound (with a checkpoint save in flight), stack groups across nodes,
gathering nodes' diagnoses from a hostile shared folder, the flight-recorder variables in the plan, and torch's
analyser run within its bound."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import pytest

from entrypoint.core.messages import Lang, render
from entrypoint.launch.culprit import (
    Gathered,
    Method,
    NodeReport,
    RankReport,
    analyser_line,
    culprit_lines,
    gather,
    name_culprit,
    report_path,
    request_reports,
    requested_since,
    write_report,
)
from entrypoint.launch.flight_recorder import (
    AnalyserStatus,
    RankTrace,
    analyse,
    behind,
    lagging,
    read_dump,
    request_dumps,
)
from entrypoint.launch.progress import Progress
from entrypoint.launch.saves import SaveWatch, next_save
from entrypoint.launch.watchdog import (
    FIRST_SAVE_S,
    FLOOR_S,
    Diagnosis,
    DiagnosisMethod,
    ProcessReport,
    Role,
    Watchdog,
    in_setup_frames,
    stall_limit,
    summary_lines,
)
from tests.support.stall import BARRIER, SLEEP, STARTUP, Clock


def steps(progress: Progress, clock: Clock, first: int, last: int, gap: float) -> None:
    for step in range(first, last + 1):
        clock.now += gap
        progress.feed(f"step={step} loss=0.5 lr=1e-4 time=1.0s\n")


# -- the bound -----------------------------------------------------------------------------------------------------


def test_bound_after_warm_up_is_five_gaps_or_two_minutes():
    clock = Clock()
    progress = Progress(clock=clock)
    steps(progress, clock, 0, 3, 10.0)
    assert stall_limit(None, STARTUP, progress) == FLOOR_S == 120.0
    steps(progress, clock, 4, 20, 60.0)
    assert stall_limit(None, STARTUP, progress) == 300.0


def test_bound_keeps_the_start_up_allowance_until_steps_have_a_rhythm():
    clock = Clock()
    progress = Progress(clock=clock)
    assert stall_limit(None, STARTUP, progress) == STARTUP
    steps(progress, clock, 0, 1, 10.0)
    assert stall_limit(None, STARTUP, progress) == STARTUP


def test_a_save_in_flight_extends_the_bound_and_its_time_is_measured():
    """save_interval 10: openpi logs step 9, then saves step 10 before anything else is printed."""
    clock = Clock()
    progress = Progress(clock=clock, saving=SaveWatch(interval=10, total=100))
    steps(progress, clock, 0, 8, 2.0)
    assert stall_limit(None, STARTUP, progress) == FLOOR_S
    steps(progress, clock, 9, 9, 2.0)  # the save of step 10 begins now; none measured yet
    assert stall_limit(None, STARTUP, progress) == FIRST_SAVE_S
    assert stall_limit(30, STARTUP, progress) == 30.0  # a fixed bound is the user's word until a save is measured
    clock.now += 200.0
    progress.feed("Saved checkpoint at step 10 -> /x/10\n")
    assert progress.saving is not None and progress.saving.seconds == [200.0]
    assert stall_limit(None, STARTUP, progress) == FLOOR_S  # save done: back to the usual bound
    steps(progress, clock, 10, 19, 2.0)  # step 19 logged: the save of step 20 begins
    assert stall_limit(None, STARTUP, progress) == 600.0  # 3x the longest save seen
    assert stall_limit(30, STARTUP, progress) == 600.0


def test_the_watchdog_does_not_fire_during_a_long_save_but_does_after_it():
    clock = Clock()
    progress = Progress(clock=clock, saving=SaveWatch(interval=10, total=100))
    dog = Watchdog(None, STARTUP, progress, started_at=0.0, clock=clock)
    steps(progress, clock, 0, 9, 2.0)
    clock.now += FIRST_SAVE_S - 1
    assert dog.check() is None  # 14 minutes into the first save: still allowed
    clock.now += 2
    assert dog.check() is not None


@pytest.mark.parametrize(
    "done, expected", [(0, 10), (9, 10), (10, 10), (11, 20), (95, 99), (99, 99), (100, 100), (101, None)]
)
def test_next_save_follows_openpis_rule(done, expected):
    assert next_save(done, 10, 100) == expected


# -- stack groups ----------------------------------------------------------------------------------------------------


def two_nodes(frames: dict[int, tuple[str, ...]]) -> Gathered:
    def node(n: int) -> NodeReport:
        ranks = tuple(RankReport(r, 100 + r, frames[r], True, False) for r in (2 * n, 2 * n + 1))
        return NodeReport(n, ranks, written_at=1.0)

    return Gathered({0: node(0), 1: node(1)}, [])


def test_the_rank_in_a_different_frame_is_named_with_its_node():
    culprit = name_culprit(two_nodes({0: BARRIER, 1: BARRIER, 2: SLEEP, 3: BARRIER}))
    assert (culprit.method, culprit.ranks, culprit.nodes) == (Method.STACKS, [2], [1])
    (line,) = culprit_lines(culprit, 30, "/logs")
    assert line.en.startswith("STALL: culprit rank(s) 2 on node(s) 1:") and "3 rank(s) waiting in barrier" in line.en


def test_no_rank_is_named_when_every_rank_waits_in_the_same_place():
    culprit = name_culprit(two_nodes(dict.fromkeys(range(4), BARRIER)))
    assert culprit.method is Method.NONE and culprit.ranks == []
    assert "no single rank stands out" in culprit_lines(culprit, 30, "/logs")[-1].en


SETUP = (
    "_new_process_group_helper (torch/distributed/distributed_c10d.py)",
    "init_process_group (c.py)",
    "main (t.py)",
)
STORE_HOST = ("_store_based_barrier (torch/distributed/distributed_c10d.py)", "main (train.py)")


def test_ranks_waiting_in_process_group_setup_are_never_the_culprit():
    """A node's ranks are missing after a restart: rank 0 waits for their connections in another frame than the
    others; nobody is blamed, and the line says they wait in setup (the odd-one-out rule once named rank 0)."""
    culprit = name_culprit(two_nodes({0: STORE_HOST, 1: SETUP, 2: SETUP, 3: SETUP}))
    assert (culprit.method, culprit.ranks, culprit.nodes, culprit.setup_ranks) == (Method.NONE, [], [], [0, 1, 2, 3])
    (line,) = culprit_lines(culprit, 30, "/logs")
    assert line.en.startswith("STALL: 4 rank(s) wait in process-group setup (") and "none of them is blamed" in line.en


def test_a_node_with_no_diagnosis_and_no_beat_is_named_lost():
    gathered = Gathered(two_nodes(dict.fromkeys(range(4), SETUP)).reports | {}, [2])
    culprit = name_culprit(gathered)
    lines = culprit_lines(dataclasses.replace(culprit, silent_nodes={2: 75.0}), 30, "/logs")
    assert lines[0].en.startswith("STALL: node 2 sent no diagnosis within 30s and shows no sign of life for 75s")


def test_the_flight_recorder_wins_over_stacks():
    culprit = name_culprit(two_nodes(dict.fromkeys(range(4), BARRIER)), {3: (4, 5, "nccl:all_reduce")})
    assert (culprit.method, culprit.ranks, culprit.nodes) == (Method.FLIGHT_RECORDER, [3], [1])
    assert "entered collective #5 (nccl:all_reduce)" in culprit.why.en if culprit.why else False


def test_ranks_behind_in_the_recorder():
    traces = [RankTrace(0, 5, "gloo:all_reduce", None, None), RankTrace(1, 4, "gloo:barrier", None, None)]
    assert behind(traces) == [1] and lagging(traces) == {1: (4, 5, "gloo:all_reduce")}
    assert behind([RankTrace(0, 5, "x", None, None), RankTrace(1, 5, "x", None, None)]) == []


# -- gathering from the shared folder -------------------------------------------------------------------------------


def test_gathering_survives_hostile_files_and_names_the_silent_node(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    node0 = NodeReport(0, (RankReport(0, 10, BARRIER, True, False),), written_at=time.time())
    assert write_report(node0, logs / "exp-node0-20260101-000000.log")
    os.mkfifo(logs / "exp-node1-20260101-000000.stall.json")  # a FIFO where node 1's report belongs
    (logs / "exp-node1-20260101-000001.stall.json").mkdir()  # a folder
    (logs / "exp-node1-20260101-000002.stall.json").write_text("{not json")
    with open(logs / "exp-node1-20260101-000003.stall.json", "wb") as huge:
        huge.truncate(64 << 20)  # sparse, 64 MiB
    (logs / "exp-node1-20260101-000004.stall.json").write_text('{"format": 1, "node_rank": 1, "written_at": 1}')
    started = time.monotonic()
    gathered = gather(logs, "exp", nnodes=2, since=time.time() - 5, wait_s=0.5)
    assert time.monotonic() - started < 5
    assert list(gathered.reports) == [0] and gathered.missing == [1]
    lines = culprit_lines(name_culprit(gathered), 30, str(logs))
    assert lines[0].en == f"STALL: node 1 sent no diagnosis within 30s: look at its own log in {logs}"
    assert "节点 1" in render(lines[0], Lang.ZH)


def test_node_zero_gets_every_nodes_report_and_old_ones_are_ignored(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    old = NodeReport(1, (RankReport(1, 11, SLEEP, False, False),), written_at=time.time() - 3600)
    write_report(old, logs / "exp-node1-20250101-000000.log")
    for node, frames in ((0, BARRIER), (1, SLEEP)):
        report = NodeReport(node, (RankReport(node, 10 + node, frames, True, False),), written_at=time.time())
        write_report(report, logs / f"exp-node{node}-20260101-00000{node}.log")
    gathered = gather(logs, "exp", nnodes=2, since=time.time() - 5, wait_s=0)
    assert gathered.missing == [] and gathered.reports[1].ranks[0].frames == SLEEP
    assert report_path(Path("/l/exp-node1-s.log")) == Path("/l/exp-node1-s.stall.json")


def test_worker_nodes_see_node_zeros_request_only_when_it_is_new(tmp_path):
    start = time.time()
    assert requested_since(tmp_path, "exp", start) is None
    assert request_reports(tmp_path, "exp", clock=lambda: start + 10)
    assert requested_since(tmp_path, "exp", start) == start + 10
    assert requested_since(tmp_path, "exp", start + 3600) is None


# -- the recorder's dumps and torch's analyser --------------------------------------------------------------------


def test_a_dump_naming_a_class_is_refused_and_a_fifo_is_not_a_dump(tmp_path):
    (tmp_path / "rank_0").write_bytes(b"cos\nsystem\n(S'touch pwned'\ntR.")  # a pickle that would run a command
    assert read_dump(tmp_path / "rank_0", 0) is None and not (tmp_path / "pwned").exists()
    os.mkfifo(tmp_path / "rank_1")
    assert read_dump(tmp_path / "rank_1", 1) is None
    os.mkfifo(tmp_path / "pipe_0.pipe")  # nobody reads it: asking does not block
    assert request_dumps(str(tmp_path / "pipe_"), [0, 1]) == []


def test_no_recorder_here_is_said_in_one_line(tmp_path):
    run = analyse(tmp_path, sys.executable, {"PATH": os.environ["PATH"]})  # this interpreter has no torch
    assert run.status is AnalyserStatus.ABSENT
    line = analyser_line(run, str(tmp_path))
    assert line is not None and line.en.startswith("STALL: no flight recorder here")


def test_an_analyser_that_hangs_is_killed_within_its_bound(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nsleep 300 &\nwait\n")  # a child too: the whole session is killed
    fake.chmod(0o755)
    started = time.monotonic()
    run = analyse(tmp_path, str(fake), {"PATH": os.environ["PATH"]}, timeout=1)
    assert run.status is AnalyserStatus.TIMED_OUT and time.monotonic() - started < 10
    line = analyser_line(run, str(tmp_path))
    assert line is not None and "did not finish within" in line.en


# -- the plan --------------------------------------------------------------------------------------------------------


def test_the_flight_recorder_is_on_by_default_and_the_users_own_values_are_kept(world):
    plan = json.loads(world.cli("plan", "--json").out)
    exported, stamp = plan["env"]["set"], plan["launch"]["stamp"]
    assert exported["TORCH_FR_BUFFER_SIZE"] == exported["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "20000"
    assert exported["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    dump = exported["TORCH_FR_DUMP_TEMP_FILE"]
    assert dump == exported["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == plan["launch"]["log"][: -len(".log")] + ".fr/rank_"
    assert exported["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] == f"/tmp/vla-entrypoint-fr-node0-{stamp}-pipe_"
    own = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "500", "TORCH_FR_DUMP_TEMP_FILE": "/mine/fr_"}
    plan = json.loads(world.cli("plan", "--json", env=own).out)
    exported, kept = plan["env"]["set"], plan["env"]["kept"]
    assert kept["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "500" and kept["TORCH_FR_DUMP_TEMP_FILE"] == "/mine/fr_"
    assert not {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"} & set(exported)


def test_the_stall_summary_lists_ranks_in_process_group_setup_apart_from_collectives():
    report = ProcessReport(7, 1, Role.RANK, "S", "do_poll", "python train.py")
    diagnosis = Diagnosis(DiagnosisMethod.PY_SPY, [report], {"7": "stack"}, [], [], None, {7: 0}, [7])
    text = " | ".join(render(t, Lang.EN) for t in summary_lines(diagnosis))
    assert (
        "in a collective: none seen" in text
        and "in process-group setup, waiting for every rank to connect: [7]" in text
    )
    assert in_setup_frames(SETUP) and not in_setup_frames(BARRIER)
