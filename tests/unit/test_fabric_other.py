"""Rule 7 piece by piece, on hand-built inventories: why an interface cannot carry bootstrap traffic, which route
reaches MASTER_ADDR, each reason and fallback the plan gives (both languages, whole), the platform's socket
variables kept and checked, the locked-memory limit raised and shown as JSON; and what the inventory reads from a
fake machine's files (interfaces, RDMA ports and GIDs, routes, GPUDirect, memlock, NCCL config, plugin, search dirs)."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence

import pytest

from entrypoint.core.findings import Finding, Status
from entrypoint.core.messages import Text
from entrypoint.fabric.draft import Decision, Draft, NcclList
from entrypoint.fabric.inventory import (
    DEFAULT_LIB_DIRS,
    ENVIRONMENT,
    Gdr,
    Gid,
    Interface,
    Inventory,
    Memlock,
    PortState,
    Preset,
    RdmaPort,
    Route,
    find_net_plugin,
    nccl_search_dirs,
    read_gdr,
    read_interfaces,
    read_memlock,
    read_ports,
    read_presets,
    read_routes,
)
from entrypoint.fabric.memlock import MemlockChange, raise_memlock
from entrypoint.fabric.nccl_debug import debug_env
from entrypoint.fabric.sockets import bootstrap, check_socket_presets, default_route, socket_decisions
from tests.support.fakehosts import ZERO_GID, FakeHost, ipv4_gid

UP, RUNNING = 0x1, 0x40


def nic(name: str, running: bool = True, master: str | None = None) -> Interface:
    return Interface(name, UP | RUNNING if running else UP, "up" if running else "down", master)


def route(iface: str, network: str, metric: int = 0) -> Route:
    return Route(iface, ipaddress.IPv4Network(network), metric)


def inventory(interfaces: Sequence[Interface], routes: Sequence[Route]) -> Inventory:
    return Inventory(
        ports=(),
        rdma_devices=(),
        interfaces={i.name: i for i in interfaces},
        routes=tuple(routes),
        gdr=Gdr.NONE,
        gdr_source=None,
        memlock=Memlock(None, None, None),
        net_plugin=None,
        tccl_off_path=None,
        nccl_version=None,
        presets={},
    )


def resolver(answers: Mapping[str, Sequence[str]]):
    return lambda name: answers.get(name, ())


NONE: Mapping[str, Sequence[str]] = {}


def chosen(inv: Inventory, master: str, answers: Mapping[str, Sequence[str]] = NONE) -> tuple[str | None, Text, Draft]:
    draft = Draft({})
    iface, why = bootstrap(inv, master, resolver(answers), draft)
    return iface, why, draft


# -- the interface that reaches MASTER_ADDR ------------------------------------------------------------------------


def test_the_longest_prefix_route_wins_and_ties_go_to_the_lower_metric():
    inv = inventory(
        [nic("eth0"), nic("eth1"), nic("eth2")],
        [
            route("eth0", "0.0.0.0/0", 100),
            route("eth1", "10.0.0.0/8", 5),
            route("eth2", "10.0.0.0/16", 20),
            route("eth1", "10.0.0.0/16", 10),
        ],
    )
    iface, why, draft = chosen(inv, "10.0.0.5")
    assert iface == "eth1" and draft.findings == []
    assert why == Text(
        "MASTER_ADDR 10.0.0.5 is reached by route 10.0.0.0/16 through eth1",
        "MASTER_ADDR 10.0.0.5 经由路由 10.0.0.0/16 通过 eth1 到达",
    )


def test_the_default_route_of_the_lowest_metric_is_the_default():
    inv = inventory([nic("eth0"), nic("eth1")], [route("eth1", "0.0.0.0/0", 200), route("eth0", "0.0.0.0/0", 100)])
    default = default_route(inv)
    assert default is not None and default.iface == "eth0"
    assert default_route(inventory([nic("eth0")], [route("eth0", "10.0.0.0/8")])) is None
    half = inventory([nic("eth0"), nic("eth1")], [route("eth1", "0.0.0.0/1"), route("eth0", "0.0.0.0/0", 5)])
    assert default_route(half) == route("eth0", "0.0.0.0/0", 5)
    iface, why, _ = chosen(inv, "192.168.1.1")
    assert iface == "eth0" and why == Text(
        "MASTER_ADDR 192.168.1.1 is reached by the default route through eth0",
        "MASTER_ADDR 192.168.1.1 经由默认路由通过 eth0 到达",
    )


def test_a_host_name_is_resolved_to_its_ipv4_addresses_in_order():
    inv = inventory([nic("eth0"), nic("eth1")], [route("eth0", "0.0.0.0/0"), route("eth1", "10.1.0.0/16")])
    iface, why, draft = chosen(inv, "node0", {"node0": ["fe80::1", "not-an-address", "10.1.2.3", "10.9.9.9"]})
    assert iface == "eth1" and draft.findings == []
    assert why == Text(
        "MASTER_ADDR node0 (10.1.2.3, 10.9.9.9) is reached by route 10.1.0.0/16 through eth1",
        "MASTER_ADDR node0(10.1.2.3, 10.9.9.9) 经由路由 10.1.0.0/16 通过 eth1 到达",
    )


def test_an_ipv6_master_has_no_ipv4_route_and_falls_back_to_the_default():
    inv = inventory([nic("eth0")], [route("eth0", "0.0.0.0/0")])
    iface, why, draft = chosen(inv, "fd00::5", {"fd00::5": ["10.0.0.1"]})
    assert iface == "eth0" and draft.findings == []
    assert why == Text(
        "no usable specific route to MASTER_ADDR fd00::5; the default route goes through eth0",
        "没有到 MASTER_ADDR fd00::5 的可用专用路由;默认路由经过 eth0",
    )


def test_an_unresolved_master_warns_and_falls_back_to_the_default_route():
    inv = inventory([nic("eth0")], [route("eth0", "0.0.0.0/0")])
    iface, why, draft = chosen(inv, "node0")
    assert iface == "eth0"
    assert why == Text(
        "no usable specific route to MASTER_ADDR node0 (unresolved); the default route goes through eth0",
        "没有到 MASTER_ADDR node0(无法解析) 的可用专用路由;默认路由经过 eth0",
    )
    assert draft.findings == [
        Finding(
            "fabric.master-unresolved",
            Status.WARN,
            Text(
                "MASTER_ADDR=node0 does not resolve on this node; the bootstrap interface falls back to the default "
                "route",
                "本节点无法解析 MASTER_ADDR=node0;引导网卡退回默认路由所在网卡",
            ),
            Text(
                "Use node 0's IP address for MASTER_ADDR, or fix DNS / /etc/hosts in the container.",
                "请把 MASTER_ADDR 设为 0 号节点的 IP,或修复容器内的 DNS / /etc/hosts。",
            ),
            "MASTER_ADDR",
        )
    ]


@pytest.mark.parametrize(
    ("interfaces", "reason_en", "reason_zh"),
    [
        ([], "not in /sys/class/net", "不在 /sys/class/net 中"),
        ([nic("eth1", master="bond0")], "a slave of bond0", "是 bond0 的从属网卡"),
        ([nic("eth1", running=False)], "not RUNNING", "未处于 RUNNING 状态"),
    ],
    ids=["missing", "enslaved", "not-running"],
)
def test_a_route_through_an_unusable_interface_is_named_with_its_reason(interfaces, reason_en, reason_zh):
    inv = inventory([nic("eth0"), *interfaces], [route("eth0", "0.0.0.0/0"), route("eth1", "10.0.0.0/8")])
    iface, why, draft = chosen(inv, "10.0.0.5")
    assert iface == "eth0" and draft.findings == []
    assert why == Text(
        f"no usable specific route to MASTER_ADDR 10.0.0.5 (eth1: {reason_en}); the default route goes through eth0",
        f"没有到 MASTER_ADDR 10.0.0.5 的可用专用路由(eth1:{reason_zh});默认路由经过 eth0",
    )


def test_every_rejected_interface_is_listed_and_no_usable_one_warns():
    inv = inventory(
        [nic("docker0"), nic("eth1", running=False), nic("lo")],
        [route("docker0", "0.0.0.0/0"), route("eth1", "10.1.0.0/16"), route("eth2", "10.2.0.0/16")],
    )
    iface, why, draft = chosen(inv, "node0", {"node0": ["10.1.0.1", "10.2.0.1", "10.3.0.1"]})
    assert iface is None
    how_en, how_zh = (
        "MASTER_ADDR node0 (10.1.0.1, 10.2.0.1, 10.3.0.1)",
        "MASTER_ADDR node0(10.1.0.1, 10.2.0.1, 10.3.0.1)",
    )
    assert why == Text(f"no usable interface reaches {how_en}", f"没有可到达 {how_zh} 的可用网卡")
    (finding,) = draft.findings
    assert (finding.id, finding.status, finding.where) == ("fabric.bootstrap-if", Status.WARN, "/proc/net/route")
    assert finding.message == Text(
        f"no usable network interface reaches {how_en} (eth1: not RUNNING; eth2: not in /sys/class/net; docker0: "
        "loopback or container-bridge interface); NCCL, Gloo and TensorPipe will pick one themselves",
        f"没有可到达 {how_zh} 的可用网卡(eth1:未处于 RUNNING 状态;eth2:不在 /sys/class/net 中;"
        "docker0:回环网卡或容器网桥网卡);NCCL、Gloo、TensorPipe 将自行选择",
    )
    assert finding.hint is not None and finding.hint.en.startswith("Check the container's network (ip route);")


def test_no_route_at_all_says_so():
    iface, why, draft = chosen(inventory([nic("eth0")], []), "10.0.0.5")
    assert iface is None and why.en == "no usable interface reaches MASTER_ADDR 10.0.0.5"
    (finding,) = draft.findings
    assert finding.message.en.startswith("no usable network interface reaches MASTER_ADDR 10.0.0.5 (no route);")
    assert finding.message.zh.startswith("没有可到达 MASTER_ADDR 10.0.0.5 的可用网卡(没有路由)")


# -- the platform's socket variables -------------------------------------------------------------------------------


def draft_with(**presets: str) -> Draft:
    return Draft(
        {
            name: Preset(value, ENVIRONMENT if name != "TP_SOCKET_IFNAME" else "/etc/nccl.conf")
            for name, value in presets.items()
        }
    )


LINKS = inventory([nic("eth0"), nic("eth1"), nic("ib0", running=False)], [route("eth0", "0.0.0.0/0")])


def test_a_preset_nccl_socket_ifname_is_kept_with_what_it_matches():
    draft = draft_with(NCCL_SOCKET_IFNAME="eth")
    check_socket_presets(LINKS, draft)
    assert draft.decisions == [
        Decision(
            "NCCL_SOCKET_IFNAME",
            "eth",
            Text(
                "kept: set by the platform (environment); matches eth0, eth1",
                "保留平台设置(environment):匹配 eth0, eth1",
            ),
            ("environment: NCCL_SOCKET_IFNAME",),
            True,
        )
    ]
    assert draft.findings == []


def test_a_preset_nccl_socket_ifname_matching_nothing_running_warns():
    draft = draft_with(NCCL_SOCKET_IFNAME="=ib0")
    check_socket_presets(LINKS, draft)
    assert draft.decisions[0].reason.en == "kept: set by the platform (environment); matches no RUNNING interface"
    assert draft.decisions[0].reason.zh == "保留平台设置(environment):匹配 无 RUNNING 网卡"
    (finding,) = draft.findings
    assert (finding.id, finding.where) == ("fabric.preset-socket-ifname", "environment: NCCL_SOCKET_IFNAME")
    assert finding.message == Text(
        "NCCL_SOCKET_IFNAME==ib0 (environment) names no RUNNING interface; NCCL initialisation will fail",
        "NCCL_SOCKET_IFNAME==ib0(environment)未匹配任何 RUNNING 网卡,NCCL 初始化将失败",
    )
    assert finding.hint == Text(
        "Unset it to let vla-entrypoint choose, or name a RUNNING interface (eth0, eth1).",
        "请取消该变量由 vla-entrypoint 选择,或指定一个 RUNNING 状态的网卡(eth0, eth1)。",
    )


def test_with_no_running_interface_the_fix_says_none():
    draft = draft_with(NCCL_SOCKET_IFNAME="eth")
    check_socket_presets(inventory([nic("eth0", running=False)], []), draft)
    assert draft.findings[0].hint == Text(
        "Unset it to let vla-entrypoint choose, or name a RUNNING interface (none).",
        "请取消该变量由 vla-entrypoint 选择,或指定一个 RUNNING 状态的网卡(无)。",
    )


def test_a_one_character_nccl_socket_ifname_is_kept_as_ignored_by_nccl():
    draft = draft_with(NCCL_SOCKET_IFNAME="e")
    check_socket_presets(LINKS, draft)
    assert draft.decisions[0].reason == Text(
        "kept: set by the platform (environment); shorter than 2 characters, so NCCL ignores it and picks an "
        "interface itself",
        "保留平台设置(environment):少于 2 个字符,NCCL 会忽略它并自行选择网卡",
    )
    assert draft.findings == []


def test_gloo_takes_a_list_and_tensorpipe_one_name_each_checked():
    draft = draft_with(GLOO_SOCKET_IFNAME="eth0,eth1", TP_SOCKET_IFNAME="eth1")
    check_socket_presets(LINKS, draft)
    assert [(d.variable, d.reason.en) for d in draft.decisions] == [
        ("GLOO_SOCKET_IFNAME", "kept: set by the platform (environment); RUNNING"),
        ("TP_SOCKET_IFNAME", "kept: set by the platform (/etc/nccl.conf); RUNNING"),
    ]
    assert draft.findings == []
    bad = draft_with(GLOO_SOCKET_IFNAME="eth0,ib0,eth9", TP_SOCKET_IFNAME="eth0,eth1")
    check_socket_presets(LINKS, bad)
    assert [d.reason.en for d in bad.decisions] == [
        "kept: set by the platform (environment); names a missing or non-RUNNING interface: ib0, eth9",
        "kept: set by the platform (/etc/nccl.conf); names a missing or non-RUNNING interface: eth0,eth1",
    ]
    assert [(f.id, f.where, f.message.en) for f in bad.findings] == [
        (
            "fabric.preset-gloo-ifname",
            "environment: GLOO_SOCKET_IFNAME",
            "GLOO_SOCKET_IFNAME=eth0,ib0,eth9 (environment) does not name RUNNING interfaces",
        ),
        (
            "fabric.preset-tp-ifname",
            "/etc/nccl.conf",
            "TP_SOCKET_IFNAME=eth0,eth1 (/etc/nccl.conf) does not name RUNNING interfaces",
        ),
    ]


def test_nccl_syntax_in_a_plain_name_variable_is_pointed_out():
    draft = draft_with(GLOO_SOCKET_IFNAME="^docker")
    check_socket_presets(LINKS, draft)
    assert draft.findings[0].message.en == (
        "GLOO_SOCKET_IFNAME=^docker (environment) does not name RUNNING interfaces (it takes plain names: no ^ or =, "
        "unlike NCCL_SOCKET_IFNAME)"
    )


def test_each_socket_variable_is_set_kept_or_left_to_the_libraries():
    why = Text("why", "原因")
    draft = draft_with(TP_SOCKET_IFNAME="eth1")
    socket_decisions(LINKS, draft, "eth0", why)
    assert [(d.variable, d.value, d.reason, d.sources, d.kept) for d in draft.decisions] == [
        (
            "TP_SOCKET_IFNAME",
            "eth1",
            Text(
                "kept: set by the platform (/etc/nccl.conf); RUNNING",
                "保留平台设置(/etc/nccl.conf):网卡处于 RUNNING 状态",
            ),
            ("/etc/nccl.conf",),
            True,
        ),
        (
            "NCCL_SOCKET_IFNAME",
            "=eth0",
            Text(
                "why; exact-match form, so eth0 does not also select eth01",
                "原因;使用精确匹配形式,避免 eth0 同时匹配 eth01",
            ),
            ("/proc/net/route", "/sys/class/net"),
            False,
        ),
        (
            "GLOO_SOCKET_IFNAME",
            "eth0",
            Text("why; plain name: this variable takes no ^ or = syntax", "原因;纯网卡名:此变量不支持 ^ 或 = 语法"),
            ("/proc/net/route", "/sys/class/net"),
            False,
        ),
    ]
    assert draft.env_set == {"NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"}
    left = Draft({})
    socket_decisions(LINKS, left, None, why)
    assert [(d.variable, d.value, d.reason, d.sources, d.kept) for d in left.decisions] == [
        (v, None, why, ("/proc/net/route", "/sys/class/net"), False)
        for v in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
    ]
    assert left.env_set == {}


# -- the locked-memory limit ---------------------------------------------------------------------------------------


def test_the_memlock_limits_read_as_json():
    assert Memlock(65536.0, math.inf, False).to_json() == {"soft": 65536, "hard": "unlimited", "cap_ipc_lock": False}
    assert Memlock(None, None, None).to_json() == {"soft": None, "hard": None, "cap_ipc_lock": None}
    assert Memlock(math.inf, 8.0, True).to_json() == {"soft": "unlimited", "hard": 8, "cap_ipc_lock": True}


class Limits:
    """A stand-in for the `resource` module: one RLIMIT_MEMLOCK pair, a setrlimit that may refuse."""

    RLIMIT_MEMLOCK = 8
    RLIM_INFINITY = -1

    def __init__(self, soft: int, hard: int, refuse: Exception | None = None) -> None:
        self.pair = (soft, hard)
        self.refuse = refuse
        self.calls: list[tuple[object, ...]] = []

    def getrlimit(self, which: int) -> tuple[int, int]:
        self.calls.append(("get", which))
        return self.pair

    def setrlimit(self, which: int, pair: tuple[int, int]) -> None:
        self.calls.append(("set", which, pair))
        if self.refuse is not None:
            raise self.refuse
        self.pair = pair


def test_the_soft_limit_is_raised_to_the_hard_one():
    limits = Limits(65536, -1)
    change = raise_memlock(limits)
    assert change == MemlockChange((65536, math.inf), (math.inf, math.inf))
    assert limits.calls == [("get", 8), ("set", 8, (-1, -1)), ("get", 8)]
    assert change.to_json() == {
        "before": [65536, "unlimited"],
        "after": ["unlimited", "unlimited"],
        "changed": True,
        "error": None,
    }


def test_equal_limits_are_left_alone_and_a_refusal_is_reported():
    same = Limits(1024, 1024)
    assert raise_memlock(same) == MemlockChange((1024, 1024), (1024, 1024))
    assert same.calls == [("get", 8)]
    refused = raise_memlock(Limits(64, 128, OSError(1, "Operation not permitted")))
    assert refused == MemlockChange((64, 128), (64, 128), "[Errno 1] Operation not permitted")
    assert not refused.changed


def test_nccl_debug_writes_one_file_per_process_under_the_log_folder():
    assert (
        debug_env("/logs/nccl/", {})
        == debug_env("/logs/nccl", {"OTHER": "1"})
        == {
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "NCCL_DEBUG_FILE": "/logs/nccl/nccl.%h.%p.log",
        }
    )
    for users in ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS"):
        assert debug_env("/logs", {users: ""}) == {}


def test_an_address_without_a_route_is_skipped_for_the_next_one():
    inv = inventory([nic("eth1")], [route("eth1", "10.2.0.0/16")])
    iface, why, _ = chosen(inv, "node0", {"node0": ["10.3.0.1", "10.2.0.1"]})
    assert iface == "eth1" and why.en.endswith("is reached by route 10.2.0.0/16 through eth1")


def test_an_unusable_default_route_is_listed_among_the_rejected():
    inv = inventory([nic("docker0")], [route("docker0", "0.0.0.0/0")])
    iface, _, draft = chosen(inv, "fd00::1")
    assert iface is None
    assert draft.findings[0].message.en.startswith(
        "no usable network interface reaches MASTER_ADDR fd00::1 (docker0: loopback or container-bridge interface);"
    )


def test_a_decision_reads_as_json_with_its_reason_in_both_languages():
    decision = Decision("NCCL_IB_HCA", "=mlx5_0:1", Text("why", "原因"), ("/sys/class/infiniband",), False)
    assert decision.to_json() == {
        "variable": "NCCL_IB_HCA",
        "value": "=mlx5_0:1",
        "kept": False,
        "reason": "why",
        "reason_zh": "原因",
        "sources": ["/sys/class/infiniband"],
    }


def test_a_log_folder_ending_in_x_keeps_its_name():
    assert debug_env("/logs/X/", {})["NCCL_DEBUG_FILE"] == "/logs/X/nccl.%h.%p.log"


def test_an_empty_entry_of_an_nccl_list_is_skipped_not_the_end():
    assert NcclList.parse("mlx5_0,,:1,mlx5_1") == NcclList((("mlx5_0", None), ("mlx5_1", None)), False, False)


# -- what the inventory reads from the machine ---------------------------------------------------------------------


def test_interfaces_read_with_their_flags_state_and_master(tmp_path):
    fake = FakeHost(tmp_path).file("/sys/class/net/eth0/flags", "0X1003").file("/sys/class/net/eth0/operstate", "up")
    fake.file("/sys/class/net/eth1/operstate", "up")  # no flags file
    fake.bond("bond0", ["eth2"]).netif("veth0").link("/sys/class/net/veth0/master", "../br9")  # br9 lists nothing
    assert read_interfaces(fake.host()) == {
        "bond0": Interface("bond0", 0x1403, "up", None),
        "eth0": Interface("eth0", 0x1003, "up", None),
        "eth1": Interface("eth1", None, "up", None),
        "eth2": Interface("eth2", 0x1803, "up", "bond0"),
        "veth0": Interface("veth0", 0x1003, "up", "?"),
    }


def test_ports_keep_their_populated_gids_and_the_bonds_over_their_netdevs(tmp_path):
    fake = FakeHost(tmp_path).bond("bond1", ["ens1f0"]).netif("ens2f0").link("/sys/class/net/ens2f0/master", "../br0")
    gid = ipv4_gid("10.1.0.5")
    fake.rdma("mlx5_0", gids={2: (gid, "RoCE v2", "ens1f0"), 3: (ZERO_GID, "RoCE v2", "ens1f0")}, slaves=["ens1f0"])
    base = "/sys/class/infiniband/mlx5_0/ports"
    fake.file(f"{base}/1/gids/0", b"\xff\xfe").file(f"{base}/1/gids/1", "not-a-gid").file(f"{base}/1/gids/x", gid)
    fake.file(f"{base}/-1/state", "4: ACTIVE")  # not a port number, listed before port 1
    fake.rdma("mlx5_1", slaves=["ens2f0"])
    host = fake.host()
    assert read_ports(host, read_interfaces(host)) == (
        RdmaPort(
            "mlx5_0",
            1,
            PortState.ACTIVE,
            "Ethernet",
            200.0,
            (Gid(2, ipaddress.IPv6Address(gid), "RoCE v2", "ens1f0"),),
            ("bond1", "ens1f0"),
            True,
        ),
        RdmaPort("mlx5_1", 1, PortState.ACTIVE, "Ethernet", 200.0, (), ("ens2f0",), True),
    )


def test_routes_pad_short_hex_fields_and_skip_only_the_bad_lines(tmp_path):
    lines = [
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT",
        "short\t00000000\t0",
        "eth9\tZZZZ0000\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0",
        "eth0\t100A\t0\t0001\t0\t0\t7\tFFFF",  # eight fields, hex without its leading zeros
        "eth1\t0000A8C0\t00000000\t00C1\t0\t0\t0\t0000FFFF\t0\t0\t0",  # RTF_UP with hex letters
    ]
    fake = FakeHost(tmp_path).file("/proc/net/route", "\n".join(lines))
    assert read_routes(fake.host()) == (route("eth0", "10.16.0.0/16", 7), route("eth1", "192.168.0.0/16"))


@pytest.mark.parametrize(
    ("kernel", "expected"),
    [("5.12.0-1-generic", (Gdr.DMABUF_POSSIBLE, "/proc/driver/nvidia/version")), ("5.11.22", (Gdr.NONE, None))],
)
def test_dmabuf_is_possible_from_kernel_5_12(tmp_path, kernel, expected):
    assert read_gdr(FakeHost(tmp_path).nvidia_driver(open_module=True, kernel=kernel).host()) == expected


@pytest.mark.parametrize(
    ("status", "cap"),
    [(None, None), ("CapEff:", None), ("CapEff:\t4000:0", None), ("CapEff:\t0000000000004000", True)],
    ids=["no-status", "empty", "two-colons", "ipc-lock"],
)
def test_memlock_reads_unknown_unless_the_files_say(tmp_path, status, cap):
    fake = FakeHost(tmp_path)
    if status is not None:
        fake.file("/proc/self/status", f"Name:\tpython3\n{status}\n")
    assert read_memlock(fake.host()) == Memlock(None, None, cap)


def test_an_nccl_conf_value_keeps_its_equals_signs_and_comments_are_skipped(tmp_path):
    fake = FakeHost(tmp_path).nccl_conf("#NCCL_IB_TC=106\n  # NCCL_IB_SL=3\nNCCL_IB_HCA==mlx5_0:1\n")
    assert read_presets(fake.host()) == {"NCCL_IB_HCA": Preset("=mlx5_0:1", "/etc/nccl.conf")}


TCCL = "/opt/tencent/tccl/lib/libnccl-net.so"


@pytest.mark.parametrize(
    ("plugin", "files", "expected"),
    [
        ("none", [TCCL], (None, None)),
        ("NONE", [TCCL], (None, None)),
        ("", [TCCL], (None, TCCL)),
        (
            "/opt/plugins/libnccl-net-ofi.so",
            ["/opt/plugins/libnccl-net-ofi.so"],
            ("/opt/plugins/libnccl-net-ofi.so", None),
        ),
        ("/opt/plugins/libnccl-net-ofi.so", [TCCL], (None, None)),
    ],
    ids=["none", "NONE", "unset", "path", "missing-path"],
)
def test_the_net_plugin_nccl_net_plugin_names(tmp_path, plugin, files, expected):
    fake = FakeHost(tmp_path, {"NCCL_NET_PLUGIN": plugin})
    for path in files:
        fake.file(path, "")
    assert find_net_plugin(fake.host()) == expected


def test_nccl_is_searched_in_each_python_then_the_library_path(tmp_path):
    env = {
        "VLA_OPENPI_DIR": "/srv/openpi-X/",
        "VIRTUAL_ENV": "/venvs/train",
        "CONDA_PREFIX": "/conda/envs/vla",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:relative/lib:/opt/nccl/lib",
    }
    fake = FakeHost(tmp_path, env)
    for folder in (
        "/srv/openpi-X/.venv/lib/python3.11",
        "/venvs/train/lib/python3.11",
        "/conda/envs/vla/lib/python2.7",
        "/conda/envs/vla/lib/python3.10",
        "/usr/local/lib/python3.12",
        "/usr/lib/python3.10",
        "/opt/conda/lib/python3.11",
    ):
        fake.mkdir(folder)
    fake.file("/etc/ld.so.conf.d/cuda.conf", "# CUDA\n/usr/local/cuda/lib64\n")
    fake.file("/etc/ld.so.conf.d/tccl.conf", "/opt/tencent/tccl/lib\n").file("/etc/ld.so.conf.d/README", "/nope\n")
    pythons = [
        "/srv/openpi-X/.venv/lib/python3.11",
        "/venvs/train/lib/python3.11",
        "/conda/envs/vla/lib/python3.10",
        "/usr/local/lib/python3.12",
        "/usr/lib/python3.10",
        "/opt/conda/lib/python3.11",
    ]
    assert nccl_search_dirs(fake.host()) == [
        *(f"{python}/{packages}" for python in pythons for packages in ("site-packages", "dist-packages")),
        "/usr/lib/python3/dist-packages",
        "/usr/local/nvidia/lib64",
        "/opt/nccl/lib",
        "/usr/local/cuda/lib64",
        "/opt/tencent/tccl/lib",
        *DEFAULT_LIB_DIRS,
    ]


def test_without_variables_only_the_system_pythons_are_searched(tmp_path):
    fake = FakeHost(tmp_path).mkdir("/.venv/lib/python3.11")  # no VLA_OPENPI_DIR: no openpi venv to look in
    assert nccl_search_dirs(fake.host()) == ["/usr/lib/python3/dist-packages", *DEFAULT_LIB_DIRS]
