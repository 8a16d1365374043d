"""`vla-entrypoint fetch-assets`: download and unpack the openpi-assets tree once, on the TI-ONE dev machine.

The seed prepares ~55 GB with sequential `wget` + `tar -xf`: an interrupted download starts over, a truncated tarball
is found at training time, and the disk briefly holds both each tarball and its contents. Here, per manifest entry
(`manifest.py`):

1. **Download** with `net.download.OrderedStream`: parallel range requests (`--segments`, `--segment-mib`), a bounded
   read-ahead window, timeouts and retries with backoff; one stream for a server without range support.
2. **Unpack while downloading** (`unpack.py`): the archive is decoded as it arrives and written into a staging folder
   `<assets>/.vla-fetch/<entry>/tree/`, so the tarball never sits on disk (`--keep-tarballs` keeps a copy too).
   Every ~2 s the state (a decoder checkpoint, the members finished, the member being written) is saved to
   `<assets>/.vla-fetch/<entry>/state.json`; a later run resumes from there — from the last checkpoint, not from the
   start — after Ctrl-C, a lost session, a full disk or a network failure that outlasted the retries.
3. **Verify**: byte count, gzip CRC-32 and length, and the sha256 of the whole stream when the manifest pins one
   (the sha256 state is part of each checkpoint, so a resumed download is verified too). A mismatch moves the staged
   tree aside (`tree.bad-<time>`) and says so; nothing unverified reaches the training tree.
4. **Move into place**: staged files are renamed into the assets tree (same file system: no copy). An existing file
   that differs is renamed `<name>.old-<time>`, never deleted. Then `<assets>/.vla-fetch/<entry>/done.json` records
   the files and sizes, so a second run checks sizes, downloads nothing and ends in seconds. A tree the seed's
   commands already made is recognised by the same checks `check` runs and adopted as is.
5. **Check**: the asset checks of `vla-entrypoint check`, then the TI-ONE job settings to use.

The command is split by concern: `command` (flags, the run, the final check), `status` (what each entry's state
is before anything is done), `job` (probe, download, unpack, verify, place one entry), `workspace` (the
`.vla-fetch/` folder, its records, moving things aside, disk problems), `progress` (what is printed while it runs),
`manifest`, `unpack` (resumable streaming extraction) and `messages` (every sentence, in both languages).

Before any of it, the assets root must exist (`root`: a missing one is usually a missing CFS mount; `--create-root`
creates it). `--dry-run` lists each entry's state and size (`sizes`: one HEAD per source) and writes nothing.

Exit codes: 0 done and the checks pass; 2 a mis-specified request (bad manifest, URL, entry name); 3 a fetch or
verification failure, a missing assets root without `--create-root`, a destination that cannot be written, or
assets that fail the checks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from entrypoint.core.messages import Lang
    from entrypoint.core.settings import Settings
    from entrypoint.fetch.job import FetchOptions, Outcome
    from entrypoint.fetch.manifest import Entry
    from entrypoint.fetch.progress import Progress
    from entrypoint.fetch.workspace import Workspace
# The rest of the package (manifest: yaml; unpack: tarfile, bz2, lzma; net: the HTTP stack) is imported in `main`:
# building the command line imports this module for the flags, and that must cost no more than argparse.

PERSIST_EVERY_S = 2.0
CHECKPOINT_SPAN = 32 << 20  # decoded bytes between checkpoints: what a resumed run may decode twice
TIONE_ROOT = "/home/tione/notebook"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `fetch-assets` flags (cli.py adds the subcommand and calls `main`)."""
    parser.add_argument(
        "--assets-root",
        metavar="DIR",
        help="the openpi-assets root to fill [env VLA_ASSETS_ROOT; default "
        "/home/tione/notebook/embodied-ai/openpi-assets]",
    )
    parser.add_argument(
        "--manifest", metavar="FILE", help="YAML manifest to use instead of the built-in pi05_libero one"
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="where the manifest's relative URLs live (a URL or a folder); "
        "default: the manifest's base_url (the seed's object storage)",
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAMES", help="fetch only these entries (comma-separated)"
    )
    parser.add_argument(
        "--skip", action="append", default=[], metavar="NAMES", help="leave these entries out, e.g. --skip suites"
    )
    parser.add_argument(
        "--segments",
        type=int,
        default=4,
        metavar="N",
        help="parallel range requests per file (1: one stream) [default 4]",
    )
    parser.add_argument(
        "--segment-mib",
        type=float,
        default=16,
        metavar="MIB",
        help="size of each range request; memory stays under about 2 x segments x this [default 16]",
    )
    parser.add_argument(
        "--keep-tarballs",
        action="store_true",
        help="also keep each downloaded archive in <assets>/.vla-fetch/tarballs/ (needs the disk space twice)",
    )
    parser.add_argument("--force", action="store_true", help="fetch again even entries that are complete")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="show each entry's state, its size (one HEAD request per source, a few seconds at most) and what would "
        "be done; change nothing",
    )
    parser.add_argument(
        "--create-root",
        action="store_true",
        help="create the assets root when it does not exist (without it a missing root, usually a missing CFS "
        "mount, ends the command with exit 3)",
    )
    parser.add_argument("--allow-http", action="store_true", help="allow plain-http URLs (https only otherwise)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds of silence before a request is retried [default 30]",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=6,
        metavar="N",
        help="attempts per request, backoff doubling from 1 s [default 6]",
    )
    parser.add_argument("--image", metavar="REF", help="your pushed image, shown in the TI-ONE job settings at the end")
    parser.add_argument("--no-check", action="store_true", help="skip the asset checks at the end")
    parser.add_argument(
        "--job-file", metavar="PATH", help="job file whose settings the final check uses [env VLA_JOB_FILE]"
    )
    # for the tests and the benchmark: the first retry's wait, checkpoint spacing, how often the state is saved,
    # and decoding without checkpoints (what a Python without libz through ctypes does)
    parser.add_argument("--backoff", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint-span", type=int, default=CHECKPOINT_SPAN, help=argparse.SUPPRESS)
    parser.add_argument("--persist-every", type=float, default=PERSIST_EVERY_S, help=argparse.SUPPRESS)
    parser.add_argument("--no-checkpoints", action="store_true", help=argparse.SUPPRESS)


# Each numeric option's bounds: (dest, flag, lowest, highest, whole number). Out of range (nan, inf) exits 2.
NUMERIC_OPTIONS: tuple[tuple[str, str, float, float, bool], ...] = (
    ("segments", "--segments", 1, 64, True),
    ("segment_mib", "--segment-mib", 0.001, 1024, False),
    ("timeout", "--timeout", 0.001, 86400, False),
    ("retries", "--retries", 1, 1000, True),
    ("backoff", "--backoff", 0, 3600, False),
    ("checkpoint_span", "--checkpoint-span", 1, 1 << 40, True),
    ("persist_every", "--persist-every", 0, 86400, False),
)


def check_numbers(args: argparse.Namespace) -> None:
    """Raise `JobMisspecified` (exit 2) for a numeric option outside its bounds (`NUMERIC_OPTIONS`)."""
    from entrypoint.core.errors import JobMisspecified
    from entrypoint.fetch.messages import MESSAGES as M

    for dest, flag, low, high, whole in NUMERIC_OPTIONS:
        value = getattr(args, dest)
        if low <= value <= high:
            continue
        fields = {"flag": flag, "low": f"{low:g}", "high": str(high) if whole else f"{high:g}"}
        what = M("option-out-of-range", value=value, expected=M("a-whole-number" if whole else "a-number"), **fields)
        raise JobMisspecified("fetch.option", flag, what, M("option-out-of-range-fix", **fields))


def main(args: argparse.Namespace, env: Mapping[str, str] | None = None, out: TextIO | None = None) -> int:
    """Run `fetch-assets` with parsed `args`; raises `UserError` (exit 2/3) for the caller to print."""
    from entrypoint.core.host import Host
    from entrypoint.core.masking import safe_url
    from entrypoint.core.messages import language
    from entrypoint.core.numbers import human_bytes
    from entrypoint.core.settings import load_settings
    from entrypoint.fetch.manifest import check_source, load_manifest, select
    from entrypoint.fetch.messages import MESSAGES as M
    from entrypoint.fetch.progress import Progress, duration
    from entrypoint.fetch.root import create_root, locate_root, missing_root, notes
    from entrypoint.fetch.sizes import entry_sizes
    from entrypoint.fetch.status import EntryState, inspect_entry
    from entrypoint.fetch.workspace import Workspace
    from entrypoint.inspect.mounts import mount_table
    from entrypoint.inspect.storage_probe import StorageProbe

    env = dict(os.environ) if env is None else dict(env)
    out = out or sys.stdout
    lang = language(env)
    tty = out.isatty()
    progress = Progress(out, lang, tty=tty, every_s=0.5 if tty else 10.0)
    check_numbers(args)
    probe = StorageProbe(mount_table(Host.current(env)), 0)

    def probe_first(root: Path, job_file: Path, timeout: int) -> None:
        probe.timeout = timeout
        probe.require([root, job_file, *([Path(args.manifest)] if args.manifest else [])])

    settings = load_settings(
        env,
        {"assets_root": os.path.abspath(args.assets_root) if args.assets_root else None, "job_file": args.job_file},
        before_job_file=probe_first,
    )
    manifest = load_manifest(args.manifest, args.base_url)
    entries = select(manifest, args.only, args.skip)
    for entry in entries:
        check_source(entry.url, f"{manifest.source}: {entry.name}.url", args.allow_http)
    root = Path(settings.assets_root)
    location = locate_root(settings, env)
    if not location.exists and not args.create_root and not args.dry_run:
        raise missing_root(settings, location)
    workspace = Workspace(root)
    source = safe_url(manifest.base_url) if manifest.base_url else M("absolute-urls")
    progress.say(M("start", count=len(entries), source=source, root=root))
    for note in notes(location, args.create_root):
        progress.say(note)
    statuses = {e.name: inspect_entry(root, workspace, e, args.force) for e in entries}
    work = {e.name for e in entries if statuses[e.name].work}
    sizes = entry_sizes(entries, work, args.timeout, args.allow_http) if args.dry_run else None
    width = max(len(e.name) for e in entries)
    for entry in entries:
        fields = {
            "name": f"{entry.name:<{width}}",
            "status": statuses[entry.name].message,
            "url": safe_url(entry.url),
            "target": entry.target + ("/" if entry.archive else ""),
        }
        if sizes is None:
            progress.say(M("entry-line", **fields))
        else:
            progress.say(M("entry-line-sized", size=sizes.lines[entry.name], **fields))
    if sizes is not None:
        progress.say(sizes.summary())
        if not location.exists and not args.create_root:
            raise missing_root(settings, location)
        return 0
    todo = [e for e in entries if e.name in work]
    adopted = [e for e in entries if statuses[e.name].state is EntryState.ADOPTED]
    if not location.exists:
        progress.say(create_root(location))
    if todo:
        _one_heap()
    if todo or adopted:
        workspace.open()
    try:
        for entry in adopted:
            workspace.record_adopted(entry)
        outcomes = _fetch(root, workspace, todo, _options(args), progress) if todo else []
    finally:
        workspace.close()
    if outcomes:
        total_in = sum(o.bytes_in for o in outcomes)
        seconds = sum(o.seconds for o in outcomes)
        amount, took = human_bytes(total_in), duration(seconds)
        count, total = len(outcomes), len(entries)
        progress.say(
            M("fetched", count=count, total=total, amount=amount, duration=took, rate=human_bytes(total_in / seconds))
            if seconds > 0
            else M("fetched-instantly", count=count, total=total, amount=amount, duration=took)
        )
    elif not todo:
        progress.say(M("nothing-to-fetch"))
    if args.no_check:
        return 0
    return _final_check(settings, env, out, lang, args.image)


def _options(args: argparse.Namespace) -> FetchOptions:
    from entrypoint.fetch.job import FetchOptions
    from entrypoint.net.source import DownloadOptions

    download = DownloadOptions(
        timeout_s=args.timeout,
        attempts=args.retries,
        backoff_s=args.backoff,
        max_backoff_s=30.0,
        allow_http=args.allow_http,
        chunk_bytes=1 << 20,
        progress_every_s=1.0,
    )
    return FetchOptions(
        download,
        args.segments,
        max(4096, int(args.segment_mib * (1 << 20))),
        args.keep_tarballs,
        args.persist_every,
        args.checkpoint_span,
        not args.no_checkpoints,
    )


def _one_heap() -> None:
    """Keep glibc to one heap (M_ARENA_MAX=1) before the download threads start: with a heap per thread, blocks the
    read-ahead window frees in one thread are not reused by another, and peak memory is ~1.5x the window. The threads
    allocate under the GIL anyway, so nothing is lost. Elsewhere than glibc the call fails or is absent."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt(-8, 1)


def _fetch(
    root: Path, workspace: Workspace, todo: list[Entry], options: FetchOptions, progress: Progress
) -> list[Outcome]:
    """Probe every source, check the space, then fetch the entries one by one, reporting each."""
    from entrypoint.core.numbers import human_bytes
    from entrypoint.fetch.job import EntryJob, probe_sources, space_needed
    from entrypoint.fetch.messages import MESSAGES as M
    from entrypoint.fetch.progress import duration

    remotes = probe_sources(todo, workspace, options.download, progress)
    todo = [e for e in todo if e.name in remotes]
    workspace.ensure_space(space_needed(todo, remotes, workspace, options.keep_tarballs))
    progress.expect(sum(remotes[e.name].size or 0 for e in todo) or None)
    outcomes = []
    for index, entry in enumerate(todo, 1):
        job = EntryJob(
            root, workspace, entry, remotes[entry.name], options, progress, f"[{index}/{len(todo)}] {entry.name}"
        )
        try:
            outcome = job.run()
        except KeyboardInterrupt:
            progress.say(M("interrupted", name=entry.name))
            raise
        for note in outcome.notes:
            progress.say(M("entry-note", name=entry.name, note=note))
        done = {
            "name": entry.name,
            "amount": human_bytes(outcome.bytes_in),
            "duration": duration(outcome.seconds),
            "rate": human_bytes(outcome.bytes_in / outcome.seconds if outcome.seconds > 0 else 0),
            "files": outcome.files,
            "verified": outcome.verified or M("verified-stream"),
        }
        progress.say(
            M("entry-done-sha256", sha256=outcome.sha256, **done) if outcome.sha256 else M("entry-done", **done)
        )
        if outcome.aside:
            shown = ", ".join(str(p) for p in outcome.aside[:3]) + (" …" if len(outcome.aside) > 3 else "")
            progress.say(M("moved-aside", name=entry.name, count=len(outcome.aside), paths=shown))
        outcomes.append(outcome)
    return outcomes


def _final_check(settings: Settings, env: Mapping[str, str], out: TextIO, lang: Lang, image: str | None) -> int:
    """The asset checks of `vla-entrypoint check`, then the TI-ONE job settings to use; the checks' exit code."""
    from entrypoint.core.findings import exit_code_of
    from entrypoint.core.messages import render
    from entrypoint.core.report import health_summary
    from entrypoint.core.settings import DEFAULT_ASSETS_ROOT
    from entrypoint.fetch.messages import MESSAGES as M
    from entrypoint.inspect.assets import inspect_assets

    root = Path(settings.assets_root)
    report = inspect_assets(settings, env)
    health_summary(list(report.findings), M("check-heading", root=root).en, lang, out)
    code = exit_code_of(list(report.findings))
    relative = os.path.relpath(root, TIONE_ROOT) if str(root).startswith(TIONE_ROOT + "/") else None
    source = M("cfs-relative", relative=relative) if relative else M("cfs-mounted", root=root)
    lines = [
        M("job-settings"),
        M("job-image", image=image or M("image-placeholder")),
        M("job-mode"),
        M("job-storage", source=source, mount=DEFAULT_ASSETS_ROOT),
        M("job-command"),
    ]
    if code:
        lines.insert(0, M("not-ready"))
    for line in lines:
        out.write(render(line, lang) + "\n")
    out.flush()
    return code
