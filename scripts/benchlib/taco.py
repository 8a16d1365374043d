"""The TACO section of docs/benchmarks.md: start-up cost of the TACO wheel baked into the image (`openpi-taco`
target) versus installed at start. It is measured by `scripts/bench_taco.py` (run on its own) and kept as written;
`section()` is the hook for measuring it inside `scripts/bench` instead.

Contract: `section(ctx)` returns the Markdown body of the `taco` section (between the `bench:taco` markers,
heading included), or None to leave the section as it is. `ctx` is scripts/bench's `Context`: `ctx.work` (a temp
folder), `ctx.tree` (the synthetic assets tree), `ctx.image` (the stand-in image measured, or None without
Docker), `ctx.wheel_server` (serves `ctx.wheels`, a folder), `ctx.reps`, `ctx.log(text)`. The start-up runners in
benchlib.startup (DockerRunner/HostRunner, `compare`) can be reused with another image. Run it alone with
`scripts/bench --only taco`; it runs by default once it returns something.
"""

from __future__ import annotations

PLACEHOLDER = """## TACO: baked into the image vs installed at start

_Not measured yet. Hook: `section()` in `scripts/benchlib/taco.py`, run by `scripts/bench --only taco`._"""


def section(ctx) -> str | None:
    return None
