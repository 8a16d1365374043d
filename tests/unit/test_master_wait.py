"""A worker node whose master never answers: the real CLI in a child process, a real resolver and real sockets.

An unresolvable MASTER_ADDR (a name under the reserved `.invalid` domain) or a port that never opens ends the node
with exit 3 within `VLA_MASTER_WAIT_TIMEOUT` and one cause naming the name and port, before any torchrun; a port
that opens while the node waits lets training start; node 0 and a single node never wait. The master address is
this machine's own host name (a name, so topology does not refuse it as loopback) with a port the test bound: it
refuses connections until the test calls `listen()`.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.core.messages import Text
from entrypoint.launch.presence import JobEnd, Presence, run_folder
from tests.support.files import small_text
from tests.unit.conftest import FAKE_BIN, World

pytestmark = pytest.mark.timeout(90)

SHORT_BOUND_S = 3
MARGIN_S = 12  # interpreter start and the plan on a busy 2-core machine, well under any real bound
LIMIT_S = 60


@pytest.fixture
def master_name() -> str:
    """This machine's host name, when it resolves to an address a local listener answers on."""
    name = socket.gethostname()
    try:
        socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except OSError:
        pytest.skip(f"this machine's host name {name!r} does not resolve")
    return name


@pytest.fixture
def closed_port() -> Iterator[socket.socket]:
    """A TCP port bound on every IPv4 address and not listening: connections are refused until `listen()`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("", 0))
    try:
        yield sock
    finally:
        sock.close()


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


class Node:
    """`python -m entrypoint ARGV` for node `rank` of a 2 x 8 TI-ONE job, its output read line by line."""

    def __init__(self, world: World, argv: tuple[str, ...], rank: int, **env: str) -> None:
        self.record_file = world.root / f"torchrun-saw-{rank}.json"
        path = os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent), world.env["PATH"]])
        full = {
            **world.env,
            **world.tione(nodes=2, per_node=8, rank=rank),
            "PATH": path,
            "VLA_LANG": "en",
            "FAKE_TORCHRUN_RECORD": str(self.record_file),
            **env,
        }
        self.world, self.rank = world, rank
        self.started = time.monotonic()
        self.proc = world.spawn(argv, full)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            self.lines.put(text)
        self.lines.put(None)

    def wait_for_line(self, part: str, limit_s: float = LIMIT_S) -> str:
        """The first output line containing `part`; fails if the node ends or `limit_s` passes first."""
        deadline = time.monotonic() + limit_s
        while True:
            try:
                text = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no line with {part!r} within {limit_s}s:\n{''.join(self.seen)[-3000:]}"
                ) from None
            if text is None:
                raise AssertionError(f"ended without a line with {part!r}:\n{''.join(self.seen)[-3000:]}")
            self.seen.append(text)
            if part in text:
                return text

    def finish(self, limit_s: float = LIMIT_S) -> tuple[int, str, float]:
        """Exit code, whole output and seconds from start to exit."""
        try:
            code = self.proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running after {limit_s}s:\n{''.join(self.seen)[-3000:]}") from None
        took = time.monotonic() - self.started
        while (text := self.lines.get(timeout=LIMIT_S)) is not None:
            self.seen.append(text)
        out = "".join(self.seen)
        assert "Traceback (most recent call last)" not in out, out[-3000:]
        return code, out, took

    @property
    def torchrun_started(self) -> bool:
        return self.record_file.exists()

    def record(self) -> dict:
        (path,) = (p for p in (self.world.assets / "logs").glob(f"*-node{self.rank}-*.json") if ".error" not in p.name)
        return json.loads(small_text(path))


def fail_lines(out: str) -> list[str]:
    return [text for text in out.splitlines() if text.lstrip().startswith("FAIL")]


def test_an_unresolvable_master_ends_the_worker_within_the_bound(world: World) -> None:
    node = Node(world, ("run",), 1, MASTER_ADDR="node0.invalid", VLA_MASTER_WAIT_TIMEOUT=str(SHORT_BOUND_S))
    code, out, took = node.finish()
    assert code == 3, out[-3000:]
    (headline,) = fail_lines(out)
    assert "topology.master-unresolved" in headline and "MASTER_ADDR=node0.invalid did not resolve" in headline
    assert "instance count" in out  # the fix: TI-ONE's master is instance 0
    assert "waiting for MASTER_ADDR node0.invalid to resolve" in out
    assert "health check: node 1 waiting for node 0 (MASTER_ADDR=node0.invalid, port 23456) ==" in out
    assert not node.torchrun_started and "start command:" not in out  # no line announces what never started
    record = node.record()
    assert record["outcome"] == {"exit_code": 3, "class": "preflight-failed"} and "launch_after_s" not in record
    assert record["master"]["status"] == "unresolved" and record["master"]["error"]
    assert SHORT_BOUND_S <= record["phases_s"]["master"] < SHORT_BOUND_S + 2
    assert took < SHORT_BOUND_S + MARGIN_S


def test_a_port_that_never_opens_ends_the_worker_naming_the_port(
    world: World, master_name: str, closed_port: socket.socket
) -> None:
    port = port_of(closed_port)
    node = Node(
        world,
        ("run",),
        1,
        MASTER_ADDR=master_name,
        MASTER_PORT=str(port),
        VLA_MASTER_WAIT_TIMEOUT=str(SHORT_BOUND_S),
    )
    code, out, took = node.finish()
    assert code == 3, out[-3000:]
    (headline,) = fail_lines(out)
    assert f"node 0 at {master_name}:{port}" in headline and "did not accept connections" in headline
    assert "refused" in headline.lower()  # the last attempt's error, as the system said it
    assert "VLA_MASTER_WAIT_TIMEOUT" in out  # the fix names the knob
    assert not node.torchrun_started
    master = node.record()["master"]
    assert (master["status"], master["port"]) == ("unreachable", port) and master["addresses"]
    assert took < SHORT_BOUND_S + MARGIN_S


def test_a_port_that_opens_while_the_worker_waits_lets_training_start(
    world: World, master_name: str, closed_port: socket.socket
) -> None:
    port = port_of(closed_port)
    node = Node(world, ("run",), 1, MASTER_ADDR=master_name, MASTER_PORT=str(port), VLA_MASTER_WAIT_TIMEOUT="60")
    waiting = node.wait_for_line("waiting for node 0 at")
    assert f"{master_name}:{port}" in waiting and "of 60 s" in waiting
    assert not node.torchrun_started
    closed_port.listen()  # node 0's torchrun has started
    code, out, _ = node.finish()
    assert code == 0, out[-3000:]
    assert node.torchrun_started and f"node 0 at {master_name}:{port} accepts connections after" in out
    assert out.index("accepts connections after") < out.index("start command:")  # said when torchrun starts
    record = node.record()
    assert record["master"]["status"] == "reached" and record["launch_after_s"] >= record["phases_s"]["master"]


def test_the_preflight_command_on_a_worker_waits_for_the_preflight_port(
    world: World, master_name: str, closed_port: socket.socket
) -> None:
    preflight_port = port_of(closed_port)
    node = Node(
        world,
        ("preflight",),
        1,
        MASTER_ADDR=master_name,
        MASTER_PORT=str(preflight_port - 1),
        VLA_MASTER_WAIT_TIMEOUT="2",
    )
    code, out, took = node.finish()
    assert code == 3, out[-3000:]
    (headline,) = fail_lines(out)
    assert f"{master_name}:{preflight_port}" in headline and not node.torchrun_started
    assert took < 2 + MARGIN_S


def test_node_0_never_waits_even_for_a_name_that_does_not_resolve(world: World) -> None:
    node = Node(world, ("run",), 0, MASTER_ADDR="node0.invalid", VLA_MASTER_WAIT_TIMEOUT="60")
    code, out, took = node.finish()
    assert code == 0, out[-3000:]
    assert node.torchrun_started and "waiting for" not in out
    assert "master" not in node.record()["phases_s"]
    assert took < MARGIN_S


@pytest.mark.parametrize(
    "rank, env, expected",
    [
        (1, {}, {"variable": "MASTER_ADDR", "addr": "10.0.0.1", "port": 23456, "timeout_s": 300}),
        (1, {"VLA_PREFLIGHT": "warn"}, {"port": 23457}),  # the preflight's torchrun is the first to rendezvous
        (1, {"VLA_MASTER_WAIT_TIMEOUT": "30"}, {"timeout_s": 30, "resolve_timeout_s": 30}),
        (1, {"VLA_MASTER_WAIT_TIMEOUT": str(2**63 - 1)}, {"timeout_s": 2**63 - 1, "resolve_timeout_s": 90}),
        (1, {"VLA_MASTER_WAIT_TIMEOUT": "0"}, None),
        (0, {}, None),
    ],
    ids=["worker", "worker-with-preflight", "short-bound", "huge-bound", "turned-off", "node-0"],
)
def test_the_plan_says_what_the_node_waits_for(world: World, rank: int, env: dict, expected: dict | None) -> None:
    result = world.cli("plan", "--json", env={**world.tione(nodes=2, per_node=8, rank=rank), **env})
    assert result.code == 0, result.text
    wait = json.loads(result.out)["launch"]["wait_for_master"]
    if expected is None:
        assert wait is None
    else:
        assert wait is not None and expected.items() <= wait.items()


def test_a_single_node_waits_for_nothing(world: World) -> None:
    result = world.cli("plan", "--json", env={"VLA_DEVICE": "cpu", "MASTER_ADDR": "node0.invalid"})
    assert result.code == 0, result.text
    assert json.loads(result.out)["launch"]["wait_for_master"] is None


def test_a_worker_waiting_for_node_0_ends_with_node_0s_code_once_node_0_ended_the_job(
    world: World, master_name: str, closed_port: socket.socket
) -> None:
    """Node 0 failed its checks (exit 3) and said so in the run's folder: node 1, waiting for node 0's port, ends
    with the same code and cause at its next attempt, not after its 60 s bound, and starts no torchrun."""
    port = port_of(closed_port)
    env = {
        **world.env,
        **world.tione(nodes=2, per_node=8, rank=1),
        "MASTER_ADDR": master_name,
        "MASTER_PORT": str(port),
    }
    folder = run_folder(world.assets / "logs", "pi05_libero_pytorch", env)
    assert folder is not None
    node0 = Presence(folder, 0, 2, [master_name, "?"], 600)
    node0.start()
    why = Text("node 0 failed its checks: assets.weights", "0 号节点检查未通过:assets.weights")
    node0.announce(JobEnd(3, "preflight-failed", why, 0, master_name))
    node0.finish(clean=False)
    node = Node(world, ("run",), 1, MASTER_ADDR=master_name, MASTER_PORT=str(port), VLA_MASTER_WAIT_TIMEOUT="60")
    code, out, took = node.finish()
    assert code == 3, out[-3000:]
    assert f"JOB ENDED by node 0 ({master_name}) while this node waited for node 0: {why.en}" in out
    assert not node.torchrun_started and took < 60, took
    record = node.record()
    assert record["master"]["status"] == "job-ended" and record["master"]["waited_s"] < MARGIN_S, record["master"]
    assert (record["outcome"]["class"], record["outcome"]["ended_by"]["node"]) == ("preflight-failed", 0)
