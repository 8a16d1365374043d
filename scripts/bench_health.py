"""The node health gate's cost (run on the lent GPU machine): the passive tier in milliseconds, the active tier in
seconds with the torch import apart, each as the launcher runs it (a bounded child process), plus what the children
add: NVML read in this process, and the figures the active tier measured.

    python3 -m scripts.bench_health [--reps 10] [--active-reps 5] [--write docs/benchmarks.md]   # repository root

`--python` names the training Python that runs the GPU measurements (default: this one). Outside a GPU machine the
figures say so (NVML unavailable, no CUDA), which is what the CI smoke run checks.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

from entrypoint.core.settings import Device, HealthMode
from entrypoint.health.spec import ACTIVE_TIMEOUT_S, PASSIVE_TIMEOUT_S, gate_spec
from entrypoint.health.tiers import ActiveStatus, run_active, run_probe
from scripts.benchlib import markdown as md
from scripts.benchlib.machine import git_revision, out, refuse_uncommitted
from scripts.benchlib.stats import Summary, seconds, spread, summarize


def in_process_nvml() -> float | None:
    """NVML init, every GPU's 12 queries, shutdown, in this process (the probe's work without the child)."""
    try:
        import pynvml  # type: ignore[import-untyped, import-not-found, unused-ignore]

        from entrypoint.health.probe import read_nvml

        start = time.perf_counter()
        read_nvml(pynvml)
        return time.perf_counter() - start
    except Exception:  # no NVML here
        return None


def row(name: str, values: list[float]) -> list[str]:
    s: Summary = summarize(values)
    return [name, seconds(s.median), spread(s), str(s.n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10, help="passive tier runs (default 10)")
    parser.add_argument("--active-reps", type=int, default=5, help="active tier runs (default 5)")
    parser.add_argument("--python", default=sys.executable, help="the training Python for the GPU measurements")
    parser.add_argument("--allreduce", action="store_true", help="also the intra-node all-reduce (2 GPUs or more)")
    md.add_write_options(parser)
    args = parser.parse_args(argv)
    if args.write:
        refuse_uncommitted(args.write, args.allow_uncommitted)
    env = dict(os.environ)
    run_probe(env, PASSIVE_TIMEOUT_S)  # warm-up: page cache, .pyc files
    passive, probes = [], []
    for _ in range(args.reps):
        probe = run_probe(env, PASSIVE_TIMEOUT_S)
        probes.append(probe)
        passive.append(probe.seconds or 0.0)
    nvml = [t for t in (in_process_nvml() for _ in range(args.reps)) if t is not None]
    walls, imports, measures, runs = [], [], [], []
    for _ in range(args.active_reps):
        start = time.perf_counter()
        run = run_active(args.python, env, args.allreduce, ACTIVE_TIMEOUT_S)
        walls.append(time.perf_counter() - start)
        runs.append(run)
        if run.import_s is not None:
            imports.append(run.import_s)
        if run.status is ActiveStatus.OK and run.seconds is not None and run.import_s is not None:
            measures.append(run.seconds - run.import_s)
    last = probes[-1]
    rows = [row("passive tier, child process (as the launcher runs it)", passive)]
    if nvml:
        rows.append(row("  of which NVML in-process (init, 12 queries per GPU, shutdown)", nvml))
    rows.append(row("active tier, child process (wall)", walls))
    if imports:
        rows.append(row("  of which `import torch`", imports))
    if measures:
        rows.append(row("  of which CUDA init and the measurements", measures))
    figures = []
    for run in runs[-1:]:
        for gpu in run.gpus:
            figures.append([str(gpu.device), gpu.name or "?", f"{gpu.tflops}", f"{gpu.h2d_gbps}", f"{gpu.d2d_gbps}"])
    spec = gate_spec(HealthMode.WARN, Device.GPU, 1, len(last.gpus) or 1, True)
    gpu_facts = out(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    status = ", ".join(sorted({r.status.value for r in runs}))
    busbw = runs[-1].allreduce_gbps if runs else None
    allreduce = f", all-reduce bus bandwidth {busbw} GB/s" if busbw else ""
    section = f"""## Node health gate

`scripts/bench_health.py`: the passive tier {args.reps} times (after a warm-up), the active tier {args.active_reps}
times, each as the launcher runs it. Probe: {last.status.value} through {last.source}, driver {last.driver or "?"},
{len(last.gpus)} GPU(s); kernel log {"readable" if last.kernel.readable else "not readable"}. Active tier: {status}
(bounds {spec.passive_timeout_s:g} s and {spec.active_timeout_s:g} s).

{md.table(["measure", "median", "min – max (IQR)", "runs"], rows)}

Figures of the last active run (bf16 matmul 8192³ × 10 by the wall clock, pinned host→device 256 MiB, device copy
1 GiB; median of 3 after a warm-up){allreduce}:

{md.table(["device", "name", "TFLOPS", "H2D GB/s", "D2D GB/s"], figures) if figures else "_no GPU measured here_"}

| fact | value |
| --- | --- |
| command | `python3 -m scripts.bench_health --reps {args.reps} --active-reps {args.active_reps}` |
| machine | {gpu_facts or "no nvidia-smi"}; {os.cpu_count()} CPUs; Python {platform.python_version()} |
| revision | {git_revision()} |
| date | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} |
"""
    print(section)
    if passive:
        print(f"passive median {statistics.median(passive) * 1000:.0f} ms", file=sys.stderr)
    if args.write:
        md.write_section(args.write, "health", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
