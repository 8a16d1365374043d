"""What a node learns about its peers and its storage while the job runs, driven in-process (`launch/health`).

Guards, exactly as a user sees them: which peer attempts folder and file a node takes for this run's
(`attempt_files`); what the node health gate's children get and what `run`/`check` print (`health_gate`, with
`run_gate` stood in for); the CFS watcher's console lines, its give-up bound and its child's JSON rounds
(`storage_watch`, with the probe and the watcher process stood in for); the page-cache reader's lines, bounds and
record (`prefetch`, with its child stood in for); each node's beat, the lost-node bounds and the job's end record
(`presence`, on a test-driven clock).
"""

from __future__ import annotations

import errno
import hashlib
import io
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import pytest

from entrypoint.core.findings import passed, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Lang, Text
from entrypoint.core.report import health_summary
from entrypoint.core.settings import HealthMode
from entrypoint.health.gate import Context, GateResult
from entrypoint.health.spec import HealthGate
from entrypoint.health.verdict import Node
from entrypoint.inspect.mounts import Mount
from entrypoint.inspect.prefetch import Prefetch
from entrypoint.inspect.storage_probe import Answer
from entrypoint.launch import health_gate, prefetch, storage_watch
from entrypoint.launch.attempt_files import peer_file, peer_folders, peer_prefix
from entrypoint.launch.presence import Beat as BeatName
from entrypoint.launch.presence import (
    JobEnd,
    LostNode,
    Presence,
    node_hosts,
    parse_beat,
    parse_end,
    run_folder,
)
from entrypoint.launch.storage_watch import StorageWatch
from entrypoint.plan import Plan
from tests.unit.test_presence import HOSTS, Clock, started

LEAD = "vla-entrypoint: "
PAD = " " * len(LEAD)


def both(en: str, zh: str) -> str:
    """A launcher line as printed in both languages."""
    return f"{LEAD}{en}\n{PAD}{zh}\n"


def said(lang: Lang, en: str, zh: str) -> str:
    """A launcher line as printed in one language."""
    return f"{LEAD}{en if lang is Lang.EN else zh}\n"


# --- attempt_files: a node's peers' attempts folders ---------------------------------------------------------------


def attempts(parent: Path, exp: str, node: int, stamp: str = "20261203-120000", first: float | None = 1000.0) -> Path:
    """Node `node`'s attempts folder; `first`: the time of its `0.json` (None: no `0.json`)."""
    folder = parent / f"{exp}-node{node}-{stamp}.attempts"
    folder.mkdir()
    if first is not None:
        (folder / "0.json").write_text("{}")
        os.utime(folder / "0.json", (first, first))
    return folder


def written(path: Path, when: float) -> Path:
    path.write_text("{}")
    os.utime(path, (when, when))
    return path


def test_the_peer_prefix_is_the_experiment_and_the_node_word_of_this_folder() -> None:
    own = Path("/logs/exp-node2-20261203-120000.attempts")
    assert peer_prefix(own, 2) == "exp-node"
    assert peer_prefix(own, 2, of_node=0) == "exp-node0-"
    assert peer_prefix(own, 2, of_node=11) == "exp-node11-"
    assert peer_prefix(own, 1) is None  # not named like node 1's folder
    assert peer_prefix(Path("/logs/run-node2-x-node2-20261203.attempts"), 2) == "run-node2-x-node"  # the last one
    assert peer_prefix(Path("/logs/-node2-20261203.attempts"), 2) == "-node"  # an empty experiment name


def test_peer_folders_are_the_other_nodes_attempts_folders_of_this_experiment(tmp_path: Path) -> None:
    own = attempts(tmp_path, "exp", 0, first=1234.5)
    one, two = attempts(tmp_path, "exp", 1), attempts(tmp_path, "exp", 2, stamp="20261203-120007")
    attempts(tmp_path, "other", 1)  # another experiment
    (tmp_path / "exp-node3-20261203-120000.attempts").write_text("")  # a file, not a folder
    (tmp_path / "exp-node4-20261203-120000.logs").mkdir()  # not an attempts folder
    folders, since = peer_folders(own, 0)
    assert (sorted(folders), since) == ([one, two], 1234.5)
    assert peer_folders(own, 0, of_node=2) == ([two], 1234.5)
    assert peer_folders(own, 0, of_node=0) == ([], 1234.5)  # never its own folder
    assert peer_folders(own, 1) == ([], None)  # not node 1's folder
    assert peer_folders(attempts(tmp_path, "late", 0, first=None), 0) == ([], None)  # no 0.json: nothing dated


def test_peer_file_is_the_newest_written_since_this_nodes_first_attempt(tmp_path: Path) -> None:
    own = attempts(tmp_path, "exp", 0, first=1000.0)
    one, two, three = (attempts(tmp_path, "exp", n) for n in (1, 2, 3))
    attempts(tmp_path, "exp", 4)  # holds no such file
    written(one / "1.json", 1500.0)
    written(two / "1.json", 2000.0)
    written(three / "1.json", 999.0)  # an earlier run's
    assert peer_file(own, 0, "1.json") == two / "1.json"
    assert peer_file(own, 0, "1.json", of_node=1) == one / "1.json"
    assert peer_file(own, 0, "1.json", of_node=3) is None
    assert peer_file(own, 0, "2.json") is None
    (own / "0.json").unlink()
    assert peer_file(own, 0, "1.json") is None  # this run's start unknown: nothing counts


def test_a_peer_without_the_file_does_not_hide_the_next_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = attempts(tmp_path, "exp", 0, first=1000.0)
    attempts(tmp_path, "exp", 1)  # listed first, holds no such file
    holder = attempts(tmp_path, "exp", 2)
    written(holder / "1.json", 1000.0)  # the same second this node's first attempt was recorded: this run's
    listed = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: sorted(listed(path), key=lambda e: e.name))
    assert peer_file(own, 0, "1.json") == holder / "1.json"


# --- health_gate: the gate's context and what `run` and `check` print ----------------------------------------------


class Settings:
    def __init__(self, log_dir: Path) -> None:
        self.exp_name, self.log_dir = "pi05_libero_pytorch", log_dir

    def path(self, name: str) -> Path:
        assert name == "log_dir"
        return self.log_dir


SPEC = HealthGate(HealthMode.WARN, True, False, 8, Text("why", "原因"), gather_wait_s=42.5)
INHERITED = {
    "PATH": "/nowhere/bin",
    "HOME": "/root",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    "NCCL_IB_HCA": "mlx5",
    "NCCL_SOCKET_IFNAME": "eth9",  # not given to training: not to the gate either
    "MY_NCCL_NOTE": "kept",
}
TRAINING = {
    **INHERITED,
    "PATH": "/opt/venv/bin:/nowhere/bin",
    "CUDA_VISIBLE_DEVICES": "2,3",
    "NCCL_IB_HCA": "mlx5_0",
    "NCCL_SOCKET_IFNAME": "",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_FILE": "/logs/nccl.%h.%p",
    "OMP_NUM_THREADS": "4",
}
TRAINING.pop("NCCL_SOCKET_IFNAME")


def fake_plan(tmp_path: Path, rank: int = 1, log: bool = True, torchrun: str = "/nowhere/torchrun") -> Plan:
    launch = SimpleNamespace(
        files=SimpleNamespace(log=tmp_path / "logs" / f"exp-node{rank}-20261203.log" if log else None),
        nccl_debug={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/logs/nccl.%h.%p", "NCCL_DEBUG_SUBSYS": "INIT"},
        command=[torchrun, "--nnodes=2"],
    )
    plan = SimpleNamespace(
        health=SPEC,
        topology=SimpleNamespace(node_rank=rank, nproc_per_node=8, nnodes=2),
        launch=launch,
        settings=Settings(tmp_path / "logs"),
        inherited=dict(INHERITED),
        environment=lambda: dict(TRAINING),
    )
    return cast(Plan, plan)


GATE_ENV = {
    "PATH": "/nowhere/bin",
    "HOME": "/root",
    "MY_NCCL_NOTE": "kept",
    "CUDA_VISIBLE_DEVICES": "2,3",
    "NCCL_IB_HCA": "mlx5_0",
}


def test_the_gate_gets_trainings_gpus_and_nccl_settings_without_nccls_debug_routing(tmp_path: Path) -> None:
    assert health_gate.gate_env(fake_plan(tmp_path)) == GATE_ENV


def test_the_gate_context_names_this_node_its_report_and_the_trainers_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_gate, "this_host", lambda: "gpu-7")
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    python.chmod(0o755)
    torchrun = tmp_path / "venv" / "bin" / "torchrun"
    torchrun.write_text(f"#!{python}\nimport torch\n")
    host = Host({"A": "b"}, tmp_path)
    ctx = health_gate.context(fake_plan(tmp_path, torchrun=str(torchrun)), host, 1700000000.5)
    logs = tmp_path / "logs"
    assert ctx == Context(
        spec=SPEC,
        node=Node(1, "gpu-7", 8, 2),
        host=host,
        env=GATE_ENV,
        share=logs / "exp-node1-20261203.health.json",
        log_dir=logs,
        exp_name="pi05_libero_pytorch",
        since=1700000000.5,
        python=str(python),
    )
    plain = health_gate.context(fake_plan(tmp_path, log=False), host, 5.0)  # no node log, no python on its PATH
    assert (plain.share, plain.log_dir, plain.python, plain.stage) == (None, None, sys.executable, "start")


class Gate:
    """`run_gate` stood in for: records its calls, answers `result`."""

    def __init__(self, result: object) -> None:
        self.result, self.calls = result, cast(list[tuple[Context, bool, float]], [])

    def __call__(self, ctx: Context, active: bool, wait_s: float) -> object:
        self.calls.append((ctx, active, wait_s))
        return self.result


class Table:
    findings: ClassVar = [
        passed("health.gpus", Text("8 GPUs answer", "8 块 GPU 应答")),
        warned("health.slow", Text("GPU 3 is slow", "GPU 3 较慢"), Text("watch it", "留意")),
    ]
    reports: ClassVar = {0: None, 1: None}

    def table(self) -> str:
        return "GPU TABLE"


def summary(lang: Lang) -> str:
    out = io.StringIO()
    health_summary(Table.findings, "node health", lang, out)
    return out.getvalue()


@pytest.mark.parametrize("rank, lang", [(0, Lang.ZH), (1, Lang.EN), (0, Lang.EN)])
def test_the_start_gate_runs_both_tiers_and_node_0_prints_the_jobs_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank: int, lang: Lang
) -> None:
    monkeypatch.setattr(health_gate, "this_host", lambda: "gpu-7")
    gate = Gate(Table())
    monkeypatch.setattr(health_gate, "run_gate", gate)
    out, plan = io.StringIO(), fake_plan(tmp_path, rank=rank)
    assert health_gate.start_gate(plan, Host({}, tmp_path), out, lang, 77.0) is gate.result
    ((ctx, active, wait_s),) = gate.calls
    assert ctx == health_gate.context(plan, Host({}, tmp_path), 77.0) and (active, wait_s) == (True, 42.5)
    table = said(lang, "node health, whole job: 2 node(s) reported", "节点健康,整个任务:2 个节点已提交")
    assert out.getvalue() == summary(lang) + (table + "GPU TABLE\n" if rank == 0 else "")


def test_the_passive_gate_of_check_shares_nothing_and_waits_for_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_gate, "this_host", lambda: "gpu-7")
    gate = Gate(Table())
    monkeypatch.setattr(health_gate, "run_gate", gate)
    plan = fake_plan(tmp_path)
    assert health_gate.passive_gate(plan, Host({}, tmp_path), 9.0) is gate.result
    ((ctx, active, wait_s),) = gate.calls
    full = health_gate.context(plan, Host({}, tmp_path), 9.0)
    assert full.share is not None and full.log_dir is not None
    assert ctx == Context(full.spec, full.node, full.host, full.env, None, None, full.exp_name, 9.0, full.python)
    assert (active, wait_s) == (False, 0.0)


def test_the_table_heading_counts_the_nodes_that_reported(tmp_path: Path) -> None:
    out = io.StringIO()
    health_gate.print_table(cast(GateResult, Table()), out, Lang.EN)
    assert out.getvalue() == f"{LEAD}node health, whole job: 2 node(s) reported\nGPU TABLE\n"


# --- storage_watch: the CFS watcher's lines and bound ----------------------------------------------------------------


CFS = Mount("/mnt/cfs", "nfs", "10.0.0.9:/share", "rw,hard")
LOGS = Mount("/mnt/logs", "fuse.cfs", "")


class Ticks:
    """`time` stood in for: `monotonic()` answers the next of `values`."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def monotonic(self) -> float:
        return self.values.pop(0)


def watch(give_up_after: float | None = 30.0, lang: Lang = Lang.EN) -> tuple[StorageWatch, io.StringIO, list]:
    out, given_up = io.StringIO(), cast(list[tuple[Answer, float]], [])
    w = StorageWatch([CFS, LOGS], 5.0, 2.5, give_up_after, out, lang, lambda a, s: given_up.append((a, s)))
    return w, out, given_up


def row(mount: Mount, seconds: object, stage: str = "stat", error: str | None = None) -> dict[str, object]:
    return {"point": mount.point, "seconds": seconds, "stage": stage, "error": error}


NOT_ANSWERING = (
    "CFS not answering at {point} ({fs} from {source}): checkpoint saves and node-log writes there wait for it; any "
    "stall from now on is the storage's, not a rank's"
)


def test_a_stall_is_said_at_once_and_its_end_with_how_long_it_lasted() -> None:
    w, out, given_up = watch(lang=Lang.BOTH)
    assert w._round([], 50.0) is False and out.getvalue() == ""  # answering: nothing to say
    assert w._round([Answer(CFS, 2.0, "stat")], 100.0) is False
    assert (w.stalled, w.stalled_since) == (Answer(CFS, 2.0, "stat"), 98.0)
    assert w._round([Answer(CFS, 7.0, "")], 103.0) is False  # still stalled: said once
    assert w._round([], 110.0) is False
    assert (w.stalled, w.stalled_since, given_up) == (None, None, [])
    assert out.getvalue() == both(
        NOT_ANSWERING.format(point="/mnt/cfs", fs="nfs", source="10.0.0.9:/share"),
        "CFS 无响应:/mnt/cfs(nfs,来源 10.0.0.9:/share);"
        "保存检查点与写节点日志都在等待它;此后的停滞源于存储,而非某个 rank",
    ) + both("CFS at /mnt/cfs answers again after 12 s", "/mnt/cfs 处的 CFS 在 12 秒后恢复应答")


def test_the_job_is_given_up_once_the_storage_was_silent_for_the_bound() -> None:
    w, out, given_up = watch(give_up_after=30.0, lang=Lang.BOTH)
    assert w._round([Answer(LOGS, 1.0, "")], 200.0) is False  # silent since 199.0
    assert w._round([Answer(LOGS, 2.0, "", "EIO")], 228.9) is False and given_up == []
    assert w._round([Answer(LOGS, 3.0, "", "EIO")], 229.0) is True  # exactly the bound
    assert given_up == [(Answer(LOGS, 3.0, "", "EIO"), 30.0)]
    assert out.getvalue() == both(
        NOT_ANSWERING.format(point="/mnt/logs", fs="fuse.cfs", source="?"),
        "CFS 无响应:/mnt/logs(fuse.cfs,来源 ?);保存检查点与写节点日志都在等待它;此后的停滞源于存储,而非某个 rank",
    ) + both(
        "CFS not answering at /mnt/logs for 30 s (limit 30 s): ending the job, since it can neither save a checkpoint "
        "nor write its log; check the CFS instance in the TI-ONE console and submit the job again (it resumes from "
        "the newest complete checkpoint)",
        "/mnt/logs 处的 CFS 已 30 秒无响应(上限 30 秒):任务既无法保存检查点也无法写日志,"
        "现结束任务;请在 TI-ONE 控制台检查 CFS 实例后重新提交(将从最新的完整检查点续训)",
    )


def test_two_mounts_are_followed_each_on_its_own_and_the_longest_silent_bounds_the_job() -> None:
    w, out, given_up = watch(give_up_after=30.0)
    assert w._round([Answer(CFS, 1.0, "")], 100.0) is False  # the checkpoint mount silent since 99
    assert w._round([Answer(LOGS, 1.0, "")], 110.0) is False  # it answers again; the log mount stops at 109
    assert (w.stalled, w.stalled_since) == (Answer(LOGS, 1.0, ""), 109.0)
    assert w._round([Answer(LOGS, 2.0, ""), Answer(CFS, 1.0, "")], 130.0) is False  # both silent: 21 s at most
    assert (w.stalled, w.stalled_since) == (Answer(LOGS, 2.0, ""), 109.0)
    assert w._round([Answer(CFS, 2.0, ""), Answer(LOGS, 3.0, "")], 139.0) is True and given_up == [
        (Answer(LOGS, 3.0, ""), 30.0)
    ]
    assert [text.removeprefix("vla-entrypoint: ") for text in out.getvalue().splitlines()] == [
        NOT_ANSWERING.format(point="/mnt/cfs", fs="nfs", source="10.0.0.9:/share"),
        "CFS at /mnt/cfs answers again after 11 s",
        NOT_ANSWERING.format(point="/mnt/logs", fs="fuse.cfs", source="?"),
        NOT_ANSWERING.format(point="/mnt/cfs", fs="nfs", source="10.0.0.9:/share"),
        "CFS not answering at /mnt/logs for 30 s (limit 30 s): ending the job, since it can neither save a checkpoint "
        "nor write its log; check the CFS instance in the TI-ONE console and submit the job again (it resumes from "
        "the newest complete checkpoint)",
    ]


def test_a_mount_that_stops_answering_while_another_already_is_is_said_at_once_and_bounds_the_job() -> None:
    w, out, given_up = watch(give_up_after=30.0)
    assert w._round([Answer(CFS, 1.0, "")], 100.0) is False  # the checkpoint mount silent since 99
    assert w._round([Answer(CFS, 6.0, ""), Answer(LOGS, 20.0, "")], 105.0) is False  # the log mount since 85
    assert (w.stalled, w.stalled_since) == (Answer(LOGS, 20.0, ""), 85.0)  # the longest silent, listed second
    assert w._round([Answer(CFS, 15.0, ""), Answer(LOGS, 30.0, "")], 115.0) is True  # 30 s of the log mount's
    assert given_up == [(Answer(LOGS, 30.0, ""), 30.0)]
    assert [text.removeprefix(LEAD) for text in out.getvalue().splitlines()] == [
        NOT_ANSWERING.format(point="/mnt/cfs", fs="nfs", source="10.0.0.9:/share"),
        NOT_ANSWERING.format(point="/mnt/logs", fs="fuse.cfs", source="?"),
        "CFS not answering at /mnt/logs for 30 s (limit 30 s): ending the job, since it can neither save a checkpoint "
        "nor write its log; check the CFS instance in the TI-ONE console and submit the job again (it resumes from "
        "the newest complete checkpoint)",
    ]


def test_without_a_bound_the_job_is_never_given_up() -> None:
    w, _, given_up = watch(give_up_after=None)
    assert w._round([Answer(CFS, 1.0, "")], 10.0) is False
    assert w._round([Answer(CFS, 1.0, "")], 1e9) is False and given_up == []


def test_the_cause_names_the_mount_not_answering_now(monkeypatch: pytest.MonkeyPatch) -> None:
    w, _, _ = watch()
    assert w.cause() is None
    w.stalled = Answer(CFS, 1.0, "")
    assert w.cause() is None  # no time yet
    w.stalled_since = 100.0
    monkeypatch.setattr(storage_watch, "time", Ticks(145.4))
    assert w.cause() == Text("CFS not answering at /mnt/cfs for 45 s", "/mnt/cfs 处的 CFS 45 秒无响应")


def test_the_watchers_rounds_are_read_line_by_line_until_the_job_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    w, out, given_up = watch(give_up_after=30.0)
    lines = [
        "garbage",
        json.dumps([row(Mount("/elsewhere", "nfs", "x"), 1.0)]),  # a mount not watched
        "5",  # not a list of rounds
        json.dumps([row(CFS, "soon")]),  # not a number
        json.dumps([row(CFS, 2.0)]),
        "[]",
        json.dumps([row(LOGS, 1.0, "", "EIO")]),
        json.dumps([row(LOGS, 2.0, "", "EIO")]),
        "[]",  # after the give-up: never read
    ]
    monkeypatch.setattr(storage_watch, "time", Ticks(100.0, 110.0, 200.0, 229.0, 300.0))
    w._follow(cast(subprocess.Popen, SimpleNamespace(stdout=io.BytesIO("\n".join(lines).encode() + b"\n"))))
    assert given_up == [(Answer(LOGS, 2.0, "", "EIO"), 30.0)]
    assert out.getvalue().splitlines() == [
        LEAD + NOT_ANSWERING.format(point="/mnt/cfs", fs="nfs", source="10.0.0.9:/share"),
        LEAD + "CFS at /mnt/cfs answers again after 12 s",
        LEAD + NOT_ANSWERING.format(point="/mnt/logs", fs="fuse.cfs", source="?"),
        LEAD + "CFS not answering at /mnt/logs for 30 s (limit 30 s): ending the job, since it can neither save a "
        "checkpoint nor write its log; check the CFS instance in the TI-ONE console and submit the job again (it "
        "resumes from the newest complete checkpoint)",
    ]


def test_a_watcher_that_ends_ends_its_follower_quietly() -> None:
    w, out, given_up = watch()
    w._follow(cast(subprocess.Popen, SimpleNamespace(stdout=io.BytesIO(b"[]\n[]\n"))))
    assert (out.getvalue(), given_up, w.stalled) == ("", [], None)


class Watcher:
    """The watcher process stood in for: its argv, its options, its rounds."""

    made: ClassVar[list[Watcher]] = []

    release = threading.Event()

    def __init__(self, argv: list[str], **options: object) -> None:
        self.argv, self.options, self.killed = argv, options, 0
        self.stdout = self._rounds()
        Watcher.made.append(self)

    def _rounds(self) -> Iterator[bytes]:
        assert Watcher.release.wait(30)
        yield json.dumps([row(CFS, 1.0)]).encode() + b"\n"

    def kill(self) -> None:
        self.killed += 1


def test_the_watcher_is_started_in_a_session_of_its_own_and_its_rounds_are_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Watcher.made, Watcher.release = [], threading.Event()
    monkeypatch.setattr(storage_watch.subprocess, "Popen", Watcher)
    ended = threading.Event()
    out = io.StringIO()
    w = StorageWatch([CFS, LOGS], 5.0, 2.5, 0.0, out, Lang.EN, lambda a, s: ended.set())
    w.stop()  # nothing started yet: nothing to end
    before = set(threading.enumerate())
    w.start()
    followers = [t for t in threading.enumerate() if t.name == "storage-watch" and t not in before]
    assert [t.daemon for t in followers] == [True]  # it never holds up the launcher's exit
    Watcher.release.set()
    assert ended.wait(30), out.getvalue()  # the thread read the watcher's round: a stall, with no time allowed
    (child,) = Watcher.made
    spec = [["/mnt/cfs", "nfs", "10.0.0.9:/share", "rw,hard"], ["/mnt/logs", "fuse.cfs", "", ""]]
    assert child.argv[:5] == [sys.executable, "-m", "entrypoint.launch.storage_watch", "5.0", "2.5"]
    assert json.loads(child.argv[5]) == spec and len(child.argv) == 6
    assert child.options == {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "start_new_session": True}
    w.stop()
    assert child.killed == 1


def test_no_watcher_is_started_without_a_mount_and_a_gone_watcher_is_no_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Watcher.made = []
    monkeypatch.setattr(storage_watch.subprocess, "Popen", Watcher)
    w = StorageWatch([], 5.0, 2.5, 30.0, io.StringIO(), Lang.EN, lambda a, s: None)
    w.start()
    w.stop()
    assert Watcher.made == []

    def gone() -> None:
        raise ProcessLookupError(3, "No such process")

    w._watcher = cast(subprocess.Popen, SimpleNamespace(kill=gone))
    w.stop()


class Flushed(io.StringIO):
    """An output that notes how much had been written at each flush."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[int] = []

    def flush(self) -> None:
        self.flushed.append(len(self.getvalue()))


class Stdin:
    """The launcher's end of the watcher's stdin: a pipe, written and closed by the test."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()

    def fileno(self) -> int:
        return self.read_end


def test_the_watcher_prints_the_unanswered_mounts_each_round_until_its_stdin_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stdin = Stdin()
    os.write(stdin.write_end, b"x")  # a byte: not the end yet
    os.close(stdin.write_end)
    ready = iter([False, True, True])
    selects: list[tuple[object, ...]] = []

    def select(*args: object) -> tuple[list[object], list[object], list[object]]:
        selects.append(args)
        return ([stdin] if next(ready) else [], [], [])  # a fourth round would be an error

    probes: list[tuple[list[Mount], float]] = []
    slow, refused = Answer(LOGS, 3.0, "stat"), Answer(CFS, 0.2, "list", "Permission denied")

    def probe(mounts: list[Mount], timeout: float) -> list[Answer]:
        probes.append((mounts, timeout))
        return [Answer(CFS, 0.01, "list"), slow, refused]

    out = Flushed()
    monkeypatch.setattr(storage_watch, "select", SimpleNamespace(select=select))
    monkeypatch.setattr(storage_watch, "probe", probe)
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        storage_watch._watch(7.5, 3.0, [CFS, LOGS])
    finally:
        os.close(stdin.read_end)
    assert selects == [([stdin], [], [], 7.5)] * 3
    assert probes == [([CFS, LOGS], 3.0)] * 2
    assert out.getvalue() == (json.dumps([slow.to_json(), refused.to_json()]) + "\n") * 2
    assert out.flushed == [len(out.getvalue()) // 2, len(out.getvalue())]  # each round reaches the launcher at once


@pytest.mark.parametrize("broken", ["closed", "refused"])
def test_the_watcher_ends_when_the_launcher_no_longer_reads_it(monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    rounds = []

    def select(*args: object) -> tuple[list[object], list[object], list[object]]:
        rounds.append(args)
        assert len(rounds) < 3, "the watcher went on writing to a launcher that is gone"
        return ([], [], [])

    class Refused(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    out = io.StringIO() if broken == "closed" else Refused()
    if broken == "closed":
        out.close()
    monkeypatch.setattr(storage_watch, "select", SimpleNamespace(select=select))
    monkeypatch.setattr(storage_watch, "probe", lambda mounts, timeout: [Answer(CFS, 3.0, "")])
    monkeypatch.setattr(sys, "stdout", out)
    storage_watch._watch(1.0, 1.0, [CFS])
    assert len(rounds) == 1


# --- prefetch: the page-cache reader ------------------------------------------------------------------------------


class Steady:
    """`time` stood in for: each `monotonic()` 0.12345 s after the last (a read of a file takes that, rounded)."""

    def __init__(self) -> None:
        self.ticks = itertools.count()

    def monotonic(self) -> float:
        return next(self.ticks) * 0.12345


class Child:
    """The reader's child process stood in for: `script()` gives its output lines."""

    made: ClassVar[list[Child]] = []
    script: Callable[[], Iterator[str]] = staticmethod(lambda: iter(()))
    running_after = True  # whether it still runs once its output ended
    refuse_kill = False

    def __init__(self, argv: list[str], **options: object) -> None:
        self.argv, self.options, self.killed, self.running = argv, options, 0, True
        self.stdout = self._lines()
        Child.made.append(self)

    def _lines(self) -> Iterator[str]:
        yield from Child.script()
        self.running = Child.running_after

    def poll(self) -> int | None:
        return None if self.running else 0

    def kill(self) -> None:
        self.killed += 1
        if Child.refuse_kill:
            raise ProcessLookupError(3, "No such process")
        self.running = False


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch) -> type[Child]:
    Child.made, Child.running_after, Child.refuse_kill = [], True, False
    Child.script = staticmethod(lambda: iter(()))
    monkeypatch.setattr(prefetch.subprocess, "Popen", Child)
    return Child


def node_host(tmp_path: Path, available_kb: int | None = 8) -> Host:
    """A host whose kernel says `available_kb` of memory is available (None: says nothing)."""
    proc = tmp_path / "host" / "proc"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "meminfo").write_text(f"MemAvailable: {available_kb} kB\n" if available_kb is not None else "")
    return Host({}, tmp_path / "host")


def three_files(tmp_path: Path) -> Prefetch:
    return Prefetch(((tmp_path / "w", 1024), (tmp_path / "o", 2048), (tmp_path / "m", 100)), None)


def joined_reader(reader: prefetch.Reader) -> None:
    assert reader._thread is not None and reader._thread.daemon  # it never holds up the launcher's exit
    reader._thread.join(30)
    assert not reader._thread.is_alive()


@pytest.mark.parametrize("lang", [Lang.EN, Lang.ZH])
def test_the_reader_says_what_it_reads_names_a_failed_file_and_says_how_fast_it_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, child: type[Child], lang: Lang
) -> None:
    planned = three_files(tmp_path)
    w, o, m = (str(p) for p, _ in planned.files)
    out = io.StringIO()
    reader = prefetch.Reader(node_host(tmp_path), out, lang, python="/opt/python3")
    reports = [
        {"path": w, "bytes": 1024, "seconds": 0.1},
        {"path": o, "bytes": 2048, "seconds": 0.2},
        {"path": m, "bytes": 0, "error": "Permission denied"},
    ]

    def script() -> Iterator[str]:
        yield "not json\n"
        yield "[1]\n"
        yield '{"note": 1}\n'
        yield '{"done": false}\n'
        yield from (json.dumps(r) + "\n" for r in reports)
        reader.outcomes[-1].started = 998.0  # two seconds before the `done` line is read
        yield '{"done": true, "capped": false}\n'

    child.script = staticmethod(script)
    child.running_after = False
    monkeypatch.setattr(prefetch, "time", Ticks(1000.0))
    reader.start(planned)
    joined_reader(reader)
    (made,) = child.made
    assert made.argv[:3] == ["/opt/python3", "-m", "entrypoint.launch.prefetch"] and len(made.argv) == 4
    assert json.loads(made.argv[3]) == {"files": [[w, 1024], [o, 2048], [m, 100]], "budget": 4096}
    assert made.options == {
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.DEVNULL,
        "text": True,
        "close_fds": True,
        "start_new_session": True,
    }
    assert out.getvalue() == (
        said(
            lang,
            "reading 3 file(s), 3.1 KiB, into this node's page cache while the trainer starts (base weights)",
            "训练进程启动期间,把 3 个文件(3.1 KiB)读入本节点的页缓存(基座权重)",
        )
        + said(
            lang,
            f"page cache: {m} could not be read ahead (Permission denied); the trainer reads it itself",
            f"页缓存:无法预读 {m}(Permission denied);训练进程将自行读取",
        )
        + said(
            lang,
            "page cache: 3.0 KiB read in 2.0 s (1.5 KiB/s) while the trainer started",
            "页缓存:训练进程启动期间 2.0 秒读入 3.0 KiB(1.5 KiB/s)",
        )
    )
    reader.stop()  # it ended by itself: nothing to kill, nothing cut short
    assert made.killed == 0
    expected = {"budget_bytes": 4096, "files": reports, "bytes": 3072, "seconds": 2.0, "capped": False}
    assert reader.to_json() == [{**expected, "stopped": None}]


def test_a_capped_read_says_how_much_of_the_plan_it_read_and_the_budget(tmp_path: Path, child: type[Child]) -> None:
    planned = three_files(tmp_path)
    child.script = staticmethod(lambda: iter(['{"path": "w", "bytes": 3072}\n', '{"done": true, "capped": true}\n']))
    out = io.StringIO()
    reader = prefetch.Reader(node_host(tmp_path, 8), out, Lang.BOTH)
    reader.start(planned)
    joined_reader(reader)
    assert child.made[0].argv[0] == sys.executable  # the launcher's own Python unless told otherwise
    assert out.getvalue().split("\n", 2)[2] == both(
        "page cache: 3.0 KiB of 3.1 KiB read, capped at half of the memory available (4.0 KiB)",
        "页缓存:已读入 3.0 KiB(计划 3.1 KiB),上限为可用内存的一半(4.0 KiB)",
    )
    assert reader.outcomes[0].capped is True and reader.to_json()[0]["capped"] is True


def test_the_done_line_without_a_measured_time_or_budget_says_so(tmp_path: Path) -> None:
    out = io.StringIO()
    reader = prefetch.Reader(node_host(tmp_path), out, Lang.EN)
    planned = three_files(tmp_path)
    read = prefetch.Outcome(None, files=[{"path": "w", "bytes": 2048}])
    reader._say_done(read, planned)
    read.seconds = 0.0
    reader._say_done(read, planned)
    read.seconds = 0.5
    reader._say_done(read, planned)
    read.capped = True
    reader._say_done(read, planned)
    assert out.getvalue().splitlines() == [
        f"{LEAD}page cache: 2.0 KiB read in 0.0 s (?/s) while the trainer started",
        f"{LEAD}page cache: 2.0 KiB read in 0.0 s (?/s) while the trainer started",
        f"{LEAD}page cache: 2.0 KiB read in 0.5 s (4.0 KiB/s) while the trainer started",
        f"{LEAD}page cache: 2.0 KiB of 3.1 KiB read, capped at half of the memory available (0 B)",
    ]


def test_an_outcome_adds_up_the_bytes_read_and_rounds_its_time() -> None:
    outcome = prefetch.Outcome(7, started=1.0)
    assert (outcome.files, outcome.seconds, outcome.capped, outcome.stopped, outcome.bytes) == (
        [],
        None,
        False,
        None,
        0,
    )
    outcome.files += [{"path": "a", "bytes": 5}, {"path": "b", "error": "EIO"}, {"path": "c", "bytes": "7"}]
    outcome.seconds = 1.23456
    assert outcome.to_json() == {
        "budget_bytes": 7,
        "files": outcome.files,
        "bytes": 12,
        "seconds": 1.235,
        "capped": False,
        "stopped": None,
    }


def test_stopping_a_reader_still_running_kills_it_and_marks_its_outcome_ended(
    tmp_path: Path, child: type[Child]
) -> None:
    reader = prefetch.Reader(node_host(tmp_path), io.StringIO(), Lang.EN)
    reader.stop()  # nothing started: nothing to do
    reader.start(three_files(tmp_path))
    joined_reader(reader)
    reader.stop()
    reader.stop()  # once only
    (made,) = child.made
    assert made.killed == 1 and reader.to_json()[0]["stopped"] == "ended"


def test_a_read_stuck_on_the_storage_is_left_behind(tmp_path: Path, child: type[Child]) -> None:
    storage = threading.Event()  # answers again when the test sets it

    def stuck() -> Iterator[str]:
        storage.wait(30)  # a read in the kernel: killing the child does not end it
        yield from ()

    child.script = staticmethod(stuck)
    reader = prefetch.Reader(node_host(tmp_path), io.StringIO(), Lang.EN)
    reader.start(three_files(tmp_path))
    follower = reader._thread
    try:
        reader.stop()  # returns while the read still waits
        assert follower is not None and follower.is_alive()
        assert child.made[0].killed == 1 and reader.to_json()[0]["stopped"] == "ended"
    finally:
        storage.set()


class Joins:
    """A thread stood in for: notes each `join` bound, and returns at once (as a join that timed out)."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def join(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)


def test_stopping_waits_a_second_at_most_for_the_follower_of_a_read_stuck_on_the_storage(
    tmp_path: Path, child: type[Child]
) -> None:
    storage = threading.Event()

    def stuck() -> Iterator[str]:
        storage.wait(30)  # a read in the kernel: killing the child does not end it
        yield from ()

    child.script = staticmethod(stuck)
    reader = prefetch.Reader(node_host(tmp_path), io.StringIO(), Lang.EN)
    reader.start(three_files(tmp_path))
    follower, joins = reader._thread, Joins()
    reader._thread = cast(threading.Thread, joins)
    try:
        reader.stop()  # the follower's last lines reach the record if they come within a second; no longer waited
        assert joins.timeouts == [1]
    finally:
        storage.set()
    assert follower is not None
    follower.join(30)


def test_a_reader_that_cannot_be_killed_or_that_finished_keeps_its_outcome(tmp_path: Path, child: type[Child]) -> None:
    child.refuse_kill = True
    reader = prefetch.Reader(node_host(tmp_path), io.StringIO(), Lang.EN)
    reader.start(three_files(tmp_path))
    joined_reader(reader)
    reader.stop()
    assert reader.to_json()[0]["stopped"] == "ended"
    child.refuse_kill = False
    child.script = staticmethod(lambda: iter(['{"done": true}\n']))
    reader.start(three_files(tmp_path))  # a restart's read while the child reports done but is still exiting
    joined_reader(reader)
    reader.stop()
    assert child.made[1].killed == 1 and reader.outcomes[1].seconds is not None
    assert reader.to_json()[1]["stopped"] is None


def test_a_new_read_ends_the_one_still_running_and_a_closed_reader_starts_none(
    tmp_path: Path, child: type[Child]
) -> None:
    out = io.StringIO()
    reader = prefetch.Reader(node_host(tmp_path), out, Lang.EN)
    reader.start(three_files(tmp_path))
    joined_reader(reader)
    reader.start(Prefetch(((tmp_path / "o", 2048),), 30, weights=False))
    joined_reader(reader)
    assert [c.killed for c in child.made] == [1, 0]
    assert [o["stopped"] for o in reader.to_json()] == ["ended", None]
    reader.close()
    assert [c.killed for c in child.made] == [1, 1]
    reader.start(three_files(tmp_path))
    assert len(child.made) == 2 and len(reader.outcomes) == 2
    assert out.getvalue().splitlines()[1] == (
        f"{LEAD}reading 1 file(s), 2.0 KiB, into this node's page cache while the trainer starts "
        "(checkpoint of step 30)"
    )


@pytest.mark.parametrize(
    "refusal, said",
    [
        (FileNotFoundError(2, "No such file or directory"), "not started: No such file or directory"),
        (OSError("fork refused"), "not started: fork refused"),
    ],
)
def test_a_reader_that_cannot_start_says_why_in_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: OSError, said: str
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise refusal

    monkeypatch.setattr(prefetch.subprocess, "Popen", refuse)
    reader = prefetch.Reader(node_host(tmp_path, None), io.StringIO(), Lang.EN)
    reader.start(three_files(tmp_path))
    assert reader._thread is None  # nothing to follow
    reader.stop()
    assert reader.to_json() == [
        {"budget_bytes": None, "files": [], "bytes": 0, "seconds": None, "capped": False, "stopped": said}
    ]


class Polls:
    """The reader's `closed` event stood in for: `wait` answers False `left` times (a poll), then True (closed)."""

    def __init__(self, left: int) -> None:
        self.left, self.timeouts, self.over = left, cast(list[float], []), threading.Event()
        self.threads: set[tuple[str, bool]] = set()

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        self.threads.add((threading.current_thread().name, threading.current_thread().daemon))
        if self.left == 0:
            self.over.set()
            return True
        self.left -= 1
        return False

    def is_set(self) -> bool:
        return False


def test_each_new_attempt_after_the_first_reads_the_newest_checkpoint_again(tmp_path: Path) -> None:
    reader = prefetch.Reader(node_host(tmp_path), io.StringIO(), Lang.EN)
    polls = Polls(5)
    reader._closed = cast(threading.Event, polls)
    seen = iter([0, 1, 2, 2, 3, 3])
    checkpoint = Prefetch(((tmp_path / "o", 1),), 30, weights=False)
    plans = iter([None, checkpoint])
    replans: list[int] = []
    starts: list[Prefetch] = []

    def replan() -> Prefetch | None:
        replans.append(1)
        return next(plans)

    monkeypatch_start = cast(Any, reader)
    monkeypatch_start.start = starts.append
    reader.follow_restarts(lambda: next(seen), replan)
    assert polls.over.wait(30)
    assert (len(replans), starts, polls.timeouts) == (2, [checkpoint], [1.0] * 6)
    assert polls.threads == {("prefetch-restarts", True)}  # a watch of its own that never holds up the exit


def test_read_ahead_reads_each_file_up_to_its_planned_size_and_names_what_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big, short, folder, gone, fine, one = (tmp_path / n for n in ("big", "short", "folder", "gone", "fine", "one"))
    big.write_bytes(b"b" * ((8 << 20) + 100))  # more than one read
    short.write_bytes(b"s" * 40)  # shorter than planned: it shrank since the plan
    folder.mkdir()
    fine.write_bytes(b"f" * 50)
    one.write_bytes(b"1")
    monkeypatch.setattr(prefetch, "time", Steady())
    reports: list[dict[str, object]] = []
    files = [(str(big), (8 << 20) + 5), (str(short), 100), (str(folder), 10), (str(gone), 10), (str(fine), 10)]
    files.append((str(one), 1))
    prefetch.read_ahead(files, None, reports.append)
    assert reports == [
        {"path": str(big), "bytes": (8 << 20) + 5, "seconds": 0.123},
        {"path": str(short), "bytes": 40, "seconds": 0.123},
        {"path": str(folder), "bytes": 0, "error": "not a regular file"},
        {"path": str(gone), "bytes": 0, "error": "No such file or directory"},
        {"path": str(fine), "bytes": 10, "seconds": 0.123},
        {"path": str(one), "bytes": 1, "seconds": 0.123},
        {"done": True, "capped": False},
    ]


@pytest.mark.parametrize(
    "budget, read, capped",
    [
        (3000, [3000], True),  # the budget spent on the first file: the second is not opened
        (4000, [3000, 1000], True),
        (5000, [3000, 2000], False),  # exactly enough
        (3001, [3000, 1], True),  # one byte left: the second file's first byte read
        (3140, [40, 3000, 100], False),  # a short file uses only what it read; a missing one nothing
    ],
)
def test_read_ahead_stays_inside_its_budget_and_says_when_it_was_capped(
    tmp_path: Path, budget: int, read: list[int], capped: bool
) -> None:
    short, first, second = tmp_path / "short", tmp_path / "first", tmp_path / "second"
    short.write_bytes(b"s" * 40)
    first.write_bytes(b"a" * 3000)
    second.write_bytes(b"b" * 2000)
    reports: list[dict[str, object]] = []
    files = [(str(first), 3000), (str(second), 2000)]
    if len(read) == 3:
        files = [(str(short), 100), (str(tmp_path / "gone"), 500), (str(first), 3000), (str(second), 100)]
    prefetch.read_ahead(files, budget, reports.append)
    assert [r["bytes"] for r in reports if "seconds" in r] == read
    assert reports[-1] == {"done": True, "capped": capped}


@pytest.mark.parametrize("hint", ["refused", "missing"])
def test_read_ahead_reads_on_where_the_kernel_refuses_the_sequential_hint_or_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hint: str
) -> None:
    path = tmp_path / "w"
    path.write_bytes(b"w" * 64)

    def refuse(fd: int, offset: int, length: int, advice: int) -> None:
        raise OSError(errno.EINVAL, "Invalid argument")

    if hint == "refused":
        monkeypatch.setattr(os, "posix_fadvise", refuse)
    else:
        monkeypatch.delattr(os, "posix_fadvise")  # a system without it
    monkeypatch.setattr(prefetch, "time", Steady())
    reports: list[dict[str, object]] = []
    prefetch.read_ahead([(str(path), 64)], None, reports.append)
    assert reports == [{"path": str(path), "bytes": 64, "seconds": 0.123}, {"done": True, "capped": False}]


def test_the_reader_child_reads_its_spec_nicely_and_prints_one_json_line_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    niced: list[int] = []

    def nice(increment: int) -> int:
        niced.append(increment)
        raise PermissionError(1, "Operation not permitted")  # refused: it reads anyway

    monkeypatch.setattr(os, "nice", nice)
    monkeypatch.setattr(prefetch, "time", Steady())
    path = tmp_path / "w"
    path.write_bytes(b"w" * 64)
    out = Flushed()
    monkeypatch.setattr(sys, "stdout", out)
    assert prefetch.main([json.dumps({"files": [[str(path), "64"]]})]) == 0
    assert niced == [10]
    first = json.dumps({"path": str(path), "bytes": 64, "seconds": 0.123}) + "\n"
    assert out.getvalue() == first + json.dumps({"done": True, "capped": False}) + "\n"
    assert out.flushed == [len(first), len(out.getvalue())]  # each line reaches the launcher at once
    prefetch.main([json.dumps({"files": [[str(path), 64]], "budget": 10})])
    assert json.loads(out.getvalue().splitlines()[2])["bytes"] == 10


# --- presence: beats, lost nodes and the job's end -----------------------------------------------------------------


JOB = {"MASTER_ADDR": "host-a", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "NODE_LIST": "host-a:8,host-b:8"}


def digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()[:16]


def test_the_run_folder_is_named_by_the_experiment_and_the_jobs_variables(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    text = b"MASTER_ADDR=host-a\nMASTER_PORT=23456\nWORLD_SIZE=2\nNODE_LIST=host-a:8,host-b:8\n"
    text += b"GPU_NUM=\nGPU_NUM_PER_NODE=\nexp"
    assert run_folder(logs, "exp", JOB) == logs / ".runs" / f"exp-{digest(text)}"
    long = {**JOB, "MASTER_ADDR": "a" * 5000, "GPU_NUM": "\udcff"}  # cut at 4096; bytes that are not UTF-8 kept
    middle = b"\nMASTER_PORT=23456\nWORLD_SIZE=2\nNODE_LIST=host-a:8,host-b:8\n"
    text = b"MASTER_ADDR=" + b"a" * 4096 + middle + b"GPU_NUM=\xff\nGPU_NUM_PER_NODE=\nexp"
    assert run_folder(logs, "exp", long) == logs / ".runs" / f"exp-{digest(text)}"
    assert run_folder(logs, "exp", {**JOB, "WORLD_SIZE": "000002x"}) is not None  # six digits read
    for no in ({"WORLD_SIZE": "1"}, {"WORLD_SIZE": "two"}, {"MASTER_ADDR": ""}, {"WORLD_SIZE": "0000002"}):
        assert run_folder(logs, "exp", {**JOB, **no}) is None, no
    assert run_folder(logs, "exp", {"MASTER_ADDR": "host-a"}) is None  # one node when WORLD_SIZE is not set


def test_each_nodes_host_comes_from_node_list_in_rank_order() -> None:
    env = {"NODE_LIST": " host-a:8, 10.0.0.2:8 ,,:8,host-e,[fe80::1]:8"}
    assert node_hosts(env, 7) == ["host-a", "10.0.0.2", "?", "?", "[fe80::1]", "?", "?"]
    assert node_hosts(env, 1) == ["host-a"] and node_hosts({}, 0) == []


@pytest.mark.parametrize(
    "name, beat",
    [
        ("node3.cafe.2.17", BeatName(3, "cafe", 2, 17)),
        ("node12.cafe.done", BeatName(12, "cafe", None, 0)),
        ("node3..0.1", BeatName(3, "", 0, 1)),
        ("node3.cafe.dome", None),
        ("node3.cafe.2", None),
        ("node.cafe.2.17", None),
        ("nodeX.cafe.2.17", None),
        ("nod3.cafe.2.17", None),
        ("node3.cafe.a.17", None),
        ("node3.cafe.2.b", None),
        ("node3.cafe.2.17.1", None),
        ("node3.cafe", None),
        ("end.json", None),
    ],
)
def test_a_beat_is_read_back_from_its_name(name: str, beat: BeatName | None) -> None:
    assert parse_beat(name) == beat
    if beat is not None and beat.token:
        assert beat.name == name


def test_a_lost_node_is_recorded_with_its_silence_to_a_tenth_of_a_second() -> None:
    assert LostNode(2, "host-c", 75.06, True, 60.0).to_json() == {
        "node": 2,
        "host": "host-c",
        "silent_s": 75.1,
        "never_seen": True,
        "bound_s": 60.0,
    }
    assert LostNode(1, "h", 1.0, False).bound_s == 0.0


END = JobEnd(
    93,
    "do-not-requeue",
    Text("same exception", "同一异常"),
    1,
    "host-b",
    (LostNode(2, "host-c", 12.34, False, 60.0),),
    "same-exception",
)


def test_the_end_record_holds_every_field_and_reads_back_the_same() -> None:
    assert END.to_json() == {
        "exit_code": 93,
        "class": "do-not-requeue",
        "cause": {"en": "same exception", "zh": "同一异常"},
        "node": 1,
        "host": "host-b",
        "lost": [{"node": 2, "host": "host-c", "silent_s": 12.3, "never_seen": False, "bound_s": 60.0}],
        "verdict": "same-exception",
    }
    assert parse_end(END.to_json()) == JobEnd(
        93, "do-not-requeue", END.cause, 1, "host-b", (LostNode(2, "host-c", 12.3, False),), "same-exception"
    )
    assert JobEnd(1, "c", Text("a", "b"), 0, "h").to_json()["lost"] == []
    assert JobEnd(1, "c", Text("a", "b"), 0, "h").verdict is None


def test_an_end_record_written_by_hand_is_read_within_bounds() -> None:
    body = {
        "exit_code": 75,
        "node": 2,
        "class": "c" * 150,
        "cause": {"en": "e" * 4100, "zh": "z" * 4100},
        "host": "h" * 300,
        "verdict": "v" * 150,
        "lost": [
            "junk",
            {"node": "1"},
            {"node": 1, "host": "x" * 300, "silent_s": 12, "never_seen": True},
            {"node": 3, "silent_s": "12", "never_seen": 1},
            {"node": 4, "silent_s": 2.5},
        ],
    }
    lost = (LostNode(1, "x" * 200, 12.0, True), LostNode(3, "?", 0.0, False), LostNode(4, "?", 2.5, False))
    assert parse_end(body) == JobEnd(75, "c" * 100, Text("e" * 4000, "z" * 4000), 2, "h" * 200, lost, "v" * 100)
    assert parse_end({"exit_code": 1, "node": 0, "cause": {}, "lost": None}) == JobEnd(1, "", Text("", ""), 0, "?")


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"exit_code": "1", "node": 0, "cause": {}},
        {"exit_code": 1, "node": None, "cause": {}},
        {"exit_code": 1, "node": 0, "cause": "crash"},
        {"node": 0, "cause": {}},
    ],
)
def test_what_is_not_an_end_record_is_no_end(body: object) -> None:
    assert parse_end(body) is None


def node(folder: Path, rank: int, clock: Clock, nnodes: int = 4, lost_after: float = 30.0, **kw: Any) -> Presence:
    return Presence(folder, rank, nnodes, HOSTS[:nnodes], lost_after, clock=clock, token=f"tok{rank}", **kw)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "logs" / ".runs" / "exp-0123"


def names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_a_node_beats_by_renaming_its_one_file_and_ends_cleanly_with_done(runs: Path) -> None:
    runs.mkdir(parents=True)
    for name in ("node0.old.3.9", "node0.old.done", "node1.peer.0.4", "notes.txt"):
        (runs / name).touch()
    p = started(node(runs, 0, Clock(), host="host-a"))
    assert names(runs) == ["node0.tok0.0.0", "node1.peer.0.4", "notes.txt"]  # its earlier try's beats removed
    p.attempt = 2
    p.beat()
    p.beat()
    assert names(runs) == ["node0.tok0.2.2", "node1.peer.0.4", "notes.txt"]
    p.finish(clean=False)  # stopped, not ended: a beat still renames
    p.beat()
    assert names(runs)[0] == "node0.tok0.2.3"
    p.finish(clean=True)
    p.beat()  # after a clean end it stays done
    assert names(runs) == ["node0.tok0.done", "node1.peer.0.4", "notes.txt"]
    assert p.to_json() == {"folder": str(runs), "token": "tok0", "lost_after_s": 30.0}


def test_an_earlier_beat_of_this_node_that_cannot_be_removed_is_left_and_the_node_starts(runs: Path) -> None:
    runs.mkdir(parents=True)
    (runs / "node0.old.3.9").mkdir()  # not a file: removing it fails
    (runs / "node0.old.done").touch()
    started(node(runs, 0, Clock()))
    assert names(runs) == ["node0.old.3.9", "node0.tok0.0.0"]


def test_an_end_waits_two_beats_at_most_for_a_beat_stuck_on_the_storage(runs: Path) -> None:
    runs.mkdir(parents=True)
    p = node(runs, 0, Clock())
    beating = Joins()
    p._thread = cast(threading.Thread, beating)
    p.finish(clean=False)
    p.finish(clean=True)
    assert beating.timeouts == [4.0, 4.0] and names(runs) == ["node0.tok0.done"]


def test_a_node_beats_every_two_seconds_from_a_thread_that_never_holds_up_the_exit(runs: Path) -> None:
    p = node(runs, 0, Clock())
    p.start()
    beating = p._thread
    p.finish(clean=False)
    assert beating is not None and (beating.name, beating.daemon, beating.is_alive()) == ("presence", True, False)
    polls = Polls(2)
    p._stop = cast(threading.Event, polls)
    p._beating()
    assert names(runs) == ["node0.tok0.0.2"] and polls.timeouts == [2.0, 2.0, 2.0]


def test_a_node_has_a_token_of_its_own_and_this_machines_name_by_default(runs: Path) -> None:
    import socket

    a, b = (Presence(runs, 0, 2, HOSTS[:2], 60.0) for _ in range(2))
    assert a.token != b.token and len(a.token) == 8 and int(a.token, 16) >= 0
    assert a.host == socket.gethostname() and (a.attempt, a.failed_at, a.joined) == (0, None, False)


def test_a_beat_that_vanished_is_written_again_and_one_that_cannot_be_is_tried_later(runs: Path) -> None:
    p = started(node(runs, 1, Clock()))
    (runs / "node1.tok1.0.0").unlink()  # someone cleaned the folder
    p.beat()
    assert names(runs) == ["node1.tok1.0.1"]
    (runs / "node1.tok1.0.1").unlink()
    runs.rmdir()
    p.beat()  # the folder is gone: nothing written
    runs.mkdir()
    p.beat()
    assert names(runs) == ["node1.tok1.0.2"]


def test_a_clean_end_without_a_beat_still_leaves_done(runs: Path) -> None:
    runs.mkdir(parents=True)
    p = node(runs, 2, Clock())
    p.finish(clean=True)
    assert names(runs) == ["node2.tok2.done"]
    q = node(runs, 3, Clock())
    q.finish(clean=False)
    q.beat()  # stopped before any beat: it beats when asked
    assert names(runs) == ["node2.tok2.done", "node3.tok3.0.0"]
    runs.rename(runs.with_name("moved"))
    q.finish(clean=True)  # the folder is gone: nothing to rename, no error


def test_a_node_that_cannot_create_the_folder_starts_anyway(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("a file where the log folder belongs")
    p = started(node(tmp_path / "logs" / ".runs" / "x", 0, Clock()))
    assert p.look() is None and p.lost() == []
    assert os.listdir(tmp_path) == ["logs"]


def test_a_look_notes_when_each_beat_last_changed_on_this_nodes_clock(runs: Path) -> None:
    clock = Clock()
    p = started(node(runs, 0, clock, nnodes=3))
    clock.now += 10
    (runs / "node1.b.0.0").touch()
    (runs / "node3.x.7.0").touch()  # no node 3 in a job of 3 nodes
    (runs / "node3.x.done").touch()
    assert p.look() is None
    assert [p.seen(n) for n in range(4)] == [True, True, False, False]
    assert [p.silent_for(n) for n in range(3)] == [0.0, 0.0, 10.0]  # its own first seen now too
    assert p.ahead(0) is None and not p.done(3)
    clock.now += 5
    p.look()
    assert p.silent_for(1) == 5.0
    (runs / "node1.b.0.0").rename(runs / "node1.b.0.1")
    p.look()
    assert p.silent_for(1) == 0.0 and p.changed_since(1, 1014.5) and not p.changed_since(1, 1015.0)
    assert not p.changed_since(2, 1000.0) and p.changed_since(2, 999.5)  # never seen: since this node's start
    (runs / "node2.c.done").touch()
    p.look()
    assert p.changed_since(2, 2000.0) and p.done(2) and p.running() == [1]


def test_running_nodes_are_the_others_seen_and_not_done(runs: Path) -> None:
    p = started(node(runs, 1, Clock()))
    for name in ("node0.a.0.0", "node2.c.done", "node2.c.0.5"):
        (runs / name).touch()
    p.look()
    assert p.running() == [0] and p.done(2) and not p.done(0) and not p.done(1)


def test_a_node_is_lost_once_its_beat_has_not_changed_for_longer_than_the_bound(runs: Path) -> None:
    clock = Clock()
    p = started(node(runs, 0, clock, nnodes=4, lost_after=30.0))
    (runs / "node3.d.0.0").touch()
    (runs / "node2.c.done").touch()
    p.look()
    clock.now += 30
    assert p.lost() == []  # exactly the bound: not yet
    clock.now += 0.5
    assert p.lost() == [LostNode(1, "host-b", 30.5, True, 30.0), LostNode(3, "host-d", 30.5, False, 30.0)]
    p.joined = True  # every node joined torchrun's rendezvous: node 1 started, it shares no beat
    assert p.lost() == [LostNode(3, "host-d", 30.5, False, 30.0)]


def test_after_a_failure_a_node_silent_since_before_it_is_lost_after_a_minute(runs: Path) -> None:
    clock = Clock()
    p = started(node(runs, 0, clock, nnodes=4, lost_after=600.0))
    (runs / "node1.b.0.0").touch()
    p.look()
    p.failed_at = clock.now  # node 1's beat changed at the very moment of the failure: silent since before it
    clock.now += 0.5
    (runs / "node2.c.0.0").touch()  # seen after the failure: alive then
    p.look()
    clock.now += 59.5
    assert p.lost() == []
    clock.now += 0.5
    assert p.lost() == [LostNode(1, "host-b", 60.5, False, 60.0)]
    short = started(node(runs.with_name("short"), 0, clock, nnodes=2, lost_after=20.0))
    (runs.with_name("short") / "node1.b.0.0").touch()
    short.look()
    short.failed_at = clock.now
    clock.now += 20.5
    assert short.lost() == [LostNode(1, "host-b", 20.5, False, 20.0)]  # the shorter bound stands


def test_nodes_that_joined_but_share_no_beat_are_named_once_the_bound_has_passed(runs: Path) -> None:
    clock = Clock()
    p = started(node(runs, 1, clock, nnodes=4, lost_after=30.0))
    (runs / "node2.c.0.0").touch()
    p.look()
    clock.now += 31
    assert p.unshared() == []  # torchrun never started workers here
    p.joined = True
    clock.now -= 1
    assert p.unshared() == []  # exactly the bound
    clock.now += 0.5
    assert p.unshared() == [0, 3]


def test_a_node_ahead_is_one_whose_beat_carries_a_newer_attempt(runs: Path) -> None:
    p = started(node(runs, 0, Clock()))
    p.attempt = 9
    p.beat()
    for name in ("node1.b.1.0", "node1.b.3.0", "node2..5.0", "node3.d.done", "node3.d.4.0"):
        (runs / name).touch()
    p.look()
    assert p.ahead(2) == (1, 3)  # the lowest node first
    assert p.ahead(3) == (3, 4) and p.ahead(4) is None  # node 2's beat has no token; node 0 is this node


def test_the_first_end_is_written_whole_and_stands(runs: Path) -> None:
    clock = Clock()
    p, q = started(node(runs, 0, clock)), started(node(runs, 1, clock))
    assert p.announce(END) is END
    assert names(runs) == ["end.json", "node0.tok0.0.0", "node1.tok1.0.0"]  # no temporary file left
    assert json.loads((runs / "end.json").read_text(encoding="utf-8")) == END.to_json()
    assert "同一异常" in (runs / "end.json").read_text(encoding="utf-8")
    other = JobEnd(1, "training-crashed", Text("crash", "崩溃"), 1, "host-b")
    assert q.announce(other) == parse_end(END.to_json())


REPO = Path(__file__).parents[2]


def in_ascii_locale(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -c CODE ARGS` in the C locale (set once started) without UTF-8 mode: a text file opened without an
    encoding is ASCII there."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    env.update(PYTHONUTF8="0", PYTHONPATH=str(REPO))
    command = [sys.executable, "-c", f"import locale\nlocale.setlocale(locale.LC_CTYPE, 'C')\n{code}", *args]
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


ANNOUNCE = """
import json, sys
from pathlib import Path
from entrypoint.launch.presence import Presence, parse_end
end = parse_end(json.loads(sys.argv[2]))
Presence(Path(sys.argv[1]), 1, 2, ["host-a", "host-b"], 60.0, token="tok1").announce(end)
"""


def test_the_end_record_is_utf8_whatever_the_locale(runs: Path) -> None:
    runs.mkdir(parents=True)
    done = in_ascii_locale(ANNOUNCE, str(runs), json.dumps(END.to_json()))
    assert done.returncode == 0, done.stderr[-2000:]
    assert names(runs) == ["end.json"]
    end = parse_end(END.to_json())
    assert end is not None
    assert (runs / "end.json").read_bytes() == json.dumps(end.to_json(), ensure_ascii=False).encode("utf-8")


def test_an_end_that_cannot_be_written_is_still_this_nodes_end(runs: Path) -> None:
    p = started(node(runs, 0, Clock()))
    for name in os.listdir(runs):
        (runs / name).unlink()
    runs.rmdir()
    assert p.announce(END) is END and p.look() is END
    assert not runs.exists()


def test_an_end_counts_from_the_start_of_this_node_less_the_clock_skew_and_only_when_it_reads(runs: Path) -> None:
    runs.mkdir(parents=True)
    end = runs / "end.json"
    end.write_text(json.dumps(END.to_json()))
    os.utime(end, (9879.5, 9879.5))
    p = started(node(runs, 0, Clock(), wall=lambda: 10000.0))
    assert p.look() is None  # 120.5 s before this node started: an earlier try's
    os.utime(end, (9880.0, 9880.0))
    assert p.look() == parse_end(END.to_json())
    q = started(node(runs, 1, Clock(), wall=lambda: 10000.0))
    record = json.dumps(END.to_json()).encode()
    for bad in (b"not json", b"[" * 30000 + b"]" * 30000, b'{"exit_code": 1}', record + b" " * ((64 << 10) + 1)):
        end.write_bytes(bad)
        os.utime(end, (10000.0, 10000.0))
        assert q.look() is None
    end.write_bytes(record + b" " * ((64 << 10) - len(record)))  # 64 KiB exactly: still read
    assert q.look() == parse_end(END.to_json())
    end.write_text("not json")
    assert q.look() == parse_end(END.to_json())  # an end, once read, stands
    end.unlink()
    assert q.look() == parse_end(END.to_json())


class Pauses:
    """`pause` stood in for: moves the clock, lets `each` act, records every pause."""

    def __init__(self, clock: Clock, each: Callable[[], object] = lambda: None) -> None:
        self.clock, self.each, self.taken = clock, each, cast(list[float], [])

    def __call__(self, seconds: float) -> None:
        self.taken.append(seconds)
        self.clock.now += seconds
        self.each()


def test_settling_a_failure_returns_once_every_peer_showed_itself_alive_for_the_time_given(runs: Path) -> None:
    clock = Clock()
    p, peer = started(node(runs, 0, clock, nnodes=2)), started(node(runs, 1, clock, nnodes=2))
    pause = Pauses(clock, peer.beat)
    assert p.settle(1000.0, peer_first_s=1.0, pause=pause) is None
    assert (pause.taken, p.failed_at) == ([0.5, 0.5, 0.5], 1000.0)


def test_settling_a_failure_never_waits_longer_than_the_bound_after_a_failure(runs: Path) -> None:
    clock = Clock()
    p = started(node(runs, 0, clock, nnodes=2, lost_after=600.0))  # node 1 never seen
    pause = Pauses(clock)
    assert p.settle(1000.0, peer_first_s=1000.0, pause=pause) is None
    assert clock.now == 1064.5 and set(pause.taken) == {0.5}
    clock.now = 1000.0
    q = started(node(runs.with_name("short"), 0, clock, nnodes=2, lost_after=10.0))
    q.joined = True  # node 1 joined torchrun: never lost for sharing no beat
    assert q.settle(1000.0, peer_first_s=1000.0, pause=Pauses(clock)) is None
    assert clock.now == 1014.5


def test_settling_a_failure_returns_another_nodes_end_or_this_nodes_end_for_a_lost_node(runs: Path) -> None:
    clock = Clock()
    p, peer = started(node(runs, 0, clock, nnodes=2)), started(node(runs, 1, clock, nnodes=2))
    pause = Pauses(clock, lambda: peer.announce(END))
    assert p.settle(1000.0, peer_first_s=100.0, pause=pause) == parse_end(END.to_json()) and pause.taken == [0.5]
    clock = Clock()
    folder = runs.with_name("lost")
    q = started(node(folder, 0, clock, nnodes=2, lost_after=10.0, host="host-a"))
    (folder / "node1.b.0.0").touch()
    pause = Pauses(clock)
    end = q.settle(1000.0, peer_first_s=100.0, pause=pause)
    assert end is not None and (end.code, end.outcome, end.node, end.host) == (75, "node-lost", 0, "host-a")
    assert end.lost == (LostNode(1, "host-b", 10.5, False, 10.0),) and pause.taken == [0.5] * 21


def test_settling_keeps_the_latest_failure_time(runs: Path) -> None:
    clock = Clock()
    p = started(node(runs, 0, clock, nnodes=1))
    p.failed_at = 1005.0
    assert p.settle(1000.0, peer_first_s=0.0, pause=Pauses(clock)) is None
    assert p.failed_at == 1005.0
    p.settle(1007.0, peer_first_s=0.0, pause=Pauses(clock))
    assert p.failed_at == 1007.0


def test_waiting_for_the_others_clean_ends_stops_at_an_end_or_a_lost_node(runs: Path) -> None:
    clock = Clock()
    p, peer = started(node(runs, 0, clock, nnodes=2)), started(node(runs, 1, clock, nnodes=2))
    peer.announce(END)
    assert p.wait_done(30.0, Pauses(clock)) == [1] and clock.now == 1000.0
    clock = Clock()
    q = started(node(runs.with_name("lost"), 0, clock, nnodes=2, lost_after=10.0))
    (runs.with_name("lost") / "node1.b.0.0").touch()
    q.look()
    clock.now += 10.5
    assert q.wait_done(30.0, Pauses(clock)) == [1] and clock.now == 1010.5


def test_waiting_for_the_others_clean_ends_gives_up_after_the_bound(runs: Path) -> None:
    clock = Clock()
    p, peer = started(node(runs, 0, clock, nnodes=2)), started(node(runs, 1, clock, nnodes=2))
    pause = Pauses(clock, peer.beat)
    assert p.wait_done(2.0, pause) == [1] and pause.taken == [0.5] * 4


def test_the_lost_nodes_end_names_each_node_and_the_bounds_in_both_languages(runs: Path) -> None:
    p = node(runs, 0, Clock(), lost_after=600.4, host="host-a")
    lost = [LostNode(1, "host-b", 75.4, False, 60.0), LostNode(3, "host-d", 90.6, True, 600.4)]
    end = p.lost_end(lost)
    nodes_en = "node 1 (host-b) stopped: last seen 75 s ago, node 3 (host-d) never showed up in 91 s"
    nodes_zh = "节点 1(host-b)已停止:最后一次出现在 75 秒前, 节点 3(host-d)在 91 秒内从未出现"
    assert end == JobEnd(
        75,
        "node-lost",
        Text(
            f"NODE LOST: {nodes_en}; no sign of life within the bound (600 s: VLA_RENDEZVOUS_TIMEOUT=600 s, or 60 s "
            f"once training failed; beats in {runs}): every node ends with exit code 75; resubmit the job (new "
            "machines) and it resumes from the newest checkpoint",
            f"节点丢失:{nodes_zh};在时限内没有存活迹象(600 秒:VLA_RENDEZVOUS_TIMEOUT=600 秒,训练失败后为 60 秒;"
            f"心跳位于 {runs}):所有节点以退出码 75 结束;请重新提交任务(换新机器),它会从最新的检查点继续",
        ),
        0,
        "host-a",
        tuple(lost),
    )
    short = node(runs, 2, Clock(), lost_after=20.0).lost_end([LostNode(0, "host-a", 21.0, False, 20.0)])
    assert "(20 s: VLA_RENDEZVOUS_TIMEOUT=20 s, or 20 s once training failed;" in short.cause.en
