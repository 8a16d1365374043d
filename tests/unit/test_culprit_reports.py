"""A node's stall report as it travels through the shared folder: what a node writes (its ranks, frames, data-loader
workers, the request it answers), what node 0 reads back from a file another node wrote (every field bounded and
typed, anything else refused), when a worker node sees node 0's request, how long node 0 waits for the others, and
the lines and record the verdict gives."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from entrypoint.core.messages import Lang, Text, render
from entrypoint.launch.culprit import (
    Culprit,
    Gathered,
    Method,
    NodeReport,
    RankReport,
    analyser_line,
    culprit_lines,
    gather,
    name_culprit,
    node_report,
    parse_report,
    request_path,
    request_reports,
    requested_since,
    write_json,
    write_report,
)
from entrypoint.launch.flight_recorder import AnalyserRun, AnalyserStatus
from entrypoint.launch.watchdog import Diagnosis, DiagnosisMethod, ProcessReport, Role
from tests.support.stall import BARRIER, SLEEP, Clock


def py_spy(*functions: str, thread: str = 'Thread 0x7F (idle): "MainThread"') -> str:
    return "\n".join([thread, *(f"    {f} (train.py:{i})" for i, f in enumerate(functions, 1))])


def diagnosis() -> Diagnosis:
    """Two ranks (pids 20 and 30, global ranks 5 and 4), a data-loader worker below each, one of them in the loader."""
    processes = [
        ProcessReport(20, 1, Role.RANK, "S", "futex", "python train.py"),
        ProcessReport(30, 1, Role.RANK, "S", "futex", "python train.py"),
        ProcessReport(21, 20, Role.WORKER_CHILD, "D", "nfs_read", "python train.py"),
        ProcessReport(31, 30, Role.WORKER_CHILD, "S", "", "python train.py"),
    ]
    stacks = {"30": py_spy("barrier", "main"), "20": py_spy(*(f"f{i}" for i in range(45)))}
    return Diagnosis(DiagnosisMethod.PY_SPY, processes, stacks, [30], [20, 21], None, {20: 5, 30: 4})


# -- what a node writes ----------------------------------------------------------------------------------------------


def test_a_nodes_report_lists_its_ranks_in_rank_order_with_their_frames_and_loader_workers():
    report = node_report(1, diagnosis(), 42, 12.5, "/logs/x.fr/rank_", clock=lambda: 1000.0, request=990.0)
    assert report.to_json() == {
        "format": 1,
        "node_rank": 1,
        "host": socket.gethostname(),
        "written_at": 1000.0,
        "last_step": 42,
        "silent_s": 12.5,
        "ranks": [
            {
                "rank": 4,
                "pid": 30,
                "frames": ["barrier (train.py)", "main (train.py)"],
                "in_collective": True,
                "in_dataloader": False,
            },
            {
                "rank": 5,
                "pid": 20,
                "frames": [f"f{i} (train.py)" for i in range(40)],  # the innermost 40 frames kept
                "in_collective": False,
                "in_dataloader": True,
            },
        ],
        "loaders": [
            {"pid": 21, "ppid": 20, "state": "D", "wchan": "nfs_read", "in_dataloader": True},
            {"pid": 31, "ppid": 30, "state": "S", "wchan": "", "in_dataloader": False},
        ],
        "flight_recorder_dumps": "/logs/x.fr/rank_",
        "answers_request": 990.0,
    }


def test_a_rank_without_a_stack_has_no_frames_and_no_request_is_answered_unless_given():
    plain = Diagnosis(DiagnosisMethod.NONE, [], {}, [], [], None, {7: 0})
    report = node_report(0, plain, None, None, None, clock=lambda: 5.0)
    assert report.ranks == (RankReport(0, 7, (), False, False),)
    assert (report.request, report.fr_dumps, report.last_step, report.loaders) == (None, None, None, ())


def test_a_report_written_is_read_back_the_same(tmp_path):
    report = node_report(1, diagnosis(), 42, 12.5, "/logs/x.fr/rank_", clock=lambda: 1000.0, request=990.0)
    log = tmp_path / "exp-node1-20260101-000000.log"
    assert write_report(report, log)
    path = tmp_path / "exp-node1-20260101-000000.stall.json"
    assert path.read_text(encoding="utf-8").endswith("}\n")
    back = parse_report(json.loads(path.read_text(encoding="utf-8")))
    # what a node keeps for itself only (seconds silent, the loaders) does not travel
    assert back == NodeReport(1, report.ranks, 1000.0, report.host, 42, None, (), "/logs/x.fr/rank_", 990.0)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


def test_a_report_keeps_non_ascii_text_as_written(tmp_path):
    assert write_json(tmp_path / "r.json", {"host": "节点-α"})
    assert tmp_path.joinpath("r.json").read_text(encoding="utf-8") == '{"host": "节点-α"}\n'


def test_a_shared_folder_that_refuses_the_report_leaves_no_temp_file(tmp_path):
    assert not write_json(tmp_path / "missing" / "r.json", {"a": 1})
    (tmp_path / "a-file").write_text("")
    assert not write_json(tmp_path / "a-file" / "r.json", {"a": 1})  # a file where the folder belongs
    (tmp_path / "a-file").unlink()
    (tmp_path / "r.json").mkdir()  # the rename fails: a folder holds the report's name
    assert not write_json(tmp_path / "r.json", {"a": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and (tmp_path / "r.json").is_dir()


# -- what node 0 reads back ------------------------------------------------------------------------------------------


def body(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"format": 1, "node_rank": 1, "written_at": 100, "ranks": []}
    return {**base, **fields}


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"format": 2}, id="another-format"),
        pytest.param({"format": None}, id="no-format"),
        pytest.param({"node_rank": None}, id="no-node"),
        pytest.param({"node_rank": True}, id="node-a-boolean"),
        pytest.param({"node_rank": -1}, id="node-negative"),
        pytest.param({"node_rank": 1 << 31}, id="node-too-large"),
        pytest.param({"node_rank": "1"}, id="node-as-text"),
        pytest.param({"written_at": "100"}, id="time-as-text"),
        pytest.param({"written_at": None}, id="no-time"),
        pytest.param({"ranks": None}, id="no-ranks"),
        pytest.param({"ranks": {"0": {}}}, id="ranks-a-mapping"),
    ],
)
def test_a_file_that_is_not_one_of_our_reports_is_refused(fields):
    assert parse_report(body(**fields)) is None


def test_the_largest_node_rank_and_a_whole_time_are_read():
    report = parse_report(body(node_rank=(1 << 31) - 1, written_at=100))
    assert report is not None and report.node_rank == (1 << 31) - 1 and report.written_at == 100.0
    assert isinstance(report.written_at, float)
    assert parse_report(body(node_rank=0)) is not None


def test_each_rank_read_back_is_bounded_and_typed():
    ranks = [
        "not a rank",
        {"rank": True, "frames": ["a"]},
        {"rank": -1},
        {"pid": 3},
        {"rank": 0, "pid": 10, "frames": ["x" * 400, *(f"f{i}" for i in range(50))], "in_collective": True},
        {"rank": 1, "pid": -4, "frames": "barrier", "in_collective": 1, "in_dataloader": "yes"},
        {"rank": 2, "pid": True, "frames": [3, None], "in_dataloader": True},
        {"rank": 3, "pid": 1 << 31},
    ]
    report = parse_report(body(ranks=ranks))
    assert report is not None
    assert report.ranks == (
        RankReport(0, 10, ("x" * 300, *(f"f{i}" for i in range(39))), True, False),
        RankReport(1, 0, (), False, False),
        RankReport(2, 0, ("3", "None"), False, True),
        RankReport(3, 0, (), False, False),
    )


def test_at_most_4096_ranks_are_read_from_one_report():
    report = parse_report(body(ranks=[{"rank": r} for r in range(5000)]))
    assert report is not None and len(report.ranks) == 4096 and report.ranks[-1].rank == 4095


def test_the_reports_other_fields_are_read_only_when_they_have_their_type():
    good = parse_report(
        body(host="h" * 150, last_step=7, flight_recorder_dumps="/d/rank_", answers_request=99, silent_s=3.0)
    )
    assert good is not None
    assert (good.host, good.last_step, good.fr_dumps, good.request) == ("h" * 100, 7, "/d/rank_", 99.0)
    assert isinstance(good.request, float) and good.silent_s is None and good.loaders == ()
    bad = parse_report(body(host=5, last_step=-1, flight_recorder_dumps=["/d"], answers_request=True))
    assert bad is not None
    assert (bad.host, bad.last_step, bad.fr_dumps, bad.request) == ("5", None, None, None)
    none = parse_report(body(last_step=True, answers_request="99"))
    assert none is not None and (none.host, none.last_step, none.request) == ("", None, None)
    assert parse_report(body(answers_request=99.5)).request == 99.5  # type: ignore[union-attr]


# -- node 0's request ------------------------------------------------------------------------------------------------


def test_the_request_says_when_node_zero_asked(tmp_path):
    assert request_reports(tmp_path, "exp", clock=lambda: 1234.5)
    path = tmp_path / "exp-stall-request.json"
    assert request_path(tmp_path, "exp") == path
    assert json.loads(path.read_text(encoding="utf-8")) == {"format": 1, "requested_at": 1234.5}
    assert not request_reports(tmp_path / "gone", "exp")


def request_at(folder: Path, requested_at: object, mtime: float) -> None:
    path = folder / "exp-stall-request.json"
    path.write_text(json.dumps({"format": 1, "requested_at": requested_at}), encoding="utf-8")
    os.utime(path, (mtime, mtime))


def test_a_request_up_to_a_minute_older_than_the_node_counts_for_clock_differences(tmp_path):
    since = 10_000.0
    request_at(tmp_path, since - 60, mtime=since - 60)
    assert requested_since(tmp_path, "exp", since) == since - 60
    request_at(tmp_path, since - 61, mtime=since)
    assert requested_since(tmp_path, "exp", since) is None
    request_at(tmp_path, since + 5, mtime=since - 61)  # the file is older than the node: not read at all
    assert requested_since(tmp_path, "exp", since) is None
    request_at(tmp_path, int(since), mtime=since)
    assert requested_since(tmp_path, "exp", since) == since


@pytest.mark.parametrize("content", ['{"format": 1, "requested_at": "10000"}', "[10000]", "{not json", "{}"])
def test_a_request_without_its_time_is_no_request(tmp_path, content):
    (tmp_path / "exp-stall-request.json").write_text(content, encoding="utf-8")
    assert requested_since(tmp_path, "exp", 0.0) is None


def test_a_request_nested_too_deep_to_parse_is_no_request(tmp_path):
    (tmp_path / "exp-stall-request.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert requested_since(tmp_path, "exp", 0.0) is None


# -- gathering ------------------------------------------------------------------------------------------------------


def report(node: int, written_at: float, request: float | None = None, frames=BARRIER) -> NodeReport:
    return NodeReport(node, (RankReport(node, 10 + node, frames, True, False),), written_at, request=request)


def put(folder: Path, name: str, rep: NodeReport) -> None:
    assert write_report(rep, folder / f"{name}.log")


class Sleeps:
    def __init__(self, clock: Clock) -> None:
        self.clock, self.pauses = clock, []

    def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.now += seconds


def test_node_zero_waits_a_second_at_a_time_until_the_bound_for_a_missing_node(tmp_path):
    clock = Clock()
    sleeps = Sleeps(clock)
    put(tmp_path, "exp-node0-a", report(0, 1000.0))
    gathered = gather(tmp_path, "exp", 2, since=1000.0, wait_s=3.0, clock=clock, pause=sleeps)
    assert sleeps.pauses == [1.0, 1.0, 1.0] and gathered.missing == [1] and list(gathered.reports) == [0]


def test_node_zero_stops_waiting_once_every_node_reported(tmp_path):
    clock = Clock()
    put(tmp_path, "exp-node0-a", report(0, 1000.0))

    def late_node(seconds: float) -> None:
        clock.now += seconds
        put(tmp_path, "exp-node1-a", report(1, 1001.0))

    gathered = gather(tmp_path, "exp", 2, since=1000.0, wait_s=30.0, clock=clock, pause=late_node)
    assert clock.now == 1.0 and gathered.missing == [] and sorted(gathered.reports) == [0, 1]


def test_reports_up_to_a_minute_before_the_stall_count_and_the_newest_wins(tmp_path):
    put(tmp_path, "exp-node0-a", report(0, 940.0, frames=SLEEP))
    put(tmp_path, "exp-node0-b", report(0, 950.0))
    put(tmp_path, "exp-node0-c", report(0, 945.0, frames=SLEEP))
    put(tmp_path, "exp-node1-a", report(1, 940.0))
    put(tmp_path, "exp-node2-a", report(2, 939.0))
    gathered = gather(tmp_path, "exp", 3, since=1000.0, wait_s=0)
    assert gathered.missing == [2] and gathered.reports[0].written_at == 950.0
    assert gathered.reports[0].ranks[0].frames == BARRIER


def test_a_report_counts_only_under_its_own_nodes_name_and_experiment(tmp_path):
    put(tmp_path, "exp-node1-a", report(0, 1000.0))  # node 0's report under node 1's name
    put(tmp_path, "exp-node10-a", report(1, 1000.0))  # another node's file: node 1's name is `exp-node1-`
    put(tmp_path, "other-node1-a", report(1, 1000.0))
    (tmp_path / "exp-node1-b.stall.txt").write_text(json.dumps(report(1, 1000.0).to_json()), encoding="utf-8")
    assert gather(tmp_path, "exp", 2, since=1000.0, wait_s=0).missing == [0, 1]


def test_only_answers_to_this_request_count_and_node_zeros_own_report_is_taken_as_is(tmp_path):
    put(tmp_path, "exp-node0-a", report(0, 1000.0, request=5.0, frames=SLEEP))
    put(tmp_path, "exp-node1-a", report(1, 1000.0, request=4.0))
    put(tmp_path, "exp-node2-a", report(2, 1000.0, request=5.0))
    own = report(0, 1000.0, request=5.0)
    gathered = gather(tmp_path, "exp", 3, since=1000.0, wait_s=0, known={0: own}, request=5.0)
    assert gathered.missing == [1] and gathered.reports[0] is own and sorted(gathered.reports) == [0, 2]
    assert gather(tmp_path, "exp", 3, since=1000.0, wait_s=0).missing == []  # no request: any answer counts


def test_a_log_folder_that_cannot_be_read_gives_every_node_missing(tmp_path):
    assert gather(tmp_path / "gone", "exp", 2, since=0.0, wait_s=0) == Gathered({}, [0, 1])


# -- the verdict's lines and record ----------------------------------------------------------------------------------


def test_the_record_of_a_culprit_names_every_field():
    culprit = name_culprit(Gathered({0: report(0, 1.0), 1: report(1, 1.0, frames=SLEEP)}, [2]), {1: (3, 4, "op")})
    lost = Culprit(culprit.method, culprit.ranks, culprit.nodes, culprit.why, culprit.groups, [2], [], {2: 80.0})
    assert lost.to_json() == {
        "method": "flight-recorder",
        "ranks": [1],
        "nodes": [1],
        "why": "the flight recorder shows them behind: the others entered collective #4 (op), they stopped at #3",
        "stack_groups": [{"frame": BARRIER[0], "ranks": [0]}, {"frame": SLEEP[0], "ranks": [1]}],
        "missing_nodes": [2],
        "setup_ranks": [],
        "lost_nodes": [2],
    }
    assert Culprit(Method.NONE, [], [], None).to_json()["why"] is None


def test_ranks_behind_that_wait_in_setup_leave_the_verdict_to_the_stacks():
    setup = ("init_process_group (c.py)", "main (t.py)")
    gathered = Gathered({0: report(0, 1.0, frames=setup), 1: report(1, 1.0)}, [])
    culprit = name_culprit(gathered, {0: (1, 2, "op")})
    assert (culprit.method, culprit.ranks, culprit.setup_ranks) == (Method.NONE, [], [0])
    assert culprit.to_json()["stack_groups"] == [{"frame": setup[0], "ranks": [0]}, {"frame": BARRIER[0], "ranks": [1]}]
    assert culprit.why is not None and culprit.why.en == (
        "STALL: 1 rank(s) wait in process-group setup (init_process_group (c.py)): they wait for a rank that never "
        "joined, so none of them is blamed"
    )
    assert culprit_lines(culprit, 30, "/l") == [culprit.why]


def test_the_lines_round_the_seconds_and_name_the_nodes_lost_and_missing():
    culprit = Culprit(Method.NONE, [], [], None, [], [1, 2], [], {1: 75.6})
    lines = culprit_lines(culprit, 29.6, "/logs")
    assert [line.en for line in lines] == [
        "STALL: node 1 sent no diagnosis within 30s and shows no sign of life for 76s: it is lost (its container or "
        "machine ended?)",
        "STALL: node 2 sent no diagnosis within 30s: look at its own log in /logs",
        "STALL: no single rank stands out (0 stack group(s) among 0 rank(s)); read the stacks above",
    ]
    assert "节点 1" in render(lines[0], Lang.ZH) and "76" in render(lines[0], Lang.ZH)


def test_the_line_of_a_named_verdict_lists_every_rank_and_node():
    named = Culprit(Method.STACKS, [3, 4], [1, 2], Text("why", "为何"))
    assert culprit_lines(named, 30, "/l") == [
        Text("STALL: culprit rank(s) 3, 4 on node(s) 1, 2: why", "STALL:问题 rank 3, 4,位于节点 1, 2:为何")
    ]


# -- torch's analyser ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "run, line",
    [
        (
            None,
            "STALL: no flight recorder here: no rank wrote a dump (gloo ranks have no dump pipe): culprit from stacks",
        ),
        (
            AnalyserRun(AnalyserStatus.ABSENT, 1, ()),
            "STALL: no flight recorder here (this torch has no torch.distributed.flight_recorder): culprit from stacks",
        ),
        (
            AnalyserRun(AnalyserStatus.TIMED_OUT, None, ("x",)),
            "STALL: torch's flight-recorder analyser did not finish within 60s; the dumps are in /d",
        ),
        (
            AnalyserRun(AnalyserStatus.FAILED, 1, ("Traceback", "  File x", "KeyError: 'x'")),
            "STALL: torch's flight-recorder analyser failed (exit 1: KeyError: 'x'); the dumps are in /d",
        ),
        (
            AnalyserRun(AnalyserStatus.FAILED, 0, ()),
            "STALL: torch's flight-recorder analyser failed (exit 0: -); the dumps are in /d",
        ),
        (
            AnalyserRun(AnalyserStatus.NO_PYTHON, None, ()),
            "STALL: torch's flight-recorder analyser failed (exit -: -); the dumps are in /d",
        ),
        (AnalyserRun(AnalyserStatus.OK, 0, ("fine",)), None),
    ],
)
def test_what_the_analyser_made_of_the_dumps_is_one_line(run, line):
    text = analyser_line(run, "/d")
    assert (text.en if text else None) == line
    if text is not None:
        assert render(text, Lang.ZH).startswith("STALL:") and render(text, Lang.ZH) != text.en
