"""RDMA ports of the fabric inventory, judged against their peers.

Only a job of two nodes or more sends anything over RDMA, so a single node judges no port. The ports that count are
those NCCL may use: an RDMA link layer (InfiniBand or Ethernet), inside the platform's `NCCL_IB_HCA` when it is set,
never the VPC NIC (the default route's interface). A port's peers share its link layer and port number: when a peer
is ACTIVE, a port that is not is down (a hard fault), and an ACTIVE port slower than the fastest peer is an outlier.
A group with no ACTIVE port at all (every card's unconnected second port, a machine without RDMA cabling) is left to
the fabric inspection, which already falls back to sockets and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from entrypoint.fabric.draft import NcclList
from entrypoint.fabric.inventory import Inventory, RdmaPort
from entrypoint.fabric.sockets import default_route


@dataclass(frozen=True)
class PortVerdict:
    down: tuple[tuple[RdmaPort, tuple[RdmaPort, ...]], ...]  # a port not ACTIVE, with its ACTIVE peers
    slow: tuple[tuple[RdmaPort, float], ...]  # an ACTIVE port below its peers' best rate
    healthy: tuple[RdmaPort, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "down": [
                {"port": p.name, "state": p.state_name, "peers": [q.name for q in peers]} for p, peers in self.down
            ],
            "slow": [{"port": p.name, "rate_gbps": p.rate_gbps, "best_gbps": best} for p, best in self.slow],
            "healthy": [{"port": p.name, "rate_gbps": p.rate_gbps} for p in self.healthy],
        }


def fabric_ports(inventory: Inventory, env: Mapping[str, str]) -> list[RdmaPort]:
    """The ports NCCL may use on this node (see the module's docstring)."""
    hca = env.get("NCCL_IB_HCA")
    if hca is None and "NCCL_IB_HCA" in inventory.presets:
        hca = inventory.presets["NCCL_IB_HCA"].value
    scope = NcclList.parse(hca or "")
    route = default_route(inventory)
    vpc = route.iface if route else None
    return [p for p in inventory.ports if p.kind and scope.matches(p.device, p.port) and vpc not in p.netdevs]


def judge_ports(ports: Sequence[RdmaPort]) -> PortVerdict:
    groups: dict[tuple[str | None, int], list[RdmaPort]] = {}
    for port in ports:
        groups.setdefault((port.link_layer, port.port), []).append(port)
    down: list[tuple[RdmaPort, tuple[RdmaPort, ...]]] = []
    slow: list[tuple[RdmaPort, float]] = []
    healthy: list[RdmaPort] = []
    for group in groups.values():
        active = tuple(p for p in group if p.active)
        if not active:
            continue
        best = max((p.rate_gbps or 0.0 for p in active), default=0.0)
        for port in group:
            if not port.active:
                down.append((port, active))
            elif port.rate_gbps is not None and port.rate_gbps < best:
                slow.append((port, best))
            else:
                healthy.append(port)
    return PortVerdict(tuple(down), tuple(slow), tuple(healthy))
