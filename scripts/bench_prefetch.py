"""Benchmark: the trainer's weights read ahead while it starts (`launch.prefetch`), on a cold page cache and a CFS
stand-in of capped throughput.

    python3 -m scripts.bench_prefetch [--size-mib 2048] [--mib-s 200] [--build-s 10 5] [--reps 3] [--write FILE]

A weights file of `--size-mib` lies on the FUSE CFS stand-in (`tests/support/cfs.py`: reads capped at `--mib-s` in
all, the page cache kept across opens as NFS keeps it). Each repetition drops the page cache (root: `echo 3 >
/proc/sys/vm/drop_caches`), then starts a modelled trainer: a child that spends `--build-s` seconds (its imports and
model build, during which it reads nothing), then reads the whole file in 8 MiB reads (as loading a safetensors file
does). With the read-ahead on, the launcher's own `Reader` starts at the same moment. Measured: from the trainer's
start to the file read, and the read alone. The ways alternate (off, on, on, off, …). The model beside the figures:
off = build + size / rate; on = max(build, size / rate) + the read from memory.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entrypoint.core.host import Host
from entrypoint.core.messages import Lang
from entrypoint.inspect.prefetch import Prefetch
from entrypoint.launch.prefetch import Reader
from scripts.benchlib import markdown as md
from scripts.benchlib.machine import git_revision, refuse_uncommitted
from tests.support.cfs import mounted

TRAINER = """
import os, sys, time
start = time.monotonic()
time.sleep(float(sys.argv[2]))  # the modelled imports and model build: no reads
read_from = time.monotonic()
fd = os.open(sys.argv[1], os.O_RDONLY)
while os.read(fd, 8 << 20):
    pass
os.close(fd)
end = time.monotonic()
print(f"{end - start:.3f} {end - read_from:.3f}")
"""


def drop_page_cache() -> None:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as error:
        raise SystemExit(f"cannot drop the page cache ({error}): run as root on a machine that allows it") from None


def trainer(path: Path, build_s: float) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", TRAINER, str(path), str(build_s)], capture_output=True, text=True, check=True
    )
    total, read = done.stdout.split()
    return float(total), float(read)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--mib-s", type=float, default=200.0, help="the stand-in CFS's read throughput")
    parser.add_argument("--build-s", type=float, nargs="+", default=[10.0, 5.0], help="modelled imports + build")
    parser.add_argument("--reps", type=int, default=3)
    md.add_write_options(parser)
    args = parser.parse_args(argv)
    if args.write:
        refuse_uncommitted(args.write, args.allow_uncommitted)
    rows: list[list[str]] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-prefetch-") as work,
        mounted(Path(work), read_mib_s=args.mib_s, page_cache=True) as cfs,
    ):
        block = os.urandom(8 << 20)
        with open(cfs.source / "model.safetensors", "wb") as handle:
            for _ in range(args.size_mib // 8):
                handle.write(block)
        weights = cfs.mountpoint / "model.safetensors"
        size = weights.stat().st_size
        prefetch = Prefetch(((weights, size),))
        wire_s = size / (args.mib_s * 2**20)
        for build_s in args.build_s:
            results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
            for rep in range(args.reps * 2):
                way = ("off", "on")[(rep + rep // 2) % 2]  # off on on off off on …
                drop_page_cache()
                reader = Reader(Host.current(), io.StringIO(), Lang.EN)
                if way == "on":
                    reader.start(prefetch)
                results[way].append(trainer(weights, build_s))
                reader.close()
                print(f"build {build_s:g} s, {way}: {results[way][-1]}", file=sys.stderr, flush=True)
            for way in ("off", "on"):
                totals = [t for t, _ in results[way]]
                reads = [r for _, r in results[way]]
                model = build_s + wire_s if way == "off" else max(build_s, wire_s)
                rows.append(
                    [
                        f"{build_s:g}",
                        way,
                        f"{statistics.median(totals):.2f} ({min(totals):.2f}–{max(totals):.2f})",
                        f"{statistics.median(reads):.2f}",
                        f"{model:.2f}",
                    ]
                )
    headers = ["build (s)", "read-ahead", "start → file read (s), median (min–max)", "the read alone (s)", "model (s)"]
    command = (
        f"python3 -m scripts.bench_prefetch --size-mib {args.size_mib} --mib-s {args.mib_s:g} "
        f"--build-s {' '.join(f'{b:g}' for b in args.build_s)} --reps {args.reps}"
    )
    section = f"""## Reading the trainer's files ahead

`scripts/bench_prefetch.py`: a {args.size_mib} MiB weights file on the FUSE CFS stand-in with reads capped at
{args.mib_s:g} MiB/s (the page cache kept across opens, as NFS keeps it); the page cache dropped before each run; a
modelled trainer that spends the build time without reading, then reads the whole file in 8 MiB reads; with the
read-ahead on, the launcher's `Reader` starts with it. {args.reps} runs per way and build time, alternating. The model:
off = build + size / rate ({wire_s:.2f} s on the wire); on = max(build, size / rate), plus the read from memory.

{md.table(headers, rows)}

| fact | value |
| --- | --- |
| command | `{command}` |
| revision | {git_revision()} |
| date | {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} |
"""
    print(section)
    if args.write:
        md.write_section(args.write, "prefetch", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
