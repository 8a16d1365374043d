"""`vla-entrypoint fetch-assets`: download and unpack the openpi-assets tree once, on the TI-ONE dev machine.

The seed prepares ~55 GB with sequential `wget` + `tar -xf`: an interrupted download starts over, a truncated tarball
is found at training time, and the disk briefly holds both each tarball and its contents. Here, per manifest entry
(`manifest.py`):

1. **Download** with `download.OrderedStream`: parallel range requests (`--segments`, `--segment-mib`), a bounded
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

Exit codes: 0 done and the checks pass; 2 a mis-specified request (bad manifest, URL, entry name); 3 a fetch or
verification failure, a destination that cannot be written, or assets that fail the checks.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TextIO

from entrypoint.core.errors import PreflightFailed, UserError
from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text, language, render
from entrypoint.net.download import (
    DownloadError,
    DownloadOptions,
    OrderedStream,
    Remote,
    ResumableSha256,
    human_bytes,
    probe,
)

if TYPE_CHECKING:
    from entrypoint.fetch.manifest import Entry
    from entrypoint.fetch.unpack import Checkpoint
# manifest.py and unpack.py (tarfile, bz2, lzma) are imported where used: the parser of every command imports this
# module, and `run` must not pay for them at start-up.

STATE_DIR = ".vla-fetch"
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
        type=_positive_int,
        default=4,
        metavar="N",
        help="parallel range requests per file (1: one stream) [default 4]",
    )
    parser.add_argument(
        "--segment-mib",
        type=_positive_float,
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
        "--dry-run", action="store_true", help="show each entry's state and what would be done; change nothing"
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
        type=_positive_int,
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
    parser.add_argument("--checkpoint-span", type=_positive_int, default=CHECKPOINT_SPAN, help=argparse.SUPPRESS)
    parser.add_argument("--persist-every", type=float, default=PERSIST_EVERY_S, help=argparse.SUPPRESS)
    parser.add_argument("--no-checkpoints", action="store_true", help=argparse.SUPPRESS)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


# ---------------------------------------------------------------- progress


class Progress:
    """Per-file and overall progress: bytes, percentage, rate, ETA. A redrawn bar on a terminal, a line every
    `every_s` seconds otherwise; other messages go through `log` so they never garble the bar."""

    def __init__(
        self, out: TextIO, total: int | None, *, tty: bool, every_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.out, self.total, self.tty, self.every_s, self.clock = out, total, tty, every_s, clock
        self.lock = threading.RLock()
        self.done = 0
        self.session = 0
        self.started = clock()
        self.last = 0.0
        self.shown = False
        self.entry: dict[str, Any] | None = None

    def begin(self, label: str, size: int | None, already: int) -> None:
        with self.lock:
            self.done += already
            self.entry = {"label": label, "size": size, "done": already, "session": 0, "started": self.clock()}
            self.last = 0.0

    def add(self, count: int) -> None:
        with self.lock:
            self.done += count
            self.session += count
            if self.entry is not None:
                self.entry["done"] += count
                self.entry["session"] += count
            now = self.clock()
            if now - self.last >= self.every_s:
                self.last = now
                self._show(now)

    def _show(self, now: float) -> None:
        entry = self.entry
        if entry is None:
            return
        parts = [entry["label"], _amount(entry["done"], entry["size"])]
        if self.tty and entry["size"]:
            filled = int(20 * min(1.0, entry["done"] / entry["size"]))
            parts.append("[" + "#" * filled + "-" * (20 - filled) + "]")
        rate = entry["session"] / max(now - entry["started"], 1e-6)
        parts.append(f"{human_bytes(rate)}/s")
        if entry["size"] and rate > 0:
            parts.append("ETA " + _duration(max(0, entry["size"] - entry["done"]) / rate))
        overall = f"| all {_amount(self.done, self.total)}"
        total_rate = self.session / max(now - self.started, 1e-6)
        if self.total and total_rate > 0:
            overall += " ETA " + _duration(max(0, self.total - self.done) / total_rate)
        line = "  ".join(parts) + "  " + overall
        if self.tty:
            self.out.write("\r" + line[:200] + "\033[K")
        else:
            self.out.write(line + "\n")
        self.out.flush()
        self.shown = self.tty

    def log(self, text: str) -> None:
        with self.lock:
            if self.shown:
                self.out.write("\r\033[K")
                self.shown = False
            self.out.write(text + "\n")
            self.out.flush()

    def say(self, text: Text, lang: str) -> None:
        """A bilingual message: English then Chinese on its own line when both are wanted."""
        self.log(f"{text.en}\n{text.zh}" if lang == "both" else render(text, lang))

    def writer(self, prefix: str) -> _LineWriter:
        """A text stream for `OrderedStream`'s retry notices."""
        return _LineWriter(lambda line: self.log(f"  {prefix}: {line}"))


class _LineWriter:
    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit, self.buffer = emit, ""

    def write(self, text: str) -> int:
        self.buffer += text
        while "\n" in self.buffer:
            line, self.buffer = self.buffer.split("\n", 1)
            self.emit(line.removeprefix("download "))
        return len(text)

    def flush(self) -> None:
        pass


def _amount(done: int, total: int | None) -> str:
    if not total:
        return human_bytes(done)
    return f"{human_bytes(done)} of {human_bytes(total)} {100 * done // total if total else 100}%"


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


# ---------------------------------------------------------------- problems


def _problem(id: str, where: str, en: str, zh: str, fix_en: str, fix_zh: str) -> UserError:
    return PreflightFailed(id, where, Text(en, zh), Text(fix_en, fix_zh))


def _io_problem(error: OSError, where: Path, resume: Text) -> UserError:
    """A clear message for a write that failed: disk full, read-only, permission, anything else."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        free = _free(where)
        return _problem(
            "fetch.disk-full",
            str(where),
            f"no space left on the file system of {where} ({human_bytes(free)} free)",
            f"{where} 所在文件系统空间不足(剩余 {human_bytes(free)})",
            "Free space (or grow the CFS), then run the same command again. " + resume.en,
            "请释放空间(或扩容 CFS)后再次运行同一命令。" + resume.zh,
        )
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return _problem(
            "fetch.not-writable",
            str(where),
            f"cannot write under {where}: {error.strerror}",
            f"无法写入 {where}:{error.strerror}",
            "Mount the CFS read-write on this dev machine (or pick another --assets-root), then run again.",
            "请在开发机上以读写方式挂载 CFS(或换一个 --assets-root)后再次运行。",
        )
    return _problem(
        "fetch.io",
        str(getattr(error, "filename", None) or where),
        f"a file operation failed: {error}",
        f"文件操作失败:{error}",
        "Check the storage, then run the same command again. " + resume.en,
        "请检查存储后再次运行同一命令。" + resume.zh,
    )


def _free(path: Path) -> int:
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 0


RESUMES = Text("It resumes where it stopped.", "将从中断处继续。")


# ---------------------------------------------------------------- the state folder


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def _write_json(path: Path, data: Any) -> None:
    """Atomically: a crash leaves the old file or the new one, never half of one."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _aside(path: Path, label: str, stamp: str) -> Path:
    """Rename `path` to `<name>.<label>-<stamp>` (a free name) and return the new path; nothing is deleted."""
    candidate = path.with_name(f"{path.name}.{label}-{stamp}")
    number = 1
    while os.path.lexists(candidate):
        number += 1
        candidate = path.with_name(f"{path.name}.{label}-{stamp}-{number}")
    os.replace(path, candidate)
    return candidate


@dataclass
class Workspace:
    """`<assets>/.vla-fetch/`: per-entry state, staging, markers; kept tarballs; a lock against a second run."""

    root: Path
    lock_handle: Any = None

    @property
    def dir(self) -> Path:
        return self.root / STATE_DIR

    def entry_dir(self, entry: Entry) -> Path:
        return self.dir / entry.name

    def tarball(self, entry: Entry) -> Path:
        return self.dir / "tarballs" / entry.file_name

    def open(self) -> None:
        """Create the folder and take the lock; exit 3 when the destination cannot be written or is busy."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe_file = self.dir / f"write-test-{os.getpid()}"
            probe_file.write_bytes(b"ok")
            probe_file.unlink()
            self.lock_handle = (self.dir / "lock").open("a+")
        except OSError as error:
            raise _io_problem(error, self.root, RESUMES) from None
        try:
            import fcntl

            fcntl.flock(self.lock_handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _problem(
                "fetch.busy",
                str(self.dir / "lock"),
                f"another fetch-assets is already filling {self.root}",
                f"另一个 fetch-assets 正在写入 {self.root}",
                "Wait for it to finish (or stop it), then run again.",
                "请等待其结束(或停止它)后再运行。",
            ) from None
        except (OSError, ImportError):
            pass  # a file system without locks: proceed

    def close(self) -> None:
        if self.lock_handle is not None:
            self.lock_handle.close()


# ---------------------------------------------------------------- is an entry already there?


def _adoptable(root: Path, entry: Entry) -> bool:
    """Whether a copy made without this tool (the seed's wget + tar) passes the entry's check."""
    from entrypoint.core.findings import Status
    from entrypoint.inspect.assets import InvalidAsset, check_dataset, check_norm_stats, check_weights

    if entry.check == "none" or not entry.provides:
        return False
    path = root / entry.provides[0]

    def dataset_complete(folder: Path) -> bool:
        adapter = SimpleNamespace(path=lambda name: folder.parent, dataset_repo_id=folder.name)
        return check_dataset(adapter)[1]  # type: ignore[arg-type]

    try:
        if entry.check == "lerobot-dataset":
            return dataset_complete(path)
        if entry.check == "lerobot-datasets":
            folders = (
                [p for p in sorted(path.iterdir()) if (p / "meta" / "info.json").is_file()] if path.is_dir() else []
            )
            return bool(folders) and all(dataset_complete(p) for p in folders)
        if entry.check == "norm-stats":
            check_norm_stats(path)
            return True
        if entry.check == "weights":
            findings, _ = check_weights(path)
            return all(f.status is Status.PASS for f in findings)
        return path.is_file() and path.stat().st_size > 0
    except (InvalidAsset, OSError):
        return False


def _intact(root: Path, done: dict[str, Any]) -> list[str]:
    """Files a completion record lists that are missing or changed size (at most a few, for the message)."""
    bad = []
    for path, size, kind in done.get("files", []):
        target = root / path
        try:
            stat = target.lstat()
        except OSError:
            bad.append(path)
        else:
            if kind in ("f", "h") and stat.st_size != size:
                bad.append(path)
        if len(bad) >= 5:
            break
    return bad


@dataclass
class Status:
    """What a run finds for an entry before doing anything."""

    state: str  # complete | adopted | resume | changed | forced | partial-tree | missing
    message: Text
    work: bool


def inspect_entry(root: Path, workspace: Workspace, entry: Entry, force: bool) -> Status:
    folder = workspace.entry_dir(entry)
    done = _read_json(folder / "done.json")
    state = _read_json(folder / "state.json")
    if isinstance(done, dict) and not force and _record_fits(done, entry):
        if done.get("adopted"):
            if _adoptable(root, entry):
                return Status(
                    "complete", Text("complete (found in place, passes its check)", "已完整(已存在且通过检查)"), False
                )
        else:
            bad = _intact(root, done)
            if not bad:
                return Status(
                    "complete",
                    Text(
                        f"complete (fetched {done.get('finished', '?')}, {len(done.get('files', []))} files as recorded)",
                        f"已完整({done.get('finished', '?')} 下载,{len(done.get('files', []))} 个文件与记录一致)",
                    ),
                    False,
                )
            return Status(
                "changed",
                Text(
                    f"files changed since it was fetched ({', '.join(bad)}): fetching it again",
                    f"下载后文件有变动({', '.join(bad)}):将重新获取",
                ),
                True,
            )
    if isinstance(state, dict):
        extract = state.get("extract") or {}
        if not extract:
            at = state.get("have", 0)
            return Status(
                "resume", Text(f"interrupted earlier: resuming from byte {at}", f"此前中断:将从第 {at} 字节继续"), True
            )
        at = (extract.get("checkpoint") or {}).get("in_offset", 0)
        members = extract.get("members", 0)
        return Status(
            "resume",
            Text(
                f"interrupted earlier: resuming from byte {at} ({members} members already unpacked)",
                f"此前中断:将从第 {at} 字节继续(已解压 {members} 个成员)",
            ),
            True,
        )
    if force:
        return Status("forced", Text("fetching it again (--force)", "重新获取(--force)"), True)
    if _adoptable(root, entry):
        return Status(
            "adopted",
            Text(
                "already in place (passes its check): not downloaded; --force fetches it again",
                "已就位(通过检查):不再下载;--force 可强制重新获取",
            ),
            False,
        )
    present = [p for p in entry.provides if os.path.lexists(root / p)]
    if present:
        return Status(
            "partial-tree",
            Text(
                f"{', '.join(present)} exists but is incomplete (an interrupted tar -xf?): it will be completed from the archive; "
                "files the archive also has are replaced (a different one is kept as *.old-<time>), others are left alone",
                f"{', '.join(present)} 已存在但不完整(tar -xf 曾中断?):将用归档补全;归档中同名文件被替换(内容不同的保留为 *.old-<时间>),"
                "其他文件保持不动",
            ),
            True,
        )
    return Status("missing", Text("not present: will be fetched", "不存在:将下载"), True)


def _record_fits(done: dict[str, Any], entry: Entry) -> bool:
    """A completion record still answers the manifest: same pinned sha256 and size when the manifest pins them."""
    if entry.sha256 and done.get("sha256") and done["sha256"] != entry.sha256:
        return False
    if entry.sha256 and not done.get("sha256") and not done.get("adopted"):
        return False
    return not (entry.size is not None and done.get("size") not in (None, entry.size))


# ---------------------------------------------------------------- moving staged files into place


def merge_tree(staging: Path, dest: Path, stamp: str) -> list[Path]:
    """Rename everything under `staging` into `dest`; returns the existing paths moved aside (never deleted)."""
    aside: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(staging):
        here = Path(dirpath)
        target_dir = dest / here.relative_to(staging)
        descend = []
        for name in dirnames:
            source, target = here / name, target_dir / name
            if source.is_symlink():
                filenames.append(name)
            elif target.is_dir():
                descend.append(name)
            else:
                if os.path.lexists(target):
                    aside.append(_aside(target, "old", stamp))
                _move(source, target)
        dirnames[:] = descend
        for name in filenames:
            source, target = here / name, target_dir / name
            if os.path.lexists(target):
                same = (
                    target.is_file()
                    and not target.is_symlink()
                    and not source.is_symlink()
                    and target.stat().st_size == source.lstat().st_size
                )
                if not same:
                    aside.append(_aside(target, "old", stamp))
            _move(source, target)
    for dirpath, _, _ in sorted(os.walk(staging), key=lambda item: -len(item[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)
    return aside


def _move(source: Path, target: Path) -> None:
    try:
        os.replace(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.move(str(source), str(target))  # another file system under the tree: copy, then drop our staged copy


# ---------------------------------------------------------------- one entry


@dataclass
class FetchOptions:
    """How one run downloads and unpacks (from the command line)."""

    options: DownloadOptions
    segments: int
    segment_bytes: int
    keep_tarballs: bool
    persist_every_s: float = PERSIST_EVERY_S
    span: int = CHECKPOINT_SPAN
    resumable: bool = True  # False: decode with the standard library (no checkpoints); tests use it


@dataclass
class Outcome:
    entry: Entry
    bytes_in: int = 0
    seconds: float = 0.0
    sha256: str | None = None
    verified: str = ""
    files: int = 0
    aside: list[Path] = field(default_factory=list)
    notes: list[Text] = field(default_factory=list)


class EntryJob:
    """Fetch one entry into staging, verify it, move it into place and record it."""

    def __init__(
        self,
        root: Path,
        workspace: Workspace,
        entry: Entry,
        remote: Remote,
        settings: FetchOptions,
        progress: Progress,
        label: str | None = None,
    ) -> None:
        self.root, self.workspace, self.entry, self.remote, self.settings, self.progress = (
            root,
            workspace,
            entry,
            remote,
            settings,
            progress,
        )
        self.label = label or entry.name
        self.folder = workspace.entry_dir(entry)
        self.staging = self.folder / "tree"
        self.state_file = self.folder / "state.json"
        self.outcome = Outcome(entry)
        self.stamp = _stamp()

    # -- state
    def _base_state(self) -> dict[str, Any]:
        return {
            "version": 1,
            "name": self.entry.name,
            "file": self.entry.file_name,
            "url": safe_url(self.entry.url),
            "size": self.remote.size,
            "validator": self.remote.validator,
        }

    def save(self, **values: Any) -> None:
        try:
            _write_json(self.state_file, {**self._base_state(), **values})
        except OSError:
            pass  # the previous state stays valid: a later run resumes from it

    def load(self) -> dict[str, Any] | None:
        state = _read_json(self.state_file)
        if not isinstance(state, dict) or state.get("version") != 1:
            return None
        local = self.remote.local is not None
        if state.get("size") != self.remote.size or (
            not local
            and state.get("validator")
            and self.remote.validator
            and state["validator"] != self.remote.validator
        ):
            moved = _aside(self.staging, "stale", self.stamp) if self.staging.exists() else None
            self.outcome.notes.append(
                Text(
                    "the file on the server changed since the interrupted run; starting it over"
                    + (f" (the old partial copy is kept at {moved}; delete it when done)" if moved else ""),
                    "服务器上的文件在上次中断后已更新;将重新开始"
                    + (f"(旧的部分副本保留在 {moved},可自行删除)" if moved else ""),
                )
            )
            self.state_file.unlink(missing_ok=True)
            (self.folder / "members.jsonl").unlink(missing_ok=True)
            return None
        return state

    # -- run
    def run(self) -> Outcome:
        self.folder.mkdir(parents=True, exist_ok=True)
        state = self.load()
        if state is None and self.staging.exists():  # staging without a state: not ours to trust, not ours to delete
            moved = _aside(self.staging, "stale", self.stamp)
            self.outcome.notes.append(
                Text(
                    f"a staging folder without a saved state was set aside at {moved}; delete it when done",
                    f"没有保存状态的暂存目录已移到 {moved},可自行删除",
                )
            )
        started = time.monotonic()
        if state is None or state.get("phase") != "place":
            if self.entry.archive:
                digest = self._fetch_archive(state)
            else:
                digest = self._fetch_file(state)
            self._verify(digest)
            if self._tee_path().exists():  # a kept tarball only once it verified
                os.replace(self._tee_path(), self.workspace.tarball(self.entry))
            self.save(phase="place", sha256=digest)
        else:
            digest = state.get("sha256")
            self.progress.begin(self.label, self.remote.size, self.remote.size or 0)
        self.outcome.seconds = time.monotonic() - started
        self.outcome.sha256 = digest
        self._place(digest)
        return self.outcome

    def _fetch_archive(self, state: dict[str, Any] | None) -> str | None:
        from entrypoint.fetch.unpack import (
            ArchiveError,
            ArchiveReader,
            Extractor,
            ExtractState,
            Journal,
            libz,
            make_decoder,
        )

        entry, settings = self.entry, self.settings
        extract = ExtractState.from_json(state["extract"]) if state and state.get("extract") else None
        checkpoint = extract.checkpoint if extract else None
        if checkpoint is not None and checkpoint.raw and (not settings.resumable or libz() is None):
            checkpoint = None  # this Python cannot continue a raw deflate stream: start over, skipping finished members
        if checkpoint is not None and extract is not None and extract.partial is not None:
            staged = self.staging / extract.partial.path
            need = checkpoint.out_offset - extract.partial.data_offset
            if not staged.is_file() or staged.stat().st_size < need:
                checkpoint = None
        hasher = self._hasher(checkpoint)
        start = checkpoint.in_offset if checkpoint else 0
        members = extract.members if extract else 0
        journal = Journal(self.folder / "members.jsonl", keep=members)
        if checkpoint is None and members:
            self.outcome.notes.append(
                Text(
                    f"this run reads the archive from its start again but skips the {members} members already unpacked",
                    f"本次从头读取归档,但跳过已解压的 {members} 个成员",
                )
            )
        tee = self._open_tee(start)
        decoder = make_decoder(entry.format or "gzip", settings.span, checkpoint, settings.resumable)
        self.progress.begin(self.label, self.remote.size, start)
        stream = OrderedStream(
            self.remote,
            start,
            options=settings.options,
            segments=settings.segments,
            segment_bytes=settings.segment_bytes,
            log=self.progress.writer(entry.name),
        )
        partial = extract.partial if checkpoint is not None and extract is not None else None
        skip = (
            extract.resume_at - checkpoint.out_offset
            if checkpoint is not None and extract is not None and partial is None
            else 0
        )
        reader = ArchiveReader(
            stream,
            decoder,
            in_offset=start,
            out_offset=checkpoint.out_offset if checkpoint else 0,
            hasher=hasher,
            tee=tee,
            on_input=self.progress.add,
            skip=skip,
        )
        extractor = Extractor(
            reader,
            self.staging,
            journal,
            members=members if checkpoint else 0,
            skip_members=0 if checkpoint else members,
            partial=partial,
            persist=lambda s: self.save(phase="fetch", extract=s.to_json(), tee=tee is not None),
            persist_every_s=settings.persist_every_s,
        )
        self.staging.mkdir(parents=True, exist_ok=True)
        try:
            extractor.run()
        except ArchiveError as error:
            self._reject(Text(f"the archive is damaged: {error.en}", f"归档损坏:{error.zh}"), tee)
        except BaseException as error:
            with contextlib.suppress(OSError, ValueError):
                self.save(phase="fetch", extract=extractor.state().to_json(), tee=tee is not None)
            if isinstance(error, DownloadError) and error.kind == "changed":
                raise self._download_problem(error) from None
            raise self._translate(error) from None
        finally:
            stream.close()
            journal.close()
            if tee is not None:
                tee.close()
        if self.remote.size is not None and reader.in_offset != self.remote.size:
            self._reject(
                Text(
                    f"the archive ended after {reader.in_offset} of {self.remote.size} bytes",
                    f"归档在 {reader.in_offset}/{self.remote.size} 字节处结束",
                ),
                None,
            )
        self.outcome.bytes_in = reader.in_offset - start
        if extractor.skipped_types:
            self.outcome.notes.append(
                Text(
                    f"{len(extractor.skipped_types)} special members (devices, pipes) were not unpacked",
                    f"{len(extractor.skipped_types)} 个特殊成员(设备、管道)未解压",
                )
            )
        return hasher.hexdigest() if hasher is not None else None

    def _hasher(self, checkpoint: Checkpoint | None) -> ResumableSha256 | None:
        if checkpoint is None:
            return ResumableSha256()
        if checkpoint.sha_state is not None:
            try:
                return ResumableSha256(checkpoint.sha_state)
            except ValueError:
                pass
        self.outcome.notes.append(
            Text(
                "the download was resumed without a saved sha256 state: its sha256 cannot be computed "
                "(the gzip CRC-32 and length are still checked)",
                "续传时没有保存的 sha256 状态:无法计算 sha256(仍会校验 gzip CRC-32 与长度)",
            )
        )
        return None

    def _tee_path(self) -> Path:
        return self.workspace.tarball(self.entry).with_name(self.entry.file_name + ".part")

    def _open_tee(self, start: int) -> Any:
        if not self.settings.keep_tarballs or self.remote.local is not None:
            return None
        path = self._tee_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if start == 0:
            return path.open("wb")
        if path.is_file() and path.stat().st_size >= start:
            handle = path.open("r+b")
            handle.truncate(start)
            handle.seek(start)
            return handle
        self.outcome.notes.append(
            Text(
                "--keep-tarballs: this download resumed without the start of the tarball, so it is not kept",
                "--keep-tarballs:本次续传缺少归档开头部分,因此不保留归档",
            )
        )
        return None

    def _fetch_file(self, state: dict[str, Any] | None) -> str | None:
        entry = self.entry
        staged = self.staging / Path(entry.to or entry.file_name).name
        self.staging.mkdir(parents=True, exist_ok=True)
        hasher = ResumableSha256()
        start = 0
        if state is not None and staged.is_file():  # a partial file from an interrupted run: hash it and continue
            with staged.open("rb") as handle:
                while block := handle.read(1 << 20):
                    hasher.update(block)
                    start += len(block)
            if self.remote.size is not None and start > self.remote.size:
                hasher, start = ResumableSha256(), 0
        self.progress.begin(self.label, self.remote.size, start)
        stream = OrderedStream(
            self.remote,
            start,
            options=self.settings.options,
            segments=self.settings.segments,
            segment_bytes=self.settings.segment_bytes,
            log=self.progress.writer(entry.name),
        )
        self.save(phase="fetch", have=start)
        written = start
        try:
            with staged.open("r+b" if start else "wb") as handle:
                handle.truncate(start)
                handle.seek(start)
                for block in stream:
                    handle.write(block)
                    hasher.update(block)
                    written += len(block)
                    self.progress.add(len(block))
        except BaseException as error:
            self.save(phase="fetch", have=written)
            raise self._translate(error) from None
        finally:
            stream.close()
        if self.remote.size is not None and written != self.remote.size:
            self._reject(
                Text(
                    f"the download ended after {written} of {self.remote.size} bytes",
                    f"下载在 {written}/{self.remote.size} 字节处结束",
                ),
                None,
            )
        self.outcome.bytes_in = written - start
        return hasher.hexdigest()

    def _verify(self, digest: str | None) -> None:
        checks = ["size"] if self.remote.size is not None else []
        if self.entry.archive and self.entry.format == "gzip":
            checks.append("gzip CRC-32")
        expected = self.entry.sha256
        if expected is not None and digest is not None:
            if digest != expected:
                self._reject(
                    Text(
                        f"sha256 {digest} is not the manifest's {expected}",
                        f"sha256 为 {digest},与清单中的 {expected} 不符",
                    ),
                    None,
                )
            checks.append("sha256 as pinned")
        elif expected is not None:
            checks.append("sha256 NOT checked (resumed without its state)")
        self.outcome.verified = " + ".join(checks) or "complete stream"

    def _reject(self, what: Text, tee: Any) -> None:
        """A verification failure: keep what was fetched aside, clear the state, exit 3."""
        if tee is not None:
            tee.close()
        moved = []
        if self.staging.exists():
            moved.append(_aside(self.staging, "bad", self.stamp))
        for tarball in (self._tee_path(), self.remote.local):  # a kept tarball that does not verify is not used again
            if tarball is not None and tarball.exists() and self.workspace.dir in tarball.parents:
                moved.append(_aside(tarball, "bad", self.stamp))
        self.state_file.unlink(missing_ok=True)
        (self.folder / "members.jsonl").unlink(missing_ok=True)
        kept = ", ".join(str(m) for m in moved) or "nothing"
        raise _problem(
            "fetch.verify",
            safe_url(self.entry.url),
            f"{self.entry.name}: {what.en}; nothing was moved into {self.root}, the bad copy is kept at {kept}",
            f"{self.entry.name}:{what.zh};未放入 {self.root},损坏的副本保留在 {kept}",
            "Check the source (a different file version? a pinned sha256 or size that is out of date?), then run "
            "again: the entry starts over. Delete the kept copy once you no longer need it.",
            "请检查来源(文件版本不同?清单中固定的 sha256 或大小已过期?)后再次运行:该条目将重新开始。不需要时可删除保留的副本。",
        )

    def _download_problem(self, error: DownloadError) -> UserError:
        return PreflightFailed(
            f"fetch.{error.kind}",
            error.where,
            error.what,
            Text(
                error.fix.en + " Running the same command again resumes where it stopped.",
                error.fix.zh + " 再次运行同一命令即可从中断处继续。",
            ),
        )

    def _translate(self, error: BaseException) -> BaseException:
        if isinstance(error, DownloadError):
            return self._download_problem(error)
        if isinstance(error, OSError):
            return _io_problem(error, self.root, RESUMES)
        return error  # KeyboardInterrupt and the like: the state is saved; the caller reports it

    def _place(self, digest: str | None) -> None:
        entry = self.entry
        dest = self.root / (entry.into if entry.archive else str(Path(entry.to).parent))  # type: ignore[arg-type]
        try:
            self.outcome.aside = merge_tree(self.staging, dest, self.stamp) if self.staging.exists() else []
            if entry.archive:
                from entrypoint.fetch.unpack import Journal

                listed = Journal(self.folder / "members.jsonl").entries
                files = [[f"{entry.into}/{e['p']}", e["s"], e["t"]] for e in listed if e["t"] in ("f", "h", "l")]
            else:
                files = [
                    [
                        entry.to,
                        self.remote.size if self.remote.size is not None else (self.root / entry.to).stat().st_size,
                        "f",
                    ]
                ]  # type: ignore[arg-type]
            self.outcome.files = len(files)
            _write_json(
                self.folder / "done.json",
                {
                    "name": entry.name,
                    "url": safe_url(entry.url),
                    "size": self.remote.size,
                    "sha256": digest,
                    "validator": self.remote.validator,
                    "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "files": files,
                },
            )
            self.state_file.unlink(missing_ok=True)
            (self.folder / "members.jsonl").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.staging.rmdir()
        except OSError as error:
            raise _io_problem(error, self.root, RESUMES) from None


# ---------------------------------------------------------------- the command


def _one_heap() -> None:
    """Keep glibc to one heap (M_ARENA_MAX=1) before the download threads start: with a heap per thread, blocks the
    read-ahead window frees in one thread are not reused by another, and peak memory is ~1.5x the window. The threads
    allocate under the GIL anyway, so nothing is lost. Elsewhere than glibc the call fails or is absent."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt(-8, 1)


def main(args: argparse.Namespace, env: dict[str, str] | None = None, out: TextIO | None = None) -> int:
    """Run `fetch-assets` with parsed `args`; raises `UserError` (exit 2/3) for the caller to print."""
    env = dict(os.environ) if env is None else env
    out = out or sys.stdout
    lang = language(env)

    def say(text: Text) -> None:
        _emit(out, text, lang)

    from entrypoint.fetch.manifest import check_source, load_manifest, select

    manifest = load_manifest(args.manifest, args.base_url)
    entries = select(manifest, args.only, args.skip)
    for entry in entries:
        check_source(entry.url, f"{manifest.source}: {entry.name}.url", args.allow_http)
    from entrypoint.core.settings import load_settings

    settings = load_settings(
        env, {"assets_root": os.path.abspath(args.assets_root) if args.assets_root else None, "job_file": args.job_file}
    )
    root = Path(settings.assets_root)
    workspace = Workspace(root)
    say(
        Text(
            f"fetch-assets: {len(entries)} entries from {safe_url(manifest.base_url or '(absolute URLs)')} into {root}",
            f"fetch-assets:{len(entries)} 个条目,来源 {safe_url(manifest.base_url or '(绝对地址)')},目标 {root}",
        )
    )
    statuses = {e.name: inspect_entry(root, workspace, e, args.force) for e in entries}
    width = max(len(e.name) for e in entries)
    for entry in entries:
        target = entry.into + "/" if entry.archive else entry.to
        say(
            Text(
                f"  {entry.name:<{width}}  {statuses[entry.name].message.en}  [{safe_url(entry.url)} -> {target}]",
                f"  {entry.name:<{width}}  {statuses[entry.name].message.zh}  [{safe_url(entry.url)} -> {target}]",
            )
        )
    if args.dry_run:
        return 0
    todo = [e for e in entries if statuses[e.name].work]
    if todo:
        _one_heap()
    if todo or any(statuses[e.name].state == "adopted" for e in entries):
        workspace.open()
    try:
        for entry in entries:
            if statuses[entry.name].state == "adopted":  # recorded, so later runs need only the quick check
                with contextlib.suppress(OSError):
                    folder = workspace.entry_dir(entry)
                    folder.mkdir(parents=True, exist_ok=True)
                    _write_json(
                        folder / "done.json",
                        {
                            "name": entry.name,
                            "adopted": True,
                            "url": safe_url(entry.url),
                            "size": entry.size,
                            "sha256": None,
                            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                        },
                    )
        outcomes = _fetch_all(root, workspace, todo, args, env, out, say) if todo else []
    finally:
        workspace.close()
    if outcomes:
        total_in = sum(o.bytes_in for o in outcomes)
        seconds = sum(o.seconds for o in outcomes)
        say(
            Text(
                f"fetched {len(outcomes)} of {len(entries)} entries: {human_bytes(total_in)} in {_duration(seconds)}"
                + (f" ({human_bytes(total_in / seconds)}/s)" if seconds > 0 else ""),
                f"已获取 {len(outcomes)}/{len(entries)} 个条目:{human_bytes(total_in)},用时 {_duration(seconds)}",
            )
        )
    elif not todo:
        say(Text("nothing to fetch: every entry is complete", "无需下载:所有条目均已完整"))
    if args.no_check:
        return 0
    return _final_check(settings, env, out, lang, args.image)


def _emit(out: TextIO, text: Text, lang: str) -> None:
    """One message: English then Chinese on its own line when both are wanted (as the health summary does)."""
    out.write((f"{text.en}\n{text.zh}" if lang == "both" else render(text, lang)) + "\n")
    out.flush()


def _fetch_all(
    root: Path,
    workspace: Workspace,
    todo: list[Entry],
    args: argparse.Namespace,
    env: dict[str, str],
    out: TextIO,
    say: Callable[[Text], None],
) -> list[Outcome]:
    options = DownloadOptions(
        timeout_s=args.timeout,
        attempts=args.retries,
        backoff_s=args.backoff,
        max_backoff_s=30.0,
        allow_http=args.allow_http,
        chunk_bytes=1 << 20,
        progress_every_s=1.0,
    )
    remotes: dict[str, Remote] = {}
    for entry in todo:  # every source answers before anything is downloaded
        kept = workspace.tarball(entry)
        if entry.archive and kept.is_file() and (entry.size is None or kept.stat().st_size == entry.size):
            remotes[entry.name] = Remote(str(kept), kept.stat().st_size, True, None, kept)
            say(
                Text(f"  {entry.name}: unpacking the kept tarball {kept}", f"  {entry.name}:使用保留的归档 {kept} 解压")
            )
            continue
        try:
            remote = probe(entry.url, options)
        except DownloadError as error:
            if entry.optional and error.kind in ("http", "missing"):
                say(
                    Text(
                        f"  {entry.name}: optional and not available ({error.what.en}): skipped",
                        f"  {entry.name}:可选条目不可用({error.what.zh}):已跳过",
                    )
                )
                continue
            raise PreflightFailed(
                f"fetch.{error.kind}",
                error.where,
                Text(f"{entry.name}: {error.what.en}", f"{entry.name}:{error.what.zh}"),
                Text(error.fix.en + " No download was started.", error.fix.zh + " 尚未开始任何下载。"),
            ) from None
        if entry.size is not None and remote.size is not None and remote.size != entry.size:
            raise _problem(
                "fetch.size",
                safe_url(entry.url),
                f"{entry.name}: the server's file is {remote.size} bytes, the manifest pins {entry.size}",
                f"{entry.name}:服务器上的文件为 {remote.size} 字节,清单固定为 {entry.size} 字节",
                "The file on the server is a different version, or the manifest is out of date: fix one of them.",
                "服务器上的文件版本不同,或清单已过期:请修正其中之一。",
            )
        if not remote.ranges:
            say(
                Text(
                    f"  {entry.name}: the server does not support range requests: one stream, and an interruption re-reads "
                    "the bytes before the resume point",
                    f"  {entry.name}:服务器不支持范围请求:单连接下载,中断后需重新读取续传点之前的字节",
                )
            )
        remotes[entry.name] = remote
    todo = [e for e in todo if e.name in remotes]
    needed = 0
    for entry in todo:
        size = remotes[entry.name].size or 0
        state = _read_json(workspace.entry_dir(entry) / "state.json") or {}
        done = (
            ((state.get("extract") or {}).get("checkpoint") or {}).get("in_offset", 0) if isinstance(state, dict) else 0
        )
        if remotes[entry.name].local is None:
            needed += (size - done) * (2 if args.keep_tarballs and entry.archive else 1)
        else:
            needed += size - done
    free = _free(root)
    if needed > free:
        raise _problem(
            "fetch.space",
            str(root),
            f"the entries left need about {human_bytes(needed)} but only {human_bytes(free)} is free under {root}",
            f"剩余条目约需 {human_bytes(needed)},但 {root} 下仅剩 {human_bytes(free)}",
            "Free space (or grow the CFS), or fetch fewer entries at a time (--only/--skip).",
            "请释放空间(或扩容 CFS),或分批获取(--only/--skip)。",
        )
    total = sum(remotes[e.name].size or 0 for e in todo) or None
    lang = language(env)
    progress = Progress(out, total, tty=out.isatty(), every_s=0.5 if out.isatty() else 10.0)
    settings = FetchOptions(
        options,
        args.segments,
        max(4096, int(args.segment_mib * (1 << 20))),
        args.keep_tarballs,
        args.persist_every,
        args.checkpoint_span,
        not args.no_checkpoints,
    )
    outcomes = []
    for index, entry in enumerate(todo, 1):
        job = EntryJob(
            root, workspace, entry, remotes[entry.name], settings, progress, f"[{index}/{len(todo)}] {entry.name}"
        )
        try:
            outcome = job.run()
        except KeyboardInterrupt:
            progress.say(
                Text(
                    f"interrupted: {entry.name} is saved where it stopped; run the same command to resume",
                    f"已中断:{entry.name} 的进度已保存;再次运行同一命令即可继续",
                ),
                lang,
            )
            raise
        for note in outcome.notes:
            progress.say(Text(f"  {entry.name}: {note.en}", f"  {entry.name}:{note.zh}"), lang)
        rate = outcome.bytes_in / outcome.seconds if outcome.seconds > 0 else 0
        digest = f", sha256 {outcome.sha256}" if outcome.sha256 else ""
        progress.say(
            Text(
                f"  {entry.name}: done, {human_bytes(outcome.bytes_in)} in {_duration(outcome.seconds)} ({human_bytes(rate)}/s), "
                f"files: {outcome.files}, verified: {outcome.verified}{digest}",
                f"  {entry.name}:完成,{human_bytes(outcome.bytes_in)},用时 {_duration(outcome.seconds)},文件数 {outcome.files},"
                f"已校验:{outcome.verified}{digest}",
            ),
            lang,
        )
        if outcome.aside:
            shown = ", ".join(str(p) for p in outcome.aside[:3]) + (" …" if len(outcome.aside) > 3 else "")
            progress.say(
                Text(
                    f"  {entry.name}: {len(outcome.aside)} existing paths differed and were moved aside: {shown}",
                    f"  {entry.name}:{len(outcome.aside)} 个已有路径内容不同,已移到一旁:{shown}",
                ),
                lang,
            )
        outcomes.append(outcome)
    return outcomes


def _final_check(settings: Any, env: dict[str, str], out: TextIO, lang: str, image: str | None) -> int:
    from entrypoint.core.findings import exit_code_of
    from entrypoint.core.report import health_summary
    from entrypoint.core.settings import DEFAULT_ASSETS_ROOT
    from entrypoint.inspect.assets import inspect_assets

    root = Path(settings.assets_root)
    report = inspect_assets(settings, env)
    health_summary(list(report.findings), f"assets under {root}", lang, out)
    code = exit_code_of(list(report.findings))
    relative = os.path.relpath(root, TIONE_ROOT) if str(root).startswith(TIONE_ROOT + "/") else None
    source = f"<CFS root>/{relative}" if relative else f"<the CFS folder mounted here at {root}>"
    lines = [
        Text("TI-ONE job settings (task-based modeling > new job):", "TI-ONE 任务设置(任务式建模 > 新建):"),
        Text(
            f"  image:          {image or '<the image you pushed with scripts/push_image.py>'}",
            f"  训练镜像:       {image or '<用 scripts/push_image.py 推送的镜像>'}",
        ),
        Text("  training mode:  DDP, N nodes of whole 8-GPU machines", "  训练模式:       DDP,N 个整机 8 卡节点"),
        Text(
            f"  storage:        one row: CFS {source} -> {DEFAULT_ASSETS_ROOT}",
            f"  存储路径:       仅一行:CFS {source} -> {DEFAULT_ASSETS_ROOT}",
        ),
        Text(
            "  start command:  (leave empty: the image's default command runs vla-entrypoint)",
            "  启动命令:       (留空:镜像默认命令会运行 vla-entrypoint)",
        ),
    ]
    if code:
        lines.insert(
            0,
            Text(
                "the assets are not ready: fix what the checks above report before submitting a job",
                "资源尚未就绪:请先修复上面检查报告的问题再提交任务",
            ),
        )
    for line in lines:
        out.write(render(line, lang) + "\n")
    out.flush()
    return code
