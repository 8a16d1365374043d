"""Reading the trainer's files into the page cache while it starts (`inspect.prefetch`, `launch.prefetch`).

What a user notices: `plan --json` lists the base weights and the checkpoint the job resumes from, in the trainer's
order; `run` reads them while torchrun starts and says so in one line; afterwards the file's pages are in memory; the
reader stays inside half of the available memory; it never holds up the launcher, also when CFS stops answering.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.core.host import Host
from entrypoint.core.messages import Lang
from entrypoint.inspect.prefetch import Prefetch, memory_budget, plan_prefetch
from entrypoint.launch.prefetch import Reader, read_ahead
from tests.support.cfs import Cfs, fuse_available, mounted
from tests.support.edges import run_cli
from tests.support.files import small_text
from tests.support.synthetic import make_checkpoint, write_safetensors
from tests.unit.conftest import World

LIMIT_S = 60.0
CHECKPOINT = ("model.safetensors", "optimizer.pt", "metadata.pt")


def real_weights(world: World, size: int = 1 << 20) -> Path:
    """The world's base weights as a file with data (the world's own are sparse: nothing to read from storage)."""
    path = world.assets / "checkpoints/pi05_base_pytorch/model.safetensors"
    write_safetensors(path, size)
    with open(path, "r+b") as handle:  # real bytes where the tensor's hole was
        handle.seek(path.stat().st_size - size)
        handle.write(os.urandom(size))
    return path


def planned(world: World, **env: str) -> dict[str, object] | None:
    result = run_cli(world, ("plan", "--json"), env, LIMIT_S)
    prefetch: dict[str, object] | None = json.loads(result.out)["launch"]["prefetch"]
    return prefetch


def test_plan_lists_the_weights_then_the_checkpoint_the_job_resumes_from(world: World) -> None:
    weights = real_weights(world)
    make_checkpoint(world.experiment, 10)
    newest = make_checkpoint(world.experiment, 25)
    prefetch = planned(world)
    assert prefetch is not None
    expected = [weights] + [newest / name for name in CHECKPOINT]
    assert prefetch["files"] == [{"path": str(p), "bytes": p.stat().st_size} for p in expected]
    assert prefetch["checkpoint_step"] == 25 and prefetch["bytes"] == sum(p.stat().st_size for p in expected)


def test_sparse_weights_and_a_fresh_start_plan_nothing(world: World) -> None:
    """The world's weights are sparse (holes come from no storage) and there is no checkpoint yet."""
    assert planned(world) is None


def test_prefetch_off_plans_nothing(world: World) -> None:
    real_weights(world)
    make_checkpoint(world.experiment, 25)
    assert planned(world, VLA_PREFETCH="0") is None
    assert planned(world) is not None


def test_plan_prefetch_skips_what_is_not_a_regular_file(tmp_path: Path) -> None:
    weights = tmp_path / "weights"
    (weights / "model.safetensors").mkdir(parents=True)  # a folder where the file belongs
    step = tmp_path / "exp" / "5"
    step.mkdir(parents=True)
    os.mkfifo(step / "model.safetensors")  # a FIFO: stat says so without opening it
    (step / "optimizer.pt").write_bytes(b"x" * 100)
    prefetch = plan_prefetch(weights, tmp_path / "exp", 5)
    assert prefetch == Prefetch(((step / "optimizer.pt", 100),), 5, weights=False)
    assert prefetch.what().en == "checkpoint of step 5"
    assert plan_prefetch(weights, tmp_path / "exp", None) is None


def resident_share(path: Path) -> float:
    """The share of `path`'s pages in the page cache (mincore over a read-only mapping, which touches none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vector = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            assert libc.mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vector) / pages


def evicted(path: Path) -> Path:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path


def test_read_ahead_brings_every_page_into_memory(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(os.urandom(24 << 20))
    assert resident_share(evicted(path)) < 0.5
    reports: list[dict[str, object]] = []
    read_ahead([(str(path), 24 << 20)], None, reports.append)
    assert resident_share(path) == 1.0
    assert reports[0]["bytes"] == 24 << 20 and reports[-1] == {"done": True, "capped": False}


def test_read_ahead_stays_inside_its_budget(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_bytes(b"a" * 3000)
    second.write_bytes(b"b" * 3000)
    reports: list[dict[str, object]] = []
    read_ahead([(str(first), 3000), (str(second), 3000)], 4000, reports.append)
    assert [r.get("bytes") for r in reports[:2]] == [3000, 1000] and reports[-1] == {"done": True, "capped": True}


def test_a_file_replaced_by_a_fifo_or_gone_is_named_and_the_rest_is_read(tmp_path: Path) -> None:
    fifo, gone, fine = tmp_path / "fifo", tmp_path / "gone", tmp_path / "fine"
    os.mkfifo(fifo)  # nobody writes it: opening it for reading would wait forever without O_NONBLOCK
    fine.write_bytes(b"f" * 10)
    reports: list[dict[str, object]] = []
    read_ahead([(str(fifo), 100), (str(gone), 100), (str(fine), 10)], None, reports.append)
    assert [(r.get("path"), "error" in r) for r in reports[:3]] == [
        (str(fifo), True),
        (str(gone), True),
        (str(fine), False),
    ]
    assert reports[0]["error"] == "not a regular file" and reports[2]["bytes"] == 10


def test_memory_budget_is_half_of_what_the_kernel_says_is_available(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal:       2000000 kB\nMemAvailable:    1000000 kB\n")
    assert memory_budget(Host({}, tmp_path)) == 1000000 * 1024 // 2
    (proc / "meminfo").write_text("MemTotal: lots\n")
    assert memory_budget(Host({}, tmp_path)) is None


class Console:
    """What the reader prints, line by line, with a way to wait for one."""

    def __init__(self) -> None:
        self.text, self.changed = "", threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            self.text += text
            self.changed.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def wait_for(self, words: str, timeout: float = 30) -> str:
        with self.changed:
            assert self.changed.wait_for(lambda: words in self.text, timeout), self.text
            return self.text


def test_a_restart_reads_the_newest_checkpoint_again(tmp_path: Path) -> None:
    step = tmp_path / "exp" / "30"
    step.mkdir(parents=True)
    (step / "optimizer.pt").write_bytes(b"o" * 4096)
    console, attempts = Console(), [1]
    reader = Reader(Host.current(), console, Lang.EN)  # type: ignore[arg-type]
    try:
        reader.follow_restarts(lambda: attempts[0], lambda: plan_prefetch(None, tmp_path / "exp", 30), poll_s=0.01)
        attempts[0] = 2  # torchrun restarted the workers
        text = console.wait_for("page cache: 4.0 KiB read")
        assert (
            "reading 1 file(s), 4.0 KiB, into this node's page cache while the trainer starts (checkpoint of step 30)"
            in text
        )
    finally:
        reader.close()
    assert reader.to_json()[0]["bytes"] == 4096


@pytest.fixture
def cfs(tmp_path: Path) -> Iterator[Cfs]:
    if not fuse_available() and not os.environ.get("CI"):
        pytest.skip("needs /dev/fuse, fusermount3 and mfusepy")
    with mounted(tmp_path / "cfs") as stand_in:
        yield stand_in


def test_a_read_on_a_cfs_that_stopped_answering_never_holds_up_the_launcher(cfs: Cfs) -> None:
    (cfs.source / "model.safetensors").write_bytes(b"w" * 4096)
    prefetch = plan_prefetch(cfs.mountpoint, cfs.mountpoint / "exp", None)
    assert prefetch is not None
    before = cfs.counts().total()
    cfs.stall()
    reader = Reader(Host.current(), Console(), Lang.EN)  # type: ignore[arg-type]
    reader.start(prefetch)
    deadline = time.monotonic() + 30
    while cfs.counts().total() == before:  # the child's lookup reached the storage, which does not answer
        assert time.monotonic() < deadline, "the reader never asked the storage"
    started = time.monotonic()
    reader.close()
    assert time.monotonic() - started < 3
    assert reader.to_json()[0]["stopped"] == "ended" and reader.to_json()[0]["bytes"] == 0


def test_run_reads_the_resumed_checkpoint_while_torchrun_starts(world: World) -> None:
    newest = make_checkpoint(world.experiment, 25)
    env = {**world.env, "FAKE_TORCHRUN_BLOCK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "entrypoint", "run"],
        env=env,
        cwd=world.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        seen = ""
        for text in launcher.stdout:  # bounded by the suite's timeout: the launcher blocks until signalled
            seen += text
            if "page cache:" in seen and "fake-torchrun: waiting" in seen:  # read, and torchrun runs: the
                break  # launcher relays signals from here on
        launcher.send_signal(signal.SIGTERM)
        seen += launcher.communicate(timeout=LIMIT_S)[0]
    finally:
        launcher.kill()
    size = sum((newest / name).stat().st_size for name in CHECKPOINT)
    assert "while the trainer starts (checkpoint of step 25)" in seen, seen
    (record_path,) = (world.assets / "logs").glob("*-node0-*.json")
    (outcome,) = json.loads(small_text(record_path))["prefetch"]
    assert outcome["bytes"] == size and outcome["stopped"] is None and not outcome["capped"]
