"""scripts/bench: measure, then write docs/benchmarks.md (its own sections only) and docs/startup-timeline.png."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scripts.benchlib import assets, image, machine, plot, startup, taco
from scripts.benchlib import fixtures as fx
from scripts.benchlib import markdown as md
from scripts.benchlib.machine import REPO, refuse_uncommitted
from scripts.benchlib.stats import Summary, ratio, seconds, size, spread

SECTIONS = ("startup", "assets", "image", "taco")  # run by default: all; taco only writes once its hook returns a body
PLACEHOLDERS = {
    "taco": taco.PLACEHOLDER,
    "gpu": "## GPU\n\n_Appended by the GPU run (not by `scripts/bench`, which leaves this section as it is)._",
}
STANDIN_BASE = image.STANDIN_BASE


@dataclass
class Context:
    """What the sections share (and what the TACO hook gets)."""

    work: Path
    tree: Path
    wheels: Path
    reps: int
    quick: bool
    docker: bool
    log: Callable[[str], None]
    image: str | None = None  # the stand-in image measured (an image ID)
    image_context: Path | None = None  # the snapshot of the build context
    wheel_server: fx.WheelServer | None = None
    created_images: list[str] = field(default_factory=list)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] bench: {text}", file=sys.stderr, flush=True)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/bench",
        description=__doc__,
        epilog="Defaults take a few minutes on a 2-core machine. Needs Docker with buildx (scripts/setup-tools) "
        "and the stand-in base (built by scripts/build-standin-base when missing), except with --no-docker.",
    )
    p.add_argument("--quick", action="store_true", help="CI smoke run: one repetition, a tiny tree, no cold cache")
    p.add_argument("--reps", type=int, help="repetitions of the start-up comparison (default 10; image builds: 3)")
    p.add_argument("--only", help=f"comma list of sections to run, of {', '.join(SECTIONS)} (default: all)")
    p.add_argument(
        "--no-docker", action="store_true", help="only what runs without Docker: start-up outside Docker, assets"
    )
    p.add_argument("--no-cold", action="store_true", help="skip the cold page-cache runs")
    p.add_argument("--image", help="measure this image instead of building the stand-in image from the working tree")
    p.add_argument(
        "--out",
        type=Path,
        default=REPO / "docs" / "benchmarks.md",
        help="the Markdown file (default docs/benchmarks.md)",
    )
    p.add_argument(
        "--plot",
        type=Path,
        default=REPO / "docs" / "startup-timeline.png",
        help="the timeline PNG (default docs/startup-timeline.png)",
    )
    p.add_argument("--no-plot", action="store_true", help="no PNG (and no matplotlib install)")
    p.add_argument("--json", type=Path, help="also write every measurement as JSON here")
    p.add_argument(
        "--keep-work", action="store_true", help="keep the temp folder (trees, staged scripts, build context)"
    )
    p.add_argument(
        "--allow-uncommitted",
        action="store_true",
        help="write docs/benchmarks.md although the measured code has uncommitted changes (trial runs only)",
    )
    args = p.parse_args(argv)
    if args.out.resolve() == (REPO / "docs" / "benchmarks.md").resolve():
        refuse_uncommitted(args.out, args.allow_uncommitted)
    args.sections = [s.strip() for s in args.only.split(",")] if args.only else list(SECTIONS)
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    return args


# ---------------------------------------------------------------- Markdown


def _row_time(s: Summary) -> list[str]:
    return [seconds(s.median), spread(s)]


def machine_md(facts: dict[str, str], command: str, end_load: str, minutes: float) -> str:
    rows = [[k, f"`{v}`" if k in ("python (host)",) else v] for k, v in facts.items()]
    rows.append(["load average at end", end_load])
    rows[-1][0] += " (includes this run's own builds)"
    cpus = os.cpu_count() or 1
    start = facts.get("load average at start", "")
    busy = [""]
    if start[:1].isdigit() and float(start.split()[0]) > 0.75 * cpus:
        busy = [
            "",
            f"The machine was busy when this run started (1-minute load average {start.split()[0]} on {cpus} CPUs: "
            "other jobs ran alongside), so absolute times and spreads are inflated; the ways alternate, so their "
            "comparison holds better than the absolute numbers.",
            "",
        ]
    return "\n".join(
        [
            "## Machine and command",
            "",
            f"Measured with `{command}` in {minutes:.1f} min. Reproduce with the same command; `scripts/bench --help` "
            "lists the options (`--quick` is the CI smoke run, `--only SECTION,…` reruns some sections, which then "
            "say so). The script rewrites only the sections between its own `bench:` markers in this file, so "
            "sections added by others (TACO, GPU) stay as they are.",
            *busy,
            md.table(["fact", "value"], rows),
        ]
    )


def intro_md() -> str:
    return "\n".join(
        [
            "# Benchmarks",
            "",
            "Generated by `scripts/bench` (start-up overhead, asset verification, image), plus sections added by other "
            "runs. Every comparison runs its ways alternately in one run, after a discarded warm-up; tables give the "
            "median, and the spread as min – max with the interquartile range.",
            "",
            "![start-up timeline](startup-timeline.png)",
        ]
    )


def _startup_table(result: startup.Result) -> tuple[str, str]:
    floor = result.total("c").median
    rows = []
    labels = dict(startup.WAYS, **{"b+marks": "(b) instrumented copy (timeline only)"})
    for way in ("a", "b", "c", "b+marks"):
        s = result.total(way)
        over = "—" if way == "c" else f"+{seconds(s.median - floor)}"
        rows.append([labels[way], *_row_time(s), over])
    a, b = result.total("a").median, result.total("b").median
    over_a, over_b = a - floor, b - floor
    verdict = (
        f"(a) is {seconds(over_a)} over the floor, (b) {seconds(over_b)}: (a) reaches the trainer {ratio(b, a)} "
        f"sooner than (b), and its overhead over the floor is {ratio(over_b, over_a)} smaller."
    )
    return md.table(["way", "median", "spread: min – max (IQR)", "over the floor"], rows), verdict


def _segments_table(results: list[startup.Result], way: str) -> str:
    names: list[str] = []
    by_mode = {}
    for r in results:
        segs = dict(r.segments(way))
        by_mode[r.mode] = segs
        for n in segs:
            if n not in names:
                names.append(n)
    header = ["segment"] + [
        ("in Docker" if r.mode == "docker" else "outside Docker") + ": median (min – max)" for r in results
    ]
    rows = []
    for n in names:
        row = [n]
        for r in results:
            s = by_mode[r.mode].get(n)
            if s is None:
                row.append("—")
            elif n.startswith("spawn torchrun"):
                row.append(f"{seconds(s.median)} (measured separately)")
            else:
                row.append(f"{seconds(s.median)} ({seconds(s.low)} – {seconds(s.high)})")
        rows.append(row)
    return md.table(header, rows)


def _probe(result: startup.Result, key: str) -> float:
    values = result.probes.get(key) or []
    return sorted(values)[len(values) // 2] if values else float("nan")


def startup_md(results: list[startup.Result], reps: int, wheel_bytes: int, image_ref: str | None) -> str:
    out = [
        "## 1. Start-up overhead: container start → trainer process up",
        "",
        "Three ways on the same stand-in image and the same synthetic LIBERO-sized assets tree:",
        "",
        "- **(a) ours**: the image's default command (`tini` → the NGC entrypoint → `vla-entrypoint run`), everything "
        "baked, the one CFS mount; `VLA_DEVICE=cpu` (the stand-in has no GPU).",
        "- **(b) seed**: the seed's flow, faithfully (`scripts/bench_seed/`): `bash …/code/run.sh` through the base's "
        "NGC entrypoint with the seed's four mounts: `bash install_transformers_replace.sh` (every start), the two "
        "existence checks, the appendix's `pip install -q --target /tmp/taco_train/site-packages <wheel>` of a "
        f"{size(wheel_bytes)} wheel served by `python3 -m http.server` on this machine, then `train_pytorch.sh` "
        "(exports, `torchrun … | tee`).",
        "- **(c) floor**: the same container (same mounts and variables) running `python3 -c` that only records the "
        "time.",
        "",
        "The clock starts on the host just before `docker run` (or the spawn) and stops at the first statement of the "
        "trainer: a `torchrun` stand-in first on `PATH` whose first line takes `time.time()` (the same line the floor "
        f"runs), read back from a bind-mounted file. The ways alternate (a, b, b instrumented, c) in each of {reps} "
        "repetition(s), after a discarded warm-up of each.",
    ]
    for r in results:
        table, verdict = _startup_table(r)
        title = (
            "### In Docker: `docker run` → trainer process up"
            if r.mode == "docker"
            else "### Outside Docker: process spawn → trainer process up"
        )
        out += ["", title, "", table, "", verdict]
    out += [
        "",
        "### Where the time goes",
        "",
        "(a), from the launcher's start-up record (`phases_s`, `launch_after_s`), a stamp written by a hook the NGC "
        "entrypoint sources just before it execs the launcher (Docker only), and the spawn-to-trainer-up time "
        "measured separately; "
        '"Python start, imports" is the remainder:',
        "",
        _segments_table(results, "a"),
        "",
        "(b), from an instrumented copy of the seed's scripts (each `#@mark` comment line becomes a timestamp; the "
        "table above uses the unmodified scripts):",
        "",
        _segments_table(results, "b+marks"),
        "",
    ]
    probe_lines = []
    for r in results:
        py, imp, gap = _probe(r, "python"), _probe(r, "imports"), _probe(r, "gap")
        where = "in the container" if r.mode == "docker" else "outside Docker"
        if r.probes.get("python") and r.probes.get("imports"):
            first = r.probes["imports"][0]
            probe_lines.append(
                f"- {where}: `python3 -c pass` takes {seconds(py)}; `python3 -c 'import entrypoint.cli, "
                f"entrypoint.launch.run'` {seconds(imp)} (the launcher's imports: {seconds(imp - py)}; the first "
                f"run, on a fresh file-system cache, {seconds(first)}); spawning the trainer stand-in "
                f"until its first statement takes {seconds(gap)} (medians of {len(r.probes['gap'])})."
            )
    out += ["Measured separately, in the same environments:", "", *probe_lines]
    out += [
        "",
        "Caveats: the stand-in's transformers is a tiny fake, so the seed's patch script here costs far less than "
        "with the real transformers (whose import alone takes seconds); the wheel is small and served on this "
        "machine, so a real download adds to (b); pip's self-version check is off (`PIP_DISABLE_PIP_VERSION_CHECK=1`, "
        "no network here), and `PYTHONPATH` is set (empty) for (b) because the seed's snippet (`export "
        "PYTHONPATH=…:$PYTHONPATH` under `set -u`) aborts when it is unset. Each of these makes (b) faster than on "
        "TI-ONE, so the gap to (a) is a lower bound.",
    ]
    if image_ref:
        out += [
            "",
            f"Image measured: `{image_ref}` (built from the working tree by `docker buildx bake openpi-standin`, "
            "tagged `vla-entrypoint/openpi-standin:bench` for the run).",
        ]
    return "\n".join(out)


def assets_md(result: assets.Result, reps: int, cold_reps: int) -> str:
    t = result.tree
    v = result.verified
    rows = []
    for way, label in assets.WAYS.items():
        warm = result.warm[way]
        cold = result.cold[way] if result.cold else None
        rows.append([label, *_row_time(warm), *(_row_time(cold) if cold else ["—", "—"])])
    find_w = result.warm["find"].median
    lines = [
        "## 2. Asset verification on a LIBERO-sized tree",
        "",
        f"The synthetic tree: {t['files']} files, of which {t['episode_files']} episode files"
        + (" (LIBERO's count)" if t["episode_files"] == fx.LIBERO_EPISODES else "")
        + f" in {t['chunks']} chunk folder(s), the LeRobot meta files, norm stats, a tokenizer and a sparse "
        f"`model.safetensors` of {size(t['weights_bytes'])} ({size(t['weights_allocated'])} allocated). Our check "
        f"verified it: dataset complete, weights {size(v.get('weights_bytes') or 0)} by header and length, checks "
        f"passed: {', '.join(v.get('passed', []))}.",
        "",
        f"Warm: {reps} repetition(s), alternating, after a warm-up. Cold: {result.cold_note}"
        + (f"; {cold_reps} repetition(s)." if result.cold else "."),
        "",
        md.table(["way", "warm median", "warm spread: min – max (IQR)", "cold median", "cold spread"], rows),
        "",
        f"Our verification alone takes {ratio(result.warm['ours'].median, find_w)} the floor's time warm"
        + (f" and {ratio(result.cold['ours'].median, result.cold['find'].median)} cold" if result.cold else "")
        + "; as a process, Python's start and imports dominate.",
    ]
    if result.cold:
        lines += [
            "",
            "This machine is a virtual machine: dropping its page cache does not drop the host's cache of the virtual "
            "disk, so cold here means the guest's cache only (a CFS/NFS mount is colder: every stat is a round trip).",
        ]
    return "\n".join(lines)


def image_md(result: image.Result, reps: int) -> str:
    rows = [[a["target"], f"`{a['base']}`", size(a["bytes"]), size(a["image_bytes"])] for a in result.added]
    ours = result.added[0]
    layer_rows = [
        [f"`{layer.created_by}`", size(layer.size) if layer.size else "0 (metadata or empty)"]
        for layer in ours["layers"]
    ]
    ok, detail = result.package_last
    build_rows = []
    labels = {
        "cold": "cold: `--no-cache`, every layer of ours",
        "one-line": "one-line change in `entrypoint/`",
        "no-change": "no change (everything cached)",
    }
    for kind, label in labels.items():
        builds = result.builds[kind]
        s = result.summary(kind)
        counts = [f"{b.executed}/{b.steps}" for b in builds]
        steps = counts[0] + (" every time" if len(counts) > 1 else "") if len(set(counts)) == 1 else ", ".join(counts)
        run_steps = sorted(sum(b.step_seconds.values()) for b in builds)
        exports = sorted(b.export_seconds for b in builds)
        build_rows.append(
            [label, *_row_time(s), steps, seconds(run_steps[len(run_steps) // 2]), seconds(exports[len(exports) // 2])]
        )
    step_medians: dict[str, list[float]] = {}
    for b in result.builds["cold"]:
        for name, sec in b.step_seconds.items():
            step_medians.setdefault(name, []).append(sec)
    step_rows = [[f"`{n}`", f"{sorted(v)[len(v) // 2]:.1f} s"] for n, v in step_medians.items()]
    return "\n".join(
        [
            "## 3. Image",
            "",
            "### Bytes each target adds over its base",
            "",
            md.table(["target", "base", "bytes added", "image size"], rows),
            "",
            "The production targets `openpi` and `openpi-push` are the same Dockerfile stage over the vendor VLA base "
            "(not pullable here): the same layers, plus `tini` from apt only if that base lacks it.",
            "",
            "Layers of our stage, oldest first:",
            "",
            md.table(["layer", "bytes"], layer_rows),
            "",
            f"Package layer last and small: **{'yes' if ok else 'NO'}**, {detail}.",
            "",
            f"### Build time of our layers ({reps} repetitions, alternating)",
            "",
            "`docker buildx bake openpi-standin` on a snapshot of the build context (tag overridden), over the "
            "present stand-in base; per repetition: cold, then the same build unchanged, then a one-line change (a "
            "comment appended to `entrypoint/__init__.py`). Times include bake's start and exporting the image into "
            "Docker.",
            "",
            md.table(
                [
                    "build",
                    "median",
                    "spread: min – max (IQR)",
                    "steps run (of ours)",
                    "in the steps run",
                    "exporting layers",
                ],
                build_rows,
            ),
            "",
            "The last two columns are medians of BuildKit's own step and export times; the rest of each build is "
            "bake's start, the context transfer and writing the image into Docker's store.",
            "",
            "Steps of the cold build (median of the step's own time):",
            "",
            md.table(["step", "time"], step_rows),
        ]
    )


# ---------------------------------------------------------------- the run


def ensure_standin_base() -> None:
    if image.image_id(STANDIN_BASE):
        return
    log(f"{STANDIN_BASE} is missing: building it with scripts/build-standin-base (needs root, about 2 min)")
    subprocess.run([str(REPO / "scripts" / "build-standin-base")], check=True)


def run(argv: list[str]) -> int:
    args = parse(argv)
    started = time.monotonic()
    reps = 1 if args.quick else (args.reps or 10)
    image_reps = 1 if args.quick else ((args.reps and min(args.reps, 3)) or 3)
    asset_reps, cold_reps = (1, 1) if args.quick else (15, 5)
    episodes, weights = (20, 10**6) if args.quick else (fx.LIBERO_EPISODES, fx.LIBERO_WEIGHTS)
    docker = not args.no_docker and any(s in args.sections for s in ("startup", "image", "taco"))
    if docker and not shutil.which("docker"):
        log("docker is not installed: use --no-docker")
        return 2
    work = Path(tempfile.mkdtemp(prefix="vla-bench-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    ctx = Context(work, work / "openpi-assets", work / "wheels", reps, args.quick, docker, log)
    shown = []  # the command as run, less the options that only say where extra output goes
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--json", "--keep-work") or arg.startswith("--json="):
            skip = arg == "--json"
        else:
            shown.append(arg)
    command = "scripts/bench" + ("" if not shown else " " + shlex.join(shown))
    facts = machine.facts(work)
    sections: dict[str, str] = {}
    raw: dict[str, object] = {"command": command, "machine": facts}
    keep_images: set[str] = set()
    try:
        log(f"work folder {work}; tree of {episodes} episodes, {size(weights)} sparse weights")
        fx.make_tree(ctx.tree, episodes, weights)
        wheel = fx.build_wheel(ctx.wheels)
        if docker:
            ensure_standin_base()
            if args.image:
                ctx.image = image.image_id(args.image)
                if not ctx.image:
                    log(f"no image {args.image}")
                    return 2
                keep_images.add(ctx.image)
            ctx.image_context = image.snapshot_context(work / "context")
            if not args.image:
                log("building the stand-in image from a snapshot of the working tree (bake openpi-standin, tag :bench)")
                build = image.bake(ctx.image_context, f"{image.TAG}:bench")
                ctx.image = build.image_id
                ctx.created_images.append(f"{image.TAG}:bench")
            assert ctx.image
            py = subprocess.run(
                ["docker", "run", "--rm", "--entrypoint", "python3", ctx.image, "--version"],
                capture_output=True,
                text=True,
            )
            facts["python (image)"] = py.stdout.strip() or py.stderr.strip()
            facts["image measured"] = ctx.image[:19]
        address = (fx.docker_gateway() or "127.0.0.1") if docker else "127.0.0.1"
        ctx.wheel_server = fx.WheelServer(ctx.wheels, address, work / "wheel-server.log")
        wheel_url = ctx.wheel_server.url(wheel.name)

        if "startup" in args.sections:
            results = []
            if docker:
                assert ctx.image
                runner = startup.DockerRunner(work, ctx.tree, wheel_url, ctx.image)
                results.append(startup.compare(runner, reps, log, probes=3 if args.quick else 15))
            host = startup.HostRunner(work, ctx.tree, wheel_url)
            results.append(startup.compare(host, reps, log, probes=3 if args.quick else 15))
            raw["startup"] = [r.to_json() for r in results]
            sections["startup"] = startup_md(results, reps, wheel.stat().st_size, ctx.image[:19] if ctx.image else None)
            if not args.no_plot and plot.ensure_matplotlib(True, log):
                plot.timeline(results, startup.WAYS, args.plot)
                log(f"wrote {args.plot}")
        if "assets" in args.sections:
            found = assets.compare(
                ctx.tree, work / "assets-work", asset_reps, cold_reps, log, cold=not (args.quick or args.no_cold)
            )
            raw["assets"] = found.to_json()
            sections["assets"] = assets_md(found, asset_reps, cold_reps)
        if "image" in args.sections and docker:
            assert ctx.image_context
            built = image.compare(ctx.image_context, image_reps, log, ctx.created_images)
            raw["image"] = built.to_json()
            sections["image"] = image_md(built, image_reps)
        if "taco" in args.sections:
            body = taco.section(ctx)
            if body:
                sections["taco"] = body
        if not sections:
            log("nothing measured")
            return 2
        stamp = f"_Measured {facts['date']} with `{command}`"
        if args.only:
            stamp += f" (a partial run, on {facts['cpu']}, {facts.get('storage driver', 'no Docker')})"
        for name in list(sections):
            if name in ("startup", "assets", "image"):
                sections[name] += f"\n\n{stamp}._"
        common = {
            "intro": intro_md(),
            "machine": machine_md(facts, command, machine.load(), (time.monotonic() - started) / 60),
        }
        if not args.only:  # a partial run leaves the full run's machine section; adds one only where there is none
            sections.update(common)
        md.update_file(args.out, sections, {**common, **PLACEHOLDERS})
        log(f"wrote {args.out} (sections: {', '.join(sections)})")
        if args.json:
            args.json.write_text(json.dumps(raw, indent=1, default=str) + "\n")
        return 0
    except (startup.BenchError, image.BuildError, RuntimeError, subprocess.CalledProcessError) as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        if ctx.wheel_server is not None:
            ctx.wheel_server.close()
        image.remove_images(ctx.created_images, keep_images | {image.image_id(f"{image.TAG}:test") or ""})
        if args.keep_work:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
