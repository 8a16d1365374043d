"""RDMA ports judged against their peers (same link layer, same port number): a port down while its peers are
ACTIVE fails the node, a slower one is an outlier, and neither the VPC NIC, a port outside NCCL_IB_HCA nor every
card's unconnected second port is judged."""

from __future__ import annotations

import pytest

from entrypoint.core.findings import Status
from entrypoint.core.settings import HealthMode
from entrypoint.fabric.inventory import inspect_fabric
from entrypoint.health.facts import Probe, ProbeStatus
from entrypoint.health.ports import fabric_ports, judge_ports
from entrypoint.health.verdict import Node, passive_findings
from tests.support.fakehosts import hcc_container, hcc_host, ib_with_roce_storage

NODE = Node(rank=2, host="node-c", stated_gpus=0, nnodes=2)


def verdict(fake, env=None):
    host = fake.host()
    return judge_ports(fabric_ports(inspect_fabric(host), env or {}))


def findings(fake, mode=HealthMode.WARN, env=None):
    probe = Probe(ProbeStatus.OK, "nvml")
    found, _ = passive_findings(NODE, probe, (), verdict(fake, env), mode, 10.0)
    return [f for f in found if f.id.startswith("health.rdma")]


@pytest.mark.parametrize(
    "machine, vpc",
    [(hcc_container, "mlx5_0:1"), (hcc_host, "mlx5_bond_8:1"), (ib_with_roce_storage, "mlx5_4:1")],
    ids=["hcc_container", "hcc_host", "ib_with_roce_storage"],
)
def test_healthy_fabrics_pass_and_the_vpc_nic_is_not_judged(tmp_path, machine, vpc):
    fake = machine(tmp_path)
    result = verdict(fake)
    assert not result.down and not result.slow
    names = {p.name for p in result.healthy}
    assert vpc not in names and len(names) in (4, 8)  # the VPC / storage NIC carries the default route
    (line,) = findings(fake)
    assert line.status is Status.PASS and "ACTIVE at their peers' rate" in line.message.en


def test_a_port_down_among_active_peers_fails_the_node(tmp_path):
    fake = hcc_container(tmp_path).file("/sys/class/infiniband/mlx5_bond_3/ports/1/state", "1: DOWN")
    (fault,) = findings(fake)
    assert fault.status is Status.FAIL and fault.id == "health.rdma-port-down"
    assert (
        "RDMA port mlx5_bond_3:1 is DOWN while its peers" in fault.message.en and "node 2 (node-c)" in fault.message.en
    )
    assert "端口 mlx5_bond_3:1" in fault.hint.zh


@pytest.mark.parametrize("mode, status", [(HealthMode.WARN, Status.WARN), (HealthMode.FAIL, Status.FAIL)])
def test_a_slower_port_is_an_outlier(tmp_path, mode, status):
    fake = hcc_container(tmp_path).file("/sys/class/infiniband/mlx5_bond_5/ports/1/rate", "200 Gb/sec (2X NDR)")
    (slow,) = findings(fake, mode)
    assert slow.status is status and "mlx5_bond_5:1 runs at 200 Gb/s, its peers at 400 Gb/s" in slow.message.en
    assert slow.hint is not None and "GPU" not in slow.hint.en
    assert ("VLA_HEALTH=fail" if mode is HealthMode.WARN else "port mlx5_bond_5:1") in slow.hint.en


def test_every_cards_unconnected_second_port_is_not_a_fault(tmp_path):
    fake = ib_with_roce_storage(tmp_path)
    for n in range(4):
        fake.rdma(f"mlx5_{n}", 2, link_layer="InfiniBand", state="1: DOWN", rate="10 Gb/sec (4X SDR)")
    assert not verdict(fake).down


def test_ports_outside_nccl_ib_hca_are_not_judged(tmp_path):
    fake = hcc_container(tmp_path).file("/sys/class/infiniband/mlx5_bond_7/ports/1/state", "1: DOWN")
    assert verdict(fake, {"NCCL_IB_HCA": "mlx5_bond_0,mlx5_bond_1"}).down == ()
    assert [p.name for p, _ in verdict(fake).down] == ["mlx5_bond_7:1"]
