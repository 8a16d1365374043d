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

Extension point: `_Transfer.attempt` fetches bytes `[offset, end)` into an open file; a segmented parallel
download can run several transfers over disjoint ranges of one preallocated file.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, TextIO

from entrypoint.text import Text

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
    """A fetch that did not produce the file. `kind`: scheme | missing | http | network | timeout | deadline | checksum."""

    def __init__(self, kind: str, what: Text, where: str, fix: Text, retryable: bool = False) -> None:
        super().__init__(what.en)
        self.kind, self.what, self.where, self.fix, self.retryable = kind, what, where, fix, retryable


def display(source: str) -> str:
    """`source` safe for logs: a URL loses its user info and query (signed URLs carry credentials there)."""
    parts = urllib.parse.urlsplit(source)
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path (or a Windows drive letter)
        return source
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    query = "?…" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")) + query


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
        raise DownloadError("scheme", Text(f"unsupported address {display(source)}: only https://, http://, file:// or a path",
                                           f"不支持的地址 {display(source)}:仅支持 https://、http://、file:// 或文件路径"),
                            display(source), Text("Give an https URL or a file path.", "请提供 https 地址或文件路径。"))
    return Path(source)


def check_scheme(source: str, allow_http: bool) -> None:
    """Raise `DownloadError` (kind `scheme`) for a source this policy refuses: plain http unless allowed."""
    local_path(source)
    if urllib.parse.urlsplit(source).scheme == "http" and not allow_http:
        raise DownloadError("scheme", Text(f"{display(source)} is plain http: downloads are https-only",
                                           f"{display(source)} 使用明文 http:下载仅允许 https"),
                            display(source), Text("Use an https URL, or explicitly allow http for a trusted network.",
                                                  "请改用 https 地址,或在可信网络中显式允许 http。"))


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
            raise DownloadError("missing", Text(f"{path} does not exist or is not a file", f"{path} 不存在或不是文件"), str(path),
                                Text("Check the path (is the storage mounted?).", "请检查路径(存储是否已挂载?)。"))
        hasher, size = _hash_file(path, meter, options.chunk_bytes)
        digest = hasher.hexdigest()
        _verify(digest, sha256, path, source, remove=False)
        return Downloaded(path, size, digest, clock() - start, 0, False)
    if not name:
        raise DownloadError("scheme", Text(f"{display(source)} names no file", f"{display(source)} 未指明文件名"), display(source),
                            Text("Give the URL of the file itself.", "请提供文件本身的地址。"))
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
    raise DownloadError("checksum", Text(f"{display(source)} has sha256 {digest}, not the expected {expected.lower()}: refused",
                                         f"{display(source)} 的 sha256 为 {digest},与期望的 {expected.lower()} 不符:已拒绝"),
                        display(source), Text("Check that the pinned checksum belongs to this file, or fix the source.",
                                              "请确认所固定的校验和属于该文件,或修正来源。"))


def sha256_of(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """The sha256 of a file, read in bounded chunks."""
    return _hash_file(path, None, chunk_bytes)[0].hexdigest()


def _hash_file(path: Path, meter: "_Meter | None", chunk: int) -> tuple["hashlib._Hash", int]:
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
        self.say(f"done, {_size(size)} in {seconds:.1f} s ({_size(size / max(seconds, 1e-9))}/s), sha256 {digest[:16]}…")


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
            raise DownloadError("scheme", Text(f"{display(req.full_url)} redirects to plain http ({display(newurl)}): refused",
                                               f"{display(req.full_url)} 重定向到明文 http({display(newurl)}):已拒绝"),
                                display(req.full_url), Text("Use a URL that stays on https.", "请使用始终为 https 的地址。"))
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Transfer:
    """One URL into one `.part` file across attempts, keeping a running sha256 of every byte written."""

    def __init__(self, url: str, part: Path, options: DownloadOptions, meter: _Meter, clock: Callable[[], float]) -> None:
        self.url, self.part, self.options, self.meter, self.clock = url, part, options, meter, clock
        self.opener = urllib.request.build_opener(_NoDowngrade(options.allow_http))
        self.hasher = hashlib.sha256()
        self.have = 0
        self.total: int | None = None
        self.validator: str | None = None  # ETag or Last-Modified of the first response, for If-Range
        if part.is_file():  # left by an earlier process: resume it
            self.hasher, self.have = _hash_file(part, None, options.chunk_bytes)

    def run(self, start: float, sleep: Callable[[float], None]) -> int:
        """Attempt until complete; returns the number of attempts. Raises `DownloadError`."""
        tries = max(1, self.options.attempts)
        for attempt in range(1, tries + 1):
            try:
                with self.part.open("ab") as handle:
                    self.attempt(handle, start)
                return attempt
            except DownloadError as error:
                if not error.retryable or attempt == tries:
                    raise
                wait = min(self.options.backoff_s * 2 ** (attempt - 1), self.options.max_backoff_s)
                if self.options.deadline_s is not None and self.clock() + wait - start > self.options.deadline_s:
                    raise
                self.meter.say(f"attempt {attempt} of {tries} failed ({error.what.en}); "
                               f"retrying in {wait:g} s from byte {self.have}")
                sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _restart(self, handle: BinaryIO) -> None:
        handle.seek(0)
        handle.truncate()
        self.hasher, self.have = hashlib.sha256(), 0

    def attempt(self, handle: BinaryIO, start: float) -> None:
        """Fetch from byte `self.have` to the end into `handle` (opened for appending)."""
        where = display(self.url)
        request = urllib.request.Request(self.url, headers={"User-Agent": "vla-entrypoint", "Accept-Encoding": "identity"})
        if self.have:
            request.add_header("Range", f"bytes={self.have}-")
            if self.validator:
                request.add_header("If-Range", self.validator)
        timeout = self._timeout(start)
        try:
            with self.opener.open(request, timeout=timeout) as response:
                self._start_body(response, handle)
                self._stream(response, handle, start)
        except urllib.error.HTTPError as error:
            if error.code == 416 and self.have:  # our partial file is not a prefix the server can continue
                if self.total_from(error.headers.get("Content-Range")) == self.have:
                    return  # already complete
                self._restart(handle)
                raise self._failure("http", "HTTP 416 for a resumed range; starting over", "续传范围无效(HTTP 416);将重新下载",
                                    True) from None
            raise self._failure("http", f"HTTP {error.code} {error.reason}", f"服务器返回 HTTP {error.code} {error.reason}",
                                error.code in RETRYABLE_HTTP) from None
        except DownloadError:
            raise
        except (TimeoutError, http.client.RemoteDisconnected, ConnectionError, http.client.IncompleteRead) as error:
            kind = "timeout" if isinstance(error, TimeoutError) else "network"
            detail = f"no data for {timeout:g} s" if kind == "timeout" else f"connection lost ({type(error).__name__})"
            raise self._failure(kind, f"{detail} at byte {self.have}", f"第 {self.have} 字节处{'超时' if kind == 'timeout' else '连接中断'}",
                                True) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                raise self._failure("timeout", f"no answer within {timeout:g} s", f"{timeout:g} 秒内无响应", True) from None
            raise self._failure("network", f"cannot reach {where}: {reason}", f"无法访问 {where}:{reason}", True) from None
        if self.total is not None and self.have < self.total:
            raise self._failure("network", f"connection closed after {self.have} of {self.total} bytes",
                                f"传输在 {self.have}/{self.total} 字节处中断", True)

    @staticmethod
    def total_from(content_range: str | None) -> int | None:
        match = _CONTENT_RANGE.search(content_range or "")
        return int(match[3]) if match and match[3] != "*" else None

    def _start_body(self, response: http.client.HTTPResponse, handle: BinaryIO) -> None:
        """Align the file with what the server sends: a continuation (206 from our offset) or the whole file."""
        self.validator = self.validator or response.headers.get("ETag") or response.headers.get("Last-Modified")
        if response.status == 206:
            match = _CONTENT_RANGE.search(response.headers.get("Content-Range", ""))
            if match and match[1] is not None and int(match[1]) == self.have:
                self.total = self.total_from(match[0])
                return
            self._restart(handle)  # a range we did not ask for: distrust it and start over
            raise self._failure("http", "the server answered a different range; starting over", "服务器返回的范围不符;将重新下载", True)
        if self.have:
            self._restart(handle)  # the server ignored Range (or the file changed): take the whole body
        length = response.headers.get("Content-Length")
        self.total = int(length) if length and length.isdigit() else None

    def _stream(self, response: http.client.HTTPResponse, handle: BinaryIO, start: float) -> None:
        while True:
            block = response.read1(self.options.chunk_bytes)
            if not block:
                return
            handle.write(block)
            self.hasher.update(block)
            self.have += len(block)
            self.meter.tick(self.have, self.total)
            if self.options.deadline_s is not None and self.clock() - start > self.options.deadline_s:
                raise self._failure("deadline", f"not finished within {self.options.deadline_s:g} s",
                                    f"{self.options.deadline_s:g} 秒内未完成", False)

    def _timeout(self, start: float) -> float:
        if self.options.deadline_s is None:
            return self.options.timeout_s
        left = self.options.deadline_s - (self.clock() - start)
        if left <= 0:
            raise self._failure("deadline", f"not finished within {self.options.deadline_s:g} s",
                                f"{self.options.deadline_s:g} 秒内未完成", False)
        return min(self.options.timeout_s, left)

    def _failure(self, kind: str, en: str, zh: str, retryable: bool) -> DownloadError:
        where = display(self.url)
        return DownloadError(kind, Text(f"download of {where} failed: {en}", f"下载 {where} 失败:{zh}"), where,
                             Text("Check the URL and the network (proxy variables, DNS), or provide the file locally.",
                                  "请检查地址与网络(代理变量、DNS),或改为提供本地文件。"), retryable)
