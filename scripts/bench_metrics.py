"""Benchmark: what the TensorBoard event files cost the launcher, per logged step and per GPU sample.

    python3 -m scripts.bench_metrics [--lines 20000] [--reps 5] [--gpus N] [--write docs/benchmarks.md]  # repo root

Measured in this process with the launcher's own `report.metrics.Metrics`, writing real event files into a temp
folder (tensorboardX's writer, fsync at each flush):

- relay: CPU seconds of `Metrics.feed` per progress line, on the thread that relays training's output (the only part
  that runs on the relay path: parse and enqueue);
- writer: CPU seconds of the metrics thread per logged step (turning the line into 6 scalars, encoding and writing
  them), from the thread's own CPU clock (`time.thread_time`);
- GPU sample: CPU seconds of one NVML sample of every GPU, when `pynvml` sees GPUs (the GPU machine), with `--gpus`
  the number it should see; skipped otherwise;
- idle: CPU seconds per second of the metrics thread with nothing to write (its one-second wake-ups).

Each repetition feeds `--lines` openpi progress lines (`step=N loss=… lr=… grad_norm=… time=…s`) as one relay chunk
of 64 KiB at a time (waiting, between chunks, until the writer's queue is short: a job logs far slower), then closes
the writer. The share of a core is then the cost per step over the seconds per
logged step: openpi logs every `log_interval` steps (10 by default), each 0.7-1.4 s for pi05 on an H200. With
`--write FILE` the Markdown section replaces the one between this script's markers in FILE.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from entrypoint.report.gpus import Nvml, open_nvml
from entrypoint.report.metrics import Metrics
from scripts.benchlib import markdown as md
from scripts.benchlib.machine import git_revision, refuse_uncommitted

CHUNK = 65536
QUEUE_HEADROOM = 1000  # lines left queued before the next chunk (a chunk is about 700 lines)


class ThreadClock:
    """The metrics thread's own CPU time, read by the thread itself when it ends (wraps its `_run`)."""

    def __init__(self, metrics: Metrics) -> None:
        self.seconds = 0.0
        run = metrics._run

        def timed() -> None:
            start = time.thread_time()
            try:
                run()
            finally:
                self.seconds = time.thread_time() - start

        metrics._run = timed  # type: ignore[method-assign]


def lines(count: int) -> str:
    return "".join(
        f"12:00:{i % 60:02d}.000 [I] step={i} loss={1.0 / (i + 1):.4f} lr=2.50e-05 grad_norm=1.10 time=1.2s\n"
        for i in range(count)
    )


def one_rep(count: int) -> tuple[float, float, int]:
    """(relay CPU s per line, writer CPU s per line, events written)."""
    text = lines(count)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Metrics(Path(tmp) / "run", batch_size=256, interval_s=0, say=lambda _text: None)
        clock = ThreadClock(metrics)
        metrics.start()
        relay = 0.0
        for start in range(0, len(text), CHUNK):
            began = time.thread_time()
            metrics.feed(text[start : start + CHUNK])
            relay += time.thread_time() - began
            while metrics.queue.qsize() > QUEUE_HEADROOM:  # a job logs far slower: let the writer catch up
                time.sleep(0.005)
        metrics.close(0, "succeeded", wait_s=120)
        assert metrics.dropped == 0, f"{metrics.dropped} lines dropped: raise the queue or feed slower"
        return relay / count, clock.seconds / count, metrics.written


def idle_cost(seconds: float) -> float:
    """CPU seconds per second of a metrics thread with nothing to write."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Metrics(Path(tmp) / "run", batch_size=256, interval_s=0, say=lambda _text: None)
        clock = ThreadClock(metrics)
        metrics.start()
        threading.Event().wait(seconds)  # the measured interval itself
        metrics.close(0, "succeeded")
        return clock.seconds / seconds


def gpu_cost(samples: int) -> tuple[int, float] | None:
    nvml = open_nvml()
    if not isinstance(nvml, Nvml):
        return None
    costs = []
    for _ in range(samples):
        began = time.thread_time()
        nvml.sample()
        costs.append(time.thread_time() - began)
    count = len(nvml.handles)
    nvml.close()
    return count, statistics.median(costs)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle thread measured")
    parser.add_argument("--gpus", type=int, help="fail unless NVML sees this many GPUs")
    md.add_write_options(parser)
    args = parser.parse_args(argv)
    if args.write:
        refuse_uncommitted(args.write, args.allow_uncommitted)
    one_rep(500)  # warm-up: imports, first file
    reps = [one_rep(args.lines) for _ in range(args.reps)]
    relay = statistics.median(r[0] for r in reps)
    writer = statistics.median(r[1] for r in reps)
    events = reps[0][2] / args.lines
    idle = idle_cost(args.idle)
    gpu = gpu_cost(50)
    if args.gpus is not None and (gpu is None or gpu[0] != args.gpus):
        print(f"NVML sees {gpu[0] if gpu else 0} GPU(s), not {args.gpus}", file=sys.stderr)
        return 1
    per_step = relay + writer
    rows = [
        ["relay thread: parse and enqueue one progress line", us(relay), f"{min(r[0] for r in reps) * 1e6:.0f}–"
         f"{max(r[0] for r in reps) * 1e6:.0f} µs"],
        [f"metrics thread: one logged step ({events:.0f} scalars encoded and written)", us(writer),
         f"{min(r[1] for r in reps) * 1e6:.0f}–{max(r[1] for r in reps) * 1e6:.0f} µs"],
        ["metrics thread idle (its 1 s wake-ups), per second", us(idle), "-"],
    ]  # fmt: skip
    if gpu is not None:
        rows.append([f"one NVML sample of all {gpu[0]} GPU(s) (7 values each)", us(gpu[1]), "median of 50"])
    shares = []
    for seconds in (1.0, 10.0):
        share = (per_step / seconds + idle) * 100
        shares.append(f"a logged step every {seconds:.0f} s: {share:.3f} % of a core")
    if gpu is not None:
        shares.append(
            f"GPU samples every 10 s (`VLA_METRICS_INTERVAL`): {gpu[1] / 10 * 100:.3f} % of a core for {gpu[0]} GPU(s)"
        )
    else:
        shares.append(
            "GPU samples: not measured here (NVML sees no GPU on this machine). On an H200, 30 NVML queries took "
            "9 ms; a sample of 8 GPUs is 56 queries, about 17 ms every 10 s (`VLA_METRICS_INTERVAL`): about 0.2 % "
            "of a core, on the metrics thread"
        )
    machine = f"{os.cpu_count()} logical CPUs, {platform.machine()}, kernel {platform.release()}"
    section = f"""## TensorBoard event files

`scripts/bench_metrics.py`: the launcher's event-file writer on real files (tensorboardX's writer, fsync at each
flush), {args.reps} repetitions of {args.lines} openpi progress lines fed as 64 KiB relay chunks, after a warm-up;
CPU time from each thread's own clock, medians (range over the repetitions).

{md.table(["what", "CPU time", "range"], rows)}

The relay thread, which carries training's output to the console and the node log, only parses and enqueues a line:
{us(relay)} per logged step; encoding and writing happen on the metrics thread. openpi prints a progress line every
`log_interval` steps (10 by default) and pi05 took 0.7–1.4 s a step on the H200 (the GPU section), so a line comes
every 7–14 s by default, every second at `log_interval: 1`; the whole cost stays far below 1 % of a core:
{chr(10).join(f"- {s}" for s in shares)}

| fact | value |
| --- | --- |
| command | `python3 -m scripts.bench_metrics --lines {args.lines} --reps {args.reps}` |
| machine | {machine}, Python {platform.python_version()} |
| revision | {git_revision()} |
| date | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} |
"""
    print(section)
    if args.write:
        md.write_section(args.write, "metrics", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
