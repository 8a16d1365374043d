"""What the machine's fabric is, read through `Host` only: RDMA devices and ports (state, link layer, rate, GIDs
with types and netdevs, uverbs nodes), network interfaces and routes, GPUDirect RDMA, the memlock limit, NCCL's
net plugin, config files and version. No `ibv_devinfo`, no root-only tools, no torch import; garbage in a file
reads as absent. `decide.py` makes the decisions from this inventory.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from entrypoint.core.host import Host
from entrypoint.core.numbers import INT64_MAX, whole_number

IB_SYSFS = "/sys/class/infiniband"
NET_SYSFS = "/sys/class/net"
ROUTES = "/proc/net/route"
ETC_NCCL_CONF = "/etc/nccl.conf"
PEERMEM_FILES = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
)
TCCL_DIRS = ("/opt/tencent/tccl/lib", "/opt/tencent/tccl/lib64", "/opt/tencent/tccl")
DEFAULT_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
SOCKET_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")

VERSION_PART_MAX = 9999  # NCCL's major, minor and patch numbers are small: more is not a version
ENVIRONMENT = "environment"  # `Preset.source` of a value set in the environment
ROCE_V2 = "RoCE v2"  # the GID type sysfs names for routable RoCE
_IFF_UP, _IFF_RUNNING = 0x1, 0x40
_CAP_IPC_LOCK = 14
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


class Transport(StrEnum):
    """The network NCCL uses between nodes: none (`local`, one node), InfiniBand, RoCE or TCP sockets."""

    LOCAL = "local"
    IB = "ib"
    ROCE = "roce"
    SOCKET = "socket"

    @property
    def label(self) -> str:
        """How messages name it."""
        return {Transport.IB: "IB", Transport.ROCE: "RoCE"}.get(self, self.value)


class PortState(IntEnum):
    """An RDMA port's logical state, as the number before the colon of sysfs `state` (`4: ACTIVE`)."""

    DOWN = 1
    INIT = 2
    ARMED = 3
    ACTIVE = 4
    ACTIVE_DEFER = 5


class Gdr(StrEnum):
    """GPUDirect RDMA: a peer-memory module is loaded, DMA-BUF is possible (NCCL confirms it), or neither."""

    PEERMEM = "peermem"
    DMABUF_POSSIBLE = "dmabuf-possible"
    NONE = "none"


class MemlockVerdict(StrEnum):
    """What the locked-memory limit means for RDMA registration."""

    LIMITED = "limited"  # a finite hard limit and no CAP_IPC_LOCK: registration can fail
    CAP_IPC_LOCK = "cap-ipc-lock"  # the capability lifts the limit
    RAISED = "raised"  # the soft limit is below an unlimited hard one; launch raises it
    UNLIMITED = "unlimited"
    UNKNOWN = "unknown"  # /proc/self/limits did not say


# -- inventory ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gid:
    """One populated GID slot of an RDMA port. `type`/`netdev` are None when sysfs would not say."""

    index: int
    address: ipaddress.IPv6Address
    type: str | None
    netdev: str | None

    def routable(self, family: str) -> bool:
        """A RoCE v2, non-link-local GID of NCCL's address family (`AF_INET` by default: IPv4-mapped)."""
        if self.type != ROCE_V2 or self.address.is_link_local:
            return False
        return (self.address.ipv4_mapped is not None) == (family != "AF_INET6")


@dataclass(frozen=True)
class RdmaPort:
    """A port of an RDMA device as `/sys/class/infiniband/<device>/ports/<port>` shows it."""

    device: str
    port: int
    state: PortState | None  # None when unreadable or not a known state
    link_layer: str | None  # "InfiniBand" | "Ethernet" | other
    rate_gbps: float | None
    gids: tuple[Gid, ...]
    netdevs: tuple[str, ...]  # from the GID table and device/net/, plus the masters of those
    uverbs: bool  # /dev/infiniband/uverbsN for this device exists

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def sysfs(self) -> str:
        return f"{IB_SYSFS}/{self.device}/ports/{self.port}"

    @property
    def kind(self) -> Transport | None:
        """The transport NCCL runs over this port (`ib` or `roce`), or None for a link layer NCCL does not use."""
        return {"InfiniBand": Transport.IB, "Ethernet": Transport.ROCE}.get(self.link_layer or "")

    @property
    def active(self) -> bool:
        return self.state is PortState.ACTIVE

    @property
    def state_name(self) -> str:
        return self.state.name if self.state is not None else "unreadable"


@dataclass(frozen=True)
class Interface:
    """A network interface in this namespace. RUNNING is what NCCL requires of a socket interface."""

    name: str
    flags: int | None
    operstate: str | None
    master: str | None  # bond or bridge this interface is enslaved to ("?" when unknown)

    @property
    def running(self) -> bool:
        """IFF_RUNNING as getifaddrs reports it: sysfs `flags` holds only IFF_UP, the kernel adds RUNNING when
        the interface is up and its operstate is up or unknown (loopback, many virtual NICs)."""
        if self.flags is None:
            return False
        if self.flags & _IFF_RUNNING:
            return True
        return bool(self.flags & _IFF_UP) and self.operstate in ("up", "unknown")


@dataclass(frozen=True)
class Route:
    """An up IPv4 route of `/proc/net/route`: the interface, the destination network and the metric."""

    iface: str
    network: ipaddress.IPv4Network
    metric: int


@dataclass(frozen=True)
class Memlock:
    """`Max locked memory` in bytes (`math.inf` = unlimited, None = unknown) and CAP_IPC_LOCK (None = unknown)."""

    soft: float | None
    hard: float | None
    cap_ipc_lock: bool | None

    def to_json(self) -> dict[str, object]:
        def show(value: float | None) -> object:
            return "unlimited" if value == math.inf else (int(value) if value is not None else None)

        return {"soft": show(self.soft), "hard": show(self.hard), "cap_ipc_lock": self.cap_ipc_lock}

    @property
    def verdict(self) -> MemlockVerdict:
        if self.hard is not None and self.hard != math.inf and not self.cap_ipc_lock:
            return MemlockVerdict.LIMITED
        if self.soft is None:
            return MemlockVerdict.UNKNOWN
        if self.cap_ipc_lock:
            return MemlockVerdict.CAP_IPC_LOCK
        return MemlockVerdict.RAISED if self.soft != self.hard else MemlockVerdict.UNLIMITED


@dataclass(frozen=True)
class Preset:
    """A value the platform set: `source` is `ENVIRONMENT` or the NCCL config file it came from."""

    value: str
    source: str


@dataclass(frozen=True)
class Inventory:
    """Everything `plan_fabric` decides from; `inspect_fabric` builds it."""

    ports: tuple[RdmaPort, ...]
    rdma_devices: tuple[str, ...]
    interfaces: Mapping[str, Interface]
    routes: tuple[Route, ...]
    gdr: Gdr
    gdr_source: str | None
    memlock: Memlock
    net_plugin: str | None
    tccl_off_path: str | None  # a TCCL plugin that exists but is not on the library path
    nccl_version: str | None
    presets: Mapping[str, Preset]


def parse_int(text: str | None, maximum: int = INT64_MAX, base: int = 10) -> int | None:
    """A number in a system file or variable (`core.numbers.whole_number`; C's `0x` allowed in base 16)."""
    if text is not None and base == 16:
        text = text.strip().removeprefix("0x").removeprefix("0X")
    return whole_number(text, maximum, base=base)


def _port_state(text: str | None) -> PortState | None:
    """`4: ACTIVE` -> ACTIVE; None for anything else."""
    number = parse_int((text or "").split(":")[0].strip() or None)
    try:
        return PortState(number) if number is not None else None
    except ValueError:
        return None


def _read_gids(host: Host, port_dir: str) -> tuple[Gid, ...]:
    gids = []
    for entry in host.listdir(f"{port_dir}/gids"):
        index = parse_int(entry)
        raw = host.read(f"{port_dir}/gids/{entry}")
        if index is None or raw is None:
            continue
        try:
            address = ipaddress.IPv6Address(raw)
        except ValueError:
            continue
        if address.packed == bytes(16):
            continue
        gids.append(
            Gid(
                index,
                address,
                host.read(f"{port_dir}/gid_attrs/types/{entry}"),
                host.read(f"{port_dir}/gid_attrs/ndevs/{entry}") or None,
            )
        )
    return tuple(sorted(gids, key=lambda g: g.index))


def _uverbs_devices(host: Host) -> set[str]:
    """RDMA devices whose `/dev/infiniband/uverbsN` node exists (mapped through /sys/class/infiniband_verbs)."""
    present = set()
    for node in host.listdir("/sys/class/infiniband_verbs"):
        device = host.read(f"/sys/class/infiniband_verbs/{node}/ibdev")
        if device and host.exists(f"/dev/infiniband/{node}"):
            present.add(device)
    return present


def read_interfaces(host: Host) -> dict[str, Interface]:
    """Interfaces of `/sys/class/net`, with bond (`bonding/slaves`) and bridge (`brif/`) membership."""
    names = host.listdir(NET_SYSFS)
    masters: dict[str, str] = {}
    for name in names:
        for slave in (host.read(f"{NET_SYSFS}/{name}/bonding/slaves") or "").split():
            masters[slave] = name
        for slave in host.listdir(f"{NET_SYSFS}/{name}/brif"):
            masters[slave] = name
    interfaces = {}
    for name in names:
        master = masters.get(name) or ("?" if host.exists(f"{NET_SYSFS}/{name}/master") else None)
        interfaces[name] = Interface(
            name,
            parse_int(host.read(f"{NET_SYSFS}/{name}/flags"), base=16),
            host.read(f"{NET_SYSFS}/{name}/operstate"),
            master,
        )
    return interfaces


def read_ports(host: Host, interfaces: Mapping[str, Interface]) -> tuple[RdmaPort, ...]:
    """Every port of every device under /sys/class/infiniband; unreadable values become None, never errors."""
    with_uverbs = _uverbs_devices(host)
    ports = []
    for device in host.listdir(IB_SYSFS):
        slaves = host.listdir(f"{IB_SYSFS}/{device}/device/net")
        for entry in host.listdir(f"{IB_SYSFS}/{device}/ports"):
            number = parse_int(entry)
            if number is None:
                continue
            port_dir = f"{IB_SYSFS}/{device}/ports/{entry}"
            state = _port_state(host.read(f"{port_dir}/state"))
            rate = _RATE.match(host.read(f"{port_dir}/rate") or "")
            gids = _read_gids(host, port_dir)
            netdevs = {g.netdev for g in gids if g.netdev} | set(slaves)
            masters = {interfaces[n].master for n in netdevs if n in interfaces}
            netdevs |= {m for m in masters if m and m != "?"}
            ports.append(
                RdmaPort(
                    device,
                    number,
                    state,
                    host.read(f"{port_dir}/link_layer"),
                    float(rate.group(1)) if rate else None,
                    gids,
                    tuple(sorted(netdevs)),
                    device in with_uverbs,
                )
            )
    return tuple(ports)


def _le_ipv4(hex_text: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(bytes.fromhex(hex_text.rjust(8, "0"))[::-1])


def read_routes(host: Host) -> tuple[Route, ...]:
    """Up routes of `/proc/net/route` (hex fields are little-endian); malformed lines are skipped."""
    routes = []
    for line in (host.read(ROUTES) or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        flags, metric = parse_int(fields[3], base=16), parse_int(fields[6])
        try:
            network = ipaddress.IPv4Network(f"{_le_ipv4(fields[1])}/{_le_ipv4(fields[7])}")
        except ValueError:
            continue
        if flags is not None and metric is not None and flags & 0x1:
            routes.append(Route(fields[0], network, metric))
    return tuple(routes)


def read_gdr(host: Host) -> tuple[Gdr, str | None]:
    """GPUDirect RDMA: `peermem` (a peer-memory module NCCL checks for), `dmabuf-possible` (open NVIDIA kernel
    module on kernel >= 5.12; only NCCL can confirm it), or `none`; plus the file that said so."""
    for path in PEERMEM_FILES:
        if host.exists(path):
            return Gdr.PEERMEM, path
    driver = host.read("/proc/driver/nvidia/version") or ""
    kernel = re.match(r"^(\d+)\.(\d+)", host.read("/proc/sys/kernel/osrelease") or "")
    release = (parse_int(kernel.group(1)) or 0, parse_int(kernel.group(2)) or 0) if kernel else (0, 0)
    if "Open Kernel Module" in driver and release >= (5, 12):
        return Gdr.DMABUF_POSSIBLE, "/proc/driver/nvidia/version"
    return Gdr.NONE, None


def read_memlock(host: Host) -> Memlock:
    """The locked-memory limit of this process (`/proc/self/limits`) and CAP_IPC_LOCK (`/proc/self/status`)."""
    soft = hard = None
    for line in (host.read("/proc/self/limits") or "").splitlines():
        if line.startswith("Max locked memory"):
            values = line[len("Max locked memory") :].split()
            parsed = [math.inf if v == "unlimited" else parse_int(v) for v in values[:2]]
            if len(parsed) == 2:
                soft, hard = parsed
    cap = None
    for line in (host.read("/proc/self/status") or "").splitlines():
        if line.startswith("CapEff:"):
            mask = parse_int(line.split(":", 1)[1].strip(), base=16)
            cap = None if mask is None else bool(mask >> _CAP_IPC_LOCK & 1)
    return Memlock(soft, hard, cap)


def parse_nccl_conf(text: str) -> dict[str, str]:
    """`NAME=value` lines of an NCCL config file; `#` comments and malformed lines are skipped, first wins."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name.strip() and not name.startswith("#"):
            values.setdefault(name.strip(), value.strip())
    return values


def read_presets(host: Host) -> dict[str, Preset]:
    """Values the platform set for NCCL, Gloo and TensorPipe, with NCCL's precedence: the environment, then
    `$NCCL_CONF_FILE` (else `~/.nccl.conf`), then `/etc/nccl.conf`."""
    presets = {
        name: Preset(value, ENVIRONMENT)
        for name, value in host.env.items()
        if name.startswith("NCCL_") or name in SOCKET_VARS
    }
    user_conf = host.env.get("NCCL_CONF_FILE") or (f"{host.env['HOME']}/.nccl.conf" if host.env.get("HOME") else None)
    for path in [p for p in (user_conf, ETC_NCCL_CONF) if p]:
        for name, value in parse_nccl_conf(host.read(path) or "").items():
            presets.setdefault(name, Preset(value, path))
    return presets


def _library_dirs(host: Host) -> list[str]:
    """Where the dynamic loader looks: LD_LIBRARY_PATH, /etc/ld.so.conf.d/*.conf entries, the default dirs."""
    dirs = [d for d in host.env.get("LD_LIBRARY_PATH", "").split(":") if d.startswith("/")]
    for conf in host.listdir("/etc/ld.so.conf.d"):
        if conf.endswith(".conf"):
            dirs += [
                line.strip()
                for line in (host.read(f"/etc/ld.so.conf.d/{conf}") or "").splitlines()
                if line.strip().startswith("/")
            ]
    return dirs + list(DEFAULT_LIB_DIRS)


def find_net_plugin(host: Host) -> tuple[str | None, str | None]:
    """(plugin NCCL will load, TCCL plugin present but off the library path), as system paths.

    NCCL loads `libnccl-net.so`, or `libnccl-net-<name>.so` / a path given by `NCCL_NET_PLUGIN` (`none`
    disables plugins)."""
    chosen = host.env.get("NCCL_NET_PLUGIN", "").strip()
    if chosen.lower() == "none":
        return None, None
    if "/" in chosen:
        return (chosen if host.exists(chosen) else None), None
    names = [f"libnccl-net-{chosen}.so", chosen] if chosen else ["libnccl-net.so"]
    dirs = _library_dirs(host)
    for directory in dirs:
        for name in names:
            if host.exists(f"{directory}/{name}"):
                return f"{directory}/{name}", None
    for directory in TCCL_DIRS:
        if directory not in dirs and host.exists(f"{directory}/libnccl-net.so"):
            return None, f"{directory}/libnccl-net.so"
    return None, None


def nccl_search_dirs(host: Host) -> list[str]:
    """Where the training's NCCL may live, most likely first: site-packages of the openpi venv, `$VIRTUAL_ENV`,
    `$CONDA_PREFIX` and the system Pythons (torch loads `nvidia/nccl` from there), then the library path."""
    openpi = host.env.get("VLA_OPENPI_DIR", "").rstrip("/")
    prefixes = [
        p
        for p in (
            f"{openpi}/.venv" if openpi else "",
            host.env.get("VIRTUAL_ENV", ""),
            host.env.get("CONDA_PREFIX", ""),
            "/usr/local",
            "/usr",
            "/opt/conda",
        )
        if p
    ]
    dirs = []
    for prefix in prefixes:
        for python in host.listdir(f"{prefix}/lib"):
            if python.startswith("python3"):
                dirs += [f"{prefix}/lib/{python}/site-packages", f"{prefix}/lib/{python}/dist-packages"]
    return [*dirs, "/usr/lib/python3/dist-packages", *_library_dirs(host)]


def nccl_version(host: Host, search_dirs: Iterable[str]) -> str | None:
    """The first NCCL version found in `search_dirs` (system paths, read through `host`), without importing
    torch: a `libnccl.so.X.Y.Z` file, an `nvidia_nccl_cu*-X.Y.Z.dist-info` entry, or the `NCCL_MAJOR/MINOR/
    PATCH` defines of `nccl.h`; a site-packages dir is also searched under `nvidia/nccl/{lib,include}`. A folder
    named twice (the library path often repeats the default folders) is read once."""
    for directory in dict.fromkeys(search_dirs):
        for sub in (directory, f"{directory}/nvidia/nccl/lib", f"{directory}/nvidia/nccl/include"):
            for entry in host.listdir(sub, prefix=("libnccl.so.", "nvidia_nccl_cu")):
                found = re.fullmatch(r"libnccl\.so\.(\d+\.\d+\.\d+)", entry) or re.fullmatch(
                    r"nvidia_nccl_cu\d+-(\d+\.\d+\.\d+)(?:\.post\d+)?\.dist-info", entry
                )
                if found:
                    return found.group(1)
            header = host.read(f"{sub}/nccl.h") or ""
            found_parts = [re.search(rf"#define\s+NCCL_{part}\s+(\d+)", header) for part in ("MAJOR", "MINOR", "PATCH")]
            numbers = [parse_int(p.group(1), VERSION_PART_MAX) if p else None for p in found_parts]
            if all(n is not None for n in numbers):  # a part past VERSION_PART_MAX is no NCCL version
                return ".".join(str(n) for n in numbers)
    return None


def inspect_fabric(host: Host) -> Inventory:
    """Read the fabric-relevant state of `host`; never raises on missing or garbage files."""
    interfaces = read_interfaces(host)
    gdr, gdr_source = read_gdr(host)
    plugin, tccl_off_path = find_net_plugin(host)
    return Inventory(
        ports=read_ports(host, interfaces),
        rdma_devices=tuple(host.listdir(IB_SYSFS)),
        interfaces=interfaces,
        routes=read_routes(host),
        gdr=gdr,
        gdr_source=gdr_source,
        memlock=read_memlock(host),
        net_plugin=plugin,
        tccl_off_path=tccl_off_path,
        nccl_version=nccl_version(host, nccl_search_dirs(host)),
        presets=read_presets(host),
    )
