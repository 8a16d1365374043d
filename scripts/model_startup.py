"""A model, on paper: N nodes × 8 ranks starting openpi's pi05 against CFS, with and without the read-ahead.

    python3 -m scripts.model_startup [--write docs/benchmarks.md]

Inputs are the figures measured on the H200 (docs/benchmarks.md, "openpi's pi05_libero … under vla-entrypoint run")
and CFS's documented system throughput per tier; one assumption is labelled: a node's own link caps its reads at
`CLIENT_GIB_S`. The ranks of a node share its page cache, so a node reads each file from CFS once, and all nodes read
at the same moment: each gets min(its link, the tier's throughput / N). Without the read-ahead the trainer reads
after its start-up window (torchrun → trainer up, imports, config, data loader, model build, to the GPU); with it the
reads start with torchrun and only what is left of them after that window delays the first step.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.benchlib import markdown as md

GB = 1e9
GIB = 2**30
MIB = 2**20
# measured on the H200 (seconds): the trainer's start-up before it reads the weights, its first step, the launcher
FRESH_WINDOW_S = 4.97 + 16.11 + 1.26 + 0.24 + 58.19 + 1.29  # torchrun → trainer, imports, config, loader, build, GPU
RESTART_WINDOW_S = 0.31 + 12.61 + 0.99 + 0.09 + 63.60 + 1.35
FRESH_REST_S = 0.55 + 36.4  # the launcher before torchrun, and the first step
RESTART_REST_S = 36.36
WEIGHTS_BYTES = 7.47 * GB  # pi05's model.safetensors
CHECKPOINT_BYTES = 20 * GB  # model.safetensors + optimizer.pt of a checkpoint (measured at step 49)
TIERS = {  # CFS's documented maximum system throughput
    "General Standard (300 MiB/s)": 300 * MIB,
    "General Performance (1 GiB/s)": 1 * GIB,
    "Turbo, recommended range (10 GiB/s)": 10 * GIB,
}
CLIENT_GIB_S = 2.9  # assumption: one node's link to CFS (25 Gbit/s)
NODES = (1, 2, 4, 8, 16, 32)


def start_s(nodes: int, system: float, bytes_read: float, window_s: float, rest_s: float, ahead: bool) -> float:
    """Seconds from the start (or the fault) to the first step of every node."""
    per_node = min(CLIENT_GIB_S * GIB, system / nodes)
    read_s = bytes_read / per_node
    delay = max(0.0, read_s - window_s) if ahead else read_s
    return window_s + delay + rest_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", type=Path, help="put the section into this Markdown file")
    args = parser.parse_args(argv)
    rows = []
    for tier, system in TIERS.items():
        for nodes in NODES:
            fresh = [start_s(nodes, system, WEIGHTS_BYTES, FRESH_WINDOW_S, FRESH_REST_S, a) for a in (False, True)]
            resume_bytes = WEIGHTS_BYTES + CHECKPOINT_BYTES
            again = [start_s(nodes, system, resume_bytes, RESTART_WINDOW_S, RESTART_REST_S, a) for a in (False, True)]
            rows.append([tier, str(nodes), *(f"{s:.0f}" for s in fresh), *(f"{s:.0f}" for s in again)])
    headers = ["CFS tier", "nodes", "new job: off (s)", "on (s)", "restart with resume: off (s)", "on (s)"]
    section = f"""## Start time at scale, on paper

`scripts/model_startup.py`. N nodes × 8 ranks start together; each node reads the files once (its ranks share the
page cache) at min(its link, the tier's throughput / N); the link is **assumed** {CLIENT_GIB_S} GiB/s (25 Gbit/s).
A new job reads the base weights ({WEIGHTS_BYTES / GB:.2f} GB); a restart that resumes reads them and the checkpoint
({CHECKPOINT_BYTES / GB:.0f} GB). The trainer's start-up before it reads is the H200's measured
{FRESH_WINDOW_S:.1f} s (new job) and {RESTART_WINDOW_S:.1f} s (restart); the first step and the launcher add
{FRESH_REST_S:.1f} s and {RESTART_REST_S:.1f} s. Off: the reads follow that window. On (`VLA_PREFETCH`, the default):
they run during it, and only what is left delays the first step. On the H200 itself (one node, local disk, warm
cache) the measured figures were 120.6 s and 129.1 s.

{md.table(headers, rows)}

What the model leaves out: CFS's per-file and metadata costs, the datasets cache every node builds (1.5–7 minutes
for LIBERO, see "The datasets cache"), and a restart on node 0, whose page cache already holds the checkpoint it
wrote (unless memory pressure evicted it).
"""
    print(section)
    if args.write:
        md.write_section(args.write, "startup-model", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
