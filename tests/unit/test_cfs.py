"""Shared storage that stalls, answers slowly or dies, and one dataset verification per job: against a real FUSE
mount (`tests/support/cfs.py`) that counts requests and can stop answering."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.core.findings import Status
from entrypoint.inspect.mounts import read_mountinfo
from entrypoint.inspect.storage_probe import mounts_touched, probe
from tests.support.cfs import FS_NAME, Cfs, fuse_available, mounted
from tests.support.synthetic import REPO_ID, make_assets_tree, make_dataset

# In CI these run whatever the machine has (scripts/setup-tools test installs fuse3): a missing FUSE fails, never skips.
pytestmark = pytest.mark.skipif(
    not fuse_available() and not os.environ.get("CI"), reason="needs /dev/fuse, fusermount3 and mfusepy"
)

BOUND_S = 2  # VLA_STORAGE_TIMEOUT in these tests
SLACK_S = 5  # what the issue allows beyond the bound


@pytest.fixture
def cfs(tmp_path: Path) -> Iterator[Cfs]:
    with mounted(tmp_path / "cfs") as stand_in:
        yield stand_in


def on_cfs(world, cfs: Cfs, episodes: int = 3, name: str = "openpi-assets") -> Path:
    """The world's assets tree moved onto the stand-in CFS (written behind the mount: a fresh `name` each time, so
    that no attribute the kernel cached from an earlier tree is seen), and the fake host's mount table made the
    real one."""
    root = cfs.source / name
    make_assets_tree(root, episodes=episodes)
    table = world.host / "proc" / "self" / "mountinfo"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_bytes(Path("/proc/self/mountinfo").read_bytes())
    world.env.update({"VLA_ASSETS_ROOT": str(cfs.mountpoint / name), "VLA_STORAGE_TIMEOUT": str(BOUND_S)})
    return cfs.mountpoint / name


def finish(process: subprocess.Popen[str], bound: float) -> tuple[int, str, float]:
    """The process's exit code and output, and how long it took; it must end within `bound` seconds."""
    started = time.monotonic()
    try:
        out, _ = process.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        process.kill()  # a process blocked on the stand-in is freed when the fixture lets the storage answer
        pytest.fail(f"still running after {bound} s")
    return process.returncode, out, time.monotonic() - started


@pytest.mark.parametrize("command", [("check",), ("check", "--assets"), ("plan", "--json"), ("run",)], ids=" ".join)
def test_a_stalled_mount_ends_the_command_within_the_bound_naming_the_mount(world, cfs, tmp_path, command):
    on_cfs(world, cfs)
    started = tmp_path / "torchrun-started.json"
    cfs.stall()
    process = world.spawn(command, {**world.env, "FAKE_TORCHRUN_RECORD": str(started), "VLA_DEVICE": "cpu"})
    code, out, took = finish(process, BOUND_S + SLACK_S + 10)
    assert code == 3, out
    assert took < BOUND_S + SLACK_S
    assert "storage.not-answering" in out and str(cfs.mountpoint) in out and FS_NAME in out
    assert "within 2.0 s" in out and "2.0 秒内没有应答" in out and "VLA_STORAGE_TIMEOUT" in out
    assert not started.exists()  # torchrun never started
    if command == ("run",):
        local = Path(out.split("own disk instead: ")[1].split(" ")[0])
        try:
            record = json.loads(local.read_text())
            assert record["outcome"]["class"] == "storage-not-answering" and record["outcome"]["exit_code"] == 3
            assert record["outcome"]["storage"]["point"] == str(cfs.mountpoint)
        finally:
            local.unlink()


def test_a_mount_whose_server_died_is_named_with_the_error(world, cfs):
    on_cfs(world, cfs)
    cfs.process.send_signal(signal.SIGKILL)
    cfs.process.wait(timeout=10)
    code, out, _ = finish(world.spawn(("check",), world.env), BOUND_S + SLACK_S + 10)
    assert code == 3 and "Transport endpoint is not connected" in out and str(cfs.mountpoint) in out


def test_an_answering_mount_is_probed_once_and_passes(world, cfs):
    on_cfs(world, cfs)
    result = world.cli("check", "--json", env={"VLA_DEVICE": "cpu"})
    checks = [c for c in json.loads(result.out)["checks"] if c["id"] == "storage.responsive"]
    assert [c["status"] for c in checks] == ["pass"] and str(cfs.mountpoint) in checks[0]["message"]


def test_a_slow_mount_warns_with_the_figure(tmp_path):
    with mounted(tmp_path / "slow", latency_ms=600) as slow:
        mounts = read_mountinfo(Path("/proc/self/mountinfo"))
        assert mounts is not None
        [answer] = probe(mounts_touched([slow.mountpoint], mounts), timeout=10)
    finding = answer.finding()
    assert answer.answered and answer.seconds > 1.0
    assert finding.status is Status.WARN and f"after {answer.seconds:.1f} s" in finding.message.en


def test_local_paths_start_no_probe():
    mounts = read_mountinfo(Path("/proc/self/mountinfo"))
    assert mounts is not None and mounts_touched([Path("/tmp"), Path("/")], [m for m in mounts if not m.network]) == []


# --- the seal: node 0 verifies, the other nodes trust it ----------------------------------------------------------


def node(world, rank: int) -> dict[str, str]:
    return {**world.env, **world.tione(nodes=2, per_node=1, rank=rank), "VLA_DEVICE": "cpu"}


def dataset_check(world, rank: int) -> dict:
    result = world.cli("check", "--json", env=node(world, rank))
    data = json.loads(result.out)
    [check] = [c for c in data["checks"] if c["id"].startswith("assets.dataset")]
    return {"status": check["status"], "message": check["message"], "seal": data["dataset_seal"]}


def seal_by_node0(world, tmp_path: Path) -> Path:
    """Node 0 runs (the stand-in torchrun ends at once) and seals its dataset verdict; returns the seal."""
    code, out, _ = finish(world.spawn(("run",), node(world, 0)), 120)
    assert code == 0, out
    seals = list((Path(world.env["VLA_ASSETS_ROOT"]) / "logs" / ".seals").glob("*.json"))
    assert len(seals) == 1 and "dataset verdict sealed" in out
    return seals[0]


def test_a_worker_trusts_node0s_seal_for_this_job(world, tmp_path):
    world.gpus(1)
    seal_by_node0(world, tmp_path)
    found = dataset_check(world, 1)
    assert found["status"] == "pass" and found["seal"]["trusted"] and "verified by node 0" in found["message"]


def test_without_a_seal_a_worker_verifies_by_itself(world):
    world.gpus(1)
    found = dataset_check(world, 1)
    assert found["status"] == "pass" and not found["seal"]["trusted"]
    assert found["seal"]["reason"] == "no seal from node 0" and "verified by node 0" not in found["message"]


@pytest.mark.parametrize(
    "change, reason",
    [
        ("older", "the seal is older than this node's start"),
        ("other-job", "the seal is for another job or dataset"),
        ("failed", "node 0's verdict was not a pass"),
        ("dataset-changed", "the dataset changed since node 0 verified it"),
        ("garbage", "the seal cannot be read"),
        ("folder", "the seal cannot be read"),
    ],
)
def test_a_seal_is_trusted_only_for_this_job_and_this_tree(world, tmp_path, change, reason):
    world.gpus(1)
    seal = seal_by_node0(world, tmp_path)
    data = json.loads(seal.read_text())
    if change == "older":
        data["written_at"] = time.time() - 3600
    elif change == "other-job":
        data["key"] = "0" * 32
    elif change == "failed":
        data["verdict"] = "fail"
    if change == "dataset-changed":
        shutil.rmtree(world.assets / "datasets" / REPO_ID / "data" / "chunk-000")
        make_dataset(world.assets / "datasets" / REPO_ID, 3)
    elif change == "garbage":
        seal.write_bytes(b"\xff{" * 10)
    elif change == "folder":
        seal.unlink()
        seal.mkdir()
    else:
        seal.write_text(json.dumps(data))
    found = dataset_check(world, 1)
    assert not found["seal"]["trusted"] and found["seal"]["reason"] == reason
    assert found["status"] == "pass" and "verified by node 0" not in found["message"]


def test_a_broken_tree_is_never_sealed_and_fails_on_every_node(world, tmp_path):
    world.gpus(1)
    episode = world.assets / "datasets" / REPO_ID / "data" / "chunk-000" / "episode_000001.parquet"
    episode.write_bytes(b"not a parquet file at all")
    code, _, _ = finish(world.spawn(("run",), node(world, 0)), 120)
    assert code == 3 and not (world.assets / "logs" / ".seals").exists()
    assert dataset_check(world, 1)["status"] == "fail"


def test_a_workers_requests_do_not_grow_with_the_episodes(world, cfs, tmp_path):
    """On CFS, a worker that trusts the seal makes the same number of requests for 3 and for 300 episodes."""
    world.gpus(1)
    counts = []
    for episodes in (3, 300):
        on_cfs(world, cfs, episodes, name=f"openpi-assets-{episodes}")
        seal_by_node0(world, tmp_path)
        before = cfs.counts()
        assert dataset_check(world, 1)["seal"]["trusted"]
        counts.append(sum((cfs.counts() - before).values()))
    assert counts[0] == counts[1]


# --- during training ---------------------------------------------------------------------------------------------


def wait_for_line(process: subprocess.Popen[str], text: str, bound: float) -> str:
    """The output up to the first line containing `text`, read as it comes (the process must print it in time)."""
    seen: list[str] = []
    deadline = time.monotonic() + bound
    assert process.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        got = process.stdout.readline()
        if not got:
            break
        seen.append(got)
        if text in got:
            return "".join(seen)
    process.kill()
    pytest.fail(f"no line with {text!r} within {bound} s: {''.join(seen)[-2000:]}")


def test_a_cfs_that_stops_answering_during_training_is_named_and_ends_the_job(world, cfs):
    on_cfs(world, cfs)
    env = {**world.env, "VLA_DEVICE": "cpu", "FAKE_TORCHRUN_BLOCK": "1", "VLA_STORAGE_TIMEOUT": "1"}
    process = world.spawn(("run",), {**env, "VLA_STALL_TIMEOUT": "6", "VLA_MAX_RESTARTS": "0"})
    before = wait_for_line(process, "fake-torchrun: waiting", 60)
    cfs.stall()  # a checkpoint save or a log write from now on waits for the storage
    stalled_at = time.monotonic()
    named = wait_for_line(process, f"CFS not answering at {cfs.mountpoint}", 5)  # two probe intervals
    # At the stall bound the job ends, blaming no rank: by the watchdog (naming the storage as the cause) or, when
    # the launcher's own loop waits on the storage, by the storage watch itself.
    ending = wait_for_line(process, f"CFS not answering at {cfs.mountpoint} for", 6 + SLACK_S)
    assert time.monotonic() - stalled_at < 6 + SLACK_S
    # A FUSE request the daemon has taken waits uninterruptibly (an NFS hard mount's would be killable): let the
    # storage answer so that the launcher's threads waiting on it, and so the process, can end.
    cfs.answer()
    code, after, _ = finish(process, 30)
    out = before + named + ending + after
    assert code == 124, out
    # no rank blamed (the watchdog may still say "no single rank stands out" when it saw the stall first)
    assert "CFS 无响应" in out and "culprit rank(s)" not in out
    local = Path(out.split("own disk instead: ")[1].split(" ")[0])
    try:
        record = json.loads(local.read_text())
        assert record["outcome"]["class"] == "storage-not-answering" and record["outcome"]["exit_code"] == 124
    finally:
        local.unlink()
