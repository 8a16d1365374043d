"""Rule 7: the bootstrap interface (the one that reaches MASTER_ADDR) and the socket interface variables of NCCL,
Gloo and TensorPipe; platform-set socket variables are kept and checked against the RUNNING interfaces."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence

from entrypoint.core.messages import Text, joined
from entrypoint.fabric.draft import Draft, NcclList, source_of
from entrypoint.fabric.inventory import NET_SYSFS, ROUTES, SOCKET_VARS, Inventory, Route
from entrypoint.fabric.messages import MESSAGES as M

Resolver = Callable[[str], Sequence[str]]

_NOT_BOOTSTRAP = re.compile(r"^(lo|docker|veth|virbr)")


def _bootstrap_problem(inventory: Inventory, name: str) -> Text | None:
    """Why `name` cannot carry bootstrap traffic, or None when it can."""
    interface = inventory.interfaces.get(name)
    if interface is None:
        return M("if-missing")
    if _NOT_BOOTSTRAP.match(name):
        return M("if-not-for-bootstrap")
    if interface.master:
        return M("if-enslaved", master=interface.master)
    if not interface.running:
        return M("if-not-running")
    return None


def default_route(inventory: Inventory) -> Route | None:
    defaults = [r for r in inventory.routes if r.network.prefixlen == 0]
    return min(defaults, key=lambda r: r.metric) if defaults else None


def _route_to(inventory: Inventory, address: ipaddress.IPv4Address) -> Route | None:
    matching = [r for r in inventory.routes if address in r.network]
    return max(matching, key=lambda r: (r.network.prefixlen, -r.metric)) if matching else None


def _master_addresses(
    master_addr: str, resolve: Resolver, draft: Draft
) -> tuple[list[ipaddress.IPv4Address], Text | str]:
    """MASTER_ADDR's IPv4 addresses (resolving a host name) and how messages name it."""
    try:
        literal = ipaddress.ip_address(master_addr)
    except ValueError:
        pass
    else:
        return ([literal] if isinstance(literal, ipaddress.IPv4Address) else []), f"MASTER_ADDR {master_addr}"
    addresses = []
    for text in resolve(master_addr):
        try:
            addresses.append(ipaddress.IPv4Address(text))
        except ValueError:
            continue
    if addresses:
        return addresses, M("master-addr-resolved", addr=master_addr, addresses=", ".join(map(str, addresses)))
    draft.warn(
        "fabric.master-unresolved", M("master-unresolved", addr=master_addr), M("master-unresolved-fix"), "MASTER_ADDR"
    )
    return [], M("master-addr-unresolved", addr=master_addr)


def _listing(rejected: Mapping[str, Text]) -> Text:
    return joined((M("name-reason", name=name, reason=why) for name, why in rejected.items()), "; ", ";")


def bootstrap(inventory: Inventory, master_addr: str, resolve: Resolver, draft: Draft) -> tuple[str | None, Text]:
    """The interface that reaches MASTER_ADDR (longest-prefix route), else the default route's; with the reason."""
    addresses, how = _master_addresses(master_addr, resolve, draft)
    rejected: dict[str, Text] = {}  # interface -> why it cannot carry bootstrap traffic
    for address in addresses:
        route = _route_to(inventory, address)
        if route is None:
            continue
        problem = _bootstrap_problem(inventory, route.iface)
        if problem is None:
            if route.network.prefixlen == 0:
                return route.iface, M("bootstrap-default-route", how=how, iface=route.iface)
            return route.iface, M("bootstrap-route", how=how, network=route.network, iface=route.iface)
        rejected[route.iface] = problem
    default = default_route(inventory)
    default_problem = _bootstrap_problem(inventory, default.iface) if default is not None else None
    if default is not None and default_problem is None:
        if rejected:
            return default.iface, M(
                "bootstrap-fallback-rejected", how=how, rejected=_listing(rejected), iface=default.iface
            )
        return default.iface, M("bootstrap-fallback", how=how, iface=default.iface)
    if default is not None and default_problem is not None:
        rejected[default.iface] = default_problem
    detail = _listing(rejected) if rejected else M("no-route")
    draft.warn("fabric.bootstrap-if", M("bootstrap-if", how=how, detail=detail), M("bootstrap-if-fix"), ROUTES)
    return None, M("bootstrap-none", how=how)


def check_socket_presets(inventory: Inventory, draft: Draft) -> None:
    """Keep and check platform-set socket interface variables."""
    running = sorted(n for n, i in inventory.interfaces.items() if i.running)
    fix_if = M("socket-if-fix", running=", ".join(running) or M("none"))
    preset = draft.presets.get("NCCL_SOCKET_IFNAME")
    if preset is not None:
        if len(preset.value) < 2:
            draft.keep("NCCL_SOCKET_IFNAME", M("socket-ifname-too-short"))
        else:
            rule = NcclList.parse(preset.value)
            matched = [n for n in running if rule.matches(n)]
            draft.keep("NCCL_SOCKET_IFNAME", M("matches", names=", ".join(matched) or M("no-running-interface")))
            if not matched:
                draft.warn(
                    "fabric.preset-socket-ifname",
                    M("preset-socket-ifname", value=preset.value, source=preset.source),
                    fix_if,
                    source_of("NCCL_SOCKET_IFNAME", preset),
                )
    for variable in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        preset = draft.presets.get(variable)
        if preset is None:
            continue
        names = preset.value.split(",") if variable == "GLOO_SOCKET_IFNAME" else [preset.value]
        bad = [n for n in names if n not in running]
        draft.keep(variable, M("plain-ifname-bad", names=", ".join(bad)) if bad else M("plain-ifname-running"))
        if bad:
            syntax = any(n[:1] in ("^", "=") for n in names)
            draft.warn(
                f"fabric.preset-{variable.split('_')[0].lower()}-ifname",
                M(
                    "preset-plain-ifname-syntax" if syntax else "preset-plain-ifname",
                    variable=variable,
                    value=preset.value,
                    source=preset.source,
                ),
                fix_if,
                source_of(variable, preset),
            )


def socket_decisions(inventory: Inventory, draft: Draft, ifname: str | None, why: Text) -> None:
    """Rule 7 for a multi-node job: NCCL gets `=<if>`, Gloo and TensorPipe the plain name."""
    check_socket_presets(inventory, draft)
    for variable in SOCKET_VARS:
        if variable in draft.presets:
            continue
        if ifname is None:
            draft.unset(variable, why, (ROUTES, NET_SYSFS))
        elif variable == "NCCL_SOCKET_IFNAME":
            draft.set(variable, f"={ifname}", M("socket-ifname-exact", why=why, ifname=ifname), (ROUTES, NET_SYSFS))
        else:
            draft.set(variable, ifname, M("socket-ifname-plain", why=why), (ROUTES, NET_SYSFS))
