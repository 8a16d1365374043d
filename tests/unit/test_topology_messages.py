"""What a user reads when the job's shape is wrong, word for word (which variable, its value, what was expected,
the fix, the exit code), what a right shape resolves to, and what a worker node waits for before its first
torchrun."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.core.errors import UserError
from entrypoint.core.host import Host
from entrypoint.core.settings import Device
from entrypoint.inspect.topology import (
    MasterWait,
    Topology,
    TopologySource,
    master_wait,
    preflight_port,
    resolve_topology,
)

TIONE = {"GPU_NUM_PER_NODE": "8", "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "10.0.0.1"}
AGREE = "TI-ONE sets these together; if you set them by hand, make them agree (or unset the extra one)."
NODE_LIST_FIX = "Use the NODE_LIST TI-ONE injects (e.g. 10.0.0.1:8,10.0.0.2:8) or unset it."


def resolve(tmp_path: Path, env: dict[str, str], gpus: int = 8, device: Device = Device.GPU) -> Topology:
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for i in range(gpus):
        (dev / f"nvidia{i}").touch()
    return resolve_topology(Host(env=env, root=tmp_path), device)


def without(name: str) -> dict[str, str]:
    return {k: v for k, v in TIONE.items() if k != name}


@pytest.mark.parametrize(
    "env, id_, where, what, fix",
    [
        pytest.param({**TIONE, "GPU_NUM_PER_NODE": "0"}, "topology.bad-variable", "GPU_NUM_PER_NODE",
                     "GPU_NUM_PER_NODE='0' is not valid: expected an integer >= 1",
                     "Set GPU_NUM_PER_NODE to a whole number >= 1.", id="per-node-zero"),
        pytest.param({**TIONE, "WORLD_SIZE": "two"}, "topology.bad-variable", "WORLD_SIZE",
                     "WORLD_SIZE='two' is not valid: expected an integer >= 1",
                     "Set WORLD_SIZE to a whole number >= 1.", id="world-size-text"),
        pytest.param({**TIONE, "RANK": "-1"}, "topology.bad-variable", "RANK",
                     "RANK='-1' is not valid: expected an integer >= 0", "Set RANK to a whole number >= 0.",
                     id="rank-negative"),
        pytest.param({**TIONE, "RANK": "2"}, "topology.rank-out-of-range", "RANK",
                     "RANK=2 is out of range: WORLD_SIZE=2 nodes means RANK is 0..1",
                     "On TI-ONE, WORLD_SIZE is the number of nodes and RANK this node's index; fix whichever is wrong.",
                     id="rank-at-world-size"),
        pytest.param({**TIONE, "GPU_NUM": "17"}, "topology.contradiction", "GPU_NUM",
                     "GPU_NUM=17 but WORLD_SIZE x GPU_NUM_PER_NODE = 2 x 8 = 16", AGREE, id="gpu-num"),
        pytest.param({**TIONE, "GPU_NUM": "x"}, "topology.bad-variable", "GPU_NUM",
                     "GPU_NUM='x' is not valid: expected an integer >= 1", "Set GPU_NUM to a whole number >= 1.",
                     id="gpu-num-text"),
        pytest.param({**TIONE, "INDEX": "0"}, "topology.contradiction", "INDEX", "INDEX=0 but RANK=1", AGREE,
                     id="index"),
        pytest.param({**TIONE, "INDEX": "-"}, "topology.bad-variable", "INDEX",
                     "INDEX='-' is not valid: expected an integer >= 0", "Set INDEX to a whole number >= 0.",
                     id="index-text"),
        pytest.param({**TIONE, "NODE_LIST": "a8,b:8"}, "topology.bad-variable", "NODE_LIST",
                     "NODE_LIST='a8,b:8' is not valid: expected comma-separated host:gpus entries", NODE_LIST_FIX,
                     id="node-list-no-colon"),
        pytest.param({**TIONE, "NODE_LIST": "a:8,:8"}, "topology.bad-variable", "NODE_LIST",
                     "NODE_LIST='a:8,:8' is not valid: expected comma-separated host:gpus entries", NODE_LIST_FIX,
                     id="node-list-no-host"),
        pytest.param({**TIONE, "NODE_LIST": "a:x,b:8"}, "topology.bad-variable", "NODE_LIST",
                     "NODE_LIST='a:x,b:8' is not valid: expected comma-separated host:gpus entries", NODE_LIST_FIX,
                     id="node-list-no-count"),
        pytest.param({**TIONE, "NODE_LIST": "a:16"}, "topology.contradiction", "NODE_LIST",
                     "NODE_LIST has 1 entries but WORLD_SIZE=2 nodes", AGREE, id="node-list-entries"),
        pytest.param({**TIONE, "NODE_LIST": "a:8,b:9"}, "topology.contradiction", "NODE_LIST",
                     "NODE_LIST sums to 17 GPUs but the job has 16", AGREE, id="node-list-total"),
        pytest.param({**TIONE, "NODE_LIST": "a:12,b:4"}, "topology.contradiction", "NODE_LIST",
                     "NODE_LIST gives node 1 4 GPUs but GPU_NUM_PER_NODE=8", AGREE, id="node-list-this-node"),
        pytest.param(without("MASTER_ADDR"), "topology.missing-variable", "MASTER_ADDR",
                     "MASTER_ADDR is not set for a 2-node job",
                     "Set MASTER_ADDR to the address of node 0 (TI-ONE sets it in DDP mode).", id="master-missing"),
        pytest.param({**TIONE, "MASTER_ADDR": " "}, "topology.missing-variable", "MASTER_ADDR",
                     "MASTER_ADDR is not set for a 2-node job",
                     "Set MASTER_ADDR to the address of node 0 (TI-ONE sets it in DDP mode).", id="master-blank"),
        pytest.param({**TIONE, "MASTER_ADDR": "bad_host!"}, "topology.bad-variable", "MASTER_ADDR",
                     "MASTER_ADDR='bad_host!' is not valid: expected an IP address or host name",
                     "Set MASTER_ADDR to node 0's IP address or host name.", id="master-bad"),
        pytest.param({**TIONE, "MASTER_ADDR": "127.0.0.1"}, "topology.loopback-master", "MASTER_ADDR",
                     "MASTER_ADDR=127.0.0.1 is a loopback address, which other nodes of a 2-node job cannot reach",
                     "Set MASTER_ADDR to node 0's network address.", id="master-loopback"),
        pytest.param({**TIONE, "MASTER_ADDR": "localhost"}, "topology.loopback-master", "MASTER_ADDR",
                     "MASTER_ADDR=localhost is a loopback address, which other nodes of a 2-node job cannot reach",
                     "Set MASTER_ADDR to node 0's network address.", id="master-localhost"),
        pytest.param({**TIONE, "MASTER_PORT": "0"}, "topology.bad-variable", "MASTER_PORT",
                     "MASTER_PORT='0' is not valid: expected a port number 1-65535",
                     "Set MASTER_PORT to a free TCP port such as 23456.", id="port-zero"),
        pytest.param({**TIONE, "MASTER_PORT": "65536"}, "topology.bad-variable", "MASTER_PORT",
                     "MASTER_PORT='65536' is not valid: expected a port number 1-65535",
                     "Set MASTER_PORT to a free TCP port such as 23456.", id="port-above"),
        pytest.param({"PET_NNODES": "1:2"}, "topology.bad-variable", "PET_NNODES",
                     "PET_NNODES='1:2' is not valid: expected a fixed node count (elastic ranges are not supported)",
                     "Set PET_NNODES to one number, e.g. 2.", id="pet-elastic"),
        pytest.param({"PET_NNODES": "0"}, "topology.bad-variable", "PET_NNODES",
                     "PET_NNODES='0' is not valid: expected an integer >= 1", "Set PET_NNODES to a whole number >= 1.",
                     id="pet-nnodes-zero"),
        pytest.param({"PET_NNODES": "2", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "n0"}, "topology.rank-out-of-range",
                     "PET_NODE_RANK", "PET_NODE_RANK=2 is out of range for PET_NNODES=2",
                     "Set PET_NODE_RANK to 0..1.", id="pet-rank"),
        pytest.param({"PET_NNODES": "1", "PET_NPROC_PER_NODE": "0"}, "topology.bad-variable", "PET_NPROC_PER_NODE",
                     "PET_NPROC_PER_NODE='0' is not valid: expected an integer >= 1",
                     "Set PET_NPROC_PER_NODE to a whole number >= 1.", id="pet-nproc-zero"),
        pytest.param({"PET_NNODES": "2", "PET_NODE_RANK": "1"}, "topology.missing-variable", "PET_MASTER_ADDR",
                     "PET_MASTER_ADDR is not set for a 2-node job",
                     "Set PET_MASTER_ADDR to the address of node 0 (TI-ONE sets it in DDP mode).",
                     id="pet-master-missing"),
        pytest.param({"PET_NNODES": "2", "PET_MASTER_ADDR": "n0", "MASTER_PORT": "x"}, "topology.bad-variable",
                     "PET_MASTER_PORT", "PET_MASTER_PORT='x' is not valid: expected a port number 1-65535",
                     "Set PET_MASTER_PORT to a free TCP port such as 23456.", id="pet-port-from-plain"),
        pytest.param({"WORLD_SIZE": "2"}, "topology.ambiguous", "WORLD_SIZE",
                     "WORLD_SIZE='2' is set without GPU_NUM_PER_NODE, so it is unclear whether it counts nodes or "
                     "processes",
                     "On TI-ONE use DDP mode (it sets GPU_NUM_PER_NODE); elsewhere use "
                     "PET_NNODES/PET_NODE_RANK/PET_NPROC_PER_NODE.", id="ambiguous"),
        pytest.param({**TIONE, "CUDA_VISIBLE_DEVICES": "0,1"}, "topology.visible-devices", "CUDA_VISIBLE_DEVICES",
                     "CUDA_VISIBLE_DEVICES='0,1' exposes 2 GPU(s) but GPU_NUM_PER_NODE=8",
                     "Unset CUDA_VISIBLE_DEVICES (the platform already isolates GPUs) or list as many GPUs as the "
                     "node runs processes.", id="visible-too-few"),
    ],
)  # fmt: skip
def test_a_job_shape_that_cannot_work_says_which_variable_and_how_to_fix_it(tmp_path, env, id_, where, what, fix):
    with pytest.raises(UserError) as caught:
        resolve(tmp_path, env)
    problem = caught.value
    assert (problem.id, problem.where, int(problem.exit_code)) == (id_, where, 2)
    assert (problem.what.en, problem.fix.en) == (what, fix)
    assert problem.what.zh and problem.fix.zh and problem.what.zh != problem.what.en


@pytest.mark.parametrize(
    "env, gpus, id_, what",
    [
        ({"GPU_NUM_PER_NODE": "8"}, 4, "topology.gpus-missing", "this node has 4 GPU(s) but GPU_NUM_PER_NODE=8"),
        ({"CUDA_VISIBLE_DEVICES": "0"}, 0, "topology.no-gpu", "no GPU is visible on this machine"),
        ({}, 0, "topology.no-gpu", "no GPU is visible on this machine"),
    ],
)
def test_missing_gpus_are_a_preflight_failure_at_the_device_nodes(tmp_path, env, gpus, id_, what):
    with pytest.raises(UserError) as caught:
        resolve(tmp_path, env, gpus=gpus)
    problem = caught.value
    assert (problem.id, problem.where, int(problem.exit_code), problem.what.en) == (
        id_,
        f"{tmp_path}/dev/nvidia*",
        3,
        what,
    )
    assert "VLA_DEVICE=cpu" in problem.fix.en


@pytest.mark.parametrize(
    "env, gpus, device, shape",
    [
        pytest.param({**TIONE, "MASTER_PORT": "65535"}, 8, Device.GPU, (2, 1, 8, "10.0.0.1", 65535), id="port-max"),
        pytest.param({**TIONE, "MASTER_PORT": "1"}, 8, Device.GPU, (2, 1, 8, "10.0.0.1", 1), id="port-min"),
        pytest.param({**TIONE, "MASTER_PORT": " "}, 8, Device.GPU, (2, 1, 8, "10.0.0.1", 29500), id="port-blank"),
        pytest.param({**TIONE, "MASTER_ADDR": "::1", "WORLD_SIZE": "1", "RANK": "0"}, 8, Device.GPU,
                     (1, 0, 8, "::1", 29500), id="loopback-fine-alone"),
        pytest.param({**TIONE, "MASTER_ADDR": "fd00::1"}, 8, Device.GPU, (2, 1, 8, "fd00::1", 29500), id="ipv6"),
        pytest.param({"PET_NNODES": "1", "PET_NPROC_PER_NODE": "cpu"}, 8, Device.GPU, (1, 0, 1, "127.0.0.1", 29500),
                     id="pet-cpu-word"),
        pytest.param({"PET_NNODES": "1"}, 0, Device.CPU, (1, 0, 1, "127.0.0.1", 29500), id="pet-auto-on-cpu"),
        pytest.param({"PET_NNODES": "2:2", "PET_NODE_RANK": "1", "MASTER_ADDR": "n0", "MASTER_PORT": "4000"}, 3,
                     Device.GPU, (2, 1, 3, "n0", 4000), id="pet-fixed-range-and-plain-master"),
        pytest.param({"PET_NNODES": "1", "CUDA_VISIBLE_DEVICES": "0,1"}, 8, Device.GPU,
                     (1, 0, 2, "127.0.0.1", 29500), id="pet-auto-visible"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "0,1,-1,2"}, 8, Device.GPU, (1, 0, 2, "127.0.0.1", 29500),
                     id="visible-stops-at-minus"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "0, ,1"}, 8, Device.GPU, (1, 0, 1, "127.0.0.1", 29500),
                     id="visible-stops-at-blank"),
        pytest.param({"CUDA_VISIBLE_DEVICES": "3,2,1,0"}, 2, Device.GPU, (1, 0, 2, "127.0.0.1", 29500),
                     id="visible-above-present"),
        pytest.param({"WORLD_SIZE": " 1 ", "MASTER_PORT": "4000"}, 1, Device.GPU, (1, 0, 1, "127.0.0.1", 4000),
                     id="single-with-port"),
        pytest.param({"WORLD_SIZE": ""}, 1, Device.GPU, (1, 0, 1, "127.0.0.1", 29500), id="single-empty-world"),
    ],
)  # fmt: skip
def test_a_job_shape_that_works_resolves_to_what_torchrun_gets(tmp_path, env, gpus, device, shape):
    topology = resolve(tmp_path, env, gpus=gpus, device=device)
    assert (topology.nnodes, topology.node_rank, topology.nproc_per_node, topology.master_addr) == shape[:4]
    assert topology.master_port == shape[4]


@pytest.mark.parametrize("word", ["none", "NoDevFiles", "void"])
def test_a_visible_devices_word_that_hides_every_gpu(tmp_path, word):
    with pytest.raises(UserError) as caught:
        resolve(tmp_path, {"GPU_NUM_PER_NODE": "1", "CUDA_VISIBLE_DEVICES": word})
    assert caught.value.what.en == f"CUDA_VISIBLE_DEVICES={word!r} exposes 0 GPU(s) but GPU_NUM_PER_NODE=1"


def test_extra_visible_gpus_and_stray_torchrun_variables_are_warnings(tmp_path):
    env = {"GPU_NUM_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1,2", "PET_NNODES": "4", "PET_NODE_RANK": " 0 "}
    env |= {"PET_MASTER_PORT": "29500", "PET_NPROC_PER_NODE": "3"}
    topology = resolve(tmp_path, env)
    shown = [(f.id, str(f.status), f.where, f.message.en, f.hint.en if f.hint else None) for f in topology.findings]
    assert shown == [
        (
            "topology.pet-ignored",
            "warn",
            "PET_NNODES,PET_NPROC_PER_NODE",
            "ignored torchrun variables that disagree with TI-ONE's: PET_NNODES=4, PET_NPROC_PER_NODE=3",
            "They are removed from torchrun's environment; unset them in the job to silence this warning.",
        ),
        (
            "topology.visible-devices",
            "warn",
            "CUDA_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES exposes 3 GPUs; only the first 2 are used",
            "Raise GPU_NUM_PER_NODE to use them all, or unset CUDA_VISIBLE_DEVICES.",
        ),
    ]


def test_the_topology_record(tmp_path):
    topology = resolve(tmp_path, {**TIONE, "MASTER_PORT": "23456"})
    assert topology.to_json() == {
        "nnodes": 2,
        "node_rank": 1,
        "nproc_per_node": 8,
        "world_size": 16,
        "master_addr": "10.0.0.1",
        "master_port": 23456,
        "source": "tione",
        "device": "gpu",
    }


@pytest.mark.parametrize("port, preflight", [(29500, 29501), (65534, 65535), (65535, 65534), (1, 2)])
def test_the_preflight_port_is_next_to_the_master_port(port, preflight):
    assert preflight_port(port) == preflight


def _shape(nnodes: int, rank: int, source: TopologySource = TopologySource.TIONE, port: int = 23456) -> Topology:
    return Topology(nnodes, rank, 8, "node0", port, source, Device.GPU)


@pytest.mark.parametrize(
    "topology, timeout, preflight_first, wait",
    [
        (_shape(1, 0), 300, False, None),
        (_shape(2, 0), 300, False, None),
        (_shape(2, 1), 0, False, None),
        (_shape(2, 1), 300, False, MasterWait("MASTER_ADDR", "node0", 23456, 300, 90)),
        (_shape(3, 2), 60, True, MasterWait("MASTER_ADDR", "node0", 23457, 60, 60)),
        (_shape(2, 1), 90, False, MasterWait("MASTER_ADDR", "node0", 23456, 90, 90)),
        (_shape(2, 1, TopologySource.TORCHRUN), 1, False, MasterWait("PET_MASTER_ADDR", "node0", 23456, 1, 1)),
    ],
)
def test_what_a_worker_waits_for_before_its_first_torchrun(topology, timeout, preflight_first, wait):
    assert master_wait(topology, timeout, preflight_first) == wait
    if wait is not None:
        assert wait.to_json() == {
            "variable": wait.variable,
            "addr": "node0",
            "port": wait.port,
            "timeout_s": timeout,
            "resolve_timeout_s": wait.resolve_timeout_s,
        }


def test_node_list_entries_may_be_ipv6_addresses(tmp_path):
    topology = resolve(tmp_path, {**TIONE, "NODE_LIST": "fd00::1:8,fd00::2:8"})
    assert (topology.nnodes, topology.world_size) == (2, 16)


def test_torchrun_variables_without_a_node_count_mean_one_node(tmp_path):
    topology = resolve(tmp_path, {"PET_NPROC_PER_NODE": "2"})
    assert (topology.source, topology.nnodes, topology.nproc_per_node) == (TopologySource.TORCHRUN, 1, 2)


def test_exactly_as_many_visible_gpus_as_processes_is_no_warning(tmp_path):
    assert resolve(tmp_path, {"GPU_NUM_PER_NODE": "2", "CUDA_VISIBLE_DEVICES": "0,1"}).findings == ()


def test_a_stray_torchrun_master_address_is_reported_and_an_agreeing_one_is_not(tmp_path):
    (finding,) = resolve(tmp_path, {**TIONE, "PET_MASTER_ADDR": "10.0.0.9"}).findings
    assert finding.where == "PET_MASTER_ADDR" and "PET_MASTER_ADDR=10.0.0.9" in finding.message.en
    assert resolve(tmp_path, {**TIONE, "PET_MASTER_ADDR": "10.0.0.1"}).findings == ()


def test_a_single_machine_still_checks_a_master_address_it_is_given(tmp_path):
    with pytest.raises(UserError) as caught:
        resolve(tmp_path, {"MASTER_ADDR": "bad_host!"})
    assert caught.value.where == "MASTER_ADDR"


def test_a_single_machine_told_of_more_gpus_than_it_has_uses_the_ones_present(tmp_path):
    topology = resolve(tmp_path, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, gpus=2)
    assert topology.nproc_per_node == 2
    (finding,) = topology.findings
    assert finding.message.en == "CUDA_VISIBLE_DEVICES exposes 4 GPUs; only the first 2 are used"
    assert finding.hint is not None
    assert finding.hint.en == "Raise the visible GPU count to use them all, or unset CUDA_VISIBLE_DEVICES."
