"""The RDMA rules: which ports NCCL uses (rules 1, 3-5, 8: `NCCL_IB_HCA`, `NCCL_IB_DISABLE`), the GID index
(rule 6: `NCCL_IB_GID_INDEX`) and the health of an RDMA job (rule 9: GPUDirect RDMA, locked memory, net plugin)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from entrypoint.core.findings import passed
from entrypoint.core.messages import Text, joined
from entrypoint.core.numbers import whole_number
from entrypoint.fabric.draft import MAX_PORT, Draft, NcclList, port_names, source_of
from entrypoint.fabric.inventory import (
    IB_SYSFS,
    ROUTES,
    VERSION_PART_MAX,
    Gdr,
    Inventory,
    MemlockVerdict,
    Preset,
    RdmaPort,
    Transport,
    parse_int,
)
from entrypoint.fabric.messages import MESSAGES as M
from entrypoint.inspect.messages import shown

_GID_INDEX_AUTO_SINCE = (2, 21)
_MEMLOCK_PASSED = {
    MemlockVerdict.CAP_IPC_LOCK: "memlock-cap-ipc-lock",
    MemlockVerdict.RAISED: "memlock-raised",
    MemlockVerdict.UNLIMITED: "memlock-unlimited",
}


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    """(major, minor) of an NCCL version; None when absent or when a part is not a plausible number."""
    parts = [whole_number(x, VERSION_PART_MAX) for x in (version or "").split(".")[:2]]
    return tuple(p for p in parts if p is not None) if version and None not in parts else None


@dataclass
class Selection:
    """The ports rules 3-4 chose, what NCCL would take on its own, and why the others were left out."""

    chosen: list[RdmaPort]
    would_use: list[RdmaPort]  # what NCCL would take with no NCCL_IB_HCA: ACTIVE, IB/Ethernet, openable
    excluded: dict[str, Text] = field(default_factory=dict)  # port name -> why
    gid_indices: dict[str, set[int]] = field(default_factory=dict)  # RoCE port -> usable GID indices

    def exclude(self, port: RdmaPort, why: Text) -> None:
        self.excluded[port.name] = why

    def listing(self, ports: Sequence[RdmaPort]) -> Text:
        """`port: why; …` for excluded `ports`."""
        return joined((M("name-reason", name=p.name, reason=self.excluded[p.name]) for p in ports), "; ", ";")


def _select_ports(inventory: Inventory, default_if: str | None, draft: Draft, scope: NcclList) -> Selection:
    """Rules 3-4: usable ports, minus the VPC NIC, one link type. Warnings name only ports in `scope` (the
    platform's NCCL_IB_HCA, else every port): a port NCCL is told to ignore is nobody's problem."""
    family = draft.presets["NCCL_IB_ADDR_FAMILY"].value if "NCCL_IB_ADDR_FAMILY" in draft.presets else "AF_INET"
    typed = [p for p in inventory.ports if p.kind]
    down = [p for p in typed if not p.active and scope.matches(p.device, p.port)]
    if down:
        draft.warn(
            "fabric.port-down",
            M("port-down", ports=joined(M("port-state", port=p.name, state=p.state_name) for p in down)),
            M("port-down-fix"),
            down[0].sysfs,
        )
    active = [p for p in typed if p.active]
    closed = [p for p in active if not p.uverbs and scope.matches(p.device, p.port)]
    if closed:
        draft.warn(
            "fabric.no-uverbs",
            M("no-uverbs", devices=", ".join(sorted({p.device for p in closed}))),
            M("mount-rdma-devices"),
            "/dev/infiniband",
        )
    selection = Selection([], [p for p in active if p.uverbs])
    usable, foreign = [], []
    for port in selection.would_use:
        if port.kind is Transport.IB:
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
            selection.exclude(port, M("no-routable-gid"))
    gidless = [p for p in selection.would_use if p.name in selection.excluded and scope.matches(p.device, p.port)]
    if gidless:
        draft.warn(
            "fabric.roce-no-gid",
            M("roce-no-gid", ports=port_names(gidless), family="IPv4" if family != "AF_INET6" else "IPv6"),
            M("roce-no-gid-fix"),
            f"{gidless[0].sysfs}/gids",
        )
    if usable:
        for port in foreign:
            selection.exclude(port, M("gid-netdev-elsewhere"))
    else:
        usable = foreign
        shown = [p for p in foreign if scope.matches(p.device, p.port)]
        if shown:
            draft.warn(
                "fabric.gid-netdev-absent",
                M("gid-netdev-absent", ports=port_names(shown)),
                M("gid-netdev-absent-fix"),
                f"{shown[0].sysfs}/gid_attrs/ndevs",
            )
    vpc = [p for p in usable if p.kind is Transport.ROCE and default_if and default_if in p.netdevs]
    if vpc and len(vpc) < len(usable):
        for port in vpc:
            selection.exclude(port, M("vpc-nic", iface=default_if))
        usable = [p for p in usable if p not in vpc]
    groups = {kind: [p for p in usable if p.kind is kind] for kind in (Transport.IB, Transport.ROCE)}
    if groups[Transport.IB] and groups[Transport.ROCE]:
        speed = {kind: sum(p.rate_gbps or 0 for p in ports) for kind, ports in groups.items()}
        keep = Transport.IB if speed[Transport.IB] >= speed[Transport.ROCE] else Transport.ROCE
        for port in groups[Transport.ROCE if keep is Transport.IB else Transport.IB]:
            selection.exclude(port, M("not-mixed", kept=keep.label))
        usable = groups[keep]
    best = max((p.rate_gbps or 0 for p in usable), default=0)
    slow = [p for p in usable if p.rate_gbps is not None and p.rate_gbps < best / 2 and scope.matches(p.device, p.port)]
    if slow:
        draft.warn(
            "fabric.slow-port",
            M("slow-port", ports=joined(M("port-rate", port=p.name, rate=p.rate_gbps) for p in slow), best=best),
            M("slow-port-fix"),
            f"{slow[0].sysfs}/rate",
        )
    selection.chosen = usable
    return selection


def _socket_fallback(draft: Draft, cause: Text, fix: Text) -> None:
    draft.warn("fabric.socket-fallback", M("socket-fallback", cause=cause), fix, IB_SYSFS)


def _fallback_cause(inventory: Inventory, selection: Selection) -> tuple[Text, Text]:
    if not inventory.rdma_devices:
        return M("cause-no-rdma-device"), M("cause-no-rdma-device-fix")
    typed = [p for p in inventory.ports if p.kind]
    if typed and not any(p.active for p in typed):
        return M("cause-ports-down"), M("cause-ports-down-fix")
    if typed and not selection.would_use:
        return M("cause-no-uverbs"), M("mount-rdma-devices")
    return M("cause-no-gid"), M("cause-no-gid-fix")


def _ib_disabled(draft: Draft) -> tuple[str, Preset] | None:
    """The platform setting that turns RDMA off (NCCL_IB_DISABLE non-zero, NCCL_NET=Socket), if any."""
    disable = draft.presets.get("NCCL_IB_DISABLE")
    if disable is not None and disable.value.strip() not in ("", "0"):
        return "NCCL_IB_DISABLE", disable
    net = draft.presets.get("NCCL_NET")
    return ("NCCL_NET", net) if net is not None and net.value.strip().lower() == "socket" else None


def _preset_ib_hca(draft: Draft, hca: Preset, selection: Selection) -> tuple[Transport, tuple[RdmaPort, ...]]:
    """Rule 1 for NCCL_IB_HCA: a platform value is kept; warn when it selects nothing or the wrong ports."""
    rule = NcclList.parse(hca.value)
    matched = [p for p in selection.would_use if rule.matches(p.device, p.port)]
    suggestion = "=" + ",".join(p.name for p in selection.chosen) if selection.chosen else None
    fix = M("ib-hca-fix-suggest", suggestion=suggestion) if suggestion else M("ib-hca-fix")
    value = shown(hca.value, 80)
    if rule.out_of_range:
        entries = ", ".join(shown(item, 40) for item in rule.out_of_range[:3])
        what = M("preset-ib-hca-port-range", entries=entries, source=hca.source, limit=MAX_PORT)
        draft.warn("fabric.preset-ib-hca", what, fix, source_of("NCCL_IB_HCA", hca))
    draft.keep("NCCL_IB_HCA", M("matches", names=port_names(matched) or M("no-usable-port")))
    if "NCCL_IB_DISABLE" not in draft.presets:
        draft.unset("NCCL_IB_DISABLE", M("ib-hca-preset"))
    else:
        draft.keep("NCCL_IB_DISABLE", M("rdma-stays-enabled"))
    if not matched:
        usable = port_names(selection.would_use) or M("none")
        draft.warn(
            "fabric.preset-ib-hca",
            M("preset-ib-hca-none", value=value, source=hca.source, usable=usable),
            fix,
            source_of("NCCL_IB_HCA", hca),
        )
        _socket_fallback(draft, M("cause-ib-hca-none", value=value), fix)
        return Transport.SOCKET, ()
    unwanted = [p for p in matched if p.name in selection.excluded]
    kinds = {p.kind for p in matched}
    if unwanted or len(kinds) > 1:
        why = selection.listing(unwanted) if unwanted else M("mixes-ib-and-roce")
        draft.warn(
            "fabric.preset-ib-hca",
            M("preset-ib-hca-unwanted", value=value, source=hca.source, why=why),
            fix,
            source_of("NCCL_IB_HCA", hca),
        )
    transport = Transport.IB if any(p.kind is Transport.IB for p in matched) else Transport.ROCE
    return transport, tuple(p for p in matched if p.kind is transport)


def rdma_decisions(
    inventory: Inventory, draft: Draft, default_if: str | None
) -> tuple[Transport, tuple[RdmaPort, ...], Selection]:
    """Rules 1, 3-6 and 8: pick the ports and set (or keep) NCCL_IB_HCA / NCCL_IB_DISABLE; returns the
    transport, the ports NCCL will use and the selection behind them."""
    hca = draft.presets.get("NCCL_IB_HCA")
    selection = _select_ports(inventory, default_if, draft, NcclList.parse(hca.value if hca else ""))
    port_sources = tuple(p.sysfs for p in inventory.ports) or (IB_SYSFS,)
    disabled = _ib_disabled(draft)
    if disabled is not None:
        off = M("rdma-off")
        for variable in ("NCCL_IB_HCA", "NCCL_IB_DISABLE"):
            if variable in draft.presets:
                draft.keep(variable, off)
            else:
                draft.unset(variable, off)
        name, preset = disabled
        _socket_fallback(
            draft,
            M("cause-rdma-off", variable=name, value=preset.value, source=preset.source),
            M("cause-rdma-off-fix", variable=name),
        )
        return Transport.SOCKET, (), selection
    if hca is not None:
        transport, devices = _preset_ib_hca(draft, hca, selection)
        return transport, devices, selection
    excluded = [p for p in selection.would_use if p.name in selection.excluded]
    if selection.chosen:
        transport = selection.chosen[0].kind or Transport.ROCE
        if excluded:
            draft.set(
                "NCCL_IB_HCA",
                "=" + ",".join(p.name for p in selection.chosen),
                M("ib-hca-exact", excluded=selection.listing(excluded), count=len(selection.chosen)),
                (*port_sources, ROUTES),
            )
        else:
            draft.unset("NCCL_IB_HCA", M("ib-hca-auto", ports=port_names(selection.chosen)), port_sources)
        draft.unset("NCCL_IB_DISABLE", M("rdma-usable"), port_sources)
        return transport, tuple(selection.chosen), selection
    draft.unset("NCCL_IB_HCA", M("no-usable-rdma-port"), port_sources)
    if excluded:
        draft.set("NCCL_IB_DISABLE", "1", M("ib-disable-set", excluded=selection.listing(excluded)), port_sources)
    else:
        draft.unset("NCCL_IB_DISABLE", M("ib-disable-unneeded"), port_sources)
    _socket_fallback(draft, *_fallback_cause(inventory, selection))
    return Transport.SOCKET, (), selection


def gid_decision(
    inventory: Inventory, draft: Draft, transport: Transport, devices: Sequence[RdmaPort], selection: Selection
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
        if transport is not Transport.ROCE:
            draft.keep(variable, M("gid-ignored"))
            return
        bad = [p for p, ok in zip(devices, valid, strict=True) if index is None or index not in ok]
        draft.keep(variable, M("gid-invalid", ports=port_names(bad)) if bad else M("gid-valid"))
        if bad:
            better = M("gid-better-index", index=min(common)) if common else M("gid-better-unset")
            draft.warn(
                "fabric.preset-gid-index",
                M("preset-gid-index", value=preset.value, source=preset.source, ports=port_names(bad)),
                M("preset-gid-index-fix", better=better),
                source_of(variable, preset),
            )
        return
    if transport is not Transport.ROCE:
        draft.unset(variable, M("gid-roce-only-ib" if transport is Transport.IB else "gid-roce-only"))
        return
    if common:
        index = min(common)
        if version and version >= _GID_INDEX_AUTO_SINCE:
            reason = M("gid-set", index=index)
        else:
            reason = M("gid-set-old-nccl", index=index, version=inventory.nccl_version or M("version-unknown"))
        draft.set(variable, str(index), reason, sources)
        return
    draft.unset(variable, M("gid-differs"), sources)
    if version is not None and version < _GID_INDEX_AUTO_SINCE:
        draft.warn("fabric.gid-index", M("gid-index", version=inventory.nccl_version), M("gid-index-fix"), IB_SYSFS)


def rdma_health(inventory: Inventory, draft: Draft, transport: Transport, devices: Sequence[RdmaPort]) -> None:
    """Rule 9: report GPUDirect RDMA, locked memory and the net plugin for an RDMA job; set nothing."""
    draft.findings.append(
        passed(
            "fabric.transport",
            M(
                "rdma-transport",
                transport=transport.label,
                count=len(devices),
                ports=port_names(devices),
                version=inventory.nccl_version or M("version-unknown"),
            ),
            IB_SYSFS,
        )
    )
    if inventory.gdr is Gdr.NONE:
        draft.warn("fabric.gdr", M("gdr-none"), M("gdr-none-fix"), "/sys/module/nvidia_peermem")
    else:
        message = M("gdr-peermem" if inventory.gdr is Gdr.PEERMEM else "gdr-dmabuf")
        draft.findings.append(passed("fabric.gdr", message, inventory.gdr_source))
    memlock = inventory.memlock
    verdict = memlock.verdict
    if verdict is MemlockVerdict.LIMITED:
        draft.warn(
            "fabric.memlock",
            M("memlock-limited", limit=int(memlock.hard or 0)),
            M("memlock-limited-fix"),
            "/proc/self/limits",
        )
    elif verdict in _MEMLOCK_PASSED:
        draft.findings.append(passed("fabric.memlock", M(_MEMLOCK_PASSED[verdict]), "/proc/self/limits"))
    if inventory.net_plugin:
        draft.findings.append(
            passed("fabric.net-plugin", M("net-plugin", plugin=inventory.net_plugin), inventory.net_plugin)
        )
    elif inventory.tccl_off_path:
        draft.findings.append(
            passed("fabric.net-plugin", M("tccl-off-path", plugin=inventory.tccl_off_path), inventory.tccl_off_path)
        )
