"""What a download source names and whether policy allows it, without the HTTP stack (`net.download` fetches).

A source is an `https://` URL, an `http://` URL (only when allowed), a `file://` URL or a plain path. Planning
code (the TACO plan, the fetch-assets manifest) checks sources and hashes local files with this module alone, so
`check` and `plan` never import HTTP, TLS or the download machinery.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text
from entrypoint.net.messages import MESSAGES as M


@dataclass(frozen=True)
class DownloadOptions:
    """How patient and how noisy a fetch is. The defaults suit a wheel of tens of MB at a job's start."""

    timeout_s: float = 30.0  # each connect and each read; silence this long is a stall
    attempts: int = 4  # tries in all
    lookup_attempts: int = 3  # tries in all while the host's name fails to resolve for now (EAI_AGAIN)
    backoff_s: float = 1.0  # wait before the second try; doubles each time
    max_backoff_s: float = 30.0
    deadline_s: float | None = None  # the whole fetch, retries included
    allow_http: bool = False  # plain http (and redirects to it) only when explicitly allowed
    chunk_bytes: int = 1 << 20
    progress_every_s: float = 1.0


class FailureKind(StrEnum):
    """Why a fetch did not produce the file."""

    SCHEME = "scheme"  # the source itself is refused (a mis-specification, not a failure)
    MISSING = "missing"
    HTTP = "http"
    NETWORK = "network"
    TIMEOUT = "timeout"
    DEADLINE = "deadline"
    CHECKSUM = "checksum"
    CHANGED = "changed"  # the file changed on the server during the download
    NO_RANGE = "no-range"  # a segment request was answered with the whole file


class DownloadError(Exception):
    """A fetch that did not produce the file: `what` went wrong at `where` (the source, any query hidden, or the
    variable at fault) and the `fix`, in both languages; `retryable` says whether another attempt may succeed,
    `lookup` that the failure was a name that did not resolve for now (retried only `lookup_attempts` times) and
    `detail` is the failure in a few words, without the source (for a retry's progress line)."""

    def __init__(
        self,
        kind: FailureKind,
        what: Text,
        where: str,
        fix: Text,
        retryable: bool = False,
        *,
        detail: Text | None = None,
        lookup: bool = False,
    ) -> None:
        super().__init__(what.en)
        self.kind, self.what, self.where, self.fix, self.retryable = kind, what, where, fix, retryable
        self.detail, self.lookup = detail, lookup


def source_name(source: str) -> str:
    """The file name a source names: the last path segment, percent-decoded for URLs (also for a URL whose host or
    port is malformed: that is `check_scheme`'s to refuse)."""
    try:
        parts = urllib.parse.urlsplit(source)
    except ValueError:
        return urllib.parse.unquote(re.split(r"[?#]", source, maxsplit=1)[0].rsplit("/", 1)[-1])
    if parts.scheme in ("http", "https", "file"):
        return urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
    return Path(source).name


def split_url(source: str) -> urllib.parse.SplitResult:
    """`source` split as a URL. Raises `DownloadError` (kind `scheme`) for an http(s) URL whose host or port is
    malformed (`https://h:99999/x`, `https://[::1/x`, `http://:80/x`, `https://a..b/x`: a host name no resolver
    can be asked for) or that holds spaces or control characters."""
    try:
        parts = urllib.parse.urlsplit(source)
    except ValueError:
        raise _malformed(source, M("url-brackets")) from None
    if parts.scheme not in ("http", "https"):
        return parts
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in source):
        raise _malformed(source, M("url-characters"))
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise _malformed(source, M("url-port", port=parts.netloc.rpartition("@")[2].rpartition(":")[2]))
    if not parts.hostname:
        raise _malformed(source, M("url-no-host"))
    try:
        parts.hostname.encode("idna")
    except UnicodeError:
        raise _malformed(source, M("url-host-label", host=parts.hostname)) from None
    return parts


def _malformed(source: str, problem: Text) -> DownloadError:
    shown = safe_url(source)
    return DownloadError(
        FailureKind.SCHEME, M("url-malformed", source=shown, problem=problem), shown, M("url-malformed-fix")
    )


def local_path(source: str) -> Path | None:
    """The path of a local source (plain path or `file://` URL); None for an http(s) URL.

    Raises `DownloadError` (kind `scheme`) for any other scheme (ftp://, s3:// …) and for a malformed URL.
    """
    parts = split_url(source)
    if parts.scheme == "file":
        return Path(urllib.parse.unquote(parts.path))  # POSIX paths: what url2pathname does, without urllib.request
    if parts.scheme in ("http", "https"):
        return None
    if parts.scheme and len(parts.scheme) > 1:
        shown = safe_url(source)
        raise DownloadError(
            FailureKind.SCHEME, M("unsupported-scheme", source=shown), shown, M("unsupported-scheme-fix")
        )
    return Path(source)


def check_scheme(source: str, allow_http: bool) -> None:
    """Raise `DownloadError` (kind `scheme`) for a source this policy refuses: plain http unless allowed."""
    local_path(source)
    if split_url(source).scheme == "http" and not allow_http:
        shown = safe_url(source)
        raise DownloadError(FailureKind.SCHEME, M("plain-http", source=shown), shown, M("plain-http-fix"))


def hash_file(
    path: Path, chunk_bytes: int = 1 << 20, tick: Callable[[int], None] | None = None
) -> tuple[hashlib._Hash, int]:
    """A running sha256 of the file's bytes (to continue or finish) and its size, read in `chunk_bytes` blocks;
    `tick` gets the bytes read so far after each block. Raises OSError when the file cannot be read."""
    hasher, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while block := handle.read(chunk_bytes):
            hasher.update(block)
            size += len(block)
            if tick is not None:
                tick(size)
    return hasher, size


def sha256_of(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """The sha256 of a file, read in bounded chunks. Raises OSError when the file cannot be read."""
    return hash_file(path, chunk_bytes)[0].hexdigest()
