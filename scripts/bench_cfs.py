"""Benchmark: the launcher against a CFS stand-in with a remote metadata server's latency, node 0 and a worker node.

    python3 -m scripts.bench_cfs [--latency-ms 1] [--episodes 1693 50000] [--write docs/benchmarks.md]

The assets tree lies on the FUSE pass-through of the tests (`tests/support/cfs.py`), which answers every request
after `--latency-ms` and counts them (no kernel attribute or lookup cache: every lookup is a request, a pessimistic
NFS). For each episode count, one run each, in this order, as processes with a two-node job's TI-ONE variables:

- node 0 `check`: the whole verification;
- node 0 `run` (the unit tier's stand-in torchrun, which ends at once): verification, then the seal;
- node 1 `check` with no seal from node 0 (how every node worked before the seal);
- node 1 `check` and `run` with node 0's seal (the worker's master wait off);
- a mount that stops answering: `check` and `run` with the default bound (`VLA_STORAGE_TIMEOUT` 15 s).

Requests are counted by the stand-in from the command's start to its end; wall time is the command's, interpreter
start included. Root only (FUSE).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.benchlib import markdown as md
from scripts.benchlib.machine import git_revision, refuse_uncommitted
from tests.support.cfs import Cfs, mounted
from tests.support.fakehosts import plain_vm
from tests.support.synthetic import make_assets_tree, make_openpi_tree

REPO = Path(__file__).resolve().parents[1]
FAKE_BIN = REPO / "tests" / "unit" / "bin"
SECTION = "bench_cfs"


@dataclass(frozen=True)
class Figure:
    label: str
    episodes: int
    seconds: float
    requests: int
    code: int


def environment(work: Path, cfs: Cfs, root: Path, rank: int) -> dict[str, str]:
    """A node of a two-node CPU job on this machine, its assets on the stand-in, its mount table the real one."""
    host = work / "host"
    if not host.exists():
        plain_vm(host)
        make_openpi_tree(work / "openpi")
        (work / "home").mkdir()
    table = host / "proc" / "self" / "mountinfo"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_bytes(Path("/proc/self/mountinfo").read_bytes())
    return {
        "PATH": f"{FAKE_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "VLA_LANG": "en",
        "VLA_HOST_ROOT": str(host),
        "VLA_ASSETS_ROOT": str(root),
        "VLA_OPENPI_DIR": str(work / "openpi"),
        "VLA_BAKED_JOB_FILE": str(work / "no-baked-job.yaml"),
        "HF_DATASETS_CACHE": str(work / "hf-datasets"),
        "VLA_TACO": "off",
        "VLA_DEVICE": "cpu",
        "VLA_MASTER_WAIT_TIMEOUT": "0",
        "WORLD_SIZE": "2",
        "RANK": str(rank),
        "INDEX": str(rank),
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "GPU_NUM_PER_NODE": "1",
        "GPU_NUM": "2",
        "NODE_LIST": "10.0.0.1:1,10.0.0.2:1",
    }


def measure(cfs: Cfs, label: str, episodes: int, argv: list[str], env: dict[str, str]) -> Figure:
    before = cfs.counts()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "entrypoint", *argv], env=env, capture_output=True, text=True, timeout=3600
    )
    seconds = time.monotonic() - started
    requests = sum((cfs.counts() - before).values())
    figure = Figure(label, episodes, seconds, requests, done.returncode)
    if done.returncode not in (0, 3):
        print(done.stdout[-3000:], done.stderr[-3000:])
    print(f"{label:<40} {episodes:>6} episodes: {seconds:8.2f} s {requests:>9} requests exit {done.returncode}")
    return figure


def run_all(args: argparse.Namespace) -> list[Figure]:
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-cfs-") as scratch:
        work = Path(scratch)
        with mounted(work / "cfs", latency_ms=args.latency_ms) as cfs:
            for episodes in args.episodes:
                name = f"openpi-assets-{episodes}"
                make_assets_tree(cfs.source / name, episodes=episodes)
                root = cfs.mountpoint / name
                node0, node1 = environment(work, cfs, root, 0), environment(work, cfs, root, 1)
                figures.append(measure(cfs, "node 0 check", episodes, ["check"], node0))
                figures.append(measure(cfs, "node 1 check, no seal (as before)", episodes, ["check"], node1))
                figures.append(measure(cfs, "node 0 run (verifies, seals)", episodes, ["run"], node0))
                figures.append(measure(cfs, "node 1 check, sealed", episodes, ["check"], node1))
                figures.append(measure(cfs, "node 1 run, sealed", episodes, ["run"], node1))
            root = cfs.mountpoint / f"openpi-assets-{args.episodes[0]}"
            for argv in (["check"], ["run"]):
                env = environment(work, cfs, root, 0)
                env.pop("VLA_STORAGE_TIMEOUT", None)
                cfs.stall()
                try:
                    figures.append(measure(cfs, f"stalled mount: {argv[0]}", 0, argv, env))
                finally:
                    cfs.answer()
    return figures


def markdown(figures: list[Figure], args: argparse.Namespace) -> str:
    rows = [
        [f.label, str(f.episodes) if f.episodes else "–", f"{f.seconds:.2f} s", str(f.requests), str(f.code)]
        for f in figures
    ]
    table = md.table(["command", "episodes", "wall time", "requests to the storage", "exit"], rows)
    sizes = " ".join(str(n) for n in args.episodes)
    return f"""## The launcher against a stalled or slow CFS, node 0 and a worker

`python3 -m scripts.bench_cfs --latency-ms {args.latency_ms:g} --episodes {sizes}` (committed code
{git_revision()}, {time.strftime("%Y-%m-%d")}, this 2-core machine). The assets tree lies on a FUSE pass-through
that answers each request after {args.latency_ms:g} ms (a remote metadata server's round trip) and counts it,
with no kernel attribute or lookup cache (every lookup is a request: more pessimistic than CFS over NFS v3, whose
client caches attributes). Two-node TI-ONE variables on one machine; the stand-in torchrun ends at once; one run
each, in the order shown.

{table}

Node 0 verifies every episode file, as before, and then seals its verdict; a worker that finds node 0's seal for
this job makes a fixed number of requests whatever the episode count (the "sealed" rows), where before every
worker repeated node 0's whole verification ("no seal" rows). A mount that stops answering ends `check` and `run`
within the default 15 s bound plus the interpreter's start, with exit 3 and torchrun never started (exit 3 rows).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=float, default=1.0)
    parser.add_argument("--episodes", type=int, nargs="+", default=[1693, 50000])
    md.add_write_options(parser)
    args = parser.parse_args()
    if args.write:
        refuse_uncommitted(args.write, args.allow_uncommitted)
    figures = run_all(args)
    text = markdown(figures, args)
    print(text)
    if args.write:
        md.write_section(args.write, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
