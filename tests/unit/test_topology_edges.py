"""TI-ONE's variables that contradict each other, each case isolated so that only the rule it is about can refuse
it: RANK at WORLD_SIZE (no INDEX to trip over), a NODE_LIST entry that disagrees with GPU_NUM_PER_NODE on the node
it describes only, GPU_NUM above or below nodes × GPUs."""

from __future__ import annotations

import pytest

from entrypoint.core.errors import ExitCode, UserError
from entrypoint.core.host import Host
from entrypoint.core.settings import Device
from entrypoint.inspect.topology import resolve_topology


def tione(world, gpus: int = 8, **variables: str):
    env = {"GPU_NUM_PER_NODE": "8", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "23456", **variables}
    world.gpus(gpus)
    return resolve_topology(Host(env=env, root=world.host), Device.GPU)


def refused(world, **variables: str) -> UserError:
    with pytest.raises(UserError) as caught:
        tione(world, **variables)
    return caught.value


@pytest.mark.parametrize(
    "nnodes, rank, ok",
    [(2, 1, True), (2, 2, False), (2, 3, False), (1, 0, True), (1, 1, False), (3, 2, True)],
    ids=["last-rank", "rank-equals-world-size", "rank-above", "single", "single-rank-1", "three-nodes-last"],
)
def test_rank_must_be_below_world_size(world, nnodes, rank, ok):
    if ok:
        topology = tione(world, WORLD_SIZE=str(nnodes), RANK=str(rank))
        assert (topology.nnodes, topology.node_rank) == (nnodes, rank)
        return
    error = refused(world, WORLD_SIZE=str(nnodes), RANK=str(rank))
    assert (error.id, error.where, error.exit_code) == ("topology.rank-out-of-range", "RANK", ExitCode.JOB_MISSPECIFIED)
    assert f"RANK={rank}" in error.what.en and f"0..{nnodes - 1}" in error.what.en


@pytest.mark.parametrize(
    "rank, node_list, refusal",
    [
        pytest.param("0", "a:8,b:4,c:12", None, id="node-0-agrees"),
        pytest.param("1", "a:8,b:4,c:12", "this-node", id="worker-disagrees"),
        pytest.param("2", "a:8,b:4,c:12", "this-node", id="last-worker-disagrees"),
        pytest.param("1", "a:8,b:8,c:8", None, id="all-agree"),
        pytest.param("1", "a:8,b:8", "entries", id="too-few-entries"),
        pytest.param("1", "a:8,b:8,c:8,d:0", "entries", id="too-many-entries"),
        pytest.param("1", "a:8,b:8,c:9", "total", id="total-above"),
        pytest.param("1", "a:8,b:8,c:7", "total", id="total-below"),
    ],
)
def test_node_list_against_this_nodes_gpus(world, rank, node_list, refusal):
    variables = {"WORLD_SIZE": "3", "RANK": rank, "NODE_LIST": node_list}
    if refusal is None:
        assert tione(world, **variables).node_rank == int(rank)
        return
    error = refused(world, **variables)
    assert (error.id, error.where) == ("topology.contradiction", "NODE_LIST")
    expected = {
        "this-node": f"node {rank}",
        "entries": "entries",
        "total": "sums to",
    }[refusal]
    assert expected in error.what.en, error.what.en


@pytest.mark.parametrize(
    "gpu_num, ok", [("16", True), ("17", False), ("24", False), ("15", False), ("8", False)], ids=str
)
def test_gpu_num_must_be_nodes_times_gpus(world, gpu_num, ok):
    variables = {"WORLD_SIZE": "2", "RANK": "1", "GPU_NUM": gpu_num}
    if ok:
        assert tione(world, **variables).world_size == 16
        return
    error = refused(world, **variables)
    assert (error.id, error.where, error.exit_code) == ("topology.contradiction", "GPU_NUM", ExitCode.JOB_MISSPECIFIED)
    assert f"GPU_NUM={gpu_num}" in error.what.en and "16" in error.what.en


@pytest.mark.parametrize("index, ok", [("1", True), ("0", False), ("2", False)], ids=["same", "zero", "above"])
def test_index_must_be_this_nodes_rank(world, index, ok):
    variables = {"WORLD_SIZE": "2", "RANK": "1", "INDEX": index}
    if ok:
        assert tione(world, **variables).node_rank == 1
        return
    assert (refused(world, **variables).where) == "INDEX"
