"""Mutation testing of the modules that decide a job's fate, one module at a time (`scripts/mutation`).

Each module runs in its own folder, `.work/mutation/<module>/`, that links the checkout's `entrypoint/`, `tests/` and
what tests read beside them (`SHARED`), and holds a copy of `pyproject.toml` whose `[tool.mutmut]` table is narrowed
to that module's file(s) and to the unit test files that guard it (`MODULES`). mutmut keeps its mutants and
results there, so modules never reset each other's results and a second run of a module only tests what changed.
The survivors of functions with no mutant killed are then run once more in a fresh interpreter (`_recheck`): code
that runs only at import is otherwise never tested with a mutant on. The summary (score, survivors) is printed and
written to `.work/mutation/<module>/summary.txt`,
the survivors' diffs to `survivors.diff` beside it.

Not part of CI: a module takes minutes to an hour on two cores.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".work" / "mutation"

# module -> (files mutated, unit test files that guard them). A module's own tests first; the CLI-level files that
# drive it through a fake host after. The later maps hold in-process unit files only: files that start the CLI or
# wait out real bounds (test_cli.py, test_master_wait.py, test_dev_machine_check.py, test_cfs.py, ...) would make
# a module's run take hours, and a test left out can only lower a score, never raise it.
MODULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "launch/restarts": (
        ("launch/restarts.py",),
        ("test_restart_verdict.py", "test_attempt.py", "test_health_restart.py"),
    ),
    "launch/culprit": (
        ("launch/culprit.py",),
        ("test_culprit_reports.py", "test_culprit.py", "test_culprit_groups.py"),
    ),
    "launch/failure": (("launch/failure.py",), ("test_failure.py", "test_restart_verdict.py")),
    "launch/progress": (("launch/progress.py", "launch/saves.py"), ("test_progress_units.py", "test_run_summary.py")),
    "launch/watchdog": (("launch/watchdog.py",), ("test_watchdog_diagnosis.py", "test_watchdog.py", "test_culprit.py")),
    "launch/supervisor": (
        ("launch/supervisor.py",),
        (
            "test_supervisor_paths.py",
            "test_node_output.py",
            "test_restart_verdict.py",
            "test_health_restart.py",
            "test_run_summary.py",
            "test_watchdog.py",
            "test_presence.py",
            "test_metrics.py",
            "test_output_streams.py",
        ),
    ),
    "launch/other": (
        (
            "launch/attempt.py",
            "launch/flight_recorder.py",
            "launch/preflight.py",
            "launch/preflight_worker.py",
            "launch/processes.py",
            "launch/record.py",
            "launch/rendezvous_wait.py",
            "launch/run.py",
            "launch/stall_exchange.py",
        ),
        ("test_launch_records.py", "test_launch_start.py", "test_attempt.py", "test_culprit.py"),
    ),
    "launch/health": (
        (
            "launch/attempt_files.py",
            "launch/health_gate.py",
            "launch/prefetch.py",
            "launch/presence.py",
            "launch/storage_watch.py",
        ),
        ("test_launch_health.py", "test_presence.py", "test_prefetch.py", "test_restart_verdict.py"),
    ),
    "core/masking": (("core/masking.py",), ("test_masking.py", "test_edges_secrets.py")),
    "core/settings": (
        ("core/settings.py",),
        ("test_settings.py", "test_settings_errors.py", "test_settings_paths.py", "test_readme_settings.py"),
    ),
    "inspect/topology": (
        ("inspect/topology.py",),
        ("test_topology.py", "test_topology_edges.py", "test_topology_messages.py", "test_fabric.py"),
    ),
    "inspect/assets": (
        ("inspect/assets.py",),
        (
            "test_assets.py",
            "test_edges_assets.py",
            "test_asset_parsers.py",
            "test_parser_properties.py",
            "test_trainer_agreement.py",
            "test_assets_dsa.py",
            "test_assets_dsb.py",
            "test_assets_norm.py",
            "test_assets_wt.py",
        ),
    ),
    "inspect/weights": (
        ("inspect/weights.py",),
        (
            "test_weights_units.py",
            "test_weights_signature.py",
            "test_trainer_agreement.py",
            "test_parser_properties.py",
        ),
    ),
    "inspect/other": (
        (
            "inspect/batch.py",
            "inspect/environment.py",
            "inspect/mounts.py",
            "inspect/openpi.py",
            "inspect/patch.py",
            "inspect/resume.py",
            "inspect/scope.py",
            "inspect/storage.py",
            "inspect/tokenizer_fetch.py",
        ),
        ("test_inspect_env.py", "test_inspect_resume_storage.py", "test_mounts.py", "test_resume.py"),
    ),
    "inspect/storage": (
        ("inspect/prefetch.py", "inspect/seal.py", "inspect/storage_probe.py", "inspect/train_configs.py"),
        ("test_inspect_storage_units.py", "test_train_configs.py", "test_prefetch.py", "test_assets_wt.py"),
    ),
    "fabric/rdma": (("fabric/decide.py", "fabric/rdma.py"), ("test_fabric.py", "test_fabric_edges.py")),
    "fabric/other": (
        ("fabric/draft.py", "fabric/inventory.py", "fabric/memlock.py", "fabric/nccl_debug.py", "fabric/sockets.py"),
        (
            "test_fabric_other.py",
            "test_fabric.py",
            "test_fabric_edges.py",
            "test_nccl_log.py",
            "test_numbers.py",
            "test_health_ports.py",
            "test_parser_properties.py",
        ),
    ),
    "fabric/nccl_log": (("fabric/nccl_log.py",), ("test_nccl_log.py", "test_parser_properties.py")),
    "taco": (
        ("taco/activate.py", "taco/bake.py", "taco/plan.py", "taco/summary.py", "taco/wheel.py"),
        (
            "test_taco_summary.py",
            "test_taco_bake.py",
            "test_taco_plan_messages.py",
            "test_taco_verify.py",
            "test_taco.py",
        ),
    ),
    "plan": (("plan.py",), ("test_plan_units.py", "test_edges_inputs.py")),
}

# What tests read from the checkout besides the code and the tests (the README's settings table, the docs' words):
# linked into each module's folder and copied by mutmut next to the mutated code.
SHARED = ("README.md", "docs", "scripts")

_NOT_KILLED = ("survived", "no tests", "suspicious", "not checked", "segfault")
PYTEST_ARGS = ["-p", "no:cacheprovider", "-q", "-x", "-W", "ignore"]
FRESH_TIMEOUT_S = 120  # a fresh run of a module's unit tests takes seconds; longer is a mutant that hangs


def _config(files: tuple[str, ...], tests: tuple[str, ...]) -> str:
    """The checkout's pyproject.toml with its `[tool.mutmut]` table narrowed to `files` and `tests`."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    head = text.split("\n[tool.mutmut]\n", 1)[0]
    present = [f"tests/unit/{t}" for t in tests if (REPO / "tests" / "unit" / t).is_file()]
    table = {
        "source_paths": ["entrypoint"],
        "only_mutate": [f"entrypoint/{f}" for f in files],
        "pytest_add_cli_args_test_selection": present,
        "also_copy": list(SHARED),
        "pytest_add_cli_args": PYTEST_ARGS,
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    return head.rstrip("\n") + "\n\n[tool.mutmut]\n" + "\n".join(lines) + "\n"


def _prepare(name: str) -> Path:
    files, tests = MODULES[name]
    folder = WORK / name.replace("/", "-")
    folder.mkdir(parents=True, exist_ok=True)
    for link in ("entrypoint", "tests", *SHARED):
        path = folder / link
        if not path.is_symlink():
            path.symlink_to(REPO / link)
    config = _config(files, tests)
    target = folder / "pyproject.toml"
    if not target.is_file() or target.read_text(encoding="utf-8") != config:
        target.write_text(config, encoding="utf-8")
    return folder


def _results(folder: Path, mutmut: str) -> dict[str, str]:
    """Each mutant's status from `mutmut results --all`."""
    done = subprocess.run([mutmut, "results", "--all", "true"], cwd=folder, capture_output=True, text=True, check=False)
    results: dict[str, str] = {}
    for line in done.stdout.splitlines():
        parts = line.strip().rsplit(": ", 1)
        if len(parts) == 2 and parts[0].startswith("entrypoint."):
            results[parts[0]] = parts[1]
    return results


def _fresh_verdict(folder: Path, tests: list[str], mutant: str) -> str:
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant}
    command = [sys.executable, "-m", "pytest", "-p", "scripts.mutant_env", *PYTEST_ARGS, *tests]
    try:
        done = subprocess.run(command, cwd=folder / "mutants", env=env, capture_output=True, timeout=FRESH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "timeout on a fresh import"
    return "killed on a fresh import" if done.returncode != 0 else "survived"


def _recheck(folder: Path, tests: tuple[str, ...], results: dict[str, str], workers: int) -> dict[str, str]:
    """Survivors of functions none of whose mutants was killed, each run once more in a fresh interpreter with the
    mutant switched on from the start. mutmut forks its runs from a process that imported the code with no mutant
    on, so a function that runs only at import (the settings table built from the dataclass fields, a module-level
    table) is never really tested there; a function with a killed mutant runs during the tests, and a fresh run of
    its survivors would take long and show nothing."""
    present = [f"tests/unit/{t}" for t in tests if (REPO / "tests" / "unit" / t).is_file()]
    exercised = {_function(name) for name, status in results.items() if status not in _NOT_KILLED}
    left = [
        name
        for name, status in results.items()
        if status in ("survived", "no tests") and _function(name) not in exercised
    ]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        verdicts = dict(zip(left, pool.map(lambda m: _fresh_verdict(folder, present, m), left), strict=True))
    return {name: verdict for name, verdict in verdicts.items() if verdict != "survived"}


def _function(mutant: str) -> str:
    return mutant.rsplit("__mutmut_", 1)[0]


def _summary(name: str, results: dict[str, str], fresh: dict[str, str]) -> str:
    """Score and survivors; a fresh-import verdict replaces mutmut's."""
    final = {mutant: fresh.get(mutant, status) for mutant, status in results.items()}
    counts: dict[str, int] = {}
    for status in final.values():
        counts[status] = counts.get(status, 0) + 1
    left = [f"{mutant}: {status}" for mutant, status in final.items() if status in _NOT_KILLED]
    total = sum(counts.values())
    killed = total - sum(counts.get(k, 0) for k in _NOT_KILLED)  # a hang is noticed too
    score = f"{100 * killed / total:.1f}%" if total else "-"
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return "\n".join([f"{name}: {killed}/{total} killed ({score}); {detail}", *left]) + "\n"


def _diffs(folder: Path, survivors: list[str]) -> str:
    """Each survivor's diff against its function's original, read from the mutated files mutmut wrote (a
    `mutmut show` per survivor would start mutmut a thousand times): what the triage in docs/testing.md reads."""
    sources: dict[str, dict[str, str]] = {}
    parts = []
    for mutant in survivors:
        module, _, function = mutant.rpartition(".x")
        module, function = (module, "x" + function) if module else mutant.rsplit(".", 1)
        if module not in sources:
            path = folder / "mutants" / (module.replace(".", "/") + ".py")
            sources[module] = _functions(path.read_text(encoding="utf-8")) if path.is_file() else {}
        functions = sources[module]
        original = functions.get(_function(function) + "__mutmut_orig", "")
        changed = functions.get(function, "").replace(function, _function(function) + "__mutmut_orig", 1)
        diff = difflib.unified_diff(original.splitlines(), changed.splitlines(), "original", "mutant", lineterm="", n=1)
        parts.append(f"# {mutant}\n" + "\n".join(list(diff)[2:]) + "\n")
    return "\n".join(parts)


def _functions(text: str) -> dict[str, str]:
    """Every function (methods too) of a module's text by name, its body dedented."""
    lines = text.splitlines()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = textwrap.dedent("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    return found


def _run_module(name: str, mutmut: str, args: argparse.Namespace) -> tuple[str, int]:
    """Run (unless --summary) and summarise one module; returns its summary text and mutmut's exit status."""
    folder = _prepare(name)
    fresh_file = folder / "fresh.json"
    status = 0
    if args.fresh and not args.summary:
        shutil.rmtree(folder / "mutants", ignore_errors=True)
    if not args.summary:
        # its own session, so a time limit stops mutmut and the test runs it forked; judged mutants are kept
        run = subprocess.Popen(
            [mutmut, "run", "--max-children", str(args.max_children)], cwd=folder, start_new_session=True
        )
        try:
            status = run.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGTERM)
            try:
                run.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
            status = 124
            print(f"{name}: stopped after {args.timeout} s; a rerun goes on where it stopped", file=sys.stderr)
        fresh = _recheck(folder, MODULES[name][1], _results(folder, mutmut), args.max_children)
        fresh_file.write_text(json.dumps(fresh, indent=1, sort_keys=True), encoding="utf-8")
    fresh = json.loads(fresh_file.read_text(encoding="utf-8")) if fresh_file.is_file() else {}
    text = _summary(name, _results(folder, mutmut), fresh)
    (folder / "summary.txt").write_text(text, encoding="utf-8")
    survivors = [line.split(": ", 1)[0] for line in text.splitlines()[1:]]
    (folder / "survivors.diff").write_text(_diffs(folder, survivors), encoding="utf-8")
    return text, status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"modules to run (default: all): {', '.join(MODULES)}")
    parser.add_argument("--list", action="store_true", help="print each module's files and tests, run nothing")
    parser.add_argument("--summary", action="store_true", help="print the last results of each module, run nothing")
    parser.add_argument("--fresh", action="store_true", help="forget a module's earlier results (after new tests)")
    parser.add_argument("--max-children", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--jobs", type=int, default=1, help="modules run at once (each with --max-children)")
    parser.add_argument("--timeout", type=float, default=None, help="stop a module's mutmut run after this many s")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    chosen = args.modules or list(MODULES)
    if args.list:
        for name in chosen:
            files, tests = MODULES[name]
            print(f"{name}: {' '.join(files)}  <-  {' '.join(tests)}")
        return 0
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    status = 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for text, code in pool.map(lambda name: _run_module(name, mutmut, args), chosen):
            print(text, end="")
            status = status or code
    return status


if __name__ == "__main__":
    sys.exit(main())
