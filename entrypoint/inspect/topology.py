"""Topology: how many nodes, which one this is, how many processes a node runs, where the master is.

Sources, first match wins: TI-ONE's variables (recognised by `GPU_NUM_PER_NODE`), torchrun-style `PET_*`
variables, else a single machine. TI-ONE's `WORLD_SIZE`/`RANK` count **nodes**, not processes; they are read
here and never reach the training processes as process ranks (see `environment.py`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from entrypoint.core.errors import JobMisspecified, PreflightFailed
from entrypoint.core.findings import Finding, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Text

DEFAULT_MASTER_PORT = 29500
PET_TOPOLOGY_VARS = ("PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


@dataclass(frozen=True)
class Topology:
    """The job's shape as torchrun needs it, plus warnings found while reading it."""

    nnodes: int
    node_rank: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    source: str  # "tione" | "torchrun" | "single"
    device: str  # "gpu" | "cpu"
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
            "source": self.source,
            "device": self.device,
        }


def _bad(name: str, value: str, expected_en: str, expected_zh: str, fix_en: str, fix_zh: str):
    return JobMisspecified(
        "topology.bad-variable",
        name,
        Text(f"{name}={value!r} is not valid: expected {expected_en}", f"{name}={value!r} 无效:应为{expected_zh}"),
        Text(fix_en, fix_zh),
    )


def _integer(env: dict[str, str], name: str, minimum: int, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None:
        if default is None:
            raise JobMisspecified(
                "topology.missing-variable",
                name,
                Text(f"{name} is not set", f"未设置 {name}"),
                Text(
                    f"Set {name} (TI-ONE sets it for DDP jobs), or unset GPU_NUM_PER_NODE to run on one machine.",
                    f"请设置 {name}(TI-ONE 的 DDP 任务会自动注入),或取消 GPU_NUM_PER_NODE 以单机运行。",
                ),
            )
        return default
    text = raw.strip()
    if not re.fullmatch(r"\d+", text) or int(text) < minimum:
        raise _bad(
            name,
            raw,
            f"an integer >= {minimum}",
            f"不小于 {minimum} 的整数",
            f"Set {name} to a whole number >= {minimum}.",
            f"请把 {name} 设为不小于 {minimum} 的整数。",
        )
    return int(text)


def _master(env: dict[str, str], addr_var: str, port_var: str, nnodes: int) -> tuple[str, int]:
    addr = env.get(addr_var, "").strip()
    if not addr:
        if nnodes > 1:
            raise JobMisspecified(
                "topology.missing-variable",
                addr_var,
                Text(f"{addr_var} is not set for a {nnodes}-node job", f"{nnodes} 节点任务未设置 {addr_var}"),
                Text(
                    f"Set {addr_var} to the address of node 0 (TI-ONE sets it in DDP mode).",
                    f"请把 {addr_var} 设为 0 号节点的地址(TI-ONE DDP 模式会自动设置)。",
                ),
            )
        addr = "127.0.0.1"
    if not _is_address(addr):
        raise _bad(
            addr_var,
            addr,
            "an IP address or host name",
            "IP 地址或主机名",
            f"Set {addr_var} to node 0's IP address or host name.",
            f"请把 {addr_var} 设为 0 号节点的 IP 或主机名。",
        )
    if nnodes > 1 and _is_loopback(addr):
        raise JobMisspecified(
            "topology.loopback-master",
            addr_var,
            Text(
                f"{addr_var}={addr} is a loopback address, which other nodes of a {nnodes}-node job cannot reach",
                f"{addr_var}={addr} 是回环地址,{nnodes} 节点任务的其他节点无法访问",
            ),
            Text(f"Set {addr_var} to node 0's network address.", f"请把 {addr_var} 设为 0 号节点的网络地址。"),
        )
    port_raw = env.get(port_var)
    if port_raw is None or not port_raw.strip():
        return addr, DEFAULT_MASTER_PORT
    port = port_raw.strip()
    if not re.fullmatch(r"\d+", port) or not 1 <= int(port) <= 65535:
        raise _bad(
            port_var,
            port_raw,
            "a port number 1-65535",
            "1-65535 之间的端口号",
            f"Set {port_var} to a free TCP port such as 23456.",
            f"请把 {port_var} 设为空闲端口,例如 23456。",
        )
    return addr, int(port)


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


def _visible_devices(env: dict[str, str]) -> int | None:
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


def _node_list(env: dict[str, str], nnodes: int, rank: int, per_node: int, total: int) -> None:
    raw = env.get("NODE_LIST", "").strip()
    if not raw:
        return
    counts: list[int] = []
    for entry in raw.split(","):
        host, sep, gpus = entry.strip().rpartition(":")
        if not sep or not host or not re.fullmatch(r"\d+", gpus.strip()):
            raise _bad(
                "NODE_LIST",
                raw,
                "comma-separated host:gpus entries",
                "以逗号分隔的 host:gpus 条目",
                "Use the NODE_LIST TI-ONE injects (e.g. 10.0.0.1:8,10.0.0.2:8) or unset it.",
                "请使用 TI-ONE 注入的 NODE_LIST(例如 10.0.0.1:8,10.0.0.2:8)或取消该变量。",
            )
        counts.append(int(gpus))
    if len(counts) != nnodes:
        raise _contradiction(
            "NODE_LIST",
            f"NODE_LIST has {len(counts)} entries but WORLD_SIZE={nnodes} nodes",
            f"NODE_LIST 有 {len(counts)} 项,但 WORLD_SIZE={nnodes}",
        )
    if sum(counts) != total:
        raise _contradiction(
            "NODE_LIST",
            f"NODE_LIST sums to {sum(counts)} GPUs but the job has {total}",
            f"NODE_LIST 合计 {sum(counts)} 卡,但任务共 {total} 卡",
        )
    if counts[rank] != per_node:
        raise _contradiction(
            "NODE_LIST",
            f"NODE_LIST gives node {rank} {counts[rank]} GPUs but GPU_NUM_PER_NODE={per_node}",
            f"NODE_LIST 中节点 {rank} 为 {counts[rank]} 卡,但 GPU_NUM_PER_NODE={per_node}",
        )


def _contradiction(where: str, en: str, zh: str):
    return JobMisspecified(
        "topology.contradiction",
        where,
        Text(en, zh),
        Text(
            "TI-ONE sets these together; if you set them by hand, make them agree (or unset the extra one).",
            "这些变量由 TI-ONE 统一设置;若手动设置,请保持一致(或取消多余的变量)。",
        ),
    )


def _from_tione(env: dict[str, str]) -> tuple[int, int, int, str, int]:
    per_node = _integer(env, "GPU_NUM_PER_NODE", 1)
    nnodes = _integer(env, "WORLD_SIZE", 1, default=1)
    rank = _integer(env, "RANK", 0, default=0)
    if rank >= nnodes:
        raise JobMisspecified(
            "topology.rank-out-of-range",
            "RANK",
            Text(
                f"RANK={rank} is out of range: WORLD_SIZE={nnodes} nodes means RANK is 0..{nnodes - 1}",
                f"RANK={rank} 越界:WORLD_SIZE={nnodes} 个节点时 RANK 应为 0..{nnodes - 1}",
            ),
            Text(
                "On TI-ONE, WORLD_SIZE is the number of nodes and RANK this node's index; fix whichever is wrong.",
                "TI-ONE 中 WORLD_SIZE 是节点数,RANK 是本节点序号;请修正错误的一项。",
            ),
        )
    total = nnodes * per_node
    if "GPU_NUM" in env:
        gpu_num = _integer(env, "GPU_NUM", 1)
        if gpu_num != total:
            raise _contradiction(
                "GPU_NUM",
                f"GPU_NUM={gpu_num} but WORLD_SIZE x GPU_NUM_PER_NODE = {nnodes} x {per_node} = {total}",
                f"GPU_NUM={gpu_num},但 WORLD_SIZE x GPU_NUM_PER_NODE = {nnodes} x {per_node} = {total}",
            )
    if "INDEX" in env:
        index = _integer(env, "INDEX", 0)
        if index != rank:
            raise _contradiction("INDEX", f"INDEX={index} but RANK={rank}", f"INDEX={index},但 RANK={rank}")
    _node_list(env, nnodes, rank, per_node, total)
    addr, port = _master(env, "MASTER_ADDR", "MASTER_PORT", nnodes)
    return nnodes, rank, per_node, addr, port


def _from_pet(env: dict[str, str], host: Host, device: str) -> tuple[int, int, int, str, int]:
    raw_nnodes = env.get("PET_NNODES", "1").strip()
    low, _, high = raw_nnodes.partition(":")
    if high and high != low:
        raise _bad(
            "PET_NNODES",
            raw_nnodes,
            "a fixed node count (elastic ranges are not supported)",
            "固定的节点数(不支持弹性范围)",
            "Set PET_NNODES to one number, e.g. 2.",
            "请把 PET_NNODES 设为单个数字,例如 2。",
        )
    nnodes = _integer({"PET_NNODES": low}, "PET_NNODES", 1)
    rank = _integer(env, "PET_NODE_RANK", 0, default=0)
    if rank >= nnodes:
        raise JobMisspecified(
            "topology.rank-out-of-range",
            "PET_NODE_RANK",
            Text(
                f"PET_NODE_RANK={rank} is out of range for PET_NNODES={nnodes}",
                f"PET_NODE_RANK={rank} 超出 PET_NNODES={nnodes} 的范围",
            ),
            Text(f"Set PET_NODE_RANK to 0..{nnodes - 1}.", f"请把 PET_NODE_RANK 设为 0..{nnodes - 1}。"),
        )
    per_raw = env.get("PET_NPROC_PER_NODE", "auto").strip()
    if per_raw in ("auto", "gpu"):
        per_node = _local_gpus(env, host) if device == "gpu" else 1
    elif per_raw == "cpu":
        per_node = 1
    else:
        per_node = _integer(env, "PET_NPROC_PER_NODE", 1)
    addr, port = _master(_pet_master_env(env), "PET_MASTER_ADDR", "PET_MASTER_PORT", nnodes)
    return nnodes, rank, per_node, addr, port


def _pet_master_env(env: dict[str, str]) -> dict[str, str]:
    merged = dict(env)
    for pet, plain in (("PET_MASTER_ADDR", "MASTER_ADDR"), ("PET_MASTER_PORT", "MASTER_PORT")):
        if pet not in merged and plain in env:
            merged[pet] = env[plain]
    return merged


def _local_gpus(env: dict[str, str], host: Host) -> int:
    visible = _visible_devices(env)
    present = host.gpu_count()
    return min(visible, present) if visible is not None else present


def _check_gpus(env: dict[str, str], host: Host, per_node: int, source_var: str) -> list[Finding]:
    findings: list[Finding] = []
    visible = _visible_devices(env)
    if visible is not None and visible < per_node:
        raise JobMisspecified(
            "topology.visible-devices",
            "CUDA_VISIBLE_DEVICES",
            Text(
                f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} exposes {visible} GPU(s) but {source_var}={per_node}",
                f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} 只暴露 {visible} 张卡,但 {source_var}={per_node}",
            ),
            Text(
                "Unset CUDA_VISIBLE_DEVICES (the platform already isolates GPUs) or list as many GPUs as the node runs processes.",
                "请取消 CUDA_VISIBLE_DEVICES(平台已隔离 GPU),或列出与每节点进程数相同数量的 GPU。",
            ),
        )
    if visible is not None and visible > per_node:
        findings.append(
            warned(
                "topology.visible-devices",
                Text(
                    f"CUDA_VISIBLE_DEVICES exposes {visible} GPUs; only the first {per_node} are used",
                    f"CUDA_VISIBLE_DEVICES 暴露 {visible} 张卡,只使用前 {per_node} 张",
                ),
                Text(
                    f"Raise {source_var} to use them all, or unset CUDA_VISIBLE_DEVICES.",
                    f"如需全部使用,请调大 {source_var},或取消 CUDA_VISIBLE_DEVICES。",
                ),
                "CUDA_VISIBLE_DEVICES",
            )
        )
    present = host.gpu_count()
    if present < per_node:
        raise PreflightFailed(
            "topology.gpus-missing",
            f"{host.path('/dev')}/nvidia*",
            Text(
                f"this node has {present} GPU(s) but {source_var}={per_node}",
                f"本节点只有 {present} 张 GPU,但 {source_var}={per_node}",
            ),
            Text(
                "Request whole GPUs matching the job spec, or lower the GPUs per node; for a CPU-only demo set VLA_DEVICE=cpu.",
                "请申请与任务配置一致的整卡,或减少每节点 GPU 数;仅 CPU 演示请设置 VLA_DEVICE=cpu。",
            ),
        )
    return findings


def _pet_overridden(env: dict[str, str], chosen: dict[str, int | str]) -> list[Finding]:
    """PET_* variables left over from an outer launcher: never allowed to override what we chose."""
    stray = [
        f"{name}={env[name]}" for name in PET_TOPOLOGY_VARS if name in env and env[name].strip() != str(chosen[name])
    ]
    if not stray:
        return []
    return [
        warned(
            "topology.pet-ignored",
            Text(
                f"ignored torchrun variables that disagree with TI-ONE's: {', '.join(stray)}",
                f"已忽略与 TI-ONE 变量不一致的 torchrun 变量:{', '.join(stray)}",
            ),
            Text(
                "They are removed from torchrun's environment; unset them in the job to silence this warning.",
                "这些变量不会传给 torchrun;在任务中取消它们即可消除此警告。",
            ),
            ",".join(s.split("=")[0] for s in stray),
        )
    ]


def resolve_topology(host: Host, device: str) -> Topology:
    """Read and validate the topology; raises `UserError` (exit 2 bad values, 3 missing GPUs)."""
    env = dict(host.env)
    findings: list[Finding] = []
    if "GPU_NUM_PER_NODE" in env:
        source = "tione"
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
        count_var = "GPU_NUM_PER_NODE"
    elif any(name in env for name in PET_TOPOLOGY_VARS):
        source = "torchrun"
        nnodes, rank, per_node, addr, port = _from_pet(env, host, device)
        count_var = "PET_NPROC_PER_NODE"
    else:
        if env.get("WORLD_SIZE", "1").strip() not in ("", "1"):
            raise JobMisspecified(
                "topology.ambiguous",
                "WORLD_SIZE",
                Text(
                    f"WORLD_SIZE={env['WORLD_SIZE']!r} is set without GPU_NUM_PER_NODE, so it is unclear whether it counts nodes or processes",
                    f"设置了 WORLD_SIZE={env['WORLD_SIZE']!r} 却没有 GPU_NUM_PER_NODE,无法判断它表示节点数还是进程数",
                ),
                Text(
                    "On TI-ONE use DDP mode (it sets GPU_NUM_PER_NODE); elsewhere use PET_NNODES/PET_NODE_RANK/PET_NPROC_PER_NODE.",
                    "在 TI-ONE 上请使用 DDP 模式(会设置 GPU_NUM_PER_NODE);其他环境请使用 PET_NNODES/PET_NODE_RANK/PET_NPROC_PER_NODE。",
                ),
            )
        source = "single"
        nnodes, rank, addr = 1, 0, "127.0.0.1"
        _, port = _master(env, "MASTER_ADDR", "MASTER_PORT", 1)
        per_node = _local_gpus(env, host) if device == "gpu" else 1
        count_var = "the visible GPU count"
        if device == "gpu" and per_node == 0:
            raise PreflightFailed(
                "topology.no-gpu",
                f"{host.path('/dev')}/nvidia*",
                Text("no GPU is visible on this machine", "本机没有可见的 GPU"),
                Text(
                    "Run on a GPU machine, or set VLA_DEVICE=cpu for a CPU-only demo.",
                    "请在 GPU 机器上运行;仅 CPU 演示请设置 VLA_DEVICE=cpu。",
                ),
            )
    if device == "gpu":
        findings += _check_gpus(env, host, per_node, count_var)
    return Topology(nnodes, rank, per_node, addr, port, source, device, tuple(findings))
