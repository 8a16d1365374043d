"""What watching the other nodes costs the shared storage, counted on the FUSE stand-in for CFS
(`tests/support/cfs.py`): one worker node's minute of polls (its beat, one look at this run's folder, node 0's
stall request, its own health verdicts) is the same number of requests whether the log folder holds no earlier run
or fifty, and whether the job has 2 nodes or 8. Prints the figure the README quotes."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.launch.culprit import requested_since
from entrypoint.launch.presence import BEAT_S, Presence
from entrypoint.launch.progress import Progress
from entrypoint.launch.restarts import Attempts
from entrypoint.launch.supervisor import PEER_CHECK_S
from tests.support.cfs import Cfs, fuse_available, mounted

pytestmark = pytest.mark.skipif(
    not fuse_available() and not os.environ.get("CI"), reason="needs /dev/fuse, fusermount3 and mfusepy"
)
EXP = "pi05_libero_pytorch"
POLLS_PER_MINUTE = round(60 / PEER_CHECK_S)


@pytest.fixture
def cfs(tmp_path: Path) -> Iterator[Cfs]:
    with mounted(tmp_path / "cfs") as stand_in:
        yield stand_in


def earlier_runs(logs: Path, runs: int, nnodes: int) -> None:
    """What `runs` earlier runs of `nnodes` nodes leave in the log folder (written behind the mount)."""
    for run in range(runs):
        stamp = f"20261101-{run:06d}"
        (logs / ".runs" / f"{EXP}-old{run:04d}").mkdir(parents=True)
        for node in range(nnodes):
            (logs / f"{EXP}-node{node}-{stamp}.log").write_text("step=1\n")
            attempts = logs / f"{EXP}-node{node}-{stamp}.attempts"
            attempts.mkdir()
            for name in ("0.json", "1.json", "gave-up.json"):
                (attempts / name).write_text("{}")


def minute_of_polls(cfs: Cfs, name: str, runs: int, nnodes: int) -> Counter[str]:
    """Requests of node 1's polls over one minute (`PEER_CHECK_S` apart; a beat every `BEAT_S`)."""
    logs_behind = cfs.source / name
    logs_behind.mkdir()
    earlier_runs(logs_behind, runs, nnodes)
    logs = cfs.mountpoint / name
    facts = logs / f"{EXP}-node1-20261205-120000.attempts"
    facts.mkdir()
    (facts / "0.json").write_text("{}")
    folder = logs / ".runs" / f"{EXP}-this"
    folder.mkdir(parents=True)
    for node in range(nnodes):
        if node != 1:
            (folder / f"node{node}.cafe{node:04d}.0.1").touch()
    node = Presence(folder, 1, nnodes, ["?"] * nnodes, 600.0)
    attempts = Attempts(3, 0.0, Progress(), facts, node_rank=1)
    node.start()
    node.finish(clean=False)  # no thread: the beats below are counted exactly
    before = cfs.counts()
    for poll in range(POLLS_PER_MINUTE):
        if poll % round(BEAT_S / PEER_CHECK_S) == 0:
            node.beat()
        node.look()
        requested_since(logs, EXP, 0.0)
        attempts.node_fault()
    return cfs.counts() - before


def test_polling_costs_the_same_whatever_the_history_and_the_node_count(cfs: Cfs) -> None:
    fresh = minute_of_polls(cfs, "fresh", runs=0, nnodes=8)
    history = minute_of_polls(cfs, "history", runs=50, nnodes=8)
    small = minute_of_polls(cfs, "small", runs=50, nnodes=2)
    total = sum(fresh.values())
    print(f"\none node's polls, one minute: {total} CFS requests {dict(fresh)}")
    assert sum(history.values()) == total and sum(small.values()) == total, (fresh, history, small)
    assert total <= 25 * POLLS_PER_MINUTE, fresh  # a few requests per poll, never one per earlier file
