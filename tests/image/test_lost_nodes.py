"""A lost node at four nodes, in containers (real torchrun + gloo, one rank per node, the stand-in trainer, one shared
CFS folder): a node's container killed mid-training, a node that never starts, and node 0 ending a stalled job
with 124 while a worker's rank sleeps outside any collective. Each test asserts the node named (by rank and host
from NODE_LIST), the bound, and every node's exit code; each prints its measurement."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.image.containers import (
    EXPERIMENT,
    Node,
    Sandbox,
    assert_checkpoints_intact,
    record_of,
    saved_steps,
    start_nodes,
)

pytestmark = pytest.mark.image
NODES = 4
BOUND_S = 30  # VLA_RENDEZVOUS_TIMEOUT: torchrun's join and the lost-node bound
SLACK_S = 12  # a poll (2 s), a beat (2 s), the launcher's end, the container's exit
JOB = {
    "VLA_NUM_TRAIN_STEPS": "400",
    "VLA_SAVE_INTERVAL": "4",
    "VLA_LOG_INTERVAL": "1",
    "VLA_PREFLIGHT": "off",
    "VLA_RENDEZVOUS_TIMEOUT": str(BOUND_S),
    "VLA_STALL_STARTUP_TIMEOUT": "600",  # the stall watchdog must not be what ends these jobs
    "STANDIN_STEP_SECONDS": "0.3",
}


@pytest.fixture
def sandbox(docker_client, built_image) -> Iterator[Sandbox]:
    with Sandbox(docker_client, built_image) as box:
        yield box


def host(sandbox: Sandbox, rank: int) -> str:
    return sandbox.name(f"node{rank}")


def ended_alike(nodes: dict[int, Node], code: int, timeout: float) -> dict[int, float]:
    """Every node's exit code is `code` (within `timeout`); when each ended (monotonic)."""
    codes = {rank: node.exit(timeout) for rank, node in nodes.items()}
    assert codes == dict.fromkeys(nodes, code), {r: (c, nodes[r].output[-3000:]) for r, c in codes.items()}
    return {rank: node.ended_at or 0.0 for rank, node in nodes.items()}


def test_a_node_killed_mid_training_is_named_and_every_survivor_ends_75(sandbox, cfs):
    nodes = start_nodes(sandbox, cfs, NODES, VLA_MAX_RESTARTS="2", **JOB)
    nodes[0].wait_for(r"Saved checkpoint at step 4\b", timeout=240)
    killed_at = time.monotonic()
    nodes[2].container.kill()  # SIGKILL to the whole container: node 2 is gone
    survivors = {rank: node for rank, node in nodes.items() if rank != 2}
    ends = ended_alike(survivors, 75, BOUND_S + 120)
    took = {rank: round(at - killed_at, 1) for rank, at in ends.items()}
    print(f"\nnode 2's container killed: survivors exited 75 after {took} s (bound {BOUND_S} s)")
    assert max(took.values()) < BOUND_S + SLACK_S, took
    named = f"node 2 ({host(sandbox, 2)}) stopped"
    for rank, node in survivors.items():
        assert f"NODE LOST: {named}" in node.output, node.output[-4000:]
        outcome = record_of(cfs, rank)["outcome"]
        assert (outcome["class"], [n["node"] for n in outcome["lost_nodes"]]) == ("node-lost", [2]), outcome
    assert_checkpoints_intact(cfs / EXPERIMENT, saved_steps(nodes[0].output))


def test_a_node_that_never_starts_is_named_by_rank_and_host(sandbox, cfs):
    started_at = time.monotonic()
    nodes = start_nodes(sandbox, cfs, NODES, absent=(3,), VLA_MAX_RESTARTS="0", **JOB)
    ends = ended_alike(nodes, 75, BOUND_S + 120)
    took = {rank: round(at - started_at, 1) for rank, at in ends.items()}
    print(f"\nnode 3 never started: nodes 0-2 exited 75 after {took} s from their start (bound {BOUND_S} s)")
    assert max(took.values()) < BOUND_S + SLACK_S + 10, took  # + the containers' and launchers' start
    named = f"NODE LOST: node 3 ({host(sandbox, 3)}) never showed up"
    lines = [line for line in nodes[0].output.splitlines() if "NODE LOST" in line]  # said, and repeated as the last
    assert lines and all(named in line for line in lines), nodes[0].output[-4000:]
    for rank in nodes:
        assert named in nodes[rank].output
        assert record_of(cfs, rank)["outcome"]["class"] == "node-lost"


def test_node_0_ending_a_stall_with_124_ends_every_node_and_the_sleeping_rank(sandbox, cfs):
    """Rank 3 (node 3) sleeps outside any collective while ranks 0-2 wait for it in a barrier; node 0's watchdog
    ends the job with 124 (no restart left): every node ends with 124 within seconds, rank 3 included."""
    nodes = start_nodes(
        sandbox, cfs, NODES, VLA_MAX_RESTARTS="0", VLA_STALL_TIMEOUT="8", STANDIN_FAULT="hang-collective@3:6", **JOB
    )
    ends = ended_alike(nodes, 124, 300)
    spread = max(ends.values()) - ends[0]
    print(f"\nnode 0 ended a stall with 124: the other nodes ended {spread:.1f} s after it")
    assert spread < 8, {rank: at - ends[0] for rank, at in ends.items()}
    for rank in (1, 2, 3):
        assert f"JOB ENDED by node 0 ({host(sandbox, 0)})" in nodes[rank].output, nodes[rank].output[-4000:]
        assert record_of(cfs, rank)["outcome"]["class"] == "stalled"
    assert "culprit rank(s) 3 on node(s) 3" in nodes[0].output
