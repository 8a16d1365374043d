"""Topology from TI-ONE's variables, torchrun-style PET_* variables, or a single machine."""

from __future__ import annotations

import pytest

from entrypoint.core.errors import UserError
from entrypoint.core.host import Host
from entrypoint.core.settings import Device
from entrypoint.inspect.topology import TopologySource, resolve_topology


def host_with(world, env: dict[str, str]) -> Host:
    return Host(env=env, root=world.host)


@pytest.mark.parametrize(
    "env, gpus, expected",
    [
        pytest.param(
            {
                "GPU_NUM_PER_NODE": "8",
                "WORLD_SIZE": "2",
                "RANK": "1",
                "MASTER_ADDR": "10.0.0.1",
                "MASTER_PORT": "23456",
                "GPU_NUM": "16",
                "NODE_LIST": "10.0.0.1:8,10.0.0.2:8",
                "INDEX": "1",
            },
            8,
            (2, 1, 8, "10.0.0.1", 23456, "tione"),
            id="tione-2x8-node1",
        ),
        pytest.param({"GPU_NUM_PER_NODE": "4"}, 8, (1, 0, 4, "127.0.0.1", 29500, "tione"), id="tione-single-defaults"),
        pytest.param(
            {
                "PET_NNODES": "2",
                "PET_NODE_RANK": "1",
                "PET_NPROC_PER_NODE": "2",
                "PET_MASTER_ADDR": "node0",
                "PET_MASTER_PORT": "1234",
            },
            2,
            (2, 1, 2, "node0", 1234, "torchrun"),
            id="pet-explicit",
        ),
        pytest.param(
            {"PET_NNODES": "1:1", "PET_NPROC_PER_NODE": "gpu"},
            3,
            (1, 0, 3, "127.0.0.1", 29500, "torchrun"),
            id="pet-gpu-count",
        ),
        pytest.param(
            {
                "PET_NNODES": "2",
                "PET_NODE_RANK": "0",
                "MASTER_ADDR": "master.local",
                "MASTER_PORT": "4000",
                "PET_NPROC_PER_NODE": "1",
            },
            1,
            (2, 0, 1, "master.local", 4000, "torchrun"),
            id="pet-master-from-plain",
        ),
        pytest.param({}, 8, (1, 0, 8, "127.0.0.1", 29500, "single"), id="single-all-gpus"),
        pytest.param(
            {"CUDA_VISIBLE_DEVICES": "0,1"}, 8, (1, 0, 2, "127.0.0.1", 29500, "single"), id="single-visible-subset"
        ),
        pytest.param(
            {"WORLD_SIZE": "1", "RANK": "0"}, 1, (1, 0, 1, "127.0.0.1", 29500, "single"), id="single-world-size-1"
        ),
    ],
)
def test_topology_sources(world, env, gpus, expected):
    world.gpus(gpus)
    topo = resolve_topology(host_with(world, env), "gpu")
    assert (
        topo.nnodes,
        topo.node_rank,
        topo.nproc_per_node,
        topo.master_addr,
        topo.master_port,
        topo.source,
    ) == expected


def test_cpu_mode_needs_no_gpu(world):
    world.gpus(0)
    topo = resolve_topology(
        host_with(world, {"GPU_NUM_PER_NODE": "2", "WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "node0"}), "cpu"
    )
    assert (topo.world_size, topo.device) == (4, "cpu")
    assert resolve_topology(host_with(world, {}), "cpu").nproc_per_node == 1


def test_gpus_read_from_proc_when_no_device_nodes(world):
    world.gpus(0)
    for bus in ("0000:18:00.0", "0000:2a:00.0"):
        (world.host / "proc/driver/nvidia/gpus" / bus).mkdir(parents=True)
    assert resolve_topology(host_with(world, {}), "gpu").nproc_per_node == 2


def test_no_gpu_is_not_a_silent_cpu_fallback(world):
    world.gpus(0)
    with pytest.raises(UserError) as caught:
        resolve_topology(host_with(world, {}), "gpu")
    assert caught.value.exit_code == 3 and "VLA_DEVICE=cpu" in caught.value.fix.en


def test_pet_variables_that_disagree_are_reported(world):
    topo = resolve_topology(host_with(world, {"GPU_NUM_PER_NODE": "8", "PET_NNODES": "4", "PET_NODE_RANK": "3"}), "gpu")
    assert topo.nnodes == 1
    (finding,) = [f for f in topo.findings if f.id == "topology.pet-ignored"]
    assert "PET_NNODES=4" in finding.message.en and "PET_NODE_RANK=3" in finding.message.en


def test_more_visible_devices_than_processes_warns(world):
    topo = resolve_topology(host_with(world, {"GPU_NUM_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}), "gpu")
    assert [f.id for f in topo.findings] == ["topology.visible-devices"]


def test_source_and_device_are_enums_that_read_as_strings(world):
    topo = resolve_topology(host_with(world, {"GPU_NUM_PER_NODE": "8"}), "gpu")
    assert topo.source is TopologySource.TIONE and topo.device is Device.GPU
    data = topo.to_json()
    assert (data["source"], data["device"]) == ("tione", "gpu") and type(data["source"]) is str


def test_gpu_shortage_reads_as_chinese(world):
    world.gpus(2)
    with pytest.raises(UserError) as caught:
        resolve_topology(host_with(world, {"PET_NNODES": "1", "PET_NPROC_PER_NODE": "4"}), "gpu")
    what = caught.value.what
    assert what.en == "this node has 2 GPU(s) but PET_NPROC_PER_NODE=4"
    assert what.zh == "本节点只有 2 张 GPU,但 PET_NPROC_PER_NODE=4"
