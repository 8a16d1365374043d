"""What TACO says: the plan's findings, activation's log lines, the end-of-job verdict and the image-build bake."""

from __future__ import annotations

from entrypoint.core.messages import Catalogue

MESSAGES = Catalogue(
    "taco",
    {
        # a TACO problem, by mode
        "required": (
            "TACO is required (VLA_TACO=on) but cannot be used: {what}",
            "要求使用 TACO(VLA_TACO=on),但无法使用:{what}",
        ),
        "skipped": (
            "TACO skipped, training starts without it: {what}",
            "已跳过 TACO,训练将在无加速的情况下启动:{what}",
        ),
        "skipped-fix": ("{fix} (VLA_TACO=off silences this.)", "{fix}(设置 VLA_TACO=off 可不再提示。)"),
        # the plan
        "off": ("TACO acceleration is off (VLA_TACO=off)", "TACO 加速已关闭(VLA_TACO=off)"),
        "off-reason": ("VLA_TACO=off", "已关闭(VLA_TACO=off)"),
        "interpreter": ("{name} ({tag}, …)", "{name}({tag}, …)"),
        "interpreter-no-tags": ("an interpreter with no known tags", "没有已知标签的解释器"),
        "wrong-python": (
            "{file} is built for {wheel_tags}, which this interpreter, {interpreter}, cannot load",
            "{file} 为 {wheel_tags} 构建,当前解释器 {interpreter} 无法加载",
        ),
        "wrong-python-fix": (
            "Use the VLA base image (CPython 3.12), or a taco_train wheel built for this Python.",
            "请使用 VLA 基础镜像(CPython 3.12),或为当前 Python 构建的 taco_train wheel。",
        ),
        "baked-broken": (
            "the image's {folder} has no valid WHEEL.json or no taco_train/prelude/sitecustomize.py",
            "镜像中的 {folder} 缺少有效的 WHEEL.json 或 taco_train/prelude/sitecustomize.py",
        ),
        "baked-no-wheel": (
            "the image's WHEEL.json names no wheel: {error}",
            "镜像的 WHEEL.json 未给出合法 wheel:{error}",
        ),
        "rebuild-fix": (
            "Rebuild the image with the openpi-taco bake target.",
            "请用 openpi-taco 构建目标重新构建镜像。",
        ),
        "baked-mismatch": (
            "the baked wheel {file} has sha256 {actual}, not the pinned {expected}",
            "镜像内置的 {file} 的 sha256 为 {actual},与固定值 {expected} 不符",
        ),
        "baked-mismatch-fix": (
            "Pin the baked wheel's checksum, or rebuild the image with the wheel you pinned.",
            "请固定内置 wheel 的校验和,或用所固定的 wheel 重新构建镜像。",
        ),
        "no-wheel": (
            "the image has no baked TACO wheel and VLA_TACO_WHEEL is none",
            "镜像未内置 TACO wheel,且 VLA_TACO_WHEEL 为 none",
        ),
        "no-wheel-fix": (
            "Set VLA_TACO_WHEEL to the wheel's path or https URL, or use the openpi-taco image.",
            "请把 VLA_TACO_WHEEL 设为 wheel 的路径或 https 地址,或使用 openpi-taco 镜像。",
        ),
        "wheel-setting": ("{where}: {what}", "{where}:{what}"),
        "scheme-fix": (
            "{where}: {fix} (Plain http needs VLA_TACO_ALLOW_HTTP=1.)",
            "{where}:{fix}(明文 http 需设置 VLA_TACO_ALLOW_HTTP=1。)",
        ),
        "not-a-wheel": (
            "{source} is not a wheel file name: a wheel is named <name>-<version>(-<build>)-<python tag>-<abi tag>-"
            "<platform tag>.whl",
            "{source} 不是 wheel 文件名:wheel 的文件名应为 <名称>-<版本>(-<构建号>)-<Python 标签>-<ABI 标签>-"
            "<平台标签>.whl",
        ),
        "not-a-wheel-fix": (
            "Point {where} at a taco_train-<version>-<tags>.whl file.",
            "请让 {where} 指向 taco_train-<版本>-<标签>.whl 文件。",
        ),
        "another-package": ("{file} is a {name} wheel, not taco_train", "{file} 是 {name} 的 wheel,而不是 taco_train"),
        "another-package-fix": (
            "Point {where} at the taco_train wheel.",
            "请让 {where} 指向 taco_train 的 wheel。",
        ),
        "wheel-missing": ("the TACO wheel {path} does not exist", "TACO wheel {path} 不存在"),
        "wheel-missing-fix": (
            "Check the path (relative paths are under the assets root) and that the storage is mounted.",
            "请检查路径(相对路径基于资源根目录)以及存储是否已挂载。",
        ),
        "wheel-unreadable": ("cannot read the TACO wheel {path}: {error}", "无法读取 TACO wheel {path}:{error}"),
        "wheel-unreadable-fix": (
            "Check that the file is readable and that the storage is mounted.",
            "请确认该文件可读,且存储已挂载。",
        ),
        "wheel-mismatch": (
            "the TACO wheel {path} has sha256 {actual}, not the pinned {expected}",
            "TACO wheel {path} 的 sha256 为 {actual},与固定值 {expected} 不符",
        ),
        "wheel-mismatch-fix": (
            "Pin the wheel you mean to use (VLA_TACO_WHEEL_SHA256 = the output of `sha256sum {path}`), "
            "or point VLA_TACO_WHEEL at the wheel you pinned.",
            "请固定要使用的 wheel(VLA_TACO_WHEEL_SHA256 设为 `sha256sum {path}` 的输出),"
            "或让 VLA_TACO_WHEEL 指向所固定的 wheel。",
        ),
        "bad-sha256": (
            "VLA_TACO_WHEEL_SHA256={value!r} is not a sha256 (64 hex digits)",
            "VLA_TACO_WHEEL_SHA256={value!r} 不是 sha256(64 位十六进制)",
        ),
        "bad-sha256-fix": (
            "Set it to the output of `sha256sum <wheel>`, or unset it.",
            "请设为 `sha256sum <wheel>` 的输出,或取消设置。",
        ),
        "baked-reason": ("the image has {wheel} baked in", "镜像已内置 {wheel}"),
        "wheel-ignored": (
            "VLA_TACO_WHEEL is ignored: the image has {wheel} baked in",
            "VLA_TACO_WHEEL 被忽略:镜像已内置 {wheel}",
        ),
        "wheel-ignored-fix": (
            "Use the openpi image (without TACO baked in) to install another wheel at start.",
            "如需在启动时安装其他 wheel,请使用未内置 TACO 的 openpi 镜像。",
        ),
        "install-reason": (
            "no wheel baked into the image; {wheel} is installed at start",
            "镜像未内置 wheel;启动时安装 {wheel}",
        ),
        "unpinned": (
            "the TACO wheel {source} is not pinned: it is installed unverified",
            "TACO wheel {source} 未固定校验和:将不经校验安装",
        ),
        "unpinned-fix": (
            "Set VLA_TACO_WHEEL_SHA256 to the wheel's sha256 so a changed or corrupted file is refused.",
            "请设置 VLA_TACO_WHEEL_SHA256 为 wheel 的 sha256,以拒绝被篡改或损坏的文件。",
        ),
        "unknown-features": (
            "TACO feature(s) {names} are not documented; the wheel may ignore them",
            "TACO 特性 {names} 不在文档列表中,wheel 可能忽略它们",
        ),
        "unknown-features-fix": (
            "Check the spelling; documented: {known}, or auto.",
            "请检查拼写;文档中的特性:{known},或 auto。",
        ),
        "how-baked": ("baked into the image at {prefix}", "已内置于镜像 {prefix}"),
        "how-install": ("installed at start from {source} into {prefix}", "启动时从 {source} 安装到 {prefix}"),
        "ready": (
            "TACO: {wheel} {how}; features {features} (profile {profile})",
            "TACO:{wheel} {how};特性 {features}(模型类型 {profile})",
        ),
        # activation, on the way to launch
        "downloaded": (
            "TACO: downloaded {wheel} ({size} bytes, {attempts} attempt(s)) in {seconds:.1f}s",
            "TACO:已下载 {wheel}({size} 字节,尝试 {attempts} 次),用时 {seconds:.1f} 秒",
        ),
        "unpinned-log": (
            "TACO: {wheel} is unpinned (sha256 {sha256}); set VLA_TACO_WHEEL_SHA256 to enforce it",
            "TACO:{wheel} 未固定校验和(sha256 {sha256});设置 VLA_TACO_WHEEL_SHA256 即可强制校验",
        ),
        "installed": (
            "TACO: installed {wheel} into {prefix} in {seconds:.1f}s",
            "TACO:已把 {wheel} 安装到 {prefix},用时 {seconds:.1f} 秒",
        ),
        "active": (
            "TACO active: {wheel}{version} from {prefix}, features {features}; ready in {seconds:.2f}s",
            "TACO 已启用:{wheel}{version},来自 {prefix},特性 {features};准备用时 {seconds:.2f} 秒",
        ),
        "pip-failed": (
            "pip could not install {wheel} into {prefix}: {why}",
            "pip 无法把 {wheel} 安装到 {prefix}:{why}",
        ),
        "pip-failed-fix": (
            "Check that the wheel is intact and that the temp folder is writable with free space.",
            "请确认 wheel 完好,且临时目录可写并有剩余空间。",
        ),
        "pip-timeout": ("pip did not finish within {seconds:g} s", "pip 未在 {seconds:g} 秒内完成"),
        "pip-cannot-run": ("cannot run {python}: {error}", "无法运行 {python}:{error}"),
        "pip-exit": ("pip exited with {code}", "pip 退出码为 {code}"),
        "pip-exit-output": ("pip exited with {code}: {output}", "pip 退出码为 {code}:{output}"),
        "verify-fix": (
            "Check that nothing earlier on PYTHONPATH shadows the prelude, and that the wheel matches this Python.",
            "请确认 PYTHONPATH 中没有更靠前的条目遮蔽 prelude,且 wheel 与当前 Python 匹配。",
        ),
        "verify-timeout": ("no answer within {seconds} s", "{seconds} 秒内没有结果"),
        "verify-unfinished": (
            "the TACO check in a child interpreter did not finish: {error}",
            "子解释器中的 TACO 检查未完成:{error}",
        ),
        "verify-failed": (
            "the TACO check in a child interpreter failed (exit {code}): {errors}",
            "子解释器中的 TACO 检查失败(退出码 {code}):{errors}",
        ),
        "prelude-not-run": (
            "training processes would not run the TACO prelude {prelude}/sitecustomize.py ({detail})",
            "训练进程不会执行 TACO prelude {prelude}/sitecustomize.py({detail})",
        ),
        "prelude-shadowed": ("it imported {site}", "实际导入的是 {site}"),
        "prelude-not-loaded": ("the prelude did not load", "prelude 未加载"),
        "prelude-not-loaded-errors": ("the prelude did not load: {errors}", "prelude 未加载:{errors}"),
        "not-importable": (
            "taco_train is not importable from {prefix} (found: {origin})",
            "无法从 {prefix} 导入 taco_train(实际:{origin})",
        ),
        "cannot-prepare": ("cannot prepare TACO in {prefix}: {error}", "无法在 {prefix} 准备 TACO:{error}"),
        "cannot-prepare-fix": (
            "Make the temp folder (TMPDIR) writable with free space.",
            "请确保临时目录(TMPDIR)可写且有剩余空间。",
        ),
        # the end-of-job verdict
        "outcome-off": ("TACO: off (VLA_TACO=off)", "TACO:已关闭(VLA_TACO=off)"),
        "outcome-not-used": (
            "TACO: NOT USED — training ran without acceleration ({reason})",
            "TACO:未使用 — 训练在无加速的情况下运行({reason})",
        ),
        "outcome-on-node-0": (
            "TACO: active on this node; rank 0's optimization summary is in node 0's log",
            "TACO:本节点已启用;rank 0 的优化汇总见节点 0 的日志",
        ),
        "outcome-unconfirmed": (
            "TACO: UNCONFIRMED — rank 0 printed no taco-train optimization summary; "
            "compare step time or samples/s to confirm a speed-up",
            "TACO:未确认 — rank 0 未输出 taco-train 优化汇总;请对比步时或每秒样本数确认是否加速",
        ),
        "outcome-applied": ("APPLIED", "已生效"),
        "outcome-partial": ("PARTIAL", "部分生效"),
        "outcome-not-applied": ("NOT APPLIED", "未生效"),
        "outcome-count": ("{applied} feature(s) applied", "{applied} 项特性已应用"),
        "outcome-count-requested": (
            "{applied} of {requested} requested feature(s) applied",
            "请求的 {requested} 项特性中 {applied} 项已应用",
        ),
        "outcome-none": ("none", "无"),
        "outcome-not-in-summary": ("(not in the summary)", "(汇总中未出现)"),
        "outcome": ("TACO: {head} — {count}: {done}", "TACO:{head} — {count}:{done}"),
        "outcome-missing": (
            "TACO: {head} — {count}: {done}; not applied: {missing}",
            "TACO:{head} — {count}:{done};未应用:{missing}",
        ),
        # the image build
        "bake-count": (
            "the build context 'taco' must hold exactly one taco_train-*.whl; it holds {found}",
            "构建上下文 'taco' 中必须恰好有一个 taco_train-*.whl;实际为 {found}",
        ),
        "bake-nothing": ("nothing", "无"),
        "bake-count-fix": (
            "Put the wheel alone in the folder that the bake variable TACO_WHEEL_DIR names (default ./taco-wheel).",
            "请把该 wheel 单独放在 bake 变量 TACO_WHEEL_DIR 指定的目录中(默认 ./taco-wheel)。",
        ),
        "bake-bad-name": (
            "{file} is not a valid wheel file name: {error}",
            "{file} 不是合法的 wheel 文件名:{error}",
        ),
        "bake-bad-name-fix": ("Keep the wheel's original file name.", "请保留 wheel 的原始文件名。"),
        "bake-another-package-fix": (
            "Put the taco_train wheel in TACO_WHEEL_DIR.",
            "请把 taco_train wheel 放入 TACO_WHEEL_DIR。",
        ),
        "bake-wrong-python": (
            "{file} is tagged {wheel_tags}, but this image's python3 is {interpreter}: it cannot load it",
            "{file} 的标签为 {wheel_tags},而本镜像的 python3 为 {interpreter}:无法加载",
        ),
        "bake-wrong-python-fix": (
            "Use a taco_train wheel built for this image's Python (cp312 for the VLA base), "
            "or build the openpi target without TACO.",
            "请使用为本镜像 Python 构建的 taco_train wheel(VLA 基础镜像为 cp312),或构建不含 TACO 的 openpi 目标。",
        ),
        "bake-pip-failed": ("pip could not install {file}: {why}", "pip 无法安装 {file}:{why}"),
        "bake-pip-failed-fix": (
            "Check that the wheel file is intact (compare its sha256 with the published one).",
            "请确认 wheel 文件完好(与发布的 sha256 比对)。",
        ),
        "bake-no-prelude": (
            "{file} has no taco_train/prelude/sitecustomize.py",
            "{file} 中没有 taco_train/prelude/sitecustomize.py",
        ),
        "bake-no-prelude-fix": (
            "Use the taco_train wheel: its prelude is what activates the features.",
            "请使用 taco_train wheel:其 prelude 负责启用各项特性。",
        ),
        "baked": (
            "TACO baked: {file} (sha256 {sha256}) into {prefix}: {size} bytes ({mib:.1f} MiB) in this layer",
            "TACO 已内置:{file}(sha256 {sha256})安装到 {prefix}:本层 {size} 字节({mib:.1f} MiB)",
        ),
        "bake-error": ("error: {what}\n  fix: {fix}", "错误:{what}\n解决:{fix}"),
        "bake-usage": (
            "usage: python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX",
            "用法:python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX",
        ),
    },
)
