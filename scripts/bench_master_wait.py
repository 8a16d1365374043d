"""Benchmark: what a worker node's wait for node 0 costs when node 0 already answers (a correct job).

    python3 -m scripts.bench_master_wait [--runs 15] [--calls 200] [--write docs/benchmarks.md]  # repo root

Two measurements, both against a real listening socket of this machine (node 0's port, already open):

- the wait alone, in this process: `wait_for_master` called `--calls` times for an IP address (TI-ONE's
  MASTER_ADDR) and for this machine's host name (one lookup through the resolver), median per call;
- the whole start-up, in child processes: `python -m entrypoint run` as node 1 of a 2-node TI-ONE job
  (`VLA_DEVICE=cpu`, `VLA_TACO=off`, a synthetic tree, the unit tier's stand-in torchrun), alternating the default
  wait with `VLA_MASTER_WAIT_TIMEOUT=0` (no wait: the start-up without it), after one discarded warm-up of each.
  From each run's start-up record: `launch_after_s` (record created, i.e. after the imports, to torchrun exec) and
  the `master` phase; and each process's wall time. MASTER_ADDR is the host name (an IP literal of this machine
  would be a loopback address, which a multi-node topology refuses).

Node 0 and a single node run no wait code at all (`launch.wait_for_master` is null), so their start-up is unchanged
by construction. With `--write FILE` the Markdown section replaces the one between this script's markers in FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from io import StringIO
from pathlib import Path

from entrypoint.inspect.topology import MasterWait
from entrypoint.launch.rendezvous_wait import WaitStatus, wait_for_master
from scripts.benchlib import markdown as md
from scripts.benchlib.machine import git_revision, refuse_uncommitted
from tests.support.fakehosts import plain_vm
from tests.support.synthetic import make_assets_tree, make_openpi_tree

REPO = Path(__file__).resolve().parents[1]
STAND_IN_BIN = REPO / "tests" / "unit" / "bin"


def accept_all(listener: socket.socket) -> None:
    """Node 0's side: accept every connection and close it, as torchrun's store does with a silent one."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:  # the listener was closed: the benchmark is over
            return
        connection.close()


def per_call(addr: str, port: int, calls: int) -> list[float]:
    """Seconds per `wait_for_master` call that finds node 0 answering at once."""
    target = MasterWait("MASTER_ADDR", addr, port, 300, 90)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        result = wait_for_master(target, StringIO())
        times.append(time.perf_counter() - start)
        if result.status is not WaitStatus.REACHED:
            raise SystemExit(f"{addr}:{port} did not answer: {result.error}")
    return times


def world(work: Path, name: str, port: int) -> dict[str, str]:
    """The environment of node 1 of a 2 x 1 TI-ONE job whose node 0 is `name`:`port`."""
    host = work / "host"
    plain_vm(host)
    (work / "home").mkdir()
    return {
        "PATH": os.pathsep.join([str(STAND_IN_BIN), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "VLA_LANG": "en",
        "VLA_HOST_ROOT": str(host),
        "VLA_ASSETS_ROOT": str(make_assets_tree(work / "assets")),
        "VLA_OPENPI_DIR": str(make_openpi_tree(work / "openpi")),
        "VLA_BAKED_JOB_FILE": str(work / "no-baked-job.yaml"),
        "HF_DATASETS_CACHE": str(work / "hf-datasets"),
        "VLA_DEVICE": "cpu",
        "VLA_TACO": "off",
        "GPU_NUM_PER_NODE": "1",
        "WORLD_SIZE": "2",
        "RANK": "1",
        "MASTER_ADDR": name,
        "MASTER_PORT": str(port),
    }


def one_run(env: dict[str, str], logs: Path) -> dict:
    """Start `run` once; its start-up record (the only new one in `logs`) plus `wall_s`, the whole process's time
    (the stand-in torchrun's included)."""
    before = set(logs.glob("*.json"))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "entrypoint", "run"], env=env, cwd=REPO, capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"run exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    (record,) = set(logs.glob("*.json")) - before
    return {**json.loads(record.read_text()), "wall_s": took}


HEADER = [
    "way",
    "to torchrun (median)",
    "to torchrun (min – max)",
    "whole process (median)",
    "whole process (min – max)",
    "the wait (record's `master` phase, median)",
]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def spread(values: list[float]) -> str:
    return f"{ms(min(values))} – {ms(max(values))}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="`run` start-ups of each way (default 15)")
    parser.add_argument("--calls", type=int, default=200, help="in-process wait calls per address (default 200)")
    md.add_write_options(parser)
    args = parser.parse_args(argv)
    if args.write:
        refuse_uncommitted(args.write, args.allow_uncommitted)
    name = socket.gethostname()
    with socket.create_server(("", 0), backlog=128) as listener, tempfile.TemporaryDirectory() as temp:
        threading.Thread(target=accept_all, args=(listener,), daemon=True).start()
        port = int(listener.getsockname()[1])
        ip = per_call("127.0.0.1", port, args.calls)
        named = per_call(name, port, args.calls)
        env = world(Path(temp), name, port)
        logs = Path(env["VLA_ASSETS_ROOT"]) / "logs"
        ways = {"no wait (`VLA_MASTER_WAIT_TIMEOUT=0`)": {"VLA_MASTER_WAIT_TIMEOUT": "0"}, "wait (default)": {}}
        for extra in ways.values():  # warm-up: page cache, .pyc files
            one_run({**env, **extra}, logs)
        records: dict[str, list[dict]] = {way: [] for way in ways}
        for _ in range(args.runs):
            for way, extra in ways.items():
                records[way].append(one_run({**env, **extra}, logs))
    rows = []
    for way, found in records.items():
        launch = [float(r["launch_after_s"]) for r in found]
        wall = [float(r["wall_s"]) for r in found]
        waits = [float(r["phases_s"]["master"]) for r in found if "master" in r["phases_s"]]
        wait = ms(statistics.median(waits)) if waits else "no wait"
        rows.append(
            [way, ms(statistics.median(launch)), spread(launch), ms(statistics.median(wall)), spread(wall), wait]
        )
    launch_medians = [statistics.median(float(r["launch_after_s"]) for r in found) for found in records.values()]
    wall_medians = [statistics.median(float(r["wall_s"]) for r in found) for found in records.values()]
    machine = f"{os.cpu_count()} logical CPUs, {platform.machine()}, kernel {platform.release()}"
    section = f"""## A worker's wait for node 0 when node 0 already answers

`scripts/bench_master_wait.py`: node 0's port is a listening socket of this machine.

The wait alone ({args.calls} calls each, median per call): MASTER_ADDR an IP address {ms(statistics.median(ip))},
this machine's host name {ms(statistics.median(named))} (one lookup through the resolver, then one connection).

`vla-entrypoint run` as node 1 of 2 (`VLA_DEVICE=cpu`, stand-in torchrun), {args.runs} start-ups of each way,
alternating, after one warm-up each:

{md.table(HEADER, rows)}

Difference of the medians (wait − no wait): to torchrun {ms(launch_medians[1] - launch_medians[0])}, whole process
{ms(wall_medians[1] - wall_medians[0])}.

| fact | value |
| --- | --- |
| command | `python3 -m scripts.bench_master_wait --runs {args.runs} --calls {args.calls}` |
| machine | {machine}, Python {platform.python_version()} |
| revision | {git_revision()} |
| date | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} |
"""
    print(section)
    if args.write:
        md.write_section(args.write, "master-wait", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
