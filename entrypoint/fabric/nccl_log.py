"""Transport proof: what NCCL actually used, read from its INFO log lines.

`debug_env(log_dir, platform)` (from `nccl_debug`) asks NCCL for one log file per rank (`nccl.<host>.<pid>.log`)
with the INIT and NET subsystems, unless the user already controls NCCL's debug output. `read_logs(log_dir)` (or
`parse_lines` for any text, e.g. a node log that captured NCCL's stdout) classifies each node from lines such as
`Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IBext/0/GDRDMA`, `via NET/Socket/1`, `via NET/AWS Libfabric/1/GDRDMA`,
`via P2P/CUMEM/read`, `via SHM/direct/direct` (before 2.12: `via direct shared memory`, `Ring 00 : 0 -> 1 via …`),
`NET/IB : Using [0]mlx5_bond_0:1/RoCE … ; OOB eth0:…` (2.20 and later, fused ports: `NET/IB : Using
[0]={[0] mlx5_7:1/RoCE, [1] mlx5_6:1/RoCE} [RO]; OOB …`) and `Using network IB` (or `Using network AWS Libfabric`).
`proof_findings` turns the result into a warning when a multi-node job ran on sockets while RDMA was planned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.findings import Finding, passed, warned
from entrypoint.fabric.inventory import Transport
from entrypoint.fabric.messages import MESSAGES as M
from entrypoint.fabric.nccl_debug import debug_env as debug_env

# `host:pid:tid [dev] NCCL INFO …`; logs pasted by hand sometimes lack the thread id.
_PREFIX = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+)(?::(?P<tid>\d+))? \[(?P<dev>\d+)\] NCCL INFO (?P<msg>.*)$")
_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)")
_NET_CHANNEL = re.compile(r"\bvia NET/(?P<net>[^/]+)/(?P<dev>\d+)(?:\(\d+\))?(?P<gdr>/GDRDMA)?")
_INTRA_CHANNEL = re.compile(r"\bvia (?:(?P<kind>P2P|SHM)/(?P<how>[^/]+)|(?P<old_shm>direct shared memory))")
_NICS = re.compile(r"^NET/(?P<net>\w+) ?: Using (?P<list>.*)$")
# `[0]mlx5_0:1/RoCE` and, inside a fused device `[0]={…}`, `[0] mlx5_7:1/RoCE`; not the fused device's own `[0]={`.
_NIC = re.compile(r"\[\d+\](?!=)\s*(?P<nic>[^\s\[\]{},;=]+)")
_NETWORK = re.compile(r"^Using network (?P<net>\S.*?)\s*$")
_FILE = re.compile(r"^nccl\.(?P<host>.+)\.(?P<pid>\d+)\.log$")


class ProofKind(StrEnum):
    """What a node's NCCL log shows it used between nodes."""

    SOCKET = "socket"  # a NET transport over TCP sockets
    RDMA_GDR = "rdma-gdr"  # RDMA with GPUDirect RDMA on every NET channel
    RDMA = "rdma"
    LOCAL = "local"  # only P2P/SHM within the node
    UNKNOWN = "unknown"  # no connection lines


@dataclass
class NodeTransport:
    """What one node's NCCL log says it used."""

    host: str
    net: set[str] = field(default_factory=set)  # NET transports of channel lines: "IB", "IBext_v8", "Socket"
    net_channels: int = 0
    gdr_channels: int = 0
    intra: set[str] = field(default_factory=set)  # "P2P/CUMEM", "P2P/IPC", "SHM/direct", ...
    nics: set[str] = field(default_factory=set)  # "mlx5_bond_0:1/RoCE", "eth0:10.0.0.2<0>" from "NET/… : Using"
    network: set[str] = field(default_factory=set)  # from "Using network IB"
    version: str | None = None

    @property
    def kind(self) -> ProofKind:
        nets = self.net or self.network
        if any(n.lower() == "socket" for n in nets):
            return ProofKind.SOCKET
        if self.net_channels:
            return ProofKind.RDMA_GDR if self.gdr_channels == self.net_channels else ProofKind.RDMA
        if nets:
            return ProofKind.RDMA
        return ProofKind.LOCAL if self.intra else ProofKind.UNKNOWN

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.host,
            "kind": self.kind.value,
            "net": sorted(self.net),
            "net_channels": self.net_channels,
            "gdr_channels": self.gdr_channels,
            "intra": sorted(self.intra),
            "nics": sorted(self.nics),
            "network": sorted(self.network),
            "nccl_version": self.version,
        }


@dataclass(frozen=True)
class TransportProof:
    """Per-node transports, sorted by host name."""

    nodes: tuple[NodeTransport, ...]

    @property
    def socket_nodes(self) -> tuple[str, ...]:
        return tuple(n.host for n in self.nodes if n.kind is ProofKind.SOCKET)

    def to_json(self) -> dict[str, object]:
        return {"nodes": [n.to_json() for n in self.nodes], "socket_nodes": list(self.socket_nodes)}


def parse_lines(lines: Iterable[str], default_host: str | None = None) -> TransportProof:
    """Classify NCCL INFO lines by node (the `host:pid:tid [dev]` prefix; a bare `NCCL version` line belongs
    to `default_host`). Anything else in the text is ignored, so a whole training log can be passed."""
    return _collect([(lines, default_host)])


def read_logs(log_dir: Path) -> TransportProof:
    """Parse every `nccl.<host>.<pid>.log` in `log_dir` (the file name supplies the host of unprefixed lines);
    unreadable files are skipped, never raised."""
    sources: list[tuple[Iterable[str], str | None]] = []
    for path in sorted(Path(log_dir).glob("nccl.*.log")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        name = _FILE.match(path.name)
        sources.append((text.splitlines(), name.group("host") if name else None))
    return _collect(sources)


def _collect(sources: Iterable[tuple[Iterable[str], str | None]]) -> TransportProof:
    nodes: dict[str, NodeTransport] = {}
    for lines, default_host in sources:
        for line in lines:
            found = _PREFIX.search(line)
            host, message = (found.group("host"), found.group("msg")) if found else (default_host, line.strip())
            if host is not None:
                _absorb(nodes.setdefault(host, NodeTransport(host)), message, prefixed=found is not None)
    return TransportProof(tuple(sorted((n for n in nodes.values() if _seen(n)), key=lambda n: n.host)))


def _seen(node: NodeTransport) -> bool:
    return bool(node.net or node.intra or node.nics or node.network or node.version)


def _absorb(node: NodeTransport, message: str, prefixed: bool) -> None:
    version = _VERSION.search(message)
    if version:
        node.version = version.group("version")
        return
    if not prefixed:
        return
    channel = _NET_CHANNEL.search(message)
    if channel:
        node.net.add(channel.group("net"))
        node.net_channels += 1
        node.gdr_channels += bool(channel.group("gdr"))
        return
    intra = _INTRA_CHANNEL.search(message)
    if intra:
        node.intra.add("SHM/direct" if intra.group("old_shm") else f"{intra.group('kind')}/{intra.group('how')}")
        return
    nics = _NICS.match(message)
    if nics:
        node.nics.update(_NIC.findall(nics.group("list")))
        return
    network = _NETWORK.match(message)
    if network:
        node.network.add(network.group("net"))


def proof_findings(proof: TransportProof, planned: Transport) -> tuple[Finding, ...]:
    """`fabric.proof-socket` (warn) when a node ran NCCL on sockets although the plan's transport was `ib` or
    `roce`; `fabric.proof` (pass) naming what each node used; nothing when the logs show no connections."""
    nodes = [n for n in proof.nodes if n.kind is not ProofKind.UNKNOWN]
    if not nodes:
        return ()
    summary = ", ".join(f"{n.host}: {n.kind} ({'/'.join(sorted(n.net or n.network or n.intra))})" for n in nodes)
    if planned in (Transport.IB, Transport.ROCE) and proof.socket_nodes:
        message = M("proof-socket", hosts=", ".join(proof.socket_nodes), planned=planned.label, summary=summary)
        return (warned("fabric.proof-socket", message, M("proof-socket-fix")),)
    return (passed("fabric.proof", M("proof", summary=summary)),)
