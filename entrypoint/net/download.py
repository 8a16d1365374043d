"""Downloads: one file from a URL (or a local file used in place), robust enough for a job's start-up.

Contract of `fetch(source, into, ...)`:
- `source` is an `https://` URL, an `http://` URL (only with `allow_http`), a `file://` URL or a plain path.
  A local file is never copied: it is hashed where it is and returned as is (`downloaded=False`).
- A URL is streamed to `<into>/<name>.part` (memory stays bounded by `chunk_bytes`), then renamed to
  `<into>/<name>`; `<name>` is the last segment of the URL's path, percent-decoded.
- Each connect and each read waits at most `timeout_s`: a server that accepts and then falls silent is a
  stall, not a hang. A failed attempt (timeout, reset, early close, HTTP 408/429/5xx) is retried up to
  `attempts` tries in all, waiting `backoff_s`, doubling, capped at `max_backoff_s`; a `deadline_s`, when
  given, bounds the whole fetch. Other HTTP errors (404, 403 …) fail at once.
- A retry resumes where the last attempt stopped with an HTTP `Range` request (guarded by `If-Range` with the
  first response's ETag or Last-Modified); a server that ignores the range gets the whole file again. A
  `.part` file left by an earlier process is resumed too (its bytes are hashed first); a pinned `sha256`
  catches a partial file that belonged to another version.
- Redirects to plain http are refused unless `allow_http`. Proxies come from the usual `*_proxy` variables.
- A progress line (bytes, percentage when the size is known, rate) goes to `progress` at most every
  `progress_every_s`, then one line when done.
- With `sha256`, a mismatch removes the downloaded file (a local file is left alone) and raises.
Failures raise `DownloadError`, whose bilingual `what`/`fix` and `where` (the URL with any query hidden) are
ready for a user; `kind` tells callers whether the request was mis-specified (`scheme`) or failed.

Beyond `fetch`, for large files (`vla-entrypoint fetch-assets`):
- `probe(url, options)` asks for one byte (`Range: bytes=0-0`) and reports the size, whether the server honours
  ranges, and the validator (ETag or Last-Modified) that later range requests send as `If-Range`.
- `OrderedStream` yields a URL's bytes `[start, size)` in order, with the same timeouts and retries: several
  range requests of `segment_bytes` in parallel when the server allows it, never more than `window` segments held
  in memory; otherwise one stream which, when a retry finds a server that cannot resume, discards the bytes it
  already delivered instead of starting the caller over. A local file is read in place.
- `ResumableSha256` is a sha256 whose running state can be saved and restored across processes (OpenSSL's
  context through ctypes; plain `hashlib` without that ability where libcrypto cannot be loaded).
- `_Transfer` fetches bytes `[base + have, end)` into a sink: a `.part` file, or memory for a segment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import http.client
import io
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TextIO

from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text

RETRYABLE_HTTP = frozenset({408, 429, 500, 502, 503, 504})
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)")


@dataclass(frozen=True)
class DownloadOptions:
    """How patient and how noisy a fetch is. The defaults suit a wheel of tens of MB at a job's start."""

    timeout_s: float = 30.0  # each connect and each read; silence this long is a stall
    attempts: int = 4  # tries in all
    backoff_s: float = 1.0  # wait before the second try; doubles each time
    max_backoff_s: float = 30.0
    deadline_s: float | None = None  # the whole fetch, retries included
    allow_http: bool = False  # plain http (and redirects to it) only when explicitly allowed
    chunk_bytes: int = 1 << 20
    progress_every_s: float = 1.0


@dataclass(frozen=True)
class Downloaded:
    """The file, its size and sha256, how long it took and how many tries; `downloaded` is False for a local file."""

    path: Path
    size: int
    sha256: str
    seconds: float
    attempts: int
    downloaded: bool


class DownloadError(Exception):
    """A fetch that did not produce the file.

    `kind`: scheme | missing | http | network | timeout | deadline | checksum | changed (the file changed on the server
    during the download) | no-range (a segment request was answered with the whole file).
    """

    def __init__(self, kind: str, what: Text, where: str, fix: Text, retryable: bool = False) -> None:
        super().__init__(what.en)
        self.kind, self.what, self.where, self.fix, self.retryable = kind, what, where, fix, retryable


def source_name(source: str) -> str:
    """The file name a source names: the last path segment, percent-decoded for URLs."""
    parts = urllib.parse.urlsplit(source)
    if parts.scheme in ("http", "https", "file"):
        return urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
    return Path(source).name


def local_path(source: str) -> Path | None:
    """The path of a local source (plain path or `file://` URL); None for an http(s) URL.

    Raises `DownloadError` (kind `scheme`) for any other scheme (ftp://, s3:// …).
    """
    parts = urllib.parse.urlsplit(source)
    if parts.scheme == "file":
        return Path(urllib.request.url2pathname(parts.path))
    if parts.scheme in ("http", "https"):
        return None
    if parts.scheme and len(parts.scheme) > 1:
        raise DownloadError(
            "scheme",
            Text(
                f"unsupported address {safe_url(source)}: only https://, http://, file:// or a path",
                f"不支持的地址 {safe_url(source)}:仅支持 https://、http://、file:// 或文件路径",
            ),
            safe_url(source),
            Text("Give an https URL or a file path.", "请提供 https 地址或文件路径。"),
        )
    return Path(source)


def check_scheme(source: str, allow_http: bool) -> None:
    """Raise `DownloadError` (kind `scheme`) for a source this policy refuses: plain http unless allowed."""
    local_path(source)
    if urllib.parse.urlsplit(source).scheme == "http" and not allow_http:
        raise DownloadError(
            "scheme",
            Text(
                f"{safe_url(source)} is plain http: downloads are https-only",
                f"{safe_url(source)} 使用明文 http:下载仅允许 https",
            ),
            safe_url(source),
            Text(
                "Use an https URL, or explicitly allow http for a trusted network.",
                "请改用 https 地址,或在可信网络中显式允许 http。",
            ),
        )


def fetch(
    source: str,
    into: Path,
    *,
    sha256: str | None = None,
    options: DownloadOptions = DownloadOptions(),
    progress: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Downloaded:
    """Make `source` available as a local file with a known sha256 (see the module docstring)."""
    check_scheme(source, options.allow_http)
    start = clock()
    path = local_path(source)
    name = source_name(source)
    meter = _Meter(name, progress, clock, options.progress_every_s)
    if path is not None:
        if not path.is_file():
            raise DownloadError(
                "missing",
                Text(f"{path} does not exist or is not a file", f"{path} 不存在或不是文件"),
                str(path),
                Text("Check the path (is the storage mounted?).", "请检查路径(存储是否已挂载?)。"),
            )
        hasher, size = _hash_file(path, meter, options.chunk_bytes)
        digest = hasher.hexdigest()
        _verify(digest, sha256, path, source, remove=False)
        return Downloaded(path, size, digest, clock() - start, 0, False)
    if not name:
        raise DownloadError(
            "scheme",
            Text(f"{safe_url(source)} names no file", f"{safe_url(source)} 未指明文件名"),
            safe_url(source),
            Text("Give the URL of the file itself.", "请提供文件本身的地址。"),
        )
    into.mkdir(parents=True, exist_ok=True)
    target = into / name
    transfer = _Transfer(source, target.with_name(name + ".part"), options, meter, clock)
    attempts = transfer.run(start, sleep)
    target.unlink(missing_ok=True)
    os.replace(transfer.part, target)
    digest = transfer.hasher.hexdigest()
    _verify(digest, sha256, target, source, remove=True)
    meter.done(transfer.have, clock() - start, digest)
    return Downloaded(target, transfer.have, digest, clock() - start, attempts, True)


def _verify(digest: str, expected: str | None, path: Path, source: str, remove: bool) -> None:
    if expected is None or digest == expected.lower():
        return
    if remove:
        path.unlink(missing_ok=True)
    raise DownloadError(
        "checksum",
        Text(
            f"{safe_url(source)} has sha256 {digest}, not the expected {expected.lower()}: refused",
            f"{safe_url(source)} 的 sha256 为 {digest},与期望的 {expected.lower()} 不符:已拒绝",
        ),
        safe_url(source),
        Text(
            "Check that the pinned checksum belongs to this file, or fix the source.",
            "请确认所固定的校验和属于该文件,或修正来源。",
        ),
    )


def sha256_of(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """The sha256 of a file, read in bounded chunks."""
    return _hash_file(path, None, chunk_bytes)[0].hexdigest()


def _hash_file(path: Path, meter: _Meter | None, chunk: int) -> tuple[hashlib._Hash, int]:
    """A running sha256 of the file's bytes (to continue or finish) and its size."""
    hasher, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            hasher.update(block)
            size += len(block)
            if meter is not None:
                meter.tick(size, None, "hashing")
    return hasher, size


@dataclass
class _Meter:
    """Throttled progress lines: `<name>: 12.0 MiB of 40.0 MiB (30%) at 5.1 MiB/s`."""

    name: str
    out: TextIO | None
    clock: Callable[[], float]
    every: float
    started: float = field(init=False)
    last: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.last = self.clock()

    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(f"download {self.name}: {text}\n")
            self.out.flush()

    def tick(self, have: int, total: int | None, verb: str = "") -> None:
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        rate = have / max(now - self.started, 1e-9)
        share = f" ({100 * have // total}%)" if total else ""
        of = f" of {_size(total)}" if total else ""
        self.say(f"{verb + ' ' if verb else ''}{_size(have)}{of}{share} at {_size(rate)}/s")

    def done(self, size: int, seconds: float, digest: str) -> None:
        self.say(
            f"done, {_size(size)} in {seconds:.1f} s ({_size(size / max(seconds, 1e-9))}/s), sha256 {digest[:16]}…"
        )


def human_bytes(n: float) -> str:
    """`512 B`, `1.5 KiB`, `12.0 MiB`, `33.1 GiB`."""
    return _size(n)


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never from https to plain http unless allowed."""

    def __init__(self, allow_http: bool) -> None:
        self.allow_http = allow_http

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if urllib.parse.urlsplit(newurl).scheme == "http" and not self.allow_http:
            raise DownloadError(
                "scheme",
                Text(
                    f"{safe_url(req.full_url)} redirects to plain http ({safe_url(newurl)}): refused",
                    f"{safe_url(req.full_url)} 重定向到明文 http({safe_url(newurl)}):已拒绝",
                ),
                safe_url(req.full_url),
                Text("Use a URL that stays on https.", "请使用始终为 https 的地址。"),
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Transfer:
    """One URL into one sink across attempts, keeping a running sha256 of every byte written.

    The transfer covers bytes `[base, end)` of the remote file (`end` None: to the end); `have` counts the bytes
    written so far, so a retry asks for `[base + have, end)`. The sink is the `.part` file (`run` opens it for
    appending and resumes it) or whatever `run` is given (a segment in memory). When the server answers a resumed
    request with the whole file: `discard_unranged` skips the bytes already written; otherwise, for a transfer
    that starts at 0 and has no end, the sink is rewound and refilled; otherwise it is an error (kind `no-range`).
    """

    def __init__(
        self,
        url: str,
        part: Path | None,
        options: DownloadOptions,
        meter: _Meter,
        clock: Callable[[], float],
        *,
        base: int = 0,
        end: int | None = None,
        hashing: bool = True,
        discard_unranged: bool = False,
        validator: str | None = None,
    ) -> None:
        self.url, self.part, self.options, self.meter, self.clock = url, part, options, meter, clock
        self.base, self.end, self.hashing, self.discard_unranged = base, end, hashing, discard_unranged
        self.opener = urllib.request.build_opener(_NoDowngrade(options.allow_http))
        self.hasher = hashlib.sha256()
        self.have = 0
        self.total: int | None = None  # size of the whole remote file, when the server says
        self.status: int | None = None  # HTTP status of the last response
        self.validator = validator  # ETag or Last-Modified of the first response, for If-Range
        if part is not None and part.is_file():  # left by an earlier process: resume it
            self.hasher, self.have = _hash_file(part, None, options.chunk_bytes)

    def run(
        self,
        start: float,
        sleep: Callable[[float], None],
        sink: BinaryIO | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> int:
        """Attempt until complete; returns the number of attempts. Raises `DownloadError` (or `_Stopped` once
        `cancelled()` says the result is no longer wanted)."""
        tries = max(1, self.options.attempts)
        for attempt in range(1, tries + 1):
            if cancelled is not None and cancelled():
                raise _Stopped()
            try:
                if sink is not None:
                    self.attempt(sink, start)
                else:
                    assert self.part is not None
                    with self.part.open("ab") as handle:
                        self.attempt(handle, start)
                return attempt
            except DownloadError as error:
                if not error.retryable or attempt == tries:
                    raise
                wait = min(self.options.backoff_s * 2 ** (attempt - 1), self.options.max_backoff_s)
                if self.options.deadline_s is not None and self.clock() + wait - start > self.options.deadline_s:
                    raise
                self.meter.say(
                    f"attempt {attempt} of {tries} failed ({error.what.en}); "
                    f"retrying in {wait:g} s from byte {self.base + self.have}"
                )
                sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _restart(self, handle: BinaryIO) -> None:
        handle.seek(0)
        handle.truncate()
        self.hasher, self.have = hashlib.sha256(), 0

    @property
    def _wanted(self) -> int | None:
        """Bytes this transfer still has to deliver, when known."""
        if self.end is not None:
            return self.end - self.base - self.have
        if self.total is not None:
            return self.total - self.base - self.have
        return None

    def attempt(self, handle: BinaryIO, start: float) -> None:
        """Fetch from byte `base + have` to `end` (or the end of the file) into `handle` (positioned at its end)."""
        where = safe_url(self.url)
        request = urllib.request.Request(
            self.url, headers={"User-Agent": "vla-entrypoint", "Accept-Encoding": "identity"}
        )
        offset = self.base + self.have
        if offset or self.end is not None:
            request.add_header("Range", f"bytes={offset}-{self.end - 1 if self.end is not None else ''}")
            if self.validator and not self.validator.startswith("W/"):  # If-Range takes strong validators only
                request.add_header("If-Range", self.validator)
        timeout = self._timeout(start)
        try:
            with self.opener.open(request, timeout=timeout) as response:
                self._start_body(response, handle)
                self._stream(response, handle, start)
        except urllib.error.HTTPError as error:
            self.status = error.code
            if error.code == 416 and not offset and self.total_from(error.headers.get("Content-Range")) == 0:
                self.total = 0  # an empty file: no byte to give
                return
            if (
                error.code == 416 and offset and self.end is None
            ):  # our partial file is not a prefix the server can continue
                if self.total_from(error.headers.get("Content-Range")) == offset:
                    self.total = offset
                    return  # already complete
                if self.base == 0 and not self.discard_unranged:
                    self._restart(handle)
                raise self._failure(
                    "http",
                    "HTTP 416 for a resumed range; starting over",
                    "续传范围无效(HTTP 416);将重新下载",
                    self.base == 0 and not self.discard_unranged,
                ) from None
            raise self._failure(
                "http",
                f"HTTP {error.code} {error.reason}",
                f"服务器返回 HTTP {error.code} {error.reason}",
                error.code in RETRYABLE_HTTP,
            ) from None
        except DownloadError:
            raise
        except (TimeoutError, http.client.RemoteDisconnected, ConnectionError, http.client.IncompleteRead) as error:
            kind = "timeout" if isinstance(error, TimeoutError) else "network"
            detail = f"no data for {timeout:g} s" if kind == "timeout" else f"connection lost ({type(error).__name__})"
            at = self.base + self.have
            raise self._failure(
                kind, f"{detail} at byte {at}", f"第 {at} 字节处{'超时' if kind == 'timeout' else '连接中断'}", True
            ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                raise self._failure(
                    "timeout", f"no answer within {timeout:g} s", f"{timeout:g} 秒内无响应", True
                ) from None
            raise self._failure(
                "network", f"cannot reach {where}: {reason}", f"无法访问 {where}:{reason}", True
            ) from None
        wanted = self._wanted
        if wanted is not None and wanted > 0:
            total = self.end if self.end is not None else self.total
            raise self._failure(
                "network",
                f"connection closed after {self.base + self.have} of {total} bytes",
                f"传输在 {self.base + self.have}/{total} 字节处中断",
                True,
            )

    @staticmethod
    def total_from(content_range: str | None) -> int | None:
        match = _CONTENT_RANGE.search(content_range or "")
        return int(match[3]) if match and match[3] != "*" else None

    def _start_body(self, response: http.client.HTTPResponse, handle: BinaryIO) -> None:
        """Align the sink with what the server sends: a continuation (206 from our offset) or the whole file."""
        self.status = response.status
        offset = self.base + self.have
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        if response.status == 206:
            match = _CONTENT_RANGE.search(response.headers.get("Content-Range", ""))
            if match and match[1] is not None and int(match[1]) == offset:
                self.total = self.total_from(match[0])
                self.validator = self.validator or validator
                return
            if self.base == 0 and self.end is None and not self.discard_unranged:
                self._restart(handle)  # a range we did not ask for: distrust it and start over
            raise self._failure(
                "http",
                "the server answered a different range; starting over",
                "服务器返回的范围不符;将重新下载",
                self.base == 0 and self.end is None,
            )
        length = response.headers.get("Content-Length")
        self.total = int(length) if length and length.isdigit() else None
        if offset or self.end is not None:  # the server ignored Range, or If-Range found the file changed
            if self.base == 0 and self.end is None and not self.discard_unranged:
                self._restart(handle)  # take the whole body
            elif self.validator and validator and validator != self.validator:
                raise DownloadError(
                    "changed",
                    Text(
                        f"{safe_url(self.url)} changed on the server during the download",
                        f"{safe_url(self.url)} 在下载过程中被服务器端更新",
                    ),
                    safe_url(self.url),
                    Text(
                        "Run the same command again: it starts this file over.", "请再次运行同一命令:该文件将重新下载。"
                    ),
                )
            elif self.discard_unranged:
                self._discard(response, offset)
            else:
                raise DownloadError(
                    "no-range",
                    Text(
                        f"{safe_url(self.url)}: the server ignored a range request",
                        f"{safe_url(self.url)}:服务器忽略了范围请求",
                    ),
                    safe_url(self.url),
                    Text("Use a single stream for this server.", "请对该服务器使用单连接下载。"),
                )
        self.validator = self.validator or validator

    def _discard(self, response: http.client.HTTPResponse, count: int) -> None:
        """Skip the first `count` bytes of a whole-file answer (a server that cannot resume a stream)."""
        left = count
        while left:
            block = response.read1(min(left, self.options.chunk_bytes))
            if not block:
                raise self._failure(
                    "network",
                    f"connection closed while skipping to byte {count}",
                    f"跳到第 {count} 字节时连接中断",
                    True,
                )
            left -= len(block)

    def _stream(self, response: http.client.HTTPResponse, handle: BinaryIO, start: float) -> None:
        into = getattr(handle, "into", None)  # a sink that is read into in place (a segment)
        while True:
            wanted = self._wanted if self.end is not None else None
            if wanted is not None and wanted <= 0:
                return
            size = self.options.chunk_bytes if wanted is None else min(wanted, self.options.chunk_bytes)
            if into is not None:
                block = into(size)
                count = response.readinto(block)
                block = block[:count]
                if count:
                    handle.advance(count)  # type: ignore[attr-defined]
            else:
                block = response.read1(size)
                if block:
                    handle.write(block)
            if not block:
                return
            if self.hashing:
                self.hasher.update(block)
            self.have += len(block)
            self.meter.tick(self.base + self.have, self.total)
            if self.options.deadline_s is not None and self.clock() - start > self.options.deadline_s:
                raise self._failure(
                    "deadline",
                    f"not finished within {self.options.deadline_s:g} s",
                    f"{self.options.deadline_s:g} 秒内未完成",
                    False,
                )

    def _timeout(self, start: float) -> float:
        if self.options.deadline_s is None:
            return self.options.timeout_s
        left = self.options.deadline_s - (self.clock() - start)
        if left <= 0:
            raise self._failure(
                "deadline",
                f"not finished within {self.options.deadline_s:g} s",
                f"{self.options.deadline_s:g} 秒内未完成",
                False,
            )
        return min(self.options.timeout_s, left)

    def _failure(self, kind: str, en: str, zh: str, retryable: bool) -> DownloadError:
        where = safe_url(self.url)
        return DownloadError(
            kind,
            Text(f"download of {where} failed: {en}", f"下载 {where} 失败:{zh}"),
            where,
            Text(
                "Check the URL and the network (proxy variables, DNS), or provide the file locally.",
                "请检查地址与网络(代理变量、DNS),或改为提供本地文件。",
            ),
            retryable,
        )


@dataclass(frozen=True)
class Remote:
    """What `probe` learnt: the size (None when the server does not say), range support, the validator for If-Range."""

    url: str
    size: int | None
    ranges: bool
    validator: str | None
    local: Path | None = None


def probe(
    source: str,
    options: DownloadOptions = DownloadOptions(),
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Remote:
    """Ask for one byte of `source` (retried like any transfer); raises `DownloadError` for 404, refusals, no answer."""
    check_scheme(source, options.allow_http)
    path = local_path(source)
    if path is not None:
        if not path.is_file():
            raise DownloadError(
                "missing",
                Text(f"{path} does not exist or is not a file", f"{path} 不存在或不是文件"),
                str(path),
                Text("Check the path (is the storage mounted?).", "请检查路径(存储是否已挂载?)。"),
            )
        return Remote(source, path.stat().st_size, True, None, path)
    if not source_name(source):
        raise DownloadError(
            "scheme",
            Text(f"{safe_url(source)} names no file", f"{safe_url(source)} 未指明文件名"),
            safe_url(source),
            Text("Give the URL of the file itself.", "请提供文件本身的地址。"),
        )
    transfer = _Transfer(
        source,
        None,
        options,
        _Meter(source_name(source), None, clock, options.progress_every_s),
        clock,
        end=1,
        hashing=False,
        discard_unranged=True,
    )
    transfer.run(clock(), sleep, io.BytesIO())
    return Remote(source, transfer.total, transfer.status == 206, transfer.validator)


class _Segment:
    """A segment's sink: one buffer of exactly the segment's size that the response is read into in place, so a slow
    server's many small reads allocate nothing (`halted()` true: the stream was closed, stop reading)."""

    def __init__(self, size: int, halted: Callable[[], bool]) -> None:
        self.buffer = bytearray(size)
        self.filled = 0
        self.halted = halted

    def into(self, count: int) -> memoryview:
        """Where the next `count` bytes go."""
        if self.halted():
            raise _Stopped()
        return memoryview(self.buffer)[self.filled : self.filled + count]

    def advance(self, count: int) -> None:
        self.filled += count

    def blocks(self, size: int) -> list[bytes]:
        """The bytes, as blocks of `size`; the buffer is released."""
        view = memoryview(self.buffer)[: self.filled]
        blocks = [bytes(view[i : i + size]) for i in range(0, self.filled, size)]
        view.release()
        self.buffer = bytearray()
        return blocks


class _Stopped(Exception):
    """The consumer closed the stream; a worker stops writing."""


class OrderedStream:
    """The bytes `[start, size)` of a probed source, in order, as an iterator of blocks (see the module docstring).

    Parallel when the server honours ranges, the size is known and `segments` > 1: `segments` worker threads fetch
    `segment_bytes` ranges, at most `window` segments ahead of the consumer (memory stays under about
    `window * segment_bytes`). A segment answered without a range switches the rest to one stream. Errors surface
    in order, after every byte before them has been delivered. Retries are reported on `log`.
    """

    def __init__(
        self,
        remote: Remote,
        start: int = 0,
        *,
        options: DownloadOptions = DownloadOptions(),
        segments: int = 4,
        segment_bytes: int = 16 << 20,
        window: int | None = None,
        log: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.remote, self.start, self.options = remote, start, options
        self.segments, self.segment_bytes = max(1, segments), max(1, segment_bytes)
        self.window = max(self.segments, window or 2 * self.segments)
        self.clock, self.sleep = clock, sleep
        self.meter = _Meter(source_name(remote.url), log, clock, options.progress_every_s)
        self.cond = threading.Condition()
        self.stopped = False
        self.parallel = False  # set once iteration starts, for callers that report it
        self.ahead = 0  # the most bytes ever requested beyond what the consumer had taken (<= window * segment_bytes)

    def __enter__(self) -> OrderedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (each finishes at most its current block or request; memory is released)."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()

    def __iter__(self) -> Iterator[bytes]:
        size = self.remote.size
        if self.remote.local is not None:
            yield from self._local(self.remote.local)
            return
        if size is not None and self.start >= size:
            return
        if self.remote.ranges and size is not None and self.segments > 1 and size - self.start > self.segment_bytes:
            self.parallel = True
            position = yield from self._parallel(size)
            if position is None:
                return
            self.parallel = False
            self.meter.say(f"the server stopped honouring ranges; continuing from byte {position} in one stream")
        else:
            position = self.start
        yield from self._sequential(position)

    def _local(self, path: Path) -> Iterator[bytes]:
        with path.open("rb") as handle:
            handle.seek(self.start)
            while block := handle.read(self.options.chunk_bytes):
                yield block

    def _parallel(self, size: int) -> Iterator[bytes]:
        """Yield segments in order; returns None when done, or the offset to continue from in one stream."""
        slots: dict[int, list[bytes] | BaseException] = {}
        state = {"next": self.start, "want": self.start, "halt": False}

        def halted() -> bool:
            return self.stopped or bool(state["halt"])

        def worker() -> None:
            while True:
                with self.cond:
                    limit = state["want"] + self.window * self.segment_bytes  # the read-ahead window
                    while not halted() and state["next"] < size and state["next"] + self.segment_bytes > limit:
                        self.cond.wait()
                        limit = state["want"] + self.window * self.segment_bytes
                    if halted() or state["next"] >= size:
                        return
                    begin = state["next"]
                    state["next"] = finish = min(begin + self.segment_bytes, size)
                    self.ahead = max(self.ahead, finish - state["want"])
                sink = _Segment(finish - begin, halted)
                transfer = _Transfer(
                    self.remote.url,
                    None,
                    self.options,
                    self.meter,
                    self.clock,
                    base=begin,
                    end=finish,
                    hashing=False,
                    validator=self.remote.validator,
                )
                try:
                    transfer.run(self.clock(), self.sleep, sink, halted)  # type: ignore[arg-type]
                    result: list[bytes] | BaseException = sink.blocks(self.options.chunk_bytes)
                except _Stopped:
                    return
                except BaseException as error:  # handed to the consumer, in order
                    result = error
                with self.cond:
                    slots[begin] = result
                    self.cond.notify_all()
                if isinstance(result, BaseException):
                    return

        for _ in range(self.segments):
            threading.Thread(target=worker, name="vla-segment", daemon=True).start()
        position = self.start
        try:
            while position < size:
                with self.cond:
                    while position not in slots and not self.stopped:
                        self.cond.wait()
                    if self.stopped:
                        return None
                    item = slots.pop(position)
                if isinstance(item, DownloadError) and item.kind == "no-range":
                    return position
                if isinstance(item, BaseException):
                    raise item
                position += sum(len(block) for block in item)
                with self.cond:
                    state["want"] = position
                    self.cond.notify_all()
                while item:
                    yield item.pop(0)  # let each block go as soon as the consumer has it
            return None
        finally:
            with self.cond:
                state["halt"] = True
                slots.clear()
                self.cond.notify_all()

    def _sequential(self, position: int) -> Iterator[bytes]:
        """One request from `position` (retried; a server that cannot resume has the delivered prefix skipped)."""
        blocks: list[bytes | BaseException | None] = []
        limit = max(2, self.window * self.segment_bytes // max(1, self.options.chunk_bytes))
        cond, stream = self.cond, self

        class Sink(io.RawIOBase):
            def writable(self) -> bool:
                return True

            def write(self, block) -> int:  # type: ignore[no-untyped-def, override]
                with cond:
                    while len(blocks) >= limit and not stream.stopped:
                        cond.wait()
                    if stream.stopped:
                        raise _Stopped()
                    blocks.append(bytes(block))
                    cond.notify_all()
                return len(block)

        def worker() -> None:
            transfer = _Transfer(
                self.remote.url,
                None,
                self.options,
                self.meter,
                self.clock,
                base=position,
                end=self.remote.size if self.remote.ranges else None,
                hashing=False,
                discard_unranged=True,
                validator=self.remote.validator,
            )
            try:
                transfer.run(self.clock(), self.sleep, Sink(), lambda: self.stopped)
                result: BaseException | None = None
                if self.remote.size is not None and position + transfer.have < self.remote.size:
                    result = transfer._failure(
                        "network",
                        f"the server ended the file at byte {position + transfer.have} of {self.remote.size}",
                        f"服务器在第 {position + transfer.have}/{self.remote.size} 字节处结束了文件",
                        False,
                    )
            except _Stopped:
                return
            except BaseException as error:
                result = error
            with cond:
                blocks.append(result)
                cond.notify_all()

        threading.Thread(target=worker, name="vla-stream", daemon=True).start()
        try:
            while True:
                with cond:
                    while not blocks and not self.stopped:
                        cond.wait()
                    if self.stopped:
                        return
                    item = blocks.pop(0)
                    cond.notify_all()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.close()


class _Sha256Context(ctypes.Structure):
    """OpenSSL's SHA256_CTX (openssl/sha.h, unchanged since 0.9.8): plain memory, so it can be saved and restored."""

    _fields_ = [
        ("h", ctypes.c_uint32 * 8),
        ("Nl", ctypes.c_uint32),
        ("Nh", ctypes.c_uint32),
        ("data", ctypes.c_uint32 * 16),
        ("num", ctypes.c_uint),
        ("md_len", ctypes.c_uint),
    ]


def _libcrypto() -> ctypes.CDLL | None:
    global _CRYPTO
    if _CRYPTO is False:
        _CRYPTO = None
        try:
            name = ctypes.util.find_library("crypto")
            lib = ctypes.CDLL(name) if name else None
            if lib is not None:
                for function in ("SHA256_Init", "SHA256_Update", "SHA256_Final"):
                    getattr(lib, function).restype = ctypes.c_int
                lib.SHA256_Update.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
                probe_context = _Sha256Context()
                if lib.SHA256_Init(ctypes.byref(probe_context)) == 1:
                    _CRYPTO = lib
        except (OSError, AttributeError):
            _CRYPTO = None
    return _CRYPTO or None


_CRYPTO: ctypes.CDLL | bool | None = False


class ResumableSha256:
    """sha256 whose running state survives the process: `state()` bytes now, `ResumableSha256(state)` later.

    Uses OpenSSL through ctypes; where libcrypto cannot be loaded it is a plain `hashlib` sha256 and `state()` is None.
    """

    def __init__(self, state: bytes | None = None, *, use_openssl: bool = True) -> None:
        self._lib = _libcrypto() if use_openssl else None
        self._hashlib = None
        if self._lib is not None:
            if state is not None and len(state) == ctypes.sizeof(_Sha256Context):
                self._context = _Sha256Context.from_buffer_copy(state)
            else:
                if state is not None:
                    raise ValueError("not a saved sha256 state")
                self._context = _Sha256Context()
                self._lib.SHA256_Init(ctypes.byref(self._context))
        else:
            if state is not None:
                raise ValueError("this Python cannot restore a sha256 state")
            self._hashlib = hashlib.sha256()

    @property
    def resumable(self) -> bool:
        return self._lib is not None

    def update(self, data: bytes, start: int = 0, length: int | None = None) -> None:
        """Hash `data[start:start + length]` (to the end when `length` is None) without copying it."""
        length = len(data) - start if length is None else length
        if length <= 0:
            return
        if self._hashlib is not None:
            self._hashlib.update(memoryview(data)[start : start + length])
            return
        address = (
            ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value + start
        )  # bytes are never copied by c_char_p
        self._lib.SHA256_Update(ctypes.byref(self._context), ctypes.c_void_p(address), length)

    def state(self) -> bytes | None:
        if self._lib is None:
            return None
        return ctypes.string_at(ctypes.addressof(self._context), ctypes.sizeof(self._context))

    def hexdigest(self) -> str:
        if self._hashlib is not None:
            return self._hashlib.hexdigest()
        copy = _Sha256Context.from_buffer_copy(self.state())
        out = ctypes.create_string_buffer(32)
        self._lib.SHA256_Final(out, ctypes.byref(copy))
        return out.raw.hex()
