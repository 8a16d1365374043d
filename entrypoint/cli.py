"""Command line: `vla-entrypoint [run|check|plan|preflight|report|fetch-assets] [--json] [settings flags]`.

With no arguments it runs the job (the container's default command). Every settings flag has a `VLA_*`
variable twin, listed in `--help`. Exit codes: 0 success, 2 job mis-specified (a bad command line too: argparse's
English usage errors come out through the catalogue), 3 preflight failed, 93 do not requeue, 124 stalled, 75 node
lost, 141 output pipe closed, 74 output not written, otherwise training's own (128+N after signal N). `--help` is
written in the language `VLA_LANG`/`LANG` picks, like every other message.

Start-up cost matters (this is the container's entrypoint): each command imports only what it uses. `fetch-assets`
and the download stack are imported only for `fetch-assets` itself; a sub-command's flags are added to the parser
only when that sub-command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from entrypoint import __version__
from entrypoint.core.errors import ExitCode, JobMisspecified, PreflightFailed, UserError
from entrypoint.core.findings import Status
from entrypoint.core.host import Host
from entrypoint.core.masking import mask_json, masked
from entrypoint.core.messages import Catalogue, Lang, Text, language, render, shows_chinese
from entrypoint.core.oserror import os_error_text
from entrypoint.core.report import command_line, health_summary, problem_block
from entrypoint.core.settings import KEYS, Kind

if TYPE_CHECKING:
    from entrypoint.inspect.scope import Scope
    from entrypoint.plan import Plan

M = Catalogue(
    "cli",
    {
        "check-heading": (
            "node {rank} of {nnodes}, {nproc} process(es) per node",
            "第 {rank} 个节点(共 {nnodes} 个),每节点 {nproc} 个进程",
        ),
        "check-assets-heading": (
            "the CFS tree, for a job of {nnodes} node(s) x {per_node} GPU(s) (--nodes, --gpus-per-node); "
            "node checks skipped",
            "CFS 目录,按 {nnodes} 个节点 x 每节点 {per_node} 个 GPU 的任务检查(--nodes、--gpus-per-node);跳过节点检查",
        ),
        "check-shape-without-assets": (
            "{flag} applies only to check --assets",
            "{flag} 仅适用于 check --assets",
        ),
        "check-shape-without-assets-fix": (
            "Add --assets to check the CFS tree for that job shape; on a node the shape comes from TI-ONE's "
            "variables and the GPUs present.",
            "请加上 --assets,按该任务规模检查 CFS 目录;在节点上,任务规模来自 TI-ONE 的变量与实际 GPU。",
        ),
        "no-gpu-dev-machine": (
            "{fix} On the dev machine, vla-entrypoint check --assets checks the CFS tree without a GPU.",
            "{fix}在开发机上,可用 vla-entrypoint check --assets 在没有 GPU 的情况下检查 CFS 目录。",
        ),
        "preflight-heading": ("bandwidth preflight", "带宽预检"),
        "environment": ("environment exported to training:", "导出给训练进程的环境变量:"),
        "kept": ("kept as already set:", "保留(已设置):"),
        "removed": (
            "removed (node-level or inherited torchrun variables):",
            "移除(节点级或继承的 torchrun 变量):",
        ),
        "resume": ("resume: {action}", "续训:{action}"),
        "resume-from": ("resume: {action} from step {step}", "续训:{action},从第 {step} 步开始"),
        "resume-action-fresh": ("fresh", "全新开始"),
        "resume-action-resume": ("resume", "从检查点续训"),
        "resume-action-overwrite": ("overwrite", "移开旧实验后全新开始"),
        "resume-action-finished": ("finished", "已训练完成"),
        "node-log": ("node log: {log}", "节点日志:{log}"),
        "node-log-none": ("node log: none ({reason})", "节点日志:无({reason})"),
        "nccl-debug": ("NCCL debug: {reason}", "NCCL 调试:{reason}"),
        "memlock": ("locked memory: {reason}", "锁定内存:{reason}"),
        "preflight": ("preflight: {reason}", "预检:{reason}"),
        "health": ("health: {reason}", "健康检查:{reason}"),
        "command": ("command:", "命令:"),
        "usage-unknown-command": ("unknown command '{command}'", "未知命令 '{command}'"),
        "usage-unknown-command-fix": (
            "Use one of: {commands} (vla-entrypoint --help describes them).",
            "请使用以下命令之一:{commands}(vla-entrypoint --help 有说明)。",
        ),
        "usage-command-did-you-mean": ("Did you mean '{command}'? {fix}", "是否应为 '{command}'?{fix}"),
        "usage-invalid-choice": ("{flag}: {value} is not one of {choices}", "{flag}:{value} 不在可选值 {choices} 之中"),
        "usage-invalid-choice-fix": ("Give {flag} one of: {choices}.", "请为 {flag} 指定以下取值之一:{choices}。"),
        "usage-missing-value": ("{flag} needs a value", "{flag} 缺少取值"),
        "usage-missing-value-fix": (
            "Write the value right after {flag} (see {prog} --help).",
            "请在 {flag} 之后紧接着写上取值(参见 {prog} --help)。",
        ),
        "usage-invalid-value": ("{flag}: {value} is not {kind}", "{flag}:{value} 不是{kind}"),
        "usage-kind-int": ("a whole number", "整数"),
        "usage-kind-float": ("a number", "数字"),
        "usage-kind-other": ("a valid {type} value", "合法的 {type} 值"),
        "usage-takes-no-value": ("{flag} takes no value (given {value})", "{flag} 不接受取值(给出了 {value})"),
        "usage-takes-no-value-fix": (
            "Write the switch alone, without '=': {flag}.",
            "请单独写开关,不要带 '=':{flag}。",
        ),
        "usage-setting-variable": (
            "{prog} has no {flag} flag; the setting is still read from {variable} and the job file.",
            "{prog} 没有 {flag} 参数;该设置仍从 {variable} 与任务文件读取。",
        ),
        "usage-unknown-arguments": ("{prog} does not know {arguments}", "{prog} 无法识别 {arguments}"),
        "usage-did-you-mean": (
            "Did you mean {flag}? ({prog} --help lists the flags.)",
            "是否应为 {flag}?({prog} --help 列出全部参数。)",
        ),
        "usage-help-fix": ("See {prog} --help for the valid flags and values.", "有效的参数与取值见 {prog} --help。"),
        "usage-other": ("invalid command line: {message}", "命令行无效:{message}"),
        "output-failed": ("cannot write the output ({error})", "无法写出输出({error})"),
        # --help
        "help-description": (
            "Launch openpi training on TI-ONE: read the platform's variables, verify assets, decide resume, start "
            "torchrun.",
            "在 TI-ONE 上启动 openpi 训练:读取平台变量,校验资源,决定是否续训,再启动 torchrun。",
        ),
        "help-run": ("verify, then start training with torchrun (the default)", "校验后用 torchrun 启动训练(默认命令)"),
        "help-check": (
            "run every inspection; launch nothing, change nothing (the dev machine: check --assets)",
            "执行全部检查;不启动、不修改任何内容(开发机上用 check --assets)",
        ),
        "help-plan": (
            "inspections plus the resolved launch: environment, command, node files; change nothing",
            "检查并给出完整的启动方案:环境变量、命令、节点文件;不修改任何内容",
        ),
        "help-preflight": (
            "all-reduce bandwidth over every GPU of every node via torchrun (run it on every node)",
            "通过 torchrun 测量所有节点所有 GPU 的 all-reduce 带宽(需在每个节点上同时运行)",
        ),
        "help-fetch-assets": (
            "download and unpack the openpi-assets tree (dev machine, once): resumable, verified, then checked",
            "下载并解压 openpi-assets 目录(开发机上执行一次):可断点续传,校验后再检查",
        ),
        "help-json": ("print one JSON object instead of text", "输出一个 JSON 对象而不是文本"),
        "help-report": (
            "one self-contained HTML page of the whole job (every node and run of the experiment: the cause, a "
            "timeline, loss and step-time charts, checkpoints, exit codes, transport, TACO), written to "
            "<log_dir>/<exp_name>-report.html",
            "整个任务的单个自包含 HTML 页面(实验的所有节点与各次运行:原因摘要、时间线、loss 与步时曲线、检查点、"
            "退出码、传输方式、TACO),写到 <log_dir>/<exp_name>-report.html",
        ),
        "help-report-out": (
            "write the page here instead of <log_dir>/<exp_name>-report.html",
            "把页面写到此处,而不是 <log_dir>/<exp_name>-report.html",
        ),
        "help-assets": (
            "the dev machine (CFS mounted; no GPU, torchrun, openpi or TI-ONE variables needed): check the CFS tree "
            "only: assets (norm stats, weights, dataset, tokenizer), code/job.yaml, resume, checkpoint storage and "
            "free space, and the batch for the job shape below; checks only a node can make (GPUs, RDMA/NCCL, locked "
            "memory, trainer, torchrun, transformers patch, TACO wheel) are shown as SKIP and never fail. Exit 0 on a "
            "good tree",
            "用于开发机(已挂载 CFS;无需 GPU、torchrun、openpi 或 TI-ONE 变量):只检查 CFS 目录:资源(归一化统计量、"
            "权重、数据集、分词器)、code/job.yaml、续训、检查点存储与剩余空间,以及按下面的任务规模检查 batch;"
            "只有节点才能做的检查(GPU、RDMA/NCCL、锁定内存、训练脚本、torchrun、transformers 补丁、TACO wheel)"
            "显示为 SKIP,不会导致失败。目录完好时以 0 退出",
        ),
        "help-nodes": (
            "with --assets: the job's node count (default: TI-ONE's WORLD_SIZE when set, else 1)",
            "与 --assets 一起使用:任务的节点数(默认:已设置时取 TI-ONE 的 WORLD_SIZE,否则为 1)",
        ),
        "help-gpus": (
            "with --assets: GPUs per node (default: TI-ONE's GPU_NUM_PER_NODE when set, else 8; 1 with --device cpu)",
            "与 --assets 一起使用:每个节点的 GPU 数(默认:已设置时取 TI-ONE 的 GPU_NUM_PER_NODE,否则为 8;"
            "--device cpu 时为 1)",
        ),
        "help-settings": ("job settings (each also a VLA_* variable)", "任务设置(每项也可用 VLA_* 变量设置)"),
        "help-job-file": ("YAML job file [env VLA_JOB_FILE]", "YAML 任务文件 [变量 VLA_JOB_FILE]"),
        "help-setting": ("{help} [env {env}; default {default}]", "{help} [变量 {env};默认 {default}]"),
        "help-last": ("(must come last)", "(必须放在最后)"),
        "help-exit-codes": (
            "exit codes:\n"
            "  0      success\n"
            "  2      the job is mis-specified: bad YAML, bad variable, contradictory settings, bad command line\n"
            "  3      a preflight check failed: missing or corrupt assets, impossible topology, node 0 unreachable\n"
            "  93     do not requeue: in-job restarts cannot help (VLA_MAX_RESTARTS spent, two attempts without "
            "progress, or the same exception twice)\n"
            "  124    stalled: the watchdog ended a job without progress and without a restart left "
            "(VLA_STALL_ACTION=fail)\n"
            "  75     a node was lost or never started (named by rank and host); every node ends with it; resubmit\n"
            "  141    the output pipe closed early (| head)\n"
            "  74     the output could not be written (a full disk)\n"
            "  other  training's own exit code (128+N when ended by signal N)\n"
            "settings precedence: defaults < /etc/vla-entrypoint/job.yaml < job file (VLA_JOB_FILE or "
            "<assets_root>/code/job.yaml) < VLA_* variables < these flags",
            "退出码:\n"
            "  0      成功\n"
            "  2      任务配置有误:YAML、变量取值、矛盾的设置、命令行有误\n"
            "  3      预检失败:资源缺失或损坏、拓扑不成立、连不上 0 号节点\n"
            "  93     请勿重新排队:任务内重启无济于事(VLA_MAX_RESTARTS 已用完、连续两次没有进展,或两次抛出相同异常)\n"
            "  124    训练卡住:看门狗结束了没有进展且没有剩余重启次数的任务(VLA_STALL_ACTION=fail)\n"
            "  75     节点丢失或始终未启动(按编号和主机名指出);所有节点以此结束;请重新提交任务\n"
            "  141    输出管道提前关闭(| head)\n"
            "  74     无法写出输出(磁盘已满)\n"
            "  其他   训练本身的退出码(被信号 N 终止时为 128+N)\n"
            "设置优先级:默认值 < /etc/vla-entrypoint/job.yaml < 任务文件(VLA_JOB_FILE 或 "
            "<assets_root>/code/job.yaml) < VLA_* 变量 < 这些命令行参数",
        ),
        "help-fetch-exit-codes": (
            "exit codes: 0 done and checked; 2 bad manifest, URL or entry name; 3 a download, verification, disk or "
            "check failure (run again to resume)",
            "退出码:0 完成并检查通过;2 清单、URL 或条目名有误;3 下载、校验、磁盘或检查失败(再次运行即可续传)",
        ),
        "help-fetch-description": (
            "{help} (see the README's 'Preparing the assets')",
            "{help}(参见 README 中准备资源(Preparing assets)一节)",
        ),
    },
)
PIPE_CLOSED = 128 + signal.SIGPIPE  # what a shell reports for a writer ended by SIGPIPE
OUTPUT_FAILED = 74  # EX_IOERR (sysexits.h): stdout could not be written (a full disk, /dev/full)
# The settings the bandwidth preflight reads (the job file and assets root only locate the job file).
PREFLIGHT_KEYS = (
    "assets_root",
    "device",
    "rendezvous_timeout",
    "master_wait_timeout",
    "preflight_timeout",
    "preflight_min_busbw",
)
# The settings `report` reads: where the experiment's files are.
REPORT_KEYS = ("assets_root", "log_dir", "exp_name")
FETCH_ASSETS = "fetch-assets"


class _Parser(argparse.ArgumentParser):
    """argparse that raises a `JobMisspecified` (exit 2, both languages, a fix) instead of printing an English
    usage error; `commands` holds the sub-command parsers, for suggestions."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        raise usage_error(self.prog, message)


_USAGE = (
    ("choice", re.compile(r"argument (?P<flag>\S+): invalid choice: (?P<value>.+?) \(choose from (?P<choices>.*)\)$")),
    ("missing", re.compile(r"argument (?P<flag>\S+): expected (?:one|at least one) argument$")),
    ("value", re.compile(r"argument (?P<flag>\S+): invalid (?P<type>\w+) value: (?P<value>.*)$")),
    ("unknown", re.compile(r"unrecognized arguments: (?P<arguments>.*)$")),
    ("explicit", re.compile(r"argument (?P<flag>\S+): ignored explicit argument (?P<value>.*)$")),
)


def usage_error(prog: str, message: str) -> JobMisspecified:
    """argparse's English `message` as the catalogue's error, naming the flag (or the command line)."""
    for kind, pattern in _USAGE:
        match = pattern.match(message)
        if match is None:
            continue
        fields = match.groupdict()
        if kind == "choice" and fields["flag"] == "COMMAND":
            import difflib

            command = fields["value"].strip("'")
            what = M("usage-unknown-command", command=command)
            names = [name.strip(" '") for name in fields["choices"].split(",")]
            close = difflib.get_close_matches(command, names, n=1, cutoff=0.6)
            fix = M("usage-unknown-command-fix", commands=fields["choices"])
            if close:
                fix = M("usage-command-did-you-mean", command=close[0], fix=fix)
            return JobMisspecified("cli.usage", command, what, fix)
        if kind == "choice":
            what = M("usage-invalid-choice", **fields)
            return JobMisspecified("cli.usage", fields["flag"], what, M("usage-invalid-choice-fix", **fields))
        if kind == "missing":
            what = M("usage-missing-value", flag=fields["flag"])
            return JobMisspecified(
                "cli.usage", fields["flag"], what, M("usage-missing-value-fix", flag=fields["flag"], prog=prog)
            )
        if kind == "value":
            known = {"int": M("usage-kind-int"), "float": M("usage-kind-float")}
            what_kind = known.get(fields["type"]) or M("usage-kind-other", type=fields["type"])
            what = M("usage-invalid-value", flag=fields["flag"], value=fields["value"], kind=what_kind)
            return JobMisspecified("cli.usage", fields["flag"], what, M("usage-help-fix", prog=prog))
        if kind == "explicit":
            what = M("usage-takes-no-value", **fields)
            return JobMisspecified("cli.usage", fields["flag"], what, M("usage-takes-no-value-fix", **fields))
        return unknown_arguments(prog, fields["arguments"].split(), [])
    return JobMisspecified("cli.usage", prog, M("usage-other", message=message), M("usage-help-fix", prog=prog))


def unknown_arguments(prog: str, arguments: list[str], flags: Sequence[str]) -> JobMisspecified:
    """Arguments `prog` does not take; the fix suggests the closest of its `flags`."""
    import difflib

    first = arguments[0]
    flag = first.split("=", 1)[0]
    setting = next((key for key in KEYS if key.flag == flag), None)
    close = difflib.get_close_matches(flag, flags, n=1) if first.startswith("-") else []
    if setting is not None:
        fix = M("usage-setting-variable", prog=prog, flag=flag, variable=setting.env)
    elif close:
        fix = M("usage-did-you-mean", flag=close[0], prog=prog)
    else:
        fix = M("usage-help-fix", prog=prog)
    return JobMisspecified(
        "cli.usage", first, M("usage-unknown-arguments", prog=prog, arguments=" ".join(arguments)), fix
    )


def _said(text: Text, lang: Lang, block: bool = False) -> str:
    """A help text in `lang`, `%` escaped for argparse. Both languages follow one another: in paragraphs for a
    `block`, which argparse prints as written, so its English is wrapped here (its Chinese is written in short
    lines: a character is two columns wide)."""
    import textwrap

    def wrapped(line: str) -> str:  # a continued line is indented under the text of an indented one
        indent = " " * (len(line) - len(line.lstrip()) + (7 if line.startswith("  ") else 0))
        return textwrap.fill(line, 100, subsequent_indent=indent, break_on_hyphens=False)

    en = "\n".join(wrapped(line) for line in text.en.split("\n")) if block else text.en
    both = f"{en}\n\n{text.zh}" if block else f"{en} / {text.zh}"
    return {Lang.EN: en, Lang.ZH: text.zh, Lang.BOTH: both}[lang].replace("%", "%%")


def _add_setting_flags(parser: argparse.ArgumentParser, lang: Lang, names: Sequence[str] | None = None) -> None:
    """The settings flags (`names` only, when given) and `--job-file`."""
    group = parser.add_argument_group(_said(M("help-settings"), lang))
    group.add_argument("--job-file", dest="job_file", metavar="PATH", help=_said(M("help-job-file"), lang))
    for key in KEYS:
        if key.kind is Kind.ENV or (names is not None and key.name not in names):
            continue
        described = M("help-setting", help=key.description, env=key.env, default=repr(key.default))
        text = _said(described, lang)
        if key.kind is Kind.BOOL:
            group.add_argument(key.flag, dest=key.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif key.kind is Kind.ARGS:
            last = _said(M("help-last"), lang)
            group.add_argument(key.flag, dest=key.name, nargs=argparse.REMAINDER, default=None, help=f"{text} {last}")
        else:
            group.add_argument(
                key.flag, dest=key.name, default=None, metavar=key.name.upper(), choices=key.choices or None, help=text
            )


def build_parser(command: str | None = None, lang: Lang = Lang.EN) -> _Parser:
    """The whole command line, its help in `lang`; given the `command` about to run, only that sub-command gets its
    flags (the others' cost start-up time, and `fetch-assets`' import its module)."""
    epilog = _said(M("help-exit-codes"), lang, block=True)
    parser = _Parser(
        prog="vla-entrypoint",
        description=_said(M("help-description"), lang, block=True),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vla-entrypoint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in ("run", "check", "plan", "preflight", "report"):
        text = M(f"help-{name}")
        sub = commands.add_parser(
            name,
            help=_said(text, lang),
            description=_said(text, lang, block=True),
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name in ("check", "plan", "preflight", "report"):
            sub.add_argument("--json", action="store_true", help=_said(M("help-json"), lang))
        if name == "report":
            sub.add_argument("--out", metavar="PATH", help=_said(M("help-report-out"), lang))
        if name == "check":
            sub.add_argument("--assets", action="store_true", help=_said(M("help-assets"), lang))
            sub.add_argument("--nodes", type=int, metavar="N", help=_said(M("help-nodes"), lang))
            gpus = _said(M("help-gpus"), lang)
            sub.add_argument("--gpus-per-node", dest="gpus_per_node", type=int, metavar="G", help=gpus)
        parser.commands[name] = sub
        if command in (None, name):
            keys = {"preflight": PREFLIGHT_KEYS, "report": REPORT_KEYS}.get(name)
            _add_setting_flags(sub, lang, keys)
    fetch_help = M("help-fetch-assets")
    fetch = commands.add_parser(
        FETCH_ASSETS,
        help=_said(fetch_help, lang),
        description=_said(M("help-fetch-description", help=fetch_help), lang, block=True),
        epilog=_said(M("help-fetch-exit-codes"), lang, block=True),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.commands[FETCH_ASSETS] = fetch
    if command in (None, FETCH_ASSETS):
        from entrypoint.fetch.command import add_arguments

        add_arguments(fetch)
    return parser


def _flags(args: argparse.Namespace) -> dict[str, object]:
    names = ["job_file"] + [key.name for key in KEYS if key.kind is not Kind.ENV]
    return {name: getattr(args, name, None) for name in names}


def _print_launch(plan: Plan, lang: Lang) -> None:
    """The launch as `run` will carry it out: environment, node files, locked memory, preflight, command."""
    launch, resume, files = plan.launch, plan.resume, plan.launch.files
    lines: list[Text | str] = [M("environment")]
    lines += [f"  {name}={value}" for name, value in masked(plan.env.set).items()]
    if plan.env.kept:
        lines += [M("kept")] + [f"  {name}={value}" for name, value in masked(plan.env.kept).items()]
    if plan.env.removed:
        lines += [M("removed")] + [f"  {name}" for name in sorted(plan.env.removed)]
    action = M(f"resume-action-{resume.action.value}")
    if resume.step is not None:
        lines.append(M("resume-from", action=action, step=resume.step))
    else:
        lines.append(M("resume", action=action))
    lines.append(M("node-log", log=str(files.log)) if files.log else M("node-log-none", reason=files.problem))
    lines += [
        M("nccl-debug", reason=launch.nccl_reason),
        M("memlock", reason=launch.memlock_reason),
        M("preflight", reason=launch.preflight_reason),
        *([M("health", reason=plan.health.reason)] if plan.health is not None else []),
        M("command"),
        "  " + command_line(launch.command, launch.cwd),
    ]
    for line in lines:
        print(line if isinstance(line, str) else render(line, lang))


def _scope(args: argparse.Namespace) -> tuple[Scope, int | None, int | None]:
    """`check --assets [--nodes N] [--gpus-per-node G]`: the scope and the stated shape; the shape flags without
    `--assets` are refused (a node reads its shape from TI-ONE's variables and its GPUs)."""
    from entrypoint.inspect.scope import Scope

    nodes, gpus = getattr(args, "nodes", None), getattr(args, "gpus_per_node", None)
    if getattr(args, "assets", False):
        return Scope.ASSETS, nodes, gpus
    for flag, value in (("--nodes", nodes), ("--gpus-per-node", gpus)):
        if value is not None:
            what, fix = M("check-shape-without-assets", flag=flag), M("check-shape-without-assets-fix")
            raise JobMisspecified("cli.usage", flag, what, fix)
    return Scope.NODE, None, None


def _inspect(host: Host, args: argparse.Namespace) -> int:
    from entrypoint.plan import build_plan

    scope, nodes, gpus_per_node = _scope(args)
    plan = build_plan(host, _flags(args), scope=scope, nodes=nodes, gpus_per_node=gpus_per_node)
    with_command = args.command == "plan"
    gate = None
    if not with_command and plan.health is not None and plan.health.runs:  # `check`: the passive tier, read-only
        from entrypoint.launch.health_gate import passive_gate

        gate = passive_gate(plan, host, time.time())
        plan.findings.extend(gate.findings)
    if args.json:
        data = plan.to_json(with_command=with_command)
        if gate is not None:
            data["health"] = mask_json(gate.to_json())
        print(_json(data))
        return plan.exit_code
    topo = plan.topology
    lang = language(host.env)
    if plan.stated is not None:
        heading = M("check-assets-heading", nnodes=plan.stated.nnodes, per_node=plan.stated.per_node)
    else:
        heading = M("check-heading", rank=topo.node_rank, nnodes=topo.nnodes, nproc=topo.nproc_per_node)
    health_summary(plan.findings, heading.en, lang, sys.stdout)
    if gate is not None and gate.reports:
        from entrypoint.launch.health_gate import print_table

        print_table(gate, sys.stdout, lang)
    if with_command:
        _print_launch(plan, lang)
    return plan.exit_code


def _preflight(host: Host, args: argparse.Namespace) -> int:
    from entrypoint.launch.preflight import PreflightResult, PreflightStatus, run_preflight, table
    from entrypoint.plan import build_plan

    plan = build_plan(host, _flags(args))
    lang = language(host.env)
    unusable = [f for f in plan.findings if f.id == "trainer.torchrun" and f.status is Status.FAIL]
    if unusable:  # the preflight is a torchrun job too: it cannot start
        result = PreflightResult(PreflightStatus.ERROR, None, findings=unusable)
    else:
        result = run_preflight(plan, plan.environment(), sys.stderr if args.json else sys.stdout, lang)
    if args.json:
        print(_json(result.to_json()))
    else:
        if result.results:
            print(table(result, lang))
        health_summary(result.findings, M("preflight-heading").en, lang, sys.stdout)
        if result.output_tail and result.failed:
            print(result.output_tail)
    return ExitCode.PREFLIGHT_FAILED if result.failed else 0


def _report(host: Host, args: argparse.Namespace) -> int:
    from pathlib import Path

    from entrypoint.core.settings import load_settings
    from entrypoint.report.command import main as report

    settings = load_settings(host.env, _flags(args))
    out = Path(args.out) if args.out else None
    return report(settings.path("log_dir"), settings.exp_name, out, args.json, language(host.env))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's exit code. Output that cannot be written (a pipe closed by `| head`, a full disk) ends
    the command quietly: 141 for a closed pipe, 74 otherwise, never a traceback. A descriptor closed at start
    (`vla-entrypoint check >&-`) is output nobody reads; an encoding without Chinese gets English alone."""
    _usable_streams()
    try:
        code = _main(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _silence_failed_streams()
        return PIPE_CLOSED
    except OSError as error:
        if error.filename is not None or error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise  # not a failed write of our output
        _silence_failed_streams()
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no stderr at all: None
            lang = Lang.BOTH if shows_chinese(sys.stderr) else Lang.EN
            sys.stderr.write(
                render(M("output-failed", error=os_error_text(error)), lang, lead="vla-entrypoint: ") + "\n"
            )
            sys.stderr.flush()
        return OUTPUT_FAILED


def _usable_streams() -> None:
    """stdout and stderr that cannot end the command with a traceback: a descriptor closed when the command started
    (Python then has no stream at all) is pointed at /dev/null, so its output, and what children write there, is
    dropped; a character the stream's encoding cannot hold is written as a backslash escape."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name)
        if stream is None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
            setattr(sys, name, open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False))  # noqa: SIM115
        elif isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")


def _json(data: object) -> str:
    """A JSON document for stdout: non-ASCII characters as themselves where stdout can hold them, else escaped
    (`\\uXXXX`, still valid JSON)."""
    return json.dumps(data, indent=2, ensure_ascii=not shows_chinese(sys.stdout))


def _silence_failed_streams() -> None:
    """Point stdout or stderr, whichever cannot be written, at /dev/null, so that what is still buffered cannot
    fail again when Python exits."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with the descriptor closed
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)


def _with_dev_machine_hint(problem: UserError) -> UserError:
    """No GPU and no node variables at all looks like the dev machine: the fix also names `check --assets`."""
    if problem.id != "topology.no-gpu":
        return problem
    return PreflightFailed(problem.id, problem.where, problem.what, M("no-gpu-dev-machine", fix=problem.fix))


def _main(argv: list[str]) -> int:
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["run", *argv]
    json_mode = "--json" in argv
    parser = build_parser(argv[0], language())
    try:
        try:
            args, unknown = parser.parse_known_args(argv)
        except SystemExit as exc:  # --help, --version
            return ExitCode.JOB_MISSPECIFIED if exc.code else 0
        if unknown:
            sub = parser.commands.get(str(getattr(args, "command", "")))
            flags = sorted(sub._option_string_actions) if sub is not None else []
            raise unknown_arguments(sub.prog if sub is not None else parser.prog, unknown, flags)
        json_mode = getattr(args, "json", False)
        host = Host.current()
        if args.command == "run":
            from entrypoint.launch.run import run

            return run(host, _flags(args))
        if args.command == "preflight":
            return _preflight(host, args)
        if args.command == "report":
            return _report(host, args)
        if args.command == FETCH_ASSETS:
            from entrypoint.fetch.command import main as fetch_assets

            return fetch_assets(args)
        return _inspect(host, args)
    except UserError as error:
        problem = _with_dev_machine_hint(error)
        if json_mode:
            print(_json({"ok": False, "exit_code": problem.exit_code, "error": problem.to_json()}))
        print(problem_block(problem, chinese=shows_chinese(sys.stderr)), file=sys.stderr)
        return problem.exit_code
    except KeyboardInterrupt:
        return 130
