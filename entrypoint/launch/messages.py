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
        "training-ended": ("training ended with exit code {code}; {progress}", "训练结束,退出码 {code};{progress}"),
        "no-saves": ("none", "无"),
        "root-cause": ("root cause: {cause}", "根本原因:{cause}"),
        "stalled-root-cause": ("no progress for {silent}s", "{silent} 秒没有进展"),
        "node-files": ("node log {log}; start-up record {record}", "节点日志 {log};启动记录 {record}"),
        "report-waits": (
            "waiting up to {seconds} s for node(s) {nodes} to end before writing the job's report",
            "等待节点 {nodes} 结束(最多 {seconds} 秒)后再写整个任务的报告",
        ),
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
        "stall-setup": (
            "in process-group setup, waiting for every rank to connect: {pids} (a rank never joined: a node lost or "
            "not started?)",
            "处于进程组建立阶段、等待所有 rank 连接:{pids}(有 rank 始终未加入:节点丢失或未启动?)",
        ),
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
        # what this run did: the closing line's progress, and a job already trained to its last save
        "progress-reached-loss": (
            "last step reached {step}, last loss {loss:.4f}; checkpoints saved this run: {saves}",
            "到达的最后一步 {step},最后损失 {loss:.4f};本次保存的检查点:{saves}",
        ),
        "progress-reached-logged": (
            "last step reached {step} (last loss {loss:.4f}, logged at step {logged}); "
            "checkpoints saved this run: {saves}",
            "到达的最后一步 {step}(最后损失 {loss:.4f},记录于第 {logged} 步);本次保存的检查点:{saves}",
        ),
        "progress-reached": (
            "last step reached {step} (no loss logged); checkpoints saved this run: {saves}",
            "到达的最后一步 {step}(未记录损失);本次保存的检查点:{saves}",
        ),
        "progress-none": (
            "no training step was logged and no checkpoint saved this run",
            "本次未记录到训练步,也未保存检查点",
        ),
        "progress-not-seen": (
            "node {rank} does not see training progress (openpi prints it from global rank 0 only); "
            "see node 0's log in {folder}",
            "节点 {rank} 看不到训练进度(openpi 只在全局 rank 0 上输出进度);请查看 {folder} 中节点 0 的日志",
        ),
        "already-finished": (
            "already trained to step {step}; raise num_train_steps or set VLA_OVERWRITE=1 to start again "
            "(torchrun was not started)",
            "已训练到第 {step} 步;如需继续训练请调大 num_train_steps,如需重新开始请设置 VLA_OVERWRITE=1"
            "(未启动 torchrun)",
        ),
        # a restarted worker without global rank 0's resume decision (launch/attempt.py)
        "attempt-no-decision": (
            "restart {restart}, node {node}: no resume decision from global rank 0 within {waited:g} s (looked for "
            "{where}); this node decided from the checkpoint folder itself: {action}. Had node 0 decided otherwise, "
            "the nodes start from different checkpoints: compare resume_decided_by in the nodes' start-up records.",
            "第 {restart} 次重启,第 {node} 个节点:{waited:g} 秒内未收到全局 0 号进程的续训决定(查找位置 {where});"
            "本节点自行根据检查点目录决定:{action}。若 0 号节点的决定不同,各节点将从不同的检查点开始:"
            "请对比各节点启动记录中的 resume_decided_by。",
        ),
        # a worker node's wait for node 0 (launch/rendezvous_wait.py)
        "master-heading": (
            "node {rank} waiting for node 0 ({variable}={addr}, port {port})",
            "第 {rank} 个节点等待 0 号节点({variable}={addr},端口 {port})",
        ),
        "master-resolving": (
            "waiting for {variable} {addr} to resolve ({waited} s of {bound} s): {error}",
            "等待 {variable} {addr} 可解析(已等 {waited} 秒,最多 {bound} 秒):{error}",
        ),
        "master-connecting": (
            "waiting for node 0 at {addr}:{port} ({addresses}) to accept connections ({waited} s of {bound} s): "
            "{error}",
            "等待 0 号节点 {addr}:{port}({addresses})接受连接(已等 {waited} 秒,最多 {bound} 秒):{error}",
        ),
        "master-no-answer": ("no answer from the resolver within {limit} s", "解析器在 {limit} 秒内没有应答"),
        "master-no-address": ("the name resolves to no address", "该名称没有解析到任何地址"),
        "master-reached": (
            "node 0 at {addr}:{port} accepts connections after {waited} s",
            "0 号节点 {addr}:{port} 已可连接(等待了 {waited} 秒)",
        ),
        "master-unresolved": (
            "{variable}={addr} did not resolve within {waited} s ({error}); torchrun was not started on this node",
            "{variable}={addr} 在 {waited} 秒内仍无法解析({error});本节点未启动 torchrun",
        ),
        "master-unresolved-fix": (
            "On TI-ONE the platform sets {variable} to instance 0 of the job: check the job's instance count and "
            "that instance 0 started (its log). With another launcher set {variable} to node 0's IP address or a "
            "name this container resolves; a name is retried for {bound} s.",
            "在 TI-ONE 上 {variable} 由平台设为任务的 0 号实例:请检查任务的实例数量,并确认 0 号实例已启动"
            "(查看其日志)。使用其他启动方式时,请把 {variable} 设为 0 号节点的 IP 地址或本容器可解析的名称;"
            "名称最多重试 {bound} 秒。",
        ),
        "master-unreachable": (
            "node 0 at {addr}:{port} ({addresses}) did not accept connections within {waited} s (last attempt: "
            "{error}); torchrun was not started on this node",
            "0 号节点 {addr}:{port}({addresses})在 {waited} 秒内未接受连接(最后一次:{error});本节点未启动 torchrun",
        ),
        "master-unreachable-fix": (
            "Node 0 opens port {port} when its torchrun starts: read node 0's log (did it start, did its checks "
            "fail?), check the job's instance count (on TI-ONE node 0 is instance 0) and that port {port} is open "
            "between the instances. If node 0 may start more than {bound} s after this node, raise {setting}.",
            "0 号节点在其 torchrun 启动时才打开端口 {port}:请查看 0 号节点的日志(是否已启动?检查是否失败?),"
            "核对任务的实例数量(TI-ONE 上 0 号节点即 0 号实例),并确认实例之间端口 {port} 可访问。"
            "若 0 号节点可能比本节点晚 {bound} 秒以上启动,请调大 {setting}。",
        ),
        # in-job restarts (restarts.py, supervisor.py)
        "restart": (
            "RESTART {n}/{max}: the workers ended ({cause}); torchrun restarted them on this node {delay} s "
            "after that was seen, resuming {resume}",
            "重启 {n}/{max}:worker 已结束({cause});发现后 {delay} 秒 torchrun 在本节点重启了 worker,{resume}",
        ),
        "restart-resume-step": ("from step {step}", "从第 {step} 步续训"),
        "restart-resume-fresh": (
            "from the start (no complete checkpoint yet)",
            "从头开始(尚无完整检查点)",
        ),
        "stall-restarting": (
            "restarts left: {left}: this node's workers are ended (torchrun stays) so that every node restarts "
            "them from the newest complete checkpoint",
            "剩余重启次数:{left}:结束本节点的 worker(保留 torchrun),使各节点从最新的完整检查点重启 worker",
        ),
        "stall-restart-missing": (
            "STALL: torchrun started no new attempt within {seconds}s after this node's workers were ended",
            "STALL:结束本节点 worker 后 {seconds} 秒内 torchrun 没有启动新的尝试",
        ),
        "stall-requested": (
            "STALL: node 0 found no training progress and asks every node for its diagnosis; this node's follows",
            "STALL:0 号节点发现训练没有进展,请各节点提交诊断;以下是本节点的诊断",
        ),
        "stall-shared": (
            "STALL: this node's diagnosis is in {path} for node 0",
            "STALL:本节点的诊断已写入 {path},供 0 号节点读取",
        ),
        "stall-not-shared": (
            "STALL: this node's diagnosis could not be written to the log folder {folder}; node 0 will name this "
            "node as silent. Check that the folder is shared and writable.",
            "STALL:无法把本节点的诊断写入日志目录 {folder};0 号节点会把本节点列为未提交。请检查该目录已共享且可写。",
        ),
        "restart-budget-spent": (
            "DO NOT REQUEUE: all {restarts} in-job restarts are spent and training failed again; exit {code}. "
            "Read the attempts in the start-up record and fix the cause before starting the job again.",
            "请勿重新排队:{restarts} 次任务内重启已用完,训练再次失败;退出码 {code}。"
            "请查看启动记录中的各次尝试,排除原因后再重新提交任务。",
        ),
        "restart-same-exception": (
            "DO NOT REQUEUE: attempts {a} and {b} ended with the same exception in the trainer: {detail}; a restart "
            "would fail the same way; exit {code}. Fix the trainer or its settings.",
            "请勿重新排队:第 {a} 次与第 {b} 次尝试因训练代码中相同的异常结束:{detail};重启只会同样失败;"
            "退出码 {code}。请修正训练代码或其设置。",
        ),
        "job-ended-waiting": (
            "JOB ENDED by node {node} ({host}) while this node waited for node 0: {cause} — nothing started here; this"
            " node exits with the same exit code {code}",
            "任务已由节点 {node}({host})在本节点等待 0 号节点时结束:{cause} — 本节点尚未启动任何进程,"
            "以相同退出码 {code} 退出",
        ),
        "job-ended-by": (
            "JOB ENDED by node {node} ({host}): {cause} — this node ends its torchrun and workers too, with the same "
            "exit code {code}",
            "任务已由节点 {node}({host})结束:{cause} — 本节点也结束其 torchrun 与 worker,退出码同为 {code}",
        ),
        "workers-ended": (
            "the launcher ends this node's workers ({signal}) so that torchrun restarts them; torchrun reports them "
            "below as `exitcode: {code}`: that is this, not a crash",
            "启动器结束本节点的 worker({signal}),以便 torchrun 重启它们;torchrun 在下方报告的 `exitcode: {code}` "
            "即由此而来,并非崩溃",
        ),
        "presence-unshared": (
            "node(s) {nodes} joined training but never left a beat in {folder}: the log folder is not shared between "
            "the nodes (a local disk?), so in-job restarts, the stall diagnosis and a lost node's naming cannot work; "
            "put VLA_ASSETS_ROOT (and the log folder) on the CFS every node mounts",
            "节点 {nodes} 已加入训练,但从未在 {folder} 留下心跳:日志目录未在节点间共享(本地磁盘?),任务内重启、"
            "卡住诊断和丢失节点的识别都无法工作;请把 VLA_ASSETS_ROOT(及日志目录)放在所有节点都挂载的 CFS 上",
        ),
        "restart-peer-ahead": (
            "node {node} started attempt {attempt} while this node's workers ran on",
            "节点 {node} 已开始第 {attempt} 次尝试,而本节点的 worker 仍在运行",
        ),
        "end-training-failed": (
            "node {node} ({host}): training ended with exit code {code}: {cause}",
            "节点 {node}({host}):训练以退出码 {code} 结束:{cause}",
        ),
        "end-other": (
            "node {node} ({host}) ended the job ({outcome}, exit code {code}): read its log for the cause",
            "节点 {node}({host})结束了任务({outcome},退出码 {code}):原因请查看其日志",
        ),
        "restart-no-progress": (
            "DO NOT REQUEUE: attempt {n} ended at step {step} without getting past step {best} or saving a new "
            "checkpoint; restarting makes no progress; exit {code}. Read the attempts in the start-up record.",
            "请勿重新排队:第 {n} 次尝试结束于第 {step} 步,未超过第 {best} 步,也未保存新的检查点;重启没有进展;"
            "退出码 {code}。请查看启动记录中的各次尝试。",
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
