"""A static file server on 127.0.0.1 in a thread, with faults on demand (tests and benchmarks only).

`serve(root, **behaviour)` yields a `FileServer`: `.url` is the base URL, `.requests` records every request (method,
path, Range, If-Range, status, body bytes sent), and `.behave(...)` changes the behaviour while it runs:

- `ranges`: honour single `Range: bytes=a-b` requests (206, `If-Range` checked against the ETag); False answers every
  request with the whole file (200), like a server without range support;
- `drop_after`, `drops`: cut the connection after `drop_after` body bytes, for the next `drops` responses (-1: all)
  that are not one-byte probes (`Range: bytes=0-0`);
- `cut_at`: a file offset no response goes past: each one is cut short there, so the bytes before it are served and
  none after, whatever order parallel range requests arrive in (an interruption at a fixed place in the file that
  outlasts the client's retries);
- `corrupt`: flip every 4099th byte of the file (at the same offsets whatever the range), a server with a bad copy;
- `rate`: bytes per second per response (paced), like an object store's per-connection limit;
- `status`: `{path: code}` answers those paths with that error.

`serve_directory(root)` is the plain form (yields the base URL), used by the TACO tests and benchmark.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CORRUPT_EVERY = 4099


@dataclass
class Behaviour:
    ranges: bool = True
    drop_after: int = 0
    drops: int = 0
    cut_at: int | None = None
    corrupt: bool = False
    status: dict[str, int] = field(default_factory=dict)
    rate: float | None = None


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    if_range: str | None
    status: int = 0
    sent: int = 0


class FileServer:
    """The running server: its base URL, the requests it saw, and its (changeable) behaviour."""

    def __init__(self, root: Path, behaviour: Behaviour) -> None:
        self.root = root.resolve()
        self.behaviour = behaviour
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        handler = type("BoundHandler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def behave(self, **changes: object) -> None:
        with self.lock:
            for name, value in changes.items():
                if not hasattr(self.behaviour, name):
                    raise AttributeError(name)
                setattr(self.behaviour, name, value)

    @property
    def bytes_sent(self) -> int:
        return sum(r.sent for r in self.requests)

    def gets(self) -> list[Request]:
        return [r for r in self.requests if r.method == "GET"]

    # called by handler threads
    def plan(self, path: str, asked: str | None) -> tuple[Behaviour, bool]:
        """A snapshot of the behaviour for one response, and whether this response is one that drops (one-byte
        probes never are)."""
        with self.lock:
            b = self.behaviour
            drop = b.drops != 0 and b.drop_after >= 0 and asked != "bytes=0-0"
            if drop and b.drops > 0:
                b.drops -= 1
            return dataclasses.replace(b, status=dict(b.status)), drop


class _Handler(BaseHTTPRequestHandler):
    server_state: FileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        state = self.server_state
        record = Request(self.command, self.path, self.headers.get("Range"), self.headers.get("If-Range"))
        state.requests.append(record)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        behaviour, drop = state.plan(path, self.headers.get("Range"))
        if path in behaviour.status:
            return self._error(record, behaviour.status[path])
        target = (state.root / path.lstrip("/")).resolve()
        if state.root not in target.parents or not target.is_file():
            return self._error(record, 404)
        size = target.stat().st_size
        stat = target.stat()
        etag = f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"'
        start, end, status = 0, size, 200
        asked = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if asked and behaviour.ranges and (not if_range or if_range == etag):
            parsed = _parse_range(asked, size)
            if parsed is None:
                record.status = 416
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            (start, end), status = parsed, 206
        record.status = status
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("ETag", etag)
        if behaviour.ranges:
            self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if not body:
            return
        count = end - start
        if drop:
            count = min(count, behaviour.drop_after)
        if behaviour.cut_at is not None:
            count = min(count, max(0, behaviour.cut_at - start))
        try:
            self._send_body(target, record, start, count, behaviour.corrupt, behaviour.rate)
        except (BrokenPipeError, ConnectionResetError):  # the client hung up (a one-byte probe, a stopped download)
            self.close_connection = True
            return
        if record.sent < end - start:
            self.close_connection = True  # the client sees the connection end early

    def _send_body(
        self, target: Path, record: Request, start: int, count: int, corrupt: bool, rate: float | None
    ) -> None:
        with target.open("rb") as handle:
            if not corrupt and not rate and count:
                record.sent = self.connection.sendfile(handle, start, count) or 0
            else:
                handle.seek(start)
                position, left, began = start, count, time.monotonic()
                while left:
                    if rate:  # pace: never ahead of `rate` bytes per second
                        ahead = record.sent / rate - (time.monotonic() - began)
                        if ahead > 0:
                            time.sleep(ahead)
                    block = bytearray(handle.read(min(left, 1 << 20 if not rate else 1 << 16)))
                    if not block:
                        break
                    if corrupt:
                        first = -position % CORRUPT_EVERY
                        for i in range(first, len(block), CORRUPT_EVERY):
                            block[i] ^= 0xFF
                    self.wfile.write(block)
                    position += len(block)
                    left -= len(block)
                    record.sent += len(block)

    def _error(self, record: Request, code: int) -> None:
        record.status = code
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """`bytes=a-b`, `bytes=a-` or `bytes=-n` as [start, end); None when unsatisfiable."""
    spec = header.strip().removeprefix("bytes=")
    first, _, last = spec.partition("-")
    if not first:
        start, end = max(0, size - int(last)), size
    else:
        start = int(first)
        end = min(size, int(last) + 1) if last else size
    return (start, end) if start < end else None


@contextmanager
def serve(root: Path, **behaviour: object) -> Iterator[FileServer]:
    """Serve `root` over plain http on 127.0.0.1 with the given behaviour; stops when the block ends."""
    server = FileServer(Path(root), Behaviour(**behaviour))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve `root` over plain http; yields the base URL (`http://127.0.0.1:PORT`)."""
    with serve(root) as server:
        yield server.url


_REFUSING: list[socket.socket] = []  # the bound, never listening socket behind `closed_port_url`, for the process


def closed_port_url(path: str = "/file") -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused), for 'unreachable' cases. The port stays bound
    by this process, never listening, until it exits: a server of a test running beside this one cannot take it."""
    if not _REFUSING:
        refusing = socket.socket()
        refusing.bind(("127.0.0.1", 0))
        _REFUSING.append(refusing)
    return f"http://127.0.0.1:{_REFUSING[0].getsockname()[1]}{path}"


__all__ = ["Behaviour", "FileServer", "Request", "closed_port_url", "serve", "serve_directory"]
