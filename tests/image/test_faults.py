"""Faults a TI-ONE job meets, on real containers of the image (CPU stand-in trainer, real gloo DDP): a signal
to a node, a worker or a whole node dying, an automatic restart over leftovers, checkpoint storage that is
read-only or full, and VLA_OVERWRITE on several nodes at once.

Each test synchronises on the job's own output (never on sleeps), prints the bound it measured (seconds from
the fault to the container's exit, as the Docker engine reports it) and checks that no checkpoint is lost:
every all-digit step folder is complete (safetensors header and length by the launcher's own check,
optimizer.pt and metadata.pt whole) and every save the trainer announced is there.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image.conftest import CFS_IN_CONTAINER, tione_env
from tests.image.containers import (
    EXPERIMENT,
    Sandbox,
    assert_checkpoints_intact,
    checkpoint_folders,
    complete_steps,
    record_of,
    saved_steps,
    start_two_nodes,
)
from tests.support.synthetic import make_assets_tree, make_checkpoint

pytestmark = pytest.mark.image

# A job slow enough to be interrupted mid-training (0.3 s a step, a save every 2 steps) and short enough to end
# on its own if a fault is not delivered.
SLOW_JOB = {
    "VLA_NUM_TRAIN_STEPS": "40",
    "VLA_SAVE_INTERVAL": "2",
    "VLA_LOG_INTERVAL": "1",
    "STANDIN_STEP_SECONDS": "0.3",
    "VLA_MAX_RESTARTS": "0",  # these tests are about ending; restarts are tests/image/test_restarts.py's
}


@pytest.fixture
def sandbox(docker_client, built_image) -> Iterator[Sandbox]:
    """Containers and networks a test starts, removed when it ends (whatever the outcome)."""
    with Sandbox(docker_client, built_image) as box:
        yield box


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()  # read in chunks: memory stays bounded


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` by relative path, with its sha256 (folders as 'dir')."""
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else _sha256(p)) for p in sorted(root.rglob("*"))}


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and modification time: any write changes it."""
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def test_sigterm_to_node0_reaches_every_worker_and_ends_both_nodes(sandbox, cfs):
    grace = 10
    node0, node1 = start_two_nodes(sandbox, cfs, VLA_GRACE_PERIOD=str(grace), **SLOW_JOB)
    node0.wait_for(r"Saved checkpoint at step 2\b", timeout=180)
    workers = node0.workers()
    assert len(workers) == 2, node0.processes()
    start = time.monotonic()
    node0.container.kill(signal="SIGTERM")
    code0, code1 = node0.exit(60), node1.exit(180)
    took0, took1 = node0.seconds_since(start), node1.seconds_since(start)
    print(
        f"\nSIGTERM to node 0: node 0 exited {code0} after {took0:.2f}s (grace period {grace}s); "
        f"node 1 exited {code1} after {took1:.2f}s"
    )
    out0 = node0.output
    assert code0 == 143, out0[-4000:]
    assert took0 < grace
    assert "received SIGTERM; forwarding to torchrun" in out0
    for pid in workers:  # torchrun's own line for each worker it passed the signal to
        assert re.search(rf"Sending process {pid} closing signal SIGTERM", out0), (pid, out0[-4000:])
    assert code1 != 0, node1.output[-4000:]
    assert took1 < 120
    steps = assert_checkpoints_intact(cfs / EXPERIMENT, saved_steps(out0))
    assert steps and steps[0] == 2
    outcome = record_of(cfs, 0)["outcome"]
    assert (outcome["exit_code"], outcome["class"], outcome["signal"]) == (143, "killed", 15)
    assert record_of(cfs, 1)["outcome"]["exit_code"] == code1


def test_grace_period_ends_workers_that_ignore_sigterm(sandbox, cfs):
    """Workers stopped with SIGSTOP (a hung worker: SIGTERM stays pending) must not keep the node past the grace
    period: the launcher kills what is left and exits 143."""
    grace = 3
    node = sandbox.start("node0", tione_env(per_node=2, VLA_GRACE_PERIOD=str(grace), **SLOW_JOB), cfs)
    node.wait_for(r"Saved checkpoint at step 2\b")
    workers = node.workers()
    assert len(workers) == 2
    for pid in workers:
        assert node.exec(["kill", "-STOP", str(pid)])[0] == 0
    start = time.monotonic()
    node.container.kill(signal="SIGTERM")
    code = node.exit(60)
    took = node.seconds_since(start)
    print(f"\nSIGTERM with stopped workers: exited {code} after {took:.2f}s (grace period {grace}s)")
    assert code == 143, node.output[-4000:]
    assert "grace period over" in node.output
    assert grace <= took < grace + 3
    assert_checkpoints_intact(cfs / EXPERIMENT, saved_steps(node.output))


def test_worker_killed_ends_its_node_promptly(sandbox, cfs):
    node = sandbox.start("node0", tione_env(per_node=2, **SLOW_JOB), cfs)
    node.wait_for(r"Saved checkpoint at step 2\b")
    victim = max(node.workers())  # the newest worker, as `pkill -KILL -n -f train_pytorch` would pick it
    start = time.monotonic()
    code, said = node.exec(["kill", "-KILL", str(victim)])
    assert code == 0, said
    code = node.exit(60)
    took = node.seconds_since(start)
    outcome = record_of(cfs, 0)["outcome"]
    print(f"\nSIGKILL to worker {victim}: node exited {code} after {took:.2f}s; root cause: {outcome['root_cause']}")
    assert code not in (0, 143), node.output[-4000:]
    assert took < 30
    assert (outcome["exit_code"], outcome["class"]) == (code, "training-crashed")
    assert_checkpoints_intact(cfs / EXPERIMENT, saved_steps(node.output))


def test_node1_killed_node0_does_not_hang(sandbox, cfs):
    node0, node1 = start_two_nodes(sandbox, cfs, **SLOW_JOB)
    node0.wait_for(r"Saved checkpoint at step 2\b", timeout=180)
    start = time.monotonic()
    node1.container.kill()  # SIGKILL to the whole container: the node is gone
    code = node0.exit(150)
    took = node0.seconds_since(start)
    print(
        f"\nnode 1's container killed: node 0 exited {code} after {took:.2f}s; "
        f"root cause: {record_of(cfs, 0)['outcome']['root_cause']}"
    )
    assert code != 0, node0.output[-4000:]
    assert took < 120
    assert_checkpoints_intact(cfs / EXPERIMENT, saved_steps(node0.output))


LEFTOVERS = ["tmp-folder", "step-without-model", "step-with-truncated-model"]


@pytest.mark.parametrize("leftover", LEFTOVERS)
def test_restart_resumes_from_last_complete_step(sandbox, cfs, leftover):
    """TI-ONE restarts the same job after it was stopped; a leftover above the last complete step is never chosen
    and never deleted (a step folder is renamed `*.incomplete-<time>`, a tmp_ folder is left where it is)."""
    steps = 12
    env = tione_env(per_node=1, **{**SLOW_JOB, "VLA_NUM_TRAIN_STEPS": str(steps), "STANDIN_STEP_SECONDS": "0.2"})
    first = sandbox.start("run1", env, cfs)
    first.wait_for(r"Saved checkpoint at step 4\b")
    first.container.kill(signal="SIGTERM")
    assert first.exit(60) == 143
    experiment = cfs / EXPERIMENT
    assert_checkpoints_intact(experiment, saved_steps(first.output))
    last = max(complete_steps(experiment))
    assert last + 2 < steps - 1  # the planted folders lie above `last` and are below the run's final saves

    if leftover == "tmp-folder":  # an interrupted save: openpi writes tmp_<step>/ and renames it when done
        planted = experiment / f"tmp_{last + 1}"
        shutil.copytree(experiment / str(last), planted)
        os.truncate(planted / "model.safetensors", 100)
    else:
        planted = experiment / str(last + 2)
        shutil.copytree(experiment / str(last), planted)
        if leftover == "step-without-model":
            (planted / "model.safetensors").unlink()
        else:
            os.truncate(planted / "model.safetensors", (planted / "model.safetensors").stat().st_size - 16)
    kept = tree_digest(planted)

    start = time.monotonic()
    second = sandbox.start("run2", env, cfs)  # the same job, started again
    code = second.exit(120)
    out = second.output
    print(f"\nrestart over a {leftover} above step {last}: exit {code} after {second.seconds_since(start):.1f}s")
    assert code == 0, out[-4000:]
    assert f"resuming from step {last} in" in out
    assert f"Resumed training from step {last}" in out
    assert re.search(rf"ignored incomplete checkpoints in \S+: .*\b{planted.name}\b", out)  # reported, not chosen
    assert saved_steps(out) and min(saved_steps(out)) > last
    if leftover == "tmp-folder":
        assert planted.is_dir() and tree_digest(planted) == kept
    else:
        (moved,) = experiment.glob(f"{planted.name}.incomplete-*")
        assert tree_digest(moved) == kept
        assert f"vla-entrypoint: moved {CFS_IN_CONTAINER}/{EXPERIMENT}/{planted.name} aside to " in out
    final = assert_checkpoints_intact(experiment, saved_steps(first.output) + saved_steps(out))
    assert final == sorted(set(range(2, steps + 1, 2)) | {steps - 1})


@pytest.mark.parametrize("what", ["checkpoints-folder", "whole-cfs"])
def test_read_only_checkpoint_storage_exits_3_before_launch(sandbox, cfs, what):
    before = tree_state(cfs)
    start = time.monotonic()
    if what == "whole-cfs":
        node = sandbox.start("ro", tione_env(), cfs, mode="ro")
    else:
        node = sandbox.start(
            "ro", tione_env(), cfs, mounts={str(cfs / "checkpoints"): (f"{CFS_IN_CONTAINER}/checkpoints", "ro")}
        )
    code = node.exit(60)
    took = node.seconds_since(start)
    out = node.output
    print(f"\nread-only checkpoints ({what}): exit {code} after {took:.2f}s (container start included)")
    assert code == 3, out[-4000:]
    assert took < 20
    assert re.search(r"FAIL\s+storage\.checkpoint-writable", out) and "read-only file system" in out
    assert "start command:" not in out
    after = tree_state(cfs)
    if what == "whole-cfs":
        assert after == before
    else:

        def outside_logs(state: dict) -> dict:
            return {k: v for k, v in state.items() if k.partition("/")[0] != "logs"}

        assert outside_logs(after) == outside_logs(before)  # only the node log and record were written
        assert record_of(cfs, 0)["outcome"] == {"exit_code": 3, "class": "preflight-failed"}


def test_full_checkpoint_storage_exits_3_before_launch(sandbox, tmp_path):
    # base weights of 50 MB (sparse on the host): one checkpoint is about 3 x 50 MB, the checkpoint folder has 16 MB
    cfs = make_assets_tree(tmp_path / "openpi-assets", episodes=4, weights_size=50_000_000, sparse_weights=True)
    os.chmod(cfs, 0o777)
    (cfs / "checkpoints/pi05_libero").mkdir()
    before = tree_state(cfs / "checkpoints")
    start = time.monotonic()
    node = sandbox.start("full", tione_env(), cfs, tmpfs={f"{CFS_IN_CONTAINER}/checkpoints/pi05_libero": "size=16m"})
    code = node.exit(60)
    took = node.seconds_since(start)
    out = node.output
    print(f"\nfull checkpoint file system: exit {code} after {took:.2f}s (container start included)")
    assert code == 3, out[-4000:]
    assert took < 20
    assert re.search(r"FAIL\s+storage\.checkpoint-space", out), out[-4000:]
    assert "start command:" not in out
    assert tree_state(cfs / "checkpoints") == before
    assert record_of(cfs, 0)["outcome"] == {"exit_code": 3, "class": "preflight-failed"}


def test_overwrite_on_two_nodes_moves_the_old_experiment_aside_once(sandbox, cfs):
    experiment = cfs / EXPERIMENT
    for step in (2, 4, 100):
        make_checkpoint(experiment, step)
    (experiment / "old-run.txt").write_text(os.urandom(8).hex())
    old = tree_digest(experiment)
    node0, node1 = start_two_nodes(sandbox, cfs, VLA_OVERWRITE="1", VLA_NUM_TRAIN_STEPS="4", VLA_SAVE_INTERVAL="2")
    codes = node0.exit(180), node1.exit(180)
    assert codes == (0, 0), (node0.output[-3000:], node1.output[-3000:])
    moved = sorted(experiment.parent.glob(f"{experiment.name}.old-*"))
    print(f"\nVLA_OVERWRITE=1 on 2 nodes: experiment folders now {sorted(p.name for p in experiment.parent.iterdir())}")
    assert len(moved) == 1
    assert tree_digest(moved[0]) == old  # the old run, whole
    assert sorted(checkpoint_folders(experiment)) == ["2", "3", "4"]  # the new run, fresh
    assert_checkpoints_intact(experiment, saved_steps(node0.output))
    moved_line = re.compile(r"vla-entrypoint: moved \S+ aside to \S+\.old-")
    assert moved_line.search(node0.output) and not moved_line.search(node1.output)  # node 0 only
    for node in (node0, node1):
        assert "Resumed training" not in node.output
        (command,) = re.findall(r"start command: (.*)", node.output)
        assert "--overwrite" not in command.split()  # openpi's --overwrite deletes on every rank
