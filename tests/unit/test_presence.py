"""A lost node is named, and every node ends the job the same way (`launch/presence.py`): several nodes' presences
side by side in one run folder, and the real supervisor with a stand-in torchrun that sleeps outside any collective."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

import pytest

from entrypoint.core.errors import ExitCode
from entrypoint.core.messages import Text
from entrypoint.launch import supervisor as supervising
from entrypoint.launch.presence import (
    BEAT_S,
    END_FILE,
    JobEnd,
    Presence,
    node_hosts,
    parse_beat,
    parse_end,
    run_folder,
)
from entrypoint.launch.supervisor import Supervisor, Tee

FAKE_TORCHRUN = Path(__file__).parent / "bin" / "torchrun"
HOSTS = ["host-a", "host-b", "host-c", "host-d"]
ENV = {
    "WORLD_SIZE": "4",
    "MASTER_ADDR": "host-a",
    "MASTER_PORT": "23456",
    "NODE_LIST": "host-a:8,host-b:8,host-c:8,host-d:8",
}


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def presence(folder: Path, node: int, clock: Clock, lost_after: float = 60.0, nnodes: int = 4) -> Presence:
    return Presence(folder, node, nnodes, HOSTS[:nnodes], lost_after, clock=clock)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "logs" / ".runs" / "exp-0123"


def started(p: Presence) -> Presence:
    """Start without its thread (the test beats by hand)."""
    p.start()
    p.finish(clean=False)  # stops the thread; the beat file stays
    p._stop.clear()
    return p


def test_every_node_finds_the_same_folder_and_the_hosts_of_node_list(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    folders = {run_folder(logs, "exp", {**ENV, "RANK": str(rank)}) for rank in range(4)}
    assert len(folders) == 1 and next(iter(folders)).parent == logs / ".runs"  # type: ignore[union-attr]
    assert run_folder(logs, "exp", {**ENV, "MASTER_PORT": "1"}) not in folders  # another job
    assert run_folder(logs, "exp", {**ENV, "WORLD_SIZE": "1"}) is None  # one node: nothing to share
    assert node_hosts(ENV, 4) == HOSTS and node_hosts({}, 2) == ["?", "?"]


def test_a_node_that_never_starts_is_named_lost_by_rank_and_host_after_the_bound(folder: Path) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock)) for n in (0, 1, 2)]  # node 3 never starts
    for _ in range(3):
        clock.now += 25
        for p in nodes:
            p.beat()
        nodes[0].look()
    lost = nodes[0].lost()
    assert [(n.node, n.host, n.never_seen) for n in lost] == [(3, "host-d", True)]
    assert lost[0].silent_s == pytest.approx(75)
    end = nodes[0].lost_end(lost)
    assert end.code == ExitCode.NODE_LOST == 75 and end.outcome == "node-lost"
    assert "node 3 (host-d) never showed up in 75 s" in end.cause.en and "节点 3(host-d)" in end.cause.zh
    assert "VLA_RENDEZVOUS_TIMEOUT=60 s" in end.cause.en


def test_a_node_whose_beat_stops_is_lost_and_a_node_that_ended_cleanly_is_not(folder: Path) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock, nnodes=3)) for n in range(3)]
    nodes[0].look()
    clock.now += 5
    for p in nodes:
        p.beat()
    nodes[0].look()
    nodes[2].finish(clean=True)  # node 2 finished its training: exit 0
    for _ in range(4):  # node 1's container is killed: it beats no more
        clock.now += 20
        nodes[0].beat()
        nodes[0].look()
        assert nodes[0].ahead(0) is None
    assert [(n.node, n.never_seen, round(n.silent_s)) for n in nodes[0].lost()] == [(1, False, 80)]
    assert "node 1 (host-b) stopped: last seen 80 s ago" in nodes[0].lost_end(nodes[0].lost()).cause.en


def test_the_first_end_stands_and_every_node_sees_it(folder: Path) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock)) for n in range(4)]
    first = JobEnd(124, "stalled", Text("no progress for 9s", "9 秒没有进展"), 0, "host-a")
    second = JobEnd(1, "training-crashed", Text("crash", "崩溃"), 2, "host-c")
    assert nodes[0].announce(first) is first
    standing = nodes[2].announce(second)
    assert (standing.code, standing.node, standing.cause) == (124, 0, first.cause)
    assert all(p.look() == standing for p in nodes[1:])
    assert json.loads((folder / END_FILE).read_text())["exit_code"] == 124


def test_an_end_left_by_an_earlier_try_of_the_job_is_ignored(folder: Path) -> None:
    folder.mkdir(parents=True)
    old = JobEnd(93, "do-not-requeue", Text("old", "旧"), 1, "host-b")
    (folder / END_FILE).write_text(json.dumps(old.to_json()))
    os.utime(folder / END_FILE, (time.time() - 3600, time.time() - 3600))
    (folder / "node0.deadbeef.2.40").touch()  # this node's own beat of that try: removed at start
    node = started(presence(folder, 0, Clock()))
    assert node.look() is None
    assert [parse_beat(n).token for n in os.listdir(folder) if n.startswith("node0.")] == [node.token]  # type: ignore[union-attr]
    new = JobEnd(1, "training-crashed", Text("now", "现在"), 0, "host-a")
    assert node.announce(new) is new and started(presence(folder, 1, Clock())).look() == new


def test_a_newer_attempt_of_another_node_is_seen_in_its_beat(folder: Path) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock, nnodes=2)) for n in range(2)]
    nodes[1].attempt = 1
    nodes[1].beat()
    nodes[0].look()
    assert nodes[0].ahead(0) == (1, 1) and nodes[0].ahead(1) is None


def test_settling_a_failure_waits_for_every_node_to_show_itself_alive(folder: Path) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock, nnodes=2)) for n in range(2)]
    nodes[0].look()
    failed_at = clock.now

    def pause(seconds: float) -> None:
        clock.now += seconds
        nodes[1].beat()  # node 1 alive

    assert nodes[0].settle(failed_at, peer_first_s=3.0, pause=pause) is None
    assert clock.now - failed_at == pytest.approx(3.5)


def test_settling_a_failure_returns_another_nodes_end_or_a_lost_node(folder: Path) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock, lost_after=10, nnodes=3)) for n in range(3)]
    nodes[0].look()
    failed_at = clock.now
    peer = JobEnd(1, "training-crashed", Text("ValueError", "ValueError"), 1, "host-b")

    def peer_ends(seconds: float) -> None:
        clock.now += seconds
        nodes[1].announce(peer)

    assert nodes[0].settle(failed_at, peer_first_s=10, pause=peer_ends) == peer
    (folder / END_FILE).unlink()
    nodes[0]._end = None

    def node2_gone(seconds: float) -> None:
        clock.now += seconds
        nodes[1].beat()

    end = nodes[0].settle(failed_at, peer_first_s=0, pause=node2_gone)
    assert end is not None and [n.node for n in end.lost] == [2] and end.code == 75


def test_the_folder_is_listed_once_per_look_and_never_stat_per_beat(folder: Path, monkeypatch) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock)) for n in range(4)]
    calls: list[str] = []
    real_listdir, real_stat = os.listdir, os.stat
    monkeypatch.setattr(os, "listdir", lambda p: calls.append("listdir") or real_listdir(p))
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: calls.append("stat") or real_stat(p, *a, **k))
    nodes[0].look()
    assert calls == ["listdir"]


def tiny_torchrun(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The stand-in torchrun: prints openpi's first lines, then sleeps (a rank asleep outside any collective)."""
    env = {**os.environ, "FAKE_TORCHRUN_BLOCK": "1", "FAKE_TORCHRUN_IGNORE_TERM": "1"}
    return [sys.executable, str(FAKE_TORCHRUN)], env


def supervised(tmp_path: Path, p: Presence) -> tuple[Supervisor, io.StringIO]:
    command, env = tiny_torchrun(tmp_path)
    out = io.StringIO()
    return Supervisor(command, str(tmp_path), env, Tee(out), [], 30, lang="both", presence=p), out


def test_a_node_ends_its_sleeping_training_with_another_nodes_exit_code_within_seconds(
    folder: Path, tmp_path: Path
) -> None:
    """Node 0 ended the job with 124 (a stall, no restart left): node 1's torchrun and its rank, asleep outside any
    collective (it ignores SIGTERM too), are ended, and node 1 ends with 124 and node 0's cause."""
    node0, node1 = Presence(folder, 0, 2, HOSTS[:2], 60), Presence(folder, 1, 2, HOSTS[:2], 60)
    node0.start()
    node1.start()
    supervisor, out = supervised(tmp_path, node1)
    cause = Text("STALL: culprit rank(s) 3 on node(s) 1: …", "STALL:问题 rank 3,位于节点 1:…")
    node0.announce(JobEnd(124, "stalled", cause, 0, "host-a"))
    began = time.monotonic()
    code = supervisor.run()
    took = time.monotonic() - began
    node0.finish(clean=False)
    node1.finish(clean=False)
    assert code == 124 and took < supervising.PEER_CHECK_S + 3, took
    assert supervisor.tree is not None and not supervisor.tree.alive()
    said = out.getvalue()
    assert "JOB ENDED by node 0 (host-a): STALL: culprit rank(s) 3 on node(s) 1" in said
    assert "任务已由节点 0(host-a)结束" in said and "exit code 124" in said


def test_node_0_names_a_node_that_never_started_and_ends_every_node(folder: Path, tmp_path: Path) -> None:
    """Nodes 0 and 1 of 3 run, node 2 (host-c) never starts: node 0 ends the job with 75 once the bound has passed,
    naming node 2 by rank and host in one line; node 1 sees the same end."""
    bound = 1.5
    node0, node1 = (Presence(folder, n, 3, HOSTS[:3], bound) for n in (0, 1))
    node0.start()
    node1.start()
    supervisor, out = supervised(tmp_path, node0)
    began = time.monotonic()
    code = supervisor.run()
    took = time.monotonic() - began
    seen_by_1 = node1.look()
    node0.finish(clean=False)
    node1.finish(clean=False)
    assert code == 75 and bound < took < bound + supervising.PEER_CHECK_S + BEAT_S + 1, took
    lines = [line for line in out.getvalue().splitlines() if "NODE LOST" in line]
    assert len(lines) == 1 and "node 2 (host-c) never showed up" in lines[0], out.getvalue()
    assert seen_by_1 is not None and seen_by_1.code == 75 and [n.node for n in seen_by_1.lost] == [2]
    assert supervisor.culprit_line is not None and "node 2 (host-c)" in supervisor.culprit_line.en


def test_after_a_failure_a_node_silent_since_before_it_is_lost_within_a_minute(folder: Path) -> None:
    """Lost-node bound 600 s; node 2's container ended just before node 0's workers failed: 60 s after its last beat
    it is lost, while node 1, which beats on, is not."""
    clock = Clock()
    nodes = [started(presence(folder, n, clock, lost_after=600, nnodes=3)) for n in range(3)]
    nodes[0].look()
    clock.now += 2
    nodes[0].failed_at = clock.now
    for _ in range(31):
        clock.now += 2
        nodes[1].beat()
        nodes[0].look()
    lost = nodes[0].lost()
    assert [(n.node, n.never_seen, n.bound_s) for n in lost] == [(2, False, 60.0)]
    assert "within the bound (60 s: VLA_RENDEZVOUS_TIMEOUT=600 s, or 60 s once training failed" in (
        nodes[0].lost_end(lost).cause.en
    )


def test_a_node_that_shares_no_beat_is_not_waited_for_after_a_failure(folder: Path) -> None:
    """torchrun ran, so a node never seen here is one without a log folder, not a lost one: the failing node's own
    cause stands at once, and no node is named lost before the full bound."""
    clock = Clock()
    node0 = started(presence(folder, 0, clock, lost_after=600, nnodes=2))

    def pause(seconds: float) -> None:
        clock.now += seconds

    assert node0.settle(clock.now, peer_first_s=0, pause=pause) is None
    assert node0.lost() == []


def test_a_node_that_joined_training_but_left_no_beat_is_not_lost_but_said_unshared(folder: Path) -> None:
    """Every node joined torchrun's rendezvous (workers started), yet node 1's beat never appears here: the log
    folder is not shared (a local disk on each node). The job goes on; the nodes are named as not sharing it."""
    clock = Clock()
    node0 = started(presence(folder, 0, clock, lost_after=30, nnodes=2))
    node0.joined = True
    clock.now += 31
    node0.look()
    assert node0.lost() == [] and node0.unshared() == [1]


def two_node_run(world, **env: str) -> tuple[dict[str, str], Path]:
    """Node 0 of a two-node job in the world, and its run's folder."""
    full = {**world.tione(nodes=2, per_node=8, rank=0), **env}
    folder = run_folder(world.assets / "logs", "pi05_libero_pytorch", full)
    assert folder is not None
    return full, folder


def test_a_training_failure_is_told_to_the_other_nodes_with_its_cause(world) -> None:
    """Node 0's training fails with the trainer's own exception while node 1 is alive: node 0 ends with its own
    code and cause, and node 1 finds them in the run's folder."""
    env, folder = two_node_run(world, FAKE_TORCHRUN_EXIT="7", FAKE_TORCHRUN_TRACEBACK="1")
    node1 = Presence(folder, 1, 2, ["10.0.0.1", "10.0.0.2"], 600)
    node1.start()
    try:
        result = world.cli("run", env=env)
        seen = node1.look()
    finally:
        node1.finish(clean=False)
    assert result.code == 7, result.out[-3000:]
    assert seen is not None and (seen.code, seen.node, seen.outcome) == (7, 0, "training-crashed")
    assert "ValueError: batch_size=0 on rank 3" in seen.cause.en


def test_another_nodes_end_becomes_this_nodes_outcome(world) -> None:
    """Node 1 ended the job with 93 while node 0 trains: node 0 ends with 93, and its record says which node ended
    the job and why."""
    env, folder = two_node_run(world, FAKE_TORCHRUN_BLOCK="1")
    node1 = Presence(folder, 1, 2, ["10.0.0.1", "10.0.0.2"], 600)
    node1.start()
    why = Text("DO NOT REQUEUE: all 3 in-job restarts are spent", "请勿重新排队:3 次任务内重启已用完")
    node1.announce(JobEnd(93, "do-not-requeue", why, 1, "10.0.0.2"))
    try:
        began = time.monotonic()
        result = world.cli("run", env=env)
        took = time.monotonic() - began
    finally:
        node1.finish(clean=False)
    assert result.code == 93 and took < 30, (took, result.out[-3000:])
    record = json.loads(next((world.assets / "logs").glob("*node0*.json")).read_text())
    outcome = record["outcome"]
    assert (outcome["class"], outcome["ended_by"]["node"]) == ("do-not-requeue", 1), outcome
    assert outcome["root_cause"] == why.en
    assert "JOB ENDED by node 1 (10.0.0.2): DO NOT REQUEUE" in result.out


def test_a_do_not_requeue_end_carries_its_verdict_to_every_node() -> None:
    """A node that takes another's do-not-requeue end records the same verdict (its own attempts never judged)."""

    end = JobEnd(93, "do-not-requeue", Text("same exception", "同一异常"), 0, "node-a", verdict="same-exception")
    assert parse_end(end.to_json()) == end
    assert parse_end({**end.to_json(), "verdict": ["x"]}).verdict is None  # type: ignore[union-attr]


def test_node_0_waits_for_the_other_nodes_clean_ends_before_the_report_and_no_longer_than_the_bound(
    folder: Path,
) -> None:
    clock = Clock()
    nodes = [started(presence(folder, n, clock, nnodes=3)) for n in range(3)]
    nodes[1].finish(clean=True)
    looks: list[float] = []

    def pause(seconds: float) -> None:  # node 2 writes its record and ends cleanly 3 s after node 0 began waiting
        looks.append(seconds)
        clock.now += seconds
        if len(looks) == 6:
            nodes[2].finish(clean=True)

    assert nodes[0].wait_done(30.0, pause) == [] and sum(looks) == 3.0
    still = [started(presence(folder / "later", n, clock, nnodes=2)) for n in range(2)]  # node 1 still writing
    waited: list[float] = []

    def tick(seconds: float) -> None:
        waited.append(seconds)
        clock.now += seconds
        still[1].beat()  # alive, not done

    assert still[0].wait_done(30.0, tick) == [1] and sum(waited) == 30.0


def test_a_node_never_seen_is_not_waited_for_before_the_report(folder: Path) -> None:
    clock = Clock()
    node0 = started(presence(folder, 0, clock, nnodes=2))  # node 1 shares no beat (another log folder)
    assert node0.wait_done(30.0, lambda s: pytest.fail("waited for a node that was never seen")) == []
