"""GPU benchmark (run on the lent GPU machine): the entrypoint's cost in a real NCCL bf16 job, side by side.

Runs `vla-entrypoint run` and a bare `torchrun` of the very same command and environment (taken from
`vla-entrypoint plan --json`) over the stand-in trainer, in pairs whose order alternates (even repetitions start
with the entrypoint, odd ones with the bare torchrun: ABBA…, so whichever goes second in a pair, with the warmer
caches and the cooler GPU, is each way equally often), after `--warmup` discarded pairs. Reports: time from process
start to the first logged training step, the entrypoint's own share (start to torchrun exec, from the start-up
record), the mean step time, and the step-time ratio entrypoint / bare of each pair: its median with its spread
(min–max and the interquartile range), the ratio with the order cancelled per block of two pairs (ABBA) and the
order effect itself, and every pair with its order; plus GPU memory of a rank that touches JAX with and without
JAX_PLATFORMS=cpu.
    python3 -m scripts.bench_gpu --out RESULTS.md [--reps 6] [--warmup 1] [--steps 2000]   # from the repository root

With `--b-env KEY=VALUE` (repeatable) the second way is the entrypoint again with those settings instead of the
bare torchrun (e.g. `--b-env VLA_HEALTH=off` for the health gate's cost, `--b-env VLA_TENSORBOARD_DIR=none
--b-env VLA_METRICS_INTERVAL=0` for the event files'), and the JAX comparison is left out.

With `--device cpu` the same pairs run on the CPU with gloo (`VLA_DEVICE=cpu`; no JAX comparison), e.g. in the
stand-in image, whose torch is the CPU build:
    docker run --rm -v "$PWD:/repo" -w /repo vla-entrypoint/openpi-standin:test \
      python3 -m scripts.bench_gpu --device cpu --out /repo/.work/events-cpu.md --b-env VLA_TENSORBOARD_DIR=none
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.synthetic import make_assets_tree

REPO = Path(__file__).resolve().parents[1]

STEP = re.compile(r"\bstep=(\d+) loss=\S+ .*time=([0-9.]+)s")
JAX_LINE = re.compile(r"stand-in: (jax backend=.*?MiB)")


def timed(command: list[str], env: dict[str, str], cwd: str | None = None) -> dict[str, object]:
    """Run to completion; the wall time of the first step line and the trainer's per-interval times."""
    start = time.monotonic()
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first, intervals, lines, seen = None, [], [], []
    for line in proc.stdout:
        lines.append(line)
        match = STEP.search(line)
        if match:
            now = time.monotonic()
            if first is None:
                first = now - start
            seen.append((int(match[1]), now))
    # step time from when the step lines arrived (the trainer's own time= field has 0.1 s resolution)
    intervals = [(t1 - t0) / (s1 - s0) for (s0, t0), (s1, t1) in itertools.pairwise(seen)]
    code = proc.wait()
    if code != 0:
        raise SystemExit(f"{command[:3]} failed ({code}):\n{''.join(lines[-40:])}")
    return {
        "first_step_s": first,
        "intervals": intervals,
        "total_s": time.monotonic() - start,
        "output": "".join(lines),
    }


def order_cancelled(ratios: list[float]) -> tuple[list[float], list[float]]:
    """Per ABBA block (pair 2k entrypoint first, pair 2k+1 bare first): the entrypoint/bare ratio with a constant
    order factor f cancelled, and f itself. If the second run of a pair is f times slower, r_AB = R / f and
    r_BA = R · f, so R = √(r_AB · r_BA) and f = √(r_BA / r_AB)."""
    blocks = list(zip(ratios[0::2], ratios[1::2], strict=True))
    return [math.sqrt(ab * ba) for ab, ba in blocks], [math.sqrt(ba / ab) for ab, ba in blocks]


def planned(env: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """`plan --json` for `env`, and the environment `run` would give torchrun (NCCL's log folder created, as `run`
    does), so that torchrun can be started bare, exactly as planned."""
    plan = json.loads(
        subprocess.run(
            [sys.executable, "-m", "entrypoint", "plan", "--json"], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    run_env = {k: v for k, v in env.items() if k not in plan["env"]["removed"]} | plan["env"]["set"]
    if plan["launch"]["nccl_log_dir"]:
        Path(plan["launch"]["nccl_log_dir"]).mkdir(parents=True, exist_ok=True)
    return plan, run_env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--reps", type=int, default=6, help="recorded pairs, even: blocks of two pairs in opposite order (default 6)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="discarded pairs run first (default 1)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--log-interval", type=int, default=100)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="cpu: gloo on the CPU (VLA_DEVICE=cpu)")
    parser.add_argument(
        "--b-env", action="append", default=[], metavar="KEY=VALUE", help="B = the entrypoint with these settings"
    )
    args = parser.parse_args()
    b_env = dict(item.split("=", 1) for item in args.b_env)
    b_label = f"entrypoint with {', '.join(args.b_env)}" if b_env else "bare `torchrun`, same command and env"
    if args.reps < 2 or args.reps % 2:
        parser.error("--reps must be even and at least 2: the order is cancelled per pair of pairs (ABBA)")
    work = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    assets = make_assets_tree(work / "assets", episodes=4)
    base = {
        **os.environ,
        # torchrun's PET_* variables, not TI-ONE's: the tree lies in a temp folder on the machine's own disk, which
        # a TI-ONE job refuses (no storage row); outside TI-ONE that is a warning
        "PET_NNODES": "1",
        "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": "1",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": "29531",
        "VLA_ASSETS_ROOT": str(assets),
        "VLA_TACO": "off",
        "VLA_OPENPI_DIR": str(REPO / "tests/standin/workspace/openpi"),
        "VLA_BAKED_JOB_FILE": str(work / "none.yaml"),
        "VLA_NUM_TRAIN_STEPS": str(args.steps),
        "VLA_LOG_INTERVAL": str(args.log_interval),
        "VLA_SAVE_INTERVAL": str(args.steps),
        "PYTHONPATH": str(REPO),
        **({"VLA_DEVICE": "cpu"} if args.device == "cpu" else {}),
    }
    entry = [sys.executable, "-m", "entrypoint", "run"]

    def one(way: str, name: str) -> dict[str, object]:
        env = dict(base, VLA_EXP_NAME=name)
        if way == "entrypoint" or b_env:
            result = timed(entry, env if way == "entrypoint" else env | b_env)
            record = json.loads(max((assets / "logs").glob(f"{name}-*.json")).read_text())
            result["own_s"] = record["process_age_at_launch_s"]
            return result
        plan, bare_env = planned(env)
        return timed(plan["command"], bare_env, cwd=plan["cwd"])

    ways = ("entrypoint", "bare torchrun")
    rows: dict[str, list[dict[str, object]]] = {way: [] for way in ways}
    orders: list[str] = []
    for rep in range(-args.warmup, args.reps):
        order = ways if rep % 2 == 0 else ways[::-1]
        for way in order:
            result = one(way, f"bench{rep + args.warmup}{way[0]}")
            if rep >= 0:
                rows[way].append(result)
            print(
                f"{'warm-up' if rep < 0 else f'rep {rep}'} {way if way == 'entrypoint' or not b_env else 'B'}: "
                f"first step {result['first_step_s']:.2f}s, "
                f"step {statistics.mean(result['intervals']) * 1000:.3f} ms",
                flush=True,
            )
        if rep >= 0:
            orders.append(" → ".join("entrypoint" if w == "entrypoint" else "bare" for w in order))

    jax = {}
    for label, extra in (
        ()
        if b_env or args.device == "cpu"
        else (
            ("JAX_PLATFORMS=cpu (the entrypoint's default)", {}),
            ("JAX_PLATFORMS unset", {"JAX_PLATFORMS": "__unset__"}),
        )
    ):
        env = dict(
            base, STANDIN_USE_JAX="1", VLA_NUM_TRAIN_STEPS="4", VLA_SAVE_INTERVAL="4", VLA_EXP_NAME=f"jax{len(jax)}"
        )
        plan, run_env = planned(env)
        if extra:
            run_env.pop("JAX_PLATFORMS", None)
        output = timed(plan["command"], run_env, cwd=plan["cwd"])["output"]
        jax[label] = next(match[1] for match in map(JAX_LINE.search, output.splitlines()) if match)

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"

    def spread(values: list[float]) -> str:
        """Median, min–max and, from four values on, the interquartile range."""
        text = f"{statistics.median(values):.3f} (min–max {min(values):.3f}–{max(values):.3f}"
        if len(values) >= 4:
            low, _, high = statistics.quantiles(values, n=4, method="inclusive")
            text += f", IQR {low:.3f}–{high:.3f}"
        return text + ")"

    step_ms = {way: [statistics.mean(r["intervals"]) * 1000 for r in results] for way, results in rows.items()}
    ratios = [e / b for e, b in zip(step_ms["entrypoint"], step_ms["bare torchrun"], strict=True)]
    cancelled, order_factor = order_cancelled(ratios)
    torch = __import__("torch")
    if args.device == "gpu":
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        machine = f"{gpu}; NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}"
        how = "bf16, NCCL, 1 GPU"
    else:
        machine = f"{os.cpu_count()} logical CPUs"
        how = "CPU, gloo, 1 process"
    text = [
        f"Machine: {machine}; Python {sys.version.split()[0]}; torch {torch.__version__}.",
        f"Command: `python3 -m scripts.bench_gpu --out RESULTS.md --reps {args.reps} --warmup {args.warmup} "
        f"--steps {args.steps} --log-interval {args.log_interval} --device {args.device}"
        f"{''.join(f' --b-env {item}' for item in args.b_env)}` "
        f"(stand-in trainer, {how}, {args.steps} steps, log every "
        f"{args.log_interval}; {args.warmup} discarded warm-up pair(s), then {args.reps} pairs in alternating order, "
        "even pairs entrypoint first, odd pairs the other way first; median (min, max)).",
        "",
        f"| measure | entrypoint (`vla-entrypoint run`) | {b_label} |",
        "| --- | --- | --- |",
        f"| process start → first logged step (s) | {med([r['first_step_s'] for r in rows['entrypoint']])} | "
        f"{med([r['first_step_s'] for r in rows['bare torchrun']])} |",
        "| entrypoint's own share: process start (interpreter included) → torchrun exec (s) | "
        f"{spread([r['own_s'] for r in rows['entrypoint']])} | "
        f"{spread([r['own_s'] for r in rows['bare torchrun']]) if b_env else '—'} |",
        f"| mean step time (ms) | {med(step_ms['entrypoint'])} | {med(step_ms['bare torchrun'])} |",
        f"| step-time ratio entrypoint / bare, per pair: median (spread) | {spread(ratios)} | 1 |",
        "| step-time ratio with the order cancelled, per ABBA block √(r_AB · r_BA): median (spread) | "
        f"{spread(cancelled)} | 1 |",
        "| order effect: the second run of a pair relative to the first, per block √(r_BA / r_AB) | "
        f"{spread(order_factor)} | — |",
        "",
        "| pair | order | entrypoint step (ms) | bare step (ms) | ratio |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {i} | {order} | {e:.3f} | {b:.3f} | {e / b:.3f} |"
            for i, (order, e, b) in enumerate(zip(orders, step_ms["entrypoint"], step_ms["bare torchrun"], strict=True))
        ),
    ]
    if jax:
        text += [
            "",
            "JAX in a training process (the stand-in runs a `jax.numpy` op at step 1, as openpi's transforms do):",
            "",
            "| environment | JAX backend and the rank's GPU memory (nvidia-smi) |",
            "| --- | --- |",
            *(f"| {label} | {value} |" for label, value in jax.items()),
        ]
    Path(args.out).write_text("\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
