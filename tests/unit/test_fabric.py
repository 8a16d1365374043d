"""Fabric decisions over fake machines: which transport, which ports, what we export, what we keep, what we warn."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from entrypoint.core.findings import Status
from entrypoint.core.host import Host
from entrypoint.fabric.decide import RDMA_VARS, plan_fabric
from entrypoint.fabric.draft import NcclList
from entrypoint.fabric.inventory import (
    SOCKET_VARS,
    Gdr,
    Memlock,
    MemlockVerdict,
    PortState,
    Transport,
    find_net_plugin,
    inspect_fabric,
    nccl_version,
    read_gdr,
    read_interfaces,
    read_memlock,
    read_presets,
    read_routes,
)
from entrypoint.fabric.memlock import raise_memlock
from entrypoint.inspect.topology import Topology
from tests.support.fakehosts import (
    FakeHost,
    hcc_container,
    hcc_host,
    ib_gids,
    ib_with_roce_storage,
    ipv4_gid,
    link_local_gid,
    plain_vm,
    roce_gids,
)

BONDS = tuple(f"mlx5_bond_{n}:1" for n in range(8))
EXACT_BONDS = "=" + ",".join(BONDS)
IB4 = tuple(f"mlx5_{n}:1" for n in range(4))
OUT_OF_RANGE = "mlx5_bond:70000,mlx5_bond:70001,mlx5_bond:70002,mlx5_bond:70003,mlx5_bond"  # only three are named
ETH0 = {"NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0"}
HCC_PRESETS = {  # the widely quoted TI-ONE/HCC multi-node presets
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_IB_SL": "3",
    "NCCL_IB_TC": "160",
    "NCCL_IB_HCA": "mlx5_bond",
    "NCCL_NET_GDR_LEVEL": "2",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_PXN_DISABLE": "1",
    "NCCL_IB_TIMEOUT": "24",
    "NCCL_SOCKET_IFNAME": "eth0",
    "GLOO_SOCKET_IFNAME": "eth0",
}


def topology(nnodes: int = 2, master: str = "10.0.0.5") -> Topology:
    return Topology(nnodes, 0, 8, master, 29500, "tione" if nnodes > 1 else "single", "gpu")


def warnings_of(plan) -> set[str]:
    return {f.id for f in plan.findings if f.status is Status.WARN}


# -- layouts beyond the ready-made ones ---------------------------------------------------------------------------


def port_down(root: Path) -> FakeHost:
    fake = hcc_container(root, vpc_rdma=False)
    return fake.file("/sys/class/infiniband/mlx5_bond_3/ports/1/state", "1: DOWN").file(
        "/sys/class/infiniband/mlx5_bond_3/ports/1/phys_state", "3: Disabled"
    )


def roce_without_v2_gid(root: Path) -> FakeHost:
    """Two RoCE NICs whose GID tables hold only link-local entries and an IPv4 RoCE v1 GID."""
    fake = FakeHost(root).loopback().netif("eth0").route("eth0", "0.0.0.0/0", "10.0.0.1").route("eth0", "10.0.0.0/16")
    for n in range(2):
        fake.netif(f"ens{n}")
        fake.rdma(
            f"mlx5_{n}",
            gids={
                0: (link_local_gid(n), "IB/RoCE v1", f"ens{n}"),
                1: (link_local_gid(n), "RoCE v2", f"ens{n}"),
                2: (ipv4_gid(f"192.168.{n}.2"), "IB/RoCE v1", f"ens{n}"),
            },
        )
    return fake.limits(None, None)


def ib_plus_roce_off_default(root: Path) -> FakeHost:
    """IB compute NICs plus a RoCE NIC that does not carry the default route: NCCL must not mix them."""
    fake = FakeHost(root).loopback().netif("eth0").netif("ens9f0")
    fake.route("eth0", "0.0.0.0/0", "10.0.0.1").route("eth0", "10.0.0.0/16").route("ens9f0", "172.16.0.0/16")
    for n in range(4):
        fake.netif(f"ib{n}").rdma(f"mlx5_{n}", link_layer="InfiniBand", rate="400 Gb/sec (4X NDR)", gids=ib_gids(n))
    return (
        fake.rdma("mlx5_4", rate="100 Gb/sec (4X EDR)", gids=roce_gids("172.16.5.9", "ens9f0"))
        .limits(None, None)
        .peermem()
    )


def no_uverbs(root: Path) -> FakeHost:
    """sysfs shows the RDMA NICs, but the container has no /dev/infiniband."""
    fake = FakeHost(root).loopback().netif("eth0").route("eth0", "0.0.0.0/0", "10.0.0.1")
    for n in range(2):
        fake.bond(f"bond{n}", [f"ens{n}"]).rdma(
            f"mlx5_bond_{n}", gids=roce_gids(f"30.0.{n}.2", f"bond{n}"), dev_node=False
        )
    return fake.limits(None, None)


def netdevs_elsewhere(root: Path) -> FakeHost:
    """RoCE GIDs whose netdevs live in the host namespace, not in this container."""
    fake = FakeHost(root).loopback().netif("eth0").route("eth0", "0.0.0.0/0", "10.0.0.1")
    for n in range(2):
        fake.rdma(f"mlx5_bond_{n}", gids=roce_gids(f"30.0.{n}.2", f"bond{n}"))
    return fake.limits(None, None).peermem()


def gid_indices_differ(version: str) -> Callable[[Path], FakeHost]:
    """Two RoCE ports whose IPv4 RoCE v2 GID sits at index 3 on one and 5 on the other; NCCL `version`."""

    def build(root: Path) -> FakeHost:
        fake = FakeHost(root).loopback().netif("eth0").route("eth0", "0.0.0.0/0", "10.0.0.1")
        fake.bond("bond0", ["ens0"]).bond("bond1", ["ens1"])
        fake.rdma("mlx5_bond_0", gids=roce_gids("30.0.0.2", "bond0"))
        shifted = {
            **roce_gids("30.0.1.2", "bond1"),
            3: (ipv4_gid("30.0.1.2"), "IB/RoCE v1", "bond1"),
            5: (ipv4_gid("30.0.1.2"), "RoCE v2", "bond1"),
        }
        fake.rdma("mlx5_bond_1", gids=shifted)
        return (
            fake.mkdir(f"/usr/local/lib/python3.11/dist-packages/nvidia_nccl_cu12-{version}.dist-info")
            .limits(None, None)
            .peermem()
        )

    return build


def hcc_container_plain(root: Path) -> FakeHost:
    return hcc_container(root, vpc_rdma=False)


def hcc_with_conf(text: str) -> Callable[[Path], FakeHost]:
    return lambda root: hcc_container(root).nccl_conf(text)


def all_ports_down(root: Path) -> FakeHost:
    fake = hcc_container(root, vpc_rdma=False)
    for n in range(8):
        fake.file(f"/sys/class/infiniband/mlx5_bond_{n}/ports/1/state", "1: DOWN")
    return fake


def slow_rail(root: Path) -> FakeHost:
    """Three RoCE rails at 400, 100 and 200 Gb/s: the 100 Gb/s one is under half the best."""
    fake = FakeHost(root).loopback().netif("eth0").route("eth0", "0.0.0.0/0", "10.0.0.1").route("eth0", "10.0.0.0/16")
    for n, rate in enumerate(("400 Gb/sec (4X NDR)", "100 Gb/sec (4X EDR)", "200 Gb/sec (2X HDR)")):
        fake.bond(f"bond{n}", [f"ens{n}"]).rdma(f"mlx5_bond_{n}", rate=rate, gids=roce_gids(f"30.0.{n}.2", f"bond{n}"))
    return fake.limits(None, None).peermem()


def one_netdev_elsewhere(root: Path) -> FakeHost:
    """Two RoCE ports, one whose GID's netdev is in this container and one whose netdev is not."""
    fake = FakeHost(root).loopback().netif("eth0").route("eth0", "0.0.0.0/0", "10.0.0.1")
    fake.bond("bond0", ["ens0"]).rdma("mlx5_bond_0", gids=roce_gids("30.0.0.2", "bond0"))
    fake.rdma("mlx5_bond_1", gids=roce_gids("30.0.1.2", "bond1"))
    return fake.limits(None, None).peermem()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Callable[[Callable[[Path], FakeHost]], FakeHost]:
    """Each layout is built once per module (file creation is what costs time); planning never writes."""
    cache: dict[Callable[[Path], FakeHost], FakeHost] = {}

    def get(build: Callable[[Path], FakeHost]) -> FakeHost:
        if build not in cache:
            cache[build] = build(tmp_path_factory.mktemp("host"))
        return cache[build]

    return get


# -- the decision table ---------------------------------------------------------------------------------------------

CASES = [
    pytest.param(
        hcc_container,
        {},
        topology(),
        "roce",
        BONDS,
        {**ETH0, "NCCL_IB_HCA": EXACT_BONDS, "NCCL_IB_GID_INDEX": "3"},
        {},
        set(),
        id="hcc-container-vpc-nic-excluded",
    ),
    pytest.param(
        hcc_container_plain,
        {},
        topology(),
        "roce",
        BONDS,
        {**ETH0, "NCCL_IB_GID_INDEX": "3"},
        {},
        set(),
        id="hcc-container-nothing-to-exclude",
    ),
    pytest.param(
        hcc_host,
        {},
        topology(master="30.14.0.11"),
        "roce",
        BONDS,
        {
            "NCCL_SOCKET_IFNAME": "=bond1",
            "GLOO_SOCKET_IFNAME": "bond1",
            "TP_SOCKET_IFNAME": "bond1",
            "NCCL_IB_HCA": EXACT_BONDS,
            "NCCL_IB_GID_INDEX": "3",
        },
        {},
        set(),
        id="hcc-host-bond1",
    ),
    pytest.param(
        ib_with_roce_storage,
        {},
        topology(),
        "ib",
        IB4,
        {
            "NCCL_SOCKET_IFNAME": "=ens9f0",
            "GLOO_SOCKET_IFNAME": "ens9f0",
            "TP_SOCKET_IFNAME": "ens9f0",
            "NCCL_IB_HCA": "=" + ",".join(IB4),
        },
        {},
        set(),
        id="ib-compute-plus-roce-storage-on-default-route",
    ),
    pytest.param(
        ib_plus_roce_off_default,
        {},
        topology(),
        "ib",
        IB4,
        {**ETH0, "NCCL_IB_HCA": "=" + ",".join(IB4)},
        {},
        set(),
        id="ib-and-roce-not-mixed",
    ),
    pytest.param(hcc_container, {}, topology(nnodes=1), "local", (), {}, {}, set(), id="single-node"),
    pytest.param(
        plain_vm, {}, topology(), "socket", (), ETH0, {}, {"fabric.socket-fallback"}, id="multi-node-without-rdma"
    ),
    pytest.param(
        port_down,
        {},
        topology(),
        "roce",
        tuple(b for b in BONDS if b != "mlx5_bond_3:1"),
        {**ETH0, "NCCL_IB_GID_INDEX": "3"},
        {},
        {"fabric.port-down"},
        id="one-port-down",
    ),
    pytest.param(
        roce_without_v2_gid,
        {},
        topology(),
        "socket",
        (),
        {**ETH0, "NCCL_IB_DISABLE": "1"},
        {},
        {"fabric.roce-no-gid", "fabric.socket-fallback"},
        id="roce-without-routable-v2-gid",
    ),
    pytest.param(
        no_uverbs,
        {},
        topology(),
        "socket",
        (),
        ETH0,
        {},
        {"fabric.no-uverbs", "fabric.socket-fallback"},
        id="rdma-in-sysfs-but-no-dev-infiniband",
    ),
    pytest.param(
        netdevs_elsewhere,
        {},
        topology(),
        "roce",
        ("mlx5_bond_0:1", "mlx5_bond_1:1"),
        {**ETH0, "NCCL_IB_GID_INDEX": "3"},
        {},
        {"fabric.gid-netdev-absent"},
        id="roce-gid-netdevs-outside-namespace",
    ),
    pytest.param(
        hcc_container,
        HCC_PRESETS,
        topology(),
        "roce",
        BONDS,
        {"TP_SOCKET_IFNAME": "eth0"},
        HCC_PRESETS,
        set(),
        id="hcc-platform-presets-in-env-kept",
    ),
    pytest.param(
        hcc_with_conf("# TI-ONE\nNCCL_IB_HCA=mlx5_bond\nNCCL_SOCKET_IFNAME = eth0\nNCCL_IB_GID_INDEX=3\n"),
        {},
        topology(),
        "roce",
        BONDS,
        {"GLOO_SOCKET_IFNAME": "eth0", "TP_SOCKET_IFNAME": "eth0"},
        {"NCCL_IB_HCA": "mlx5_bond", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_GID_INDEX": "3"},
        set(),
        id="presets-in-etc-nccl-conf-kept",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_HCA": "mlx5_1"},
        topology(),
        "socket",
        (),
        ETH0,
        {"NCCL_IB_HCA": "mlx5_1"},
        {"fabric.preset-ib-hca", "fabric.socket-fallback"},
        id="preset-ib-hca-matching-nothing",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_HCA": "mlx5"},
        topology(),
        "roce",
        ("mlx5_0:1", *BONDS),
        {**ETH0, "NCCL_IB_GID_INDEX": "3"},
        {"NCCL_IB_HCA": "mlx5"},
        {"fabric.preset-ib-hca"},
        id="preset-ib-hca-including-vpc-nic",
    ),
    pytest.param(
        hcc_with_conf("NCCL_SOCKET_IFNAME=ib\n"),
        {},
        topology(),
        "roce",
        BONDS,
        {
            "GLOO_SOCKET_IFNAME": "eth0",
            "TP_SOCKET_IFNAME": "eth0",
            "NCCL_IB_HCA": EXACT_BONDS,
            "NCCL_IB_GID_INDEX": "3",
        },
        {"NCCL_SOCKET_IFNAME": "ib"},
        {"fabric.preset-socket-ifname"},
        id="preset-socket-ifname-naming-no-interface",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_GID_INDEX": "5"},
        topology(),
        "roce",
        BONDS,
        {**ETH0, "NCCL_IB_HCA": EXACT_BONDS},
        {"NCCL_IB_GID_INDEX": "5"},
        {"fabric.preset-gid-index"},
        id="preset-gid-index-wrong",
    ),
    pytest.param(
        hcc_container,
        {"GLOO_SOCKET_IFNAME": "=eth0"},
        topology(),
        "roce",
        BONDS,
        {
            "NCCL_SOCKET_IFNAME": "=eth0",
            "TP_SOCKET_IFNAME": "eth0",
            "NCCL_IB_HCA": EXACT_BONDS,
            "NCCL_IB_GID_INDEX": "3",
        },
        {"GLOO_SOCKET_IFNAME": "=eth0"},
        {"fabric.preset-gloo-ifname"},
        id="preset-gloo-ifname-with-nccl-syntax",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_DISABLE": "1"},
        topology(),
        "socket",
        (),
        ETH0,
        {"NCCL_IB_DISABLE": "1"},
        {"fabric.socket-fallback"},
        id="preset-ib-disable",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_SOCKET_IFNAME": "ib0"},
        topology(nnodes=1),
        "local",
        (),
        {},
        {"NCCL_SOCKET_IFNAME": "ib0"},
        {"fabric.preset-socket-ifname"},
        id="single-node-still-checks-socket-preset",
    ),
    pytest.param(
        gid_indices_differ("2.21.5"),
        {},
        topology(),
        "roce",
        ("mlx5_bond_0:1", "mlx5_bond_1:1"),
        ETH0,
        {},
        set(),
        id="gid-indices-differ-nccl-auto",
    ),
    pytest.param(
        gid_indices_differ("2.18.3"),
        {},
        topology(),
        "roce",
        ("mlx5_bond_0:1", "mlx5_bond_1:1"),
        ETH0,
        {},
        {"fabric.gid-index"},
        id="gid-indices-differ-old-nccl",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_HCA": OUT_OF_RANGE, "NCCL_IB_DISABLE": "0"},
        topology(),
        "roce",
        BONDS,
        {**ETH0, "NCCL_IB_GID_INDEX": "3"},
        {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": OUT_OF_RANGE},
        {"fabric.preset-ib-hca"},
        id="preset-ib-hca-port-out-of-range-and-ib-disable-0",
    ),
    pytest.param(
        plain_vm,
        {"NCCL_IB_HCA": "mlx5_0"},
        topology(),
        "socket",
        (),
        ETH0,
        {"NCCL_IB_HCA": "mlx5_0"},
        {"fabric.preset-ib-hca", "fabric.socket-fallback"},
        id="preset-ib-hca-on-a-machine-without-rdma",
    ),
    pytest.param(
        ib_plus_roce_off_default,
        {"NCCL_IB_HCA": "mlx5"},
        topology(),
        "ib",
        IB4,
        ETH0,
        {"NCCL_IB_HCA": "mlx5"},
        {"fabric.preset-ib-hca"},
        id="preset-ib-hca-mixing-ib-and-roce",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_ADDR_FAMILY": "AF_INET6"},
        topology(),
        "socket",
        (),
        {**ETH0, "NCCL_IB_DISABLE": "1"},
        {"NCCL_IB_ADDR_FAMILY": "AF_INET6"},
        {"fabric.roce-no-gid", "fabric.socket-fallback"},
        id="ipv6-family-without-ipv6-gids",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_NET": "Socket"},
        topology(),
        "socket",
        (),
        ETH0,
        {"NCCL_NET": "Socket"},
        {"fabric.socket-fallback"},
        id="preset-nccl-net-socket",
    ),
    pytest.param(
        slow_rail,
        {},
        topology(),
        "roce",
        ("mlx5_bond_0:1", "mlx5_bond_1:1", "mlx5_bond_2:1"),
        {**ETH0, "NCCL_IB_GID_INDEX": "3"},
        {},
        {"fabric.slow-port"},
        id="one-rail-under-half-the-best",
    ),
    pytest.param(
        one_netdev_elsewhere,
        {},
        topology(),
        "roce",
        ("mlx5_bond_0:1",),
        {**ETH0, "NCCL_IB_HCA": "=mlx5_bond_0:1", "NCCL_IB_GID_INDEX": "3"},
        {},
        set(),
        id="one-gid-netdev-outside-namespace-left-out",
    ),
    pytest.param(
        hcc_container,
        {"NCCL_IB_HCA": "mlx5_bond", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_DISABLE": "0"},
        topology(nnodes=1),
        "local",
        (),
        {},
        {"NCCL_IB_HCA": "mlx5_bond", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_DISABLE": "0"},
        set(),
        id="single-node-keeps-the-platforms-rdma-presets",
    ),
    pytest.param(
        all_ports_down,
        {},
        topology(),
        "socket",
        (),
        ETH0,
        {},
        {"fabric.port-down", "fabric.socket-fallback"},
        id="every-port-down",
    ),
]


@pytest.mark.parametrize("build, env, topo, transport, devices, env_set, env_kept, warns", CASES)
def test_fabric_plan(built, build, env, topo, transport, devices, env_set, env_kept, warns):
    fake = built(build)
    plan = plan_fabric(Host(env={**fake.env, **env}, root=fake.root), topo, resolve=lambda name: [])
    assert (plan.transport, plan.devices) == (transport, devices)
    assert plan.transport is Transport(transport)
    assert plan.env_set == env_set
    assert plan.env_kept == env_kept
    assert warnings_of(plan) == warns
    # every network variable is explained exactly once, and nothing debug-only is ever exported
    assert sorted(d.variable for d in plan.decisions) == sorted(SOCKET_VARS + RDMA_VARS)
    assert all(d.reason.en and d.reason.zh for d in plan.decisions)
    assert {d.variable: d.value for d in plan.decisions if d.kept} == {
        k: v for k, v in env_kept.items() if k in SOCKET_VARS + RDMA_VARS
    }
    assert not set(plan.env_set) & {
        "NCCL_NET_GDR_LEVEL",
        "NCCL_P2P_DISABLE",
        "NCCL_SHM_DISABLE",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_CROSS_NIC",
        "NCCL_IB_TC",
        "NCCL_IB_SL",
        "NCCL_DEBUG",
    }
    assert all(f.id.startswith("fabric.") and f.message.zh for f in plan.findings)
    json.dumps(plan.to_json())


GOLDEN = Path(__file__).parent / "golden" / "fabric"


def _as_read(plan, root: Path) -> str:
    """A plan as the user reads it in the startup report: each variable's value and reason, each finding."""
    lines = []
    for d in plan.decisions:
        value = "unset" if d.value is None else ("kept " if d.kept else "set ") + repr(d.value)
        lines.append(f"{d.variable}: {value}: {d.reason.en} [{', '.join(d.sources)}]")
    for f in plan.findings:
        hint = f" | {f.hint.en}" if f.hint else ""
        lines.append(f"{f.status.value} {f.id} @ {f.where}: {f.message.en}{hint}")
    return "\n".join(lines).replace(str(root), "<root>") + "\n"


@pytest.mark.parametrize("build, env, topo, transport, devices, env_set, env_kept, warns", CASES)
def test_every_decision_and_finding_reads_as_recorded(
    built, request, build, env, topo, transport, devices, env_set, env_kept, warns
):
    """The words of every decision and finding, against `golden/fabric/<case>.txt` (reviewed when written:
    `VLA_WRITE_GOLDEN=1` rewrites them after an intended change of wording or rules)."""
    fake = built(build)
    plan = plan_fabric(Host(env={**fake.env, **env}, root=fake.root), topo, resolve=lambda name: [])
    text = _as_read(plan, fake.root)
    golden = GOLDEN / f"{request.node.callspec.id}.txt"
    if os.environ.get("VLA_WRITE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_exported_ib_hca_selects_exactly_the_chosen_ports(built):
    plan = plan_fabric(built(hcc_container).host(), topology())
    rule = NcclList.parse(plan.env_set["NCCL_IB_HCA"])
    assert [p for p in ("mlx5_0:1", "mlx5_bond_10:1", *BONDS) if rule.matches(*p.split(":")[:1], 1)] == list(BONDS)
    decision = next(d for d in plan.decisions if d.variable == "NCCL_IB_HCA")
    assert "mlx5_0:1" in decision.reason.en and "default route" in decision.reason.en
    assert "/sys/class/infiniband/mlx5_0/ports/1" in decision.sources


def test_kept_values_name_their_source(tmp_path):
    fake = hcc_container(tmp_path, {"NCCL_IB_HCA": "mlx5_bond"}).nccl_conf("NCCL_IB_GID_INDEX=3\n")
    kept = {d.variable: d.sources for d in plan_fabric(fake.host(), topology()).decisions if d.kept}
    assert kept == {"NCCL_IB_HCA": ("environment: NCCL_IB_HCA",), "NCCL_IB_GID_INDEX": ("/etc/nccl.conf",)}


def test_ports_outside_a_preset_ib_hca_raise_no_warnings(tmp_path):
    fake = hcc_container(tmp_path, dict(HCC_PRESETS))
    fake.rdma("mlx5_9", state="1: DOWN").rdma("mlx5_8", gids={0: (link_local_gid(8), "RoCE v2", "eth0")})
    plan = plan_fabric(fake.host(), topology())
    assert warnings_of(plan) == set() and plan.devices == BONDS
    fake.env["NCCL_IB_HCA"] = "mlx5"
    assert {"fabric.port-down", "fabric.roce-no-gid", "fabric.preset-ib-hca"} <= warnings_of(
        plan_fabric(fake.host(), topology())
    )


def test_socket_fallback_warning_is_loud_and_actionable(built):
    plan = plan_fabric(built(plain_vm).host(), topology())
    warning = next(f for f in plan.findings if f.id == "fabric.socket-fallback")
    assert "1-3 GB/s" in warning.message.en and "/sys/class/infiniband is empty" in warning.message.en
    assert "RDMA" in warning.hint.en and warning.hint.zh


@pytest.mark.parametrize(
    "master, resolved, ifname, warns",
    [
        pytest.param("30.14.3.9", None, "bond4", set(), id="longest-prefix-beats-default"),
        pytest.param("node-0.job", ["30.14.0.11"], "bond1", set(), id="host-name-resolved"),
        pytest.param("node-0.job", [], "bond0", {"fabric.master-unresolved"}, id="host-name-unresolved-uses-default"),
        pytest.param("fd00::1", None, "bond0", set(), id="ipv6-uses-default-route"),
    ],
)
def test_bootstrap_interface(built, master, resolved, ifname, warns):
    asked: list[str] = []
    plan = plan_fabric(
        built(hcc_host).host(), topology(master=master), resolve=lambda name: asked.append(name) or resolved
    )
    assert plan.socket_ifname == ifname
    assert plan.env_set["GLOO_SOCKET_IFNAME"] == ifname and plan.env_set["NCCL_SOCKET_IFNAME"] == f"={ifname}"
    assert warnings_of(plan) == warns
    assert asked == ([master] if resolved is not None else [])


def test_bootstrap_skips_docker_and_down_interfaces(tmp_path):
    fake = plain_vm(tmp_path).route("docker0", "10.9.0.0/16")
    assert plan_fabric(fake.host(), topology(master="10.9.0.4")).socket_ifname == "eth0"
    fake = FakeHost(tmp_path / "b").loopback().netif("eth0", operstate="down").route("eth0", "0.0.0.0/0", "10.0.0.1")
    plan = plan_fabric(fake.host(), topology())
    assert plan.socket_ifname is None and "fabric.bootstrap-if" in warnings_of(plan)
    assert not {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"} & set(plan.env_set)


def test_rdma_health_findings(tmp_path):
    fake = hcc_container(tmp_path, vpc_rdma=False)
    (tmp_path / "sys/module/nvidia_peermem/version").unlink()
    fake.limits(65536, 65536).file("/usr/local/nvidia/lib64/libnccl-net.so", "")
    fake.env["LD_LIBRARY_PATH"] = "/usr/local/nvidia/lib64"
    plan = plan_fabric(fake.host(), topology())
    assert (plan.gdr, plan.net_plugin) == ("none", "/usr/local/nvidia/lib64/libnccl-net.so")
    assert warnings_of(plan) == {"fabric.gdr", "fabric.memlock"}
    assert "fabric.net-plugin" in {f.id for f in plan.findings}


def _health_limited(root: Path) -> FakeHost:
    fake = hcc_container(root, vpc_rdma=False).limits(65536, 65536).file("/usr/local/nvidia/lib64/libnccl-net.so", "")
    (root / "sys/module/nvidia_peermem/version").unlink()
    return fake.with_env(LD_LIBRARY_PATH="/usr/local/nvidia/lib64")


def _health_cap(root: Path) -> FakeHost:
    fake = hcc_container(root, vpc_rdma=False).limits(65536, 65536, cap_ipc_lock=True)
    (root / "sys/module/nvidia_peermem/version").unlink()
    return fake.nvidia_driver(open_module=True, kernel="6.5.0-1-generic")


def _health_unlimited(root: Path) -> FakeHost:
    return hcc_container(root, vpc_rdma=False).limits(None, None).file("/opt/tencent/tccl/lib/libnccl-net.so", "")


@pytest.mark.parametrize("build", [_health_limited, _health_cap, _health_unlimited], ids=lambda b: b.__name__[1:])
def test_rdma_health_reads_as_recorded(tmp_path, request, build):
    """GPUDirect RDMA, locked memory and the net plugin as the startup report words them, against
    `golden/fabric/<case>.txt` (`VLA_WRITE_GOLDEN=1` rewrites them after an intended change)."""
    fake = build(tmp_path)
    plan = plan_fabric(fake.host(), topology())
    text = "\n".join(
        f"{f.status.value} {f.id} @ {f.where}: {f.message.en}" + (f" | {f.hint.en}" if f.hint else "")
        for f in plan.findings
        if f.id in ("fabric.gdr", "fabric.memlock", "fabric.net-plugin")
    )
    golden = GOLDEN / f"{request.node.callspec.id}.txt"
    if os.environ.get("VLA_WRITE_GOLDEN") == "1":
        golden.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == golden.read_text(encoding="utf-8")


def test_the_plan_record_holds_what_was_found_and_decided(built):
    plan = plan_fabric(built(hcc_container).host(), topology())
    record = plan.to_json()
    assert {k: record[k] for k in ("transport", "devices", "socket_ifname", "gdr", "nccl_version", "net_plugin")} == {
        "transport": "roce",
        "devices": list(BONDS),
        "socket_ifname": "eth0",
        "gdr": "peermem",
        "nccl_version": None,
        "net_plugin": None,
    }
    assert record["memlock"] == plan.memlock.to_json() and record["env_set"] == plan.env_set
    assert record["env_kept"] == plan.env_kept
    assert record["decisions"] == [d.to_json() for d in plan.decisions]
    assert record["findings"] == [f.to_json() for f in plan.findings]


@pytest.mark.parametrize(
    "name, addresses",
    [("127.0.0.1", ["127.0.0.1"]), ("10.1.2.3", ["10.1.2.3"]), ("a" * 64 + ".example", []), ("", [])],
)
def test_resolving_the_master_never_raises(name, addresses):
    from entrypoint.fabric.decide import resolve_host

    assert resolve_host(name) == addresses


@pytest.mark.parametrize(
    "env, transport",
    [
        ({"NCCL_NET": " socket "}, Transport.SOCKET),
        ({"NCCL_NET": "IB"}, Transport.ROCE),
        ({"NCCL_IB_DISABLE": " "}, Transport.ROCE),
        ({"NCCL_IB_DISABLE": "0", "NCCL_NET": "Socket"}, Transport.SOCKET),
    ],
)
def test_what_turns_rdma_off(built, env, transport):
    fake = built(hcc_container)
    plan = plan_fabric(Host(env={**fake.env, **env}, root=fake.root), topology())
    assert plan.transport is transport
    if transport is Transport.SOCKET:
        (off,) = [f for f in plan.findings if f.id == "fabric.socket-fallback"]
        assert "NCCL_NET" in off.message.en and "NCCL_NET" in (off.hint.en if off.hint else "")


@pytest.mark.parametrize(
    "build, hca, quiet",
    [
        (port_down, "mlx5_bond_3:2,mlx5_bond_0:1", "fabric.port-down"),
        (no_uverbs, "mlx5_bond_0:2", "fabric.no-uverbs"),
        (roce_without_v2_gid, "mlx5_0:2", "fabric.roce-no-gid"),
        (netdevs_elsewhere, "mlx5_bond_0:2", "fabric.gid-netdev-absent"),
    ],
)
def test_a_preset_ib_hca_port_scopes_the_warnings_to_that_port(built, build, hca, quiet):
    """A port the platform's NCCL_IB_HCA leaves out (another port number of the same device) raises no warning."""
    fake = built(build)
    plan = plan_fabric(Host(env={**fake.env, "NCCL_IB_HCA": hca}, root=fake.root), topology())
    assert quiet not in warnings_of(plan)
    everything = plan_fabric(Host(env={**fake.env, "NCCL_IB_HCA": hca.split(":")[0]}, root=fake.root), topology())
    assert quiet in warnings_of(everything)


def test_a_preset_ib_hca_naming_another_port_selects_nothing(built):
    fake = built(hcc_container)
    plan = plan_fabric(Host(env={**fake.env, "NCCL_IB_HCA": "=mlx5_bond_0:2"}, root=fake.root), topology())
    assert plan.transport is Transport.SOCKET


def test_plan_json_keeps_plain_strings(built):
    plan = plan_fabric(built(hcc_container).host(), topology())
    shown = json.loads(json.dumps(plan.to_json()))
    assert (shown["transport"], shown["gdr"]) == ("roce", "peermem")
    assert type(plan.to_json()["transport"]) is str and type(plan.to_json()["gdr"]) is str
    assert list(shown["decisions"][0]) == ["variable", "value", "kept", "reason", "reason_zh", "sources"]
    assert {f["id"] for f in shown["findings"]} >= {"fabric.transport", "fabric.gdr", "fabric.memlock"}
    transport = next(f for f in shown["findings"] if f["id"] == "fabric.transport")
    assert (
        transport["message"].startswith("RoCE on 8 port(s): mlx5_bond_0:1") and "共 8 个端口" in transport["message_zh"]
    )


def test_mixed_link_layers_name_the_group_kept(built):
    plan = plan_fabric(built(ib_plus_roce_off_default).host(), topology())
    decision = next(d for d in plan.decisions if d.variable == "NCCL_IB_HCA")
    assert "mlx5_4:1: NCCL does not mix InfiniBand and RoCE; kept the faster IB group" in decision.reason.en
    assert "mlx5_4:1:NCCL 不能混用 InfiniBand 与 RoCE;保留更快的 IB 组" in decision.reason.zh


def test_rejected_interfaces_are_explained_in_both_languages(tmp_path):
    fake = FakeHost(tmp_path).loopback().netif("eth0", operstate="down").route("eth0", "0.0.0.0/0", "10.0.0.1")
    warning = next(f for f in plan_fabric(fake.host(), topology()).findings if f.id == "fabric.bootstrap-if")
    assert "(eth0: not RUNNING)" in warning.message.en
    assert "(eth0:未处于 RUNNING 状态)" in warning.message.zh and "not RUNNING" not in warning.message.zh


# -- inventory readers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, name, port, expected",
    [
        ("mlx5_1", "mlx5_10", 1, True),  # prefix match, NCCL's classic surprise
        ("=mlx5_1", "mlx5_10", 1, False),
        ("=mlx5_1", "mlx5_1", 1, True),
        ("mlx5_bond", "mlx5_bond_3", 1, True),
        ("mlx5_0:1", "mlx5_0", 2, False),
        ("mlx5_0:1,mlx5_1:1", "mlx5_1", 1, True),
        ("^mlx5_0", "mlx5_0", 1, False),
        ("^mlx5_0", "mlx5_bond_0", 1, True),
        ("^=mlx5_0", "mlx5_00", 1, True),
        ("^", "mlx5_0", 1, False),
        ("eth", "eth0", None, True),
        ("=eth0", "eth0.100", None, False),
    ],
)
def test_nccl_list_syntax(value, name, port, expected):
    assert NcclList.parse(value).matches(name, port) is expected


def test_garbage_in_sysfs_and_procfs_never_raises(tmp_path):
    fake = hcc_container(tmp_path)
    base = "/sys/class/infiniband/mlx5_bond_0/ports/1"
    fake.file(f"{base}/state", b"\xff\xfe\x00").file(f"{base}/rate", "fast").file(f"{base}/gids/3", "not-a-gid")
    fake.file("/sys/class/infiniband/mlx5_bond_1/ports/1/gids/3", "zz").mkdir(
        "/sys/class/infiniband/mlx5_bond_2/ports/x"
    )
    fake.file("/sys/class/net/eth0/operstate", b"\x80").file("/sys/class/net/bond5/flags", "0xZZ")
    fake.file("/proc/net/route", "Iface\tDestination\nbroken\nbond6\tXYZ\t0\t1\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
    fake.file("/proc/self/limits", "Max locked memory  lots  more  bytes").file("/proc/self/status", "CapEff:\tnothex")
    fake.file("/sys/class/infiniband_verbs/uverbs9/ibdev", b"\xff")
    inventory = inspect_fabric(fake.host())
    ports = {p.name: p for p in inventory.ports}
    assert ports["mlx5_bond_0:1"].state is None and ports["mlx5_bond_0:1"].rate_gbps is None
    assert inventory.routes == () and inventory.memlock.soft is None and inventory.memlock.cap_ipc_lock is None
    plan = plan_fabric(fake.host(), topology())
    assert "mlx5_bond_0:1" not in plan.devices and "mlx5_bond_1:1" not in plan.devices
    json.dumps(plan.to_json())


def test_interfaces_running_and_bonds(tmp_path):
    fake = FakeHost(tmp_path).loopback().bond("bond0", ["eth0", "eth1"]).bond("bond1", ["ens0f0np0"])
    fake.netif("eth9", operstate="down").netif("tun0", flags=0x1043, operstate="unknown")
    fake.netif("br0").netif("veth0").mkdir("/sys/class/net/br0/brif/veth0").link(
        "/sys/class/net/veth0/master", "../br0"
    )
    interfaces = read_interfaces(fake.host())
    assert interfaces["bond1"].running and interfaces["lo"].running and interfaces["tun0"].running
    assert not interfaces["eth9"].running
    assert interfaces["ens0f0np0"].master == "bond1" and interfaces["eth1"].master == "bond0"
    assert interfaces["veth0"].master == "br0" and interfaces["bond1"].master is None


def test_routes_are_little_endian(tmp_path):
    fake = FakeHost(tmp_path).file(
        "/proc/net/route",
        "\n".join(
            [
                "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT",
                "eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0",
                "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0",
                "eth1\t0000A8C0\t00000000\t0000\t0\t0\t0\t0000FFFF\t0\t0\t0",  # not RTF_UP
            ]
        ),
    )
    routes = read_routes(fake.host())
    assert [(r.iface, str(r.network), r.metric) for r in routes] == [
        ("eth0", "0.0.0.0/0", 100),
        ("eth0", "192.0.2.0/24", 0),
    ]


@pytest.mark.parametrize(
    "setup, expected",
    [
        (lambda f: f.peermem(), "peermem"),
        (lambda f: f.peermem("/sys/kernel/mm/memory_peers/nv_mem_nc/version"), "peermem"),
        (lambda f: f.nvidia_driver(open_module=True, kernel="6.5.0-1018-azure"), "dmabuf-possible"),
        (lambda f: f.nvidia_driver(open_module=True, kernel="5.4.0-150-generic"), "none"),
        (lambda f: f.nvidia_driver(open_module=False, kernel="6.5.0"), "none"),
        (lambda f: f, "none"),
    ],
)
def test_gpudirect_rdma(tmp_path, setup, expected):
    assert read_gdr(setup(FakeHost(tmp_path)).host())[0] is Gdr(expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4: ACTIVE", PortState.ACTIVE),
        ("1: DOWN", PortState.DOWN),
        ("5: ACTIVE_DEFER", PortState.ACTIVE_DEFER),
        ("0: NOP", None),
        ("ACTIVE", None),
    ],
)
def test_port_state(tmp_path, text, expected):
    fake = hcc_container(tmp_path, vpc_rdma=False).file("/sys/class/infiniband/mlx5_bond_0/ports/1/state", text)
    port = next(p for p in inspect_fabric(fake.host()).ports if p.name == "mlx5_bond_0:1")
    assert port.state is expected and port.active is (expected is PortState.ACTIVE)
    assert port.state_name == (expected.name if expected else "unreadable")


@pytest.mark.parametrize(
    "soft, hard, cap, expected",
    [
        (65536, 65536, False, (65536, 65536, False)),
        (8 << 20, None, False, (8 << 20, math.inf, False)),
        (None, None, True, (math.inf, math.inf, True)),
    ],
)
def test_memlock(tmp_path, soft, hard, cap, expected):
    memlock = read_memlock(FakeHost(tmp_path).limits(soft, hard, cap).host())
    assert (memlock.soft, memlock.hard, memlock.cap_ipc_lock) == expected


@pytest.mark.parametrize(
    "soft, hard, cap, verdict",
    [
        (65536, 65536, False, MemlockVerdict.LIMITED),
        (65536, 65536, True, MemlockVerdict.CAP_IPC_LOCK),
        (8 << 20, math.inf, False, MemlockVerdict.RAISED),
        (math.inf, math.inf, False, MemlockVerdict.UNLIMITED),
        (None, None, None, MemlockVerdict.UNKNOWN),
    ],
)
def test_memlock_verdict(soft, hard, cap, verdict):
    assert Memlock(soft, hard, cap).verdict is verdict


class FakeLimits:
    RLIMIT_MEMLOCK, RLIM_INFINITY = 8, -1

    def __init__(self, soft: int, hard: int, fail: bool = False) -> None:
        self.value, self.fail, self.calls = (soft, hard), fail, []

    def getrlimit(self, which: int) -> tuple[int, int]:
        return self.value

    def setrlimit(self, which: int, value: tuple[int, int]) -> None:
        self.calls.append(value)
        if self.fail:
            raise ValueError("not allowed to raise maximum limit")
        self.value = value


def test_raise_memlock():
    limits = FakeLimits(8 << 20, -1)
    change = raise_memlock(limits)
    assert limits.calls == [(-1, -1)] and change.changed
    assert change.to_json() == {
        "before": [8 << 20, "unlimited"],
        "after": ["unlimited", "unlimited"],
        "changed": True,
        "error": None,
    }
    assert not raise_memlock(FakeLimits(-1, -1)).changed
    failed = raise_memlock(FakeLimits(1, 2, fail=True))
    assert failed.error and not failed.changed


@pytest.mark.parametrize(
    "files, expected",
    [
        (["/opt/lib/libnccl.so.2", "/opt/lib/libnccl.so.2.23.4"], "2.23.4"),
        (["/venv/site/nvidia_nccl_cu12-2.21.5.dist-info/METADATA"], "2.21.5"),
        (["/venv/site/nvidia/nccl/lib/libnccl.so.2"], None),
        ([], None),
    ],
)
def test_nccl_version_from_files(tmp_path, files, expected):
    fake = FakeHost(tmp_path)
    for path in files:
        fake.file(path, "")
    assert nccl_version(fake.host(), ["/venv/site", "/opt/lib"]) == expected


def test_nccl_version_from_header(tmp_path):
    header = '#define NCCL_MAJOR 2\n#define NCCL_MINOR 20\n#define NCCL_PATCH 3\n#define NCCL_SUFFIX ""\n'
    fake = FakeHost(tmp_path).file("/venv/site/nvidia/nccl/include/nccl.h", header)
    assert nccl_version(fake.host(), ["/venv/site"]) == "2.20.3"
    fake = FakeHost(tmp_path / "b", {"VLA_OPENPI_DIR": "/openpi"}).mkdir(
        "/openpi/.venv/lib/python3.11/site-packages/nvidia_nccl_cu12-2.26.2.dist-info"
    )
    assert inspect_fabric(fake.host()).nccl_version == "2.26.2"


@pytest.mark.parametrize(
    "env, files, expected",
    [
        (
            {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"},
            ["/usr/local/nvidia/lib64/libnccl-net.so"],
            ("/usr/local/nvidia/lib64/libnccl-net.so", None),
        ),
        ({}, ["/usr/lib/x86_64-linux-gnu/libnccl-net.so"], ("/usr/lib/x86_64-linux-gnu/libnccl-net.so", None)),
        ({}, ["/opt/tencent/tccl/lib/libnccl-net.so"], (None, "/opt/tencent/tccl/lib/libnccl-net.so")),
        (
            {"LD_LIBRARY_PATH": "/opt/tencent/tccl/lib"},
            ["/opt/tencent/tccl/lib/libnccl-net.so"],
            ("/opt/tencent/tccl/lib/libnccl-net.so", None),
        ),
        ({"NCCL_NET_PLUGIN": "none"}, ["/usr/lib/libnccl-net.so"], (None, None)),
        (
            {"NCCL_NET_PLUGIN": "aws-ofi"},
            ["/usr/lib/libnccl-net-aws-ofi.so"],
            ("/usr/lib/libnccl-net-aws-ofi.so", None),
        ),
    ],
)
def test_net_plugin(tmp_path, env, files, expected):
    fake = FakeHost(tmp_path, env)
    for path in files:
        fake.file(path, "")
    assert find_net_plugin(fake.host()) == expected


def test_ld_so_conf_dirs_count_as_library_path(tmp_path):
    fake = FakeHost(tmp_path).file("/etc/ld.so.conf.d/tccl.conf", "# tccl\n/opt/tencent/tccl/lib\n")
    fake.file("/opt/tencent/tccl/lib/libnccl-net.so", "")
    assert find_net_plugin(fake.host()) == ("/opt/tencent/tccl/lib/libnccl-net.so", None)


def test_preset_precedence(tmp_path):
    fake = FakeHost(tmp_path, {"NCCL_IB_HCA": "env", "NCCL_CONF_FILE": "/job/nccl.conf", "PATH": "/bin"})
    fake.nccl_conf("NCCL_IB_HCA=user\nNCCL_IB_TC=106\nNCCL_IB_TC=999\n", "/job/nccl.conf")
    fake.nccl_conf("NCCL_IB_TC=160\nNCCL_IB_SL=3\nnot a setting\n")
    presets = {k: (v.value, v.source) for k, v in read_presets(fake.host()).items()}
    assert presets == {
        "NCCL_IB_HCA": ("env", "environment"),
        "NCCL_CONF_FILE": ("/job/nccl.conf", "environment"),
        "NCCL_IB_TC": ("106", "/job/nccl.conf"),
        "NCCL_IB_SL": ("3", "/etc/nccl.conf"),
    }
    home = FakeHost(tmp_path / "h", {"HOME": "/root"}).nccl_conf("NCCL_IB_GID_INDEX=3\n", "/root/.nccl.conf")
    assert read_presets(home.host())["NCCL_IB_GID_INDEX"].source == "/root/.nccl.conf"


def test_long_preset_values_are_quoted_cut_short(built):
    fake = built(hcc_container)
    value = "m" * 50 + ":70000," + "x" * 100
    plan = plan_fabric(Host(env={**fake.env, "NCCL_IB_HCA": value}, root=fake.root), topology())
    messages = [f.message.en for f in plan.findings if f.id == "fabric.preset-ib-hca"]
    assert any(f"in {'m' * 40}…: RDMA ports" in m for m in messages)  # the out-of-range entry, cut at 40
    assert any(m.startswith(f"NCCL_IB_HCA={value[:80]}… (environment) matches no usable") for m in messages)
    assert not any(value[:81] in m for m in messages)
