"""Topology: how many nodes, which one this is, how many processes a node runs, where the master is.

Sources, first match wins: TI-ONE's variables (recognised by `GPU_NUM_PER_NODE`), torchrun-style `PET_*`
variables, else a single machine. TI-ONE's `WORLD_SIZE`/`RANK` count **nodes**, not processes; they are read
here and never reach the training processes as process ranks (see `environment.py`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from entrypoint.core.errors import JobMisspecified, PreflightFailed
from entrypoint.core.findings import Finding, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.core.numbers import whole_number
from entrypoint.core.settings import Device
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import verbatim

DEFAULT_MASTER_PORT = 29500
# A name that still does not resolve this long after a worker starts waiting is taken as wrong, not as a late DNS
# entry (entries for a job's instances appear within seconds of their start; a negative answer is cached ~30 s).
RESOLVE_BOUND_S = 90
PET_TOPOLOGY_VARS = ("PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_Expected = Literal["integer", "address", "port", "node-list", "fixed-nnodes"]
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


class TopologySource(StrEnum):
    """Where the topology was read from."""

    TIONE = "tione"  # TI-ONE's variables (GPU_NUM_PER_NODE, WORLD_SIZE = nodes, RANK = node index)
    TORCHRUN = "torchrun"  # PET_* variables
    SINGLE = "single"  # neither: this machine alone


@dataclass(frozen=True)
class Topology:
    """The job's shape as torchrun needs it, plus warnings found while reading it."""

    nnodes: int
    node_rank: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    source: TopologySource
    device: Device
    findings: tuple[Finding, ...] = field(default=(), compare=False)

    @property
    def world_size(self) -> int:
        """Total training processes in the job."""
        return self.nnodes * self.nproc_per_node

    def to_json(self) -> dict[str, object]:
        return {
            "nnodes": self.nnodes,
            "node_rank": self.node_rank,
            "nproc_per_node": self.nproc_per_node,
            "world_size": self.world_size,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
            "source": str(self.source),
            "device": str(self.device),
        }


def _bad(name: str, value: str, expected: _Expected, **fields: object) -> JobMisspecified:
    """A variable's value is malformed: `expected` names the `topology-expected-*` message and its fix."""
    return JobMisspecified(
        "topology.bad-variable",
        name,
        M("topology-bad-value", name=name, value=value, expected=M(f"topology-expected-{expected}", **fields)),
        M(f"topology-expected-{expected}-fix", name=name, **fields),
    )


def _integer(env: Mapping[str, str], name: str, minimum: int, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None:
        if default is None:
            raise JobMisspecified(
                "topology.missing-variable",
                name,
                M("topology-variable-missing", name=name),
                M("topology-variable-missing-fix", name=name),
            )
        return default
    value = whole_number(raw, minimum=minimum)
    if value is None:
        raise _bad(name, raw, "integer", minimum=minimum)
    return value


def _master(env: Mapping[str, str], addr_var: str, port_var: str, nnodes: int) -> tuple[str, int]:
    addr = env.get(addr_var, "").strip()
    if not addr:
        if nnodes > 1:
            raise JobMisspecified(
                "topology.missing-variable",
                addr_var,
                M("topology-master-missing", name=addr_var, nnodes=nnodes),
                M("topology-master-missing-fix", name=addr_var),
            )
        addr = "127.0.0.1"
    if not _is_address(addr):
        raise _bad(addr_var, addr, "address")
    if nnodes > 1 and _is_loopback(addr):
        raise JobMisspecified(
            "topology.loopback-master",
            addr_var,
            M("topology-master-loopback", name=addr_var, addr=addr, nnodes=nnodes),
            M("topology-master-loopback-fix", name=addr_var),
        )
    port_raw = env.get(port_var)
    if port_raw is None or not port_raw.strip():
        return addr, DEFAULT_MASTER_PORT
    port = whole_number(port_raw, maximum=65535, minimum=1)
    if port is None:
        raise _bad(port_var, port_raw, "port")
    return addr, port


def _is_address(addr: str) -> bool:
    try:
        ipaddress.ip_address(addr)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(addr))


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return addr == "localhost"


def _visible_devices(env: Mapping[str, str]) -> int | None:
    """GPUs `CUDA_VISIBLE_DEVICES` exposes (None when unset). CUDA stops at the first invalid entry, e.g. -1."""
    if "CUDA_VISIBLE_DEVICES" not in env:
        return None
    count = 0
    for entry in env["CUDA_VISIBLE_DEVICES"].split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-") or entry.lower() in ("none", "nodevfiles", "void"):
            break
        count += 1
    return count


def _node_list(env: Mapping[str, str], nnodes: int, rank: int, per_node: int, total: int) -> None:
    raw = env.get("NODE_LIST", "").strip()
    if not raw:
        return
    counts: list[int] = []
    for entry in raw.split(","):
        host, sep, gpus = entry.strip().rpartition(":")
        count = whole_number(gpus)
        if not sep or not host or count is None:
            raise _bad("NODE_LIST", raw, "node-list")
        counts.append(count)
    if len(counts) != nnodes:
        raise _contradiction("NODE_LIST", M("topology-node-list-entries", entries=len(counts), nnodes=nnodes))
    if sum(counts) != total:
        raise _contradiction("NODE_LIST", M("topology-node-list-total", gpus=sum(counts), total=total))
    if counts[rank] != per_node:
        raise _contradiction(
            "NODE_LIST", M("topology-node-list-this-node", rank=rank, gpus=counts[rank], per_node=per_node)
        )


def _contradiction(where: str, what: Text) -> JobMisspecified:
    return JobMisspecified("topology.contradiction", where, what, M("topology-contradiction-fix"))


def _from_tione(env: Mapping[str, str]) -> tuple[int, int, int, str, int]:
    per_node = _integer(env, "GPU_NUM_PER_NODE", 1)
    nnodes = _integer(env, "WORLD_SIZE", 1, default=1)
    rank = _integer(env, "RANK", 0, default=0)
    if rank >= nnodes:
        raise JobMisspecified(
            "topology.rank-out-of-range",
            "RANK",
            M("topology-rank-out-of-range", rank=rank, nnodes=nnodes, last=nnodes - 1),
            M("topology-rank-out-of-range-fix"),
        )
    total = nnodes * per_node
    if "GPU_NUM" in env:
        gpu_num = _integer(env, "GPU_NUM", 1)
        if gpu_num != total:
            raise _contradiction(
                "GPU_NUM", M("topology-gpu-num", gpu_num=gpu_num, nnodes=nnodes, per_node=per_node, total=total)
            )
    if "INDEX" in env:
        index = _integer(env, "INDEX", 0)
        if index != rank:
            raise _contradiction("INDEX", M("topology-index", index=index, rank=rank))
    _node_list(env, nnodes, rank, per_node, total)
    addr, port = _master(env, "MASTER_ADDR", "MASTER_PORT", nnodes)
    return nnodes, rank, per_node, addr, port


def _from_pet(env: Mapping[str, str], host: Host, device: Device) -> tuple[int, int, int, str, int]:
    raw_nnodes = env.get("PET_NNODES", "1").strip()
    low, _, high = raw_nnodes.partition(":")
    if high and high != low:
        raise _bad("PET_NNODES", raw_nnodes, "fixed-nnodes")
    nnodes = _integer({"PET_NNODES": low}, "PET_NNODES", 1)
    rank = _integer(env, "PET_NODE_RANK", 0, default=0)
    if rank >= nnodes:
        raise JobMisspecified(
            "topology.rank-out-of-range",
            "PET_NODE_RANK",
            M("topology-pet-rank-out-of-range", rank=rank, nnodes=nnodes),
            M("topology-pet-rank-out-of-range-fix", last=nnodes - 1),
        )
    per_raw = env.get("PET_NPROC_PER_NODE", "auto").strip()
    if per_raw in ("auto", "gpu"):
        per_node = _local_gpus(env, host) if device is Device.GPU else 1
    elif per_raw == "cpu":
        per_node = 1
    else:
        per_node = _integer(env, "PET_NPROC_PER_NODE", 1)
    addr, port = _master(_pet_master_env(env), "PET_MASTER_ADDR", "PET_MASTER_PORT", nnodes)
    return nnodes, rank, per_node, addr, port


def _pet_master_env(env: Mapping[str, str]) -> dict[str, str]:
    merged = dict(env)
    for pet, plain in (("PET_MASTER_ADDR", "MASTER_ADDR"), ("PET_MASTER_PORT", "MASTER_PORT")):
        if pet not in merged and plain in env:
            merged[pet] = env[plain]
    return merged


def _local_gpus(env: Mapping[str, str], host: Host) -> int:
    visible = _visible_devices(env)
    present = host.gpu_count()
    return min(visible, present) if visible is not None else present


def _check_gpus(env: Mapping[str, str], host: Host, per_node: int, count: Text) -> list[Finding]:
    """`count` names what set the processes per node (a variable, or the visible GPU count)."""
    findings: list[Finding] = []
    visible = _visible_devices(env)
    if visible is not None and visible < per_node:
        raise JobMisspecified(
            "topology.visible-devices",
            "CUDA_VISIBLE_DEVICES",
            M(
                "topology-visible-devices-too-few",
                value=env["CUDA_VISIBLE_DEVICES"],
                visible=visible,
                count=count,
                per_node=per_node,
            ),
            M("topology-visible-devices-too-few-fix"),
        )
    if visible is not None and visible > per_node:
        findings.append(
            warned(
                "topology.visible-devices",
                M("topology-visible-devices-extra", visible=visible, per_node=per_node),
                M("topology-visible-devices-extra-fix", count=count),
                "CUDA_VISIBLE_DEVICES",
            )
        )
    present = host.gpu_count()
    if present < per_node:
        raise PreflightFailed(
            "topology.gpus-missing",
            f"{host.path('/dev')}/nvidia*",
            M("topology-gpus-missing", present=present, count=count, per_node=per_node),
            M("topology-gpus-missing-fix"),
        )
    return findings


def _pet_overridden(env: Mapping[str, str], chosen: Mapping[str, int | str]) -> list[Finding]:
    """PET_* variables left over from an outer launcher: never allowed to override what we chose."""
    stray = [
        f"{name}={env[name]}" for name in PET_TOPOLOGY_VARS if name in env and env[name].strip() != str(chosen[name])
    ]
    if not stray:
        return []
    return [
        warned(
            "topology.pet-ignored",
            M("topology-pet-ignored", variables=", ".join(stray)),
            M("topology-pet-ignored-fix"),
            ",".join(s.split("=")[0] for s in stray),
        )
    ]


def resolve_topology(host: Host, device: Device) -> Topology:
    """Read and validate the topology; raises `UserError` (exit 2 bad values, 3 missing GPUs)."""
    env = host.env
    device = Device(device)
    findings: list[Finding] = []
    if "GPU_NUM_PER_NODE" in env:
        source = TopologySource.TIONE
        nnodes, rank, per_node, addr, port = _from_tione(env)
        findings += _pet_overridden(
            env,
            {
                "PET_NNODES": nnodes,
                "PET_NODE_RANK": rank,
                "PET_NPROC_PER_NODE": per_node,
                "PET_MASTER_ADDR": addr,
                "PET_MASTER_PORT": port,
            },
        )
        count = verbatim("GPU_NUM_PER_NODE")
    elif any(name in env for name in PET_TOPOLOGY_VARS):
        source = TopologySource.TORCHRUN
        nnodes, rank, per_node, addr, port = _from_pet(env, host, device)
        count = verbatim("PET_NPROC_PER_NODE")
    else:
        if env.get("WORLD_SIZE", "1").strip() not in ("", "1"):
            raise JobMisspecified(
                "topology.ambiguous",
                "WORLD_SIZE",
                M("topology-ambiguous", value=env["WORLD_SIZE"]),
                M("topology-ambiguous-fix"),
            )
        source = TopologySource.SINGLE
        nnodes, rank, addr = 1, 0, "127.0.0.1"
        _, port = _master(env, "MASTER_ADDR", "MASTER_PORT", 1)
        per_node = _local_gpus(env, host) if device is Device.GPU else 1
        count = M("topology-visible-gpu-count")
        if device is Device.GPU and per_node == 0:
            raise PreflightFailed(
                "topology.no-gpu", f"{host.path('/dev')}/nvidia*", M("topology-no-gpu"), M("topology-no-gpu-fix")
            )
    if device is Device.GPU:
        findings += _check_gpus(env, host, per_node, count)
    return Topology(nnodes, rank, per_node, addr, port, source, device, tuple(findings))


def preflight_port(master_port: int) -> int:
    """The bandwidth preflight's rendezvous port: the one next to MASTER_PORT (below it when that is 65535)."""
    return master_port + 1 if master_port < 65535 else master_port - 1


@dataclass(frozen=True)
class MasterWait:
    """A worker node's wait for node 0 before its first torchrun: `addr` (set by `variable`) must resolve within
    `resolve_timeout_s` and `port` accept a TCP connection within `timeout_s`, both counted from the wait's start."""

    variable: str
    addr: str
    port: int
    timeout_s: int
    resolve_timeout_s: int

    def to_json(self) -> dict[str, object]:
        return {
            "variable": self.variable,
            "addr": self.addr,
            "port": self.port,
            "timeout_s": self.timeout_s,
            "resolve_timeout_s": self.resolve_timeout_s,
        }


def master_wait(topology: Topology, timeout_s: int, preflight_first: bool) -> MasterWait | None:
    """What this node waits for before its first torchrun: nothing on a single node, on node 0 (its own torchrun
    opens the port) or with `timeout_s` 0; else node 0's rendezvous port, the preflight's when a preflight runs
    first (training's port then opens while every node is past the preflight, and torchrun waits for it)."""
    if topology.nnodes == 1 or topology.node_rank == 0 or timeout_s == 0:
        return None
    variable = "PET_MASTER_ADDR" if topology.source is TopologySource.TORCHRUN else "MASTER_ADDR"
    port = preflight_port(topology.master_port) if preflight_first else topology.master_port
    return MasterWait(variable, topology.master_addr, port, timeout_s, min(RESOLVE_BOUND_S, timeout_s))
