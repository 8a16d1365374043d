"""Benchmark: seconds the start-up spends on TACO, with the wheel baked into the image versus installed at start
from a local HTTP server (and from a local file), using stand-in wheels of a chosen size.

    python3 -m scripts.bench_taco [--runs 5] [--sizes-mb 0,50]      # from the repository root

Each run is `plan_taco` + `activate_taco`, as the launcher does them; a fresh install prefix every run. Prints a
Markdown table (median, min, max, and the median of each step). Runs with this machine's python3; no network
beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from entrypoint.core.settings import load_settings
from entrypoint.taco.activate import activate_taco
from entrypoint.taco.bake import bake
from entrypoint.taco.plan import plan_taco
from tests.support.httpserver import serve_directory
from tests.support.taco_wheel import build_wheel


@dataclass
class Row:
    mode: str
    wheel_mb: float
    seconds: list[float]
    steps: dict[str, list[float]]

    def markdown(self) -> str:
        steps = ", ".join(
            f"{name} {statistics.median(values):.3f}" for name, values in self.steps.items() if name != "total"
        )
        return (
            f"| {self.mode} | {self.wheel_mb:.1f} | {statistics.median(self.seconds):.3f} | {min(self.seconds):.3f} | "
            f"{max(self.seconds):.3f} | {steps} |"
        )


def _once(work: Path, run: int, variables: dict[str, str], baked_dir: Path) -> tuple[float, dict[str, float]]:
    env = {
        "PATH": "/usr/bin:/bin",
        "VLA_BAKED_JOB_FILE": str(work / "none.yaml"),
        "VLA_ASSETS_ROOT": str(work),
        "VLA_TACO": "on",
        **variables,
    }
    start = time.monotonic()
    plan = plan_taco(load_settings(env), {"PATH": env["PATH"]}, None, baked_dir, work / f"run{run}" / "site-packages")
    activation = activate_taco(plan, plan.env.apply({"PATH": env["PATH"]}), io.StringIO())
    seconds = time.monotonic() - start
    if activation.status != "active":
        raise SystemExit(f"activation failed: {activation.finding and activation.finding.message.en}")
    return seconds, activation.seconds


def bench(runs: int = 5, sizes_mb: tuple[float, ...] = (0, 50)) -> list[Row]:
    """Time TACO's start-up work per mode and wheel size; returns one row per (mode, size)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-taco-") as scratch:
        root = Path(scratch)
        for size in sizes_mb:
            wheel = build_wheel(root / f"wheel-{size}", payload_bytes=int(size * 2**20))
            baked = root / f"baked-{size}"
            bake(wheel.parent, baked)
            wheel_mb = wheel.stat().st_size / 2**20
            with serve_directory(wheel.parent) as base:
                modes = {
                    "baked": ({}, baked),
                    "installed from local HTTP": (
                        {"VLA_TACO_WHEEL": f"{base}/{wheel.name.replace('+', '%2B')}", "VLA_TACO_ALLOW_HTTP": "1"},
                        root / "none",
                    ),
                    "installed from a local file": ({"VLA_TACO_WHEEL": str(wheel)}, root / "none"),
                }
                for mode, (variables, baked_dir) in modes.items():
                    row = Row(mode, wheel_mb, [], {})
                    for run in range(runs):
                        seconds, steps = _once(root / f"{mode}-{size}".replace(" ", "-"), run, variables, baked_dir)
                        row.seconds.append(seconds)
                        for name, value in steps.items():
                            row.steps.setdefault(name, []).append(value)
                    rows.append(row)
    return rows


def main() -> int:
    os.environ["no_proxy"] = ",".join(filter(None, [os.environ.get("no_proxy"), "127.0.0.1"]))  # the server is local
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes-mb", default="0,50", help="stand-in wheel payload sizes in MiB, comma-separated")
    args = parser.parse_args()
    rows = bench(args.runs, tuple(float(s) for s in args.sizes_mb.split(",")))
    print(f"TACO start-up, {args.runs} runs each, python {sys.version.split()[0]}")
    print("| mode | wheel MiB | median s | min s | max s | median per step (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
