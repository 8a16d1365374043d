"""Fabric: which network NCCL, Gloo and TensorPipe use between nodes, and why.

`inventory.inspect_fabric(host)` reads the machine through `Host` only (sysfs, procfs, NCCL config files; no
`ibv_devinfo`, no root-only tools, no torch import). `plan_fabric(host, topology)` turns that inventory into
environment decisions by the rules in the README's "Network" section: a variable the platform already set (in
the environment or an NCCL config file) is kept and checked, never rewritten; a single node sets nothing
network-related; every decision carries the variable, its value or "left unset", the reason and the files it
came from. The rules live in `sockets.py` (rule 7) and `rdma.py` (rules 1, 3-6, 8, 9), writing into a `Draft`
(`draft.py`). `memlock.raise_memlock()` is the only side effect of the package, for launch to call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from entrypoint.core.findings import Finding, passed
from entrypoint.core.host import Host
from entrypoint.fabric.draft import Decision, Draft
from entrypoint.fabric.inventory import SOCKET_VARS, Gdr, Inventory, Memlock, RdmaPort, Transport, inspect_fabric
from entrypoint.fabric.messages import MESSAGES as M
from entrypoint.fabric.sockets import Resolver, bootstrap, check_socket_presets, default_route, socket_decisions
from entrypoint.inspect.topology import Topology

__all__ = ["RDMA_VARS", "FabricPlan", "plan_fabric", "resolve_host"]

RDMA_VARS = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_DISABLE")


@dataclass(frozen=True)
class FabricPlan:
    """What the fabric inspection contributes to the launch plan."""

    transport: Transport
    devices: tuple[str, ...]  # chosen "dev:port"
    socket_ifname: str | None
    gdr: Gdr
    nccl_version: str | None
    net_plugin: str | None
    decisions: tuple[Decision, ...]
    findings: tuple[Finding, ...]
    env_set: dict[str, str] = field(default_factory=dict)  # what we export
    env_kept: dict[str, str] = field(default_factory=dict)  # platform values (env or NCCL config) left alone
    memlock: Memlock = field(default_factory=lambda: Memlock(None, None, None))

    def to_json(self) -> dict[str, object]:
        return {
            "transport": self.transport.value,
            "devices": list(self.devices),
            "socket_ifname": self.socket_ifname,
            "gdr": self.gdr.value,
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
    import socket  # only a multi-node job whose MASTER_ADDR is a name resolves one

    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]) for info in infos})


def _single_node(inventory: Inventory, draft: Draft) -> None:
    """One node: GPUs never cross the network, so nothing network-related is set; presets are still checked."""
    check_socket_presets(inventory, draft)
    for variable in SOCKET_VARS + RDMA_VARS:
        if variable in RDMA_VARS and variable in draft.presets:
            draft.keep(variable, M("single-node-unused"))
        elif variable not in draft.presets:
            draft.unset(variable, M("single-node-unset"))
    draft.findings.append(passed("fabric.transport", M("single-node")))


def plan_fabric(host: Host, topology: Topology, resolve: Resolver = resolve_host) -> FabricPlan:
    """Decide NCCL/Gloo/TensorPipe network variables for this node. Pure: reads `host`, calls `resolve` only
    when MASTER_ADDR is a host name; never raises on odd machine state (problems become findings)."""
    inventory = inspect_fabric(host)
    draft = Draft(inventory.presets)
    ifname: str | None = None
    devices: tuple[RdmaPort, ...] = ()
    if topology.nnodes == 1:
        transport = Transport.LOCAL
        _single_node(inventory, draft)
    else:
        from entrypoint.fabric.rdma import gid_decision, rdma_decisions, rdma_health  # a single node needs no RDMA

        ifname, why = bootstrap(inventory, topology.master_addr, resolve, draft)
        socket_decisions(inventory, draft, ifname, why)
        default = default_route(inventory)
        transport, devices, selection = rdma_decisions(inventory, draft, default.iface if default else None)
        gid_decision(inventory, draft, transport, devices, selection)
        if transport in (Transport.IB, Transport.ROCE):
            rdma_health(inventory, draft, transport, devices)
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
