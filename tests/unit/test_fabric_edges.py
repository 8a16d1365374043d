"""Fabric decisions at their edges, each on a machine built for that edge alone: the only RoCE NIC carries the
default route (kept: excluding it would send NCCL to sockets), the platform's `NCCL_IB_DISABLE=0` (RDMA stays on),
InfiniBand and RoCE at equal, lower and higher speed, and two default routes (the lower metric is the VPC's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.fabric.decide import plan_fabric
from entrypoint.fabric.inventory import Transport
from entrypoint.inspect.topology import Topology
from tests.support.fakehosts import FakeHost, hcc_container, ib_gids, roce_gids


def two_nodes() -> Topology:
    return Topology(2, 0, 8, "10.0.0.5", 29500, "tione", "gpu")


def base(root: Path, **env: str) -> FakeHost:
    fake = FakeHost(root, env).loopback().netif("eth0")
    return fake.route("eth0", "0.0.0.0/0", gateway="10.0.0.1").route("eth0", "10.0.0.0/16")


def roce(fake: FakeHost, device: str, netdev: str, address: str, rate: str = "200 Gb/sec (2X HDR)") -> FakeHost:
    return fake.rdma(device, rate=rate, gids=roce_gids(address, netdev, seed=len(device)), slaves=[netdev])


def finish(fake: FakeHost) -> FakeHost:
    return fake.limits(None, None).peermem()


@pytest.mark.parametrize(
    "rails, transport, devices",
    [
        pytest.param(0, Transport.ROCE, ("mlx5_0:1",), id="the-only-roce-nic-is-kept"),
        pytest.param(1, Transport.ROCE, ("mlx5_1:1",), id="beside-a-rail-it-is-excluded"),
        pytest.param(2, Transport.ROCE, ("mlx5_1:1", "mlx5_2:1"), id="beside-two-rails"),
    ],
)
def test_the_nic_on_the_default_route_is_excluded_only_beside_others(tmp_path, rails, transport, devices):
    fake = roce(base(tmp_path), "mlx5_0", "eth0", "10.0.3.7")
    for n in range(1, rails + 1):
        fake.netif(f"bond{n}").route(f"bond{n}", f"30.14.{n}.0/24")
        roce(fake, f"mlx5_{n}", f"bond{n}", f"30.14.{n}.21")
    plan = plan_fabric(finish(fake).host(), two_nodes())
    assert (plan.transport, plan.devices) == (transport, devices)
    assert "fabric.socket-fallback" not in {f.id for f in plan.findings}


@pytest.mark.parametrize(
    "value, transport",
    [("0", Transport.ROCE), (" 0 ", Transport.ROCE), ("", Transport.ROCE), ("1", Transport.SOCKET)],
    ids=["zero", "zero-spaced", "empty", "one"],
)
def test_the_platforms_nccl_ib_disable(tmp_path, value, transport):
    plan = plan_fabric(hcc_container(tmp_path, {"NCCL_IB_DISABLE": value}).host(), two_nodes())
    assert plan.transport is transport
    if transport is Transport.ROCE:
        assert len(plan.devices) == 8 and plan.env_set.get("NCCL_IB_DISABLE") != "1"


@pytest.mark.parametrize(
    "ib_rate, roce_rate, kept",
    [
        pytest.param("400 Gb/sec (4X NDR)", "400 Gb/sec (4X NDR)", Transport.IB, id="equal-speed-keeps-ib"),
        pytest.param("200 Gb/sec (2X HDR)", "400 Gb/sec (4X NDR)", Transport.ROCE, id="faster-roce"),
        pytest.param("400 Gb/sec (4X NDR)", "200 Gb/sec (2X HDR)", Transport.IB, id="faster-ib"),
    ],
)
def test_infiniband_and_roce_are_never_mixed(tmp_path, ib_rate, roce_rate, kept):
    fake = base(tmp_path).netif("ib0").netif("bond1").route("bond1", "30.14.1.0/24")
    fake.rdma("mlx5_0", link_layer="InfiniBand", rate=ib_rate, gids=ib_gids(1), slaves=["ib0"])
    roce(fake, "mlx5_1", "bond1", "30.14.1.21", rate=roce_rate)
    plan = plan_fabric(finish(fake).host(), two_nodes())
    assert plan.transport is kept
    assert plan.devices == (("mlx5_0:1",) if kept is Transport.IB else ("mlx5_1:1",))


@pytest.mark.parametrize("vpc, rail", [("eth0", "eth1"), ("eth1", "eth0")])
def test_of_two_default_routes_the_lower_metric_is_the_vpcs(tmp_path, vpc, rail):
    fake = FakeHost(tmp_path).loopback().netif("eth0").netif("eth1")
    fake.route(vpc, "0.0.0.0/0", gateway="10.0.0.1", metric=0).route(rail, "0.0.0.0/0", gateway="10.1.0.1", metric=100)
    fake.route("eth0", "10.0.0.0/16").route("eth1", "10.1.0.0/16")
    roce(fake, "mlx5_0", "eth0", "10.0.3.7")
    roce(fake, "mlx5_1", "eth1", "10.1.3.7")
    plan = plan_fabric(finish(fake).host(), two_nodes())
    assert plan.devices == (f"mlx5_{rail[-1]}:1",)
