"""Everything the event files, the report and the `report` command say, in English and Chinese."""

from __future__ import annotations

from entrypoint.core.messages import Catalogue

MESSAGES = Catalogue(
    "report",
    {
        # event files and GPU samples (launcher lines)
        "events-not-written": (
            "TensorBoard event files cannot be written in {folder} ({error}); training goes on without them. "
            "Make the folder writable, or set VLA_TENSORBOARD_DIR elsewhere ('none' turns them off)",
            "无法在 {folder} 写入 TensorBoard 事件文件({error});训练继续,但没有事件文件。"
            "请确保该目录可写,或把 VLA_TENSORBOARD_DIR 设到别处('none' 关闭事件文件)",
        ),
        "events-stopped": (
            "TensorBoard event files in {folder} stopped ({error}); training goes on. Check the storage (full, "
            "read-only, unmounted)",
            "{folder} 中的 TensorBoard 事件文件已停止写入({error});训练继续。请检查存储(已满、只读、未挂载)",
        ),
        "events-slow": (
            "TensorBoard event files in {folder}: the last events were not written within {seconds}s (slow or "
            "hung storage); the job's exit code is unchanged",
            "{folder} 中的 TensorBoard 事件文件:最后的事件未能在 {seconds} 秒内写完(存储缓慢或无响应);任务退出码不变",
        ),
        "events-dropped": (
            "TensorBoard event files: {count} progress line(s) were left out because writing to {folder} lagged "
            "behind; the node log has them all",
            "TensorBoard 事件文件:由于写入 {folder} 跟不上,{count} 条进度行未写入;节点日志中完整保留",
        ),
        "gpu-samples-none": (
            "no GPU samples in the event files: {reason}",
            "事件文件中没有 GPU 采样:{reason}",
        ),
        "nvml-no-module": (
            "the pynvml module (package nvidia-ml-py) is not installed",
            "未安装 pynvml 模块(nvidia-ml-py 包)",
        ),
        "nvml-init-failed": ("NVML did not start ({error})", "NVML 无法启动({error})"),
        "nvml-no-gpu": ("NVML sees no GPU on this node ({detail})", "NVML 在本节点上看不到 GPU({detail})"),
        "nvml-none-listed": ("0 devices", "0 个设备"),
        "event-checkpoint": ("checkpoint saved at step {step}: {path}", "第 {step} 步的检查点已保存:{path}"),
        "event-restart": (
            "restart {n}: attempt {before} ended ({cause}); the workers were restarted",
            "第 {n} 次重启:第 {before} 次尝试已结束({cause});worker 已重启",
        ),
        "event-end": ("the run ended with exit code {code} ({outcome})", "运行结束,退出码 {code}({outcome})"),
        # the report: reading the files
        "folder-unreadable": (
            "the log folder {folder} cannot be read: {error}",
            "无法读取日志目录 {folder}:{error}",
        ),
        "folder-too-big": (
            "the log folder {folder} holds more than {count} entries: only the first {count} were looked at",
            "日志目录 {folder} 中的条目超过 {count} 个:只查看了前 {count} 个",
        ),
        "what-log": ("node log", "节点日志"),
        "what-record": ("start-up record", "启动记录"),
        "what-stall": ("stall report", "停滞报告"),
        "what-attempts": ("attempts folder", "尝试记录目录"),
        "what-attempt": ("attempt record", "尝试记录"),
        "what-gave-up": ("gave-up note", "放弃记录"),
        "file-refused": ("{what} {path} was not read: {problem}", "{what} {path} 未读取:{problem}"),
        "refused": ("{problem}{detail}", "问题:{problem}{detail}"),
        "refused-too-big": (
            "{size} bytes, more than the {limit} read",
            "{size} 字节,超过读取上限 {limit}",
        ),
        "json-broken": (
            "{what} {path} is not valid JSON ({size} bytes; {error}): truncated or damaged",
            "{what} {path} 不是合法的 JSON({size} 字节;{error}):已截断或损坏",
        ),
        "json-too-deep": ("nested too deeply", "嵌套过深"),
        "file-not-utf8": (
            "{what} {path} is not all UTF-8 (damaged): undecodable bytes are shown as �",
            "{what} {path} 并非全部为 UTF-8(已损坏):无法解码的字节显示为 �",
        ),
        "json-not-object": (
            "{what} {path} holds a JSON {type}, not an object",
            "{what} {path} 中是 JSON {type},而不是对象",
        ),
        "log-missing": (
            "no node log {path}: the node's output is missing (the record alone is shown)",
            "没有节点日志 {path}:缺少该节点的输出(仅显示启动记录)",
        ),
        "log-sampled": (
            "the node log {path} is {size}: {read} of it were read (its start, its end and windows between), so "
            "the charts have gaps",
            "节点日志 {path} 大小为 {size}:只读取了其中 {read}(开头、结尾及中间的若干窗口),曲线因此有空缺",
        ),
        "log-binary": (
            "the node log {path} contains NUL bytes (binary data or a damaged file): only its text is shown",
            "节点日志 {path} 含有 NUL 字节(二进制数据或文件已损坏):仅显示其中的文本",
        ),
        "log-not-utf8": (
            "the node log {path} is not all UTF-8: undecodable bytes are shown as �",
            "节点日志 {path} 并非全部为 UTF-8:无法解码的字节显示为 �",
        ),
        "log-empty": ("the node log {path} is empty", "节点日志 {path} 为空"),
        "log-over-budget": (
            "the node log {path} was not read: the newer runs' logs used the report's {budget} of reading",
            "节点日志 {path} 未读取:较新运行的日志已用完报告的读取额度 {budget}",
        ),
        "older-runs": (
            "{count} older run(s) of this experiment are not shown (only the newest are read)",
            "该实验另有 {count} 次较早的运行未显示(只读取最新的)",
        ),
        "more-problems": ("… and {count} more", "……另有 {count} 条"),
        "node-no-files": (
            "no file at all from this node (it never started, or its log folder was not the shared one)",
            "该节点没有留下任何文件(从未启动,或其日志目录不是共享目录)",
        ),
        # the report: the cause line
        "sum-nothing": (
            "NO RUN: no file of experiment {exp} in {folder}",
            "没有运行:{folder} 中没有实验 {exp} 的任何文件",
        ),
        "sum-failed": ("FAILED: node {rank} exited {code} ({detail})", "失败:节点 {rank} 以 {code} 退出({detail})"),
        "sum-failed-because": (
            "FAILED: node {rank} exited {code} ({detail}): {cause}",
            "失败:节点 {rank} 以 {code} 退出({detail}):{cause}",
        ),
        "sum-culprit": ("culprit rank(s) {ranks} on node(s) {nodes}", "问题 rank {ranks},位于节点 {nodes}"),
        "sum-restarts": ("{count} restart(s) ({causes})", "{count} 次重启({causes})"),
        "sum-others-failed": ("also {nodes}", "另外{nodes}"),
        "sum-node-exit": ("node {rank} exited {code}", "节点 {rank} 以 {code} 退出"),
        "sum-unfinished": (
            "NO OUTCOME: node(s) {nodes} recorded none (still running, or ended before the launcher could write it)",
            "没有结果:节点 {nodes} 未记录结果(仍在运行,或在启动器写入前已结束)",
        ),
        "sum-last-step": ("last step seen {step}", "最后看到的步数 {step}"),
        "sum-succeeded": ("SUCCEEDED: all {count} node(s) exited 0", "成功:全部 {count} 个节点以 0 退出"),
        "sum-finished": (
            "ALREADY FINISHED: all {count} node(s) found the experiment trained to its last save",
            "已完成:全部 {count} 个节点发现实验已训练到最后一次保存",
        ),
        "sum-reached": ("reached step {step}", "到达第 {step} 步"),
        "sum-reached-loss": ("reached step {step} (loss {loss})", "到达第 {step} 步(损失 {loss})"),
        "sum-recovered": ("recovered from {restarts}", "已从 {restarts} 中恢复"),
        "sum-checkpoints": ("checkpoints {steps}", "检查点 {steps}"),
        "sum-missing-nodes": ("no file at all from node(s) {nodes}", "节点 {nodes} 没有留下任何文件"),
        # the report: the page
        "h-title": ("Job report", "任务报告"),
        "meta": (
            "experiment {exp} in {folder}: {runs} run(s) of {nodes} node(s); generated {when}",
            "实验 {exp},目录 {folder}:{nodes} 个节点的 {runs} 次运行;生成于 {when}",
        ),
        "h-problems": ("Files that could not be read fully", "未能完整读取的文件"),
        "h-timeline": ("Timeline per node", "各节点时间线"),
        "h-charts": ("Training curves (node logs)", "训练曲线(来自节点日志)"),
        "h-loss": ("Loss", "损失"),
        "h-step-time": ("Seconds per step", "每步耗时(秒)"),
        "axis-step": ("step", "步数"),
        "axis-loss": ("loss", "损失"),
        "axis-step-time": ("s / step", "秒 / 步"),
        "chart-empty": ("no progress line was found in the logs read", "所读日志中没有找到进度行"),
        "timeline-empty": ("no run of this experiment was found", "没有找到该实验的任何运行"),
        "attempt-n": ("attempt {n}", "第 {n} 次尝试"),
        "restart-n": ("restart {n} ({cause})", "第 {n} 次重启({cause})"),
        "culprit": (
            "stall culprit: rank(s) {ranks} on node(s) {nodes}: {why}",
            "停滞的问题 rank:{ranks},位于节点 {nodes}:{why}",
        ),
        "stall-report": (
            "stall report: ranks {ranks}; in a collective {collective}; in data loading {loading}",
            "停滞报告:rank {ranks};在集合通信中 {collective};在数据加载中 {loading}",
        ),
        "h-checkpoints": ("Checkpoints saved", "已保存的检查点"),
        "no-checkpoints": ("no checkpoint was saved by the runs shown", "所示运行没有保存检查点"),
        "h-exit-codes": ("Exit codes", "退出码"),
        "no-outcome": ("no outcome recorded", "未记录结果"),
        "h-transport": ("Transport NCCL used", "NCCL 实际使用的传输方式"),
        "no-transport": (
            "no transport was recorded (a single node, gloo, or NCCL's debug lines were off)",
            "未记录传输方式(单节点、gloo,或未开启 NCCL 调试日志)",
        ),
        "h-taco": ("TACO acceleration", "TACO 加速"),
        "no-taco": ("no record says anything about TACO", "没有启动记录提到 TACO"),
        "h-health": ("Node health checks", "节点健康检查"),
        "h-last-lines": ("Last log lines", "日志最后几行"),
        "no-lines": ("no log line could be read", "没有可读取的日志行"),
        "footer": (
            "Written by vla-entrypoint from the files in the log folder; the same content: vla-entrypoint report "
            "--json. Secrets are masked.",
            "由 vla-entrypoint 根据日志目录中的文件生成;同样的内容可用 vla-entrypoint report --json 获取。"
            "敏感信息已屏蔽。",
        ),
        "col-run": ("run", "运行"),
        "col-host": ("host", "主机"),
        "col-phase": ("phase", "阶段"),
        "col-start-s": ("start (s)", "开始(秒)"),
        "col-duration-s": ("duration (s)", "时长(秒)"),
        "col-attempt": ("attempt", "尝试"),
        "col-detected-s": ("ended (s)", "结束(秒)"),
        "col-cause": ("cause", "原因"),
        "col-resumed": ("resumed from step", "续训起点"),
        "col-best-step": ("best step", "最大步数"),
        "col-detail": ("detail", "详情"),
        "col-step": ("step", "步数"),
        "col-path": ("path", "路径"),
        "col-exit-code": ("exit code", "退出码"),
        "col-class": ("outcome", "结果"),
        "col-verdict": ("verdict", "判定"),
        "col-root-cause": ("root cause", "根本原因"),
        "col-last-step": ("last step", "最后一步"),
        "col-kind": ("transport", "传输方式"),
        "col-net": ("network", "网络"),
        "col-gdr": ("GDR channels", "GDR 通道"),
        "col-nics": ("NICs", "网卡"),
        "col-nccl": ("NCCL version", "NCCL 版本"),
        "col-status": ("status", "状态"),
        "col-message": ("message", "说明"),
        "col-key": ("key", "键"),
        "col-value": ("value", "值"),
        # the command
        "no-runs": (
            "no file of experiment {exp} in {folder} (no <exp>-node<rank>-<time>.log or .json)",
            "{folder} 中没有实验 {exp} 的文件(没有 <实验名>-node<节点>-<时间>.log 或 .json)",
        ),
        "no-runs-fix": (
            "Name the experiment and folder the job used: --exp-name / VLA_EXP_NAME (now {exp}) and --log-dir / "
            "VLA_LOG_DIR (relative to the assets root).",
            "请指定任务所用的实验名与目录:--exp-name / VLA_EXP_NAME(当前为 {exp}),--log-dir / VLA_LOG_DIR"
            "(相对于资源根目录)。",
        ),
        "not-written": ("the report {path} cannot be written: {error}", "无法写入报告 {path}:{error}"),
        "not-ours": (
            "{path} is not a report of vla-entrypoint: it is left as it is, never overwritten",
            "{path} 不是 vla-entrypoint 生成的报告:保持原样,不会覆盖",
        ),
        "not-ours-kind": (
            "{path} is a {problem}, not a report: it is left as it is",
            "{path} 是 {problem},不是报告:保持原样",
        ),
        "not-written-fix": (
            "Write it elsewhere with --out PATH, or print it with --json.",
            "请用 --out PATH 写到别处,或用 --json 输出。",
        ),
        "written": ("report: {path} ({runs} run(s), {seconds}s)", "报告:{path}({runs} 次运行,{seconds} 秒)"),
        "auto-written": (
            "report of the whole job: {path} (open it in a browser; vla-entrypoint report writes it again)",
            "整个任务的报告:{path}(用浏览器打开;vla-entrypoint report 可重新生成)",
        ),
        "auto-slow": (
            "not written within {seconds}s (the log folder's storage is slow or stopped answering)",
            "{seconds} 秒内未写完(日志目录所在存储缓慢或无响应)",
        ),
        "auto-failed": (
            "the job report was not written: {problem}; run vla-entrypoint report later",
            "未能写出任务报告:{problem};可稍后运行 vla-entrypoint report",
        ),
    },
)
