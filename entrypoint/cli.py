"""Command line: `vla-entrypoint [run|check|plan|preflight|fetch-assets] [--json] [settings flags]`.

With no arguments it runs the job (the container's default command). Every settings flag has a `VLA_*`
variable twin, listed in `--help`. Exit codes: 0 success, 2 job mis-specified, 3 preflight failed,
otherwise training's own (128+N after signal N).

Start-up cost matters (this is the container's entrypoint): each command imports only what it uses. `fetch-assets`
and the download stack are imported only for `fetch-assets` itself; a sub-command's flags are added to the parser
only when that sub-command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from entrypoint import __version__
from entrypoint.core.errors import ExitCode, UserError
from entrypoint.core.host import Host
from entrypoint.core.masking import masked
from entrypoint.core.messages import Catalogue, Lang, Text, language, render
from entrypoint.core.report import command_line, health_summary, problem_block
from entrypoint.core.settings import KEYS, Kind

if TYPE_CHECKING:
    from entrypoint.plan import Plan

M = Catalogue(
    "cli",
    {
        "check-heading": (
            "node {rank} of {nnodes}, {nproc} process(es) per node",
            "第 {rank} 个节点(共 {nnodes} 个),每节点 {nproc} 个进程",
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
        "node-log": ("node log: {log}", "节点日志:{log}"),
        "node-log-none": ("node log: none ({reason})", "节点日志:无({reason})"),
        "nccl-debug": ("NCCL debug: {reason}", "NCCL 调试:{reason}"),
        "memlock": ("locked memory: {reason}", "锁定内存:{reason}"),
        "preflight": ("preflight: {reason}", "预检:{reason}"),
        "command": ("command:", "命令:"),
    },
)

EPILOG = """exit codes: 0 success; 2 the job is mis-specified (bad YAML, bad variable, contradictory settings);
3 a preflight check failed (missing/corrupt assets, impossible topology); otherwise training's own exit code
(128+N when ended by signal N). Settings precedence: defaults < /etc/vla-entrypoint/job.yaml < job file
(VLA_JOB_FILE or <assets_root>/code/job.yaml) < VLA_* variables < these flags."""
FETCH_ASSETS = "fetch-assets"
FETCH_HELP = "download and unpack the openpi-assets tree (dev machine, once): resumable, verified, then checked"


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("job settings (each also a VLA_* variable)")
    group.add_argument("--job-file", dest="job_file", metavar="PATH", help="YAML job file [env VLA_JOB_FILE]")
    for key in KEYS:
        if key.kind is Kind.ENV:
            continue
        text = f"{key.help} [env {key.env}; default {key.default!r}]".replace("%", "%%")
        if key.kind is Kind.BOOL:
            group.add_argument(key.flag, dest=key.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif key.kind is Kind.ARGS:
            group.add_argument(
                key.flag, dest=key.name, nargs=argparse.REMAINDER, default=None, help=text + " (must come last)"
            )
        else:
            group.add_argument(
                key.flag, dest=key.name, default=None, metavar=key.name.upper(), choices=key.choices or None, help=text
            )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the `command` about to run, only that sub-command gets its flags (the others'
    cost start-up time, and `fetch-assets`' import its module)."""
    parser = argparse.ArgumentParser(
        prog="vla-entrypoint",
        description="Launch openpi training on TI-ONE: read the platform's variables, verify assets, decide resume, "
        "start torchrun.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vla-entrypoint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    specs = (
        ("run", "verify, then start training with torchrun (the default)"),
        ("check", "run every inspection; launch nothing, change nothing"),
        ("plan", "inspections plus the resolved launch: environment, command, node files; change nothing"),
        ("preflight", "all-reduce bandwidth over every GPU of every node via torchrun (run it on every node)"),
    )
    for name, text in specs:
        sub = commands.add_parser(
            name, help=text, description=text, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        if name in ("check", "plan", "preflight"):
            sub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        if command in (None, name):
            _add_setting_flags(sub)
    fetch = commands.add_parser(
        FETCH_ASSETS,
        help=FETCH_HELP,
        description=FETCH_HELP + " (see the README's 'Preparing the assets')",
        epilog="exit codes: 0 done and checked; 2 bad manifest, URL or entry name; "
        "3 a download, verification, disk or check failure (run again to resume)",
    )
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
    if resume.step is not None:
        lines.append(M("resume-from", action=resume.action, step=resume.step))
    else:
        lines.append(M("resume", action=resume.action))
    lines.append(M("node-log", log=str(files.log)) if files.log else M("node-log-none", reason=files.problem))
    lines += [
        M("nccl-debug", reason=launch.nccl_reason),
        M("memlock", reason=launch.memlock_reason),
        M("preflight", reason=launch.preflight_reason),
        M("command"),
        "  " + command_line(launch.command, launch.cwd),
    ]
    for line in lines:
        print(line if isinstance(line, str) else render(line, lang))


def _inspect(host: Host, args: argparse.Namespace) -> int:
    from entrypoint.plan import build_plan

    plan = build_plan(host, _flags(args))
    with_command = args.command == "plan"
    if args.json:
        print(json.dumps(plan.to_json(with_command=with_command), indent=2, ensure_ascii=False))
        return plan.exit_code
    topo = plan.topology
    lang = language(host.env)
    heading = M("check-heading", rank=topo.node_rank, nnodes=topo.nnodes, nproc=topo.nproc_per_node)
    health_summary(plan.findings, heading.en, lang, sys.stdout)
    if with_command:
        _print_launch(plan, lang)
    return plan.exit_code


def _preflight(host: Host, args: argparse.Namespace) -> int:
    from entrypoint.launch.preflight import run_preflight, table
    from entrypoint.plan import build_plan

    plan = build_plan(host, _flags(args))
    lang = language(host.env)
    result = run_preflight(plan, plan.environment(), sys.stderr if args.json else sys.stdout, lang)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        if result.results:
            print(table(result, lang))
        health_summary(result.findings, M("preflight-heading").en, lang, sys.stdout)
        if result.output_tail and result.failed:
            print(result.output_tail)
    return ExitCode.PREFLIGHT_FAILED if result.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["run", *argv]
    parser = build_parser(argv[0])
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return ExitCode.JOB_MISSPECIFIED if exc.code else 0
    host = Host.current()
    json_mode = getattr(args, "json", False)
    try:
        if args.command == "run":
            from entrypoint.launch.run import run

            return run(host, _flags(args))
        if args.command == "preflight":
            return _preflight(host, args)
        if args.command == FETCH_ASSETS:
            from entrypoint.fetch.command import main as fetch_assets

            return fetch_assets(args)
        return _inspect(host, args)
    except UserError as problem:
        if json_mode:
            print(
                json.dumps(
                    {"ok": False, "exit_code": problem.exit_code, "error": problem.to_json()},
                    indent=2,
                    ensure_ascii=False,
                )
            )
        print(problem_block(problem), file=sys.stderr)
        return problem.exit_code
    except KeyboardInterrupt:
        return 130
