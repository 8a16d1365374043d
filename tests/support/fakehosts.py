"""Fake machines for unit tests: write the `/sys`, `/proc`, `/dev` and `/etc` files an inspector reads.

`FakeHost(root, env)` writes files under `root` (a temp dir); `.host()` returns the `Host` that reads them.
Every builder method returns the `FakeHost`, so a machine reads as one chained expression. Files have the
shape the kernel gives them (checked against a real machine: a running `eth0` shows `flags` `0x1003` and
`operstate` `up`; `/proc/net/route` hex fields are little-endian).

Ready-made machines at the bottom (`hcc_container`, `hcc_host`, `ib_with_roce_storage`, `plain_vm`) are the
layouts the fabric tests use; other tests may start from them and add files.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from entrypoint.core.host import Host

IFF_UP, IFF_BROADCAST, IFF_LOOPBACK, IFF_MASTER, IFF_SLAVE, IFF_MULTICAST = 0x1, 0x2, 0x8, 0x400, 0x800, 0x1000
ETHER_FLAGS = IFF_UP | IFF_BROADCAST | IFF_MULTICAST  # 0x1003, what a configured Ethernet NIC shows


def ipv4_gid(address: str) -> str:
    """The IPv4-mapped GID sysfs shows for `address`: `0000:…:ffff:0a60:531a` for 10.96.83.26."""
    packed = ipaddress.IPv4Address(address).packed
    return "0000:0000:0000:0000:0000:ffff:" + f"{packed[0]:02x}{packed[1]:02x}:{packed[2]:02x}{packed[3]:02x}"


def link_local_gid(seed: int) -> str:
    """A link-local (`fe80:…`) GID, as the RoCE v1/v2 slots 0 and 1 of a port show."""
    return f"fe80:0000:0000:0000:0a5c:2fff:fe{seed % 256:02x}:{seed:04x}"


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def roce_gids(ipv4: str, netdev: str, seed: int = 1) -> dict[int, tuple[str, str | None, str | None]]:
    """The usual RoCE table: 0/1 link-local v1/v2, 2/3 IPv4-mapped v1/v2 (hence index 3), 4 an empty slot."""
    return {
        0: (link_local_gid(seed), "IB/RoCE v1", netdev),
        1: (link_local_gid(seed), "RoCE v2", netdev),
        2: (ipv4_gid(ipv4), "IB/RoCE v1", netdev),
        3: (ipv4_gid(ipv4), "RoCE v2", netdev),
        4: (ZERO_GID, None, None),
    }


def ib_gids(seed: int = 1) -> dict[int, tuple[str, str, str | None]]:
    """An InfiniBand port's table: one subnet-prefix GID, no netdev (IPoIB is separate)."""
    return {0: (link_local_gid(seed), "IB/RoCE v1", None)}


def _le_hex(address: str) -> str:
    return ipaddress.IPv4Address(address).packed[::-1].hex().upper()


class FakeHost:
    """A machine under construction in `root`; `env` is its environment (edit it freely before `host()`)."""

    def __init__(self, root: Path, env: Mapping[str, str] | None = None) -> None:
        self.root = Path(root)
        self.env: dict[str, str] = dict(env or {})
        self._routes: list[str] = []
        self._uverbs = 0
        self._dirs: set[Path] = set()  # created already: file creation dominates test time, skip re-mkdir

    def host(self) -> Host:
        """The read-only `Host` tests hand to inspectors."""
        return Host(env=dict(self.env), root=self.root)

    def with_env(self, **values: str) -> FakeHost:
        self.env.update(values)
        return self

    # -- raw files -------------------------------------------------------------------------------------------
    def file(self, system_path: str, text: str | bytes) -> FakeHost:
        """Write a system file (`/sys/...`); bytes are written as-is, to fake garbage."""
        path = self.root / system_path.lstrip("/")
        self._mkdir(path.parent)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text if text.endswith("\n") or not text else text + "\n")
        return self

    def link(self, system_path: str, target: str) -> FakeHost:
        """A symlink (relative targets as sysfs uses them, e.g. `../bond1`)."""
        path = self.root / system_path.lstrip("/")
        self._mkdir(path.parent)
        os.symlink(target, path)
        return self

    def mkdir(self, system_path: str) -> FakeHost:
        self._mkdir(self.root / system_path.lstrip("/"))
        return self

    def _mkdir(self, path: Path) -> None:
        if path not in self._dirs:
            path.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path)

    # -- network interfaces ----------------------------------------------------------------------------------
    def netif(
        self, name: str, *, up: bool = True, operstate: str = "up", flags: int | None = None, master: str | None = None
    ) -> FakeHost:
        """`/sys/class/net/<name>`: `flags` (hex; IFF_UP but never RUNNING, as sysfs shows it), `operstate`, and
        for a bond slave a `master` link plus the master's `bonding/slaves` entry."""
        base = f"/sys/class/net/{name}"
        value = flags if flags is not None else (ETHER_FLAGS if up else ETHER_FLAGS & ~IFF_UP)
        if master:
            value |= IFF_SLAVE
        self.file(f"{base}/flags", f"0x{value:x}").file(f"{base}/operstate", operstate)
        if master:
            self.link(f"{base}/master", f"../{master}")
            slaves_file = self.root / f"sys/class/net/{master}/bonding/slaves"
            current = slaves_file.read_text().split() if slaves_file.exists() else []
            self.file(f"/sys/class/net/{master}/bonding/slaves", " ".join([*current, name]))
        return self

    def loopback(self) -> FakeHost:
        return self.netif("lo", flags=IFF_UP | IFF_LOOPBACK, operstate="unknown")

    def bond(self, name: str, slaves: Sequence[str], operstate: str = "up") -> FakeHost:
        """A bond master (`bonding/` dir, MASTER flag) with physical slaves."""
        self.netif(name, flags=ETHER_FLAGS | IFF_MASTER, operstate=operstate)
        self.mkdir(f"/sys/class/net/{name}/bonding")
        for slave in slaves:
            self.netif(slave, master=name)
        return self

    # -- routes ----------------------------------------------------------------------------------------------
    def route(self, iface: str, destination: str, gateway: str = "0.0.0.0", metric: int = 0) -> FakeHost:
        """Add a `/proc/net/route` line; `destination` is CIDR (`0.0.0.0/0` for the default route)."""
        net = ipaddress.IPv4Network(destination)
        flags = 0x1 | (0x2 if gateway != "0.0.0.0" else 0)
        self._routes.append(
            "\t".join(
                [
                    iface,
                    _le_hex(str(net.network_address)),
                    _le_hex(gateway),
                    f"{flags:04X}",
                    "0",
                    "0",
                    str(metric),
                    _le_hex(str(net.netmask)),
                    "0",
                    "0",
                    "0",
                ]
            )
        )
        header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"
        return self.file("/proc/net/route", "\n".join([header] + [r + "\t" for r in self._routes]))

    # -- RDMA ------------------------------------------------------------------------------------------------
    def rdma(
        self,
        device: str,
        port: int = 1,
        *,
        link_layer: str = "Ethernet",
        state: str = "4: ACTIVE",
        rate: str = "200 Gb/sec (2X HDR)",
        gids: Mapping[int, tuple[str, str | None, str | None]] | None = None,
        slaves: Sequence[str] = (),
        uverbs: bool = True,
        dev_node: bool = True,
    ) -> FakeHost:
        """`/sys/class/infiniband/<device>/ports/<port>/…` (`state`, `link_layer`, `rate`) with a GID table
        `{index: (gid, type, netdev)}` (type/netdev None: unreadable, as for an empty slot; pass `ZERO_GID`
        for an empty slot), `device/net/<slave>` entries, and a `uverbsN` mapping in
        `/sys/class/infiniband_verbs` plus `/dev/infiniband/uverbsN` (`dev_node`). Files the inspector does
        not read (`phys_state`, `node_type`, …) are left out to keep tests fast; add them with `file()`."""
        base = f"/sys/class/infiniband/{device}"
        pbase = f"{base}/ports/{port}"
        self.file(f"{pbase}/state", state).file(f"{pbase}/link_layer", link_layer).file(f"{pbase}/rate", rate)
        self.mkdir(f"{pbase}/gids")
        for index, (gid, gid_type, netdev) in (gids or {}).items():
            self.file(f"{pbase}/gids/{index}", gid)
            if gid_type is not None:
                self.file(f"{pbase}/gid_attrs/types/{index}", gid_type)
            if netdev is not None:
                self.file(f"{pbase}/gid_attrs/ndevs/{index}", netdev)
        for slave in slaves:
            self.mkdir(f"{base}/device/net/{slave}")
        if uverbs and port == 1:
            name = f"uverbs{self._uverbs}"
            self._uverbs += 1
            self.file(f"/sys/class/infiniband_verbs/{name}/ibdev", device)
            if dev_node:
                self.file(f"/dev/infiniband/{name}", "")
        return self

    # -- process limits, GPUDirect, NCCL files ---------------------------------------------------------------
    def limits(self, memlock_soft: int | None, memlock_hard: int | None, cap_ipc_lock: bool = False) -> FakeHost:
        """`/proc/self/limits` "Max locked memory" (None = unlimited) and `/proc/self/status` CapEff."""

        def show(value: int | None) -> str:
            return "unlimited" if value is None else str(value)

        self.file(
            "/proc/self/limits",
            "\n".join(
                [
                    "Limit                     Soft Limit           Hard Limit           Units     ",
                    "Max open files            1048576              1048576              files     ",
                    f"Max locked memory         {show(memlock_soft):<21}{show(memlock_hard):<21}bytes     ",
                ]
            ),
        )
        cap = 0x00000000A80425FB | ((1 << 14) if cap_ipc_lock else 0)  # docker's default set, ± CAP_IPC_LOCK
        return self.file("/proc/self/status", f"Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t{cap:016x}\n")

    def peermem(self, path: str = "/sys/module/nvidia_peermem/version", version: str = "550.54.15") -> FakeHost:
        return self.file(path, version)

    def nvidia_driver(self, open_module: bool, kernel: str = "5.15.0-105-generic") -> FakeHost:
        """`/proc/driver/nvidia/version` (open or proprietary module) and `/proc/sys/kernel/osrelease`."""
        flavour = "Open Kernel Module for x86_64  550.54.15" if open_module else "Kernel Module  550.54.15"
        self.file("/proc/driver/nvidia/version", f"NVRM version: NVIDIA UNIX {flavour}  Tue Mar  5 22:23:09 UTC 2024")
        return self.file("/proc/sys/kernel/osrelease", kernel)

    def nccl_conf(self, text: str, path: str = "/etc/nccl.conf") -> FakeHost:
        return self.file(path, text)


# -- ready-made machines ---------------------------------------------------------------------------------------


def hcc_container(root: Path, env: Mapping[str, str] | None = None, *, vpc_rdma: bool = True) -> FakeHost:
    """A TI-ONE container on a Tencent HCC node: eth0 (VPC, 10.0.0.0/16, default route) and 8 bonded RoCE NICs
    `mlx5_bond_0..7` (400G; netdevs bond0..7 present in the container, IPv4 RoCE v2 GIDs at index 3), 8 MiB
    soft memlock, nvidia_peermem loaded. With `vpc_rdma` the VPC NIC is itself an RDMA device (`mlx5_0`,
    netdev eth0) that NCCL would use unless told otherwise."""
    fake = FakeHost(root, env).loopback().netif("eth0")
    fake.route("eth0", "0.0.0.0/0", gateway="10.0.0.1").route("eth0", "10.0.0.0/16")
    for n in range(8):
        fake.bond(f"bond{n}", [f"ens{n}f0np0", f"ens{n}f1np1"])
        fake.rdma(
            f"mlx5_bond_{n}",
            rate="400 Gb/sec (4X NDR)",
            slaves=[f"ens{n}f0np0"],
            gids=roce_gids(f"30.14.{n}.21", f"bond{n}", seed=n),
        )
        fake.route(f"bond{n}", f"30.14.{n}.0/24")
    if vpc_rdma:
        fake.rdma("mlx5_0", rate="100 Gb/sec (4X EDR)", gids=roce_gids("10.0.3.7", "eth0", seed=99))
    return fake.limits(8 << 20, None).peermem().nvidia_driver(open_module=False).file("/dev/infiniband/rdma_cm", "")


def hcc_host(root: Path, env: Mapping[str, str] | None = None) -> FakeHost:
    """An HCC node seen from the host network namespace: bond0 is the VPC bond (default route, RDMA device
    `mlx5_bond_8`), bond1..bond8 carry the RoCE rails `mlx5_bond_0..7` (30.14.N.0/24), and node 0's address
    30.14.0.11 is reachable through bond1."""
    fake = FakeHost(root, env).loopback().bond("bond0", ["eth0", "eth1"])
    fake.route("bond0", "0.0.0.0/0", gateway="9.0.0.1").route("bond0", "9.0.0.0/8")
    fake.rdma("mlx5_bond_8", rate="100 Gb/sec (4X EDR)", slaves=["eth0"], gids=roce_gids("9.1.2.3", "bond0", seed=80))
    for n in range(8):
        netdev = f"bond{n + 1}"
        fake.bond(netdev, [f"ens{n}f0np0", f"ens{n}f1np1"])
        fake.rdma(
            f"mlx5_bond_{n}",
            rate="400 Gb/sec (4X NDR)",
            slaves=[f"ens{n}f0np0"],
            gids=roce_gids(f"30.14.{n}.21", netdev, seed=n),
        )
        fake.route(netdev, f"30.14.{n}.0/24")
    return fake.limits(None, None, cap_ipc_lock=True).peermem("/sys/kernel/mm/memory_peers/nv_mem/version")


def ib_with_roce_storage(root: Path, env: Mapping[str, str] | None = None) -> FakeHost:
    """4 InfiniBand compute NICs `mlx5_0..3` (400G NDR, IPoIB ib0..3) plus a 100G RoCE storage NIC `mlx5_4`
    whose netdev `ens9f0` carries the default route."""
    fake = FakeHost(root, env).loopback().netif("ens9f0")
    fake.route("ens9f0", "0.0.0.0/0", gateway="172.16.0.1").route("ens9f0", "172.16.0.0/16")
    for n in range(4):
        fake.netif(f"ib{n}")
        fake.rdma(f"mlx5_{n}", link_layer="InfiniBand", rate="400 Gb/sec (4X NDR)", gids=ib_gids(n), slaves=[f"ib{n}"])
    fake.rdma("mlx5_4", rate="100 Gb/sec (4X EDR)", gids=roce_gids("172.16.5.9", "ens9f0", seed=44), slaves=["ens9f0"])
    return fake.limits(None, None).peermem("/sys/kernel/mm/memory_peers/nv_mem/version")


def plain_vm(root: Path, env: Mapping[str, str] | None = None) -> FakeHost:
    """No RDMA at all: eth0 with the default route, docker0 down, a veth, 64 KiB memlock, proprietary driver."""
    fake = FakeHost(root, env).loopback().netif("eth0").netif("docker0", operstate="down").netif("veth1a2b")
    fake.route("eth0", "0.0.0.0/0", gateway="192.168.1.1").route("eth0", "192.168.1.0/24")
    fake.route("docker0", "172.17.0.0/16")
    return fake.limits(65536, 65536).nvidia_driver(open_module=False)
