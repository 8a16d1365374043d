"""Asset verification on a LIBERO-sized tree: our check against the floor of stat-ing every file once.

Ways, alternating within each repetition:
  ours      `inspect_assets` (norm stats, weights header and length, every episode file, tokenizer), timed inside a
            fresh Python process, so the figure is the verification alone
  ours+py   the same process from spawn to exit (interpreter start and imports included)
  check     `vla-entrypoint check` as a process: every inspection the launcher makes before training
  find      the floor: `find TREE -printf '%s %p\\n' >/dev/null`, one stat per file
Warm: page cache as it is after a warm-up run of each. Cold: `sync; echo 3 > /proc/sys/vm/drop_caches` before
every run, when the machine permits it (otherwise reported as not permitted).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.benchlib import fixtures as fx
from scripts.benchlib.machine import REPO
from scripts.benchlib.stats import Summary, summarize

WAYS = {
    "ours": "ours: `inspect_assets` (in process)",
    "ours+py": "ours as a process: Python start + imports + `inspect_assets`",
    "check": "`vla-entrypoint check` (every inspection, as a process)",
    "find": "floor: `find TREE -printf '%s %p\\n'` (stat every file once)",
}

CHILD = r"""
import json, sys, time
from pathlib import Path
from entrypoint.inspect.assets import inspect_assets
from entrypoint.core.settings import load_settings
env = json.loads(sys.argv[1])
settings = load_settings(env)
start = time.perf_counter()
report = inspect_assets(settings, env)
elapsed = time.perf_counter() - start
print(json.dumps({"elapsed": elapsed, "weights_bytes": report.weights_bytes,
                  "dataset_complete": report.dataset_complete,
                  "failed": [f.id for f in report.findings if f.status.value == "fail"],
                  "passed": [f.id for f in report.findings if f.status.value == "pass"]}))
"""


@dataclass
class Result:
    tree: dict[str, Any]
    warm: dict[str, Summary]
    cold: dict[str, Summary] | None
    cold_note: str
    verified: dict[str, Any]

    def to_json(self) -> dict:
        return {
            "tree": self.tree,
            "cold_note": self.cold_note,
            "verified": self.verified,
            "warm": {k: v.to_json() for k, v in self.warm.items()},
            "cold": {k: v.to_json() for k, v in self.cold.items()} if self.cold else None,
        }


def can_drop_caches() -> tuple[bool, str]:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True, "page cache dropped before every run (`sync; echo 3 > /proc/sys/vm/drop_caches`)"
    except OSError as exc:
        return False, f"not permitted on this machine ({exc.strerror or exc}: /proc/sys/vm/drop_caches)"


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as handle:
        handle.write("3\n")


class Runner:
    def __init__(self, tree: Path, work: Path) -> None:
        self.tree = tree
        self.env = {
            "VLA_ASSETS_ROOT": str(tree),
            "VLA_BAKED_JOB_FILE": str(work / "no-baked-job.yaml"),
            "HOME": str(work / "home"),
            "VLA_DEVICE": "cpu",
            "LANG": "C.UTF-8",
            "HF_DATASETS_CACHE": str(work / "hf-datasets"),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        (work / "home").mkdir(parents=True, exist_ok=True)
        # `check` also wants openpi's trainer and a torchrun: a minimal openpi tree and the trainer stand-in
        self.env["VLA_OPENPI_DIR"] = str(fx.openpi_tree(work / "openpi"))
        self.env["PATH"] = os.pathsep.join([str(fx.write_shim(work / "bin", host=True).parent), self.env["PATH"]])
        self.pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        launcher = Path(sys.executable).parent / "vla-entrypoint"
        self.check_cmd = (
            [str(launcher), "check"] if launcher.exists() else [sys.executable, "-m", "entrypoint", "check"]
        )
        self.last_child: dict | None = None

    def run(self, way: str) -> float:
        if way in ("ours", "ours+py"):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, json.dumps(self.env)],
                capture_output=True,
                text=True,
                env={**self.env, "PYTHONPATH": self.pythonpath},
            )
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"inspect_assets failed:\n{proc.stderr[-2000:]}")
            self.last_child = json.loads(proc.stdout.strip().splitlines()[-1])
            if self.last_child["failed"]:
                raise RuntimeError(f"inspect_assets failed checks on the synthetic tree: {self.last_child}")
            return self.last_child["elapsed"] if way == "ours" else wall
        if way == "check":
            t0 = time.perf_counter()
            proc = subprocess.run(
                self.check_cmd, capture_output=True, text=True, env={**self.env, "PYTHONPATH": self.pythonpath}
            )
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(
                    f"vla-entrypoint check exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-2000:]}"
                )
            return wall
        if way == "find":
            t0 = time.perf_counter()
            subprocess.run(["find", str(self.tree), "-printf", "%s %p\n"], stdout=subprocess.DEVNULL, check=True)
            return time.perf_counter() - t0
        raise ValueError(way)


def _tree_facts(tree: Path) -> dict[str, Any]:
    files = sum(len(names) for _, _, names in os.walk(tree))
    weights = tree / "checkpoints" / "pi05_base_pytorch" / "model.safetensors"
    st = weights.stat()
    episodes = len(list((tree / "datasets").glob("*/*/data/chunk-*/*.parquet")))
    chunks = len(list((tree / "datasets").glob("*/*/data/chunk-*")))
    return {
        "files": files,
        "episode_files": episodes,
        "chunks": chunks,
        "weights_bytes": st.st_size,
        "weights_allocated": st.st_blocks * 512,
    }


def compare(tree: Path, work: Path, reps: int, cold_reps: int, log: Callable[[str], None], cold: bool = True) -> Result:
    runner = Runner(tree, work)
    ways = list(WAYS)
    for way in ways:  # warm-up
        runner.run(way)
    verified = dict(runner.last_child or {})
    warm: dict[str, list[float]] = {w: [] for w in ways}
    for rep in range(reps):
        for way in ways:
            warm[way].append(runner.run(way))
        log(f"assets warm rep {rep + 1}/{reps}: " + ", ".join(f"{w} {warm[w][-1] * 1000:.1f} ms" for w in ways))
    cold_result = None
    if not cold:
        note = "skipped (--quick or --no-cold)"
    else:
        permitted, note = can_drop_caches()
        if permitted:
            cold_values: dict[str, list[float]] = {w: [] for w in ways}
            for rep in range(cold_reps):
                for way in ways:
                    drop_caches()
                    cold_values[way].append(runner.run(way))
                log(
                    f"assets cold rep {rep + 1}/{cold_reps}: "
                    + ", ".join(f"{w} {cold_values[w][-1] * 1000:.1f} ms" for w in ways)
                )
            cold_result = {w: summarize(v) for w, v in cold_values.items()}
    return Result(_tree_facts(tree), {w: summarize(v) for w, v in warm.items()}, cold_result, note, verified)
