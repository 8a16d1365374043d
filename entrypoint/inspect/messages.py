"""What the inspections say: topology, batch, assets, storage and resume findings and errors."""

from __future__ import annotations

from collections.abc import Iterable

from entrypoint.core.messages import Catalogue, Text

MESSAGES = Catalogue(
    "inspect",
    {
        # topology
        "topology-bad-value": (
            "{name}={value!r} is not valid: expected {expected}",
            "{name}={value!r} 无效:应为{expected}",
        ),
        "topology-expected-integer": ("an integer >= {minimum}", "不小于 {minimum} 的整数"),
        "topology-expected-integer-fix": (
            "Set {name} to a whole number >= {minimum}.",
            "请把 {name} 设为不小于 {minimum} 的整数。",
        ),
        "topology-expected-address": ("an IP address or host name", "IP 地址或主机名"),
        "topology-expected-address-fix": (
            "Set {name} to node 0's IP address or host name.",
            "请把 {name} 设为 0 号节点的 IP 或主机名。",
        ),
        "topology-expected-port": ("a port number 1-65535", "1-65535 之间的端口号"),
        "topology-expected-port-fix": (
            "Set {name} to a free TCP port such as 23456.",
            "请把 {name} 设为空闲端口,例如 23456。",
        ),
        "topology-expected-node-list": ("comma-separated host:gpus entries", "以逗号分隔的 host:gpus 条目"),
        "topology-expected-node-list-fix": (
            "Use the NODE_LIST TI-ONE injects (e.g. 10.0.0.1:8,10.0.0.2:8) or unset it.",
            "请使用 TI-ONE 注入的 NODE_LIST(例如 10.0.0.1:8,10.0.0.2:8)或取消该变量。",
        ),
        "topology-expected-fixed-nnodes": (
            "a fixed node count (elastic ranges are not supported)",
            "固定的节点数(不支持弹性范围)",
        ),
        "topology-expected-fixed-nnodes-fix": (
            "Set PET_NNODES to one number, e.g. 2.",
            "请把 PET_NNODES 设为单个数字,例如 2。",
        ),
        "topology-variable-missing": ("{name} is not set", "未设置 {name}"),
        "topology-variable-missing-fix": (
            "Set {name} (TI-ONE sets it for DDP jobs), or unset GPU_NUM_PER_NODE to run on one machine.",
            "请设置 {name}(TI-ONE 的 DDP 任务会自动注入),或取消 GPU_NUM_PER_NODE 以单机运行。",
        ),
        "topology-master-missing": (
            "{name} is not set for a {nnodes}-node job",
            "{nnodes} 节点任务未设置 {name}",
        ),
        "topology-master-missing-fix": (
            "Set {name} to the address of node 0 (TI-ONE sets it in DDP mode).",
            "请把 {name} 设为 0 号节点的地址(TI-ONE DDP 模式会自动设置)。",
        ),
        "topology-master-loopback": (
            "{name}={addr} is a loopback address, which other nodes of a {nnodes}-node job cannot reach",
            "{name}={addr} 是回环地址,{nnodes} 节点任务的其他节点无法访问",
        ),
        "topology-master-loopback-fix": (
            "Set {name} to node 0's network address.",
            "请把 {name} 设为 0 号节点的网络地址。",
        ),
        "topology-node-list-entries": (
            "NODE_LIST has {entries} entries but WORLD_SIZE={nnodes} nodes",
            "NODE_LIST 有 {entries} 项,但 WORLD_SIZE={nnodes}",
        ),
        "topology-node-list-total": (
            "NODE_LIST sums to {gpus} GPUs but the job has {total}",
            "NODE_LIST 合计 {gpus} 卡,但任务共 {total} 卡",
        ),
        "topology-node-list-this-node": (
            "NODE_LIST gives node {rank} {gpus} GPUs but GPU_NUM_PER_NODE={per_node}",
            "NODE_LIST 中节点 {rank} 为 {gpus} 卡,但 GPU_NUM_PER_NODE={per_node}",
        ),
        "topology-gpu-num": (
            "GPU_NUM={gpu_num} but WORLD_SIZE x GPU_NUM_PER_NODE = {nnodes} x {per_node} = {total}",
            "GPU_NUM={gpu_num},但 WORLD_SIZE x GPU_NUM_PER_NODE = {nnodes} x {per_node} = {total}",
        ),
        "topology-index": ("INDEX={index} but RANK={rank}", "INDEX={index},但 RANK={rank}"),
        "topology-contradiction-fix": (
            "TI-ONE sets these together; if you set them by hand, make them agree (or unset the extra one).",
            "这些变量由 TI-ONE 统一设置;若手动设置,请保持一致(或取消多余的变量)。",
        ),
        "topology-rank-out-of-range": (
            "RANK={rank} is out of range: WORLD_SIZE={nnodes} nodes means RANK is 0..{last}",
            "RANK={rank} 越界:WORLD_SIZE={nnodes} 个节点时 RANK 应为 0..{last}",
        ),
        "topology-rank-out-of-range-fix": (
            "On TI-ONE, WORLD_SIZE is the number of nodes and RANK this node's index; fix whichever is wrong.",
            "TI-ONE 中 WORLD_SIZE 是节点数,RANK 是本节点序号;请修正错误的一项。",
        ),
        "topology-pet-rank-out-of-range": (
            "PET_NODE_RANK={rank} is out of range for PET_NNODES={nnodes}",
            "PET_NODE_RANK={rank} 超出 PET_NNODES={nnodes} 的范围",
        ),
        "topology-pet-rank-out-of-range-fix": (
            "Set PET_NODE_RANK to 0..{last}.",
            "请把 PET_NODE_RANK 设为 0..{last}。",
        ),
        "topology-visible-gpu-count": ("the visible GPU count", "可见 GPU 数"),
        "topology-visible-devices-too-few": (
            "CUDA_VISIBLE_DEVICES={value!r} exposes {visible} GPU(s) but {count}={per_node}",
            "CUDA_VISIBLE_DEVICES={value!r} 只暴露 {visible} 张卡,但 {count}={per_node}",
        ),
        "topology-visible-devices-too-few-fix": (
            "Unset CUDA_VISIBLE_DEVICES (the platform already isolates GPUs) or list as many GPUs as the node "
            "runs processes.",
            "请取消 CUDA_VISIBLE_DEVICES(平台已隔离 GPU),或列出与每节点进程数相同数量的 GPU。",
        ),
        "topology-visible-devices-extra": (
            "CUDA_VISIBLE_DEVICES exposes {visible} GPUs; only the first {per_node} are used",
            "CUDA_VISIBLE_DEVICES 暴露 {visible} 张卡,只使用前 {per_node} 张",
        ),
        "topology-visible-devices-extra-fix": (
            "Raise {count} to use them all, or unset CUDA_VISIBLE_DEVICES.",
            "如需全部使用,请调大 {count},或取消 CUDA_VISIBLE_DEVICES。",
        ),
        "topology-gpus-missing": (
            "this node has {present} GPU(s) but {count}={per_node}",
            "本节点只有 {present} 张 GPU,但 {count}={per_node}",
        ),
        "topology-gpus-missing-fix": (
            "Request whole GPUs matching the job spec, or lower the GPUs per node; for a CPU-only demo set "
            "VLA_DEVICE=cpu.",
            "请申请与任务配置一致的整卡,或减少每节点 GPU 数;仅 CPU 演示请设置 VLA_DEVICE=cpu。",
        ),
        "topology-pet-ignored": (
            "ignored torchrun variables that disagree with TI-ONE's: {variables}",
            "已忽略与 TI-ONE 变量不一致的 torchrun 变量:{variables}",
        ),
        "topology-pet-ignored-fix": (
            "They are removed from torchrun's environment; unset them in the job to silence this warning.",
            "这些变量不会传给 torchrun;在任务中取消它们即可消除此警告。",
        ),
        "topology-ambiguous": (
            "WORLD_SIZE={value!r} is set without GPU_NUM_PER_NODE, so it is unclear whether it counts nodes or "
            "processes",
            "设置了 WORLD_SIZE={value!r} 却没有 GPU_NUM_PER_NODE,无法判断它表示节点数还是进程数",
        ),
        "topology-ambiguous-fix": (
            "On TI-ONE use DDP mode (it sets GPU_NUM_PER_NODE); elsewhere use "
            "PET_NNODES/PET_NODE_RANK/PET_NPROC_PER_NODE.",
            "在 TI-ONE 上请使用 DDP 模式(会设置 GPU_NUM_PER_NODE);其他环境请使用 "
            "PET_NNODES/PET_NODE_RANK/PET_NPROC_PER_NODE。",
        ),
        "topology-no-gpu": ("no GPU is visible on this machine", "本机没有可见的 GPU"),
        "topology-no-gpu-fix": (
            "Run on a GPU machine, or set VLA_DEVICE=cpu for a CPU-only demo.",
            "请在 GPU 机器上运行;仅 CPU 演示请设置 VLA_DEVICE=cpu。",
        ),
        # scope: `check --assets`, the dev machine (inspect/scope.py)
        "scope-shape-range": (
            "{flag} {value} is out of range: expected a whole number from 1 to {limit}",
            "{flag} {value} 超出范围:应为 1 到 {limit} 之间的整数",
        ),
        "scope-shape-range-fix": (
            "Give {flag} the job's {what} as you will create it on TI-ONE, e.g. {flag} {example}.",
            "请为 {flag} 指定将在 TI-ONE 上创建的任务的{what},例如 {flag} {example}。",
        ),
        "scope-nodes": ("number of nodes", "节点数"),
        "scope-gpus-per-node": ("GPUs per node", "每节点 GPU 数"),
        "scope-skip": (
            "{what}: checked by each node when the job starts, not here",
            "{what}:由每个节点在任务启动时检查,此处不检查",
        ),
        "scope-skip-gpus": ("each node's GPUs", "每个节点的 GPU"),
        "scope-skip-fabric": ("the RDMA/NCCL network and locked memory", "RDMA/NCCL 网络与锁定内存"),
        "scope-skip-health": (
            "the node health gate (VLA_HEALTH: each node's GPUs through NVML, its RDMA ports, GPU measurements)",
            "节点健康检查(VLA_HEALTH:通过 NVML 检查每个节点的 GPU、RDMA 端口,并测量 GPU)",
        ),
        "scope-skip-trainer": ("openpi's trainer {script} (in the image)", "openpi 训练脚本 {script}(位于镜像中)"),
        "scope-skip-torchrun": ("torchrun (in the image)", "torchrun(位于镜像中)"),
        "scope-skip-patch": ("the transformers patch (in the image)", "transformers 补丁(位于镜像中)"),
        "scope-skip-taco": ("the TACO wheel against the node's Python", "TACO wheel 与节点 Python 的匹配"),
        "scope-skip-datasets-cache": (
            "each node's datasets cache (HF_DATASETS_CACHE, a folder per node)",
            "每个节点的 datasets 缓存(HF_DATASETS_CACHE,每个节点一个目录)",
        ),
        "scope-job-file": (
            "job file valid: {path} ({keys} taken from it)",
            "任务文件有效:{path}(从中读取 {keys})",
        ),
        "scope-job-file-unused": (
            "job file valid: {path} (nothing taken from it: VLA_* variables or flags set the same keys)",
            "任务文件有效:{path}(未从中读取任何设置:VLA_* 变量或命令行参数设置了相同的键)",
        ),
        "scope-job-file-none": (
            "no job file at {path}: the defaults and VLA_* variables apply",
            "{path} 处没有任务文件:使用默认值与 VLA_* 变量",
        ),
        # batch
        "batch-shape": ("{nnodes} node(s) x {per_node}", "{nnodes} 个节点 x {per_node}"),
        "batch-divides": (
            "global batch {batch} = {per_process} per process x {processes} processes ({shape})",
            "全局 batch {batch} = 每进程 {per_process} x {processes} 个进程({shape})",
        ),
        "batch-indivisible": (
            "global batch size {batch} does not divide by {processes} processes ({shape}); openpi would silently "
            "train {per_process} per process",
            "全局 batch {batch} 不能被 {processes} 个进程({shape})整除;openpi 会静默地按每进程 {per_process} 训练",
        ),
        "batch-indivisible-fix": (
            "Set VLA_BATCH_SIZE to a multiple of {processes}: {choices}.",
            "请把 VLA_BATCH_SIZE 设为 {processes} 的倍数:{choices}。",
        ),
        "either": ("{first} or {second}", "{first} 或 {second}"),
        # assets: what is wrong with a file
        "file-missing": ("the file is missing", "文件不存在"),
        "file-is-folder": ("a folder is where a file should be", "此处应为文件而不是文件夹"),
        "file-permission-denied": ("the file is not readable (permission denied)", "文件不可读(权限不足)"),
        "file-unreadable": ("the file cannot be read: {error}", "文件无法读取:{error}"),
        "file-dangling-link": (
            "the file is a symbolic link to {target}, which does not exist",
            "该文件是指向 {target} 的符号链接,但链接目标不存在",
        ),
        "file-link-loop": ("the file is a loop of symbolic links", "该文件是循环的符号链接"),
        "file-fifo": (
            "a FIFO (named pipe) is where a file should be; it is never read, because reading it would block forever",
            "此处应为文件,实际是 FIFO(命名管道);不会读取它,因为读取会永远阻塞",
        ),
        "file-special": (
            "a device or socket is where a file should be; it is never opened",
            "此处应为文件,实际是设备或套接字;不会打开它",
        ),
        "file-name-too-long": (
            "the path is too long for the file system (a name over 255 bytes)",
            "路径超出文件系统的长度限制(单个名称超过 255 字节)",
        ),
        "json-too-big": (
            "the file is {size} bytes ({mib} MiB); the launcher reads a JSON asset (info.json, norm stats, "
            "config.json) of at most {limit} MiB, so it is not read",
            "文件大小为 {size} 字节({mib} MiB);启动器读取的 JSON 资源文件(info.json、归一化统计量、config.json)"
            "最多 {limit} MiB,因此不会读取",
        ),
        "json-too-big-fix": (
            "These files are kilobytes in every openpi and LeRobot release: put the release's own file at {path}. "
            "The {limit} MiB cap is listed in the README (Settings, 'Values at the edges').",
            "在 openpi 与 LeRobot 的各个发布版本中,这些文件都只有几 KB:请把发布版本自带的文件放到 {path}。"
            "{limit} MiB 的上限见 README 的 Settings 一节。",
        ),
        "file-too-big": (
            "the file is {size} bytes; a file like this is at most {limit} bytes, so it is not read",
            "文件大小为 {size} 字节;此类文件最多 {limit} 字节,因此不会读取",
        ),
        "file-empty": ("the file is empty", "文件为空"),
        "json-too-deep": ("the JSON is nested too deeply to read", "JSON 嵌套层数过深,无法读取"),
        "json-integer-too-long": (
            "the JSON holds an integer of more than {limit} digits",
            "JSON 中有超过 {limit} 位的整数",
        ),
        "lfs-pointer": (
            "the file is a git-lfs pointer (about 130 bytes of text), not the real content: it was cloned without "
            "git-lfs",
            "该文件是 git-lfs 指针(约 130 字节的文本),不是实际内容:克隆时没有启用 git-lfs",
        ),
        "lfs-pointer-fix": (
            "Run `git lfs install && git lfs pull` in {folder}, or download the real files instead of cloning "
            "without git-lfs.",
            "请在 {folder} 中运行 `git lfs install && git lfs pull`,或直接下载真实文件,不要在未启用 git-lfs 时克隆。",
        ),
        "named-problem": ("{path} ({problem})", "{path}({problem})"),
        "file-not-json": (
            "the file is not valid JSON: {error} (line {line}, column {column})",
            "文件不是合法的 JSON(第 {line} 行,第 {column} 列):{error}",
        ),
        "file-not-utf8": (
            "the file is not UTF-8 text: byte {position} cannot be decoded",
            "文件不是 UTF-8 文本:第 {position} 字节无法解码",
        ),
        "json-non-finite": (
            "the file is not valid JSON: it holds the non-finite number {name}",
            "文件不是合法的 JSON:其中含有非有限数 {name}",
        ),
        "json-syntax": ("the file is not valid JSON: {error}", "文件不是合法的 JSON(JSON 语法错误:{error})"),
        "json-expecting-value": ("a value was expected", "此处应为一个值"),
        "json-expecting-comma": ("a ',' was expected", "此处应为逗号 ','"),
        "json-expecting-colon": ("a ':' was expected", "此处应为冒号 ':'"),
        "json-expecting-name": ("a key in double quotes was expected", "此处应为用双引号括起的键名"),
        "json-extra-data": ("more follows after the JSON value", "JSON 值之后还有多余内容"),
        "json-unterminated-string": ("a string has no closing quote", "字符串缺少结束引号"),
        "json-control-character": ("a string holds a control character", "字符串中含有控制字符"),
        "json-bad-escape": ("a string holds an invalid escape", "字符串中含有非法的转义序列"),
        "file-not-json-object": ("it is not a JSON object", "不是 JSON 对象"),
        "file-problem": ("{path}: {problem}", "{path}:{problem}"),
        "norm-stats-no-root": ("no top-level 'norm_stats' object", "缺少顶层 'norm_stats' 对象"),
        "norm-stats-key-missing": ("'norm_stats.{key}' is missing", "缺少 'norm_stats.{key}'"),
        "norm-stats-field-missing": (
            "'norm_stats.{key}.{field}' is missing or empty (pi05 needs quantiles q01/q99)",
            "'norm_stats.{key}.{field}' 缺失或为空(pi05 需要分位数 q01/q99)",
        ),
        "norm-stats-not-finite": (
            "'norm_stats.{key}.{field}' holds a non-numeric or non-finite value",
            "'norm_stats.{key}.{field}' 含非数值或非有限值",
        ),
        "norm-stats-lengths": (
            "'norm_stats.{key}' lists have different lengths ({lengths})",
            "'norm_stats.{key}' 各列表长度不一致({lengths})",
        ),
        "safetensors-too-short": (
            "the file is {size} bytes, too short for a safetensors header",
            "文件只有 {size} 字节,不足以容纳 safetensors 头",
        ),
        "safetensors-header-length": (
            "the header length {length} does not fit a {size}-byte file (truncated or not safetensors)",
            "头长度 {length} 与 {size} 字节的文件不符(文件被截断或不是 safetensors)",
        ),
        "safetensors-header-not-json": (
            "the safetensors header is not valid JSON (corrupt file)",
            "safetensors 头不是合法 JSON(文件损坏)",
        ),
        "safetensors-header-not-object": (
            "the safetensors header is not an object (corrupt file)",
            "safetensors 头不是对象(文件损坏)",
        ),
        "safetensors-bad-offsets": (
            "tensor '{name}' has no valid data_offsets (corrupt header)",
            "张量 '{name}' 的 data_offsets 无效(头损坏)",
        ),
        "safetensors-no-tensors": ("the file holds no tensors", "文件中没有任何张量"),
        "safetensors-bad-dtype": (
            "tensor '{name}' has the dtype {dtype}, which the safetensors loader does not know",
            "张量 '{name}' 的 dtype {dtype} 不是 safetensors 加载器认识的类型",
        ),
        "safetensors-bad-shape": (
            "tensor '{name}' has no valid shape (a list of sizes whose product fits 64 bits)",
            "张量 '{name}' 的 shape 无效(应为乘积不超过 64 位的尺寸列表)",
        ),
        "safetensors-bad-metadata": (
            "'__metadata__' is not a map of strings to strings (corrupt header)",
            "'__metadata__' 不是字符串到字符串的映射(头损坏)",
        ),
        "safetensors-gap": (
            "tensor '{name}' starts at data byte {start} but the tensor before it ends at {end}: a gap, which the "
            "safetensors loader refuses",
            "张量 '{name}' 从数据第 {start} 字节开始,但前一个张量在第 {end} 字节结束:"
            "中间有空隙,safetensors 加载器会拒绝",
        ),
        "safetensors-overlap": (
            "tensor '{name}' starts at data byte {start}, inside the tensor before it (which ends at {end}): "
            "overlapping tensors, which the safetensors loader refuses",
            "张量 '{name}' 从数据第 {start} 字节开始,与前一个张量(在第 {end} 字节结束)重叠,safetensors 加载器会拒绝",
        ),
        "safetensors-size-mismatch": (
            "tensor '{name}' is {dtype} of shape {shape}, {expected} bytes, but its data_offsets span {actual} bytes",
            "张量 '{name}' 为 {dtype}、shape 为 {shape},应占 {expected} 字节,但其 data_offsets 跨度为 {actual} 字节",
        ),
        "safetensors-trailing": (
            "the file has {extra} bytes after its last tensor ({size} bytes, its header accounts for {needed}): the "
            "safetensors loader refuses it",
            "文件在最后一个张量之后多出 {extra} 字节(实际 {size} 字节,头部只说明了 {needed} 字节):"
            "safetensors 加载器会拒绝",
        ),
        "safetensors-truncated": (
            "the file is truncated: {size} bytes but its header needs {needed}",
            "文件被截断:实际 {size} 字节,头部声明需要 {needed} 字节",
        ),
        # assets: findings
        "weights-fix": (
            "Copy the converted PyTorch weights (config.json, model.safetensors) to {weights} again, or set "
            "VLA_WEIGHTS.",
            "请重新把转换后的 PyTorch 权重(config.json、model.safetensors)复制到 {weights},或设置 VLA_WEIGHTS。",
        ),
        "weights-missing": ("the base weights folder {weights} does not exist", "基座权重目录 {weights} 不存在"),
        "weights-not-folder": ("the base weights path {weights} is not a folder", "基座权重路径 {weights} 不是文件夹"),
        "weights-complete": (
            "base weights complete ({gigabytes:.2f} GB) in {weights}",
            "基座权重完整({gigabytes:.2f} GB):{weights}",
        ),
        "norm-stats-fix": (
            "Download the dataset's norm_stats.json to {path} (it ships with the dataset; see the README).",
            "请把数据集附带的 norm_stats.json 下载到 {path}(参见 README)。",
        ),
        "norm-stats-valid": ("norm stats valid: {path}", "归一化统计量有效:{path}"),
        "dataset-fix": (
            "Download and unpack the dataset so that {root} is complete (see the README's asset steps).",
            "请下载并解压数据集,使 {root} 完整(参见 README 的资源准备步骤)。",
        ),
        "dataset-episodes-count": (
            "'total_episodes' is missing or not a count",
            "'total_episodes' 缺失或不是计数",
        ),
        "number-of-digits": ("a number of {digits} digits", "一个 {digits} 位的数"),
        "dataset-count-range": (
            "'{key}' is {value}, past any dataset's count (at most {limit})",
            "'{key}' 为 {value},超出任何数据集的数量范围(最大 {limit})",
        ),
        "dataset-chunk-size": ("'chunks_size' is not a positive integer", "'chunks_size' 不是正整数"),
        "dataset-templates-missing": ("'data_path' or 'features' is missing", "缺少 'data_path' 或 'features'"),
        "dataset-video-path-missing": (
            "video features are declared but 'video_path' is missing",
            "声明了视频特征但缺少 'video_path'",
        ),
        "dataset-template-invalid": (
            "{key} {template} is not a LeRobot v2 path template: {reason}",
            "{key} {template} 不是 LeRobot v2 路径模板:{reason}",
        ),
        "template-malformed": ("its braces do not pair up ({error})", "花括号不成对({error})"),
        "template-unknown-field": (
            "it names the field {{{field}}}; only {allowed} are known",
            "它使用了字段 {{{field}}};只支持 {allowed}",
        ),
        "template-field-access": (
            "{{{field}}} reaches into a field (attribute or index access)",
            "{{{field}}} 访问了字段的属性或下标",
        ),
        "template-conversion": ("{{{field}!{conversion}}} converts the value", "{{{field}!{conversion}}} 对值做了转换"),
        "template-format-spec": (
            "{{{field}:{spec}}} is not a simple integer format such as 03d",
            "{{{field}:{spec}}} 不是简单的整数格式(例如 03d)",
        ),
        "template-no-index": ("it does not contain {{episode_index}}", "其中没有 {{episode_index}}"),
        "template-not-relative": ("it is not a relative path inside the dataset", "它不是数据集内的相对路径"),
        "dataset-v3": (
            "{root} is a LeRobot v3.0 dataset (codebase_version {version}, episodes packed into {data_path}); "
            "openpi's pinned LeRobot reads only v2.x datasets, one file per episode",
            "{root} 是 LeRobot v3.0 数据集(codebase_version {version},多个剧集合并存放于 {data_path});"
            "openpi 固定版本的 LeRobot 只能读取每个剧集一个文件的 v2.x 数据集",
        ),
        "dataset-v3-fix": (
            "Get a v2.1 copy: download the dataset's v2.1 revision from the Hugging Face Hub (`huggingface-cli "
            "download {repo} --repo-type dataset --revision v2.1 --local-dir {root}`, where the hub copy has that "
            "tag), or convert this copy back with a v3.0-to-v2.1 converter (LeRobot's own "
            "convert_dataset_v21_to_v30.py only goes forward).",
            "请获取 v2.1 版本:从 Hugging Face Hub 下载该数据集的 v2.1 修订版(`huggingface-cli download {repo} "
            "--repo-type dataset --revision v2.1 --local-dir {root}`,前提是 Hub 上有该标签),"
            "或用 v3.0 转 v2.1 的转换脚本把本地副本转换回去"
            "(LeRobot 自带的 convert_dataset_v21_to_v30.py 只能向前转换)。",
        ),
        "dataset-meta-missing": ("{folder} lacks {names}", "{folder} 缺少 {names}"),
        "dataset-meta-broken": ("{folder}: {problems}", "{folder}:{problems}"),
        "meta-not-json-lines": ("it does not start with a JSON object", "开头不是 JSON 对象"),
        "dataset-lfs": (
            "{count} files under {root} are git-lfs pointers, not data (cloned without git-lfs): {shown}",
            "{root} 下有 {count} 个文件是 git-lfs 指针而不是数据(克隆时没有启用 git-lfs):{shown}",
        ),
        "dataset-files-broken": (
            "{count} of {expected} episode files under {root} are not what their names claim: {shown}",
            "{root} 下 {expected} 个剧集文件中有 {count} 个内容与文件名不符:{shown}",
        ),
        "parquet-no-magic": (
            "no PAR1 magic at both ends: not a whole parquet file",
            "两端没有 PAR1 标记:不是完整的 parquet 文件",
        ),
        "parquet-bad-footer": (
            "its footer length {footer} does not fit a {size}-byte file (truncated or corrupt)",
            "其 footer 长度 {footer} 与 {size} 字节的文件不符(被截断或损坏)",
        ),
        "mp4-no-ftyp": ("no ftyp box at the start: not an mp4 file", "开头没有 ftyp box:不是 mp4 文件"),
        "mp4-cut": (
            "cut short: its boxes stop adding up at byte {offset} of {size} (an interrupted download or copy)",
            "文件不完整:其 box 结构在共 {size} 字节中的第 {offset} 字节处对不上(下载或复制被中断)",
        ),
        "mp4-incomplete": (
            "cut short: its {size} bytes end without the {missing} box every video has (an interrupted download or"
            " copy)",
            "文件不完整:全部 {size} 字节中没有视频必有的 {missing} box(下载或复制被中断)",
        ),
        "dataset-files-missing": (
            "{missing} of the {expected} episode files under {root} are missing or empty: {shown} (the count is "
            "{info}'s total_episodes, {episodes})",
            "{root} 下 {expected} 个剧集文件中有 {missing} 个缺失或为空:{shown}(该数量来自 {info} 中的 "
            "total_episodes,{episodes})",
        ),
        "dataset-count-fix": (
            "{fix} If the dataset on disk is whole, {info} is wrong instead: it says total_episodes is {episodes}, "
            "and only {present} of the {expected} files it implies are there; use the info.json that came with the "
            "dataset.",
            "{fix}如果磁盘上的数据集本身完整,那么错的是 {info}:其中 total_episodes 为 {episodes},"
            "而按此应有的 {expected} 个文件只有 {present} 个存在;请使用数据集自带的 info.json。",
        ),
        "dataset-complete": (
            "dataset complete: {episodes} episodes, {files} files, {gigabytes:.2f} GB in {root}",
            "数据集完整:{episodes} 个剧集,{files} 个文件,{gigabytes:.2f} GB:{root}",
        ),
        "tokenizer-staged": ("PaliGemma tokenizer staged in {home}", "PaliGemma 分词器已就位:{home}"),
        "tokenizer-missing": (
            "the PaliGemma tokenizer is not staged (looked at {places}); openpi will try to download it",
            "PaliGemma 分词器未就位(已查找 {places});openpi 将尝试联网下载",
        ),
        "tokenizer-broken-fix": (
            "Replace {path} with the real paligemma_tokenizer.model, or remove it so that openpi downloads it.",
            "请用真实的 paligemma_tokenizer.model 替换 {path},或删除它以便 openpi 自行下载。",
        ),
        "tokenizer-missing-fix": (
            "Copy paligemma_tokenizer.model to {target} so offline jobs do not hang.",
            "请把 paligemma_tokenizer.model 复制到 {target},避免离线任务卡住。",
        ),
        # storage
        "folder-not-a-folder": ("{target} exists but is not a folder", "{target} 已存在,但不是文件夹"),
        "folder-read-only": ("{target} is on a read-only file system", "{target} 位于只读文件系统上"),
        "folder-unusable": ("{target}: {error}", "{target}:{error}"),
        "folder-not-writable": ("{target} is not writable by uid {uid}", "uid {uid} 无权写入 {target}"),
        "checkpoint-unwritable": ("checkpoints cannot be written: {reason}", "无法写入检查点:{reason}"),
        "checkpoint-unwritable-fix": (
            "Mount the CFS path of {folder} read-write with free space, or set VLA_CHECKPOINT_BASE_DIR.",
            "请以读写方式挂载 {folder} 对应的 CFS 路径并确保有空间,或设置 VLA_CHECKPOINT_BASE_DIR。",
        ),
        "checkpoint-writable": ("checkpoint folder writable: {folder}", "检查点目录可写:{folder}"),
        "checkpoint-no-room": (
            "only {free:.2f} GB free under {target}: not even one checkpoint of about {per_save:.1f} GB fits{also}",
            "{target} 仅剩 {free:.2f} GB:连一个约 {per_save:.1f} GB 的检查点都放不下{also}",
        ),
        "checkpoint-and-cache": (
            ", together with the datasets cache {cache} on the same file system (about {size:.1f} GB still to build "
            "before the first save)",
            "(同一文件系统上的 datasets 缓存 {cache} 也要占用空间:首次保存前还需构建约 {size:.1f} GB)",
        ),
        "checkpoint-and-caches": (
            ", together with the datasets caches of all {count} node ranks ({cache} and {others} more) on the same "
            "file system (about {size:.1f} GB still to build before the first save)",
            "(同一文件系统上 {count} 个节点的 datasets 缓存({cache} 及另外 {others} 个)也要占用空间:"
            "首次保存前还需构建约 {size:.1f} GB)",
        ),
        "checkpoint-cache-fix": (
            "Or set HF_DATASETS_CACHE to a folder on another file system with room for the dataset.",
            "或把 HF_DATASETS_CACHE 设为另一个文件系统上、空间足够容纳数据集的目录。",
        ),
        "checkpoint-no-room-fix": (
            "Free space on the CFS (or move old experiments away) before starting the job.",
            "请在启动任务前清理 CFS 空间(或移走旧实验)。",
        ),
        "checkpoint-short-of-room": (
            "{free:.1f} GB free under {target} but this run saves {saves} checkpoint(s) of about {per_save:.1f} GB"
            "{also} ({needed:.1f} GB in all); openpi keeps every one",
            "{target} 仅剩 {free:.1f} GB,但本次训练将保存 {saves} 个约 {per_save:.1f} GB 的检查点{also}"
            "(共 {needed:.1f} GB),openpi 会全部保留",
        ),
        "checkpoint-short-of-room-fix": (
            "Free space on the CFS, raise VLA_SAVE_INTERVAL, or move old experiments away.",
            "请清理 CFS 空间、调大 VLA_SAVE_INTERVAL,或移走旧实验。",
        ),
        "checkpoint-room": (
            "{free:.1f} GB free for {saves} save(s) of about {per_save:.1f} GB{also}",
            "剩余 {free:.1f} GB,可容纳 {saves} 次约 {per_save:.1f} GB 的保存{also}",
        ),
        "final-step-not-saved": (
            "the weights after the last step ({steps}) will not be saved: openpi saves at multiples of {interval} "
            "and at step {before_last}",
            "最后一步({steps})的权重不会被保存:openpi 只在 {interval} 的倍数步和第 {before_last} 步保存",
        ),
        "final-step-not-saved-fix": (
            "Make VLA_NUM_TRAIN_STEPS a multiple of VLA_SAVE_INTERVAL (e.g. {example}).",
            "请把 VLA_NUM_TRAIN_STEPS 设为 VLA_SAVE_INTERVAL 的整数倍(例如 {example})。",
        ),
        "datasets-cache-fix": (
            "Free space there, or set HF_DATASETS_CACHE (job file env: or the task's variables) to another writable "
            "folder with room for about the dataset's size.",
            "请清理该处空间,或把 HF_DATASETS_CACHE(任务文件 env: 或任务环境变量)设为另一个可写、"
            "空间约等于数据集大小的目录。",
        ),
        "datasets-cache-unwritable": (
            "the datasets cache is not writable: {reason}",
            "datasets 缓存目录不可写:{reason}",
        ),
        "datasets-cache-small": (
            "{free:.1f} GB free for the datasets cache {cache}, the dataset is {size:.1f} GB (the cache is about "
            "as large)",
            "datasets 缓存 {cache} 仅剩 {free:.1f} GB,数据集为 {size:.1f} GB(缓存约同样大)",
        ),
        "datasets-cache-writable": ("datasets cache writable: {cache}", "datasets 缓存可写:{cache}"),
        "datasets-cache-node-folder": (
            "datasets cache in this node's folder under the assets root: {cache} (a new container reuses it; it "
            "takes about the dataset's {size:.1f} GB once built)",
            "datasets 缓存位于资源根目录下本节点的目录:{cache}(新容器可直接复用;建成后约占数据集大小 {size:.1f} GB)",
        ),
        # storage: which mount holds the assets root and the checkpoints (mounts.py, storage.py)
        "mount-unknown": (
            "an unknown file system (the mount table could not be read)",
            "未知文件系统(无法读取挂载表)",
        ),
        "mount-network": (
            "the network file system {fs} mounted at {point} (from {source})",
            "挂载于 {point} 的网络文件系统 {fs}(来源 {source})",
        ),
        "mount-local": (
            "the local file system {fs} mounted at {point} (from {source}), not shared between machines",
            "挂载于 {point} 的本地文件系统 {fs}(来源 {source}),不在机器之间共享",
        ),
        "mount-container-disk": (
            "the container's own disk ({fs} mounted at /)",
            "容器自身的磁盘(挂载于 / 的 {fs})",
        ),
        "mount-machine-disk": (
            "this machine's own disk ({fs} mounted at /)",
            "本机自身的磁盘(挂载于 / 的 {fs})",
        ),
        "root-mounted": ("assets root {root} is on {where}", "资源根目录 {root} 位于{where}"),
        "root-not-mounted": (
            "the assets root {root} is not a mounted file system: it is on {where}. The job's CFS storage row is "
            "missing or mounts another container path; nothing is checked or written there (checkpoints never go "
            "to the container's disk)",
            "资源根目录 {root} 不是挂载的文件系统:它位于{where}。任务缺少 CFS 存储挂载行,或挂载到了别的容器路径;"
            "不会在此检查或写入任何内容(检查点绝不写入容器磁盘)",
        ),
        "root-missing": (
            "the assets root {root} does not exist: no CFS is mounted there. Its nearest existing folder {existing} "
            "is on {where}; nothing is checked or written there",
            "资源根目录 {root} 不存在:此处没有挂载 CFS。最近的已存在目录 {existing} 位于{where};"
            "不会在此检查或写入任何内容",
        ),
        "root-mount-fix": (
            "In the TI-ONE job's storage settings add the row: CFS path <your CFS root>/embodied-ai/openpi-assets -> "
            "container path {root} (or set VLA_ASSETS_ROOT to the container path your row uses), then start the job "
            "again. On the dev machine, mount CFS first and fill the tree with `vla-entrypoint fetch-assets`.",
            "请在 TI-ONE 任务的存储设置中添加一行:CFS 路径 <你的 CFS 根目录>/embodied-ai/openpi-assets -> 容器路径 "
            "{root}(或把 VLA_ASSETS_ROOT 设为该行所用的容器路径),然后重新启动任务。在开发机上请先挂载 CFS,"
            "再用 `vla-entrypoint fetch-assets` 准备资源。",
        ),
        "root-missing-under-mount-fix": (
            "{point} is mounted but holds no {root}: check the CFS path of the job's storage row, set VLA_ASSETS_ROOT "
            "to where the tree is, or fill it on the dev machine with `vla-entrypoint fetch-assets`.",
            "{point} 已挂载,但其中没有 {root}:请检查任务存储挂载行的 CFS 路径,把 VLA_ASSETS_ROOT 设为资源所在位置,"
            "或在开发机上用 `vla-entrypoint fetch-assets` 准备资源。",
        ),
        "root-own-disk": (
            "the assets root {root} is on {where}, not on a mounted file system: fine for a trial on this machine, "
            "but a TI-ONE job sees none of it",
            "资源根目录 {root} 位于{where},不在挂载的文件系统上:在本机试运行可以,但 TI-ONE 任务看不到其中任何内容",
        ),
        "root-local-multinode": (
            "the assets root {root} is on {where}, but this job has {nodes} nodes: in-job restarts, the stall "
            "diagnosis and naming a lost node need the log folder shared by every node",
            "资源根目录 {root} 位于{where},但本任务有 {nodes} 个节点:任务内重启、卡住诊断和丢失节点的识别都需要"
            "所有节点共享日志目录",
        ),
        "root-local-multinode-fix": (
            "Mount the CFS at {root} on every node with the job's storage row. If every node's container sees the same "
            "folder anyway (one machine's folder mounted into each), ignore this: the run says if the nodes turn out "
            "not to see each other's files.",
            "请通过任务的存储挂载行在每个节点上把 CFS 挂载到 {root}。若各节点的容器本就看到同一目录"
            "(同一台机器的目录挂载到每个容器中),可忽略此提示:若运行中发现各节点看不到彼此的文件,会明确指出。",
        ),
        "root-own-disk-fix": (
            "For TI-ONE keep the tree on CFS and mount it at {root} with the job's storage row; a TI-ONE job "
            "(GPU_NUM_PER_NODE set) refuses to start without that mount.",
            "用于 TI-ONE 时请把资源放在 CFS 上,并通过任务的存储挂载行挂载到 {root};"
            "TI-ONE 任务(设置了 GPU_NUM_PER_NODE)在缺少该挂载时会拒绝启动。",
        ),
        "root-folded": (
            "{count} checks wait for the assets root to be mounted and are not counted: {names}",
            "{count} 项检查需等资源根目录挂载后才进行,本次不计入:{names}",
        ),
        "root-folded-fix": (
            "Fix storage.assets-mount above; they run on the next start.",
            "请先修复上面的 storage.assets-mount;下次启动时会执行这些检查。",
        ),
        "root-withheld": (
            "{path} is under the assets root {root}, which is not mounted: nothing is written there",
            "{path} 位于未挂载的资源根目录 {root} 下:不会在此写入任何内容",
        ),
        "checkpoint-own-disk": (
            "the checkpoint folder {folder} is on {where}: checkpoints would fill the container's disk and vanish "
            "with the container",
            "检查点目录 {folder} 位于{where}:检查点会占满容器磁盘,并随容器一起消失",
        ),
        "checkpoint-own-disk-fix": (
            "Mount CFS at {base} with a storage row of the TI-ONE job, or point {variable} into the mounted assets "
            "root (its default, checkpoints, is inside it).",
            "请在 TI-ONE 任务中添加存储挂载行,把 CFS 挂载到 {base};或让 {variable} 指向已挂载的资源根目录内"
            "(其默认值 checkpoints 即在其中)。",
        ),
        # resume
        "resume-overwrite": (
            "VLA_OVERWRITE=1: node 0 moves {folder} aside (kept, not deleted) and training starts fresh",
            "VLA_OVERWRITE=1:0 号节点会把 {folder} 移到一旁(保留,不删除)并重新开始训练",
        ),
        "resume-overwrite-nothing": (
            "VLA_OVERWRITE=1 but {folder} does not exist: fresh start",
            "VLA_OVERWRITE=1,但 {folder} 不存在:全新开始",
        ),
        "resume-no-earlier-run": ("no earlier run in {folder}: fresh start", "{folder} 中没有历史训练:全新开始"),
        "resume-unlistable": (
            "cannot list {folder} ({error}): fresh start",
            "无法读取 {folder}({error}):全新开始",
        ),
        "resume-unlistable-fix": ("Check the permissions of {folder}.", "请检查 {folder} 的权限。"),
        "resume-files-missing": ("missing {names}", "缺少 {names}"),
        "resume-incomplete-step": ("{step} ({reason})", "{step}({reason})"),
        "resume-name-not-a-step": (
            "not a step folder as openpi names it: openpi reads it as step {number} and would load the folder {number}",
            "不是 openpi 命名的步数目录:openpi 会把它读作第 {number} 步,并去加载目录 {number}",
        ),
        "resume-name-crashes-openpi": (
            "digits to Python's isdigit() but no number to int(): openpi's --resume would crash on it",
            "Python 的 isdigit() 认为它是数字,int() 却无法转换:openpi 的 --resume 会因此崩溃",
        ),
        "resume-leftovers": (
            "ignored incomplete checkpoints in {folder}: {leftovers}",
            "已忽略 {folder} 中不完整的检查点:{leftovers}",
        ),
        "resume-leftovers-fix": (
            "They come from an interrupted save; they are never resumed from. Folders above the resumed step are "
            "renamed to *.incomplete-<time>, not deleted.",
            "它们来自中断的保存,不会被用于恢复;高于恢复步的目录会被重命名为 *.incomplete-<time>,不会删除。",
        ),
        "resume-misnamed-fix": (
            "A step folder openpi cannot read by its name is moved aside the same way whenever openpi could pick it; "
            "to resume from one, rename it to its plain step number (00010 -> 10).",
            "openpi 无法按名称读取的步数目录,只要可能被 openpi 选中,也会同样被移到一旁;"
            "如需从它恢复,请把它重命名为纯数字步数(00010 -> 10)。",
        ),
        "resume-no-complete-checkpoint": (
            "no complete checkpoint in {folder}: fresh start",
            "{folder} 中没有完整检查点:全新开始",
        ),
        "resume-from": ("resuming from step {step} in {folder}", "将从 {folder} 的第 {step} 步恢复训练"),
        "resume-finished": (
            "already trained to step {step}: with num_train_steps={steps} and save_interval={interval} openpi "
            "saves no later checkpoint, so there is nothing left to train; `run` exits 0 without starting torchrun",
            "已训练到第 {step} 步:在 num_train_steps={steps}、save_interval={interval} 下 openpi 不会再保存更晚的"
            "检查点,没有剩余训练;`run` 将直接以 0 退出,不启动 torchrun",
        ),
        "resume-finished-fix": (
            "To train further raise num_train_steps (VLA_NUM_TRAIN_STEPS or the job file); to start again set "
            "VLA_OVERWRITE=1 (the old experiment is moved aside, not deleted) or choose a new VLA_EXP_NAME.",
            "如需继续训练,请调大 num_train_steps(VLA_NUM_TRAIN_STEPS 或任务文件);如需重新开始,请设置 "
            "VLA_OVERWRITE=1(旧实验会被移到一旁,不会删除),或更换 VLA_EXP_NAME。",
        ),
        # weights that belong to the model (inspect/weights.py)
        "weights-model": (
            "{family} ({paligemma} + {expert}, {dim}-dim actions)",
            "{family}({paligemma} + {expert},{dim} 维动作)",
        ),
        "weights-match": (
            "{path} fits {model}: its {count} tensors are named and shaped as the model's{dtypes}",
            "{path} 与 {model} 相符:{count} 个张量的名称和形状都与模型一致{dtypes}",
        ),
        "weights-dtypes-converted": (
            " ({count} stored as another float type, which loading converts)",
            "(其中 {count} 个以其他浮点类型存储,加载时会自动转换)",
        ),
        "weights-no-signature": (
            "tensor names and shapes in {path} not compared: no signature of {model} ships with the launcher",
            "未比对 {path} 中的张量名称和形状:启动器没有随附 {model} 的签名",
        ),
        "tokenizer-no-host": ("{variable} names no host", "{variable} 中没有主机名"),
        "tokenizer-no-address": ("the name resolves to no address", "该名称没有解析到任何地址"),
        # train config names (train_configs.py)
        "train-config-known": (
            "train config {name} is one of the {count} configs openpi's {path} defines",
            "训练配置 {name} 是 openpi 的 {path} 定义的 {count} 个配置之一",
        ),
        "train-config-unknown": (
            "train config '{name}' ({where}) is not one of the {count} configs openpi's {path} defines: the trainer "
            'would stop at once with "Config not found", and the norm stats and weights are looked up under that name',
            "训练配置 '{name}'({where})不在 openpi 的 {path} 定义的 {count} 个配置之中:训练脚本会立即因找不到该配置"
            "而退出,归一化统计量与权重也会按这个名称查找",
        ),
        "train-config-unknown-fix": (
            "Set {where} to a config openpi defines, e.g. {example}. {closest} The norm stats and the weights' model "
            "are checked once the name is known.",
            "请把 {where} 设为 openpi 定义的配置名,例如 {example}。{closest}"
            "名称正确后才会检查归一化统计量与权重对应的模型。",
        ),
        "train-config-closest": ("Closest names: {names}.", "最接近的名称:{names}。"),
        "train-config-no-closest": ("No config name is close to it.", "没有与之接近的配置名。"),
        "train-config-unchecked-released": (
            "train config {name} is one of openpi's released configs; not checked against this machine's openpi: "
            "{path}: {reason} (each node checks it in the image)",
            "训练配置 {name} 属于 openpi 发布的配置;未与本机的 openpi 核对:{path}:{reason}(每个节点会在镜像中检查)",
        ),
        "train-config-unchecked": (
            "train config '{name}' ({where}) could not be checked: {path}: {reason}; it is not one of openpi's "
            "released configs",
            "无法核对训练配置 '{name}'({where}):{path}:{reason};它不属于 openpi 发布的配置",
        ),
        "train-config-unchecked-fix": (
            "If it is a config of your own openpi, nothing to do (each node checks it in the image); otherwise fix "
            "{where}. {closest}",
            "如果它是您自己的 openpi 中的配置,则无需处理(每个节点会在镜像中检查);否则请修正 {where}。{closest}",
        ),
        "train-configs-none": (
            "it holds no {call}(name=...) entry",
            "其中没有 {call}(name=...) 条目",
        ),
        "train-configs-syntax": (
            "it is not valid Python (line {line}: {error})",
            "它不是合法的 Python 代码(第 {line} 行:{error})",
        ),
        "train-configs-unparsable": ("it cannot be parsed as Python", "无法按 Python 代码解析"),
        "weights-unknown-model": (
            "tensor names and shapes in {path} not compared: the model of train config {config} (with its "
            "--model flags) is not one the launcher knows",
            "未比对 {path} 中的张量名称和形状:启动器不认识训练配置 {config}(连同其 --model 参数)所用的模型",
        ),
        "weights-other-model": (
            "{path} holds the weights of {found}, but train config {config} builds {expected}: {details}",
            "{path} 是 {found} 的权重,而训练配置 {config} 构建的是 {expected}:{details}",
        ),
        "weights-other-model-fix": (
            "Set VLA_WEIGHTS to weights converted for {expected}, or choose a train config that builds {found}.",
            "请把 VLA_WEIGHTS 指向为 {expected} 转换的权重,或改用构建 {found} 的训练配置。",
        ),
        "weights-partial": (
            "{path} is a partial conversion: {details}",
            "{path} 是不完整的转换结果:{details}",
        ),
        "weights-mismatch": (
            "{path} does not fit {expected}, the model of train config {config}: {details}",
            "{path} 与训练配置 {config} 的模型 {expected} 不符:{details}",
        ),
        "weights-convert-fix": (
            "Convert the checkpoint again with openpi's examples/convert_jax_model_to_pytorch.py --config_name "
            "{config} (it writes every tensor of the model), then copy model.safetensors to {weights} whole.",
            "请用 openpi 的 examples/convert_jax_model_to_pytorch.py --config_name {config} 重新转换检查点"
            "(它会写出模型的全部张量),再把 model.safetensors 完整复制到 {weights}。",
        ),
        "weights-names-missing": (
            "{count} of the model's {total} tensors missing (first: {names})",
            "缺少模型 {total} 个张量中的 {count} 个(前几个:{names})",
        ),
        "weights-names-extra": (
            "tensors the model does not have: {count} (first: {names})",
            "模型中没有的张量:{count} 个(前几个:{names})",
        ),
        "weights-shapes-differ": (
            "tensors shaped otherwise: {count} (first: {name} is {found} where the model's is {expected})",
            "形状不同的张量:{count} 个(例如 {name} 为 {found},模型中为 {expected})",
        ),
        "weights-not-float": (
            "{path}: tensors holding integers where the model has floats: {count} (first: {name} as {dtype}); "
            "loading converts them, so training would start from meaningless values",
            "{path}:模型中为浮点数、文件里却是整数的张量:{count} 个(例如 {name} 为 {dtype});加载时会被转换,"
            "训练将从无意义的数值开始",
        ),
        "weights-not-float-fix": (
            "Use weights converted to float32 or bfloat16 by openpi's examples/convert_jax_model_to_pytorch.py.",
            "请使用 openpi 的 examples/convert_jax_model_to_pytorch.py 转换为 float32 或 bfloat16 的权重。",
        ),
        "weights-orbax": (
            "{weights} is a JAX (orbax) checkpoint ({markers}) without model.safetensors: openpi's PyTorch trainer "
            "loads only model.safetensors",
            "{weights} 是 JAX(orbax)检查点({markers}),没有 model.safetensors:openpi 的 PyTorch 训练只加载 "
            "model.safetensors",
        ),
        "weights-orbax-fix": (
            "Convert it with openpi's script: python examples/convert_jax_model_to_pytorch.py --checkpoint_dir "
            "{checkpoint} --config_name {config} --output_path {output} (the script reads a pi05 checkpoint as pi05 "
            "only when 'pi05' is part of that path), then set VLA_WEIGHTS to {output}.",
            "请用 openpi 的脚本转换:python examples/convert_jax_model_to_pytorch.py --checkpoint_dir {checkpoint} "
            "--config_name {config} --output_path {output}(只有路径中含 'pi05' 时,脚本才按 pi05 读取检查点),"
            "然后把 VLA_WEIGHTS 设为 {output}。",
        ),
        # assets: what openpi's trainer itself refuses (docs/validation.md)
        "norm-stats-dims-short": (
            "'norm_stats.{key}' has {stats} values, the dataset's '{feature}' {data}",
            "'norm_stats.{key}' 只有 {stats} 个值,数据集的 '{feature}' 有 {data} 维",
        ),
        "norm-stats-dims": (
            "{short} ({info}): openpi's normalisation cannot broadcast stats shorter than the data, so the trainer "
            "fails before its first step",
            "{short}({info}):openpi 归一化时无法把短于数据的统计量广播到数据上,训练脚本会在第一步之前失败",
        ),
        "norm-stats-dims-single": (
            "{short} ({info}): openpi broadcasts a single value to every dimension, so training starts but normalises "
            "all of them with that one value, unlike norm stats computed from this dataset",
            "{short}({info}):openpi 会把单个值广播到每一维,训练可以启动,但所有维度都用这一个值归一化,"
            "与基于该数据集计算的统计量不同",
        ),
        "norm-stats-dims-fix": (
            "Recompute the norm stats from this dataset with openpi's scripts/compute_norm_stats.py --config-name "
            "{config} and copy the norm_stats.json it writes to {path}.",
            "请用 openpi 的 scripts/compute_norm_stats.py --config-name {config} 基于该数据集重新计算归一化统计量,"
            "再把生成的 norm_stats.json 复制到 {path}。",
        ),
        "weights-config-unused": (
            "{path}: {problem}; openpi's trainer reads only model.safetensors, so training is not affected",
            "{path}:{problem};openpi 训练脚本只读取 model.safetensors,训练不受影响",
        ),
        "weights-config-fix": (
            "To keep the weights folder whole, copy config.json from the converted checkpoint to {weights} again.",
            "如需保持权重目录完整,请把转换所得检查点中的 config.json 重新复制到 {weights}。",
        ),
        "weights-none": (
            "no base weights: weights is 'none' ({where}), so {config} starts from random initialisation (the "
            "trainer gets {flag}, which also replaces the config's own weight path)",
            "不使用基座权重:weights 为 'none'({where}),因此 {config} 从随机初始化开始训练(训练脚本收到 {flag},"
            "它也会替换该配置自带的权重路径)",
        ),
        "tokenizer-no-gcsfs": (
            "the PaliGemma tokenizer is not staged and openpi cannot download it: fetching {url} needs the gcsfs "
            "package, which this Python ({python}) lacks; the trainer fails before its first step",
            "PaliGemma 分词器未就位,openpi 也无法下载:获取 {url} 需要 gcsfs 包,而当前 Python({python})未安装;"
            "训练脚本会在第一步之前失败",
        ),
        "tokenizer-unreachable": (
            "the PaliGemma tokenizer is not staged and openpi cannot download it: {endpoint}, where {url} comes from, "
            "is unreachable from this machine ({reason})",
            "PaliGemma 分词器未就位,openpi 也无法下载:本机连不上 {url} 所在的 {endpoint}({reason})",
        ),
        "tokenizer-unknown": (
            "the PaliGemma tokenizer is not staged, and whether openpi can download it is unclear: {endpoint} did "
            "not answer within {seconds:g} s",
            "PaliGemma 分词器未就位,openpi 能否下载尚不确定:{endpoint} 在 {seconds:g} 秒内没有应答",
        ),
        "tokenizer-reachable": (
            "openpi can download the PaliGemma tokenizer from here: gcsfs is installed and {endpoint} accepts "
            "connections",
            "openpi 可以在本机下载 PaliGemma 分词器:已安装 gcsfs,{endpoint} 可以连接",
        ),
        "tokenizer-stage-fix": (
            'Copy paligemma_tokenizer.model to {target}; the launcher then points openpi there (README, "Preparing '
            'the assets").',
            "请把 paligemma_tokenizer.model 复制到 {target},启动器会让 openpi 从那里读取(见 README 准备资源一节)。",
        ),
    },
)


def shown(value: str, limit: int = 120) -> str:
    """A value someone wrote, safe to print: unprintable characters escaped, at most `limit` characters (cut with
    '…')."""
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in value[:limit])
    return text + "…" if len(value) > limit else text


def verbatim(value: str) -> Text:
    """A value shown the same in both languages (a variable name, a file name) where a field wants a `Text`."""
    return Text(value, value)


def joined(texts: Iterable[Text], separator: str = ", ") -> Text:
    """Texts listed one after another, each language with its own."""
    items = list(texts)
    return Text(separator.join(t.en for t in items), separator.join(t.zh for t in items))
