"""Container helpers for the fault and security tests: detached containers driven with the docker SDK,
synchronised on their output (never on sleeps), each one and each network removed afterwards.

`Sandbox` owns everything a test starts; `Node` is one running container whose combined output a thread
collects, so a test can wait for a line (`wait_for`) and know when the container ended (`exit`), to the
tenth of a second, without polling. `checkpoint_folders` / `assert_checkpoints_intact` check what training
left on the CFS with the launcher's own safetensors check.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from entrypoint.inspect.assets import InvalidAsset, check_safetensors
from entrypoint.inspect.openpi import CHECKPOINT_FILES
from tests.image.conftest import CFS_IN_CONTAINER, tione_env
from tests.support.files import small_text

EXPERIMENT = "checkpoints/pi05_libero/pi05_libero_pytorch"
SAVED = re.compile(r"Saved checkpoint at step (\d+)")


class Node:
    """One detached container: its output collected by a thread, its end recorded by another."""

    def __init__(self, container: Any, name: str) -> None:
        self.container, self.name = container, name
        self._output = bytearray()
        self._changed = threading.Condition()
        self._streaming = True
        self.code: int | None = None
        self.ended_at: float | None = None  # time.monotonic() when the engine reported the exit
        self._follower = threading.Thread(target=self._follow, name=f"logs-{name}", daemon=True)
        self._waiter = threading.Thread(target=self._wait, name=f"wait-{name}", daemon=True)
        self._follower.start()
        self._waiter.start()

    def _follow(self) -> None:
        try:
            for chunk in self.container.logs(stream=True, follow=True):
                with self._changed:
                    self._output += chunk
                    self._changed.notify_all()
        except Exception:  # the container was removed under us: the test is over
            pass
        finally:
            with self._changed:
                self._streaming = False
                self._changed.notify_all()

    def _wait(self) -> None:
        try:
            code = self.container.wait()["StatusCode"]
        except Exception:
            code = -1
        with self._changed:
            self.code, self.ended_at = code, time.monotonic()
            self._changed.notify_all()

    @property
    def output(self) -> str:
        """Everything the container printed so far (stdout and stderr interleaved)."""
        with self._changed:
            return self._output.decode("utf-8", "replace")

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        """Block until `pattern` (a regular expression) appears in the output; fail if the container ends first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                match = regex.search(self._output.decode("utf-8", "replace"))
                if match:
                    return match
                if not self._streaming and self.code is not None:
                    pytest.fail(f"{self.name} exited ({self.code}) before printing {pattern!r}:\n{self.output[-6000:]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"{self.name} did not print {pattern!r} within {timeout}s:\n{self.output[-6000:]}")
                self._changed.wait(left)

    def exit(self, timeout: float = 180) -> int:
        """The exit code, once the container has ended (fails after `timeout` seconds)."""
        self._waiter.join(timeout)
        if self.code is None:
            pytest.fail(f"{self.name} still running after {timeout}s:\n{self.output[-6000:]}")
        self._follower.join(10)
        return self.code

    def seconds_since(self, start: float) -> float:
        assert self.ended_at is not None, "call exit() first"
        return self.ended_at - start

    def stdout(self) -> str:
        return self.container.logs(stdout=True, stderr=False).decode("utf-8", "replace")

    def stderr(self) -> str:
        return self.container.logs(stdout=False, stderr=True).decode("utf-8", "replace")

    def exec(self, command: list[str]) -> tuple[int, str]:
        code, out = self.container.exec_run(command)
        return code, out.decode("utf-8", "replace")

    def processes(self) -> list[tuple[int, int, str]]:
        """(pid, parent pid, command line) of every process in the container."""
        code, out = self.exec(["ps", "-eo", "pid=,ppid=,args="])
        assert code == 0, out
        rows = []
        for line in out.splitlines():
            pid, ppid, args = line.split(None, 2)
            rows.append((int(pid), int(ppid), args.strip()))
        return rows

    def workers(self) -> list[int]:
        """PIDs of the training workers (ranks): torchrun's train_pytorch.py children, not their data-loader workers."""
        rows = self.processes()
        torchrun = {pid for pid, _, args in rows if "torchrun" in args}
        return [pid for pid, ppid, args in rows if ppid in torchrun and "train_pytorch.py" in args]


@dataclass
class Sandbox:
    """Starts containers and networks for one test and removes all of them at the end."""

    client: Any
    image: str
    prefix: str = field(default_factory=lambda: f"vla-fault-{uuid.uuid4().hex[:8]}")
    nodes: list[Node] = field(default_factory=list)
    networks: list[Any] = field(default_factory=list)

    def network(self) -> str:
        net = self.client.networks.create(f"{self.prefix}-net", driver="bridge")
        self.networks.append(net)
        return net.name

    def name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def start(
        self,
        short: str,
        env: dict[str, str],
        cfs: Path | None = None,
        *,
        mode: str = "rw",
        mounts: dict[str, tuple[str, str]] | None = None,
        network: str | None = None,
        command: list[str] | None = None,
        image: str | None = None,
        **kwargs: Any,
    ) -> Node:
        """Start the image detached as `<prefix>-<short>` with the CFS tree bind-mounted (`mode` rw|ro) plus
        `mounts` {host path: (container path, mode)}; `image` replaces the sandbox's image."""
        volumes = {str(cfs): {"bind": CFS_IN_CONTAINER, "mode": mode}} if cfs is not None else {}
        volumes.update({host: {"bind": inside, "mode": m} for host, (inside, m) in (mounts or {}).items()})
        name = self.name(short)
        container = self.client.containers.run(
            image or self.image,
            command,
            name=name,
            hostname=short,
            environment=env,
            volumes=volumes,
            network=network,
            detach=True,
            **kwargs,
        )
        node = Node(container, name)
        self.nodes.append(node)
        return node

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.container.remove(force=True)
        for net in self.networks:
            with contextlib.suppress(Exception):
                net.remove()


def start_two_nodes(sandbox: Sandbox, cfs: Path, **extra: str) -> tuple[Node, Node]:
    """Two TI-ONE nodes of 2 processes each on one Docker network; node 0's container name is MASTER_ADDR."""
    network = sandbox.network()
    master, other = sandbox.name("node0"), sandbox.name("node1")
    nodes = []
    for rank in (0, 1):
        env = tione_env(nodes=2, per_node=2, rank=rank, master=master, NODE_LIST=f"{master}:2,{other}:2", **extra)
        nodes.append(sandbox.start(f"node{rank}", env, cfs, network=network))
    return nodes[0], nodes[1]


def start_nodes(
    sandbox: Sandbox, cfs: Path, count: int, per_node: int = 1, absent: tuple[int, ...] = (), **extra: str
) -> dict[int, Node]:
    """`count` TI-ONE nodes of `per_node` processes on one Docker network, by node rank, except the `absent` ones
    (named in NODE_LIST, never started); node 0's container name is MASTER_ADDR."""
    network = sandbox.network()
    names = [sandbox.name(f"node{rank}") for rank in range(count)]
    node_list = ",".join(f"{name}:{per_node}" for name in names)
    nodes = {}
    for rank in range(count):
        if rank in absent:
            continue
        env = tione_env(nodes=count, per_node=per_node, rank=rank, master=names[0], NODE_LIST=node_list, **extra)
        nodes[rank] = sandbox.start(f"node{rank}", env, cfs, network=network)
    return nodes


def record_of(cfs: Path, rank: int) -> dict[str, Any]:
    """Node `rank`'s start-up record of the one run in `cfs`."""
    (log,) = (cfs / "logs").glob(f"pi05_libero_pytorch-node{rank}-*.log")
    return json.loads(small_text(log.with_suffix(".json")))


def checkpoint_folders(experiment: Path) -> dict[str, Path]:
    """Every entry of the experiment folder by name (steps, tmp_* leftovers, moved-aside folders)."""
    return {p.name: p for p in sorted(experiment.iterdir())} if experiment.is_dir() else {}


def incomplete_reason(folder: Path) -> str | None:
    """Why a step folder is not a complete checkpoint (the launcher's criteria, plus the .pt files being
    whole zip archives as torch.save writes them), or None."""
    for name in CHECKPOINT_FILES:
        if not (folder / name).is_file():
            return f"{name} missing"
    try:
        check_safetensors(folder / "model.safetensors")
    except InvalidAsset as exc:
        return f"model.safetensors: {exc}"
    for name in ("optimizer.pt", "metadata.pt"):
        try:
            with zipfile.ZipFile(folder / name) as archive:
                bad = archive.testzip()
        except zipfile.BadZipFile as exc:
            return f"{name}: {exc}"
        if bad is not None:
            return f"{name}: corrupt member {bad}"
    return None


def complete_steps(experiment: Path) -> list[int]:
    return sorted(
        int(n)
        for n, p in checkpoint_folders(experiment).items()
        if n.isdigit() and p.is_dir() and incomplete_reason(p) is None
    )


def saved_steps(output: str) -> list[int]:
    """Steps the trainer announced as saved (`Saved checkpoint at step N`)."""
    return [int(s) for s in SAVED.findall(output)]


def assert_checkpoints_intact(experiment: Path, announced: list[int]) -> list[int]:
    """Every all-digit step folder is a complete checkpoint and every announced save is there; returns the steps."""
    folders = checkpoint_folders(experiment)
    steps = sorted(int(n) for n, p in folders.items() if n.isdigit() and p.is_dir())
    broken = {s: incomplete_reason(experiment / str(s)) for s in steps}
    assert not {s: r for s, r in broken.items() if r}, f"incomplete step folders in {experiment}: {broken}"
    missing = sorted(set(announced) - set(steps))
    assert not missing, f"saves announced but absent: {missing} (folders: {sorted(folders)})"
    return steps
