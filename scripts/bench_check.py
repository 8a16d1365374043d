"""Benchmark: the start-up cost of `vla-entrypoint check --json` against a bare `python3 -c pass` of the same
interpreter, on a LIBERO-sized synthetic assets tree (1693 episode files), with the launcher installed as the image
installs it.

    python3 -m scripts.bench_check [--runs 21] [--episodes 1693] [--rev REV] [--write docs/benchmarks.md]  # repo root

The image runs `pip install --no-deps .` into its python3: a regular install, no path hook. So does this benchmark,
into a throwaway venv of the running interpreter's base Python (`python3 -m venv --without-pip`, under a temp
dir): the package folder goes to the venv's site-packages as pip lays out a pure-Python wheel and byte-compiles it,
`bin/vla-entrypoint` is pip's console-script wrapper, and PyYAML and packaging are copied from the running
interpreter's environment (file by file, as their RECORD lists them). pip itself is not used: building a wheel needs
a build backend (setuptools with `bdist_wheel`) that a development venv may lack. The source is the working tree
(`git ls-files`: tracked and untracked, not ignored), or with `--rev` a committed tree (`git archive REV`).

Ways, alternating within each repetition after one discarded warm-up of each (all with the same environment):

- floor: `python -c pass` of the throwaway venv;
- libraries: `python -c 'import …'` of every module `check` imports that is not ours (found by running `check` once
  in that venv): the floor of any implementation that keeps these dependencies;
- imports: `python -c 'import entrypoint.cli, entrypoint.plan'`: everything `check` imports, doing nothing;
- check: the venv's `vla-entrypoint check --json`: every inspection over the tree, this machine's real `/sys` and
  `/proc`, one JSON object printed;
- for comparison with earlier runs, the floor and `check` of the running interpreter itself (the development venv,
  whose editable install adds a path hook that imports pathlib, re and urllib at every start), when it has the
  console script.

The tree's weights are tiny (their size changes nothing here but the free-space check); a stand-in `torchrun` is on
PATH, so `check` passes; `VLA_DEVICE=cpu`, `VLA_TACO=off`, no job file. The figure is a regression guard, not a
goal: the run exits 1 when `check` takes more than `--guard` times the floor (medians), a bound set above the
recorded runs with room for a loaded machine, so a change that makes start-up slower is noticed. With
`--write FILE` the Markdown section replaces the one between this script's markers in FILE, or is appended.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.benchlib import markdown as md
from scripts.benchlib.machine import git_revision, refuse_uncommitted
from tests.support.synthetic import make_assets_tree, make_openpi_tree

REPO = Path(__file__).resolve().parents[1]
GUARD = 15.0  # check / floor, medians: the recorded runs are 11.3× (2026-12-03); past this, a run exits 1
DEPENDENCIES = ("PyYAML", "packaging")
UNNEEDED = ("yaml", "packaging.tags", "subprocess")  # what `check` need not import here (no job file, TACO off)
# pip's console-script wrapper (distlib's template), as `pip install` writes `bin/vla-entrypoint`.
CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from entrypoint.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""
# Run inside the venv: every module `check` imports beyond what the interpreter's start imported; of ours, how many
# modules, and the dataclasses and enums they define (each dataclass compiles its generated methods at import).
SURVEY = """
import sys, io
before = set(sys.modules)
from entrypoint.cli import main
stdout, sys.stdout = sys.stdout, io.StringIO()
code = main(["check", "--json"])
sys.stdout = stdout
import dataclasses, enum
new = set(sys.modules) - before
ours = [sys.modules[m] for m in new if m.split(".")[0] == "entrypoint"]
classes = [v for m in ours for v in vars(m).values() if isinstance(v, type) and v.__module__ == m.__name__]
names = sorted(m for m in new if m.split(".")[0] != "entrypoint" and not any(p.startswith("_") for p in m.split("."))
               and getattr(sys.modules[m], "__spec__", None) is not None)  # importable by name
print(code, len(ours), sum(map(dataclasses.is_dataclass, classes)), sum(issubclass(c, enum.Enum) for c in classes))
print(*names)
"""


@dataclass(frozen=True)
class Survey:
    """What `check` loads: the modules that are not ours, and our modules, dataclasses and enums."""

    libraries: list[str]
    modules: int
    dataclasses: int
    enums: int


@dataclass(frozen=True)
class Way:
    label: str
    command: list[str]
    floor: str  # the way this one is compared with


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def revision(rev: str | None) -> str:
    if rev is not None:
        return git("rev-parse", "--short", rev) + " (committed tree)"
    return git_revision()


def source_tree(target: Path, rev: str | None) -> Path:
    """The package source: the working tree's files git knows of (tracked or not ignored), or `rev`'s tree."""
    target.mkdir(parents=True)
    if rev is not None:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", rev], capture_output=True, check=True
        )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(target, filter="data")
        return target
    for name in git("ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0"):
        source = REPO / name
        if name and source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def install(venv: Path, source: Path) -> Path:
    """A venv of the base interpreter with the package and its two dependencies installed; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    shutil.copytree(source / "entrypoint", site / "entrypoint", ignore=shutil.ignore_patterns("__pycache__"))
    for name in DEPENDENCIES:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue
            (site / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(str(dist.locate_file(file))), site / file)
    subprocess.run([str(python), "-m", "compileall", "-q", str(site)], check=True)
    script = venv / "bin" / "vla-entrypoint"
    script.write_text(CONSOLE_SCRIPT.format(python=python))
    script.chmod(0o755)
    return python


def prepare(work: Path, episodes: int) -> dict[str, str]:
    """The tree, an openpi checkout, a stand-in torchrun; the environment every way runs with, in HOME (not in the
    checkout: `python -c` puts its working directory first on sys.path)."""
    tree = make_assets_tree(work / "openpi-assets", episodes=episodes)
    bindir = work / "bin"
    bindir.mkdir(parents=True)
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


def survey(python: Path, env: dict[str, str]) -> Survey:
    done = subprocess.run(
        [str(python), "-c", SURVEY], env=env, cwd=env["HOME"], capture_output=True, text=True, check=True
    )
    counts, names = done.stdout.splitlines()
    code, modules, dataclasses, enums = (int(n) for n in counts.split())
    if code != 0:
        raise SystemExit(f"check exited {code} in the benchmark's venv:\n{done.stderr[-2000:]}")
    return Survey(names.split(), modules, dataclasses, enums)


def ways(python: Path, names: list[str], dev: bool) -> dict[str, Way]:
    """The venv's ways; with `dev`, also the running interpreter's floor and `check` (the working tree, editable)."""
    found = {
        "floor": Way("floor: `python -c pass`", [str(python), "-c", "pass"], "floor"),
        "libraries": Way(
            f"the {len(names)} modules `check` imports that are not ours, imported",
            [str(python), "-c", f"import {', '.join(names)}"],
            "floor",
        ),
        "imports": Way(
            "`python -c 'import entrypoint.cli, entrypoint.plan'`",
            [str(python), "-c", "import entrypoint.cli, entrypoint.plan"],
            "floor",
        ),
        "check": Way(
            "`vla-entrypoint check --json`", [str(python.parent / "vla-entrypoint"), "check", "--json"], "floor"
        ),
    }
    dev_script = Path(sys.executable).parent / "vla-entrypoint"
    if dev and dev_script.exists():
        found["dev-floor"] = Way("development venv: `python -c pass`", [sys.executable, "-c", "pass"], "dev-floor")
        found["dev-check"] = Way(
            "development venv: `vla-entrypoint check --json`", [str(dev_script), "check", "--json"], "dev-floor"
        )
    return found


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        command, env=env, cwd=env["HOME"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return took


def measure(found: dict[str, Way], env: dict[str, str], runs: int) -> dict[str, list[float]]:
    for way in found.values():  # warm-up: page cache, .pyc files
        timed(way.command, env)
    results: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(runs):
        for name, way in found.items():
            results[name].append(timed(way.command, env))
    return results


def import_costs(python: Path, env: dict[str, str], top: int = 10) -> list[tuple[str, float]]:
    """The modules whose own import work (`-X importtime` self time, median of 5) is largest."""
    samples: dict[str, list[float]] = {}
    for _ in range(5):
        done = subprocess.run(
            [str(python), "-X", "importtime", "-c", "import entrypoint.cli, entrypoint.plan"],
            env=env,
            cwd=env["HOME"],
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


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def spread(values: list[float]) -> str:
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{ms(min(values))} – {ms(max(values))} (IQR {ms(q1)} – {ms(q3)})"


@dataclass(frozen=True)
class Run:
    """One benchmark run's inputs and facts, for the report."""

    runs: int
    episodes: int
    guard: float
    rev: str | None
    revision: str
    survey: Survey
    minutes: float


def markdown(found: dict[str, Way], results: dict[str, list[float]], costs: list[tuple[str, float]], run: Run) -> str:
    medians = {name: statistics.median(values) for name, values in results.items()}
    ratio = medians["check"] / medians["floor"]
    rows = "\n".join(
        f"| {found[name].label} | {ms(medians[name])} | {spread(values)} | "
        f"{medians[name] / medians[found[name].floor]:.2f}× |"
        for name, values in results.items()
    )
    verdict = "within" if ratio <= run.guard else "past"
    dev = ""
    if "dev-check" in medians:
        dev = (
            f" Against the development venv's own floor (its editable install's path hook makes that floor "
            f"{medians['dev-floor'] / medians['floor']:.1f}× the plain one and pre-imports part of what `check` "
            f"needs) the same code takes {medians['dev-check'] / medians['dev-floor']:.2f}×."
        )
    command = f"python3 -m scripts.bench_check --runs {run.runs} --episodes {run.episodes} --guard {run.guard:g}" + (
        f" --rev {run.rev}" if run.rev else ""
    )
    survey = run.survey
    unneeded = [name for name in UNNEEDED if name in survey.libraries]
    guarded = (
        f"This revision's `check` still imports {', '.join(f'`{name}`' for name in unneeded)}."
        if unneeded
        else "Without a job file `check` imports no PyYAML, with TACO off no packaging, and never `subprocess` "
        "(`tests/unit/test_plan_is_launch.py` checks all three)."
    )
    return f"""## `check` start-up cost: `vla-entrypoint check --json` vs a bare interpreter

The launcher installed as the image installs it (a regular install into a throwaway venv, no path hook; see
`scripts/bench_check.py`), on a synthetic LIBERO-sized tree ({run.episodes} episode files), `VLA_DEVICE=cpu`,
`VLA_TACO=off`, no job file, this machine's own `/sys` and `/proc`. {run.runs} runs of each way, alternating, after
one discarded warm-up each; "× floor" is against the floor of the same interpreter.

| way | median | spread: min – max (IQR) | × floor |
| --- | --- | --- | --- |
{rows}

`check --json` takes **{ratio:.2f}×** a bare `python -c pass` of the same interpreter (medians): {verdict} the
regression guard of {run.guard:g}× (a bound that catches a slower start-up, not a goal; the run exits 1 past it).{dev}

Where the time goes: importing only the modules `check` needs that are not ours already takes
{medians["libraries"] / medians["floor"]:.2f}× the floor ({", ".join(f"`{name}`" for name in survey.libraries)}).
On top of that come our {survey.modules} modules, which define {survey.dataclasses} dataclasses and {survey.enums}
enums (creating a dataclass compiles its generated methods, the bulk of our own import time), and the inspections
themselves (stat-ing {run.episodes} episode files, listing the library folders for NCCL, reading `/sys` and
`/proc`). {guarded}

The largest single imports (`python -X importtime`, each module's own time without what it imports, median of 5):
{", ".join(f"`{name}` {ms(seconds)}" for name, seconds in costs)}.

| fact | value |
| --- | --- |
| command | `{command}` ({run.minutes:.1f} min) |
| interpreter | a venv of the Python in `{sys.base_prefix}` ({platform.python_version()}) |
| check command | `<venv>/bin/vla-entrypoint check --json` |
| machine | {os.cpu_count()} logical CPUs, {platform.machine()}, kernel {platform.release()} |
| revision | {run.revision} |
| date | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} |
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21, help="runs of each way (default 21)")
    parser.add_argument("--episodes", type=int, default=1693, help="episode files in the tree (default 1693)")
    parser.add_argument("--rev", help="measure this committed revision (git archive) instead of the working tree")
    parser.add_argument(
        "--guard", type=float, default=GUARD, help=f"exit 1 when check takes more than this × the floor ({GUARD:g})"
    )
    md.add_write_options(parser)
    args = parser.parse_args(argv)
    if args.write and args.rev is None:
        refuse_uncommitted(args.write, args.allow_uncommitted)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-check-") as temp:
        work = Path(temp)
        python = install(work / "venv", source_tree(work / "source", args.rev))
        env = prepare(work / "job", args.episodes)
        found_survey = survey(python, env)
        found = ways(python, found_survey.libraries, dev=args.rev is None)
        results = measure(found, env, args.runs)
        costs = import_costs(python, env)
        minutes = (time.monotonic() - started) / 60
        run = Run(args.runs, args.episodes, args.guard, args.rev, revision(args.rev), found_survey, minutes)
        section = markdown(found, results, costs, run)
        ratio = statistics.median(results["check"]) / statistics.median(results["floor"])
    print(section)
    if args.write:
        md.write_section(args.write, "check-startup", section)
    return 0 if ratio <= args.guard else 1


if __name__ == "__main__":
    raise SystemExit(main())
