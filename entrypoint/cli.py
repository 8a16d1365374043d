"""Command line: `vla-entrypoint [run|check|plan] [--json] [settings flags]`.

With no arguments it runs the job (the container's default command). Every settings flag has a `VLA_*`
variable twin, listed in `--help`. Exit codes: 0 success, 2 job mis-specified, 3 preflight failed,
otherwise training's own (128+N after signal N).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from entrypoint import __version__
from entrypoint.core.errors import ExitCode, UserError
from entrypoint.core.host import Host
from entrypoint.core.report import problem_block
from entrypoint.core.settings import KEYS

EPILOG = """exit codes: 0 success; 2 the job is mis-specified (bad YAML, bad variable, contradictory settings);
3 a preflight check failed (missing/corrupt assets, impossible topology); otherwise training's own exit code
(128+N when ended by signal N). Settings precedence: defaults < /etc/vla-entrypoint/job.yaml < job file
(VLA_JOB_FILE or <assets_root>/code/job.yaml) < VLA_* variables < these flags."""


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("job settings (each also a VLA_* variable)")
    group.add_argument("--job-file", dest="job_file", metavar="PATH", help="YAML job file [env VLA_JOB_FILE]")
    for key in KEYS:
        if key.kind == "env":
            continue
        text = f"{key.help} [env {key.env}; default {key.default!r}]".replace("%", "%%")
        if key.kind == "bool":
            group.add_argument(key.flag, dest=key.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        elif key.kind == "args":
            group.add_argument(
                key.flag, dest=key.name, nargs=argparse.REMAINDER, default=None, help=text + " (must come last)"
            )
        else:
            group.add_argument(
                key.flag, dest=key.name, default=None, metavar=key.name.upper(), choices=key.choices or None, help=text
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vla-entrypoint",
        description="Launch openpi training on TI-ONE: read the platform's variables, verify assets, decide resume, start torchrun.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vla-entrypoint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    specs = (
        ("run", "verify, then start training with torchrun (the default)"),
        ("check", "run every inspection; launch nothing, change nothing"),
        ("plan", "inspections plus the resolved environment and command; change nothing"),
        ("preflight", "all-reduce bandwidth over every GPU of every node via torchrun (run it on every node)"),
    )
    for name, text in specs:
        sub = commands.add_parser(
            name, help=text, description=text, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        if name in ("check", "plan", "preflight"):
            sub.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        _add_setting_flags(sub)
    from entrypoint.fetch.command import add_arguments as add_fetch_arguments

    text = "download and unpack the openpi-assets tree (dev machine, once): resumable, verified, then checked"
    add_fetch_arguments(
        commands.add_parser(
            "fetch-assets",
            help=text,
            description=text + " (see the README's 'Preparing the assets')",
            epilog="exit codes: 0 done and checked; 2 bad manifest, URL or entry name; "
            "3 a download, verification, disk or check failure (run again to resume)",
        )
    )
    return parser


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    names = ["job_file"] + [key.name for key in KEYS if key.kind != "env"]
    return {name: getattr(args, name, None) for name in names}


def _inspect(host: Host, args: argparse.Namespace) -> int:
    from entrypoint.core.messages import language
    from entrypoint.core.report import command_line, health_summary
    from entrypoint.plan import build_plan

    plan = build_plan(host, _flags(args))
    with_command = args.command == "plan"
    if args.json:
        print(json.dumps(plan.to_json(with_command=with_command), indent=2, ensure_ascii=False))
        return plan.exit_code
    topo = plan.topology
    health_summary(
        plan.findings,
        f"node {topo.node_rank} of {topo.nnodes}, {topo.nproc_per_node} process(es) per node",
        language(host.env),
        sys.stdout,
    )
    if with_command:
        print("environment exported to training:")
        for name, value in plan.env.to_json()["set"].items():
            print(f"  {name}={value}")
        for name, value in plan.env.to_json()["kept"].items():
            print(f"  {name}={value}  (kept: already set)")
        for name in plan.env.removed:
            print(f"  {name}  (removed: node-level or inherited torchrun variable)")
        print(
            f"resume: {plan.resume.action}" + (f" from step {plan.resume.step}" if plan.resume.step is not None else "")
        )
        print("command:")
        print("  " + command_line(plan.command, plan.settings.openpi_dir))
    return plan.exit_code


def _preflight(host: Host, args: argparse.Namespace) -> int:
    from entrypoint.core.findings import Status
    from entrypoint.core.messages import language, render
    from entrypoint.launch.preflight import run_preflight, table
    from entrypoint.plan import build_plan

    plan = build_plan(host, _flags(args))
    result = run_preflight(plan, plan.env.apply(host.env), sys.stderr if args.json else sys.stdout)
    failed = result.status in ("hang", "error", "below")
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        if result.results:
            print(table(result))
        lang = language(host.env)
        for finding in result.findings:
            print(f"  {finding.status.value.upper()}  {finding.id}  {render(finding.message, lang)}")
            if finding.status is not Status.PASS and finding.hint:
                print(f"        -> {render(finding.hint, lang)}")
        if result.output_tail and failed:
            print(result.output_tail)
    return ExitCode.PREFLIGHT_FAILED if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["run"] + argv
    parser = build_parser()
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
        if args.command == "fetch-assets":
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
