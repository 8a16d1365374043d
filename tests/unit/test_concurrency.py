"""Two of the same thing at once: the `concurrency` family.

Real processes (`python -m entrypoint`) started together on one tree: `check`s and `plan`s that must agree and
change nothing, two `run`s of one node that must each keep their own node log and start-up record (even when they
choose their file names in the same second), `VLA_OVERWRITE=1` on two nodes that must move the old experiment aside
once, and two `fetch-assets` where the second must say clearly that the first holds the tree. Plus the pieces that
make it so: `plan.node_files` choosing a free name and `StartupRecord` claiming its file.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from unittest import mock

import pytest

from entrypoint.core.settings import load_settings
from entrypoint.launch.record import StartupRecord
from entrypoint.plan import node_files
from tests.support.edges import Edge, WorldLike, check_edge
from tests.support.files import small_text
from tests.support.httpserver import FileServer, serve
from tests.support.synthetic import make_checkpoint
from tests.unit.conftest import World

LIMIT_S = 60
EXP = "pi05_libero_pytorch"


class Child:
    """`python -m entrypoint ARGV` started in the background with the world's environment plus `env`."""

    def __init__(self, world: World, argv: tuple[str, ...], env: Mapping[str, str] | None = None) -> None:
        self.proc = world.spawn(argv, {**world.env, **(env or {})})

    def finish(self, limit_s: float = LIMIT_S) -> tuple[int, str]:
        try:
            out, _ = self.proc.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
            raise AssertionError(f"still running after {limit_s}s:\n{out[-3000:]}") from None
        assert "Traceback (most recent call last)" not in out, out[-3000:]
        return self.proc.returncode, out


def together(world: World, count: int, argv: tuple[str, ...], env: Mapping[str, str] | None = None) -> list[str]:
    """Start `count` identical commands at once; every one must exit 0. Their outputs, in start order."""
    children = [Child(world, argv, env) for _ in range(count)]
    results = [child.finish() for child in children]
    for code, out in results:
        assert code == 0, out[-3000:]
    return [out for _, out in results]


def records(world: World, rank: int = 0) -> list[Path]:
    return sorted(p for p in (world.assets / "logs").glob(f"*-node{rank}-*.json") if not p.name.endswith(".error.json"))


# ---- check and plan: read-only, so any number at once agree and change nothing ----


def test_two_checks_at_once_agree_and_change_nothing(world: World) -> None:
    env = world.tione(nodes=2, per_node=8, rank=0)
    before = world.snapshot()
    first, second, third = together(world, 3, ("check",), env)
    assert first == second == third and "health check summary: PASS" in first
    assert world.snapshot() == before


def test_two_plans_at_once_agree_and_change_nothing(world: World) -> None:
    before = world.snapshot()
    plans = [json.loads(out) for out in together(world, 2, ("plan", "--json"))]
    stamps = [plan["launch"]["stamp"] for plan in plans]
    shown = [json.dumps(plan).replace(stamp, "<stamp>") for plan, stamp in zip(plans, stamps, strict=True)]
    assert shown[0] == shown[1]
    assert world.snapshot() == before


def test_check_while_a_run_is_writing_its_files(world: World) -> None:
    env = {**world.tione(nodes=2, per_node=8, rank=0), "FAKE_TORCHRUN_QUIET_S": "1.5"}
    running = Child(world, ("run",), env)
    deadline = time.monotonic() + 20
    while not records(world) and time.monotonic() < deadline:  # the run has written its record: it is launching
        time.sleep(0.05)
    (checked,) = together(world, 1, ("check",), env)
    assert "health check summary: PASS" in checked
    code, out = running.finish()
    assert code == 0 and "training ended with exit code 0" in out


# ---- two runs of one node: each keeps its own node log and start-up record ----


def test_two_runs_of_one_node_at_once_keep_their_own_files(world: World) -> None:
    outputs = together(world, 2, ("run",), world.tione(nodes=2, per_node=8, rank=0))
    found = records(world)
    assert len(found) == 2, [p.name for p in found]  # both records, whether or not the runs chose one name
    written = [json.loads(small_text(p)) for p in found]
    assert len({w["pid"] for w in written}) == 2
    assert all(w["outcome"]["exit_code"] == 0 for w in written)
    logs = {Path(w["log"]) for w in written}
    ended = sum(small_text(log).count("training ended with exit code 0") for log in logs)
    assert ended == 2  # no run's lines were lost, in one shared log or in two
    for out in outputs:
        assert "start-up record" in out


def test_a_run_in_the_second_of_an_earlier_one_writes_beside_it(world: World) -> None:
    """The earlier run's files (every stamp this run could pick) stay as they were; this run takes `<stamp>-2`."""
    logs = world.assets / "logs"
    now = time.time()
    earlier = {}
    for offset in range(-1, 15):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + offset))
        for suffix in (".log", ".json"):
            path = logs / f"{EXP}-node0-{stamp}{suffix}"
            path.write_text(f"earlier run {stamp}\n")
            earlier[path] = small_text(path)
    (out,) = together(world, 1, ("run",), world.tione(nodes=2, per_node=8, rank=0))
    assert {path: small_text(path) for path in earlier} == earlier
    (record,) = (p for p in records(world) if p not in earlier)
    assert record.stem.endswith("-2") and json.loads(small_text(record))["log"] == str(record.with_suffix(".log"))
    assert f"start-up record {record}" in out


@pytest.mark.parametrize(
    "existing, expected",
    [
        ((), "STAMP"),
        (("STAMP.log",), "STAMP-2"),
        (("STAMP.json",), "STAMP-2"),
        (("STAMP.log", "STAMP-2.json", "STAMP-3.log"), "STAMP-4"),
        (("STAMP.error.json", "STAMP.nccl"), "STAMP"),  # only a log or a record claims a name
    ],
    ids=["free", "log-taken", "record-taken", "several-taken", "other-files"],
)
def test_node_files_choose_a_free_name(tmp_path: Path, existing: tuple[str, ...], expected: str) -> None:
    stamp = "20260101-120000"
    settings = load_settings({"VLA_ASSETS_ROOT": str(tmp_path), "VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml")})
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in existing:
        (logs / f"{EXP}-node3-{name.replace('STAMP', stamp)}").write_text("")
    files = node_files(settings, 3, stamp)
    chosen = expected.replace("STAMP", stamp)
    assert files.stamp == chosen and files.log == logs / f"{EXP}-node3-{chosen}.log"


# ---- the start-up record claims its file ----


def test_a_record_claims_its_file_and_a_second_writes_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "exp-node0-stamp.json"
    first, second = StartupRecord(path), StartupRecord(path)
    first.data["who"] = "first"
    second.data["who"] = "second"
    first.write()
    second.write()
    assert first.path == path and second.path == tmp_path / f"exp-node0-stamp-{os.getpid()}.json"
    first.data["who"] = "first, again"
    first.write()  # later writes replace this run's own record
    assert json.loads(small_text(path))["who"] == "first, again"
    assert json.loads(small_text(second.path))["who"] == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, second.path.name])  # no temp files


def test_a_record_of_an_earlier_run_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "exp-node0-stamp.json"
    path.write_text('{"from": "an earlier run"}\n')
    record = StartupRecord(path)
    record.write()
    assert json.loads(small_text(path)) == {"from": "an earlier run"} and record.path != path
    assert json.loads(small_text(record.path))["pid"] == os.getpid()


def test_a_record_on_storage_without_hard_links_is_still_written(tmp_path: Path) -> None:
    path = tmp_path / "exp-node0-stamp.json"
    record = StartupRecord(path)
    with mock.patch("entrypoint.launch.record.os.link", side_effect=PermissionError(1, "Operation not permitted")):
        record.write()
    assert record.path == path and json.loads(small_text(path))["pid"] == os.getpid()


def test_a_record_that_cannot_be_written_stays_quiet(tmp_path: Path) -> None:
    record = StartupRecord(tmp_path / "missing-folder" / "exp.json")
    record.write()  # a storage error never hides the job's own outcome
    assert not (tmp_path / "missing-folder").exists()


# ---- VLA_OVERWRITE=1 on two nodes at once ----


def test_overwrite_on_two_nodes_at_once_moves_the_old_experiment_aside_once(world: World) -> None:
    for step in (2, 4):
        make_checkpoint(world.experiment, step)
    (world.experiment / "old-run.txt").write_text("the old run")
    env = {"VLA_OVERWRITE": "1"}
    node0 = Child(world, ("run",), {**world.tione(nodes=2, per_node=8, rank=0), **env})
    # node 0's stand-in torchrun opens no port: node 1 must not wait for it (test_master_wait.py covers the wait)
    node1 = Child(world, ("run",), {**world.tione(nodes=2, per_node=8, rank=1), **env, "VLA_MASTER_WAIT_TIMEOUT": "0"})
    (code0, out0), (code1, out1) = node0.finish(), node1.finish()
    assert (code0, code1) == (0, 0), (out0[-2000:], out1[-2000:])
    moved = sorted(world.experiment.parent.glob(f"{world.experiment.name}.old-*"))
    assert len(moved) == 1 and small_text(moved[0] / "old-run.txt") == "the old run"
    assert sorted(p.name for p in moved[0].iterdir()) == ["2", "4", "old-run.txt"]
    assert "moved " in out0 and "moved " not in out1  # node 0 only
    assert not world.experiment.exists() or not any(world.experiment.iterdir())


# ---- two fetch-assets at once: the second says the first holds the tree ----


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[FileServer]:
    """A server that sends one 256 KiB file at 64 KiB/s: a fetch that takes about 4 s."""
    root = tmp_path / "served"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(256 * 1024))
    with serve(root, rate=64 * 1024) as server:
        yield server


def fetching_first(server: FileServer, started: list[Child]) -> Callable[[WorldLike], None]:
    """Start a fetch-assets and return once it is downloading, which it does only while holding the lock."""

    def setup(world: WorldLike) -> None:
        entry = {"name": "big", "url": f"{server.url}/big.bin", "to": "blobs/big.bin", "check": "file"}
        (world.root / "manifest.yaml").write_text(json.dumps({"entries": [entry]}))
        (world.root / "fresh").mkdir()
        assert isinstance(world, World)
        started.append(Child(world, ("fetch-assets", *FETCH)))
        deadline = time.monotonic() + 20
        while len(server.gets()) < 2 and time.monotonic() < deadline:  # a probe (`Range: bytes=0-0`), then the file
            time.sleep(0.02)
        assert time.monotonic() < deadline, "the first fetch-assets never started downloading"

    return setup


FETCH = ("--manifest", "manifest.yaml", "--assets-root", "fresh", "--allow-http", "--no-check", "--timeout", "10")


def test_two_fetch_assets_at_once_the_second_says_the_tree_is_busy(world: World, slow_server: FileServer) -> None:
    started: list[Child] = []
    second = Edge(
        "fetch-while-fetching",
        "concurrency",
        3,
        "another fetch-assets",
        argv=("fetch-assets", *FETCH),
        setup=fetching_first(slow_server, started),
        tione=False,
    )
    outcome = check_edge(world, second, {})
    assert "fresh" in outcome.text and "另一个 fetch-assets 正在写入" in outcome.text
    assert outcome.seconds < 10  # it did not wait for the first
    (first,) = started
    code, out = first.finish()
    assert code == 0, out[-3000:]
    assert (world.root / "fresh" / "blobs" / "big.bin").stat().st_size == 256 * 1024
