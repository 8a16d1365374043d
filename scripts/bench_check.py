"""Benchmark: the start-up cost of `vla-entrypoint check --json` against a bare `python3 -c pass` of the same
interpreter, on a LIBERO-sized synthetic assets tree (1693 episode files).

    python3 -m scripts.bench_check [--runs 15] [--episodes 1693] [--write docs/benchmarks.md]   # repo root

Ways, alternating within each repetition after one discarded warm-up of each:

- floor: `python3 -c pass`: the interpreter's own start (site, the editable install's path hook included);
- libraries: `python3 -c 'import …'` of the third-party and heavier standard modules `check` needs (PyYAML,
  packaging's tags, dataclasses, argparse, subprocess, socket, hashlib, …), none of ours: the floor of any
  implementation that keeps these dependencies;
- imports: `python3 -c 'import entrypoint.cli, entrypoint.plan'`: everything `check` imports, doing nothing;
- check: `vla-entrypoint check --json` (the console script next to the interpreter, else `python3 -m entrypoint`):
  every inspection over the tree, this machine's real `/sys` and `/proc`, one JSON object printed.

The tree's weights are tiny (their size changes nothing here but the free-space check); a stand-in `torchrun` is on
PATH, so `check` passes; `VLA_DEVICE=cpu`, `VLA_TACO=off`. The interpreter must have the package installed (the
`.venv` of `scripts/test` has it, editable).
The goal (issue 15) is check ≤ 3× the floor, medians. With `--write FILE` the Markdown section replaces the one
between this script's markers in FILE, or is appended.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.synthetic import make_assets_tree, make_openpi_tree

REPO = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench:check-startup begin -->", "<!-- bench:check-startup end -->"
GOAL = 3.0
LIBRARIES = (
    "yaml",
    "packaging.tags",
    "dataclasses",
    "enum",
    "argparse",
    "json",
    "pathlib",
    "shutil",
    "subprocess",
    "socket",
    "ipaddress",
    "hashlib",
    "urllib.parse",
)


def git_revision() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--", "entrypoint", "pyproject.toml")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes in entrypoint/" if dirty else "")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def spread(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{ms(min(values))} – {ms(max(values))} (IQR {ms(q1)} – {ms(q3)})"


def prepare(work: Path, episodes: int) -> dict[str, str]:
    """The tree, an openpi checkout, a stand-in torchrun; the environment `check` runs with."""
    tree = make_assets_tree(work / "openpi-assets", episodes=episodes)
    bindir = work / "bin"
    bindir.mkdir()
    torchrun = bindir / "torchrun"
    torchrun.write_text("#!/bin/sh\nexit 0\n")
    torchrun.chmod(0o755)
    (work / "home").mkdir()
    return {
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "VLA_ASSETS_ROOT": str(tree),
        "VLA_OPENPI_DIR": str(make_openpi_tree(work / "openpi")),
        "VLA_BAKED_JOB_FILE": str(work / "no-baked-job.yaml"),
        "HF_DATASETS_CACHE": str(work / "hf-datasets"),
        "VLA_DEVICE": "cpu",
        "VLA_TACO": "off",
    }


def commands() -> dict[str, list[str]]:
    python = sys.executable
    script = Path(python).parent / "vla-entrypoint"
    check = [str(script), "check", "--json"] if script.exists() else [python, "-m", "entrypoint", "check", "--json"]
    return {
        "floor": [python, "-c", "pass"],
        "libraries": [python, "-c", f"import {', '.join(LIBRARIES)}"],
        "imports": [python, "-c", "import entrypoint.cli, entrypoint.plan"],
        "check": check,
    }


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return took


def measure(env: dict[str, str], runs: int) -> dict[str, list[float]]:
    ways = commands()
    for command in ways.values():  # warm-up: page cache, .pyc files
        timed(command, env)
    results: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, command in ways.items():
            results[name].append(timed(command, env))
    return results


def import_costs(env: dict[str, str], top: int = 10) -> list[tuple[str, float]]:
    """The modules whose own import work (`-X importtime` self time, median of 5) is largest."""
    samples: dict[str, list[float]] = {}
    for _ in range(5):
        done = subprocess.run(
            [*commands()["imports"][:1], "-X", "importtime", *commands()["imports"][1:]],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        for row in done.stderr.splitlines():
            parts = row.removeprefix("import time:").split("|")
            if len(parts) == 3 and parts[0].strip().isdigit():
                samples.setdefault(parts[2].strip(), []).append(int(parts[0]) / 1e6)
    costs = {name: statistics.median(values) for name, values in samples.items()}
    return sorted(costs.items(), key=lambda item: -item[1])[:top]


def markdown(
    results: dict[str, list[float]], costs: list[tuple[str, float]], runs: int, episodes: int, minutes: float
) -> str:
    medians = {name: statistics.median(values) for name, values in results.items()}
    ratio = medians["check"] / medians["floor"]
    labels = {
        "floor": "floor: `python3 -c pass`",
        "libraries": "the libraries `check` needs, imported (none of ours)",
        "imports": "`python3 -c 'import entrypoint.cli, entrypoint.plan'`",
        "check": "`vla-entrypoint check --json`",
    }
    rows = "\n".join(
        f"| {labels[name]} | {ms(medians[name])} | {spread(values)} | {medians[name] / medians['floor']:.2f}× |"
        for name, values in results.items()
    )
    verdict = "meets" if ratio <= GOAL else "misses"
    return f"""{BEGIN}
## `check` start-up cost: `vla-entrypoint check --json` vs a bare interpreter

On a synthetic LIBERO-sized tree ({episodes} episode files), `VLA_DEVICE=cpu`, `VLA_TACO=off`,
this machine's own `/sys` and `/proc`. {runs} runs of each way, alternating, after one discarded warm-up each.

| way | median | spread: min – max (IQR) | × floor |
| --- | --- | --- | --- |
{rows}

`check --json` takes **{ratio:.2f}×** a bare `python3 -c pass` of the same interpreter (medians); the goal is
≤ {GOAL:.0f}×, which this run {verdict}. `check`, `plan` and `run` import neither `fetch-assets` nor the HTTP
download stack (`tests/unit/test_plan_is_launch.py` checks it). Importing only the libraries `check` needs
({", ".join(f"`{name}`" for name in LIBRARIES)}) already takes {medians["libraries"] / medians["floor"]:.2f}× the floor;
the rest is our modules' own import work (dataclasses, enums, compiled patterns, the message catalogue) and the
inspections themselves (stat-ing {episodes} episode files, reading `/sys` and `/proc`).

The largest single imports (`python3 -X importtime`, each module's own time without what it imports, median of 5):
{", ".join(f"`{name}` {ms(seconds)}" for name, seconds in costs)}.

| fact | value |
| --- | --- |
| command | `python3 -m scripts.bench_check --runs {runs} --episodes {episodes}` ({minutes:.1f} min) |
| interpreter | `{sys.executable}` (Python {platform.python_version()}) |
| check command | `{" ".join(commands()["check"])}` |
| machine | {os.cpu_count()} logical CPUs, {platform.machine()}, kernel {platform.release()} |
| revision | {git_revision()} |
| date | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} |
{END}
"""


def write(section: str, target: Path) -> None:
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    target.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="runs of each way (default 15)")
    parser.add_argument("--episodes", type=int, default=1693, help="episode files in the tree (default 1693)")
    parser.add_argument("--write", type=Path, help="put the section into this Markdown file")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-check-") as work:
        env = prepare(Path(work), args.episodes)
        results = measure(env, args.runs)
        costs = import_costs(env)
    section = markdown(results, costs, args.runs, args.episodes, (time.monotonic() - started) / 60)
    print(section)
    if args.write:
        write(section, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
