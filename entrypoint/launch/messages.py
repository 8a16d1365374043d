"""Everything `run`, the supervisor, the stall watchdog and the bandwidth preflight say.

Launcher lines start with `vla-entrypoint: ` (`LEAD`) and are printed with `say`. A few lines are read by tests
and log tooling (`PARSED`): they always carry their English line, whatever the language.
"""

from __future__ import annotations

from typing import TextIO

from entrypoint.core.messages import Catalogue, Lang, Text, render

LEAD = "vla-entrypoint: "

MESSAGES = Catalogue(
    "launch",
    {
        # run
        "run-heading": (
            "node {rank} of {nnodes}, {nproc} process(es) per node, {world} in all, topology from {source}",
            "第 {rank} 个节点(共 {nnodes} 个),每节点 {nproc} 个进程,共 {world} 个进程,拓扑来源 {source}",
        ),
        "log-open-failed": (
            "cannot write the node log ({detail}); logging to the console only",
            "无法写入节点日志({detail});仅输出到控制台",
        ),
        "start-command": ("start command: {command}", "启动命令:{command}"),
        "moved-aside": ("moved {old} aside to {new} (kept, not deleted)", "已把 {old} 移到 {new}(保留,未删除)"),
        "patch-failed": (
            "transformers_replace FAILED ({script}); training continues unpatched",
            "transformers_replace 失败({script});训练将在未打补丁的状态下继续",
        ),
        "patch-applied": ("transformers_replace applied", "已应用 transformers_replace"),
        "patch-present": ("transformers_replace already present", "transformers_replace 已存在"),
        "taco-heading": ("TACO acceleration", "TACO 加速"),
        "preflight-heading": ("bandwidth preflight", "带宽预检"),
        "transport-proof": ("{status} {id}: {message}", "{status} {id}:{message}"),
        "training-ended": (
            "training ended with exit code {code}; last step {step}, last loss {loss}, "
            "checkpoints saved this run: {saves}",
            "训练结束,退出码 {code};最后一步 {step},最后损失 {loss},本次保存的检查点:{saves}",
        ),
        "no-saves": ("none", "无"),
        "root-cause": ("root cause: {cause}", "根本原因:{cause}"),
        "stalled-root-cause": ("no progress for {silent}s", "{silent} 秒没有进展"),
        "node-files": ("node log {log}; start-up record {record}", "节点日志 {log};启动记录 {record}"),
        # supervisor
        "signal-received": (
            "received {signal}; forwarding to torchrun, killing everything left after {grace}s",
            "收到 {signal};已转发给 torchrun,{grace} 秒后结束所有剩余进程",
        ),
        "grace-over": (
            "grace period over; killed the training process tree ({count} left)",
            "宽限期已过;已结束训练进程树(剩余 {count} 个)",
        ),
        "leftovers-killed": (
            "killed {count} process(es) torchrun left behind",
            "已结束 torchrun 遗留的 {count} 个进程",
        ),
        "stall": (
            "STALL: no training progress for {silent}s (limit {limit}s). Last output lines:",
            "STALL:训练已 {silent} 秒没有进展(上限 {limit} 秒)。最后几行输出:",
        ),
        "stall-line": ("STALL: {line}", "STALL:{line}"),
        "stall-stack": ("STALL: Python stack of pid {pid}:", "STALL:进程 {pid} 的 Python 调用栈:"),
        "stall-warn-only": (
            "STALL: stall_action=warn: training goes on",
            "STALL:stall_action=warn:训练继续",
        ),
        "stall-ending": (
            "STALL: ending this node with exit code {code} so the platform ends the job",
            "STALL:本节点以退出码 {code} 结束,以便平台结束整个任务",
        ),
        # watchdog diagnosis
        "stall-processes": (
            "{ranks} local rank process(es), {children} child process(es) (data-loader workers):",
            "本地 {ranks} 个 rank 进程,{children} 个子进程(数据加载 worker):",
        ),
        "stall-process": (
            "  pid {pid} {role} state={state} wchan={wchan}  {cmdline}",
            "  进程 {pid} {role} 状态={state} wchan={wchan}  {cmdline}",
        ),
        "stall-where": (
            "in a collective: {collective}; in data loading: {loading}",
            "处于集合通信中:{collective};处于数据加载中:{loading}",
        ),
        "none-seen": ("none seen", "未发现"),
        "stall-gpu": ("GPU (index, utilisation, memory): {gpu}", "GPU(编号、利用率、显存):{gpu}"),
        "stall-no-stacks": (
            "no Python stacks: py-spy is not installed or may not read the processes (needs ptrace permission)",
            "没有 Python 调用栈:未安装 py-spy,或它无权读取这些进程(需要 ptrace 权限)",
        ),
        "nvidia-smi-silent": ("nvidia-smi did not answer within {seconds}s", "nvidia-smi 在 {seconds} 秒内无响应"),
        # preflight
        "preflight-start": (
            "preflight: all-reduce over {world} processes ({nnodes} node(s)), timeout {timeout}s",
            "预检:在 {world} 个进程({nnodes} 个节点)上执行 all-reduce,超时 {timeout} 秒",
        ),
        "preflight-one-process": (
            "one process in the whole job: a single GPU has no peers, so there is no bandwidth to measure",
            "整个任务只有一个进程:单卡没有对端,无需测量带宽",
        ),
        "preflight-failed": (
            "the preflight all-reduce failed (exit {code}); its output ends: {last}",
            "预检 all-reduce 失败(退出码 {code});输出结尾:{last}",
        ),
        "preflight-failed-fix": (
            "Read the output above; the same failure would stop training at its first step.",
            "请查看上方输出;同样的故障会让训练在第一步失败。",
        ),
        "preflight-no-output": ("(nothing)", "(无输出)"),
        "preflight-hang": (
            "the preflight all-reduce did not finish within {timeout}s",
            "预检 all-reduce 在 {timeout} 秒内未完成",
        ),
        "preflight-hang-one-node": (
            "Within one node this points at GPU peer-to-peer transport: try this job with env "
            "{{NCCL_P2P_DISABLE: '1'}} in the job file and report the machine.",
            "单节点内卡住通常是 GPU 点对点传输问题:可在任务文件 env 中设置 NCCL_P2P_DISABLE: '1' 重试,并反馈该机器。",
        ),
        "preflight-hang-nodes": (
            "Across nodes this points at the network: check `vla-entrypoint plan` on every node "
            "(NCCL_SOCKET_IFNAME, RDMA ports) and the security group.",
            "跨节点卡住通常是网络问题:请在各节点执行 `vla-entrypoint plan` 检查 NCCL_SOCKET_IFNAME 与 RDMA 端口,"
            "并检查安全组。",
        ),
        "preflight-cpu": (
            "all-reduce bus bandwidth {busbw:.2f} GB/s at {mib} MiB (no expectation on CPU)",
            "all-reduce 总线带宽 {busbw:.2f} GB/s({mib} MiB,CPU 无期望值)",
        ),
        "preflight-passed": (
            "all-reduce bus bandwidth {busbw:.1f} GB/s >= {minimum:.1f} GB/s",
            "all-reduce 总线带宽 {busbw:.1f} GB/s >= {minimum:.1f} GB/s",
        ),
        "preflight-below": (
            "all-reduce bus bandwidth {busbw:.1f} GB/s is below the minimum {minimum:.1f} GB/s",
            "all-reduce 总线带宽 {busbw:.1f} GB/s 低于最低要求 {minimum:.1f} GB/s",
        ),
        "preflight-below-fix": (
            "Compare `vla-entrypoint plan` (transport, devices) with a healthy node; a socket transport between "
            "nodes means RDMA is not used.",
            "请将 `vla-entrypoint plan` 的传输方式与正常节点对比;节点间为 socket 说明未使用 RDMA。",
        ),
        "preflight-minimum": (
            "minimum for the largest size: {minimum:.1f} GB/s",
            "最大消息的最低要求:{minimum:.1f} GB/s",
        ),
    },
)

# Lines read by tests and log tooling (tests/image/test_faults.py, test_image.py, test_stalls.py): English kept.
PARSED = frozenset(
    {"start-command", "moved-aside", "patch-present", "root-cause", "signal-received", "grace-over", "stall"}
)


def say(out: TextIO, lang: Lang | str, name: str, /, **fields: object) -> None:
    """Print the launcher line `name` with `LEAD`; a `PARSED` line keeps its English line in Chinese mode."""
    text = MESSAGES(name, **fields)
    shown = Lang.BOTH if name in PARSED and lang == Lang.ZH else lang
    out.write(render(text, shown, lead=LEAD) + "\n")


def line(out: TextIO, lang: Lang | str, text: Text) -> None:
    """Print an already built `Text` as a launcher line."""
    out.write(render(text, lang, lead=LEAD) + "\n")
