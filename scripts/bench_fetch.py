"""Benchmark: preparing the openpi-assets tree with `vla-entrypoint fetch-assets` versus the seed's step 2 (sequential
`wget` then `tar -xf` of each file), the same synthetic files from the same local HTTP server.

    python3 -m scripts.bench_fetch [--scale 25] [--runs 3] [--rate-mib 0,20] [--work DIR] [--quick]   # repo root

The release is shaped like the real one at 1/`scale` of its size: the LIBERO tarball with 1693 episode files
(35 GB / scale), norm_stats.json, the per-suite tarball (4 suites, 1693 episodes, 4.7 GB / scale) and the weights
tarball (one model.safetensors, 14 GB / scale); episode and weight bytes are mostly random (they hold encoded images
and floats, which do not compress), tarballs are gzip -6 like `tar -czf`. The server is `tests/support/httpserver.py`
(threads, sendfile) on 127.0.0.1, first without a limit (the client's own speed), then with a per-connection
limit (`--rate-mib`, like an object store's per-connection throughput). Ways, alternating within each repetition
after a discarded warm-up, each into an empty folder on the same file system, `sync` before each:

- seed: the seed's commands verbatim (`cd …; wget URL; tar -xf …`, `wget -O` for the stats), tarballs left in place;
- ours: `python3 -m entrypoint fetch-assets --allow-http --base-url URL` (4 segments of 16 MiB, the final check);
- ours, one stream: the same with `--segments 1`.

Disk use is sampled every 50 ms by walking the folder (blocks allocated, each inode counted once); "peak extra" is
the highest sample minus the size of the finished training tree. Peak RSS is the highest sampled resident memory
of the way's processes together (/proc). Prints a Markdown section for docs/benchmarks.md. Installs wget with apt-get
when it is missing.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.httpserver import serve
from tests.support.synthetic import RELEASE_FILES, make_release

REPO = Path(__file__).resolve().parents[1]

REAL = {"dataset": 35e9, "suites": 4.7e9, "weights": 14e9}
EPISODES = 1693

SEED_SCRIPT = """set -euo pipefail
ASSETS={assets}
mkdir -p $ASSETS/datasets $ASSETS/assets/pi05_libero/physical-intelligence/libero $ASSETS/checkpoints $ASSETS/code
COS_BASE={base}
cd $ASSETS/datasets
wget -q $COS_BASE/datasets/libero/physical-intelligence.tar.gz
tar -xf physical-intelligence.tar.gz
wget -q -O $ASSETS/assets/pi05_libero/physical-intelligence/libero/norm_stats.json \
$COS_BASE/datasets/libero/norm_stats.json
cd $ASSETS/datasets
wget -q $COS_BASE/datasets/libero/libero_mujoco3.3.2.tar.gz
tar -xf libero_mujoco3.3.2.tar.gz
cd $ASSETS/checkpoints
wget -q $COS_BASE/models/PI05/pi05_base_pytorch.tar.gz
tar -xf pi05_base_pytorch.tar.gz
"""


@dataclass
class Sample:
    seconds: float
    peak_extra: int
    end_extra: int
    tree: int
    rss_kib: int


@dataclass
class Way:
    name: str
    label: str
    samples: list[Sample] = field(default_factory=list)


def disk_use(root: Path, seen: set[tuple[int, int]] | None = None) -> tuple[int, int]:
    """(bytes allocated under root, bytes of it inside the training tree, i.e. outside .vla-fetch and tarballs)."""
    seen = set() if seen is None else seen
    total = tree = 0
    stack = [(root, True)]
    while stack:
        folder, in_tree = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            key = (stat.st_dev, stat.st_ino)
            if key in seen:
                continue
            seen.add(key)
            inside = in_tree and entry.name != ".vla-fetch" and not entry.name.endswith((".tar.gz", ".tgz", ".part"))
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), inside))
            else:
                size = stat.st_blocks * 512
                total += size
                tree += size if inside else 0
    return total, tree


def tree_rss(pid: int) -> int:
    """Resident memory (KiB) of a process and all its descendants, from /proc."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


class Sampler:
    """Peak disk use under a folder and peak memory of a process tree, sampled in a thread."""

    def __init__(self, root: Path, every: float = 0.05) -> None:
        self.root, self.every, self.peak, self.rss = root, every, 0, 0
        self.pid: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, disk_use(self.root)[0])
            if self.pid is not None:
                self.rss = max(self.rss, tree_rss(self.pid))
            self.stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, disk_use(self.root)[0])


def run_way(way: str, base_url: str, assets: Path) -> Sample:
    if assets.exists():
        shutil.rmtree(assets)
    assets.mkdir(parents=True)
    os.sync()
    env = {**os.environ, "VLA_LANG": "en", "VLA_BAKED_JOB_FILE": "/nonexistent", "PYTHONPATH": str(REPO)}
    if way == "seed":
        command = ["bash", "-c", SEED_SCRIPT.format(assets=assets, base=base_url)]
    else:
        command = [
            sys.executable,
            "-m",
            "entrypoint",
            "fetch-assets",
            "--assets-root",
            str(assets),
            "--base-url",
            base_url,
            "--allow-http",
        ] + (["--segments", "1"] if way == "ours-one-stream" else [])
    with Sampler(assets) as sampler:
        start = time.monotonic()
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sampler.pid = process.pid
        output = process.stdout.read() if process.stdout else b""
        _, status, _ = os.wait4(process.pid, 0)
        seconds = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3) or (way != "seed" and b"health check summary: PASS" not in output):
        raise SystemExit(f"{way} failed ({code}):\n{output.decode(errors='replace')[-3000:]}")
    total, tree = disk_use(assets)
    return Sample(seconds, sampler.peak - tree, total - tree, tree, sampler.rss)


def _size(n: float) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{n:.0f} B"


def _spread(values: list[float], fmt) -> str:
    return (
        f"{fmt(statistics.median(values))} ({fmt(min(values))} – {fmt(max(values))})"
        if len(values) > 1
        else fmt(values[0])
    )


def filesystem(path: Path) -> str:
    """`ext4 on /dev/vda`, `tmpfs`, … for the folder the trees are written to."""
    result = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True)
    try:
        device, kind = result.stdout.splitlines()[1].split()[:2]
    except (IndexError, ValueError):
        return "an unknown file system"
    return kind if kind in ("tmpfs", "overlay") else f"{kind} on {device}"


def ensure_wget() -> None:
    if shutil.which("wget"):
        return
    print("installing wget (apt-get)", file=sys.stderr)
    subprocess.run(["apt-get", "update", "-qq"], check=False)
    subprocess.run(["apt-get", "install", "-y", "-qq", "wget"], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scale", type=float, default=25, help="the release at 1/SCALE of its real ~55 GB [default 25]"
    )
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each way after the warm-up [default 3]")
    parser.add_argument(
        "--work",
        type=Path,
        help="folder for the release and the trees (default: a temporary folder); "
        "a release already there at the same scale is reused",
    )
    parser.add_argument(
        "--rate-mib",
        default="0,20",
        help="per-connection limits of the server to measure, MiB/s, comma-separated; 0 is none [default 0,20]",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: scale 500, one repetition, no limit")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.runs, args.rate_mib = 500, 1, "0"
    rates = [float(r) for r in args.rate_mib.split(",") if r.strip()]
    ensure_wget()
    load_start = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    release = work / f"release-1-{args.scale:g}"
    started = time.monotonic()
    if not (release / RELEASE_FILES["weights"]).exists():
        print(f"building the release at 1/{args.scale:g} …", file=sys.stderr)
        shutil.rmtree(release, ignore_errors=True)
        make_release(
            release,
            episodes=EPISODES,
            episode_bytes=int(REAL["dataset"] / args.scale / EPISODES),
            weights_bytes=int(REAL["weights"] / args.scale),
            suite_episodes=EPISODES // 4,
            suite_episode_bytes=int(REAL["suites"] / args.scale / EPISODES),
            compresslevel=6,
        )
    sizes = {name: (release / path).stat().st_size for name, path in RELEASE_FILES.items()}
    labels = {
        "seed": "seed: `wget` then `tar -xf`, file by file",
        "ours": "ours: `fetch-assets` (4 × 16 MiB segments, unpacked while downloading, then checked)",
        "ours-one-stream": "ours, one stream: `fetch-assets --segments 1`",
    }
    results: dict[float, list[Way]] = {}
    with serve(release) as server:
        for rate in rates:
            server.behave(rate=rate * 2**20 if rate else None)
            ways = results[rate] = [Way(name, label) for name, label in labels.items()]
            for repetition in range(args.runs + 1):
                for way in ways:
                    sample = run_way(way.name, server.url, work / "assets")
                    print(
                        f"{'warm-up' if repetition == 0 else f'run {repetition}'} {way.name} (limit {rate:g}): "
                        f"{sample.seconds:.1f} s, peak extra {_size(sample.peak_extra)}, rss {sample.rss_kib // 1024} "
                        "MiB",
                        file=sys.stderr,
                        flush=True,
                    )
                    if repetition:
                        way.samples.append(sample)
    shutil.rmtree(work / "assets", ignore_errors=True)
    total = sum(sizes.values())
    tree = results[rates[0]][0].samples[0].tree
    wget = subprocess.run(["wget", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    tar = subprocess.run(["tar", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    lines = [
        "## Preparing the assets: `fetch-assets` versus the seed's `wget` + `tar -xf`",
        "",
        f"Measured with `python3 -m scripts.bench_fetch --scale {args.scale:g} --runs {args.runs} --rate-mib "
        f"{args.rate_mib}` in {(time.monotonic() - started) / 60:.1f} min on {os.cpu_count()} CPUs "
        f"({platform.machine()}), the trees on {filesystem(work)}, Python {platform.python_version()}, "
        f"{wget.split(' built')[0]}, {tar}. The release is the real one at 1/{args.scale:g}: dataset tarball "
        f"{_size(sizes['dataset'])} ({EPISODES} episode files), suites {_size(sizes['suites'])}, weights "
        f"{_size(sizes['weights'])}, norm stats {sizes['norm-stats']} B — {_size(total)} of tarballs unpacking to "
        f"{_size(tree)}, served by a threaded HTTP server on 127.0.0.1. Median of {args.runs} runs (min – max), after "
        "a warm-up of each way, ways alternating. Peak extra disk is the most the folder ever held beyond the "
        "finished tree (sampled every 50 ms); peak RSS is the way's processes together. Load average at start "
        f"{' '.join(load_start)}, at end {' '.join(Path('/proc/loadavg').read_text().split()[:3])}.",
    ]
    for rate, ways in results.items():
        lines += [
            "",
            "### No server limit (the client’s own speed)"
            if not rate
            else f"### Server limited to {rate:g} MiB/s per connection",
            "",
            "| way | time to a ready tree | throughput (tarball bytes) | peak extra disk | extra disk left at the end "
            "| peak RSS |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for way in ways:
            seconds = [s.seconds for s in way.samples]
            lines.append(
                f"| {way.label} | {_spread(seconds, lambda v: f'{v:.1f} s')} | "
                f"{_size(total / statistics.median(seconds))}/s | "
                f"{_spread([s.peak_extra for s in way.samples], _size)} | "
                f"{_size(statistics.median([s.end_extra for s in way.samples]))} | "
                f"{statistics.median([s.rss_kib for s in way.samples]) / 1024:.0f} MiB |"
            )
        seed = statistics.median(s.seconds for s in ways[0].samples)
        ours = statistics.median(s.seconds for s in ways[1].samples)
        single = statistics.median(s.seconds for s in ways[2].samples)
        lines += [
            "",
            f"`fetch-assets` is {seed / ours:.2f}× as fast as the seed here ({seed / single:.2f}× with one stream).",
        ]
    lines += [
        "",
        "The seed keeps every tarball, so its extra disk is the tarballs' size for good (and it needs that room while "
        "`tar` writes the contents); `fetch-assets` never writes the tarball — its extra is its state files.",
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
