"""Everything the node health gate says, in English and Chinese."""

from __future__ import annotations

from entrypoint.core.messages import Catalogue

MESSAGES = Catalogue(
    "health",
    {
        # what the gate will run (plan, check)
        "gate-off": ("node health gate off (VLA_HEALTH=off)", "节点健康检查已关闭(VLA_HEALTH=off)"),
        "gate-cpu": (
            "node health gate skipped: no GPU here (VLA_DEVICE=cpu)",
            "跳过节点健康检查:此处没有 GPU(VLA_DEVICE=cpu)",
        ),
        "gate-dev-machine": (
            "node health gate: run by each node when the job starts, not here",
            "节点健康检查:由各节点在任务启动时执行,此处不执行",
        ),
        "gate-on": (
            "node health gate (VLA_HEALTH={mode}): passive checks of the {gpus} GPU(s) given to this node (count, "
            "foreign processes and memory, uncorrected ECC, row remapping, recovery action, clock throttling, Xid) "
            "and of its RDMA ports, before the first torchrun and before every in-job restart; GPU measurements "
            "(bf16 matmul, host-to-device and device copy bandwidth{allreduce}) on the first start and on a restart "
            "after a fault blamed on this node; {policy}",
            "节点健康检查(VLA_HEALTH={mode}):在第一次启动 torchrun 前及每次任务内重启前,被动检查分配给本节点的 "
            "{gpus} 张 GPU(数量、其他进程及显存占用、不可纠正 ECC、行重映射、恢复操作、时钟降频、Xid)及其 RDMA "
            "端口;首次启动时以及因本节点故障而重启时,测量 GPU(bf16 矩阵乘、主机到设备与设备内拷贝带宽{allreduce});"
            "{policy}",
        ),
        "gate-allreduce": (", intra-node all-reduce", "、节点内 all-reduce"),
        "policy-warn": (
            "a hard fault fails the node (exit 3; 93 on a restart), a slow or throttled GPU warns",
            "硬故障使节点失败(退出码 3;重启时为 93),GPU 偏慢或降频仅告警",
        ),
        "policy-fail": (
            "a hard fault or a slow or throttled GPU fails the node (exit 3; 93 on a restart)",
            "硬故障或 GPU 偏慢、降频都会使节点失败(退出码 3;重启时为 93)",
        ),
        # labels
        "gpu": ("GPU {index} (bus {bus}, serial {serial})", "GPU {index}(总线 {bus},序列号 {serial})"),
        "node": ("node {node} ({host})", "节点 {node}({host})"),
        "unknown": ("unknown", "未知"),
        # the probe
        "probe-unavailable": (
            "{node}: GPU health not checked: neither NVML nor nvidia-smi can be used here ({problems})",
            "{node}:未检查 GPU 健康:此处既不能使用 NVML 也不能使用 nvidia-smi({problems})",
        ),
        "probe-unavailable-fix": (
            "Run the job in an image where NVML works (the NVIDIA container runtime mounts libnvidia-ml and "
            "nvidia-smi when NVIDIA_VISIBLE_DEVICES is set); VLA_HEALTH=off turns the gate off.",
            "请在 NVML 可用的镜像中运行(设置 NVIDIA_VISIBLE_DEVICES 时,NVIDIA 容器运行时会挂载 libnvidia-ml 与 "
            "nvidia-smi);VLA_HEALTH=off 可关闭该检查。",
        ),
        "probe-timed-out": (
            "{node}: the GPU driver did not answer within {seconds} s (an NVML or nvidia-smi call never returned): "
            "a GPU or its driver is stuck",
            "{node}:GPU 驱动在 {seconds} 秒内没有响应(NVML 或 nvidia-smi 调用未返回):某张 GPU 或其驱动已卡死",
        ),
        "probe-failed": (
            "{node}: the GPU health probe failed ({detail}); GPUs not checked",
            "{node}:GPU 健康探测失败({detail});未检查 GPU",
        ),
        "probe-failed-fix": (
            "Run nvidia-smi on the node to see whether the driver answers; VLA_HEALTH=off turns the gate off.",
            "请在节点上运行 nvidia-smi 确认驱动是否响应;VLA_HEALTH=off 可关闭该检查。",
        ),
        # hard faults
        "count": (
            "{node} has {seen} GPU(s) but {stated} are stated (GPU_NUM_PER_NODE); present: {present}",
            "{node} 只有 {seen} 张 GPU,但声明为 {stated} 张(GPU_NUM_PER_NODE);现有:{present}",
        ),
        "count-fix": (
            "A GPU is missing from this machine, or CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES hides it. Resubmit "
            "the job (a new TI-ONE job gets new machines) and report {node} to support.",
            "本机缺少 GPU,或被 CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES 隐藏。请重新提交任务(新的 TI-ONE "
            "任务会分配新机器),并向技术支持报告{node}。",
        ),
        "none-present": ("none", "无"),
        "lost": ("{node}: {gpu} is lost ({error})", "{node}:{gpu} 已丢失({error})"),
        "foreign": (
            "{node}: {gpu} already runs other compute processes: {processes}",
            "{node}:{gpu} 上已有其他计算进程:{processes}",
        ),
        "process": ("PID {pid} ({mib} MiB)", "PID {pid}({mib} MiB)"),
        "memory-in-use": (
            "{node}: {gpu} has {used} MiB of memory in use before training, by no process this container can see",
            "{node}:{gpu} 在训练前已占用 {used} MiB 显存,且本容器看不到占用它的进程",
        ),
        "ecc": (
            "{node}: {gpu} has {count} uncorrected ECC error(s) since the driver loaded",
            "{node}:{gpu} 自驱动加载以来有 {count} 个不可纠正的 ECC 错误",
        ),
        "remap-pending": (
            "{node}: {gpu} has a row remap pending (the GPU needs a reset)",
            "{node}:{gpu} 有待完成的行重映射(GPU 需要重置)",
        ),
        "remap-failure": (
            "{node}: {gpu} failed a row remap (its memory can no longer be repaired)",
            "{node}:{gpu} 行重映射失败(显存已无法修复)",
        ),
        "recovery": (
            "{node}: {gpu}: the driver asks for a recovery action: {action}",
            "{node}:{gpu}:驱动要求执行恢复操作:{action}",
        ),
        "action-1": ("GPU reset", "重置 GPU"),
        "action-2": ("node reboot", "重启节点"),
        "action-3": ("drain peer-to-peer traffic", "排空点对点通信"),
        "action-4": ("drain and reset", "排空并重置"),
        "action-other": ("action {code}", "操作 {code}"),
        "xid": (
            "{node}: {gpu}: fatal Xid {code} in the kernel log {age}: {line}",
            "{node}:{gpu}:内核日志中有致命 Xid {code}({age}):{line}",
        ),
        "xid-age": ("{minutes} min ago", "{minutes} 分钟前"),
        "xid-age-unknown": ("at an unknown time", "时间未知"),
        "fault-fix": (
            "This GPU is faulty; training on it would fail or slow the whole job. Resubmit the job (a new TI-ONE job "
            "gets new machines) and report {node}, GPU serial {serial}, to support.",
            "该 GPU 有故障,在其上训练会失败或拖慢整个任务。请重新提交任务(新的 TI-ONE 任务会分配新机器),并向技术支持"
            "报告{node}、GPU 序列号 {serial}。",
        ),
        "foreign-fix": (
            "Another job or a leftover process shares this GPU. Resubmit the job (a new TI-ONE job gets new machines) "
            "and report {node}, GPU serial {serial}, to support.",
            "另一个任务或残留进程正在共用该 GPU。请重新提交任务(新的 TI-ONE 任务会分配新机器),并向技术支持报告"
            "{node}、GPU 序列号 {serial}。",
        ),
        # performance outliers
        "throttle": ("{node}: {gpu}: clocks held down by {reasons}", "{node}:{gpu}:时钟因{reasons}被压低"),
        "reason-8": ("a hardware slowdown", "硬件降速"),
        "reason-32": ("software thermal slowdown", "软件温控降速"),
        "reason-64": ("hardware thermal slowdown", "硬件温控降速"),
        "reason-128": ("the hardware power brake", "硬件功率制动"),
        "outlier-warn-fix": (
            "Training runs at the pace of the slowest GPU. Check the node's cooling and power (nvidia-smi -q -d "
            "PERFORMANCE); with VLA_HEALTH=fail this fails the node, and a resubmitted job gets new machines.",
            "训练速度取决于最慢的 GPU。请检查节点散热与供电(nvidia-smi -q -d PERFORMANCE);设置 VLA_HEALTH=fail 时"
            "此项会使节点失败,重新提交的任务会分配新机器。",
        ),
        "outlier-fail-fix": (
            "Training would run at the pace of this GPU (VLA_HEALTH=fail). Resubmit the job (a new TI-ONE job gets "
            "new machines) and report {node}, GPU serial {serial}, to support; VLA_HEALTH=warn only warns.",
            "训练速度将受限于该 GPU(VLA_HEALTH=fail)。请重新提交任务(新的 TI-ONE 任务会分配新机器),并向技术支持"
            "报告{node}、GPU 序列号 {serial};VLA_HEALTH=warn 时仅告警。",
        ),
        "gpus-ok": (
            "{node}: {count} GPU(s) pass ({source}, driver {driver}): no other process, no uncorrected ECC error, no "
            "row remap, no recovery action, no throttling",
            "{node}:{count} 张 GPU 通过检查({source},驱动 {driver}):无其他进程、无不可纠正 ECC 错误、无行重映射、"
            "无恢复操作、无降频",
        ),
        "unsupported": (
            "{node}: not reported by this driver, so not checked: {fields}",
            "{node}:该驱动未提供以下信息,因此未检查:{fields}",
        ),
        "xid-clean": (
            "{node}: no fatal Xid in the kernel log (last {hours} h)",
            "{node}:内核日志中没有致命 Xid(最近 {hours} 小时)",
        ),
        "xid-unreadable": (
            "{node}: the kernel log cannot be read here ({problem}): Xid not checked",
            "{node}:此处无法读取内核日志({problem}):未检查 Xid",
        ),
        # RDMA ports
        "port-down": (
            "{node}: RDMA port {port} is {state} while its peers {peers} are ACTIVE",
            "{node}:RDMA 端口 {port} 状态为 {state},而同组端口 {peers} 均为 ACTIVE",
        ),
        "port-slow": (
            "{node}: RDMA port {port} runs at {rate} Gb/s, its peers at {best} Gb/s",
            "{node}:RDMA 端口 {port} 速率为 {rate} Gb/s,同组端口为 {best} Gb/s",
        ),
        "port-fix": (
            "A cable, transceiver or switch port of this machine is at fault. Resubmit the job (a new TI-ONE job gets "
            "new machines) and report {node}, port {port}, to support.",
            "本机的线缆、光模块或交换机端口有故障。请重新提交任务(新的 TI-ONE 任务会分配新机器),并向技术支持报告"
            "{node}、端口 {port}。",
        ),
        "port-slow-fix": (
            "A slower port slows every collective between nodes (a link trained down, a bad cable or transceiver); "
            "with VLA_HEALTH=fail this fails the node, and a resubmitted job gets new machines.",
            "较慢的端口会拖慢节点间的所有集合通信(链路降速、线缆或光模块故障);设置 VLA_HEALTH=fail 时此项会使节点失败,"
            "重新提交的任务会分配新机器。",
        ),
        "allreduce-slow-fix": (
            "A slow intra-node all-reduce (NVLink or PCIe peer-to-peer) slows every training step; with "
            "VLA_HEALTH=fail this fails the node, and a resubmitted job gets new machines.",
            "节点内 all-reduce 偏慢(NVLink 或 PCIe 点对点)会拖慢每一步训练;设置 VLA_HEALTH=fail 时此项会使节点失败,"
            "重新提交的任务会分配新机器。",
        ),
        "node-fail-fix": (
            "Resubmit the job (a new TI-ONE job gets new machines) and report {node} to support; VLA_HEALTH=warn only "
            "warns.",
            "请重新提交任务(新的 TI-ONE 任务会分配新机器),并向技术支持报告{node};VLA_HEALTH=warn 时仅告警。",
        ),
        "ports-ok": (
            "{node}: {count} RDMA port(s) ACTIVE at their peers' rate ({rates} Gb/s)",
            "{node}:{count} 个 RDMA 端口均为 ACTIVE,速率与同组一致({rates} Gb/s)",
        ),
        # the active tier
        "active-ok": (
            "{node}: {count} GPU(s) measured in {seconds} s (torch import {import_s} s): bf16 matmul {tflops} TFLOPS, "
            "host-to-device {h2d} GB/s, device copy {d2d} GB/s{allreduce}; compared with {compared}",
            "{node}:{count} 张 GPU 测量耗时 {seconds} 秒(导入 torch {import_s} 秒):bf16 矩阵乘 {tflops} TFLOPS,"
            "主机到设备 {h2d} GB/s,设备内拷贝 {d2d} GB/s{allreduce};比较对象:{compared}",
        ),
        "active-allreduce": (", all-reduce bus bandwidth {busbw} GB/s", ",all-reduce 总线带宽 {busbw} GB/s"),
        "compared-node": ("this node's GPUs", "本节点的 GPU"),
        "compared-job": ("the GPUs of {nodes} node(s)", "{nodes} 个节点的 GPU"),
        "compared-floor": ("{what} and the {sku} floor", "{what}以及 {sku} 下限"),
        "slow": (
            "{node}: {gpu}: {metric} {value} {unit} is {percent}% below {reference} ({expected} {unit})",
            "{node}:{gpu}:{metric} {value} {unit},比{reference}({expected} {unit})低 {percent}%",
        ),
        "slow-node": (
            "{node}: {metric} {value} {unit} is {percent}% below {reference} ({expected} {unit})",
            "{node}:{metric} {value} {unit},比{reference}({expected} {unit})低 {percent}%",
        ),
        "metric-tflops": ("bf16 matmul", "bf16 矩阵乘"),
        "metric-h2d_gbps": ("host-to-device bandwidth", "主机到设备带宽"),
        "metric-d2d_gbps": ("device copy bandwidth", "设备内拷贝带宽"),
        "metric-allreduce_gbps": ("intra-node all-reduce bus bandwidth", "节点内 all-reduce 总线带宽"),
        "reference-node": ("the node's best GPU", "本节点最快的 GPU"),
        "reference-job": ("the job's median", "整个任务的中位数"),
        "reference-job-nodes": ("the job's median node", "整个任务的中位节点"),
        "reference-floor": ("the {sku} floor", "{sku} 的下限"),
        "active-error": (
            "{node}: {gpu}: the GPU measurement failed: {error}",
            "{node}:{gpu}:GPU 测量失败:{error}",
        ),
        "active-timed-out": (
            "{node}: the GPU measurements did not finish within {seconds} s: a GPU is stuck",
            "{node}:GPU 测量未在 {seconds} 秒内完成:有 GPU 卡死",
        ),
        "active-crashed": (
            "{node}: the GPU measurement process ended with exit code {code}: {last}",
            "{node}:GPU 测量进程以退出码 {code} 结束:{last}",
        ),
        "allreduce-error": (
            "{node}: the intra-node all-reduce failed: {error}",
            "{node}:节点内 all-reduce 失败:{error}",
        ),
        "active-skipped": ("{node}: GPU measurements skipped: {why}", "{node}:跳过 GPU 测量:{why}"),
        "active-skipped-fix": (
            "Use an image whose Python has torch with CUDA (the VLA base has it); VLA_HEALTH=off turns the gate off.",
            "请使用 Python 中装有支持 CUDA 的 torch 的镜像(VLA 基础镜像已包含);VLA_HEALTH=off 可关闭该检查。",
        ),
        "no-torch": ("torch cannot be imported ({error})", "无法导入 torch({error})"),
        "no-cuda": ("torch sees no CUDA device", "torch 看不到 CUDA 设备"),
        "no-python": ("no Python to run the measurements", "没有可运行测量的 Python"),
        "peers-missing": (
            "node(s) {nodes} sent no figures within {seconds} s; the job's median is over the nodes that did",
            "节点 {nodes} 在 {seconds} 秒内未提交测量结果;整个任务的中位数只计入已提交的节点",
        ),
        "peers-missing-fix": (
            "Read those nodes' own logs; their gate may have failed or started late.",
            "请查看这些节点自己的日志;它们的健康检查可能失败或启动较晚。",
        ),
        # run and restarts
        "heading": ("node health", "节点健康检查"),
        "table-heading": (
            "node health, whole job: {nodes} node(s) reported",
            "节点健康,整个任务:{nodes} 个节点已提交",
        ),
        "restart-gate": (
            "RESTART {n}: node health gate before the restart ({tiers}): {verdict}",
            "RESTART {n}:重启前的节点健康检查({tiers}):{verdict}",
        ),
        "tiers-passive": ("passive checks", "被动检查"),
        "tiers-active": (
            "passive checks and GPU measurements, after a fault blamed on this node",
            "被动检查与 GPU 测量,因本节点被判定为故障原因",
        ),
        "verdict-pass": ("PASS", "通过"),
        "verdict-warn": ("WARN", "告警"),
        "restart-fault": (
            "DO NOT REQUEUE: {node} failed the node health gate before restart {n}: {cause}. In-job restarts cannot "
            "help: resubmit the job (a new TI-ONE job gets new machines) and report {node}{serials} to support. Exit "
            "{code}.",
            "请勿重新排队:{node} 在第 {n} 次重启前未通过节点健康检查:{cause}。任务内重启无济于事:请重新提交任务"
            "(新的 TI-ONE 任务会分配新机器),并向技术支持报告{node}{serials}。退出码 {code}。",
        ),
        "restart-serials": (", GPU serial(s) {serials}", ",GPU 序列号 {serials}"),
        "restart-peer-fault": (
            "node health gate: local rank 0 found this node faulty before restart {n}: see its lines above",
            "节点健康检查:本地 rank 0 在第 {n} 次重启前发现本节点有故障:见上方输出",
        ),
        "restart-no-verdict": (
            "node health gate: no verdict from local rank 0 within {seconds} s before restart {n}; training goes on",
            "节点健康检查:第 {n} 次重启前 {seconds} 秒内未收到本地 rank 0 的结论;继续训练",
        ),
    },
)
