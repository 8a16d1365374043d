"""Every sentence the fabric package shows: NCCL/Gloo/TensorPipe decisions, their findings and the transport proof."""

from __future__ import annotations

from entrypoint.core.messages import Catalogue

MESSAGES = Catalogue(
    "fabric",
    {
        # -- shared fragments
        "none": ("none", "无"),
        "version-unknown": ("version unknown", "版本未知"),
        "name-reason": ("{name}: {reason}", "{name}:{reason}"),
        "matches": ("matches {names}", "匹配 {names}"),
        "kept": ("kept: set by the platform ({source}); {verdict}", "保留平台设置({source}):{verdict}"),
        # -- the bootstrap interface (MASTER_ADDR)
        "master-addr-resolved": ("MASTER_ADDR {addr} ({addresses})", "MASTER_ADDR {addr}({addresses})"),
        "master-addr-unresolved": ("MASTER_ADDR {addr} (unresolved)", "MASTER_ADDR {addr}(无法解析)"),
        "master-unresolved": (
            "MASTER_ADDR={addr} does not resolve on this node; the bootstrap interface falls back to the default route",
            "本节点无法解析 MASTER_ADDR={addr};引导网卡退回默认路由所在网卡",
        ),
        "master-unresolved-fix": (
            "Use node 0's IP address for MASTER_ADDR, or fix DNS / /etc/hosts in the container.",
            "请把 MASTER_ADDR 设为 0 号节点的 IP,或修复容器内的 DNS / /etc/hosts。",
        ),
        "if-missing": ("not in /sys/class/net", "不在 /sys/class/net 中"),
        "if-not-for-bootstrap": ("loopback or container-bridge interface", "回环网卡或容器网桥网卡"),
        "if-enslaved": ("a slave of {master}", "是 {master} 的从属网卡"),
        "if-not-running": ("not RUNNING", "未处于 RUNNING 状态"),
        "bootstrap-default-route": (
            "{how} is reached by the default route through {iface}",
            "{how} 经由默认路由通过 {iface} 到达",
        ),
        "bootstrap-route": (
            "{how} is reached by route {network} through {iface}",
            "{how} 经由路由 {network} 通过 {iface} 到达",
        ),
        "bootstrap-fallback": (
            "no usable specific route to {how}; the default route goes through {iface}",
            "没有到 {how} 的可用专用路由;默认路由经过 {iface}",
        ),
        "bootstrap-fallback-rejected": (
            "no usable specific route to {how} ({rejected}); the default route goes through {iface}",
            "没有到 {how} 的可用专用路由({rejected});默认路由经过 {iface}",
        ),
        "no-route": ("no route", "没有路由"),
        "bootstrap-if": (
            "no usable network interface reaches {how} ({detail}); NCCL, Gloo and TensorPipe will pick one themselves",
            "没有可到达 {how} 的可用网卡({detail});NCCL、Gloo、TensorPipe 将自行选择",
        ),
        "bootstrap-if-fix": (
            "Check the container's network (ip route); set NCCL_SOCKET_IFNAME=<if> and GLOO_SOCKET_IFNAME=<if> in "
            "the job if you know the right interface.",
            "请检查容器网络(ip route);"
            "若已知正确网卡,请在任务中设置 NCCL_SOCKET_IFNAME=<网卡> 与 GLOO_SOCKET_IFNAME=<网卡>。",
        ),
        "bootstrap-none": ("no usable interface reaches {how}", "没有可到达 {how} 的可用网卡"),
        # -- socket interface variables
        "socket-if-fix": (
            "Unset it to let vla-entrypoint choose, or name a RUNNING interface ({running}).",
            "请取消该变量由 vla-entrypoint 选择,或指定一个 RUNNING 状态的网卡({running})。",
        ),
        "socket-ifname-too-short": (
            "shorter than 2 characters, so NCCL ignores it and picks an interface itself",
            "少于 2 个字符,NCCL 会忽略它并自行选择网卡",
        ),
        "no-running-interface": ("no RUNNING interface", "无 RUNNING 网卡"),
        "preset-socket-ifname": (
            "NCCL_SOCKET_IFNAME={value} ({source}) names no RUNNING interface; NCCL initialisation will fail",
            "NCCL_SOCKET_IFNAME={value}({source})未匹配任何 RUNNING 网卡,NCCL 初始化将失败",
        ),
        "plain-ifname-bad": (
            "names a missing or non-RUNNING interface: {names}",
            "包含不存在或非 RUNNING 的网卡:{names}",
        ),
        "plain-ifname-running": ("RUNNING", "网卡处于 RUNNING 状态"),
        "preset-plain-ifname": (
            "{variable}={value} ({source}) does not name RUNNING interfaces",
            "{variable}={value}({source})不是 RUNNING 网卡名",
        ),
        "preset-plain-ifname-syntax": (
            "{variable}={value} ({source}) does not name RUNNING interfaces (it takes plain names: no ^ or =, unlike "
            "NCCL_SOCKET_IFNAME)",
            "{variable}={value}({source})不是 RUNNING 网卡名"
            "(它只接受纯网卡名,不支持 NCCL_SOCKET_IFNAME 的 ^ 或 = 语法)",
        ),
        "socket-ifname-exact": (
            "{why}; exact-match form, so {ifname} does not also select {ifname}1",
            "{why};使用精确匹配形式,避免 {ifname} 同时匹配 {ifname}1",
        ),
        "socket-ifname-plain": (
            "{why}; plain name: this variable takes no ^ or = syntax",
            "{why};纯网卡名:此变量不支持 ^ 或 = 语法",
        ),
        # -- RDMA port selection
        "port-state": ("{port} ({state})", "{port}({state})"),
        "port-down": ("RDMA port(s) not ACTIVE: {ports}", "RDMA 端口未处于 ACTIVE 状态:{ports}"),
        "port-down-fix": (
            "NCCL skips them, so this node has less bandwidth than its peers; check the link (phys_state) or ask the "
            "platform to replace the node.",
            "NCCL 会跳过这些端口,本节点带宽将低于其他节点;请检查链路(phys_state)或请平台更换节点。",
        ),
        "no-uverbs": (
            "RDMA device(s) {devices} are visible in sysfs but their /dev/infiniband/uverbs* node is missing in this "
            "container, so they cannot be used",
            "sysfs 中可见 RDMA 设备 {devices},但容器内缺少对应的 /dev/infiniband/uverbs* 设备节点,无法使用",
        ),
        "mount-rdma-devices": (
            "Start the container with the RDMA devices (e.g. --device=/dev/infiniband or the platform's RDMA resource "
            "request).",
            "请让容器挂载 RDMA 设备(例如 --device=/dev/infiniband,或在平台上申请 RDMA 资源)。",
        ),
        "no-routable-gid": ("no routable RoCE v2 GID", "没有可路由的 RoCE v2 GID"),
        "roce-no-gid": (
            "RoCE port(s) {ports} have no routable RoCE v2 {family} GID; NCCL would pick a wrong GID and hang or fail "
            "at connection time",
            "RoCE 端口 {ports} 没有可路由的 RoCE v2 {family} GID;NCCL 会选错 GID,连接时挂起或失败",
        ),
        "roce-no-gid-fix": (
            "Give the RoCE netdev an IP address (the kernel then adds the GID), or ask the platform to fix the RDMA "
            "network setup.",
            "请为 RoCE 网卡配置 IP 地址(内核随后会生成 GID),或请平台修复 RDMA 网络配置。",
        ),
        "gid-netdev-elsewhere": (
            "the netdev of its RoCE v2 GID is not in this network namespace",
            "其 RoCE v2 GID 对应的网卡不在本网络命名空间",
        ),
        "gid-netdev-absent": (
            "the RoCE v2 GIDs of {ports} belong to netdevs that are not in this container's network namespace; with "
            "MLNX_OFED drivers connections fail with ENODEV",
            "{ports} 的 RoCE v2 GID 所属网卡不在本容器的网络命名空间;使用 MLNX_OFED 驱动时连接会以 ENODEV 失败",
        ),
        "gid-netdev-absent-fix": (
            "Run with the RDMA netdevs in the container (host network or the platform's RDMA network attachment); if "
            "NCCL fails with ENODEV, this is why.",
            "请让 RDMA 网卡进入容器(主机网络或平台的 RDMA 网络挂载);若 NCCL 报 ENODEV,原因即在此。",
        ),
        "vpc-nic": ("carries the default route ({iface}): the VPC NIC", "承载默认路由({iface}),即 VPC 网卡"),
        "not-mixed": (
            "NCCL does not mix InfiniBand and RoCE; kept the faster {kept} group",
            "NCCL 不能混用 InfiniBand 与 RoCE;保留更快的 {kept} 组",
        ),
        "port-rate": ("{port} ({rate:g} Gb/s)", "{port}({rate:g} Gb/s)"),
        "slow-port": (
            "RDMA port(s) {ports} run below half of the best port's {best:g} Gb/s",
            "RDMA 端口 {ports} 速率不足最快端口 {best:g} Gb/s 的一半",
        ),
        "slow-port-fix": (
            "A slow rail limits every ring that crosses it; check the link speed with the platform.",
            "慢速链路会拖慢经过它的所有通信环;请与平台确认链路速率。",
        ),
        # -- falling back to sockets
        "socket-fallback": (
            "multi-node training will run NCCL over TCP sockets: expect about 1-3 GB/s between nodes, tens of times "
            "slower than RDMA. Likely cause: {cause}",
            "多节点训练将通过 TCP socket 运行 NCCL:节点间带宽约 1-3 GB/s,比 RDMA 慢数十倍。可能原因:{cause}",
        ),
        "cause-no-rdma-device": (
            "no RDMA device is visible (/sys/class/infiniband is empty)",
            "看不到任何 RDMA 设备(/sys/class/infiniband 为空)",
        ),
        "cause-no-rdma-device-fix": (
            "Run every node on an RDMA-capable instance type (e.g. Tencent HCC) with RDMA enabled for the job.",
            "请让每个节点使用支持 RDMA 的机型(例如腾讯云 HCC)并为任务启用 RDMA。",
        ),
        "cause-ports-down": ("every RDMA port is down", "所有 RDMA 端口均未激活"),
        "cause-ports-down-fix": (
            "Ask the platform to check the RDMA links of this node, or move the job to healthy nodes.",
            "请平台检查本节点 RDMA 链路,或把任务调度到正常节点。",
        ),
        "cause-no-uverbs": (
            "the container has no /dev/infiniband/uverbs* device nodes",
            "容器内没有 /dev/infiniband/uverbs* 设备节点",
        ),
        "cause-no-gid": ("no RDMA port has a usable RoCE v2 GID", "没有 RDMA 端口具备可用的 RoCE v2 GID"),
        "cause-no-gid-fix": (
            "Give the RoCE netdevs IP addresses, or ask the platform to fix the RDMA network setup.",
            "请为 RoCE 网卡配置 IP 地址,或请平台修复 RDMA 网络配置。",
        ),
        "rdma-off": ("RDMA is switched off by the platform", "平台关闭了 RDMA"),
        "cause-rdma-off": ("{variable}={value} is set ({source})", "设置了 {variable}={value}({source})"),
        "cause-rdma-off-fix": (
            "Remove {variable} unless sockets are intended.",
            "如非有意使用 socket,请删除 {variable}。",
        ),
        # -- NCCL_IB_HCA and NCCL_IB_DISABLE
        "ib-hca-fix": (
            "Unset NCCL_IB_HCA to let vla-entrypoint choose.",
            "请取消 NCCL_IB_HCA 由 vla-entrypoint 选择。",
        ),
        "ib-hca-fix-suggest": (
            "Unset NCCL_IB_HCA to let vla-entrypoint choose, or set NCCL_IB_HCA={suggestion}.",
            "请取消 NCCL_IB_HCA 由 vla-entrypoint 选择,或设置 NCCL_IB_HCA={suggestion}。",
        ),
        "no-usable-port": ("no usable port", "无可用端口"),
        "ib-hca-preset": ("NCCL_IB_HCA is set by the platform", "平台已设置 NCCL_IB_HCA"),
        "rdma-stays-enabled": ("RDMA stays enabled", "RDMA 保持启用"),
        "preset-ib-hca-none": (
            "NCCL_IB_HCA={value} ({source}) matches no usable RDMA port (usable: {usable}); NCCL silently falls back "
            "to TCP sockets",
            "NCCL_IB_HCA={value}({source})未匹配任何可用 RDMA 端口(可用:{usable});NCCL 会静默退回 TCP socket",
        ),
        "preset-ib-hca-port-range": (
            "NCCL_IB_HCA ({source}) names a port number out of range in {entries}: RDMA ports are numbered 1 to "
            "{limit}, so that entry selects no port",
            "NCCL_IB_HCA({source})中的 {entries} 端口号超出范围:RDMA 端口编号为 1 到 {limit},该项不会选中任何端口",
        ),
        "cause-ib-hca-none": ("NCCL_IB_HCA={value} matches no usable port", "NCCL_IB_HCA={value} 未匹配可用端口"),
        "mixes-ib-and-roce": ("it mixes InfiniBand and RoCE ports", "混用了 InfiniBand 与 RoCE 端口"),
        "preset-ib-hca-unwanted": (
            "NCCL_IB_HCA={value} ({source}) selects ports that should not carry training traffic ({why})",
            "NCCL_IB_HCA={value}({source})选中了不应承载训练流量的端口({why})",
        ),
        "ib-hca-exact": (
            "NCCL would also use ports that must not carry training traffic ({excluded}); exact-match list of the "
            "{count} chosen port(s)",
            "NCCL 本会同时使用不应承载训练流量的端口({excluded});因此以精确匹配形式列出选定的 {count} 个端口",
        ),
        "ib-hca-auto": (
            "NCCL picks exactly the usable ports itself ({ports})",
            "NCCL 会自行选中全部可用端口({ports})",
        ),
        "rdma-usable": ("RDMA is usable", "RDMA 可用"),
        "no-usable-rdma-port": ("no usable RDMA port", "没有可用的 RDMA 端口"),
        "ib-disable-set": (
            "NCCL would try RDMA ports that cannot work ({excluded}) and hang or fail; sockets instead",
            "NCCL 会尝试无法工作的 RDMA 端口({excluded})并挂起或失败;改用 socket",
        ),
        "ib-disable-unneeded": (
            "no RDMA port NCCL could open; it uses sockets by itself",
            "NCCL 无可打开的 RDMA 端口,会自行使用 socket",
        ),
        # -- NCCL_IB_GID_INDEX
        "gid-ignored": ("ignored: not RoCE", "未使用 RoCE,此变量无效"),
        "gid-valid": ("valid on every chosen port", "在所有选定端口上有效"),
        "gid-invalid": ("not a routable RoCE v2 GID on {ports}", "在 {ports} 上不是可路由的 RoCE v2 GID"),
        "gid-better-index": ("set NCCL_IB_GID_INDEX={index}", "设为 NCCL_IB_GID_INDEX={index}"),
        "gid-better-unset": (
            "unset it (NCCL >= 2.21 picks the RoCE v2 GID per port)",
            "取消它(NCCL >= 2.21 会逐端口自动选择 RoCE v2 GID)",
        ),
        "preset-gid-index": (
            "NCCL_IB_GID_INDEX={value} ({source}) is not a routable RoCE v2 GID on {ports}; connections will fail or "
            "hang",
            "NCCL_IB_GID_INDEX={value}({source})在 {ports} 上不是可路由的 RoCE v2 GID;连接将失败或挂起",
        ),
        "preset-gid-index-fix": (
            "The GID table differs from the preset (common in shared-RDMA Kubernetes setups): {better}.",
            "GID 表与预设不符(共享 RDMA 的 Kubernetes 环境常见):请{better}。",
        ),
        "gid-roce-only": ("only RoCE needs a GID index", "只有 RoCE 需要 GID 索引"),
        "gid-roce-only-ib": (
            "only RoCE needs a GID index; InfiniBand ignores it",
            "只有 RoCE 需要 GID 索引;InfiniBand 会忽略它",
        ),
        "gid-set": (
            "GID {index} is a routable RoCE v2 GID on every chosen port",
            "GID {index} 在所有选定端口上都是可路由的 RoCE v2 GID",
        ),
        "gid-set-old-nccl": (
            "GID {index} is a routable RoCE v2 GID on every chosen port (NCCL {version}: before 2.21 the default is "
            "0, a link-local RoCE v1 GID)",
            "GID {index} 在所有选定端口上都是可路由的 RoCE v2 GID"
            "(NCCL {version}:2.21 之前默认为 0,即链路本地 RoCE v1 GID)",
        ),
        "gid-differs": (
            "the routable RoCE v2 GID sits at different indices on the chosen ports; NCCL >= 2.21 picks it per port",
            "可路由的 RoCE v2 GID 在各选定端口上索引不同;NCCL >= 2.21 会逐端口自动选择",
        ),
        "gid-index": (
            "NCCL {version} defaults to GID index 0 (link-local RoCE v1) and no single index is a RoCE v2 GID on "
            "every port",
            "NCCL {version} 默认 GID 索引为 0(链路本地 RoCE v1),且不存在在所有端口上都是 RoCE v2 GID 的统一索引",
        ),
        "gid-index-fix": (
            "Upgrade NCCL to 2.21 or later (automatic GID choice), or make the GID tables uniform.",
            "请把 NCCL 升级到 2.21 或更高版本(自动选择 GID),或统一各端口的 GID 表。",
        ),
        # -- RDMA health
        "rdma-transport": (
            "{transport} on {count} port(s): {ports} (NCCL {version})",
            "使用 {transport},共 {count} 个端口:{ports}(NCCL {version})",
        ),
        "gdr-none": (
            "GPUDirect RDMA is unavailable: NIC traffic is staged through host memory (lower bandwidth, more CPU)",
            "GPUDirect RDMA 不可用:网卡流量需经主机内存中转(带宽更低、CPU 占用更高)",
        ),
        "gdr-none-fix": (
            "Load nvidia-peermem on the host (modprobe nvidia-peermem), or use the open NVIDIA kernel module on "
            "kernel >= 5.12 for DMA-BUF.",
            "请在宿主机加载 nvidia-peermem(modprobe nvidia-peermem),"
            "或在内核 >= 5.12 上使用开源 NVIDIA 内核模块以启用 DMA-BUF。",
        ),
        "gdr-peermem": ("GPUDirect RDMA: peer-memory module loaded", "GPUDirect RDMA:已加载 peer-memory 模块"),
        "gdr-dmabuf": (
            "GPUDirect RDMA: DMA-BUF possible (NCCL confirms it at start)",
            "GPUDirect RDMA:可能支持 DMA-BUF(由 NCCL 启动时确认)",
        ),
        "memlock-limited": (
            "locked memory is limited to {limit} bytes (hard) without CAP_IPC_LOCK; RDMA memory registration can fail "
            "with ENOMEM",
            "锁定内存上限为 {limit} 字节(硬限制)且没有 CAP_IPC_LOCK;RDMA 内存注册可能以 ENOMEM 失败",
        ),
        "memlock-limited-fix": (
            "Run the container with --ulimit memlock=-1 (or grant CAP_IPC_LOCK).",
            "请以 --ulimit memlock=-1 运行容器(或授予 CAP_IPC_LOCK)。",
        ),
        "memlock-cap-ipc-lock": ("locked memory: CAP_IPC_LOCK held", "锁定内存:拥有 CAP_IPC_LOCK"),
        "memlock-raised": (
            "locked memory: soft limit raised to the unlimited hard limit at launch",
            "锁定内存:启动时将软限制提升到无限制的硬限制",
        ),
        "memlock-unlimited": ("locked memory: unlimited", "锁定内存:无限制"),
        "net-plugin": (
            "NCCL net plugin {plugin} will be loaded (logs say NET/IBext or the plugin's name)",
            "将加载 NCCL 网络插件 {plugin}(日志显示 NET/IBext 或插件名)",
        ),
        "tccl-off-path": (
            "TCCL plugin {plugin} exists but is not on the library path, so NCCL uses its built-in IB transport",
            "存在 TCCL 插件 {plugin},但不在库搜索路径中,NCCL 将使用内置 IB 传输",
        ),
        # -- a single node
        "single-node-unused": ("unused on a single node", "单节点不使用"),
        "single-node-unset": (
            "single node: GPUs talk over NVLink/PCIe and shared memory, nothing crosses the network",
            "单节点:GPU 之间通过 NVLink/PCIe 与共享内存通信,不经过网络",
        ),
        "single-node": (
            "single node: NVLink/PCIe and shared memory; no network variables set",
            "单节点:使用 NVLink/PCIe 与共享内存;不设置网络变量",
        ),
        # -- transport proof from NCCL's logs
        "proof-socket": (
            "NCCL ran over TCP sockets on {hosts} although {planned} was planned: expect 1-3 GB/s between nodes "
            "({summary})",
            "节点 {hosts} 上 NCCL 实际使用了 TCP socket,而计划使用 {planned}:节点间带宽约 1-3 GB/s({summary})",
        ),
        "proof-socket-fix": (
            "Look for 'NET/IB' warnings in those nodes' NCCL logs (no device, GID or memlock errors) and compare the "
            "node's `vla-entrypoint check` output with a healthy node's.",
            "请在这些节点的 NCCL 日志中查找 'NET/IB' 警告(无设备、GID 或 memlock 错误),"
            "并将其 `vla-entrypoint check` 输出与正常节点对比。",
        ),
        "proof": ("NCCL transports: {summary}", "NCCL 实际传输方式:{summary}"),
    },
)
