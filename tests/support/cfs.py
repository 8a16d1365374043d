"""A stand-in for CFS: a FUSE pass-through over a local folder that counts requests, adds a latency to each (a
remote metadata server's round trip) and can stop answering, the way an NFS server stalls.

Run as a daemon (`python -m tests.support.cfs SOURCE MOUNTPOINT CONTROL [--latency-ms N] [--read-mib-s R]`); tests
use `mounted()`,
which starts it, waits for the mount, and on leaving (also when the test failed) lets every blocked request go,
unmounts and ends the daemon, so no process is left in uninterruptible sleep.

Control is through files in the CONTROL folder (on local disk, never under the mount):
- `stall` present: every request blocks until the file is removed;
- `read-N` created by the test: the daemon answers with `counts-N.json` (requests by operation since start), so a
  test reads exact figures without timing.

`--read-mib-s R` caps the bytes read to R MiB/s in all (a CFS tier's, or a client's, throughput): each read waits for
its turn on one shared clock, so parallel readers share the rate. `--page-cache` keeps a file's pages in the
kernel's page cache across opens while its modification time is unchanged (FUSE's `auto_cache`), as NFS's
close-to-open consistency does; without it every open starts cold (request counts then do not depend on memory).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FS_NAME = "cfs-standin"
_POLL_S = 0.005  # how often a stalled request, and the control thread, look at the control folder


class _Loopback:
    """FUSE operations that forward to `source`, counting each and sleeping `latency` before answering."""

    use_ns = True

    def __init__(self, source: str, control: str, latency: float, read_bytes_s: float = 0.0) -> None:
        self.source, self.control, self.latency = source, control, latency
        self.counts: Counter[str] = Counter()
        self._counting = threading.Lock()
        self._read_bytes_s = read_bytes_s
        self._link_free_at = 0.0  # monotonic time when the capped link has sent every byte asked for so far

    def _enter(self, op: str) -> None:
        with self._counting:
            self.counts[op] += 1
        while os.path.exists(os.path.join(self.control, "stall")):
            time.sleep(_POLL_S)
        if self.latency:
            time.sleep(self.latency)

    def _real(self, path: str) -> str:
        return os.path.join(self.source, path.lstrip("/"))

    def _call(self, op: str, fn: Callable[..., Any], *args: Any) -> Any:
        self._enter(op)
        try:
            return fn(*args)
        except OSError as error:
            from mfusepy import FuseOSError

            raise FuseOSError(error.errno or errno.EIO) from None

    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        st = self._call("getattr", os.lstat, self._real(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks")  # NFS reports the space used too
        times = ("st_atime_ns", "st_mtime_ns", "st_ctime_ns")
        attrs = {key.replace("_ns", ""): getattr(st, key) for key in keys + times}
        return attrs

    def readdir(self, path: str, fh: int) -> list[str | tuple[str, int, int]]:
        """Names with their file types, as an NFS server's READDIRPLUS gives them."""

        def listing(folder: str) -> list[tuple[str, int, int]]:
            with os.scandir(folder) as found:
                return [(entry.name, entry.stat(follow_symlinks=False).st_mode, 0) for entry in found]

        return [".", "..", *self._call("readdir", listing, self._real(path))]

    def readlink(self, path: str) -> str:
        return str(self._call("readlink", os.readlink, self._real(path)))

    def access(self, path: str, amode: int) -> int:
        if not self._call("access", os.access, self._real(path), amode):
            from mfusepy import FuseOSError

            raise FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = self._call("statfs", os.statvfs, self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize")
        return {key: getattr(st, key) for key in keys} | {"f_namemax": st.f_namemax}

    def open(self, path: str, flags: int) -> int:
        return int(self._call("open", os.open, self._real(path), flags))

    def create(self, path: str, mode: int, fi: object = None) -> int:
        return int(self._call("create", os.open, self._real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        data = bytes(self._call("read", os.pread, fh, size, offset))
        if self._read_bytes_s:
            with self._counting:
                done = max(time.monotonic(), self._link_free_at) + len(data) / self._read_bytes_s
                self._link_free_at = done
            time.sleep(max(0.0, done - time.monotonic()))
        return data

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return int(self._call("write", os.pwrite, fh, data, offset))

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        self._call("truncate", os.truncate, self._real(path), length)

    def flush(self, path: str, fh: int) -> None:
        self._enter("flush")

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        self._call("fsync", os.fsync, fh)

    def release(self, path: str, fh: int) -> None:
        os.close(fh)

    def mkdir(self, path: str, mode: int) -> None:
        self._call("mkdir", os.mkdir, self._real(path), mode)

    def rmdir(self, path: str) -> None:
        self._call("rmdir", os.rmdir, self._real(path))

    def unlink(self, path: str) -> None:
        self._call("unlink", os.unlink, self._real(path))

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        self._call("rename", os.rename, self._real(old), self._real(new))

    def symlink(self, target: str, source: str) -> None:
        self._call("symlink", os.symlink, source, self._real(target))

    def chmod(self, path: str, mode: int) -> None:
        self._call("chmod", os.chmod, self._real(path), mode)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        self._enter("utimens")
        os.utime(self._real(path), ns=times) if times is not None else os.utime(self._real(path))

    def serve_counts(self, stop: threading.Event) -> None:
        """Answer each `read-N` request in the control folder with `counts-N.json`."""
        while not stop.wait(_POLL_S):
            for name in os.listdir(self.control):
                if not name.startswith("read-"):
                    continue
                with self._counting:
                    counts = dict(self.counts)
                target = os.path.join(self.control, f"counts-{name[5:]}.json")
                with open(target + ".tmp", "w", encoding="utf-8") as handle:
                    json.dump(counts, handle)
                os.replace(target + ".tmp", target)
                os.unlink(os.path.join(self.control, name))


def _serve(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("mountpoint")
    parser.add_argument("control")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--read-mib-s", type=float, default=0.0)
    parser.add_argument("--page-cache", action="store_true")
    args = parser.parse_args(argv)
    from mfusepy import FUSE

    ops = _Loopback(args.source, args.control, args.latency_ms / 1000, args.read_mib_s * 2**20)
    stop = threading.Event()
    threading.Thread(target=ops.serve_counts, args=(stop,), daemon=True).start()
    try:
        # No attribute or lookup caching in the kernel: every lookup is a request, as on NFS without its cache, so that
        # request counts are exact and do not depend on timing.
        FUSE(
            ops,
            args.mountpoint,
            foreground=True,
            nothreads=False,
            fsname=FS_NAME,
            attr_timeout=0,
            entry_timeout=0,
            negative_timeout=0,
            **({"auto_cache": True} if args.page_cache else {}),
        )
    finally:
        stop.set()


@dataclass
class Cfs:
    """A running stand-in: files put into `source` appear under `mountpoint`."""

    source: Path
    mountpoint: Path
    control: Path
    process: subprocess.Popen[bytes]

    def stall(self) -> None:
        """From now on every request blocks (an NFS server that stopped answering)."""
        (self.control / "stall").touch()

    def answer(self) -> None:
        """Let every blocked and later request through."""
        with contextlib.suppress(FileNotFoundError):
            (self.control / "stall").unlink()

    def counts(self, timeout: float = 10.0) -> Counter[str]:
        """Requests by operation since the mount started (exact: the daemon answers a numbered request)."""
        number = len(list(self.control.glob("counts-*.json"))) + 1
        (self.control / f"read-{number}").touch()
        answer = self.control / f"counts-{number}.json"
        deadline = time.monotonic() + timeout
        while not answer.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the CFS stand-in did not report its counts")
            time.sleep(_POLL_S)
        return Counter(json.loads(answer.read_text(encoding="utf-8")))


def _is_mounted(point: Path) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        return any(line.split()[4] == str(point) for line in table)


@contextlib.contextmanager
def mounted(base: Path, latency_ms: float = 0.0, read_mib_s: float = 0.0, page_cache: bool = False) -> Iterator[Cfs]:
    """A stand-in CFS under `base` (`base/source` seen at `base/mnt`); torn down on leaving, whatever happened."""
    source, point, control = base / "source", base / "mnt", base / "control"
    for folder in (source, point, control):
        folder.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parents[2]
    log = control / "daemon.log"  # a file, not a pipe: a daemon whose stderr nobody reads would block on it
    argv = [sys.executable, "-m", "tests.support.cfs", str(source), str(point), str(control)]
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [*argv, f"--latency-ms={latency_ms}", f"--read-mib-s={read_mib_s}", *(["--page-cache"] * page_cache)],
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stderr=errors,
        )
    cfs = Cfs(source, point, control, process)
    try:
        deadline = time.monotonic() + 30
        while not _is_mounted(point):
            if process.poll() is not None:
                raise RuntimeError(f"the CFS stand-in did not mount: {log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the CFS stand-in did not mount within 30 s")
            time.sleep(_POLL_S)
        yield cfs
    finally:
        cfs.answer()
        subprocess.run(["fusermount3", "-u", "-z", str(point)], check=False, capture_output=True)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def fuse_available() -> bool:
    """Whether this machine can mount the stand-in (the device, fusermount3, the binding)."""
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError):
        return False
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


if __name__ == "__main__":
    _serve(sys.argv[1:])
