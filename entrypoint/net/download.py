"""Downloads: one file from a URL (or a local file used in place), robust enough for a job's start-up.

Contract of `fetch(source, into, ...)`:
- `source` is an `https://` URL, an `http://` URL (only with `allow_http`), a `file://` URL or a plain path.
  A local file is never copied: it is hashed where it is and returned as is (`downloaded=False`).
- A URL is streamed to `<into>/<name>.part` (memory stays bounded by `chunk_bytes`), then renamed to
  `<into>/<name>`; `<name>` is the last segment of the URL's path, percent-decoded.
- Each connect and each read waits at most `timeout_s`: a server that accepts and then falls silent is a
  stall, not a hang. A failed attempt (timeout, reset, early close, HTTP 408/429/5xx) is retried up to
  `attempts` tries in all, waiting `backoff_s`, doubling, capped at `max_backoff_s`; a `deadline_s`, when
  given, bounds the whole fetch (one it ends fails with kind `deadline`). Other HTTP errors (404, 403 …) fail at
  once. A host name that does not exist (EAI_NONAME: offline, or a typo) fails at once; one that fails to resolve
  for now (EAI_AGAIN) is tried `lookup_attempts` times at most. A request the HTTP stack refuses as malformed (the
  URL, or a proxy variable such as `https_proxy`) is the user's to fix: kind `scheme`, never retried. Each retry
  is announced on `progress`: the host, the attempt and the wait.
- A retry resumes where the last attempt stopped with an HTTP `Range` request (guarded by `If-Range` with the
  first response's ETag or Last-Modified); a server that ignores the range gets the whole file again. A
  `.part` file left by an earlier process is resumed too (its bytes are hashed first); a pinned `sha256`
  catches a partial file that belonged to another version.
- Redirects to plain http are refused unless `allow_http`. Proxies come from the usual `*_proxy` variables.
- A progress line (bytes, percentage when the size is known, rate) goes to `progress`, in `lang`, at most every
  `progress_every_s`, then one line when done.
- With `sha256`, a mismatch removes the downloaded file (a local file is left alone) and raises.
Failures raise `DownloadError`, whose bilingual `what`/`fix` and `where` (the URL with any query hidden) are
ready for a user; `kind` tells callers whether the request was mis-specified (`scheme`) or failed. The options,
the error and the checks that need no connection live in `net.source`.

Beyond `fetch`, for large files (`vla-entrypoint fetch-assets`):
- `probe(url, options)` asks for one byte (`Range: bytes=0-0`) and reports the size, whether the server honours
  ranges, and the validator (ETag or Last-Modified) that later range requests send as `If-Range`.
- `head_size(url, timeout_s)` asks once with HEAD for the size (`--dry-run`): no retry, and every failure is an
  answer (`HeadAnswer`: the size, or why it is unknown); `head_sizes` asks for several at once within one timeout.
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
import functools
import hashlib
import http.client
import io
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Protocol, TextIO, TypeAlias

from entrypoint.core.masking import mask_text, safe_url
from entrypoint.core.messages import Lang, Text, render
from entrypoint.core.numbers import human_bytes, whole_number
from entrypoint.core.oserror import os_error_text
from entrypoint.net.messages import MESSAGES as M
from entrypoint.net.source import (
    DownloadError,
    DownloadOptions,
    FailureKind,
    check_scheme,
    hash_file,
    local_path,
    source_name,
)

RETRYABLE_HTTP = frozenset({408, 429, 500, 502, 503, 504})
# getaddrinfo's answers for a name that does not exist (no record, or no address for it): asking again cannot help
_NO_SUCH_NAME = frozenset(getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name))
_DEFAULTS = DownloadOptions()
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)")


@dataclass(frozen=True)
class Downloaded:
    """The file, its size and sha256, how long it took and how many tries; `downloaded` is False for a local file."""

    path: Path
    size: int
    sha256: str
    seconds: float
    attempts: int
    downloaded: bool


def fetch(
    source: str,
    into: Path,
    *,
    sha256: str | None = None,
    options: DownloadOptions = _DEFAULTS,
    progress: TextIO | None = None,
    lang: Lang | str = Lang.EN,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Downloaded:
    """Make `source` available as a local file with a known sha256 (see the module docstring). Progress lines
    go to `progress` in `lang`."""
    check_scheme(source, options.allow_http)
    start = clock()
    path = local_path(source)
    name = source_name(source)
    meter = _Meter(name, progress, clock, options.progress_every_s, lang)
    if path is not None:
        if not path.is_file():
            raise _missing(path)
        hasher, size = hash_file(path, options.chunk_bytes, meter.hashing)
        digest = hasher.hexdigest()
        _verify(digest, sha256, path, source, remove=False)
        return Downloaded(path, size, digest, clock() - start, 0, False)
    if not name:
        raise _no_file_name(source)
    into.mkdir(parents=True, exist_ok=True)
    target = into / name
    part = target.with_name(name + ".part")
    transfer = _Transfer(source, part, options, meter, clock)
    attempts = transfer.run(start, sleep)
    target.unlink(missing_ok=True)
    os.replace(part, target)
    digest = transfer.hasher.hexdigest()
    _verify(digest, sha256, target, source, remove=True)
    meter.done(transfer.have, clock() - start, digest)
    return Downloaded(target, transfer.have, digest, clock() - start, attempts, True)


def _missing(path: Path) -> DownloadError:
    return DownloadError(FailureKind.MISSING, M("local-missing", path=path), str(path), M("local-missing-fix"))


def _no_file_name(source: str) -> DownloadError:
    shown = safe_url(source)
    return DownloadError(FailureKind.SCHEME, M("no-file-name", source=shown), shown, M("no-file-name-fix"))


def _verify(digest: str, expected: str | None, path: Path, source: str, remove: bool) -> None:
    if expected is None or digest == expected.lower():
        return
    if remove:
        path.unlink(missing_ok=True)
    shown = safe_url(source)
    raise DownloadError(
        FailureKind.CHECKSUM,
        M("checksum", source=shown, actual=digest, expected=expected.lower()),
        shown,
        M("checksum-fix"),
    )


@dataclass
class _Meter:
    """Throttled progress lines: `download <name>: 12.0 MiB of 40.0 MiB (30%) at 5.1 MiB/s`."""

    name: str
    out: TextIO | None
    clock: Callable[[], float]
    every: float
    lang: Lang | str = Lang.EN
    started: float = field(init=False)
    last: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.last = self.clock()

    def say(self, text: Text) -> None:
        if self.out is not None:
            lead = "download "
            self.out.write(render(text, self.lang, lead=f"{lead}{self.name}: ", indent=" " * len(lead)) + "\n")
            self.out.flush()

    def _due(self) -> float | None:
        """The rate so far when a line is due, else None."""
        now = self.clock()
        if now - self.last < self.every:
            return None
        self.last = now
        return max(now - self.started, 1e-9)

    def tick(self, have: int, total: int | None) -> None:
        seconds = self._due()
        if seconds is None:
            return
        rate = human_bytes(have / seconds)
        if total:
            self.say(
                M(
                    "progress-of",
                    have=human_bytes(have),
                    total=human_bytes(total),
                    percent=100 * have // total,
                    rate=rate,
                )
            )
        else:
            self.say(M("progress", have=human_bytes(have), rate=rate))

    def hashing(self, have: int) -> None:
        seconds = self._due()
        if seconds is not None:
            self.say(M("hashing", have=human_bytes(have), rate=human_bytes(have / seconds)))

    def done(self, size: int, seconds: float, digest: str) -> None:
        rate = human_bytes(size / max(seconds, 1e-9))
        self.say(M("done", size=human_bytes(size), seconds=seconds, rate=rate, digest=digest[:16]))


def _route(url: str) -> tuple[str, str | None]:
    """(the host a request for `url` connects to, the proxy variable that names it): the URL's own host with None,
    or the proxy's host when one of the `<scheme>_proxy` variables applies to the URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        proxy = urllib.request.getproxies().get(parts.scheme)
        if not proxy or urllib.request.proxy_bypass(parts.netloc.rpartition("@")[2]):
            return parts.hostname or parts.netloc, None
        names = (f"{parts.scheme}_proxy", f"{parts.scheme.upper()}_PROXY")
        variable = next((name for name in names if os.environ.get(name)), names[0])
        target = urllib.parse.urlsplit(proxy if "//" in proxy else "//" + proxy)
        return target.hostname or safe_url(proxy), variable
    except ValueError:
        return safe_url(url), None


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never from https to plain http unless allowed."""

    def __init__(self, allow_http: bool) -> None:
        self.allow_http = allow_http

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme == "http" and not self.allow_http:
            shown = safe_url(req.full_url)
            raise DownloadError(
                FailureKind.SCHEME,
                M("redirect-to-http", source=shown, target=safe_url(newurl)),
                shown,
                M("redirect-to-http-fix"),
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Writer(Protocol):
    """A sink written block by block: the `.part` file, the sequential stream's queue, memory."""

    def write(self, data: bytes, /) -> int: ...


_Sink: TypeAlias = "_Writer | _Segment"  # a segment's buffer is read into in place


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
            self.hasher, self.have = hash_file(part, options.chunk_bytes)

    def run(
        self,
        start: float,
        sleep: Callable[[float], None],
        sink: _Sink | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> int:
        """Attempt until complete; returns the number of attempts. Raises `DownloadError` (or `_Stopped` once
        `cancelled()` says the result is no longer wanted)."""
        tries = max(1, self.options.attempts)
        lookup_tries = max(1, min(tries, self.options.lookup_attempts))
        lookups = 0
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
                lookups += error.lookup
                if not error.retryable or attempt == tries or (error.lookup and lookups >= lookup_tries):
                    raise
                wait = min(self.options.backoff_s * 2 ** (attempt - 1), self.options.max_backoff_s)
                if self.options.deadline_s is not None and self.clock() + wait - start > self.options.deadline_s:
                    raise
                self.meter.say(self._retry_line(error, attempt, tries, lookups, lookup_tries, wait))
                sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _retry_line(
        self, error: DownloadError, attempt: int, tries: int, lookups: int, lookup_tries: int, wait: float
    ) -> Text:
        """What a retry says: the host asked, which attempt (or lookup) of how many failed and why, the wait."""
        reason = error.detail or error.what
        if error.lookup:  # the reason names the host
            return M("lookup-retrying", reason=reason, attempt=lookups, tries=lookup_tries, wait=wait)
        offset, host = self.base + self.have, _route(self.url)[0]
        return M("retrying", host=host, attempt=attempt, tries=tries, reason=reason, wait=wait, offset=offset)

    def _restart(self, handle: _Sink) -> None:
        """Empty the `.part` file and the hash: the server sends the whole file again."""
        assert isinstance(handle, io.BufferedWriter), "only a .part file is ever refilled from its start"
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

    def attempt(self, handle: _Sink, start: float) -> None:
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
            with self._open(request, timeout) as response:
                self._start_body(response, handle)
                self._stream(response, handle, start)
        except urllib.error.HTTPError as error:
            self.status = error.code
            if error.code == 416 and not offset and self.total_from(error.headers.get("Content-Range")) == 0:
                self.total = 0  # an empty file: no byte to give
                return
            if error.code == 416 and offset and self.end is None:  # our partial file is not a prefix it can continue
                if self.total_from(error.headers.get("Content-Range")) == offset:
                    self.total = offset
                    return  # already complete
                if self.base == 0 and not self.discard_unranged:
                    self._restart(handle)
                raise self._failure(
                    FailureKind.HTTP, M("range-416"), self.base == 0 and not self.discard_unranged
                ) from None
            raise self._failure(
                FailureKind.HTTP,
                M("http-status", code=error.code, reason=error.reason),
                error.code in RETRYABLE_HTTP,
            ) from None
        except DownloadError:
            raise
        except (TimeoutError, http.client.RemoteDisconnected, ConnectionError, http.client.IncompleteRead) as error:
            at = self.base + self.have
            if isinstance(error, TimeoutError):
                self._check_deadline(timeout)
                raise self._failure(FailureKind.TIMEOUT, M("stalled", seconds=timeout, offset=at), True) from None
            lost = M("connection-lost", error=type(error).__name__, offset=at)
            raise self._failure(FailureKind.NETWORK, lost, True) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                self._check_deadline(timeout)
                raise self._failure(FailureKind.TIMEOUT, M("no-answer", seconds=timeout), True) from None
            if isinstance(reason, socket.gaierror):
                raise self._unresolved(reason) from None
            raise self._failure(FailureKind.NETWORK, M("unreachable", source=where, reason=reason), True) from None
        wanted = self._wanted
        if wanted is not None and wanted > 0:
            total = self.end if self.end is not None else self.total
            closed = M("closed-early", have=self.base + self.have, total=total)
            raise self._failure(FailureKind.NETWORK, closed, True)

    @staticmethod
    def total_from(content_range: str | None) -> int | None:
        match = _CONTENT_RANGE.search(content_range or "")
        return whole_number(match[3]) if match and match[3] != "*" else None

    def _start_body(self, response: http.client.HTTPResponse, handle: _Sink) -> None:
        """Align the sink with what the server sends: a continuation (206 from our offset) or the whole file."""
        self.status = response.status
        offset = self.base + self.have
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        if response.status == 206:
            match = _CONTENT_RANGE.search(response.headers.get("Content-Range", ""))
            if match and match[1] is not None and whole_number(match[1]) == offset:
                self.total = self.total_from(match[0])
                self.validator = self.validator or validator
                return
            if self.base == 0 and self.end is None and not self.discard_unranged:
                self._restart(handle)  # a range we did not ask for: distrust it and start over
            raise self._failure(FailureKind.HTTP, M("wrong-range"), self.base == 0 and self.end is None)
        length = response.headers.get("Content-Length")
        self.total = whole_number(length)
        if offset or self.end is not None:  # the server ignored Range, or If-Range found the file changed
            shown = safe_url(self.url)
            if self.base == 0 and self.end is None and not self.discard_unranged:
                self._restart(handle)  # take the whole body
            elif self.validator and validator and validator != self.validator:
                raise DownloadError(FailureKind.CHANGED, M("changed", source=shown), shown, M("changed-fix"))
            elif self.discard_unranged:
                self._discard(response, offset)
            else:
                raise DownloadError(FailureKind.NO_RANGE, M("no-range", source=shown), shown, M("no-range-fix"))
        self.validator = self.validator or validator

    def _discard(self, response: http.client.HTTPResponse, count: int) -> None:
        """Skip the first `count` bytes of a whole-file answer (a server that cannot resume a stream)."""
        left = count
        while left:
            block = response.read1(min(left, self.options.chunk_bytes))
            if not block:
                raise self._failure(FailureKind.NETWORK, M("closed-while-skipping", offset=count), True)
            left -= len(block)

    def _stream(self, response: http.client.HTTPResponse, handle: _Sink, start: float) -> None:
        while True:
            wanted = self._wanted if self.end is not None else None
            if wanted is not None and wanted <= 0:
                return
            size = self.options.chunk_bytes if wanted is None else min(wanted, self.options.chunk_bytes)
            block: bytes | memoryview
            if isinstance(handle, _Segment):  # read into the segment's buffer in place
                view = handle.into(size)
                count = response.readinto(view)
                block = view[:count]
                if count:
                    handle.advance(count)
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
                raise self._failure(FailureKind.DEADLINE, M("deadline", seconds=self.options.deadline_s), False)

    def _timeout(self, start: float) -> float:
        if self.options.deadline_s is None:
            return self.options.timeout_s
        left = self.options.deadline_s - (self.clock() - start)
        if left <= 0:
            raise self._failure(FailureKind.DEADLINE, M("deadline", seconds=self.options.deadline_s), False)
        return min(self.options.timeout_s, left)

    def _check_deadline(self, timeout: float) -> None:
        """After a timeout of `timeout` seconds: when the deadline had shortened it, the deadline ended the fetch."""
        if self.options.deadline_s is not None and timeout < self.options.timeout_s:
            raise self._failure(FailureKind.DEADLINE, M("deadline", seconds=self.options.deadline_s), False) from None

    def _failure(self, kind: FailureKind, detail: Text, retryable: bool) -> DownloadError:
        where = safe_url(self.url)
        what = M("failed", source=where, detail=detail)
        return DownloadError(kind, what, where, M("failed-fix"), retryable, detail=detail)

    def _open(self, request: urllib.request.Request, timeout: float) -> http.client.HTTPResponse:
        """The response to `request`; a request the HTTP stack refuses as malformed (the URL, or the proxy it goes
        through: `http.client.InvalidURL`, a `ValueError` such as a host name the IDNA codec refuses) raises
        `DownloadError` of kind `scheme`, never retried."""
        try:
            response: http.client.HTTPResponse = self.opener.open(request, timeout=timeout)
        except (http.client.InvalidURL, ValueError) as error:
            variable = _route(self.url)[1]
            shown, problem = safe_url(self.url), mask_text(str(error))[:200]  # the words may quote a password
            if variable is None:
                userinfo = "@" in urllib.parse.urlsplit(self.url).netloc
                said: Text | str = M("url-userinfo", error=problem) if userinfo else problem
                what = M("url-malformed", source=shown, problem=said)
                raise DownloadError(FailureKind.SCHEME, what, shown, M("url-malformed-fix")) from None
            proxy = safe_url(os.environ.get(variable, ""))
            what = M("proxy-malformed", variable=variable, proxy=proxy, source=shown, problem=problem)
            fix = M("proxy-malformed-fix", variable=variable)
            raise DownloadError(FailureKind.SCHEME, what, variable, fix) from None
        return response

    def _unresolved(self, error: socket.gaierror) -> DownloadError:
        """A host name that did not resolve: at once final when it does not exist (EAI_NONAME, EAI_NODATA), else a
        lookup to try again (`lookup_attempts`)."""
        host, variable = _route(self.url)
        reason = os_error_text(error)
        shown = safe_url(self.url)
        if error.errno in _NO_SUCH_NAME:
            detail = M("name-unknown", host=host, reason=reason)
            fix = M("name-unknown-fix") if variable is None else M("proxy-unknown-fix", variable=variable)
            return DownloadError(
                FailureKind.NETWORK, M("failed", source=shown, detail=detail), variable or shown, fix, detail=detail
            )
        detail = M("name-unresolved", host=host, reason=reason)
        what = M("failed", source=shown, detail=detail)
        return DownloadError(FailureKind.NETWORK, what, shown, M("failed-fix"), True, detail=detail, lookup=True)


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
    options: DownloadOptions = _DEFAULTS,
    *,
    log: TextIO | None = None,
    lang: Lang | str = Lang.EN,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Remote:
    """Ask for one byte of `source` (retried like any transfer, each retry announced on `log` in `lang`); raises
    `DownloadError` for 404, refusals, no answer."""
    check_scheme(source, options.allow_http)
    path = local_path(source)
    if path is not None:
        if not path.is_file():
            raise _missing(path)
        return Remote(source, path.stat().st_size, True, None, path)
    if not source_name(source):
        raise _no_file_name(source)
    transfer = _Transfer(
        source,
        None,
        options,
        _Meter(source_name(source), log, clock, float("inf"), lang),  # retries only: one byte needs no progress
        clock,
        end=1,
        hashing=False,
        discard_unranged=True,
    )
    transfer.run(clock(), sleep, io.BytesIO())
    return Remote(source, transfer.total, transfer.status == 206, transfer.validator)


class SizeUnknown(StrEnum):
    """Why a HEAD request did not tell a size."""

    NO_ANSWER = "no-answer"  # silent past the timeout
    UNREACHABLE = "unreachable"  # the name does not resolve, the connection is refused (offline)
    HTTP = "http"  # an error status
    NO_LENGTH = "no-length"  # answered without a usable Content-Length
    NOT_A_FILE = "not-a-file"  # a local source that is not a regular file


@dataclass(frozen=True)
class HeadAnswer:
    """What one HEAD request learnt: the size, or why it is unknown (`status`: the HTTP error's code; `reason`: the
    system's words for an unreachable source)."""

    size: int | None
    unknown: SizeUnknown | None = None
    status: int | None = None
    reason: str | None = None


class _HeadRedirect(_NoDowngrade):
    """Follow redirects as HEAD requests (urllib turns a redirected request into a GET, which would download)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new.method = req.get_method()
        return new


def head_size(source: str, timeout_s: float, allow_http: bool = False) -> HeadAnswer:
    """The size of `source` from one HEAD request (no retry; connect and answer each within `timeout_s`), or of a
    local file from its stat. Raises `DownloadError` only for a source the policy refuses (`check_scheme`);
    everything the network does becomes an answer."""
    check_scheme(source, allow_http)
    path = local_path(source)
    if path is not None:
        try:
            return HeadAnswer(path.stat().st_size) if path.is_file() else HeadAnswer(None, SizeUnknown.NOT_A_FILE)
        except OSError:
            return HeadAnswer(None, SizeUnknown.NOT_A_FILE)
    request = urllib.request.Request(
        source, method="HEAD", headers={"User-Agent": "vla-entrypoint", "Accept-Encoding": "identity"}
    )
    try:
        with urllib.request.build_opener(_HeadRedirect(allow_http)).open(request, timeout=timeout_s) as response:
            length = response.headers.get("Content-Length", "")
    except urllib.error.HTTPError as error:
        return HeadAnswer(None, SizeUnknown.HTTP, error.code)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError, DownloadError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError):
            return HeadAnswer(None, SizeUnknown.NO_ANSWER)
        return HeadAnswer(None, SizeUnknown.UNREACHABLE, reason=str(reason)[:200])
    size = whole_number(length)
    return HeadAnswer(size) if size is not None else HeadAnswer(None, SizeUnknown.NO_LENGTH)


def head_sizes(sources: list[str], timeout_s: float, allow_http: bool = False) -> dict[str, HeadAnswer]:
    """`head_size` of every source at once, all answered within about `timeout_s` however slow name resolution
    is (urllib's timeout does not cover it): a source still unanswered then is `NO_ANSWER`. Raises
    `DownloadError` for a source the policy refuses, before any request."""
    for source in sources:
        check_scheme(source, allow_http)
    answers: dict[str, HeadAnswer] = {}

    def ask(source: str) -> None:
        answers[source] = head_size(source, timeout_s, allow_http)

    threads = [threading.Thread(target=ask, args=(source,), daemon=True) for source in dict.fromkeys(sources)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s + 0.5  # the grace lets an answer that came at the timeout be read
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {source: answers.get(source, HeadAnswer(None, SizeUnknown.NO_ANSWER)) for source in sources}


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
        options: DownloadOptions = _DEFAULTS,
        segments: int = 4,
        segment_bytes: int = 16 << 20,
        window: int | None = None,
        log: TextIO | None = None,
        lang: Lang | str = Lang.EN,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.remote, self.start, self.options = remote, start, options
        self.segments, self.segment_bytes = max(1, segments), max(1, segment_bytes)
        self.window = max(self.segments, window or 2 * self.segments)
        self.clock, self.sleep = clock, sleep
        self.meter = _Meter(source_name(remote.url), log, clock, options.progress_every_s, lang)
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
            self.meter.say(M("one-stream", offset=position))
        else:
            position = self.start
        yield from self._sequential(position)

    def _local(self, path: Path) -> Iterator[bytes]:
        with path.open("rb") as handle:
            handle.seek(self.start)
            while block := handle.read(self.options.chunk_bytes):
                yield block

    def _parallel(self, size: int) -> Generator[bytes, None, int | None]:
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
                    transfer.run(self.clock(), self.sleep, sink, halted)
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
                if isinstance(item, DownloadError) and item.kind is FailureKind.NO_RANGE:
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

        class Queue:
            def write(self, block: bytes, /) -> int:
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
                transfer.run(self.clock(), self.sleep, Queue(), lambda: self.stopped)
                result: BaseException | None = None
                if self.remote.size is not None and position + transfer.have < self.remote.size:
                    ended = M("ended-early", offset=position + transfer.have, size=self.remote.size)
                    result = transfer._failure(FailureKind.NETWORK, ended, False)
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


@functools.cache
def _libcrypto() -> ctypes.CDLL | None:
    """OpenSSL's libcrypto with the SHA256_* functions typed, or None where it cannot be loaded."""
    try:
        name = ctypes.util.find_library("crypto")
        lib = ctypes.CDLL(name) if name else None
        if lib is None:
            return None
        for function in ("SHA256_Init", "SHA256_Update", "SHA256_Final"):
            getattr(lib, function).restype = ctypes.c_int
        lib.SHA256_Update.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        probe_context = _Sha256Context()
        return lib if lib.SHA256_Init(ctypes.byref(probe_context)) == 1 else None
    except (OSError, AttributeError):
        return None


class ResumableSha256:
    """sha256 whose running state survives the process: `state()` bytes now, `ResumableSha256(state)` later.

    Uses OpenSSL through ctypes; where libcrypto cannot be loaded it is a plain `hashlib` sha256 and `state()` is None.
    """

    def __init__(self, state: bytes | None = None, *, use_openssl: bool = True) -> None:
        self._lib = _libcrypto() if use_openssl else None
        self._hashlib = hashlib.sha256()  # used only without libcrypto
        self._context = _Sha256Context()
        if self._lib is not None:
            if state is not None and len(state) == ctypes.sizeof(_Sha256Context):
                self._context = _Sha256Context.from_buffer_copy(state)
            elif state is not None:
                raise ValueError("not a saved sha256 state")
            else:
                self._lib.SHA256_Init(ctypes.byref(self._context))
        elif state is not None:
            raise ValueError("this Python cannot restore a sha256 state")

    @property
    def resumable(self) -> bool:
        return self._lib is not None

    def update(self, data: bytes, start: int = 0, length: int | None = None) -> None:
        """Hash `data[start:start + length]` (to the end when `length` is None) without copying it."""
        length = len(data) - start if length is None else length
        if length <= 0:
            return
        if self._lib is None:
            self._hashlib.update(memoryview(data)[start : start + length])
            return
        base = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0  # bytes are never copied by c_char_p
        self._lib.SHA256_Update(ctypes.byref(self._context), ctypes.c_void_p(base + start), length)

    def _raw(self) -> bytes:
        return ctypes.string_at(ctypes.addressof(self._context), ctypes.sizeof(self._context))

    def state(self) -> bytes | None:
        return None if self._lib is None else self._raw()

    def hexdigest(self) -> str:
        if self._lib is None:
            return self._hashlib.hexdigest()
        copy = _Sha256Context.from_buffer_copy(self._raw())
        out = ctypes.create_string_buffer(32)
        self._lib.SHA256_Final(out, ctypes.byref(copy))
        return out.raw.hex()
