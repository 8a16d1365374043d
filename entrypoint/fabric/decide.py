"""Fabric: which network NCCL, Gloo and TensorPipe use between nodes, and why.

`fabric_inventory.inspect_fabric(host)` reads the machine through `Host` only (sysfs, procfs, NCCL config files;
no `ibv_devinfo`, no root-only tools, no torch import). `plan_fabric(host, topology)` turns that inventory into
environment decisions by the rules in the README's "Network" section: a variable the platform already set (in
the environment or an NCCL config file) is kept and checked, never rewritten; a single node sets nothing
network-related; every decision carries the variable, its value or "left unset", the reason and the files it
came from. `raise_memlock()` is the only side effect here, for launch to call.
"""

from __future__ import annotations

import ipaddress
import math
import re
import resource
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from entrypoint.core.findings import Finding, passed, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.fabric.inventory import (
    IB_SYSFS,
    NET_SYSFS,
    ROUTES,
    SOCKET_VARS,
    Inventory,
    Memlock,
    Preset,
    RdmaPort,
    Route,
    inspect_fabric,
    parse_int,
)
from entrypoint.inspect.topology import Topology

Resolver = Callable[[str], Sequence[str]]

RDMA_VARS = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_DISABLE")
_NOT_BOOTSTRAP = re.compile(r"^(lo|docker|veth|virbr)")
_GID_INDEX_AUTO_SINCE = (2, 21)

# -- NCCL list syntax -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NcclList:
    """NCCL's `NCCL_IB_HCA` / `NCCL_SOCKET_IFNAME` syntax: `[^][=]name[:port],…`. Names match as prefixes
    (`mlx5_1` also matches `mlx5_10`) unless `=` asks for exact names; a leading `^` selects what does *not*
    match; an entry without a port matches every port."""

    entries: tuple[tuple[str, int | None], ...]
    exact: bool
    exclude: bool

    @classmethod
    def parse(cls, value: str) -> NcclList:
        exclude = value.startswith("^")
        value = value[1:] if exclude else value
        exact = value.startswith("=")
        value = value[1:] if exact else value
        entries = []
        for item in value.split(","):
            name, sep, port = item.partition(":")
            if name:
                digits = port[: len(port) - len(port.lstrip("0123456789"))]  # atoi(): leading digits, else 0
                entries.append((name, (int(digits) if digits else 0) if sep and port else None))
        return cls(tuple(entries), exact, exclude)

    def matches(self, name: str, port: int | None = None) -> bool:
        hit = not self.entries or any(
            (name == ref if self.exact else name.startswith(ref)) and (want is None or port is None or want == port)
            for ref, want in self.entries
        )
        return hit != self.exclude


# -- decisions --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One variable: the value we export or keep (None = left unset), why, and which files said so."""

    variable: str
    value: str | None
    reason: Text
    sources: tuple[str, ...]
    kept: bool

    def to_json(self) -> dict[str, object]:
        return {
            "variable": self.variable,
            "value": self.value,
            "kept": self.kept,
            "reason": self.reason.en,
            "reason_zh": self.reason.zh,
            "sources": list(self.sources),
        }


@dataclass(frozen=True)
class FabricPlan:
    """What the fabric inspection contributes to the launch plan."""

    transport: str  # "local" | "ib" | "roce" | "socket"
    devices: tuple[str, ...]  # chosen "dev:port"
    socket_ifname: str | None
    gdr: str  # "peermem" | "dmabuf-possible" | "none"
    nccl_version: str | None
    net_plugin: str | None
    decisions: tuple[Decision, ...]
    findings: tuple[Finding, ...]
    env_set: dict[str, str] = field(default_factory=dict)  # what we export
    env_kept: dict[str, str] = field(default_factory=dict)  # platform values (env or NCCL config) left alone
    memlock: Memlock = Memlock(None, None, None)

    def to_json(self) -> dict[str, object]:
        return {
            "transport": self.transport,
            "devices": list(self.devices),
            "socket_ifname": self.socket_ifname,
            "gdr": self.gdr,
            "nccl_version": self.nccl_version,
            "net_plugin": self.net_plugin,
            "memlock": self.memlock.to_json(),
            "env_set": dict(self.env_set),
            "env_kept": dict(self.env_kept),
            "decisions": [d.to_json() for d in self.decisions],
            "findings": [f.to_json() for f in self.findings],
        }


def resolve_host(name: str) -> list[str]:
    """IPv4 addresses of a host name; empty when it does not resolve (never raises)."""
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in infos})


class _Draft:
    """Decisions and findings as `plan_fabric` accumulates them."""

    def __init__(self, presets: Mapping[str, Preset]) -> None:
        self.presets = presets
        self.decisions: list[Decision] = []
        self.findings: list[Finding] = []
        self.env_set: dict[str, str] = {}

    def set(self, variable: str, value: str, reason: Text, sources: Sequence[str]) -> None:
        self.env_set[variable] = value
        self.decisions.append(Decision(variable, value, reason, tuple(sources), False))

    def unset(self, variable: str, reason: Text, sources: Sequence[str] = ()) -> None:
        self.decisions.append(Decision(variable, None, reason, tuple(sources), False))

    def keep(self, variable: str, verdict: Text) -> None:
        preset = self.presets[variable]
        self.decisions.append(
            Decision(
                variable,
                preset.value,
                Text(
                    f"kept: set by the platform ({preset.source}); {verdict.en}",
                    f"保留平台设置({preset.source}):{verdict.zh}",
                ),
                (_source(variable, preset),),
                True,
            )
        )

    def warn(self, id: str, message: Text, hint: Text, where: str | None = None) -> None:
        self.findings.append(warned(id, message, hint, where))


def _source(variable: str, preset: Preset) -> str:
    return f"environment: {variable}" if preset.source == "environment" else preset.source


def _names(ports: Iterable[RdmaPort]) -> str:
    return ", ".join(p.name for p in ports)


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    return tuple(int(x) for x in version.split(".")[:2]) if version else None


# bootstrap interface -------------------------------------------------------------------------------------------


def _bootstrap_problem(inventory: Inventory, name: str) -> str | None:
    """Why `name` cannot carry bootstrap traffic, or None when it can."""
    interface = inventory.interfaces.get(name)
    if interface is None:
        return "not in /sys/class/net"
    if _NOT_BOOTSTRAP.match(name):
        return "loopback or container-bridge interface"
    if interface.master:
        return f"a slave of {interface.master}"
    if not interface.running:
        return "not RUNNING"
    return None


def _default_route(inventory: Inventory) -> Route | None:
    defaults = [r for r in inventory.routes if r.network.prefixlen == 0]
    return min(defaults, key=lambda r: r.metric) if defaults else None


def _route_to(inventory: Inventory, address: ipaddress.IPv4Address) -> Route | None:
    matching = [r for r in inventory.routes if address in r.network]
    return max(matching, key=lambda r: (r.network.prefixlen, -r.metric)) if matching else None


def _bootstrap(inventory: Inventory, master_addr: str, resolve: Resolver, draft: _Draft) -> tuple[str | None, Text]:
    """The interface that reaches MASTER_ADDR (longest-prefix route), else the default route's; with the reason."""
    try:
        literal = ipaddress.ip_address(master_addr)
        addresses = [literal] if literal.version == 4 else []
        how = Text(f"MASTER_ADDR {master_addr}", f"MASTER_ADDR {master_addr}")
    except ValueError:
        addresses = []
        for text in resolve(master_addr):
            try:
                addresses.append(ipaddress.IPv4Address(text))
            except ValueError:
                continue
        how = Text(
            f"MASTER_ADDR {master_addr} ({', '.join(map(str, addresses)) or 'unresolved'})",
            f"MASTER_ADDR {master_addr}({', '.join(map(str, addresses)) or '无法解析'})",
        )
        if not addresses:
            draft.warn(
                "fabric.master-unresolved",
                Text(
                    f"MASTER_ADDR={master_addr} does not resolve on this node; the bootstrap interface falls back to the default route",
                    f"本节点无法解析 MASTER_ADDR={master_addr};引导网卡退回默认路由所在网卡",
                ),
                Text(
                    "Use node 0's IP address for MASTER_ADDR, or fix DNS / /etc/hosts in the container.",
                    "请把 MASTER_ADDR 设为 0 号节点的 IP,或修复容器内的 DNS / /etc/hosts。",
                ),
                "MASTER_ADDR",
            )
    rejected = []
    for address in addresses:
        route = _route_to(inventory, address)
        if route is None:
            continue
        problem = _bootstrap_problem(inventory, route.iface)
        if problem is None:
            which = "the default route" if route.network.prefixlen == 0 else f"route {route.network}"
            which_zh = "默认路由" if route.network.prefixlen == 0 else f"路由 {route.network}"
            return route.iface, Text(
                f"{how.en} is reached by {which} through {route.iface}",
                f"{how.zh} 经由{which_zh}通过 {route.iface} 到达",
            )
        rejected.append(f"{route.iface}: {problem}")
    default = _default_route(inventory)
    if default is not None and _bootstrap_problem(inventory, default.iface) is None:
        note = f" ({'; '.join(rejected)})" if rejected else ""
        return default.iface, Text(
            f"no usable specific route to {how.en}{note}; the default route goes through {default.iface}",
            f"没有到 {how.zh} 的可用专用路由{note};默认路由经过 {default.iface}",
        )
    if default is not None:
        rejected.append(f"{default.iface}: {_bootstrap_problem(inventory, default.iface)}")
    detail = "; ".join(rejected) or "no route"
    draft.warn(
        "fabric.bootstrap-if",
        Text(
            f"no usable network interface reaches {how.en} ({detail}); NCCL, Gloo and TensorPipe will pick one themselves",
            f"没有可到达 {how.zh} 的可用网卡({detail});NCCL、Gloo、TensorPipe 将自行选择",
        ),
        Text(
            "Check the container's network (ip route); set NCCL_SOCKET_IFNAME=<if> and GLOO_SOCKET_IFNAME=<if> in the job if you know the right interface.",
            "请检查容器网络(ip route);若已知正确网卡,请在任务中设置 NCCL_SOCKET_IFNAME=<网卡> 与 GLOO_SOCKET_IFNAME=<网卡>。",
        ),
        ROUTES,
    )
    return None, Text(f"no usable interface reaches {how.en}", f"没有可到达 {how.zh} 的可用网卡")


def _check_socket_presets(inventory: Inventory, draft: _Draft) -> None:
    """Keep and check platform-set socket interface variables."""
    running = sorted(n for n, i in inventory.interfaces.items() if i.running)
    fix_if = Text(
        f"Unset it to let vla-entrypoint choose, or name a RUNNING interface ({', '.join(running) or 'none'}).",
        f"请取消该变量由 vla-entrypoint 选择,或指定一个 RUNNING 状态的网卡({', '.join(running) or '无'})。",
    )
    preset = draft.presets.get("NCCL_SOCKET_IFNAME")
    if preset is not None:
        if len(preset.value) < 2:
            draft.keep(
                "NCCL_SOCKET_IFNAME",
                Text(
                    "shorter than 2 characters, so NCCL ignores it and picks an interface itself",
                    "少于 2 个字符,NCCL 会忽略它并自行选择网卡",
                ),
            )
        else:
            rule = NcclList.parse(preset.value)
            matched = [n for n in running if rule.matches(n)]
            draft.keep(
                "NCCL_SOCKET_IFNAME",
                Text(
                    f"matches {', '.join(matched) or 'no RUNNING interface'}",
                    f"匹配 {', '.join(matched) or '无 RUNNING 网卡'}",
                ),
            )
            if not matched:
                draft.warn(
                    "fabric.preset-socket-ifname",
                    Text(
                        f"NCCL_SOCKET_IFNAME={preset.value} ({preset.source}) names no RUNNING interface; NCCL initialisation will fail",
                        f"NCCL_SOCKET_IFNAME={preset.value}({preset.source})未匹配任何 RUNNING 网卡,NCCL 初始化将失败",
                    ),
                    fix_if,
                    _source("NCCL_SOCKET_IFNAME", preset),
                )
    for variable in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        preset = draft.presets.get(variable)
        if preset is None:
            continue
        names = preset.value.split(",") if variable == "GLOO_SOCKET_IFNAME" else [preset.value]
        bad = [n for n in names if n not in running]
        draft.keep(
            variable,
            Text(
                f"{'names a missing or non-RUNNING interface: ' + ', '.join(bad) if bad else 'RUNNING'}",
                f"{'包含不存在或非 RUNNING 的网卡:' + ', '.join(bad) if bad else '网卡处于 RUNNING 状态'}",
            ),
        )
        if bad:
            syntax = any(n[:1] in ("^", "=") for n in names)
            draft.warn(
                f"fabric.preset-{variable.split('_')[0].lower()}-ifname",
                Text(
                    f"{variable}={preset.value} ({preset.source}) does not name RUNNING interfaces"
                    + (" (it takes plain names: no ^ or =, unlike NCCL_SOCKET_IFNAME)" if syntax else ""),
                    f"{variable}={preset.value}({preset.source})不是 RUNNING 网卡名"
                    + ("(它只接受纯网卡名,不支持 NCCL_SOCKET_IFNAME 的 ^ 或 = 语法)" if syntax else ""),
                ),
                fix_if,
                _source(variable, preset),
            )


def _socket_decisions(inventory: Inventory, draft: _Draft, ifname: str | None, why: Text) -> None:
    """Rule 7 for a multi-node job: NCCL gets `=<if>`, Gloo and TensorPipe the plain name."""
    _check_socket_presets(inventory, draft)
    for variable in SOCKET_VARS:
        if variable in draft.presets:
            continue
        if ifname is None:
            draft.unset(variable, why, (ROUTES, NET_SYSFS))
        elif variable == "NCCL_SOCKET_IFNAME":
            draft.set(
                variable,
                f"={ifname}",
                Text(
                    f"{why.en}; exact-match form, so {ifname} does not also select {ifname}1",
                    f"{why.zh};使用精确匹配形式,避免 {ifname} 同时匹配 {ifname}1",
                ),
                (ROUTES, NET_SYSFS),
            )
        else:
            draft.set(
                variable,
                ifname,
                Text(
                    f"{why.en}; plain name: this variable takes no ^ or = syntax",
                    f"{why.zh};纯网卡名:此变量不支持 ^ 或 = 语法",
                ),
                (ROUTES, NET_SYSFS),
            )


# RDMA ports ---------------------------------------------------------------------------------------------------


@dataclass
class _Selection:
    chosen: list[RdmaPort]
    would_use: list[RdmaPort]  # what NCCL would take with no NCCL_IB_HCA: ACTIVE, IB/Ethernet, openable
    excluded: dict[str, str] = field(default_factory=dict)  # port name -> why (English)
    excluded_zh: dict[str, str] = field(default_factory=dict)
    gid_indices: dict[str, set[int]] = field(default_factory=dict)  # RoCE port -> usable GID indices

    def exclude(self, port: RdmaPort, en: str, zh: str) -> None:
        self.excluded[port.name], self.excluded_zh[port.name] = en, zh


def _select_ports(inventory: Inventory, default_if: str | None, draft: _Draft, scope: NcclList) -> _Selection:
    """Rules 3-4: usable ports, minus the VPC NIC, one link type. Warnings name only ports in `scope` (the
    platform's NCCL_IB_HCA, else every port): a port NCCL is told to ignore is nobody's problem."""
    family = draft.presets["NCCL_IB_ADDR_FAMILY"].value if "NCCL_IB_ADDR_FAMILY" in draft.presets else "AF_INET"
    typed = [p for p in inventory.ports if p.kind]
    down = [p for p in typed if p.state != 4 and scope.matches(p.device, p.port)]
    if down:
        draft.warn(
            "fabric.port-down",
            Text(
                f"RDMA port(s) not ACTIVE: {', '.join(f'{p.name} ({p.state_name})' for p in down)}",
                f"RDMA 端口未处于 ACTIVE 状态:{', '.join(f'{p.name}({p.state_name})' for p in down)}",
            ),
            Text(
                "NCCL skips them, so this node has less bandwidth than its peers; check the link (phys_state) or ask the platform to replace the node.",
                "NCCL 会跳过这些端口,本节点带宽将低于其他节点;请检查链路(phys_state)或请平台更换节点。",
            ),
            down[0].sysfs,
        )
    active = [p for p in typed if p.state == 4]
    closed = [p for p in active if not p.uverbs and scope.matches(p.device, p.port)]
    if closed:
        draft.warn(
            "fabric.no-uverbs",
            Text(
                f"RDMA device(s) {', '.join(sorted({p.device for p in closed}))} are visible in sysfs but their /dev/infiniband/uverbs* node is missing in this container, so they cannot be used",
                f"sysfs 中可见 RDMA 设备 {', '.join(sorted({p.device for p in closed}))},但容器内缺少对应的 /dev/infiniband/uverbs* 设备节点,无法使用",
            ),
            Text(
                "Start the container with the RDMA devices (e.g. --device=/dev/infiniband or the platform's RDMA resource request).",
                "请让容器挂载 RDMA 设备(例如 --device=/dev/infiniband,或在平台上申请 RDMA 资源)。",
            ),
            "/dev/infiniband",
        )
    selection = _Selection([], [p for p in active if p.uverbs])
    usable, foreign = [], []
    for port in selection.would_use:
        if port.kind == "ib":
            usable.append(port)
            continue
        routable = [g for g in port.gids if g.routable(family)]
        local = {g.index for g in routable if g.netdev in inventory.interfaces}
        selection.gid_indices[port.name] = local or {g.index for g in routable}
        if local:
            usable.append(port)
        elif routable:
            foreign.append(port)
        else:
            selection.exclude(port, "no routable RoCE v2 GID", "没有可路由的 RoCE v2 GID")
    gidless = [p for p in selection.would_use if p.name in selection.excluded and scope.matches(p.device, p.port)]
    if gidless:
        draft.warn(
            "fabric.roce-no-gid",
            Text(
                f"RoCE port(s) {_names(gidless)} have no routable RoCE v2 {'IPv4' if family != 'AF_INET6' else 'IPv6'} GID; NCCL would pick a wrong GID and hang or fail at connection time",
                f"RoCE 端口 {_names(gidless)} 没有可路由的 RoCE v2 {'IPv4' if family != 'AF_INET6' else 'IPv6'} GID;NCCL 会选错 GID,连接时挂起或失败",
            ),
            Text(
                "Give the RoCE netdev an IP address (the kernel then adds the GID), or ask the platform to fix the RDMA network setup.",
                "请为 RoCE 网卡配置 IP 地址(内核随后会生成 GID),或请平台修复 RDMA 网络配置。",
            ),
            f"{gidless[0].sysfs}/gids",
        )
    if usable:
        for port in foreign:
            selection.exclude(
                port,
                "the netdev of its RoCE v2 GID is not in this network namespace",
                "其 RoCE v2 GID 对应的网卡不在本网络命名空间",
            )
    else:
        usable = foreign
        shown = [p for p in foreign if scope.matches(p.device, p.port)]
        if shown:
            draft.warn(
                "fabric.gid-netdev-absent",
                Text(
                    f"the RoCE v2 GIDs of {_names(shown)} belong to netdevs that are not in this container's network namespace; with MLNX_OFED drivers connections fail with ENODEV",
                    f"{_names(shown)} 的 RoCE v2 GID 所属网卡不在本容器的网络命名空间;使用 MLNX_OFED 驱动时连接会以 ENODEV 失败",
                ),
                Text(
                    "Run with the RDMA netdevs in the container (host network or the platform's RDMA network attachment); if NCCL fails with ENODEV, this is why.",
                    "请让 RDMA 网卡进入容器(主机网络或平台的 RDMA 网络挂载);若 NCCL 报 ENODEV,原因即在此。",
                ),
                f"{shown[0].sysfs}/gid_attrs/ndevs",
            )
    vpc = [p for p in usable if p.kind == "roce" and default_if and default_if in p.netdevs]
    if vpc and len(vpc) < len(usable):
        for port in vpc:
            selection.exclude(
                port,
                f"carries the default route ({default_if}): the VPC NIC",
                f"承载默认路由({default_if}),即 VPC 网卡",
            )
        usable = [p for p in usable if p not in vpc]
    groups = {kind: [p for p in usable if p.kind == kind] for kind in ("ib", "roce")}
    if groups["ib"] and groups["roce"]:
        speed = {kind: sum(p.rate_gbps or 0 for p in ports) for kind, ports in groups.items()}
        keep = "ib" if speed["ib"] >= speed["roce"] else "roce"
        for port in groups["roce" if keep == "ib" else "ib"]:
            selection.exclude(
                port,
                f"NCCL does not mix InfiniBand and RoCE; kept the faster {keep.upper()} group",
                f"NCCL 不能混用 InfiniBand 与 RoCE;保留更快的 {keep.upper()} 组",
            )
        usable = groups[keep]
    best = max((p.rate_gbps or 0 for p in usable), default=0)
    slow = [p for p in usable if p.rate_gbps is not None and p.rate_gbps < best / 2 and scope.matches(p.device, p.port)]
    if slow:
        draft.warn(
            "fabric.slow-port",
            Text(
                f"RDMA port(s) {', '.join(f'{p.name} ({p.rate_gbps:g} Gb/s)' for p in slow)} run below half of the best port's {best:g} Gb/s",
                f"RDMA 端口 {', '.join(f'{p.name}({p.rate_gbps:g} Gb/s)' for p in slow)} 速率不足最快端口 {best:g} Gb/s 的一半",
            ),
            Text(
                "A slow rail limits every ring that crosses it; check the link speed with the platform.",
                "慢速链路会拖慢经过它的所有通信环;请与平台确认链路速率。",
            ),
            f"{slow[0].sysfs}/rate",
        )
    selection.chosen = usable
    return selection


def _socket_fallback(draft: _Draft, cause: Text, fix: Text) -> None:
    draft.warn(
        "fabric.socket-fallback",
        Text(
            f"multi-node training will run NCCL over TCP sockets: expect about 1-3 GB/s between nodes, tens of times slower than RDMA. Likely cause: {cause.en}",
            f"多节点训练将通过 TCP socket 运行 NCCL:节点间带宽约 1-3 GB/s,比 RDMA 慢数十倍。可能原因:{cause.zh}",
        ),
        fix,
        IB_SYSFS,
    )


def _fallback_cause(inventory: Inventory, selection: _Selection) -> tuple[Text, Text]:
    if not inventory.rdma_devices:
        return (
            Text(
                "no RDMA device is visible (/sys/class/infiniband is empty)",
                "看不到任何 RDMA 设备(/sys/class/infiniband 为空)",
            ),
            Text(
                "Run every node on an RDMA-capable instance type (e.g. Tencent HCC) with RDMA enabled for the job.",
                "请让每个节点使用支持 RDMA 的机型(例如腾讯云 HCC)并为任务启用 RDMA。",
            ),
        )
    typed = [p for p in inventory.ports if p.kind]
    if typed and all(p.state != 4 for p in typed):
        return (
            Text("every RDMA port is down", "所有 RDMA 端口均未激活"),
            Text(
                "Ask the platform to check the RDMA links of this node, or move the job to healthy nodes.",
                "请平台检查本节点 RDMA 链路,或把任务调度到正常节点。",
            ),
        )
    if typed and not selection.would_use:
        return (
            Text(
                "the container has no /dev/infiniband/uverbs* device nodes",
                "容器内没有 /dev/infiniband/uverbs* 设备节点",
            ),
            Text(
                "Start the container with the RDMA devices (e.g. --device=/dev/infiniband or the platform's RDMA resource request).",
                "请让容器挂载 RDMA 设备(例如 --device=/dev/infiniband,或在平台上申请 RDMA 资源)。",
            ),
        )
    return (
        Text("no RDMA port has a usable RoCE v2 GID", "没有 RDMA 端口具备可用的 RoCE v2 GID"),
        Text(
            "Give the RoCE netdevs IP addresses, or ask the platform to fix the RDMA network setup.",
            "请为 RoCE 网卡配置 IP 地址,或请平台修复 RDMA 网络配置。",
        ),
    )


def _ib_disabled(draft: _Draft) -> tuple[str, Preset] | None:
    """The platform setting that turns RDMA off (NCCL_IB_DISABLE non-zero, NCCL_NET=Socket), if any."""
    disable = draft.presets.get("NCCL_IB_DISABLE")
    if disable is not None and disable.value.strip() not in ("", "0"):
        return "NCCL_IB_DISABLE", disable
    net = draft.presets.get("NCCL_NET")
    return ("NCCL_NET", net) if net is not None and net.value.strip().lower() == "socket" else None


def _rdma_decisions(
    inventory: Inventory, draft: _Draft, default_if: str | None
) -> tuple[str, tuple[RdmaPort, ...], _Selection]:
    """Rules 1, 3-6 and 8: pick the ports and set (or keep) NCCL_IB_HCA / NCCL_IB_DISABLE; returns the
    transport, the ports NCCL will use and the selection behind them."""
    hca = draft.presets.get("NCCL_IB_HCA")
    selection = _select_ports(inventory, default_if, draft, NcclList.parse(hca.value if hca else ""))
    port_sources = tuple(p.sysfs for p in inventory.ports) or (IB_SYSFS,)
    disabled = _ib_disabled(draft)
    if disabled is not None:
        off = Text("RDMA is switched off by the platform", "平台关闭了 RDMA")
        for variable in ("NCCL_IB_HCA", "NCCL_IB_DISABLE"):
            draft.keep(variable, off) if variable in draft.presets else draft.unset(variable, off)
        name, preset = disabled
        _socket_fallback(
            draft,
            Text(f"{name}={preset.value} is set ({preset.source})", f"设置了 {name}={preset.value}({preset.source})"),
            Text(f"Remove {name} unless sockets are intended.", f"如非有意使用 socket,请删除 {name}。"),
        )
        return "socket", (), selection
    if hca is not None:
        rule = NcclList.parse(hca.value)
        matched = [p for p in selection.would_use if rule.matches(p.device, p.port)]
        suggestion = "=" + ",".join(p.name for p in selection.chosen) if selection.chosen else None
        fix = Text(
            f"Unset NCCL_IB_HCA to let vla-entrypoint choose{f', or set NCCL_IB_HCA={suggestion}' if suggestion else ''}.",
            f"请取消 NCCL_IB_HCA 由 vla-entrypoint 选择{f',或设置 NCCL_IB_HCA={suggestion}' if suggestion else ''}。",
        )
        draft.keep(
            "NCCL_IB_HCA",
            Text(f"matches {_names(matched) or 'no usable port'}", f"匹配 {_names(matched) or '无可用端口'}"),
        )
        if "NCCL_IB_DISABLE" not in draft.presets:
            draft.unset("NCCL_IB_DISABLE", Text("NCCL_IB_HCA is set by the platform", "平台已设置 NCCL_IB_HCA"))
        else:
            draft.keep("NCCL_IB_DISABLE", Text("RDMA stays enabled", "RDMA 保持启用"))
        if not matched:
            draft.warn(
                "fabric.preset-ib-hca",
                Text(
                    f"NCCL_IB_HCA={hca.value} ({hca.source}) matches no usable RDMA port (usable: {_names(selection.would_use) or 'none'}); NCCL silently falls back to TCP sockets",
                    f"NCCL_IB_HCA={hca.value}({hca.source})未匹配任何可用 RDMA 端口(可用:{_names(selection.would_use) or '无'});NCCL 会静默退回 TCP socket",
                ),
                fix,
                _source("NCCL_IB_HCA", hca),
            )
            _socket_fallback(
                draft,
                Text(f"NCCL_IB_HCA={hca.value} matches no usable port", f"NCCL_IB_HCA={hca.value} 未匹配可用端口"),
                fix,
            )
            return "socket", (), selection
        unwanted = [p for p in matched if p.name in selection.excluded]
        kinds = {p.kind for p in matched}
        if unwanted or len(kinds) > 1:
            why = (
                "; ".join(f"{p.name}: {selection.excluded[p.name]}" for p in unwanted)
                or "it mixes InfiniBand and RoCE ports"
            )
            why_zh = (
                ";".join(f"{p.name}:{selection.excluded_zh[p.name]}" for p in unwanted)
                or "混用了 InfiniBand 与 RoCE 端口"
            )
            draft.warn(
                "fabric.preset-ib-hca",
                Text(
                    f"NCCL_IB_HCA={hca.value} ({hca.source}) selects ports that should not carry training traffic ({why})",
                    f"NCCL_IB_HCA={hca.value}({hca.source})选中了不应承载训练流量的端口({why_zh})",
                ),
                fix,
                _source("NCCL_IB_HCA", hca),
            )
        transport = "ib" if any(p.kind == "ib" for p in matched) else "roce"
        return transport, tuple(p for p in matched if p.kind == transport), selection
    excluded = [p for p in selection.would_use if p.name in selection.excluded]
    if selection.chosen:
        transport = selection.chosen[0].kind or "roce"
        listing = "; ".join(f"{p.name}: {selection.excluded[p.name]}" for p in excluded)
        listing_zh = ";".join(f"{p.name}:{selection.excluded_zh[p.name]}" for p in excluded)
        if excluded:
            draft.set(
                "NCCL_IB_HCA",
                "=" + ",".join(p.name for p in selection.chosen),
                Text(
                    f"NCCL would also use ports that must not carry training traffic ({listing}); exact-match list of the {len(selection.chosen)} chosen port(s)",
                    f"NCCL 本会同时使用不应承载训练流量的端口({listing_zh});因此以精确匹配形式列出选定的 {len(selection.chosen)} 个端口",
                ),
                port_sources + (ROUTES,),
            )
        else:
            draft.unset(
                "NCCL_IB_HCA",
                Text(
                    f"NCCL picks exactly the usable ports itself ({_names(selection.chosen)})",
                    f"NCCL 会自行选中全部可用端口({_names(selection.chosen)})",
                ),
                port_sources,
            )
        draft.unset("NCCL_IB_DISABLE", Text("RDMA is usable", "RDMA 可用"), port_sources)
        return transport, tuple(selection.chosen), selection
    draft.unset("NCCL_IB_HCA", Text("no usable RDMA port", "没有可用的 RDMA 端口"), port_sources)
    if excluded:
        listing = "; ".join(f"{p.name}: {selection.excluded[p.name]}" for p in excluded)
        listing_zh = ";".join(f"{p.name}:{selection.excluded_zh[p.name]}" for p in excluded)
        draft.set(
            "NCCL_IB_DISABLE",
            "1",
            Text(
                f"NCCL would try RDMA ports that cannot work ({listing}) and hang or fail; sockets instead",
                f"NCCL 会尝试无法工作的 RDMA 端口({listing_zh})并挂起或失败;改用 socket",
            ),
            port_sources,
        )
    else:
        draft.unset(
            "NCCL_IB_DISABLE",
            Text(
                "no RDMA port NCCL could open; it uses sockets by itself", "NCCL 无可打开的 RDMA 端口,会自行使用 socket"
            ),
            port_sources,
        )
    _socket_fallback(draft, *_fallback_cause(inventory, selection))
    return "socket", (), selection


def _gid_decision(
    inventory: Inventory, draft: _Draft, transport: str, devices: Sequence[RdmaPort], selection: _Selection
) -> None:
    """Rule 6: NCCL_IB_GID_INDEX only for RoCE, only when one index is valid on every chosen port."""
    variable = "NCCL_IB_GID_INDEX"
    sources = tuple(f"{p.sysfs}/gid_attrs/types" for p in devices)
    valid = [selection.gid_indices.get(p.name, set()) for p in devices]
    common = set.intersection(*valid) if valid else set()
    version = _version_tuple(inventory.nccl_version)
    preset = draft.presets.get(variable)
    if preset is not None:
        index = parse_int(preset.value.strip())
        if transport != "roce":
            draft.keep(variable, Text("ignored: not RoCE", "未使用 RoCE,此变量无效"))
            return
        bad = [p for p, ok in zip(devices, valid) if index is None or index not in ok]
        draft.keep(
            variable,
            Text(
                "valid on every chosen port" if not bad else f"not a routable RoCE v2 GID on {_names(bad)}",
                "在所有选定端口上有效" if not bad else f"在 {_names(bad)} 上不是可路由的 RoCE v2 GID",
            ),
        )
        if bad:
            better = (
                f"set NCCL_IB_GID_INDEX={min(common)}"
                if common
                else "unset it (NCCL >= 2.21 picks the RoCE v2 GID per port)"
            )
            better_zh = (
                f"设为 NCCL_IB_GID_INDEX={min(common)}"
                if common
                else "取消它(NCCL >= 2.21 会逐端口自动选择 RoCE v2 GID)"
            )
            draft.warn(
                "fabric.preset-gid-index",
                Text(
                    f"NCCL_IB_GID_INDEX={preset.value} ({preset.source}) is not a routable RoCE v2 GID on {_names(bad)}; connections will fail or hang",
                    f"NCCL_IB_GID_INDEX={preset.value}({preset.source})在 {_names(bad)} 上不是可路由的 RoCE v2 GID;连接将失败或挂起",
                ),
                Text(
                    f"The GID table differs from the preset (common in shared-RDMA Kubernetes setups): {better}.",
                    f"GID 表与预设不符(共享 RDMA 的 Kubernetes 环境常见):请{better_zh}。",
                ),
                _source(variable, preset),
            )
        return
    if transport != "roce":
        draft.unset(
            variable,
            Text(
                "only RoCE needs a GID index" + ("; InfiniBand ignores it" if transport == "ib" else ""),
                "只有 RoCE 需要 GID 索引" + (";InfiniBand 会忽略它" if transport == "ib" else ""),
            ),
        )
        return
    if common:
        index = min(common)
        draft.set(
            variable,
            str(index),
            Text(
                f"GID {index} is a routable RoCE v2 GID on every chosen port"
                + (
                    ""
                    if version and version >= _GID_INDEX_AUTO_SINCE
                    else f" (NCCL {inventory.nccl_version or 'version unknown'}: before 2.21 the default is 0, a link-local RoCE v1 GID)"
                ),
                f"GID {index} 在所有选定端口上都是可路由的 RoCE v2 GID"
                + (
                    ""
                    if version and version >= _GID_INDEX_AUTO_SINCE
                    else f"(NCCL {inventory.nccl_version or '版本未知'}:2.21 之前默认为 0,即链路本地 RoCE v1 GID)"
                ),
            ),
            sources,
        )
        return
    draft.unset(
        variable,
        Text(
            "the routable RoCE v2 GID sits at different indices on the chosen ports; NCCL >= 2.21 picks it per port",
            "可路由的 RoCE v2 GID 在各选定端口上索引不同;NCCL >= 2.21 会逐端口自动选择",
        ),
        sources,
    )
    if version is not None and version < _GID_INDEX_AUTO_SINCE:
        draft.warn(
            "fabric.gid-index",
            Text(
                f"NCCL {inventory.nccl_version} defaults to GID index 0 (link-local RoCE v1) and no single index is a RoCE v2 GID on every port",
                f"NCCL {inventory.nccl_version} 默认 GID 索引为 0(链路本地 RoCE v1),且不存在在所有端口上都是 RoCE v2 GID 的统一索引",
            ),
            Text(
                "Upgrade NCCL to 2.21 or later (automatic GID choice), or make the GID tables uniform.",
                "请把 NCCL 升级到 2.21 或更高版本(自动选择 GID),或统一各端口的 GID 表。",
            ),
            IB_SYSFS,
        )


def _rdma_health(inventory: Inventory, draft: _Draft, transport: str, devices: Sequence[RdmaPort]) -> None:
    """Rule 9: report GPUDirect RDMA, locked memory and the net plugin for an RDMA job; set nothing."""
    draft.findings.append(
        passed(
            "fabric.transport",
            Text(
                f"{transport.upper() if transport == 'ib' else 'RoCE'} on {len(devices)} port(s): {_names(devices)} (NCCL {inventory.nccl_version or 'version unknown'})",
                f"使用 {transport.upper() if transport == 'ib' else 'RoCE'},共 {len(devices)} 个端口:{_names(devices)}(NCCL {inventory.nccl_version or '版本未知'})",
            ),
            IB_SYSFS,
        )
    )
    if inventory.gdr == "none":
        draft.warn(
            "fabric.gdr",
            Text(
                "GPUDirect RDMA is unavailable: NIC traffic is staged through host memory (lower bandwidth, more CPU)",
                "GPUDirect RDMA 不可用:网卡流量需经主机内存中转(带宽更低、CPU 占用更高)",
            ),
            Text(
                "Load nvidia-peermem on the host (modprobe nvidia-peermem), or use the open NVIDIA kernel module on kernel >= 5.12 for DMA-BUF.",
                "请在宿主机加载 nvidia-peermem(modprobe nvidia-peermem),或在内核 >= 5.12 上使用开源 NVIDIA 内核模块以启用 DMA-BUF。",
            ),
            "/sys/module/nvidia_peermem",
        )
    else:
        draft.findings.append(
            passed(
                "fabric.gdr",
                Text(
                    "GPUDirect RDMA: peer-memory module loaded"
                    if inventory.gdr == "peermem"
                    else "GPUDirect RDMA: DMA-BUF possible (NCCL confirms it at start)",
                    "GPUDirect RDMA:已加载 peer-memory 模块"
                    if inventory.gdr == "peermem"
                    else "GPUDirect RDMA:可能支持 DMA-BUF(由 NCCL 启动时确认)",
                ),
                inventory.gdr_source,
            )
        )
    memlock = inventory.memlock
    if memlock.hard is not None and memlock.hard != math.inf and not memlock.cap_ipc_lock:
        draft.warn(
            "fabric.memlock",
            Text(
                f"locked memory is limited to {int(memlock.hard)} bytes (hard) without CAP_IPC_LOCK; RDMA memory registration can fail with ENOMEM",
                f"锁定内存上限为 {int(memlock.hard)} 字节(硬限制)且没有 CAP_IPC_LOCK;RDMA 内存注册可能以 ENOMEM 失败",
            ),
            Text(
                "Run the container with --ulimit memlock=-1 (or grant CAP_IPC_LOCK).",
                "请以 --ulimit memlock=-1 运行容器(或授予 CAP_IPC_LOCK)。",
            ),
            "/proc/self/limits",
        )
    elif memlock.soft is not None:
        raised = memlock.soft != memlock.hard and not memlock.cap_ipc_lock
        draft.findings.append(
            passed(
                "fabric.memlock",
                Text(
                    "locked memory: "
                    + (
                        "CAP_IPC_LOCK held"
                        if memlock.cap_ipc_lock
                        else "soft limit raised to the unlimited hard limit at launch"
                        if raised
                        else "unlimited"
                    ),
                    "锁定内存:"
                    + (
                        "拥有 CAP_IPC_LOCK"
                        if memlock.cap_ipc_lock
                        else "启动时将软限制提升到无限制的硬限制"
                        if raised
                        else "无限制"
                    ),
                ),
                "/proc/self/limits",
            )
        )
    if inventory.net_plugin:
        draft.findings.append(
            passed(
                "fabric.net-plugin",
                Text(
                    f"NCCL net plugin {inventory.net_plugin} will be loaded (logs say NET/IBext or the plugin's name)",
                    f"将加载 NCCL 网络插件 {inventory.net_plugin}(日志显示 NET/IBext 或插件名)",
                ),
                inventory.net_plugin,
            )
        )
    elif inventory.tccl_off_path:
        draft.findings.append(
            passed(
                "fabric.net-plugin",
                Text(
                    f"TCCL plugin {inventory.tccl_off_path} exists but is not on the library path, so NCCL uses its built-in IB transport",
                    f"存在 TCCL 插件 {inventory.tccl_off_path},但不在库搜索路径中,NCCL 将使用内置 IB 传输",
                ),
                inventory.tccl_off_path,
            )
        )


def plan_fabric(host: Host, topology: Topology, resolve: Resolver = resolve_host) -> FabricPlan:
    """Decide NCCL/Gloo/TensorPipe network variables for this node. Pure: reads `host`, calls `resolve` only
    when MASTER_ADDR is a host name; never raises on odd machine state (problems become findings)."""
    inventory = inspect_fabric(host)
    draft = _Draft(inventory.presets)
    ifname: str | None = None
    devices: tuple[RdmaPort, ...] = ()
    if topology.nnodes == 1:
        transport = "local"
        _check_socket_presets(inventory, draft)
        for variable in SOCKET_VARS + RDMA_VARS:
            if variable in RDMA_VARS and variable in draft.presets:
                draft.keep(variable, Text("unused on a single node", "单节点不使用"))
            elif variable not in draft.presets:
                draft.unset(
                    variable,
                    Text(
                        "single node: GPUs talk over NVLink/PCIe and shared memory, nothing crosses the network",
                        "单节点:GPU 之间通过 NVLink/PCIe 与共享内存通信,不经过网络",
                    ),
                )
        draft.findings.append(
            passed(
                "fabric.transport",
                Text(
                    "single node: NVLink/PCIe and shared memory; no network variables set",
                    "单节点:使用 NVLink/PCIe 与共享内存;不设置网络变量",
                ),
            )
        )
    else:
        ifname, why = _bootstrap(inventory, topology.master_addr, resolve, draft)
        _socket_decisions(inventory, draft, ifname, why)
        default = _default_route(inventory)
        transport, devices, selection = _rdma_decisions(inventory, draft, default.iface if default else None)
        _gid_decision(inventory, draft, transport, devices, selection)
        if transport in ("ib", "roce"):
            _rdma_health(inventory, draft, transport, devices)
    return FabricPlan(
        transport=transport,
        devices=tuple(p.name for p in devices),
        socket_ifname=ifname,
        gdr=inventory.gdr,
        nccl_version=inventory.nccl_version,
        net_plugin=inventory.net_plugin,
        decisions=tuple(draft.decisions),
        findings=tuple(draft.findings),
        env_set=dict(draft.env_set),
        env_kept={name: preset.value for name, preset in sorted(inventory.presets.items())},
        memlock=inventory.memlock,
    )


# -- launch-time side effect ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemlockChange:
    """What `raise_memlock` did: limits before/after (bytes, `math.inf` = unlimited) and any error."""

    before: tuple[float, float]
    after: tuple[float, float]
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def to_json(self) -> dict[str, object]:
        def show(pair: tuple[float, float]) -> list[object]:
            return ["unlimited" if v == math.inf else int(v) for v in pair]

        return {"before": show(self.before), "after": show(self.after), "changed": self.changed, "error": self.error}


def raise_memlock(limits: Any = resource) -> MemlockChange:
    """Raise this process's soft RLIMIT_MEMLOCK to its hard limit, so RDMA registration in the training
    processes (which inherit it) is not capped by a small soft default. `limits` is the `resource` module
    (tests pass a stand-in). Never raises."""

    def readable(pair: tuple[int, int]) -> tuple[float, float]:
        return tuple(math.inf if v == limits.RLIM_INFINITY else v for v in pair)  # type: ignore[return-value]

    soft, hard = limits.getrlimit(limits.RLIMIT_MEMLOCK)
    before = readable((soft, hard))
    if soft == hard:
        return MemlockChange(before, before)
    try:
        limits.setrlimit(limits.RLIMIT_MEMLOCK, (hard, hard))
    except (ValueError, OSError) as error:
        return MemlockChange(before, before, str(error))
    return MemlockChange(before, readable(limits.getrlimit(limits.RLIMIT_MEMLOCK)))
