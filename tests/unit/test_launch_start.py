"""How `run` starts training, pinned in-process: the worker's wait for node 0 (`rendezvous_wait`), the bandwidth
preflight (`preflight`, `preflight_worker`) and the launch itself (`run`).

Each test drives one function with stand-ins for what lies outside it (the resolver and sockets, the clock,
torchrun, torch, the supervisor, the other nodes) and compares whole results: the exit code, the start-up record's
fields, each finding's id, status, English and Chinese text, fix and path, and every line the user reads. Nothing
waits on real time: the clocks are stand-ins, and the one real wait (a resolver that never answers) is bounded by
a fraction of a second.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from unittest import mock

import pytest

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Lang, Text
from entrypoint.core.report import health_summary, problem_block
from entrypoint.core.settings import Device, HealthMode, PreflightMode, StallAction
from entrypoint.fabric.inventory import Transport
from entrypoint.fabric.memlock import MemlockChange
from entrypoint.fabric.nccl_log import parse_lines, proof_findings
from entrypoint.health.spec import HealthGate
from entrypoint.inspect.mounts import Mount
from entrypoint.inspect.patch import MARKER, PatchState, PatchStatus
from entrypoint.inspect.resume import ResumeAction
from entrypoint.inspect.seal import Seal, SealRole
from entrypoint.inspect.storage_probe import Answer, StorageNotAnswering
from entrypoint.inspect.topology import MasterWait, Topology, TopologySource
from entrypoint.launch import flight_recorder
from entrypoint.launch import preflight as pf
from entrypoint.launch import preflight_worker as pfw
from entrypoint.launch import rendezvous_wait as rw
from entrypoint.launch import run as launch_run
from entrypoint.launch.failure import OutputTail
from entrypoint.launch.preflight import PreflightResult, PreflightStatus, Row
from entrypoint.launch.presence import JobEnd, LostNode, run_folder
from entrypoint.launch.progress import Progress
from entrypoint.launch.record import StartupRecord
from entrypoint.launch.rendezvous_wait import WaitResult, WaitStatus
from entrypoint.launch.run import OutcomeClass
from entrypoint.launch.saves import SaveWatch
from entrypoint.launch.supervisor import StartFailed
from entrypoint.plan import MemlockIntent, NodeFiles, Plan, build_plan
from entrypoint.taco.summary import SummaryReader
from tests.unit.conftest import World

LEAD = "vla-entrypoint: "
LEAD_PAD = " " * len(LEAD)


class Clock:
    """A stand-in for the `time` module of the code under test: `sleep` moves the clock on, nothing waits."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        assert len(self.sleeps) < 200, "the wait never ends"
        self.now += seconds

    def perf_counter(self) -> float:
        return self.now


# ---- rendezvous_wait: lookup and connect ----


class FakeSocket:
    """The `socket` module as `rendezvous_wait` uses it: answers and errors given by the test, calls recorded."""

    SOCK_STREAM = socket.SOCK_STREAM

    def __init__(self, infos: list[Any] | BaseException | None = None, refuse: set[str] | None = None) -> None:
        self.infos = infos
        self.refuse = refuse or set()
        self.lookups: list[tuple[str, int, object, str, bool]] = []
        self.connects: list[tuple[tuple[str, int], float]] = []
        self.release = threading.Event()

    def getaddrinfo(self, addr: str, port: int, type: object = None) -> list[Any]:
        me = threading.current_thread()
        self.lookups.append((addr, port, type, me.name, me.daemon))
        if self.infos is None:
            self.release.wait(5)  # a resolver that does not answer
            return []
        if isinstance(self.infos, BaseException):
            raise self.infos
        return self.infos

    def create_connection(self, address: tuple[str, int], timeout: float) -> io.BytesIO:
        self.connects.append((address, timeout))
        if address[0] in self.refuse:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        return io.BytesIO()


def info(address: str) -> tuple[object, ...]:
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 23456))


def test_lookup_gives_each_address_once_in_the_resolvers_order(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSocket([info("10.0.0.2"), info("10.0.0.1"), info("10.0.0.2")])
    monkeypatch.setattr(rw, "socket", fake)
    assert rw.lookup("node0", 23456, 3.0) == (("10.0.0.2", "10.0.0.1"), None)
    assert fake.lookups == [("node0", 23456, socket.SOCK_STREAM, "master-lookup", True)]


@pytest.mark.parametrize(
    "error, said",
    [
        (
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            Text("Name or service not known", "未知的主机名或服务名"),
        ),
        (UnicodeError("label too long"), Text("label too long", "系统错误(label too long)")),
    ],
    ids=["resolver-error", "bad-name"],
)
def test_lookup_that_fails_gives_no_address_and_the_error(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, said: Text
) -> None:
    monkeypatch.setattr(rw, "socket", FakeSocket(error))
    assert rw.lookup("node0", 1, 3.0) == ((), said)


def test_lookup_without_an_answer_within_its_limit_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSocket(None)
    monkeypatch.setattr(rw, "socket", fake)
    try:
        result = rw.lookup("node0", 1, 0.2)
    finally:
        fake.release.set()
    assert result == ((), Text("no answer from the resolver within 0 s", "解析器在 0 秒内没有应答"))


def test_connect_tries_each_address_until_one_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSocket(refuse={"10.0.0.9"})
    monkeypatch.setattr(rw, "socket", fake)
    assert rw.connect(("10.0.0.9", "10.0.0.1", "10.0.0.2"), 23456, 2.5) is None
    assert fake.connects == [(("10.0.0.9", 23456), 2.5), (("10.0.0.1", 23456), 2.5)]


def test_connect_where_none_accepts_gives_the_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSocket(refuse={"10.0.0.9", "10.0.0.8"})
    monkeypatch.setattr(rw, "socket", fake)
    assert rw.connect(("10.0.0.9", "10.0.0.8"), 7, 1.0) == Text("Connection refused", "连接被拒绝")
    assert [a for a, _ in fake.connects] == [("10.0.0.9", 7), ("10.0.0.8", 7)]
    with pytest.raises(AssertionError, match="no address to connect to"):
        rw.connect((), 7, 1.0)


# ---- rendezvous_wait: the pacer and the wait ----


def test_pacer_backs_off_from_a_quarter_second_to_five_never_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(rw, "time", clock)
    pace = rw._Pacer(io.StringIO(), Lang.EN)
    for _ in range(7):
        pace.pause(100.0)
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert pace.waited() == 17.75
    pace.pause(20.0)  # 2.25 s left of 20
    pace.pause(20.0)  # none left
    pace.pause(10.0)  # past the bound: no negative sleep
    assert clock.sleeps[7:] == [2.25, 0.0, 0.0]
    assert (pace.left(30.0), pace.left(20.05), pace.left(20.0), pace.left(5.0)) == (10.0, 0.1, 0.1, 0.1)


def test_pacer_prints_at_once_then_every_15_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(rw, "time", clock)
    out = io.StringIO()
    pace = rw._Pacer(out, Lang.EN)
    for now in (0.0, 14.9, 15.0, 29.9, 30.0, 44.6):
        clock.now = 1000.0 + now
        pace.progress("master-reached", addr="n0", port=1)
    assert out.getvalue().splitlines() == [
        f"{LEAD}node 0 at n0:1 accepts connections after {waited} s" for waited in (0, 15, 30)
    ]
    assert pace.printed_at == 1030.0


TARGET = MasterWait("MASTER_ADDR", "node0", 23456, 10, 4)


class Master:
    """Stand-ins for `lookup` and `connect`: each call takes the next scripted answer (the last one repeats) and
    spends `cost` seconds of the stand-in clock."""

    def __init__(
        self,
        clock: Clock,
        lookups: list[tuple[tuple[str, ...], Text | None]],
        connects: list[Text | None] | None = None,
        cost: float = 0.0,
    ) -> None:
        self.clock, self.cost = clock, cost
        self._lookups, self._connects = lookups, connects or [None]
        self.lookup_calls: list[tuple[str, int, float]] = []
        self.connect_calls: list[tuple[tuple[str, ...], int, float]] = []

    def lookup(self, addr: str, port: int, limit_s: float) -> tuple[tuple[str, ...], Text | None]:
        self.lookup_calls.append((addr, port, limit_s))
        self.clock.now += self.cost
        return self._lookups[min(len(self.lookup_calls), len(self._lookups)) - 1]

    def connect(self, addresses: tuple[str, ...], port: int, limit_s: float) -> Text | None:
        self.connect_calls.append((addresses, port, limit_s))
        self.clock.now += self.cost
        return self._connects[min(len(self.connect_calls), len(self._connects)) - 1]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(rw, "time", fake)
    return fake


def master(monkeypatch: pytest.MonkeyPatch, clock: Clock, *args: Any, **kwargs: Any) -> Master:
    stand_in = Master(clock, *args, **kwargs)
    monkeypatch.setattr(rw, "lookup", stand_in.lookup)
    monkeypatch.setattr(rw, "connect", stand_in.connect)
    return stand_in


ADDR = ("10.0.0.1", "10.0.0.2")
NO_NAME = Text("Name or service not known", "未知的主机名或服务名")
REFUSED = Text("Connection refused", "连接被拒绝")


def test_a_master_that_answers_at_once_is_reached_silently(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    stand_in = master(monkeypatch, clock, [(ADDR, None)])
    out = io.StringIO()
    result = rw.wait_for_master(TARGET, out, Lang.EN)
    assert result == WaitResult(TARGET, WaitStatus.REACHED, ADDR, 0.0, 1, None, None)
    assert out.getvalue() == "" and clock.sleeps == []
    assert stand_in.lookup_calls == [("node0", 23456, 4.0)] and stand_in.connect_calls == [(ADDR, 23456, 5.0)]
    assert result.to_json() == {
        "variable": "MASTER_ADDR",
        "addr": "node0",
        "port": 23456,
        "timeout_s": 10,
        "resolve_timeout_s": 4,
        "status": "reached",
        "addresses": ["10.0.0.1", "10.0.0.2"],
        "waited_s": 0.0,
        "attempts": 1,
        "error": None,
    }


def test_a_master_that_answers_late_is_waited_for_and_said(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    stand_in = master(monkeypatch, clock, [((), NO_NAME), ((), None), (ADDR, None)], [REFUSED, REFUSED, None])
    out = io.StringIO()
    result = rw.wait_for_master(TARGET, out, Lang.BOTH)
    assert (result.status, result.addresses, result.waited_s, result.attempts) == (
        WaitStatus.REACHED,
        ADDR,
        3.75,
        5,
    )
    assert (result.error, result.finding) == (None, None)
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0]
    assert [limit for _, _, limit in stand_in.lookup_calls] == [4.0, 3.75, 3.25]
    assert [limit for _, _, limit in stand_in.connect_calls] == [5.0, 5.0, 5.0]
    assert out.getvalue().splitlines() == [
        f"{LEAD}waiting for MASTER_ADDR node0 to resolve (0 s of 4 s): Name or service not known",
        f"{LEAD_PAD}等待 MASTER_ADDR node0 可解析(已等 0 秒,最多 4 秒):未知的主机名或服务名",
        f"{LEAD}node 0 at node0:23456 accepts connections after 4 s",
        f"{LEAD_PAD}0 号节点 node0:23456 已可连接(等待了 4 秒)",
    ]


def test_the_lookup_and_connect_limits_shrink_to_the_time_left(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    far = MasterWait("PET_MASTER_ADDR", "node0", 1, 84, 60)
    stand_in = master(monkeypatch, clock, [((), NO_NAME), (ADDR, None)], [None], cost=40.0)
    result = rw.wait_for_master(far, io.StringIO(), Lang.EN)
    assert (result.status, result.attempts, result.waited_s) == (WaitStatus.REACHED, 2, 120.25)
    assert [limit for _, _, limit in stand_in.lookup_calls] == [30.0, 19.75]  # 60 - 40.25
    assert [limit for _, _, limit in stand_in.connect_calls] == [3.75]  # 84 - 80.25


def test_a_name_that_never_resolves_fails_at_the_resolve_bound(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    stand_in = master(monkeypatch, clock, [((), NO_NAME), ((), None)])
    out = io.StringIO()
    result = rw.wait_for_master(TARGET, out, Lang.EN)
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 0.25]  # the last one up to the 4 s bound exactly
    assert len(stand_in.lookup_calls) == 6 and stand_in.connect_calls == []
    problem = Text("the name resolves to no address", "该名称没有解析到任何地址")
    what = Text(
        "MASTER_ADDR=node0 did not resolve within 4 s (the name resolves to no address); torchrun was not started "
        "on this node",
        "MASTER_ADDR=node0 在 4 秒内仍无法解析(该名称没有解析到任何地址);本节点未启动 torchrun",
    )
    fix = rw.M("master-unresolved-fix", variable="MASTER_ADDR", bound=4)
    assert fix.en.endswith("a name is retried for 4 s.") and "instance count" in fix.en
    assert result == WaitResult(
        TARGET,
        WaitStatus.UNRESOLVED,
        (),
        4.0,
        6,
        problem.en,
        failed("topology.master-unresolved", what, fix, "MASTER_ADDR"),
    )
    assert out.getvalue().splitlines() == [
        f"{LEAD}waiting for MASTER_ADDR node0 to resolve (0 s of 4 s): Name or service not known"
    ]


def test_a_port_that_never_opens_fails_at_the_bound_naming_the_addresses(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    stand_in = master(monkeypatch, clock, [(ADDR, None)], [REFUSED])
    out = io.StringIO()
    result = rw.wait_for_master(TARGET, out, Lang.EN)
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 4.0, 2.25]  # up to the 10 s bound exactly
    assert len(stand_in.connect_calls) == 7 and result.attempts == 7
    what = Text(
        "node 0 at node0:23456 (10.0.0.1, 10.0.0.2) did not accept connections within 10 s (last attempt: "
        "Connection refused); torchrun was not started on this node",
        "0 号节点 node0:23456(10.0.0.1, 10.0.0.2)在 10 秒内未接受连接(最后一次:连接被拒绝);本节点未启动 torchrun",
    )
    fix = rw.M("master-unreachable-fix", port=23456, bound=10, setting="VLA_MASTER_WAIT_TIMEOUT")
    assert "more than 10 s after this node, raise VLA_MASTER_WAIT_TIMEOUT." in fix.en
    assert result == WaitResult(
        TARGET,
        WaitStatus.UNREACHABLE,
        ADDR,
        10.0,
        7,
        "Connection refused",
        failed("topology.master-unreachable", what, fix, "node0:23456"),
    )
    assert out.getvalue().splitlines() == [
        f"{LEAD}waiting for node 0 at node0:23456 (10.0.0.1, 10.0.0.2) to accept connections (0 s of 10 s): "
        "Connection refused"
    ]


def test_a_job_ended_elsewhere_ends_the_wait_at_the_next_attempt(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    master(monkeypatch, clock, [((), NO_NAME)])
    asked: list[int] = []

    def job_ended() -> bool:
        asked.append(1)
        return len(asked) >= 2

    result = rw.wait_for_master(TARGET, io.StringIO(), Lang.EN, job_ended)
    assert result == WaitResult(TARGET, WaitStatus.JOB_ENDED, (), 0.25, 2, None, None)
    master(monkeypatch, clock, [(ADDR, None)], [REFUSED])
    clock.now = 0.0
    result = rw.wait_for_master(TARGET, io.StringIO(), Lang.EN, lambda: True)
    assert result == WaitResult(TARGET, WaitStatus.JOB_ENDED, ADDR, 0.0, 1, None, None)


def test_the_bound_is_checked_before_asking_whether_the_job_ended(
    monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    master(monkeypatch, clock, [(ADDR, None)], [REFUSED], cost=10.0)
    result = rw.wait_for_master(TARGET, io.StringIO(), Lang.EN, lambda: True)
    assert result.status is WaitStatus.UNREACHABLE and result.waited_s == 20.0
    master(monkeypatch, clock, [((), NO_NAME)], cost=4.0)
    result = rw.wait_for_master(TARGET, io.StringIO(), Lang.EN, lambda: True)
    assert result.status is WaitStatus.UNRESOLVED and result.waited_s == 4.0


# ---- preflight ----


GPU_SIZES = "1048576,16777216,134217728,536870912"
NCCL_LINE = "nodeA:41:41 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"


def preflight_plan(
    nnodes: int = 2,
    nproc: int = 8,
    rank: int = 0,
    device: Device = Device.GPU,
    transport: Transport = Transport.IB,
    min_busbw: float | None = None,
    wait: MasterWait | None = None,
    node_vars: tuple[str, ...] = (),
    env_kept: dict[str, str] | None = None,
) -> Any:
    """What `run_preflight` reads of a plan."""
    topo = Topology(nnodes, rank, nproc, "10.0.0.1", 29500, TopologySource.TIONE, device)
    return types.SimpleNamespace(
        topology=topo,
        settings=types.SimpleNamespace(preflight_min_busbw=min_busbw, preflight_timeout=300, rendezvous_timeout=600),
        fabric=types.SimpleNamespace(transport=transport, env_kept=env_kept or {}),
        launch=types.SimpleNamespace(wait_for_master=wait, node_file_variables=node_vars),
    )


def row(size: int, median: float, reps: tuple[float, ...] = (1.0, 2.0, 3.0)) -> Row:
    return {"bytes": size, "busbw_gbps": list(reps), "median_gbps": median}


class Torchrun:
    """A stand-in `subprocess.Popen` for the preflight's torchrun: writes the worker's result file and NCCL log
    where the command says, prints `output`, exits `code`; `hang`: does not finish within the timeout."""

    def __init__(
        self, rows: list[Row] | None = None, output: str = "", code: int = 0, hang: bool = False, nccl: bool = True
    ) -> None:
        self.rows, self.output, self.code, self.hang, self.nccl = rows, output, code, hang, nccl
        self.nccl_line = NCCL_LINE
        self.command: list[str] = []
        self.kwargs: dict[str, Any] = {}
        self.timeouts: list[float | None] = []
        self.killed: list[tuple[int, int]] = []
        self.pid = 4242
        self.returncode: int | None = None

    def __call__(self, command: list[str], **kwargs: Any) -> Torchrun:
        self.command, self.kwargs = command, kwargs
        folder = Path(kwargs["cwd"])
        assert folder.name.startswith("vla-preflight-") and folder.is_dir()
        if self.nccl:
            (folder / "nccl.nodeA.41.log").write_text(self.nccl_line)
        if self.rows is not None:
            Path(command[command.index("--out") + 1]).write_text(json.dumps({"results": self.rows}))
        return self

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.timeouts.append(timeout)
        if self.hang and timeout is not None:
            raise subprocess.TimeoutExpired(self.command, timeout)
        self.returncode = self.code
        return self.output, None

    def killpg(self, pid: int, sig: int) -> None:
        self.killed.append((pid, sig))


@pytest.fixture
def torchrun(monkeypatch: pytest.MonkeyPatch) -> Torchrun:
    fake = Torchrun()
    stand_in = types.SimpleNamespace(
        Popen=fake, PIPE=subprocess.PIPE, STDOUT=subprocess.STDOUT, TimeoutExpired=subprocess.TimeoutExpired
    )
    monkeypatch.setattr(pf, "subprocess", stand_in)
    monkeypatch.setattr(pf, "os", types.SimpleNamespace(killpg=fake.killpg))
    return fake


TRAINING_ENV = {"PATH": "/nonexistent", "KEEP": "1", "TORCHELASTIC_ERROR_FILE": "/logs/err.json"}
NO_TORCHRUN = {"PATH": "/nonexistent"}  # a machine with torch installed has a real torchrun on its PATH


def expected_command(folder: str, sizes: str = GPU_SIZES, nnodes: int = 2, nproc: int = 8, rank: int = 0) -> list[str]:
    return [
        "torchrun",
        "--nnodes",
        str(nnodes),
        "--nproc_per_node",
        str(nproc),
        "--node_rank",
        str(rank),
        "--master_addr",
        "10.0.0.1",
        "--master_port",
        "29501",
        "--rdzv_conf",
        "timeout=600",
        "-m",
        "entrypoint.launch.preflight_worker",
        "--sizes",
        sizes,
        "--out",
        f"{folder}/result.json",
    ]


NCCL_PROOF = {
    "nodes": [
        {
            "host": "nodeA",
            "kind": "local",
            "net": [],
            "net_channels": 0,
            "gdr_channels": 0,
            "intra": ["P2P/IPC"],
            "nics": [],
            "network": [],
            "nccl_version": None,
        }
    ],
    "socket_nodes": [],
}


def nccl_findings() -> list[Finding]:
    """What the transport proof says of the stand-in's NCCL log."""
    return list(proof_findings(parse_lines([NCCL_LINE]), Transport.IB))


def test_a_preflight_that_reaches_the_minimum_passes(torchrun: Torchrun) -> None:
    torchrun.rows = [row(1 << 20, 10.0), row(512 << 20, 180.0, (179.5, 180.0, 181.25))]
    out = io.StringIO()
    plan = preflight_plan(node_vars=("TORCHELASTIC_ERROR_FILE",))
    result = pf.run_preflight(plan, dict(TRAINING_ENV), out, Lang.EN)
    folder = torchrun.kwargs["cwd"]
    assert torchrun.command == expected_command(folder)
    assert torchrun.kwargs == {
        "env": {
            "PATH": "/nonexistent",
            "KEEP": "1",
            "VLA_DEVICE": "gpu",
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "NCCL_DEBUG_FILE": f"{folder}/nccl.%h.%p.log",
        },
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        "text": True,
        "errors": "replace",
        "start_new_session": True,
        "cwd": folder,
    }
    assert torchrun.timeouts == [300] and not Path(folder).exists()  # the temp folder is gone afterwards
    assert out.getvalue() == f"{LEAD}preflight: all-reduce over 16 processes (2 node(s)), timeout 300s\n"
    message = Text("all-reduce bus bandwidth 180.0 GB/s >= 180.0 GB/s", "all-reduce 总线带宽 180.0 GB/s >= 180.0 GB/s")
    assert nccl_findings()[0].id == "fabric.proof"
    assert result == PreflightResult(
        PreflightStatus.PASSED, 180.0, torchrun.rows, NCCL_PROOF, [*nccl_findings(), passed("preflight", message)]
    )


def test_a_preflight_just_below_the_minimum_warns(torchrun: Torchrun) -> None:
    torchrun.rows = [row(1 << 20, 10.0), row(512 << 20, 179.9)]
    result = pf.run_preflight(preflight_plan(), dict(TRAINING_ENV), io.StringIO(), Lang.EN)
    below = warned(
        "preflight",
        Text(
            "all-reduce bus bandwidth 179.9 GB/s is below the minimum 180.0 GB/s",
            "all-reduce 总线带宽 179.9 GB/s 低于最低要求 180.0 GB/s",
        ),
        pf.M("preflight-below-fix"),
        "VLA_PREFLIGHT_MIN_BUSBW",
    )
    assert pf.M("preflight-below-fix").en.startswith("Compare `vla-entrypoint plan` (transport, devices)")
    assert (result.status, result.minimum_gbps, result.failed) == (PreflightStatus.BELOW, 180.0, True)
    assert result.findings == [*nccl_findings(), below]


def test_a_cpu_preflight_reports_without_a_minimum(torchrun: Torchrun) -> None:
    torchrun.rows = [row(64 << 10, 0.5), row(8 << 20, 1.234)]
    torchrun.nccl = False
    plan = preflight_plan(nnodes=1, nproc=2, device=Device.CPU)
    result = pf.run_preflight(plan, {"PATH": "/nonexistent"}, io.StringIO(), Lang.EN)
    assert torchrun.command == expected_command(torchrun.kwargs["cwd"], "65536,1048576,8388608", nnodes=1, nproc=2)
    assert torchrun.kwargs["env"]["VLA_DEVICE"] == "cpu"
    cpu = Text(
        "all-reduce bus bandwidth 1.23 GB/s at 8 MiB (no expectation on CPU)",
        "all-reduce 总线带宽 1.23 GB/s(8 MiB,CPU 无期望值)",
    )
    no_proof = {"nodes": [], "socket_nodes": []}
    assert result == PreflightResult(PreflightStatus.PASSED, None, torchrun.rows, no_proof, [passed("preflight", cpu)])


def test_one_process_in_the_whole_job_skips_the_preflight(torchrun: Torchrun) -> None:
    result = pf.run_preflight(preflight_plan(nnodes=1, nproc=1, min_busbw=5), NO_TORCHRUN, io.StringIO(), Lang.EN)
    one = Text(
        "one process in the whole job: a single GPU has no peers, so there is no bandwidth to measure",
        "整个任务只有一个进程:单卡没有对端,无需测量带宽",
    )
    assert result == PreflightResult(PreflightStatus.SKIPPED, None, findings=[passed("preflight", one)])
    assert torchrun.command == [] and not result.failed


def test_a_failed_all_reduce_is_an_error_quoting_its_last_line(torchrun: Torchrun) -> None:
    torchrun.output, torchrun.code = "x" * 5000 + "\nNCCL error: unhandled system error  \n\n   \n", 1
    result = pf.run_preflight(preflight_plan(), dict(TRAINING_ENV), io.StringIO(), Lang.EN)
    message = Text(
        "the preflight all-reduce failed (exit 1); its output ends: NCCL error: unhandled system error",
        "预检 all-reduce 失败(退出码 1);输出结尾:NCCL error: unhandled system error",
    )
    fix = Text(
        "Read the output above; the same failure would stop training at its first step.",
        "请查看上方输出;同样的故障会让训练在第一步失败。",
    )
    assert (result.status, result.minimum_gbps, result.results, result.failed) == (
        PreflightStatus.ERROR,
        180.0,
        [],
        True,
    )
    assert result.findings == [*nccl_findings(), failed("preflight", message, fix)]
    assert result.output_tail == torchrun.output[-4000:] and len(result.output_tail) == 4000
    assert result.transport == NCCL_PROOF


def test_an_all_reduce_that_wrote_no_result_is_an_error(torchrun: Torchrun) -> None:
    torchrun.nccl = False
    result = pf.run_preflight(preflight_plan(), dict(TRAINING_ENV), io.StringIO(), Lang.EN)
    assert result.status is PreflightStatus.ERROR and len(result.findings) == 1
    assert result.findings[-1].message == Text(
        "the preflight all-reduce failed (exit 0); its output ends: (nothing)",
        "预检 all-reduce 失败(退出码 0);输出结尾:(无输出)",
    )


@pytest.mark.parametrize("nnodes, hint", [(1, "preflight-hang-one-node"), (2, "preflight-hang-nodes")])
def test_an_all_reduce_that_does_not_finish_is_killed_as_a_hang(torchrun: Torchrun, nnodes: int, hint: str) -> None:
    torchrun.hang, torchrun.output = True, "y" * 4100
    result = pf.run_preflight(preflight_plan(nnodes=nnodes), dict(TRAINING_ENV), io.StringIO(), Lang.EN)
    assert torchrun.killed == [(4242, 9)] and torchrun.timeouts == [300, None]
    hang = Text("the preflight all-reduce did not finish within 300s", "预检 all-reduce 在 300 秒内未完成")
    assert result == PreflightResult(
        PreflightStatus.HANG,
        180.0,
        findings=[failed("preflight.hang", hang, pf.M(hint), "VLA_PREFLIGHT_TIMEOUT")],
        output_tail="y" * 4000,
    )
    assert pf.M("preflight-hang-one-node").en.startswith("Within one node this points at GPU peer-to-peer")
    assert pf.M("preflight-hang-nodes").en.startswith("Across nodes this points at the network")


def test_a_worker_node_waits_for_node_0s_preflight_port_first(
    torchrun: Torchrun, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[MasterWait] = []
    unreachable = failed("topology.master-unreachable", Text("no", "否"), Text("fix", "修"), "n0:29501")

    def wait(target: MasterWait, out: object, lang: object) -> WaitResult:
        waited.append(target)
        return WaitResult(target, WaitStatus.UNREACHABLE, (), 1.0, 1, "refused", unreachable)

    monkeypatch.setattr(pf, "wait_for_master", wait)
    target = MasterWait("MASTER_ADDR", "n0", 29500, 60, 30)
    result = pf.run_preflight(preflight_plan(rank=1, wait=target), NO_TORCHRUN, io.StringIO(), Lang.EN)
    assert waited == [MasterWait("MASTER_ADDR", "n0", 29501, 60, 30)]
    assert result == PreflightResult(PreflightStatus.ERROR, 180.0, findings=[unreachable])
    assert torchrun.command == []
    reached = WaitResult(target, WaitStatus.REACHED, (), 1.0, 1, None, None)
    monkeypatch.setattr(pf, "wait_for_master", lambda target, out, lang: reached)
    torchrun.rows = [row(1 << 20, 500.0)]
    result = pf.run_preflight(preflight_plan(rank=1, wait=target), NO_TORCHRUN, io.StringIO(), Lang.EN)
    assert result.status is PreflightStatus.PASSED
    assert torchrun.command == expected_command(torchrun.kwargs["cwd"], rank=1)[:-2] + torchrun.command[-2:]


@pytest.mark.parametrize(
    "plan, minimum",
    [
        (preflight_plan(min_busbw=5), 5.0),
        (preflight_plan(nnodes=1, nproc=1, min_busbw=7), 7.0),
        (preflight_plan(device=Device.CPU), None),
        (preflight_plan(nnodes=1, nproc=1), None),
        (preflight_plan(nnodes=1, nproc=2, transport=Transport.LOCAL), 185.0),
        (preflight_plan(transport=Transport.IB), 180.0),
        (preflight_plan(transport=Transport.ROCE), 180.0),
        (preflight_plan(transport=Transport.SOCKET), 1.0),
    ],
    ids=["set", "set-one-process", "cpu", "one-process", "local", "ib", "roce", "socket"],
)
def test_the_minimum_is_half_the_fabrics_typical_bandwidth_unless_set(plan: Any, minimum: float | None) -> None:
    found = pf.minimum_busbw(plan)
    assert found == minimum and type(found) is type(minimum)


def test_the_preflight_uses_the_port_next_to_training_s() -> None:
    topo = Topology(2, 1, 8, "n0", 29500, TopologySource.TIONE, Device.GPU)
    assert pf.preflight_topology(topo) == Topology(2, 1, 8, "n0", 29501, TopologySource.TIONE, Device.GPU)


def test_the_preflight_environment_leaves_out_the_runs_own_files() -> None:
    env = {"A": "1", "TORCHELASTIC_ERROR_FILE": "/l/e.json", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/l/n"}
    plan = preflight_plan(device=Device.CPU, node_vars=("NCCL_DEBUG", "NCCL_DEBUG_FILE", "TORCHELASTIC_ERROR_FILE"))
    assert pf.preflight_env(plan, env, "/tmp/p/") == {
        "A": "1",
        "VLA_DEVICE": "cpu",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": "/tmp/p/nccl.%h.%p.log",
    }
    users = preflight_plan(env_kept={"NCCL_DEBUG": "WARN"})  # the user's own NCCL debug setting stays theirs
    assert pf.preflight_env(users, {"A": "1"}, "/tmp/p") == {"A": "1", "VLA_DEVICE": "gpu"}
    assert pf.preflight_env(preflight_plan(), env, "/tmp/p") == {**env, "VLA_DEVICE": "gpu"}


def test_the_last_line_is_the_last_non_blank_one_cut_to_300_characters() -> None:
    assert pf._last_line("first\nsecond  \n \n") == "second"
    assert pf._last_line("a\n" + "z" * 301 + "b") == "z" * 299 + "b"
    assert pf._last_line(" \n\n") == pf.M("preflight-no-output")


def test_the_table_shows_each_size_its_median_and_repetitions_then_the_minimum() -> None:
    rows = [row(64 << 10, 0.5, (0.4, 0.5)), row((1 << 20) - 1, 1.0), row(1 << 20, 12.3456, (12.3456,))]
    result = PreflightResult(PreflightStatus.PASSED, 180.0, rows)
    assert pf.table(result, Lang.BOTH).splitlines() == [
        "      size   busbw GB/s (median)  repetitions",
        "    64 KiB                 0.500  0.400, 0.500",
        "  1023 KiB                 1.000  1.000, 2.000, 3.000",
        "     1 MiB                12.346  12.346",
        "minimum for the largest size: 180.0 GB/s",
        "最大消息的最低要求:180.0 GB/s",
    ]
    assert pf.table(result, Lang.ZH).splitlines()[-1] == "最大消息的最低要求:180.0 GB/s"
    assert pf.table(PreflightResult(PreflightStatus.PASSED, None, rows[:1])).splitlines()[1:] == [
        "    64 KiB                 0.500  0.400, 0.500"
    ]


@pytest.mark.parametrize("status", list(PreflightStatus))
def test_the_record_holds_the_status_minimum_results_transport_and_findings(status: PreflightStatus) -> None:
    finding = failed("preflight", Text("m", "中"), Text("h", "提"), "W")
    result = PreflightResult(status, 1.5, [row(1, 2.0)], {"nodes": []}, [finding], "tail")
    assert result.to_json() == {
        "status": status.value,
        "minimum_gbps": 1.5,
        "results": [row(1, 2.0)],
        "transport": {"nodes": []},
        "findings": [finding.to_json()],
    }
    assert result.failed == (status in ("hang", "error", "below"))
    assert PreflightResult(status, None).to_json()["transport"] is None


# ---- preflight_worker: one rank, over a stand-in torch ----


class FakeTorch:
    """`torch`, `torch.cuda` and `torch.distributed` as the worker uses them: each all-reduce of repetition `r`
    (counted by barriers) takes `r` ms of the stand-in clock, so every figure is known in advance."""

    float32 = "float32"

    def __init__(self, clock: Clock, gpus: bool, world: int) -> None:
        self.clock, self.gpus, self.world = clock, gpus, world
        self.calls: list[tuple[str, object]] = []
        self.repetition = 0
        self.cuda = types.SimpleNamespace(
            is_available=lambda: self.gpus,
            set_device=lambda index: self.calls.append(("set_device", index)),
            synchronize=lambda: self.calls.append(("synchronize", None)),
        )
        self.distributed = types.SimpleNamespace(
            init_process_group=lambda backend: self.calls.append(("init", backend)),
            get_world_size=lambda: self.world,
            all_reduce=self.all_reduce,
            barrier=self.barrier,
            get_backend=lambda: "gloo-or-nccl",
            destroy_process_group=lambda: self.calls.append(("destroy", None)),
        )

    def device(self, name: str) -> str:
        return f"device:{name}"

    def ones(self, count: int, dtype: object = None, device: object = None) -> types.SimpleNamespace:
        self.calls.append(("ones", (count, dtype, device)))
        self.repetition = 0
        self.tensor = types.SimpleNamespace(numel=lambda: count)
        return self.tensor

    def all_reduce(self, tensor: object) -> None:
        assert tensor is self.tensor, "the all-reduce is of the tensor just made"
        self.calls.append(("all_reduce", None))
        self.clock.now += 0.001 * self.repetition

    def barrier(self) -> None:
        self.calls.append(("barrier", None))
        self.repetition += 1

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        module = types.ModuleType("torch")
        for name in ("float32", "cuda", "distributed", "device", "ones"):
            setattr(module, name, getattr(self, name))
        monkeypatch.setitem(sys.modules, "torch", module)
        monkeypatch.setitem(sys.modules, "torch.distributed", self.distributed)
        monkeypatch.setitem(sys.modules, "torch.cuda", self.cuda)
        monkeypatch.setattr(pfw, "time", self.clock)


def run_worker(
    monkeypatch: pytest.MonkeyPatch, out: Path, *args: str, gpus: bool = True, world: int = 4, **env: str
) -> FakeTorch:
    torch = FakeTorch(Clock(), gpus, world)
    torch.install(monkeypatch)
    for name in ("LOCAL_RANK", "VLA_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["preflight_worker", *args, "--out", str(out)])
    pfw.main()
    return torch


def test_the_worker_measures_each_size_and_writes_the_median(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    torch = run_worker(monkeypatch, out, "--sizes", "4194304,2", LOCAL_RANK="3", VLA_DEVICE="gpu")
    assert not out.exists()  # only local rank 0 writes
    torch = run_worker(monkeypatch, out, "--sizes", "4194304,2", LOCAL_RANK="0")
    # 4 MiB in 1, 2, 3 ms per all-reduce: algbw 4.194 / 2.097 / 1.398 GB/s, bus bandwidth x 2 x 3/4
    assert json.loads(out.read_text()) == {
        "world_size": 4,
        "backend": "gloo-or-nccl",
        "device": "device:cuda",
        "results": [
            {"bytes": 4194304, "busbw_gbps": [6.291, 3.146, 2.097], "median_gbps": 3.146},
            {"bytes": 4, "busbw_gbps": [0.0, 0.0, 0.0], "median_gbps": 0.0},  # at least one element
        ],
    }
    calls = [name for name, _ in torch.calls]
    per_size = ["ones", "all_reduce", "all_reduce", "synchronize"] + (
        ["barrier", *["all_reduce"] * 10, "synchronize"] * 3
    )
    assert calls == ["set_device", "init", *per_size, *per_size, "destroy"]
    assert torch.calls[0] == ("set_device", 0) and torch.calls[1] == ("init", "nccl")
    assert [value for name, value in torch.calls if name == "ones"] == [
        (1048576, "float32", "device:cuda"),
        (1, "float32", "device:cuda"),
    ]


def test_the_worker_uses_gloo_on_cpu_and_its_own_counts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    torch = run_worker(monkeypatch, out, "--sizes", "8", "--iters", "2", "--repeats", "1", world=1, VLA_DEVICE="cpu")
    assert [c for c in torch.calls if c[0] in ("set_device", "init", "synchronize")] == [("init", "gloo")]
    assert [name for name, _ in torch.calls].count("all_reduce") == 2 + 2
    # one process: the bus bandwidth is the algorithm bandwidth, 8 bytes in 1 ms
    assert json.loads(out.read_text()) == {
        "world_size": 1,
        "backend": "gloo-or-nccl",
        "device": "device:cpu",
        "results": [{"bytes": 8, "busbw_gbps": [0.0], "median_gbps": 0.0}],
    }
    torch = run_worker(monkeypatch, out, "--sizes", "400000000", "--repeats", "1", world=2, gpus=False)
    assert torch.calls[0] == ("init", "gloo")
    assert json.loads(out.read_text())["results"] == [{"bytes": 400000000, "busbw_gbps": [400.0], "median_gbps": 400.0}]
    torch = run_worker(monkeypatch, out, "--sizes", "4", "--repeats", "1", LOCAL_RANK="5")
    assert torch.calls[:2] == [("set_device", 5), ("init", "nccl")]


def test_the_worker_needs_its_sizes_and_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["preflight_worker", "--out", "x"])
    with pytest.raises(SystemExit):
        pfw.main()
    monkeypatch.setattr(sys, "argv", ["preflight_worker", "--sizes", "1"])
    with pytest.raises(SystemExit):
        pfw.main()


# ---- run: the pieces of a launch ----


CFS = Mount("/mnt/cfs", "nfs4", "10.1.1.1:/share", "rw,hard")
SILENT = Answer(CFS, 15.0, "stat")


def make_plan(world: World, **env: str) -> Plan:
    """The plan `run` would build on the world's machine, with `env` added (a worker node does not wait for node 0's
    dataset seal here)."""
    full = {**world.env, **env}
    with mock.patch.dict(os.environ, full, clear=True):
        return build_plan(Host.current(full), {})


def read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return json.loads(handle.read(1 << 20))


@pytest.fixture
def local_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This machine's temp folder, inside the test's."""
    folder = tmp_path / "machine-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_the_outcome_class_of_an_exit_code() -> None:
    assert launch_run.outcome_class(0, False) is OutcomeClass.SUCCEEDED
    assert launch_run.outcome_class(0, True) is OutcomeClass.SUCCEEDED
    assert launch_run.outcome_class(143, True) is OutcomeClass.KILLED
    assert launch_run.outcome_class(1, False) is OutcomeClass.TRAINING_CRASHED
    assert [c.value for c in OutcomeClass] == [
        "succeeded",
        "job-misspecified",
        "preflight-failed",
        "training-crashed",
        "killed",
        "stalled",
        "already-finished",
        "do-not-requeue",
        "storage-not-answering",
        "node-lost",
    ]
    assert (launch_run.STORAGE_GIVE_UP_S, launch_run.PEER_FIRST_S) == (300.0, 10.0)
    assert (launch_run.REPORT_WAIT_S, launch_run.REPORT_PEERS_WAIT_S) == (60.0, 30.0)


def test_a_record_that_cannot_reach_the_log_folder_goes_to_this_nodes_disk(local_tmp: Path) -> None:
    record = StartupRecord(None, started_at=1_700_000_000.0)
    out = io.StringIO()
    launch_run._record_locally(record, "node-12a3456789", 124, "CFS gone", SILENT, out, Lang.EN)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(1_700_000_000.0))
    path = local_tmp / "vla-entrypoint" / f"node123456-{stamp}-{os.getpid()}.json"
    assert record.path == path and record.claimed
    outcome = {
        "exit_code": 124,
        "class": "storage-not-answering",
        "root_cause": "CFS gone",
        "storage": SILENT.to_json(),
    }
    assert record.data == {"outcome": outcome}
    assert read_json(path)["outcome"] == outcome
    assert out.getvalue() == (
        f"{LEAD}the start-up record is on this node's own disk instead: {path} (the log folder's storage is not "
        "answering)\n"
    )
    record = StartupRecord(None, started_at=1_700_000_000.0)
    launch_run._record_locally(record, "worker", 3, "x", SILENT, io.StringIO(), Lang.ZH)
    assert record.path == local_tmp / "vla-entrypoint" / f"node0-{stamp}-{os.getpid()}.json"
    assert record.path.is_file()


def test_a_record_with_no_local_folder_either_is_given_up_quietly(local_tmp: Path) -> None:
    (local_tmp / "vla-entrypoint").write_text("a file where the folder goes")
    record, out = StartupRecord(None), io.StringIO()
    launch_run._record_locally(record, "1", 124, "x", SILENT, out, Lang.EN)
    assert out.getvalue() == "" and record.path is not None and not record.path.exists()


def test_storage_that_does_not_answer_before_the_plan_ends_the_node(local_tmp: Path) -> None:
    stalled = StorageNotAnswering(SILENT, 15)
    out = io.StringIO()
    host = Host(env={"RANK": "2"})
    code = launch_run._storage_not_answering(stalled, host, out, StartupRecord(None), Lang.EN)  # type: ignore[arg-type]
    assert code == 3
    (path,) = (local_tmp / "vla-entrypoint").glob("node2-*.json")
    assert read_json(path)["outcome"] == {
        "exit_code": 3,
        "class": "storage-not-answering",
        "root_cause": stalled.what.en,
        "storage": SILENT.to_json(),
    }
    assert out.getvalue().splitlines() == [
        *problem_block(stalled).splitlines(),
        f"{LEAD}the start-up record is on this node's own disk instead: {path} (the log folder's storage is not "
        "answering)",
    ]
    code = launch_run._storage_not_answering(stalled, Host(env={}), io.StringIO(), StartupRecord(None), Lang.EN)  # type: ignore[arg-type]
    assert code == 3 and len(list((local_tmp / "vla-entrypoint").glob("node0-*.json"))) == 1


def test_the_seal_is_written_only_by_its_writer_and_atomically(tmp_path: Path) -> None:
    path = tmp_path / "seals" / "dataset.json"
    payload = {"key": "abc", "episodes": 3}
    assert not launch_run.write_seal(Seal(SealRole.READ, path, payload=payload))
    assert not launch_run.write_seal(Seal(SealRole.WRITE, None, payload=payload))
    assert not launch_run.write_seal(Seal(SealRole.WRITE, path, payload=None))
    assert not path.parent.exists()
    before = time.time()
    assert launch_run.write_seal(Seal(SealRole.WRITE, path, payload=payload))
    written = read_json(path)
    assert written.pop("written_at") >= before and written == payload
    assert [p.name for p in path.parent.iterdir()] == ["dataset.json"]


def test_a_seal_that_cannot_be_written_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "dataset.json"
    path.mkdir()  # replacing a folder with a file fails
    (path / "inside").write_text("x")
    assert not launch_run.write_seal(Seal(SealRole.WRITE, path, payload={"a": 1}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset.json"]
    blocked = tmp_path / "file"
    blocked.write_text("x")
    assert not launch_run.write_seal(Seal(SealRole.WRITE, blocked / "sub" / "seal.json", payload={"a": 1}))


def test_the_patch_script_runs_in_openpi_and_must_leave_its_marker(tmp_path: Path) -> None:
    transformers = tmp_path / "site" / "transformers"
    (transformers / MARKER).parent.mkdir(parents=True)
    script = tmp_path / "patch.sh"
    script.write_text(f'echo "in $(pwd)"; echo oops >&2; touch "{transformers / MARKER}"; exit "${{CODE:-0}}"\n')
    openpi = tmp_path / "openpi"
    openpi.mkdir()
    ok, output = launch_run.apply_patch(PatchState(PatchStatus.APPLY, transformers, script), openpi)
    assert (ok, output) == (True, f"in {openpi}\noops\n")
    (transformers / MARKER).unlink()
    script.write_text('echo "\\xff-bad byte"; printf "\\377\\n"; exit 0\n')
    ok, output = launch_run.apply_patch(PatchState(PatchStatus.APPLY, transformers, script), openpi)
    assert (ok, output) == (False, "\\xff-bad byte\n\ufffd\n")  # no marker left; bad bytes replaced
    script.write_text(f'touch "{transformers / MARKER}"; exit 1\n')
    assert launch_run.apply_patch(PatchState(PatchStatus.APPLY, transformers, script), openpi) == (False, "")
    script.write_text("exit 0\n")
    assert launch_run.apply_patch(PatchState(PatchStatus.APPLY, None, script), openpi) == (False, "")


class Peers:
    """A stand-in `Presence`: what this node sees of the others, and what it told them."""

    def __init__(self, end: JobEnd | None = None, pending: list[int] | None = None, node_rank: int = 0) -> None:
        self.end, self.pending = end, pending or []
        self.node_rank, self.host = node_rank, "host-a"
        self.calls: list[tuple[str, object]] = []

    def look(self) -> JobEnd | None:
        self.calls.append(("look", None))
        return self.end

    def running(self) -> list[int]:
        return self.pending

    def wait_done(self, seconds: float) -> None:
        self.calls.append(("wait_done", seconds))

    def start(self) -> None:
        self.calls.append(("start", None))

    def to_json(self) -> dict[str, object]:
        return {"peers": "stand-in"}

    def announce(self, end: JobEnd) -> None:
        self.calls.append(("announce", end))

    def finish(self, clean: bool) -> None:
        self.calls.append(("finish", clean))

    def settle(self, since: float, extra: float) -> JobEnd | None:
        self.calls.append(("settle", (since, extra)))
        return self.end


@pytest.fixture
def report_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """The job's report, not written: each call of `write_in_time` recorded; it answers with one line."""
    from entrypoint.report import command

    calls: list[tuple[object, ...]] = []

    def write_in_time(log_dir: Path, exp_name: str, path: Path, wait_s: float) -> Text:
        calls.append((log_dir, exp_name, path, wait_s))
        return Text("report written", "报告已写")

    monkeypatch.setattr(command, "write_in_time", write_in_time)
    return calls


def test_the_jobs_report_is_written_at_node_0s_every_end_and_on_any_failure(
    world: World, report_calls: list[tuple[object, ...]]
) -> None:
    plan = make_plan(world)
    report = world.assets / "logs" / "pi05_libero_pytorch-report.html"
    assert plan.launch.report == report
    out = io.StringIO()
    launch_run.job_report(plan, out, Lang.EN, 0)
    assert report_calls == [(world.assets / "logs", "pi05_libero_pytorch", report, 60.0)]
    assert out.getvalue() == f"{LEAD}report written\n"
    plan.topology = dataclasses.replace(plan.topology, node_rank=1)
    launch_run.job_report(plan, out, Lang.EN, 0)  # another node's clean end: node 0 writes it
    assert len(report_calls) == 1
    launch_run.job_report(plan, out, Lang.EN, 3)  # its failure: it writes it
    assert len(report_calls) == 2
    plan.launch = dataclasses.replace(plan.launch, report=None)
    launch_run.job_report(plan, out, Lang.EN, 3)
    assert len(report_calls) == 2


def test_node_0_waits_for_the_other_nodes_clean_ends_before_the_report(
    world: World, report_calls: list[tuple[object, ...]]
) -> None:
    plan = make_plan(world)
    peers, out = Peers(pending=[1, 3]), io.StringIO()
    launch_run.job_report(plan, out, Lang.EN, 0, peers)  # type: ignore[arg-type]
    assert peers.calls == [("look", None), ("wait_done", 30.0)]
    assert out.getvalue().splitlines() == [
        f"{LEAD}waiting up to 30 s for node(s) 1, 3 to end before writing the job's report",
        f"{LEAD}report written",
    ]
    peers, out = Peers(pending=[]), io.StringIO()
    launch_run.job_report(plan, out, Lang.EN, 0, peers)  # type: ignore[arg-type]
    assert peers.calls == [("look", None)] and out.getvalue() == f"{LEAD}report written\n"
    peers = Peers(pending=[1])
    launch_run.job_report(plan, io.StringIO(), Lang.EN, 2, peers)  # type: ignore[arg-type]
    assert peers.calls == []  # a failure is reported at once


def test_an_early_end_records_its_outcome_and_reports(world: World, report_calls: list[tuple[object, ...]]) -> None:
    plan = make_plan(world)
    path = world.root / "record.json"
    record, out = StartupRecord(path), io.StringIO()
    code = launch_run._ended_early(plan, out, Lang.EN, record, 3, OutcomeClass.PREFLIGHT_FAILED)
    assert code == 3 and read_json(path)["outcome"] == {"exit_code": 3, "class": "preflight-failed"}
    assert len(report_calls) == 1 and out.getvalue() == f"{LEAD}report written\n"


def test_a_job_ended_by_another_node_is_this_nodes_outcome_too(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    lost = LostNode(2, "host-c", 75.04, False, 60.0)
    why = Text("node 2 is lost", "节点 2 丢失")
    end = JobEnd(137, "node-lost", why, 0, "host-a", (lost,), "budget-spent")
    out = io.StringIO()
    assert launch_run._ended_by_another(out, Lang.EN, StartupRecord(path), end) == 137
    assert read_json(path)["outcome"] == {
        "exit_code": 137,
        "class": "node-lost",
        "root_cause": "node 2 is lost",
        "ended_by": {"node": 0, "host": "host-a"},
        "lost_nodes": [{"node": 2, "host": "host-c", "silent_s": 75.0, "never_seen": False, "bound_s": 60.0}],
        "verdict": "budget-spent",
    }
    assert out.getvalue() == (
        f"{LEAD}JOB ENDED by node 0 (host-a) while this node waited for node 0: node 2 is lost — nothing started "
        "here; this node exits with the same exit code 137\n"
    )
    end = JobEnd(3, "preflight-failed", why, 1, "host-b")
    path = tmp_path / "record-2.json"
    assert launch_run._ended_by_another(io.StringIO(), Lang.EN, StartupRecord(path), end) == 3
    assert read_json(path)["outcome"] == {
        "exit_code": 3,
        "class": "preflight-failed",
        "root_cause": "node 2 is lost",
        "ended_by": {"node": 1, "host": "host-b"},
        "lost_nodes": [],
    }


def test_preparing_node_0_moves_old_runs_aside_applies_the_patch_and_raises_memlock(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world)
    moved: list[object] = []
    monkeypatch.setattr(
        launch_run, "set_aside", lambda decision: moved.append(decision) or [(Path("/c/exp"), Path("/c/exp.old-1"))]
    )
    patched: list[tuple[PatchState, Path]] = []

    def apply(state: PatchState, openpi: Path) -> tuple[bool, str]:
        patched.append((state, openpi))
        return True, "patched\n"

    monkeypatch.setattr(launch_run, "apply_patch", apply)
    change = MemlockChange((65536.0, float("inf")), (float("inf"), float("inf")))
    monkeypatch.setattr(launch_run, "raise_memlock", lambda: change)
    plan.patch = PatchState(PatchStatus.APPLY, Path("/t"), Path("/openpi/patch.sh"))
    plan.launch = dataclasses.replace(plan.launch, memlock=MemlockIntent.RAISE)
    out = io.StringIO()
    assert launch_run._prepare(plan, out, Lang.EN) == {
        "intent": "raise",
        "before": [65536, "unlimited"],
        "after": ["unlimited", "unlimited"],
        "changed": True,
        "error": None,
    }
    assert moved == [plan.resume] and patched == [(plan.patch, world.openpi)]
    assert out.getvalue().splitlines() == [
        f"{LEAD}moved /c/exp aside to /c/exp.old-1 (kept, not deleted)",
        f"{LEAD}transformers_replace applied",
    ]


def test_preparing_another_node_moves_nothing_and_keeps_equal_limits(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1))
    monkeypatch.setattr(launch_run, "set_aside", lambda decision: pytest.fail("only node 0 moves folders"))
    monkeypatch.setattr(launch_run, "apply_patch", lambda state, openpi: (False, "the script said no\n"))
    monkeypatch.setattr(launch_run, "raise_memlock", lambda: pytest.fail("the limits are kept"))
    plan.patch = PatchState(PatchStatus.APPLY, None, Path("/openpi/patch.sh"))
    plan.fabric = dataclasses.replace(plan.fabric, memlock=dataclasses.replace(plan.fabric.memlock, soft=8.0, hard=8.0))
    plan.launch = dataclasses.replace(plan.launch, memlock=MemlockIntent.KEEP)
    out = io.StringIO()
    assert launch_run._prepare(plan, out, Lang.EN) == {
        "intent": "keep",
        "before": [8, 8],
        "after": [8, 8],
        "changed": False,
        "error": None,
    }
    assert out.getvalue().splitlines() == [
        "the script said no",
        f"{LEAD}transformers_replace FAILED (/openpi/patch.sh); training continues unpatched",
    ]
    for status, said in [
        (PatchStatus.PRESENT, f"{LEAD}transformers_replace already present\n"),
        (PatchStatus.UNAVAILABLE, ""),
    ]:
        plan.patch = PatchState(status, None, Path("/openpi/patch.sh"))
        out = io.StringIO()
        launch_run._prepare(plan, out, Lang.EN)
        assert out.getvalue() == said


def test_presence_is_kept_by_a_multi_node_job_with_a_node_log_only(world: World) -> None:
    env = world.tione(nodes=2, per_node=8, rank=1)
    plan = make_plan(world, **env)
    logged = types.SimpleNamespace(file=object())
    presence = launch_run._presence(plan, logged)  # type: ignore[arg-type]
    folder = run_folder(world.assets / "logs", "pi05_libero_pytorch", {**world.env, **env})
    assert presence is not None and folder is not None
    assert (presence.folder, presence.node_rank, presence.nnodes) == (folder, 1, 2)
    assert (presence.hosts, presence.lost_after, presence.host) == (["10.0.0.1", "10.0.0.2"], 600.0, "10.0.0.2")
    assert launch_run._presence(plan, types.SimpleNamespace(file=None)) is None  # type: ignore[arg-type]
    plan.topology = dataclasses.replace(plan.topology, nnodes=1)
    assert launch_run._presence(plan, logged) is None  # type: ignore[arg-type]
    unnamed = make_plan(world, **{**env, "NODE_LIST": ""})
    presence = launch_run._presence(unnamed, logged)  # type: ignore[arg-type]
    assert presence is not None and presence.hosts == ["?", "?"] and presence.host == socket.gethostname()
    assert launch_run._presence(make_plan(world), logged) is None  # type: ignore[arg-type]


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool] | BaseException]:
    """`_run_job` stood in for: it pops and gives (or raises) the next scripted end, recording the presence."""
    script: list[tuple[int, bool] | BaseException] = []

    def run_job(plan: Plan, out: object, record: StartupRecord, lang: Lang, presence: object) -> tuple[int, bool]:
        record.data["seen_presence"] = presence
        answer = script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    monkeypatch.setattr(launch_run, "_run_job", run_job)
    return script


def test_a_node_without_presence_just_runs_the_job(world: World, monkeypatch: pytest.MonkeyPatch, job: list) -> None:
    monkeypatch.setattr(launch_run, "_presence", lambda plan, out: None)
    job.append((7, True))
    record = StartupRecord(None)
    assert launch_run._run(make_plan(world), io.StringIO(), record, Lang.EN) == 7  # type: ignore[arg-type]
    assert record.data == {"seen_presence": None}


def test_a_node_that_ends_cleanly_tells_nobody(world: World, monkeypatch: pytest.MonkeyPatch, job: list) -> None:
    peers = Peers()
    monkeypatch.setattr(launch_run, "_presence", lambda plan, out: peers)
    job.append((0, True))
    record = StartupRecord(None)
    assert launch_run._run(make_plan(world), io.StringIO(), record, Lang.EN) == 0  # type: ignore[arg-type]
    assert peers.calls == [("start", None), ("finish", True)]
    assert record.data == {"presence": {"peers": "stand-in"}, "seen_presence": peers}


def test_a_node_that_fails_tells_the_others_how_it_ended(
    world: World, monkeypatch: pytest.MonkeyPatch, job: list
) -> None:
    peers = Peers(node_rank=1)
    monkeypatch.setattr(launch_run, "_presence", lambda plan, out: peers)
    plan = make_plan(world)
    job.append((3, True))
    record = StartupRecord(None, data={"outcome": {"class": "preflight-failed"}})
    assert launch_run._run(plan, io.StringIO(), record, Lang.EN) == 3  # type: ignore[arg-type]
    why = Text(
        "node 1 (host-a) ended the job (preflight-failed, exit code 3): read its log for the cause",
        "节点 1(host-a)结束了任务(preflight-failed,退出码 3):原因请查看其日志",
    )
    assert peers.calls == [
        ("start", None),
        ("look", None),
        ("announce", JobEnd(3, "preflight-failed", why, 1, "host-a")),
        ("finish", False),
    ]
    peers.calls.clear()
    job.append(RuntimeError("the launcher broke"))
    with pytest.raises(RuntimeError, match="the launcher broke"):
        launch_run._run(plan, io.StringIO(), StartupRecord(None), Lang.EN)  # type: ignore[arg-type]
    unknown = Text(
        "node 1 (host-a) ended the job (-, exit code 1): read its log for the cause",
        "节点 1(host-a)结束了任务(-,退出码 1):原因请查看其日志",
    )
    assert peers.calls[2:] == [("announce", JobEnd(1, "training-crashed", unknown, 1, "host-a")), ("finish", False)]


def test_a_node_tells_nothing_when_it_may_not_or_the_job_already_ended(
    world: World, monkeypatch: pytest.MonkeyPatch, job: list
) -> None:
    peers = Peers()
    monkeypatch.setattr(launch_run, "_presence", lambda plan, out: peers)
    plan = make_plan(world)
    job.append((124, False))  # the log folder's storage is not answering
    assert launch_run._run(plan, io.StringIO(), StartupRecord(None), Lang.EN) == 124  # type: ignore[arg-type]
    assert peers.calls == [("start", None), ("finish", False)]
    peers = Peers(end=JobEnd(3, "preflight-failed", Text("x", "x"), 0, "h"))
    monkeypatch.setattr(launch_run, "_presence", lambda plan, out: peers)
    job.append((3, True))
    assert launch_run._run(plan, io.StringIO(), StartupRecord(None), Lang.EN) == 3  # type: ignore[arg-type]
    assert peers.calls == [("start", None), ("look", None), ("finish", False)]


def console() -> tuple[launch_run.Tee, io.StringIO]:
    """The launcher's output (no node log) and what it printed."""
    text = io.StringIO()
    return launch_run.Tee(text), text


class Reader:
    """A stand-in prefetch `Reader`."""

    made: ClassVar[list[Reader]] = []
    outcomes: ClassVar[list[str]] = []

    def __init__(self, host: Host, out: object, lang: Lang) -> None:
        self.args = (host, out, lang)
        self.calls: list[tuple[str, object]] = []
        Reader.made.append(self)

    def start(self, prefetch: object) -> None:
        self.calls.append(("start", prefetch))

    def close(self) -> None:
        self.calls.append(("close", None))


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch, report_calls: list) -> list[tuple[object, ...]]:
    """`_launch` stood in for (it answers (0, True)), the prefetch reader too."""
    calls: list[tuple[object, ...]] = []

    def launch(
        plan: Plan, out: object, record: object, lang: Lang, reader: Reader, presence: object
    ) -> tuple[int, bool]:
        calls.append((plan, record, lang, reader, presence, out))
        return 0, True

    monkeypatch.setattr(launch_run, "_launch", launch)
    Reader.made = []
    monkeypatch.setattr(launch_run, "Reader", Reader)
    return calls


def test_the_job_starts_with_the_health_summary_and_the_plan_in_the_record(
    world: World, launches: list, tmp_path: Path
) -> None:
    plan = make_plan(world)
    record, (out, text) = StartupRecord(tmp_path / "r.json"), console()
    assert launch_run._run_job(plan, out, record, Lang.EN, None) == (0, True)  # type: ignore[arg-type]
    heading = "node 0 of 1, 8 process(es) per node, 8 in all, topology from single"
    assert text.getvalue().splitlines()[0].endswith(f" health check: {heading} ==")
    summary = io.StringIO()
    health_summary(plan.findings, heading, Lang.EN, summary)
    assert plan.findings and text.getvalue() == summary.getvalue()  # in English only, as asked
    assert record.data == {"log": None, "plan": plan.to_json()}
    assert launches == [(plan, record, Lang.EN, Reader.made[0], None, out)]
    assert Reader.made[0].args[1:] == (out, Lang.EN) and Reader.made[0].args[0].env == plan.inherited
    assert Reader.made[0].calls == [("close", None)]
    logged = launch_run.Tee(io.StringIO())
    logged._file = io.BytesIO()  # type: ignore[assignment]
    launch_run._run_job(plan, logged, StartupRecord(None), Lang.EN, None)
    assert launches[-1][1].data["log"] == str(plan.launch.files.log)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "exit_code, outcome",
    [(ExitCode.JOB_MISSPECIFIED, "job-misspecified"), (ExitCode.PREFLIGHT_FAILED, "preflight-failed")],
)
def test_a_plan_that_failed_ends_the_node_before_anything_starts(
    world: World, launches: list, tmp_path: Path, exit_code: ExitCode, outcome: str
) -> None:
    plan = make_plan(world)
    plan.findings.append(failed("x.y", Text("bad", "坏"), Text("fix", "修"), exit_code=exit_code))
    record = StartupRecord(tmp_path / "r.json")
    assert launch_run._run_job(plan, launch_run.Tee(io.StringIO()), record, Lang.EN, None) == (int(exit_code), True)  # type: ignore[arg-type]
    assert record.data["outcome"] == {"exit_code": exit_code, "class": outcome} and launches == []
    assert Reader.made == []


def test_node_0_seals_the_dataset_verdict_then_starts(
    world: World, launches: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world)
    plan.seal = Seal(SealRole.WRITE, Path("/logs/seal.json"), payload={"a": 1})
    monkeypatch.setattr(launch_run, "write_seal", lambda seal: seal is plan.seal)
    out, text = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert f"{LEAD}dataset verdict sealed for the other nodes: /logs/seal.json" in text.getvalue().splitlines()
    assert len(launches) == 1


def test_an_experiment_already_at_its_last_save_starts_nothing(world: World, launches: list, tmp_path: Path) -> None:
    plan = make_plan(world)
    plan.resume = dataclasses.replace(plan.resume, action=ResumeAction.FINISHED, step=50)
    record, (out, text) = StartupRecord(tmp_path / "r.json"), console()
    assert launch_run._run_job(plan, out, record, Lang.EN, None) == (0, True)  # type: ignore[arg-type]
    assert record.data["outcome"] == {"exit_code": 0, "class": "already-finished"} and launches == []
    assert text.getvalue().splitlines()[-1] == (
        f"{LEAD}already trained to step 50; raise num_train_steps or set VLA_OVERWRITE=1 to start again "
        "(torchrun was not started)"
    )


@pytest.mark.parametrize("fails", [False, True])
def test_the_health_gate_runs_before_anything_is_moved(
    world: World, launches: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fails: bool
) -> None:
    from entrypoint.launch import health_gate

    plan = make_plan(world)
    plan.health = HealthGate(HealthMode.WARN, True, False, 8, Text("on", "开"))
    gates: list[tuple[object, ...]] = []

    def start_gate(plan: Plan, host: Host, out: object, lang: Lang, since: float) -> types.SimpleNamespace:
        gates.append((plan, host.env, lang, since))
        return types.SimpleNamespace(failed=fails, to_json=lambda: {"gate": "ran"})

    monkeypatch.setattr(health_gate, "start_gate", start_gate)
    record = StartupRecord(tmp_path / "r.json")
    code = launch_run._run_job(plan, launch_run.Tee(io.StringIO()), record, Lang.EN, None)  # type: ignore[arg-type]
    assert gates == [(plan, plan.inherited, Lang.EN, record.started_at)]
    assert record.data["health"] == {"gate": "ran"} and "health" in record.phases
    if fails:
        assert code == (3, True) and record.data["outcome"] == {"exit_code": 3, "class": "preflight-failed"}
        assert launches == []
    else:
        assert code == (0, True) and len(launches) == 1


def test_a_health_gate_that_cannot_run_here_is_said_in_one_line(world: World, launches: list) -> None:
    plan = make_plan(world)
    plan.health = HealthGate(HealthMode.WARN, False, False, 0, Text("no GPU here: skipped", "无 GPU:跳过"))
    record, (out, text) = StartupRecord(None), console()
    launch_run._run_job(plan, out, record, Lang.EN, None)  # type: ignore[arg-type]
    assert f"{LEAD}no GPU here: skipped" in text.getvalue().splitlines()
    assert record.data["health"] == {"gate": plan.health.to_json(), "status": "skipped"}
    plan.health = HealthGate(HealthMode.OFF, False, False, 0, Text("off", "关"))
    record, (out, text) = StartupRecord(None), console()
    launch_run._run_job(plan, out, record, Lang.EN, None)  # type: ignore[arg-type]
    assert "health" not in record.data and f"{LEAD}off" not in text.getvalue()


def test_the_prefetch_starts_before_the_launch_and_is_closed_after(world: World, launches: list) -> None:
    plan = make_plan(world)
    prefetch = types.SimpleNamespace(to_json=lambda: {"files": []})
    plan.launch = dataclasses.replace(plan.launch, prefetch=prefetch)  # type: ignore[arg-type]
    launch_run._run_job(plan, launch_run.Tee(io.StringIO()), StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert Reader.made[0].calls == [("start", prefetch), ("close", None)]


# ---- run: from the node's preparation to torchrun (`_launch`) ----


class Made:
    """A stand-in class: each instance keeps its constructor's arguments; `on_run` is what `run()` does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.calls: list[tuple[str, object]] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: self.calls.append((name, args))


class Launcher:
    """Everything `_launch` starts, stood in for and recorded; `code` is what training ends with."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, world: World) -> None:
        self.world = world
        self.code: int | BaseException = 0
        self.taco_finding: Finding | None = None
        self.taco_env = {"PATH": "/opt/bin", "FROM_TACO": "1"}
        self.made: dict[str, list[Any]] = {}
        self.reports: list[tuple[object, ...]] = []
        self.concluded: list[tuple[object, ...]] = []
        self.stalled: Answer | None = None
        self.fr_problem: OSError | None = None
        launcher = self

        def maker(name: str) -> type:
            class Stand(Made):
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    super().__init__(*args, **kwargs)
                    launcher.made.setdefault(name, []).append(self)
                    self.tree = None
                    self.job_end = self.signalled = self.gave_up = None
                    self.storage_cause = None
                    self.attempts: list[object] = []

                def run(self) -> int:
                    if isinstance(launcher.code, BaseException):
                        raise launcher.code
                    return launcher.code

            return Stand

        for name in ("Watchdog", "Exchange", "Attempts", "Metrics", "Supervisor"):
            monkeypatch.setattr(launch_run, name, maker(name))
        monkeypatch.setattr(launch_run, "activate_taco", self.activate_taco)
        monkeypatch.setattr(launch_run, "_watch_storage", self.watch_storage)
        monkeypatch.setattr(launch_run, "_report", lambda *args: self.reports.append(args) or args[4])
        monkeypatch.setattr(launch_run, "_conclude", lambda *args: self.concluded.append(args) or 99)
        self.fr_envs: list[tuple[str, object]] = []
        monkeypatch.setattr(
            flight_recorder, "prepare", lambda env: self.fr_envs.append(("prepare", env)) or self.fr_problem
        )
        monkeypatch.setattr(
            flight_recorder, "locations", lambda env: self.fr_envs.append(("locations", env)) or ("/fr/trace_", None)
        )
        monkeypatch.setattr(
            flight_recorder,
            "training_python",
            lambda torchrun, env: self.fr_envs.append(("training_python", env)) or f"python-of:{torchrun}",
        )

    def activate_taco(self, taco: object, env: dict[str, str], out: object, lang: Lang) -> Any:
        self.taco_seen = (taco, env, lang)
        self.taco_out = out
        self.taco = types.SimpleNamespace(
            finding=self.taco_finding, env=self.taco_env, to_json=lambda: {"taco": "seen"}
        )
        return self.taco

    def watch_storage(self, plan: Plan, supervisor: Any, record: object, out: object, lang: Lang) -> Any:
        launcher = self

        class Watch(Made):
            stalled = launcher.stalled

            def cause(self) -> Text | None:
                return Text("CFS not answering at /mnt/cfs for 31 s", "CFS 无响应") if self.stalled else None

        watch = Watch(plan, supervisor)
        watch.given = (record, out, lang)
        self.made.setdefault("watch", []).append(watch)
        return watch

    def launch(
        self, plan: Plan, presence: object = None, record: StartupRecord | None = None, logged: bool = False
    ) -> tuple[tuple[int, bool], str, StartupRecord, Reader]:
        out, text = console()
        if logged:
            out._file = io.BytesIO()  # type: ignore[assignment]
        self.out = out
        record = record or StartupRecord(self.world.root / "record.json")
        reader = Reader(Host(), out, Lang.EN)
        result = launch_run._launch(plan, out, record, Lang.EN, reader, presence)  # type: ignore[arg-type]
        return result, text.getvalue(), record, reader


@pytest.fixture
def launcher(monkeypatch: pytest.MonkeyPatch, world: World, report_calls: list) -> Launcher:
    return Launcher(monkeypatch, world)


def test_torchrun_starts_with_the_plans_command_and_tacos_environment(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    (code, tell), text, record, reader = launcher.launch(plan)
    assert (code, tell) == (0, True)
    assert launcher.taco_seen == (plan.taco, plan.environment(), Lang.EN)
    (supervisor,) = launcher.made["Supervisor"]
    (watchdog,) = launcher.made["Watchdog"]
    (exchange,) = launcher.made["Exchange"]
    (attempts,) = launcher.made["Attempts"]
    (metrics,) = launcher.made["Metrics"]
    args = supervisor.args
    assert args[:4] == (plan.launch.command, str(world.openpi), launcher.taco_env, args[3])
    progress, tail, taco_reader = args[4][:3]
    assert args[4] == [progress, tail, taco_reader, metrics]
    assert args[5:] == (
        30,
        watchdog,
        tail,
        StallAction.FAIL,
        plan.launch.files.stacks,
        Lang.EN,
        attempts,
        exchange,
        None,
    )
    assert watchdog.args[:3] == (None, 1800, progress) and isinstance(watchdog.args[3], float)
    assert exchange.args == (
        0,
        1,
        world.assets / "logs",
        "pi05_libero_pytorch",
        None,
        launcher.taco_env,
        f"python-of:{plan.launch.command[0]}",
    )
    assert attempts.args == (3, record.t0, progress, plan.launch.files.attempts)
    assert attempts.kwargs == {"node_rank": 0}
    assert metrics.args == (plan.launch.events_dir,)
    assert (metrics.kwargs["batch_size"], metrics.kwargs["interval_s"]) == (256, 10)
    assert metrics.calls == [("start", ())]
    (watch,) = launcher.made["watch"]
    assert watch.args == (plan, supervisor) and watch.calls == [("start", ()), ("stop", ())]
    assert reader.calls == [("close", None)]
    assert supervisor.storage_cause is None
    (report,) = launcher.reports
    assert report[:5] == (plan, report[1], record, Lang.EN, 0) and report[5] is supervisor
    assert report[6:] == (progress, tail, report[8], taco_reader, metrics)
    assert record.data["memlock"]["intent"] == "keep" and record.data["taco"] == {"taco": "seen"}
    assert record.data["nccl_debug"] == plan.launch.nccl_debug and plan.launch.files.nccl_dir.is_dir()  # type: ignore[union-attr]
    assert record.data["launch_after_s"] >= 0 and record.data["process_age_at_launch_s"] > 0
    assert set(record.phases) == {"prepare", "taco", "training"}
    assert read_json(record.path)["launch_after_s"] == record.data["launch_after_s"]  # type: ignore[arg-type]
    command = " ".join(plan.launch.command)
    assert text.splitlines() == [f"{LEAD}start command: cd {world.openpi} && {command}"]


def test_a_worker_node_gets_no_watchdog_and_its_presence(launcher: Launcher, world: World) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1), VLA_MASTER_WAIT_TIMEOUT="0")
    peers = Peers()
    launcher.launch(plan, peers)
    (supervisor,) = launcher.made["Supervisor"]
    assert supervisor.args[6] is None and supervisor.args[-1] is peers and "Watchdog" not in launcher.made
    assert launcher.made["Attempts"][0].kwargs == {"node_rank": 1}
    assert launcher.made["Exchange"][0].args[:2] == (1, 2)


def test_a_failed_torchrun_on_a_node_with_peers_settles_the_jobs_end(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    peers = Peers()
    launcher.code = 1
    (code, _), _, _, _ = launcher.launch(plan, peers)
    assert code == 99 and launcher.concluded[0][:2] == (plan, peers)
    assert launcher.reports[0][4] == 99
    launcher.code = 0
    launcher.launch(plan, peers)
    launcher.code = 1
    launcher.launch(plan, None)
    assert len(launcher.concluded) == 1


def test_a_torchrun_that_cannot_start_ends_the_node_with_3(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    launcher.code = StartFailed("/bin/torchrun", PermissionError(errno.EACCES, "Permission denied"))
    (code, tell), text, record, reader = launcher.launch(plan)
    assert (code, tell) == (3, True)
    assert "  FAIL  trainer.torchrun  /bin/torchrun could not be started: Permission denied; nothing ran" in text
    assert " health check: starting torchrun ==" in text
    assert "Run `vla-entrypoint check`: it names what is wrong with torchrun (permissions, its #! line, PATH)." in text
    assert launcher.made["Metrics"][0].calls[-1] == ("close", (3, "preflight-failed"))
    assert record.data["outcome"] == {"exit_code": 3, "class": "preflight-failed"} and launcher.reports == []
    assert launcher.made["watch"][0].calls[-1] == ("stop", ()) and reader.calls == [("close", None)]


def test_storage_that_stops_answering_during_training_moves_the_record(
    launcher: Launcher, world: World, local_tmp: Path
) -> None:
    plan = make_plan(world)
    launcher.stalled, launcher.code = SILENT, 124
    (code, tell), text, record, _ = launcher.launch(plan, Peers())
    assert (code, tell) == (124, False) and launcher.reports == [] and launcher.concluded == []
    assert text.splitlines()[1] == f"{LEAD}CFS not answering at /mnt/cfs for 31 s"
    assert record.path is not None and record.path.parent == local_tmp / "vla-entrypoint"
    assert read_json(record.path)["outcome"]["root_cause"] == "CFS not answering at /mnt/cfs for 31 s"


def test_the_prefetch_follows_restarts_and_its_outcomes_are_recorded(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    plan.launch = dataclasses.replace(plan.launch, prefetch=types.SimpleNamespace(to_json=lambda: {}))  # type: ignore[arg-type]

    class Following(Reader):
        outcomes: ClassVar[list[str]] = ["read"]

        def follow_restarts(self, count: Callable[[], int], again: Callable[[], object]) -> None:
            self.calls.append(("follow", (count(), again())))

        def to_json(self) -> dict[str, object]:
            return {"prefetch": "done"}

    out, _ = console()
    reader = Following(Host(), out, Lang.EN)
    record = StartupRecord(None)
    launch_run._launch(plan, out, record, Lang.EN, reader, None)  # type: ignore[arg-type]
    again = launch_run.restart_prefetch(plan.settings)
    assert reader.calls == [("follow", (0, again)), ("close", None)] and record.data["prefetch"] == {"prefetch": "done"}


def test_taco_that_fails_to_activate_ends_the_node(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    for exit_code, outcome in [
        (ExitCode.JOB_MISSPECIFIED, "job-misspecified"),
        (ExitCode.PREFLIGHT_FAILED, "preflight-failed"),
    ]:
        launcher.taco_finding = failed("taco.install", Text("no wheel", "无"), Text("fix", "修"), exit_code=exit_code)
        (code, tell), text, record, _ = launcher.launch(plan)
        assert (code, tell) == (int(exit_code), True) and "Supervisor" not in launcher.made
        assert record.data["outcome"] == {"exit_code": exit_code, "class": outcome}
        assert " health check: TACO acceleration ==" in text and "  FAIL  taco.install  no wheel" in text
    launcher.taco_finding = warned("taco.install", Text("slow", "慢"), Text("fix", "修"))
    (code, _), _, _, _ = launcher.launch(plan)
    assert code == 0 and len(launcher.made["Supervisor"]) == 1


def test_a_worker_waits_for_node_0_before_torchrun(
    launcher: Launcher, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1))
    target = plan.launch.wait_for_master
    assert target is not None
    waits: list[tuple[object, ...]] = []
    answer: list[WaitResult] = []

    def wait(target: MasterWait, out: object, lang: Lang, job_ended: Callable[[], bool] | None) -> WaitResult:
        waits.append((target, lang, job_ended() if job_ended else None))
        return answer[0]

    monkeypatch.setattr(launch_run, "wait_for_master", wait)
    unreachable = failed("topology.master-unreachable", Text("node 0 silent", "无"), Text("fix", "修"), "x")
    answer.append(WaitResult(target, WaitStatus.UNREACHABLE, (), 3.0, 2, "refused", unreachable))
    (code, tell), text, record, _ = launcher.launch(plan)
    assert (code, tell) == (3, True) and waits == [(target, Lang.EN, None)]
    assert record.data["master"] == answer[0].to_json() and "master" in record.phases
    assert record.data["outcome"] == {"exit_code": 3, "class": "preflight-failed"}
    assert " health check: node 1 waiting for node 0 (MASTER_ADDR=10.0.0.1, port 23456) ==" in text
    end = JobEnd(3, "preflight-failed", Text("node 0 failed", "0 号失败"), 0, "h0")
    answer[0] = WaitResult(target, WaitStatus.JOB_ENDED, (), 1.0, 1, None, None)
    (code, tell), text, record, _ = launcher.launch(plan, Peers(end=end))
    assert (code, tell) == (3, False) and waits[-1][2] is True
    assert record.data["outcome"]["ended_by"] == {"node": 0, "host": "h0"}
    answer[0] = WaitResult(target, WaitStatus.REACHED, (), 1.0, 1, None, None)
    (code, tell), _, _, _ = launcher.launch(plan, Peers(end=end))  # node 0 answered: training starts
    assert (code, tell) == (0, True) and len(launcher.made["Supervisor"]) == 1
    answer[0] = WaitResult(target, WaitStatus.JOB_ENDED, (), 1.0, 1, None, None)
    (code, _), _, _, _ = launcher.launch(plan, Peers())  # ended, but no end to be read: on as the wait says
    assert code == 0


@pytest.mark.parametrize(
    "mode, status, code",
    [
        (PreflightMode.FAIL, PreflightStatus.BELOW, 3),
        (PreflightMode.WARN, PreflightStatus.BELOW, 0),
        (PreflightMode.FAIL, PreflightStatus.PASSED, 0),
    ],
)
def test_the_preflight_runs_before_torchrun_and_may_end_the_node(
    launcher: Launcher,
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    mode: PreflightMode,
    status: PreflightStatus,
    code: int,
) -> None:
    plan = make_plan(world)
    plan.launch = dataclasses.replace(plan.launch, preflight=mode)
    finding = warned("preflight", Text("below", "低"), Text("fix", "修"))
    result = PreflightResult(status, 180.0, [row(1 << 20, 1.0)], None, [finding])
    seen: list[tuple[object, ...]] = []
    monkeypatch.setattr(pf, "run_preflight", lambda plan, env, out, lang: seen.append((plan, env, lang)) or result)
    monkeypatch.setattr(pf, "table", lambda preflight, lang: f"TABLE {preflight.status} {lang}")
    (got, _), text, record, _ = launcher.launch(plan)
    assert got == code and seen == [(plan, launcher.taco_env, Lang.EN)]
    assert record.data["preflight"] == result.to_json() and "preflight" in record.phases
    assert f"TABLE {status} en" in text.splitlines() and " health check: bandwidth preflight ==" in text
    assert ("Supervisor" in launcher.made) == (code == 0)
    result.results = []
    _, text, _, _ = launcher.launch(plan)
    assert not any(line.startswith("TABLE") for line in text.splitlines())


def test_folders_that_cannot_be_made_are_said_and_training_still_starts(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    nccl_dir = plan.launch.files.nccl_dir
    assert nccl_dir is not None
    nccl_dir.parent.mkdir(parents=True, exist_ok=True)
    nccl_dir.write_text("a file where the folder goes")
    launcher.fr_problem = PermissionError(errno.EACCES, "Permission denied")
    (code, _), text, record, _ = launcher.launch(plan)
    assert code == 0
    assert text.splitlines() == [
        f"{LEAD}cannot create {nccl_dir} (File exists): NCCL's debug lines will be missing",
        f"{LEAD}cannot create the flight-recorder folder for /fr/trace_ (Permission denied): a stall's collective "
        "traces will be missing; check that the log folder is writable",
        f"{LEAD}start command: cd {world.openpi} && {' '.join(plan.launch.command)}",
    ]
    env = launcher.taco_env
    assert launcher.fr_envs == [("prepare", env), ("locations", env), ("training_python", env)]
    plan.launch = dataclasses.replace(plan.launch, nccl_debug={})
    launcher.fr_problem = None
    (code, _), text, record, _ = launcher.launch(plan)
    assert "nccl_debug" not in record.data and text.splitlines()[0].startswith(f"{LEAD}start command:")


# ---- run: the command itself, the storage watch, the job's end ----


def test_run_opens_the_node_log_and_hands_the_plan_on(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan(world)
    monkeypatch.setattr(launch_run, "build_plan", lambda host, flags, wait_for_seal: plan if wait_for_seal else None)
    seen: list[tuple[object, ...]] = []

    def run(plan: Plan, out: launch_run.Tee, record: StartupRecord, lang: Lang) -> int:
        out.write("into the log\n")
        seen.append((plan, out.file is not None, record.path, lang))
        return 5

    monkeypatch.setattr(launch_run, "_run", run)
    console_text = io.StringIO()
    assert launch_run.run(Host(env={"VLA_LANG": "zh"}), {}, console_text) == 5
    assert seen == [(plan, True, plan.launch.files.record, Lang.ZH)]
    log = plan.launch.files.log
    assert log is not None and log.read_text() == "into the log\n" and console_text.getvalue() == "into the log\n"


def test_run_without_a_node_log_says_why_and_goes_on(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan(world)
    monkeypatch.setattr(launch_run, "build_plan", lambda host, flags, wait_for_seal: plan)
    seen: list[object] = []
    monkeypatch.setattr(launch_run, "_run", lambda plan, out, record, lang: seen.append(record.path) or 0)
    blocker = world.root / "not-a-folder"
    blocker.write_text("x")
    files = NodeFiles("s", blocker / "node.log")
    plan.launch = dataclasses.replace(plan.launch, files=files)
    text = io.StringIO()
    assert launch_run.run(Host(env={"VLA_LANG": "en"}), {}, text) == 0
    assert text.getvalue() == (
        f"{LEAD}cannot write the node log ({blocker / 'node.log'}: File exists); logging to the console only\n"
    )
    plan.launch = dataclasses.replace(plan.launch, files=NodeFiles("s", None, Text("read-only", "只读")))
    text = io.StringIO()
    assert launch_run.run(Host(env={"VLA_LANG": "en"}), {}, text) == 0
    assert text.getvalue() == f"{LEAD}cannot write the node log (read-only); logging to the console only\n"
    assert seen == [None, None]


def test_run_ends_with_3_when_storage_does_not_answer_before_the_plan(
    monkeypatch: pytest.MonkeyPatch, local_tmp: Path
) -> None:
    stalled = StorageNotAnswering(SILENT, 15)

    def build(host: Host, flags: object, wait_for_seal: bool) -> Plan:
        raise stalled

    monkeypatch.setattr(launch_run, "build_plan", build)
    text = io.StringIO()
    assert launch_run.run(Host(env={"VLA_LANG": "en", "RANK": "4"}), {}, text) == 3
    assert text.getvalue().startswith(problem_block(stalled) + "\n")
    assert len(list((local_tmp / "vla-entrypoint").glob("node4-*.json"))) == 1


@pytest.mark.parametrize(
    "stall_timeout, action, give_up",
    [(None, StallAction.FAIL, 300.0), (45, StallAction.FAIL, 45.0), (45, StallAction.WARN, None)],
)
def test_the_storage_watch_gives_up_after_the_stall_bound_when_stalls_fail(
    world: World, stall_timeout: int | None, action: StallAction, give_up: float | None
) -> None:
    plan = make_plan(world)
    plan.settings = dataclasses.replace(plan.settings, stall_timeout=stall_timeout, stall_action=action)
    supervisor = types.SimpleNamespace(tree=None, storage_cause=None)
    out = io.StringIO()
    watch = launch_run._watch_storage(plan, supervisor, StartupRecord(None), out, Lang.EN)  # type: ignore[arg-type]
    assert (watch.interval, watch.timeout, watch.give_up_after) == (15.0, 15.0, give_up)
    assert (watch.out, watch.lang, watch.mounts) == (out, Lang.EN, tuple(plan.watched_mounts))
    assert supervisor.storage_cause == watch.cause


def test_giving_up_on_storage_kills_training_and_exits_124(
    world: World, monkeypatch: pytest.MonkeyPatch, local_tmp: Path
) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1))
    killed: list[str] = []
    supervisor = types.SimpleNamespace(
        tree=types.SimpleNamespace(kill=lambda: killed.append("tree")), storage_cause=None
    )
    exits: list[int] = []

    class Exited(Exception):
        pass

    def exit_now(code: int) -> None:
        exits.append(code)
        raise Exited

    monkeypatch.setattr(os, "_exit", exit_now)
    out = io.StringIO()
    watch = launch_run._watch_storage(plan, supervisor, StartupRecord(None), out, Lang.EN)  # type: ignore[arg-type]
    with pytest.raises(Exited):
        watch.on_give_up(SILENT, 299.6)
    assert killed == ["tree"] and exits == [124]
    (path,) = (local_tmp / "vla-entrypoint").glob("node1-*.json")
    assert read_json(path)["outcome"]["root_cause"] == "CFS not answering at /mnt/cfs for 300 s"
    assert read_json(path)["outcome"]["exit_code"] == 124
    supervisor.tree = None
    with pytest.raises(Exited):
        watch.on_give_up(SILENT, 1.0)
    assert killed == ["tree"]


class Ended(Made):
    """A stand-in supervisor after training: how it ended."""

    def __init__(self, **fields: Any) -> None:
        super().__init__()
        defaults = {
            "ended_at": 50.0,
            "gave_up": None,
            "verdict_line": None,
            "job_end": None,
            "signalled": None,
            "stall": None,
            "attempts": None,
            "presence": None,
            "culprit_line": None,
        }
        self.__dict__.update({**defaults, **fields})
        self.ends: list[JobEnd] = []

    def end_job(self, end: JobEnd) -> JobEnd:
        self.ends.append(end)
        return end


def test_a_crash_here_settles_the_jobs_end_with_this_nodes_cause(world: World) -> None:
    plan = make_plan(world)
    peers = Peers(node_rank=0)
    tail = OutputTail()
    tail.feed("[rank3]: Traceback (most recent call last):\n[rank3]: ValueError: batch_size=0 on rank 3\n")
    supervisor = Ended()
    assert launch_run._conclude(plan, peers, supervisor, tail, 1) == 1  # type: ignore[arg-type]
    assert peers.calls == [("settle", (50.0, 0.0))]
    why = Text(
        "node 0 (host-a): training ended with exit code 1: ValueError: batch_size=0 on rank 3",
        "节点 0(host-a):训练以退出码 1 结束:ValueError: batch_size=0 on rank 3",
    )
    assert supervisor.ends == [JobEnd(1, "training-crashed", why, 0, "host-a")]


def test_a_collective_error_waits_for_the_peers_own_cause(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make_plan(world)
    monkeypatch.setattr(launch_run.time, "monotonic", lambda: 77.0)
    end = JobEnd(3, "preflight-failed", Text("peer", "对端"), 1, "h1")
    peers = Peers(end=end)
    tail = OutputTail()
    tail.feed("[rank0]: Traceback (most recent call last):\n[rank0]: torch.distributed.DistBackendError: NCCL error\n")
    supervisor = Ended(ended_at=None)
    assert launch_run._conclude(plan, peers, supervisor, tail, 1) == 3  # type: ignore[arg-type]
    assert peers.calls == [("settle", (77.0, 10.0))] and supervisor.ends == [end]


def test_a_crash_without_a_cause_after_restarts_ran_out_is_do_not_requeue(world: World) -> None:
    plan = make_plan(world)
    verdict = Text("DO NOT REQUEUE: same exception", "请勿重新排队")
    supervisor = Ended(gave_up=types.SimpleNamespace(value="same-exception"), verdict_line=verdict)
    launch_run._conclude(plan, Peers(), supervisor, OutputTail(), 2)  # type: ignore[arg-type]
    assert supervisor.ends == [JobEnd(2, "do-not-requeue", verdict, 0, "host-a")]
    supervisor = Ended()
    launch_run._conclude(plan, Peers(), supervisor, OutputTail(), 2)  # type: ignore[arg-type]
    assert supervisor.ends[0].cause.en == "node 0 (host-a): training ended with exit code 2: -"


def test_restart_prefetch_reads_the_weights_and_the_checkpoint_resumed_from(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world)
    asked: list[tuple[object, ...]] = []
    monkeypatch.setattr(launch_run, "plan_prefetch", lambda *args: asked.append(args) or "prefetch")
    decisions = [
        types.SimpleNamespace(action=ResumeAction.RESUME, step=25, experiment_dir=Path("/exp")),
        types.SimpleNamespace(action=ResumeAction.FINISHED, step=50, experiment_dir=Path("/exp")),
    ]
    monkeypatch.setattr(launch_run, "decide_resume", lambda settings: decisions.pop(0))
    assert launch_run.restart_prefetch(plan.settings) == "prefetch"
    assert launch_run.restart_prefetch(plan.settings) == "prefetch"
    weights = world.assets / "checkpoints" / "pi05_base_pytorch"
    assert asked == [(weights, Path("/exp"), 25), (weights, Path("/exp"), None)]


def finish(world: World, plan: Plan, code: int, supervisor: Ended, **kw: Any) -> tuple[int, str, StartupRecord, Made]:
    """`_report` after training ended with `code`: (its code, what it printed, the record, the metrics)."""
    out, text = kw.pop("console", None) or console()
    record = StartupRecord(world.root / f"record-{len(list(world.root.glob('record-*')))}.json")
    progress = kw.pop("progress", None) or Progress(saving=SaveWatch(25, 50))
    tail = kw.pop("tail", None) or OutputTail()
    record.t0 = kw.pop("t0", record.t0)
    outcome = types.SimpleNamespace(to_json=lambda: {"verdict": "off"}, message=Text("TACO: off", "TACO:关"))
    asked: list[tuple[object, int]] = kw.pop("taco_asked", [])
    taco = types.SimpleNamespace(
        to_json=lambda: {"status": "off"}, outcome=lambda summary, rank: asked.append((summary, rank)) or outcome
    )
    metrics = Made()
    reader = kw.pop("taco_reader", None) or SummaryReader()
    got = launch_run._report(plan, out, record, Lang.EN, code, supervisor, progress, tail, taco, reader, metrics)  # type: ignore[arg-type]
    return got, text.getvalue(), record, metrics


def test_a_clean_end_records_its_outcome_and_says_so(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    plan.launch = dataclasses.replace(plan.launch, nccl_debug={})
    code, text, record, metrics = finish(world, plan, 0, Ended(culprit_line=Text("culprit: rank 3", "元凶")))
    assert code == 0 and metrics.calls == [("close", (0, "succeeded"))]
    data = read_json(record.path)  # type: ignore[arg-type]
    assert data["outcome"] == {"exit_code": 0, "class": "succeeded", "signal": None, "root_cause": None}
    assert data["taco"] == {"status": "off", "outcome": {"verdict": "off"}}
    assert "transport" not in data and "stall" not in data and "attempts" not in data
    assert "first_step_after_s" not in data["progress"]
    assert text.splitlines() == [
        f"{LEAD}training ended with exit code 0; no training step was logged and no checkpoint saved this run",
        f"{LEAD}TACO: off",
        f"{LEAD}report written",
        f"{LEAD}culprit: rank 3",
    ]


def test_a_crash_records_its_root_cause_and_the_node_files(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    nccl_dir = plan.launch.files.nccl_dir
    assert nccl_dir is not None
    nccl_dir.mkdir(parents=True)
    (nccl_dir / "nccl.nodeA.41.log").write_text(NCCL_LINE)
    tail = OutputTail()
    tail.feed("[rank3]: Traceback (most recent call last):\n[rank3]: ValueError: batch_size=0 on rank 3\n")
    progress = Progress(saving=SaveWatch(25, 50))
    progress.first_step_at = 10.0
    out, text_io = console()
    out._file = io.BytesIO()  # type: ignore[assignment]
    code, text, record, metrics = finish(
        world, plan, 7, Ended(signalled=None), tail=tail, progress=progress, console=(out, text_io)
    )
    assert code == 7
    data = read_json(record.path)  # type: ignore[arg-type]
    assert data["outcome"] == {
        "exit_code": 7,
        "class": "training-crashed",
        "signal": None,
        "root_cause": "ValueError: batch_size=0 on rank 3",
    }
    assert data["transport"] == NCCL_PROOF and data["progress"]["first_step_after_s"] == round(10.0 - record.t0, 3)
    assert metrics.calls == [("close", (7, "training-crashed"))]
    proof = nccl_findings()[0]
    assert text.splitlines()[:1] == [f"{LEAD}PASS fabric.proof: {proof.message.en}"]
    assert text.splitlines()[-3:] == [
        f"{LEAD}root cause: ValueError: batch_size=0 on rank 3",
        f"{LEAD}report written",
        f"{LEAD}node log {plan.launch.files.log}; start-up record {record.path}",
    ]


def test_a_signal_a_stall_and_a_spent_budget_each_name_the_end(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    _, _, record, _ = finish(world, plan, 143, Ended(signalled=15))
    assert read_json(record.path)["outcome"] == {  # type: ignore[arg-type]
        "exit_code": 143,
        "class": "killed",
        "signal": 15,
        "root_cause": None,
    }
    _, text, record, metrics = finish(world, plan, 124, Ended(stall={"silent_s": 600}))
    data = read_json(record.path)  # type: ignore[arg-type]
    assert data["stall"] == {"silent_s": 600} and metrics.calls == [("close", (124, "stalled"))]
    assert data["outcome"]["class"] == "stalled" and data["outcome"]["root_cause"] == "no progress for 600s"
    assert f"{LEAD}root cause: no progress for 600s" in text.splitlines()
    _, _, record, _ = finish(world, plan, 124, Ended(stall={"requested_by": 0}))  # node 0's request, answered
    assert read_json(record.path)["outcome"]["class"] == "training-crashed"  # type: ignore[arg-type]
    _, _, record, _ = finish(world, plan, 1, Ended(stall={"silent_s": 600}))
    assert read_json(record.path)["outcome"]["class"] == "training-crashed"  # type: ignore[arg-type]
    attempts = types.SimpleNamespace(attempts=[1], to_json=lambda: [{"attempt": 1}])
    gave_up = types.SimpleNamespace(value="no-progress")
    _, _, record, _ = finish(world, plan, 1, Ended(attempts=attempts, gave_up=gave_up))
    data = read_json(record.path)  # type: ignore[arg-type]
    assert data["attempts"] == [{"attempt": 1}]
    assert (data["outcome"]["class"], data["outcome"]["verdict"]) == ("do-not-requeue", "no-progress")
    _, _, record, _ = finish(world, plan, 1, Ended(attempts=types.SimpleNamespace(attempts=[])))
    assert "attempts" not in read_json(record.path)  # type: ignore[arg-type]


def test_an_end_by_another_node_or_a_lost_one_is_recorded_as_theirs(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    lost = LostNode(1, "h1", 90.0, True, 60.0)
    end = JobEnd(137, "node-lost", Text("node 1 lost", "节点 1 丢失"), 0, "h0", (lost,), "lost")
    _, _, record, _ = finish(world, plan, 137, Ended(job_end=end))
    assert read_json(record.path)["outcome"] == {  # type: ignore[arg-type]
        "exit_code": 137,
        "class": "node-lost",
        "signal": None,
        "root_cause": "node 1 lost",
        "ended_by": {"node": 0, "host": "h0"},
        "lost_nodes": [lost.to_json()],
        "verdict": "lost",
    }
    end = JobEnd(3, "preflight-failed", Text("node 1 failed", "节点 1 失败"), 1, "h1")
    _, _, record, _ = finish(world, plan, 3, Ended(job_end=end))
    assert read_json(record.path)["outcome"] == {  # type: ignore[arg-type]
        "exit_code": 3,
        "class": "preflight-failed",
        "signal": None,
        "root_cause": "node 1 failed",
        "ended_by": {"node": 1, "host": "h1"},
        "lost_nodes": [],
    }
    own = JobEnd(3, "training-crashed", Text("mine", "我的"), 0, "h0")
    _, _, record, _ = finish(world, plan, 3, Ended(job_end=own))
    assert "ended_by" not in read_json(record.path)["outcome"]  # type: ignore[arg-type]


def test_a_transport_proof_line_names_status_id_and_message() -> None:
    out = io.StringIO()
    launch_run._proof_line(out, Lang.EN, warned("fabric.proof-socket", Text("sockets", "套接字"), Text("f", "f")))  # type: ignore[arg-type]
    assert out.getvalue() == f"{LEAD}WARN fabric.proof-socket: sockets\n"


# ---- what the mutation run found unpinned ----


def test_the_wait_records_its_time_to_the_millisecond() -> None:
    result = WaitResult(TARGET, WaitStatus.UNREACHABLE, ADDR, 1.23456, 3, "refused", None)
    assert result.to_json() == {
        **TARGET.to_json(),
        "status": "unreachable",
        "addresses": ["10.0.0.1", "10.0.0.2"],
        "waited_s": 1.235,
        "attempts": 3,
        "error": "refused",
    }


def test_a_master_reached_late_is_said_in_the_language_asked(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    master(monkeypatch, clock, [(ADDR, None)], [REFUSED, None])
    out = io.StringIO()
    assert rw.wait_for_master(TARGET, out, Lang.EN).status is WaitStatus.REACHED
    assert out.getvalue().splitlines() == [
        f"{LEAD}waiting for node 0 at node0:23456 (10.0.0.1, 10.0.0.2) to accept connections (0 s of 10 s): "
        "Connection refused",
        f"{LEAD}node 0 at node0:23456 accepts connections after 0 s",
    ]


def test_a_worker_waits_for_node_0s_preflight_port_on_its_own_console(
    torchrun: Torchrun, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[object, object]] = []
    unreachable = failed("topology.master-unreachable", Text("no", "否"), Text("fix", "修"), "n0:29501")

    def wait(target: MasterWait, out: object, lang: object) -> WaitResult:
        seen.append((out, lang))
        return WaitResult(target, WaitStatus.UNREACHABLE, (), 1.0, 1, "refused", unreachable)

    monkeypatch.setattr(pf, "wait_for_master", wait)
    out = io.StringIO()
    target = MasterWait("MASTER_ADDR", "n0", 29500, 60, 30)
    pf.run_preflight(preflight_plan(rank=1, wait=target), NO_TORCHRUN, out, Lang.ZH)
    assert seen == [(out, Lang.ZH)]


def test_a_preflight_over_sockets_on_an_ib_plan_warns(torchrun: Torchrun) -> None:
    torchrun.rows = [row(512 << 20, 200.0)]
    torchrun.nccl_line = "node-c:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3\n"
    result = pf.run_preflight(preflight_plan(transport=Transport.IB), dict(TRAINING_ENV), io.StringIO(), Lang.EN)
    proof = parse_lines([torchrun.nccl_line])
    assert proof.socket_nodes == ("node-c",)
    (socket_warning,) = proof_findings(proof, Transport.IB)
    assert socket_warning.id == "fabric.proof-socket"
    assert result.findings[0] == socket_warning and result.transport == proof.to_json()


def test_a_preflight_below_the_minimum_keeps_its_rows_and_proof(torchrun: Torchrun) -> None:
    torchrun.rows = [row(1 << 20, 10.0), row(512 << 20, 179.9)]
    result = pf.run_preflight(preflight_plan(), dict(TRAINING_ENV), io.StringIO(), Lang.EN)
    assert (result.status, result.results, result.transport) == (PreflightStatus.BELOW, torchrun.rows, NCCL_PROOF)
    assert pf._last_line("first\nsecond\nthird\n") == "third"
    table = pf.table(PreflightResult(PreflightStatus.PASSED, 180.0, [row(1 << 20, 1.0)]), Lang.EN)
    assert table.splitlines()[2:] == ["minimum for the largest size: 180.0 GB/s"]


def test_the_worker_describes_its_options(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "argv", ["preflight_worker", "--help"])
    with pytest.raises(SystemExit):
        pfw.main()
    sizes = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("--sizes")]
    assert sizes == ["--sizes SIZES      comma-separated message sizes in bytes"]


def test_the_worker_on_gpus_without_a_local_rank_is_rank_0(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    torch = run_worker(monkeypatch, out, "--sizes", "10", "--repeats", "1")
    assert torch.calls[:2] == [("set_device", 0), ("init", "nccl")]
    assert json.loads(out.read_text())["results"] == [{"bytes": 8, "busbw_gbps": [0.0], "median_gbps": 0.0}]


def test_one_process_measures_the_algorithm_bandwidth_in_gb_per_s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    run_worker(monkeypatch, out, "--sizes", "400000000", "--repeats", "1", world=1, gpus=False)
    assert json.loads(out.read_text())["results"] == [{"bytes": 400000000, "busbw_gbps": [400.0], "median_gbps": 400.0}]
    # 4 TB in 1 ms: 4,000,000 GB/s, where a gigabyte that is one byte off would show 3,999,999.996
    run_worker(monkeypatch, out, "--sizes", "4000000000000", "--repeats", "1", "--iters", "1", world=1, gpus=False)
    assert json.loads(out.read_text())["results"] == [
        {"bytes": 4000000000000, "busbw_gbps": [4000000.0], "median_gbps": 4000000.0}
    ]


def test_run_plans_for_its_host_and_flags_and_makes_the_log_folder(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world)
    log = world.root / "deep" / "er" / "node.log"
    plan.launch = dataclasses.replace(plan.launch, files=NodeFiles("s", log))
    host, flags = Host(env={"VLA_LANG": "en"}), {"dry_run": True}
    built: list[tuple[object, ...]] = []
    monkeypatch.setattr(launch_run, "build_plan", lambda h, f, wait_for_seal: built.append((h, f)) or plan)
    closed: list[float] = []
    close_file = launch_run.Tee.close_file
    monkeypatch.setattr(
        launch_run.Tee, "close_file", lambda tee, wait_s: closed.append(wait_s) or close_file(tee, wait_s)
    )
    seen: list[tuple[object, ...]] = []
    monkeypatch.setattr(
        launch_run,
        "_run",
        lambda plan, out, record, lang: seen.append((out.file is not None, list(record.phases))) or 0,
    )
    assert launch_run.run(host, flags, io.StringIO()) == 0
    assert built == [(host, flags)] and seen == [(True, ["plan"])]
    assert log.parent.is_dir() and closed == [plan.settings.storage_timeout] and closed[0] is not None


def test_storage_silent_before_the_plan_is_said_in_the_language_asked(
    monkeypatch: pytest.MonkeyPatch, local_tmp: Path
) -> None:
    stalled = StorageNotAnswering(SILENT, 15)

    def build(host: Host, flags: object, wait_for_seal: bool) -> Plan:
        raise stalled

    monkeypatch.setattr(launch_run, "build_plan", build)
    text = io.StringIO()
    assert launch_run.run(Host(env={"VLA_LANG": "en", "RANK": "4"}), {}, text) == 3
    (path,) = (local_tmp / "vla-entrypoint").glob("node4-*.json")
    assert text.getvalue() == (
        f"{problem_block(stalled)}\n{LEAD}the start-up record is on this node's own disk instead: {path} (the log "
        "folder's storage is not answering)\n"
    )


def test_a_local_record_is_written_under_the_name_it_chose(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    machine_tmp = tmp_path / "not" / "yet"  # the temp folder itself may be missing
    monkeypatch.setattr(tempfile, "tempdir", str(machine_tmp))
    record = StartupRecord(None, started_at=1_700_000_000.0)
    launch_run._record_locally(record, "7", 124, "CFS gone", SILENT, io.StringIO(), Lang.EN)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(1_700_000_000.0))
    path = machine_tmp / "vla-entrypoint" / f"node7-{stamp}-{os.getpid()}.json"
    assert record.path == path and read_json(path)["outcome"]["exit_code"] == 124
    path.write_text("{}")  # the same name, taken: it is this process's own, so it is written over
    record = StartupRecord(None, started_at=1_700_000_000.0)
    out = io.StringIO()
    launch_run._record_locally(record, "7", 3, "CFS gone", SILENT, out, Lang.EN)
    assert record.path == path and read_json(path)["outcome"]["exit_code"] == 3
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert out.getvalue() == (
        f"{LEAD}the start-up record is on this node's own disk instead: {path} (the log folder's storage is not "
        "answering)\n"
    )


def test_giving_up_on_storage_says_where_the_record_went_and_survives_a_broken_stdout(
    world: World, monkeypatch: pytest.MonkeyPatch, local_tmp: Path
) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1))
    supervisor = types.SimpleNamespace(tree=None, storage_cause=None)
    exits: list[int] = []

    class Exited(Exception):
        pass

    def exit_now(code: int) -> None:
        exits.append(code)
        raise Exited

    class BrokenStdout:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def flush(self) -> None:
            raise self.error

    monkeypatch.setattr(os, "_exit", exit_now)
    for error in (OSError(errno.EIO, "Input/output error"), ValueError("I/O operation on closed file")):
        out = io.StringIO()
        record = StartupRecord(None, started_at=1_700_000_000.0)
        watch = launch_run._watch_storage(plan, supervisor, record, out, Lang.EN)  # type: ignore[arg-type]
        with monkeypatch.context() as broken, pytest.raises(Exited):
            broken.setattr(sys, "stdout", BrokenStdout(error))
            watch.on_give_up(SILENT, 31.0)
        (path,) = (local_tmp / "vla-entrypoint").glob("node1-*.json")  # one second, one process: one name
        assert out.getvalue() == (
            f"{LEAD}the start-up record is on this node's own disk instead: {path} (the log folder's storage is "
            "not answering)\n"
        )
    assert exits == [124, 124]


def test_the_seal_makes_its_folders_and_goes_into_an_existing_one(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "seal.json"
    assert launch_run.write_seal(Seal(SealRole.WRITE, deep, payload={"a": 1}))
    assert read_json(deep)["a"] == 1
    again = tmp_path / "a" / "b" / "other.json"  # its folder is there already
    assert launch_run.write_seal(Seal(SealRole.WRITE, again, payload={"b": 2}))
    assert read_json(again)["b"] == 2


def test_an_early_clean_end_on_another_node_leaves_the_report_to_node_0(
    world: World, report_calls: list[tuple[object, ...]]
) -> None:
    plan = make_plan(world)
    plan.topology = dataclasses.replace(plan.topology, node_rank=1)
    out = io.StringIO()
    assert launch_run._ended_early(plan, out, Lang.EN, StartupRecord(None), 0, OutcomeClass.ALREADY_FINISHED) == 0
    assert report_calls == [] and out.getvalue() == ""


def test_run_hands_its_plan_console_and_language_on(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, out = make_plan(world), io.StringIO()
    asked: list[tuple[object, ...]] = []
    jobs: list[tuple[object, ...]] = []

    def run_job(p: Plan, o: object, r: StartupRecord, lang: Lang, presence: object) -> tuple[int, bool]:
        jobs.append((p, o, lang, presence))
        return 0, True

    monkeypatch.setattr(launch_run, "_run_job", run_job)
    monkeypatch.setattr(launch_run, "_presence", lambda p, o: asked.append((p, o)) or None)
    assert launch_run._run(plan, out, StartupRecord(None), Lang.ZH) == 0  # type: ignore[arg-type]
    peers = Peers()
    monkeypatch.setattr(launch_run, "_presence", lambda p, o: asked.append((p, o)) or peers)
    assert launch_run._run(plan, out, StartupRecord(None), Lang.ZH) == 0  # type: ignore[arg-type]
    assert asked == [(plan, out), (plan, out)]
    assert jobs == [(plan, out, Lang.ZH, None), (plan, out, Lang.ZH, peers)]


def test_each_early_end_of_the_job_is_said_in_english_only(
    world: World, launches: list, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from entrypoint.launch import health_gate

    report = f"{LEAD}report written"
    plan = make_plan(world)
    plan.findings.append(failed("x.y", Text("bad", "坏"), Text("fix", "修")))
    out, text = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert text.getvalue().splitlines()[-1] == report
    plan = make_plan(world)
    plan.seal = Seal(SealRole.WRITE, tmp_path / "seal.json", payload={"a": 1})
    out, text = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert text.getvalue().splitlines()[-1] == f"{LEAD}dataset verdict sealed for the other nodes: {plan.seal.path}"
    plan = make_plan(world)
    plan.resume = dataclasses.replace(plan.resume, action=ResumeAction.FINISHED, step=50)
    out, text = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert text.getvalue().splitlines()[-2] == report
    plan = make_plan(world)
    plan.health = HealthGate(HealthMode.WARN, True, False, 8, Text("on", "开"))
    outs: list[object] = []

    def start_gate(plan: Plan, host: Host, out: object, lang: Lang, since: float) -> types.SimpleNamespace:
        outs.append(out)
        return types.SimpleNamespace(failed=True, to_json=lambda: {"gate": "ran"})

    monkeypatch.setattr(health_gate, "start_gate", start_gate)
    out, text = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert outs == [out] and text.getvalue().splitlines()[-1] == report
    plan.health = HealthGate(HealthMode.WARN, False, False, 0, Text("no GPU here: skipped", "无 GPU:跳过"))
    out, text = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, None)  # type: ignore[arg-type]
    assert text.getvalue().splitlines()[-1] == f"{LEAD}no GPU here: skipped"


def test_the_launch_gets_this_nodes_presence(world: World, launches: list) -> None:
    plan, peers = make_plan(world), Peers()
    out, _ = console()
    launch_run._run_job(plan, out, StartupRecord(None), Lang.EN, peers)  # type: ignore[arg-type]
    assert launches[-1][4:] == (peers, out)


def test_the_launch_hands_its_console_record_and_settings_to_every_part(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    plan.patch = PatchState(PatchStatus.PRESENT, None, Path("/openpi/patch.sh"))
    plan.settings = dataclasses.replace(plan.settings, stall_timeout=45)
    record = StartupRecord(world.root / "record.json")
    record.since_start = lambda: 1.234567  # type: ignore[method-assign]
    (code, tell), text, _, _ = launcher.launch(plan, record=record, logged=True)
    out = launcher.out
    assert (code, tell) == (0, True)
    assert text.splitlines() == [
        f"{LEAD}transformers_replace already present",
        f"{LEAD}start command: cd {world.openpi} && {' '.join(plan.launch.command)}",
    ]
    assert launcher.taco_out is out and record.data["launch_after_s"] == 1.2346
    assert launcher.fr_envs == [("prepare", launcher.taco_env), ("training_python", launcher.taco_env)]
    (supervisor,) = launcher.made["Supervisor"]
    progress = supervisor.args[4][0]
    assert isinstance(progress, Progress) and progress.saving == SaveWatch(25, 50)
    assert (plan.settings.save_interval, plan.settings.num_train_steps) == (25, 50)
    assert supervisor.args[3] is out and launcher.made["Watchdog"][0].args[:3] == (45, 1800, progress)
    assert launcher.made["Exchange"][0].args[4] == plan.launch.files.log
    assert launcher.made["watch"][0].given == (record, out, Lang.EN)
    (report,) = launcher.reports
    assert report[1] is out and report[8] is launcher.taco
    metrics = launcher.made["Metrics"][0]
    metrics.kwargs["say"](Text("GPU 3 is hot", "GPU 3 过热"))
    assert out.console.getvalue() == text + f"{LEAD}GPU 3 is hot\n"  # type: ignore[union-attr]
    launcher.made["Attempts"][0].attempts.extend(
        [types.SimpleNamespace(number=0, cause=None), types.SimpleNamespace(number=1, cause=StallAction.FAIL)]
    )
    assert metrics.kwargs["attempts"]() == [(0, None), (1, "fail")]


def test_the_nccl_folder_is_made_with_its_parents_or_found(launcher: Launcher, world: World) -> None:
    plan = make_plan(world)
    plan.launch = dataclasses.replace(plan.launch, files=NodeFiles("s", world.root / "a" / "b" / "node.log"))
    nccl_dir = plan.launch.files.nccl_dir
    assert nccl_dir is not None and plan.launch.nccl_debug
    start = f"{LEAD}start command: cd {world.openpi} && {' '.join(plan.launch.command)}"
    for _ in range(2):  # made, then already there
        (code, _), text, _, _ = launcher.launch(plan)
        assert code == 0 and nccl_dir.is_dir() and text.splitlines() == [start]


def test_restarts_prefetch_what_restart_prefetch_names(
    launcher: Launcher, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world)
    plan.launch = dataclasses.replace(plan.launch, prefetch=types.SimpleNamespace(to_json=lambda: {}))  # type: ignore[arg-type]
    monkeypatch.setattr(launch_run, "restart_prefetch", lambda settings: ("prefetch-after-restart", settings))

    class Following(Reader):
        def follow_restarts(self, count: Callable[[], int], again: Callable[[], object]) -> None:
            self.calls.append(("follow", again()))

    out, _ = console()
    reader = Following(Host(), out, Lang.EN)
    launch_run._launch(plan, out, StartupRecord(None), Lang.EN, reader, None)  # type: ignore[arg-type]
    assert reader.calls[0] == ("follow", ("prefetch-after-restart", plan.settings))


def summary_of(finding: Finding, heading: str) -> str:
    """The health summary of one finding as `run` prints it in English."""
    text = io.StringIO()
    health_summary([finding], heading, Lang.EN, text)
    return text.getvalue()


def test_each_end_before_training_is_said_in_english_only(
    launcher: Launcher, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = f"{LEAD}report written\n"
    plan = make_plan(world)
    launcher.taco_finding = failed("taco.install", Text("no wheel", "无"), Text("fix", "修"))
    (code, tell), text, _, _ = launcher.launch(plan)
    assert (code, tell) == (3, True) and text == summary_of(launcher.taco_finding, "TACO acceleration") + report
    launcher.taco_finding = None
    plan.launch = dataclasses.replace(plan.launch, preflight=PreflightMode.FAIL)
    below = warned("preflight", Text("below", "低"), Text("fix", "修"))
    outs: list[object] = []
    result = PreflightResult(PreflightStatus.BELOW, 180.0, [], None, [below])
    monkeypatch.setattr(pf, "run_preflight", lambda plan, env, out, lang: outs.append(out) or result)
    (code, tell), text, _, _ = launcher.launch(plan)
    assert (code, tell) == (3, True) and outs == [launcher.out]
    assert text == summary_of(below, "bandwidth preflight") + report
    plan.launch = dataclasses.replace(plan.launch, preflight=PreflightMode.OFF)
    launcher.code = StartFailed("/bin/torchrun", PermissionError(errno.EACCES, "Permission denied"))
    (code, tell), text, _, _ = launcher.launch(plan)
    what = launch_run.RUN("start-failed", program="/bin/torchrun", error=Text("Permission denied", "权限不足"))
    cannot = failed("trainer.torchrun", what, launch_run.RUN("start-failed-fix"))
    start = f"{LEAD}start command: cd {world.openpi} && {' '.join(plan.launch.command)}\n"
    assert (code, tell) == (3, True) and text == start + summary_of(cannot, "starting torchrun") + report


def test_a_worker_whose_wait_fails_or_ends_says_so_in_english_only(
    launcher: Launcher, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1))
    target = plan.launch.wait_for_master
    assert target is not None
    outs: list[object] = []
    answer: list[WaitResult] = []
    monkeypatch.setattr(launch_run, "wait_for_master", lambda target, out, lang, ended: outs.append(out) or answer[0])
    unreachable = failed("topology.master-unreachable", Text("node 0 silent", "无"), Text("fix", "修"), "x")
    answer.append(WaitResult(target, WaitStatus.UNREACHABLE, (), 3.0, 2, "refused", unreachable))
    (code, tell), text, _, _ = launcher.launch(plan)
    heading = "node 1 waiting for node 0 (MASTER_ADDR=10.0.0.1, port 23456)"
    assert (code, tell) == (3, True) and outs == [launcher.out]
    assert text == summary_of(unreachable, heading) + f"{LEAD}report written\n"
    answer[0] = WaitResult(target, WaitStatus.JOB_ENDED, (), 1.0, 1, None, None)
    end = JobEnd(3, "preflight-failed", Text("node 0 failed", "0 号失败"), 0, "h0")
    (code, tell), text, _, _ = launcher.launch(plan, Peers(end=end))
    assert (code, tell) == (3, False)
    assert text == (
        f"{LEAD}JOB ENDED by node 0 (h0) while this node waited for node 0: node 0 failed — nothing started here; "
        "this node exits with the same exit code 3\n"
    )


def test_storage_silent_during_training_on_a_worker_is_said_and_recorded_as_its_own(
    launcher: Launcher, world: World, local_tmp: Path
) -> None:
    plan = make_plan(world, **world.tione(nodes=2, per_node=8, rank=1), VLA_MASTER_WAIT_TIMEOUT="0")
    launcher.stalled, launcher.code = SILENT, 124
    (code, tell), text, record, _ = launcher.launch(plan)
    assert (code, tell) == (124, False)
    (path,) = (local_tmp / "vla-entrypoint").glob("node1-*.json")
    assert record.path == path and read_json(path)["outcome"]["exit_code"] == 124
    assert text.splitlines() == [
        f"{LEAD}start command: cd {world.openpi} && {' '.join(plan.launch.command)}",
        f"{LEAD}CFS not answering at /mnt/cfs for 31 s",
        f"{LEAD}the start-up record is on this node's own disk instead: {path} (the log folder's storage is not "
        "answering)",
    ]


def test_a_failed_torchrun_settles_the_end_with_what_training_left(launcher: Launcher, world: World) -> None:
    plan, peers = make_plan(world), Peers()
    launcher.code = 1
    launcher.launch(plan, peers)
    (supervisor,) = launcher.made["Supervisor"]
    assert launcher.concluded == [(plan, peers, supervisor, supervisor.args[4][1], 1)]


def test_the_cause_comes_from_torchruns_error_file_first(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    error_file = plan.launch.error_file
    assert error_file is not None
    error_file.parent.mkdir(parents=True, exist_ok=True)
    error_file.write_text(json.dumps({"message": {"message": "Traceback:\nRuntimeError: CUDA out of memory"}}))
    _, text, record, _ = finish(world, plan, 1, Ended())
    assert read_json(record.path)["outcome"]["root_cause"] == "RuntimeError: CUDA out of memory"  # type: ignore[arg-type]
    assert f"{LEAD}root cause: RuntimeError: CUDA out of memory" in text.splitlines()
    supervisor = Ended()
    launch_run._conclude(plan, Peers(), supervisor, OutputTail(), 1)  # type: ignore[arg-type]
    assert supervisor.ends[0].cause.en == (
        "node 0 (host-a): training ended with exit code 1: RuntimeError: CUDA out of memory"
    )


def test_a_clean_end_has_no_root_cause_whatever_the_output_showed(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    tail = OutputTail()
    tail.feed("[rank3]: Traceback (most recent call last):\n[rank3]: ValueError: retried and recovered\n")
    progress = Progress(saving=SaveWatch(25, 50))
    progress.first_step_at = 1.23456
    _, text, record, _ = finish(world, plan, 0, Ended(), tail=tail, progress=progress, t0=0.0)
    data = read_json(record.path)  # type: ignore[arg-type]
    assert data["outcome"]["root_cause"] is None and data["progress"]["first_step_after_s"] == 1.235
    assert not any("root cause" in line for line in text.splitlines())


def test_the_transport_proof_is_read_only_where_nccl_debug_wrote_it(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    nccl_dir = plan.launch.files.nccl_dir
    assert nccl_dir is not None and plan.launch.nccl_debug
    _, _, record, _ = finish(world, plan, 0, Ended())  # debug on, but no folder
    assert "transport" not in read_json(record.path)  # type: ignore[arg-type]
    nccl_dir.mkdir(parents=True)
    (nccl_dir / "nccl.nodeA.41.log").write_text(NCCL_LINE)
    plan.launch = dataclasses.replace(plan.launch, nccl_debug={})  # a folder, but debug off
    _, _, record, _ = finish(world, plan, 0, Ended())
    assert "transport" not in read_json(record.path)  # type: ignore[arg-type]


def test_the_transport_proof_after_training_warns_of_sockets_on_an_ib_plan(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    plan.fabric = dataclasses.replace(plan.fabric, transport=Transport.IB)
    nccl_dir = plan.launch.files.nccl_dir
    assert nccl_dir is not None
    nccl_dir.mkdir(parents=True)
    socket_line = "node-c:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3\n"
    (nccl_dir / "nccl.node-c.926.log").write_text(socket_line)
    _, text, _, _ = finish(world, plan, 0, Ended())
    (warning,) = proof_findings(parse_lines([socket_line]), Transport.IB)
    assert text.splitlines()[:2] == [
        f"{LEAD}WARN fabric.proof-socket: {warning.message.en}",
        f"{LEAD}training ended with exit code 0; no training step was logged and no checkpoint saved this run",
    ]


def test_a_clean_end_on_a_worker_points_at_node_0s_log_and_writes_no_report(world: World, report_calls: list) -> None:
    plan = make_plan(world)
    plan.topology = dataclasses.replace(plan.topology, node_rank=1)
    taco_reader = types.SimpleNamespace(close=lambda: {"fused_adam": "applied"})
    asked: list[tuple[object, int]] = []
    _, text, _, _ = finish(world, plan, 0, Ended(), taco_reader=taco_reader, taco_asked=asked)
    assert asked == [({"fused_adam": "applied"}, 1)] and report_calls == []
    assert text.splitlines() == [
        f"{LEAD}training ended with exit code 0; node 1 does not see training progress (openpi prints it from global "
        f"rank 0 only); see node 0's log in {world.assets / 'logs'}",
        f"{LEAD}TACO: off",
    ]


def test_node_0s_clean_end_waits_for_the_others_before_the_report(world: World, report_calls: list) -> None:
    plan, peers = make_plan(world), Peers(pending=[1])
    finish(world, plan, 0, Ended(presence=peers))
    assert peers.calls == [("look", None), ("wait_done", 30.0)] and len(report_calls) == 1
