"""Fabric decisions at their edges, each on a machine built for that edge alone: the only RoCE NIC carries the
default route (kept: excluding it would send NCCL to sockets), the platform's `NCCL_IB_DISABLE=0` (RDMA stays on),
InfiniBand and RoCE at equal, lower and higher speed, and two default routes (the lower metric is the VPC's). Then
the edges mutation testing found unwatched: a slow rail at exactly half and a third of the best, ports of unknown
rate, a preset NCCL_IB_HCA scoping the slow-rail warning, a preset NCCL_IB_GID_INDEX on InfiniBand, NCCL exactly
2.21 and versions no NCCL has, and a single node's plan record."""

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


# -- the edges mutation testing found unwatched ---------------------------------------------------------------------

NCCL_DIST_INFO = "/usr/local/lib/python3.11/dist-packages/nvidia_nccl_cu12-{}.dist-info"
SLOW_HINT = "A slow rail limits every ring that crosses it; check the link speed with the platform."
SLOW_HINT_ZH = "慢速链路会拖慢经过它的所有通信环;请与平台确认链路速率。"


def rails(root: Path, rates: tuple[str, ...], **env: str) -> FakeHost:
    """A VPC NIC with no RDMA plus one RoCE rail per rate (`""`: the rate file says nothing readable)."""
    fake = base(root, **env)
    for n, rate in enumerate(rates):
        fake.netif(f"bond{n}").route(f"bond{n}", f"30.14.{n}.0/24")
        roce(fake, f"mlx5_{n}", f"bond{n}", f"30.14.{n}.21", rate=rate)
    return finish(fake)


def slow_warning(ports: str, ports_zh: str, best: str, where: str) -> dict[str, object]:
    return {
        "id": "fabric.slow-port",
        "status": "warn",
        "message": f"RDMA port(s) {ports} run below half of the best port's {best} Gb/s",
        "message_zh": f"RDMA 端口 {ports_zh} 速率不足最快端口 {best} Gb/s 的一半",
        "hint": SLOW_HINT,
        "hint_zh": SLOW_HINT_ZH,
        "where": f"/sys/class/infiniband/{where}/ports/1/rate",
    }


@pytest.mark.parametrize(
    "rates, env, warning",
    [
        pytest.param(("400 Gb/sec", "200 Gb/sec"), {}, None, id="exactly-half-is-not-slow"),
        pytest.param(
            ("300 Gb/sec", "100 Gb/sec"),
            {},
            slow_warning("mlx5_1:1 (100 Gb/s)", "mlx5_1:1(100 Gb/s)", "300", "mlx5_1"),
            id="exactly-a-third-is-slow",
        ),
        pytest.param(
            ("400 Gb/sec", "", "100 Gb/sec", "150 Gb/sec"),
            {},
            slow_warning(
                "mlx5_2:1 (100 Gb/s), mlx5_3:1 (150 Gb/s)", "mlx5_2:1(100 Gb/s), mlx5_3:1(150 Gb/s)", "400", "mlx5_2"
            ),
            id="an-unknown-rate-is-never-named",
        ),
        pytest.param(("", "0.4 Gb/sec"), {}, None, id="unknown-beside-a-tiny-rate"),
        pytest.param(("", ""), {}, None, id="every-rate-unknown"),
        pytest.param(
            ("400 Gb/sec", "100 Gb/sec", "200 Gb/sec"),
            {"NCCL_IB_HCA": "mlx5_0,mlx5_2"},
            None,
            id="preset-leaves-it-out",
        ),
        pytest.param(
            ("400 Gb/sec", "100 Gb/sec", "200 Gb/sec"),
            {"NCCL_IB_HCA": "mlx5_1"},
            slow_warning("mlx5_1:1 (100 Gb/s)", "mlx5_1:1(100 Gb/s)", "400", "mlx5_1"),
            id="preset-names-it",
        ),
    ],
)
def test_a_slow_rail_is_one_under_half_the_best_known_rate(tmp_path, rates, env, warning):
    plan = plan_fabric(rails(tmp_path, rates, **env).host(), two_nodes())
    assert plan.transport is Transport.ROCE
    assert [f.to_json() for f in plan.findings if f.id == "fabric.slow-port"] == ([warning] if warning else [])


@pytest.mark.parametrize(
    "ib_rates, roce_rates, kept",
    [
        pytest.param(("400 Gb/sec",), ("400 Gb/sec", ""), Transport.IB, id="unknown-roce-rate-adds-nothing"),
        pytest.param(("",) * 4, ("2.5 Gb/sec",), Transport.ROCE, id="unknown-ib-rates-add-nothing"),
    ],
)
def test_unknown_rates_weigh_nothing_between_ib_and_roce(tmp_path, ib_rates, roce_rates, kept):
    fake = base(tmp_path)
    for n, rate in enumerate(ib_rates):
        fake.netif(f"ib{n}").rdma(f"mlx5_{n}", link_layer="InfiniBand", rate=rate, gids=ib_gids(n), slaves=[f"ib{n}"])
    for n, rate in enumerate(roce_rates, start=len(ib_rates)):
        fake.netif(f"bond{n}").route(f"bond{n}", f"30.14.{n}.0/24")
        roce(fake, f"mlx5_{n}", f"bond{n}", f"30.14.{n}.21", rate=rate)
    plan = plan_fabric(finish(fake).host(), two_nodes())
    ports = [f"mlx5_{n}:1" for n in range(len(ib_rates) + len(roce_rates))]
    chosen = ports[: len(ib_rates)] if kept is Transport.IB else ports[len(ib_rates) :]
    label = "IB" if kept is Transport.IB else "RoCE"
    why = f"NCCL does not mix InfiniBand and RoCE; kept the faster {label} group"
    why_zh = f"NCCL 不能混用 InfiniBand 与 RoCE;保留更快的 {label} 组"
    left_out = [p for p in ports if p not in chosen]
    assert (plan.transport, plan.devices) == (kept, tuple(chosen))
    assert [d.to_json() for d in plan.decisions if d.variable == "NCCL_IB_HCA"] == [
        {
            "variable": "NCCL_IB_HCA",
            "value": "=" + ",".join(chosen),
            "kept": False,
            "reason": "NCCL would also use ports that must not carry training traffic ("
            + "; ".join(f"{p}: {why}" for p in left_out)
            + f"); exact-match list of the {len(chosen)} chosen port(s)",
            "reason_zh": "NCCL 本会同时使用不应承载训练流量的端口("
            + ";".join(f"{p}:{why_zh}" for p in left_out)
            + f");因此以精确匹配形式列出选定的 {len(chosen)} 个端口",
            "sources": [*(f"/sys/class/infiniband/{p[:-2]}/ports/1" for p in ports), "/proc/net/route"],
        }
    ]


def test_a_preset_gid_index_on_an_infiniband_job_is_kept_as_ignored(tmp_path):
    fake = base(tmp_path, NCCL_IB_GID_INDEX="3").netif("ib0")
    fake.rdma("mlx5_0", link_layer="InfiniBand", rate="400 Gb/sec", gids=ib_gids(1), slaves=["ib0"])
    plan = plan_fabric(finish(fake).host(), two_nodes())
    assert plan.transport is Transport.IB
    assert [d.to_json() for d in plan.decisions if d.variable == "NCCL_IB_GID_INDEX"] == [
        {
            "variable": "NCCL_IB_GID_INDEX",
            "value": "3",
            "kept": True,
            "reason": "kept: set by the platform (environment); ignored: not RoCE",
            "reason_zh": "保留平台设置(environment):未使用 RoCE,此变量无效",
            "sources": ["environment: NCCL_IB_GID_INDEX"],
        }
    ]
    assert "fabric.preset-gid-index" not in {f.id for f in plan.findings}


def gid_set(version: str | None, version_zh: str | None = None) -> tuple[str, str]:
    words = "GID 3 is a routable RoCE v2 GID on every chosen port"
    words_zh = "GID 3 在所有选定端口上都是可路由的 RoCE v2 GID"
    if version is None:
        return words, words_zh
    return (
        f"{words} (NCCL {version}: before 2.21 the default is 0, a link-local RoCE v1 GID)",
        f"{words_zh}(NCCL {version_zh or version}:2.21 之前默认为 0,即链路本地 RoCE v1 GID)",
    )


@pytest.mark.parametrize(
    "nccl, reason",
    [
        pytest.param(None, gid_set("version unknown", "版本未知"), id="no-nccl-found"),
        pytest.param(NCCL_DIST_INFO.format("2.21.5"), gid_set(None), id="exactly-2.21"),
        pytest.param(NCCL_DIST_INFO.format("3.0.1"), gid_set(None), id="a-later-major"),
        pytest.param(NCCL_DIST_INFO.format("2.20.3"), gid_set("2.20.3"), id="2.20"),
        pytest.param(
            "/usr/lib/x86_64-linux-gnu/libnccl.so.12345.1.0", gid_set("12345.1.0"), id="a-part-past-any-version"
        ),
        pytest.param(
            "/usr/lib/x86_64-linux-gnu/libnccl.so.2.12345.0", gid_set("2.12345.0"), id="a-minor-past-any-version"
        ),
    ],
)
def test_the_gid_index_set_names_an_old_or_unreadable_nccl(tmp_path, nccl, reason):
    fake = rails(tmp_path, ("200 Gb/sec", "200 Gb/sec"))
    if nccl:
        fake.mkdir(nccl) if nccl.endswith(".dist-info") else fake.file(nccl, "")
    plan = plan_fabric(fake.host(), two_nodes())
    assert [d.to_json() for d in plan.decisions if d.variable == "NCCL_IB_GID_INDEX"] == [
        {
            "variable": "NCCL_IB_GID_INDEX",
            "value": "3",
            "kept": False,
            "reason": reason[0],
            "reason_zh": reason[1],
            "sources": [f"/sys/class/infiniband/mlx5_{n}/ports/1/gid_attrs/types" for n in range(2)],
        }
    ]


@pytest.mark.parametrize("nccl", [None, "/usr/lib/x86_64-linux-gnu/libnccl.so.12345.1.0"], ids=["none", "unreadable"])
def test_differing_gid_indices_with_no_readable_nccl_version_warn_of_no_old_nccl(tmp_path, nccl):
    fake = base(tmp_path)
    for n in range(2):
        fake.netif(f"bond{n}").route(f"bond{n}", f"30.14.{n}.0/24")
        gids = roce_gids(f"30.14.{n}.21", f"bond{n}", seed=n + 1)
        if n:  # the RoCE v2 IPv4 GID moves to index 5 on the second port
            gids[5], gids[3] = gids[3], gids[2]
        fake.rdma(f"mlx5_{n}", gids=gids, slaves=[f"bond{n}"])
    if nccl:
        fake.file(nccl, "")
    plan = plan_fabric(finish(fake).host(), two_nodes())
    decision = next(d for d in plan.decisions if d.variable == "NCCL_IB_GID_INDEX")
    assert (decision.value, decision.reason.en) == (
        None,
        "the routable RoCE v2 GID sits at different indices on the chosen ports; NCCL >= 2.21 picks it per port",
    )
    assert "fabric.gid-index" not in {f.id for f in plan.findings}


def test_a_single_nodes_plan_records_no_socket_interface_and_what_the_machine_has(tmp_path):
    fake = base(tmp_path).mkdir(NCCL_DIST_INFO.format("2.21.5")).limits(65536, 65536)
    plan = plan_fabric(fake.host(), Topology(1, 0, 8, "127.0.0.1", 29500, "single", "gpu"))
    record = plan.to_json()
    assert {k: v for k, v in record.items() if k not in ("decisions", "findings")} == {
        "transport": "local",
        "devices": [],
        "socket_ifname": None,
        "gdr": "none",
        "nccl_version": "2.21.5",
        "net_plugin": None,
        "memlock": {"soft": 65536, "hard": 65536, "cap_ipc_lock": False},
        "env_set": {},
        "env_kept": {},
    }


@pytest.mark.parametrize(
    "hca, warned",
    [
        pytest.param("=mlx5_0:1", False, id="the-preset-names-the-fast-port-only"),
        pytest.param("=mlx5_0:2", True, id="the-preset-names-the-slow-port"),
    ],
)
def test_a_preset_port_number_scopes_the_slow_rail_warning(tmp_path, hca, warned):
    fake = base(tmp_path, NCCL_IB_HCA=hca).netif("ib0")
    fake.rdma("mlx5_0", 1, link_layer="InfiniBand", rate="400 Gb/sec (4X NDR)", gids=ib_gids(1), slaves=["ib0"])
    fake.rdma("mlx5_0", 2, link_layer="InfiniBand", rate="100 Gb/sec (4X EDR)", gids=ib_gids(2))
    plan = plan_fabric(finish(fake).host(), two_nodes())
    warning = slow_warning("mlx5_0:2 (100 Gb/s)", "mlx5_0:2(100 Gb/s)", "400", "mlx5_0")
    warning["where"] = "/sys/class/infiniband/mlx5_0/ports/2/rate"
    assert plan.transport is Transport.IB
    assert [f.to_json() for f in plan.findings if f.id == "fabric.slow-port"] == ([warning] if warned else [])
