"""The download primitive against real HTTP servers on 127.0.0.1: resume, stalls, drops, errors, checksums, policy."""

from __future__ import annotations

import hashlib
import io
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from entrypoint.core.masking import safe_url
from entrypoint.net.download import _NoDowngrade, fetch
from entrypoint.net.source import DownloadError, DownloadOptions, FailureKind, sha256_of, source_name
from tests.support.files import small_bytes

CONTENT = bytes(range(256)) * 4096  # 1 MiB, not all one byte so a misplaced range shows in the hash
DIGEST = hashlib.sha256(CONTENT).hexdigest()
FAST = DownloadOptions(timeout_s=5, attempts=3, backoff_s=0.01, chunk_bytes=64 * 1024, allow_http=True)


@dataclass
class Site:
    """What the server does, one action per request (the last one repeats): ok | no-range | drop | stall | 404 | 500."""

    actions: list[str]
    content: bytes = CONTENT
    requests: list[dict[str, str | None]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def next_action(self) -> str:
        return self.actions[min(len(self.requests), len(self.actions) - 1)]


class Handler(BaseHTTPRequestHandler):
    site: Site

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:
        site = self.site
        action = site.next_action()
        site.requests.append(
            {"path": self.path, "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range")}
        )
        if action == "stall":
            site.release.wait()  # accepted, then silence until the test ends
            return
        if action in ("404", "500"):
            self.send_error(int(action))
            return
        start, status = 0, 200
        asked = self.headers.get("Range")
        if asked and action != "no-range":
            start, status = int(asked.removeprefix("bytes=").split("-")[0]), 206
        body = site.content[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"v1"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(site.content) - 1}/{len(site.content)}")
        self.end_headers()
        if action == "drop":
            self.wfile.write(body[: len(body) // 3])  # then the connection closes early
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def serve():
    """serve(*actions) -> (url of /taco_train-1.0-py3-none-any.whl, Site); servers stop when the test ends."""
    servers: list[tuple[ThreadingHTTPServer, Site]] = []

    def start(*actions: str, content: bytes = CONTENT) -> tuple[str, Site]:
        site = Site(list(actions), content)
        handler = type("BoundHandler", (Handler,), {"site": site})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append((server, site))
        return f"http://127.0.0.1:{server.server_address[1]}/files/taco_train-1.0-py3-none-any.whl?sig=secret", site

    yield start
    for server, site in servers:
        site.release.set()
        server.shutdown()
        server.server_close()


def _fetch(url: str, into: Path, options: DownloadOptions = FAST, **kwargs) -> tuple[object, list[float]]:
    waits: list[float] = []
    result = fetch(url, into, options=options, sleep=waits.append, **kwargs)
    return result, waits


@pytest.mark.parametrize(
    "actions, attempts, ranges",
    [
        (["ok"], 1, [None]),
        (["drop", "ok"], 2, [None, f"bytes={len(CONTENT) // 3}-"]),
        (["drop", "no-range"], 2, [None, f"bytes={len(CONTENT) // 3}-"]),
        (["500", "drop", "ok"], 3, [None, None, f"bytes={len(CONTENT) // 3}-"]),
    ],
    ids=["plain", "drop-then-resume", "drop-then-server-ignores-range", "5xx-then-drop-then-resume"],
)
def test_download_completes_and_hashes_every_byte(serve, tmp_path, actions, attempts, ranges):
    url, site = serve(*actions)
    result, waits = _fetch(url, tmp_path)
    assert (small_bytes(result.path), result.sha256, result.size, result.attempts) == (
        CONTENT,
        DIGEST,
        len(CONTENT),
        attempts,
    )
    assert result.path == tmp_path / "taco_train-1.0-py3-none-any.whl" and result.downloaded
    assert not list(tmp_path.glob("*.part"))
    assert [r["range"] for r in site.requests] == ranges
    assert all(r["if_range"] == '"v1"' for r in site.requests if r["range"])
    assert waits == [0.01 * 2**i for i in range(attempts - 1)]  # backoff doubles


def test_a_part_file_left_by_an_earlier_process_is_resumed(serve, tmp_path):
    url, site = serve("ok")
    (tmp_path / "taco_train-1.0-py3-none-any.whl.part").write_bytes(CONTENT[:1000])
    result, _ = _fetch(url, tmp_path)
    assert site.requests[0]["range"] == "bytes=1000-" and result.sha256 == DIGEST and result.attempts == 1


@pytest.mark.parametrize(
    "actions, kind, requests, text",
    [
        (["404"], "http", 1, "HTTP 404"),
        (["stall"], "timeout", 3, "0.2 s"),
        (["drop"], "network", 3, "connection closed after"),
    ],
    ids=["404-is-not-retried", "stall-times-out-each-try", "drop-every-time"],
)
def test_failures(serve, tmp_path, actions, kind, requests, text):
    url, site = serve(*actions)
    options = DownloadOptions(timeout_s=0.2, attempts=3, backoff_s=0, allow_http=True)
    start = time.monotonic()
    with pytest.raises(DownloadError) as caught:
        _fetch(url, tmp_path, options)
    assert caught.value.kind == kind and text in caught.value.what.en and caught.value.what.zh
    assert "download of" not in caught.value.what.zh and "connection" not in caught.value.what.zh
    assert len(site.requests) == requests
    assert "secret" not in caught.value.what.en and caught.value.where.endswith("whl?…")
    assert time.monotonic() - start < 5
    assert not (tmp_path / "taco_train-1.0-py3-none-any.whl").exists()


def test_deadline_bounds_the_whole_fetch(serve, tmp_path):
    url, _ = serve("stall")
    start = time.monotonic()
    with pytest.raises(DownloadError) as caught:
        fetch(
            url,
            tmp_path,
            options=DownloadOptions(timeout_s=5, attempts=50, backoff_s=0, deadline_s=0.5, allow_http=True),
        )
    assert caught.value.kind == "deadline" and "not finished within 0.5 s" in caught.value.what.en
    assert time.monotonic() - start < 3


@pytest.mark.parametrize(
    "pinned, ok",
    [(DIGEST, True), (DIGEST.upper(), True), ("0" * 64, False)],
    ids=["pinned", "pinned-uppercase", "mismatch"],
)
def test_checksum(serve, tmp_path, pinned, ok):
    url, _ = serve("ok")
    if ok:
        assert _fetch(url, tmp_path, sha256=pinned)[0].sha256 == DIGEST
        return
    with pytest.raises(DownloadError) as caught:
        _fetch(url, tmp_path, sha256=pinned)
    assert caught.value.kind == "checksum" and DIGEST in caught.value.what.en
    assert not list(tmp_path.iterdir())  # the refused file is gone


@pytest.mark.parametrize(
    "source, kind",
    [
        ("http://127.0.0.1:9/x.whl", "scheme"),
        ("ftp://example.invalid/x.whl", "scheme"),
        ("https://example.invalid/dir/", "scheme"),
    ],
    ids=["http-not-allowed", "ftp", "no-file-name"],
)
def test_refused_before_any_connection(tmp_path, source, kind):
    with pytest.raises(DownloadError) as caught:
        fetch(source, tmp_path, options=DownloadOptions(timeout_s=0.1))
    assert caught.value.kind == kind


def test_redirect_from_https_to_http_is_refused():
    request = urllib.request.Request("https://example.invalid/taco.whl")
    with pytest.raises(DownloadError) as caught:
        _NoDowngrade(False).redirect_request(request, None, 302, "Found", {}, "http://example.invalid/taco.whl")
    assert caught.value.kind == "scheme" and "redirects to plain http" in caught.value.what.en


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_local_files_are_hashed_in_place(tmp_path, as_url):
    wheel = tmp_path / "taco_train-1.0-py3-none-any.whl"
    wheel.write_bytes(CONTENT)
    source = wheel.as_uri() if as_url else str(wheel)
    result = fetch(source, tmp_path / "unused", sha256=DIGEST)
    assert (result.path, result.sha256, result.downloaded, result.attempts) == (wheel, DIGEST, False, 0)
    assert not (tmp_path / "unused").exists() and sha256_of(wheel) == DIGEST
    with pytest.raises(DownloadError) as caught:
        fetch(source, tmp_path, sha256="1" * 64)
    assert caught.value.kind == "checksum" and wheel.exists()  # a user's file is never deleted
    with pytest.raises(DownloadError) as caught:
        fetch(str(tmp_path / "missing.whl"), tmp_path)
    assert caught.value.kind == "missing"


def test_progress_lines_are_throttled(serve, tmp_path):
    url, _ = serve("ok")
    ticks = iter(range(10_000))
    out = io.StringIO()
    fetch(url, tmp_path, options=FAST, progress=out, clock=lambda: next(ticks) * 0.25)  # 4 clock reads per second
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("download taco_train-1.0-py3-none-any.whl: done, 1.0 MiB in")
    steps = [line for line in lines if "%" in line]
    assert steps and all(" of 1.0 MiB (" in line and "/s" in line for line in steps)
    assert len(steps) < len(CONTENT) // FAST.chunk_bytes  # not one line per chunk


@pytest.mark.parametrize(
    "source, shown, name",
    [
        (
            "https://user:pw@cos.example.com/taco/taco_train-0.1.0%2Bnv-cp312-cp312-linux_x86_64.whl?q-signature=abc",
            "https://cos.example.com/taco/taco_train-0.1.0%2Bnv-cp312-cp312-linux_x86_64.whl?…",
            "taco_train-0.1.0+nv-cp312-cp312-linux_x86_64.whl",
        ),
        (
            "/cfs/code/taco_train-1.0-py3-none-any.whl",
            "/cfs/code/taco_train-1.0-py3-none-any.whl",
            "taco_train-1.0-py3-none-any.whl",
        ),
    ],
    ids=["signed-url", "path"],
)
def test_display_and_name(source, shown, name):
    assert (safe_url(source), source_name(source)) == (shown, name)


def test_progress_speaks_the_chosen_language(serve, tmp_path):
    url, _ = serve("drop", "ok")
    ticks = iter(range(10_000))
    out = io.StringIO()
    fetch(url, tmp_path, options=FAST, progress=out, lang="zh", sleep=lambda _: None, clock=lambda: next(ticks) * 0.25)
    lines = out.getvalue().splitlines()
    name = "taco_train-1.0-py3-none-any.whl"
    assert all(line.startswith(f"download {name}: ") for line in lines)
    assert any("次尝试失败" in line for line in lines) and lines[-1].startswith(f"download {name}: 完成")
    assert not any(word in line for line in lines for word in (" of ", " at ", "attempt", "done"))


def test_failure_kinds_keep_their_strings():
    assert [k.value for k in FailureKind] == [
        "scheme",
        "missing",
        "http",
        "network",
        "timeout",
        "deadline",
        "checksum",
        "changed",
        "no-range",
    ]


def test_checking_a_source_needs_no_http_stack():
    """Planning (`check`, `plan`) checks sources and hashes local files without importing HTTP or TLS."""
    code = (
        "import sys, entrypoint.net.source; "
        "print(sorted(m for m in ('http.client', 'ssl', 'urllib.request', 'ctypes') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


REMOTE = "https://objects.example/taco/taco_train-1.0-py3-none-any.whl"
PATIENT = DownloadOptions(timeout_s=5, attempts=6, backoff_s=1)  # fetch-assets' retries: 31 s of waits in all


@pytest.fixture
def lookups(monkeypatch):
    """lookups(errno, words) -> the names asked for; every lookup fails with that getaddrinfo error."""
    asked: list[str] = []

    def fail_with(code: int, words: str) -> list[str]:
        def getaddrinfo(host, *args, **kwargs):
            asked.append(host)
            raise socket.gaierror(code, words)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return asked

    return fail_with


@pytest.mark.parametrize(
    "code, words, expected_lookups, waits",
    [
        (socket.EAI_NONAME, "Name or service not known", 1, []),
        (socket.EAI_AGAIN, "Temporary failure in name resolution", 3, [1, 2]),
    ],
    ids=["no-such-name-fails-at-once", "temporary-failure-is-retried-briefly"],
)
def test_a_name_that_does_not_resolve(tmp_path, lookups, code, words, expected_lookups, waits):
    asked = lookups(code, words)
    out, slept = io.StringIO(), []
    with pytest.raises(DownloadError) as caught:
        fetch(REMOTE, tmp_path, options=PATIENT, progress=out, sleep=slept.append)
    assert asked == ["objects.example"] * expected_lookups and slept == waits
    error = caught.value
    assert error.kind == "network" and "objects.example" in error.what.en and f"({words})" in error.what.en
    lines = out.getvalue().splitlines()
    if code == socket.EAI_NONAME:
        assert "does not resolve" in error.what.en and "host name in the URL" in error.fix.en and not lines
        return
    name = "taco_train-1.0-py3-none-any.whl"
    assert lines == [
        f"download {name}: cannot resolve objects.example ({words}): lookup 1 of 3; next lookup in 1 s",
        f"download {name}: cannot resolve objects.example ({words}): lookup 2 of 3; next lookup in 2 s",
    ]


def test_a_name_the_proxy_cannot_resolve_blames_the_proxy_variable(tmp_path, lookups, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")
    asked = lookups(socket.EAI_NONAME, "Name or service not known")
    with pytest.raises(DownloadError) as caught:
        fetch(REMOTE, tmp_path, options=PATIENT, sleep=lambda _: None)
    assert asked == ["proxy.example"] and caught.value.where == "HTTPS_PROXY"
    assert "the name proxy.example does not resolve" in caught.value.what.en and "HTTPS_PROXY" in caught.value.fix.en


def test_a_retry_line_names_the_host_the_attempt_and_the_wait(serve, tmp_path):
    url, _ = serve("500", "ok")
    out = io.StringIO()
    fetch(url, tmp_path, options=FAST, progress=out, sleep=lambda _: None)
    (line,) = [text for text in out.getvalue().splitlines() if "attempt" in text]
    assert line.startswith("download taco_train-1.0-py3-none-any.whl: attempt 1 of 3 at 127.0.0.1 failed (HTTP 500")
    assert line.endswith("next attempt in 0.01 s, from byte 0")


@pytest.mark.parametrize(
    "variable, value, problem",
    [
        ("https_proxy", "http://proxy.example:abc", "nonnumeric port"),
        ("HTTPS_PROXY", "http://a..b:3128", "label empty or too long"),
    ],
    ids=["port-not-a-number", "empty-host-label"],
)
def test_a_malformed_proxy_variable_is_refused_at_once(tmp_path, monkeypatch, variable, value, problem):
    monkeypatch.setenv(variable, value)
    slept: list[float] = []
    with pytest.raises(DownloadError) as caught:
        fetch(REMOTE, tmp_path, options=PATIENT, sleep=slept.append)
    error = caught.value
    assert (error.kind, error.where, error.retryable, slept) == ("scheme", variable, False, [])
    assert f"the proxy variable {variable} ({value})" in error.what.en and problem in error.what.en
    assert f"Write {variable} as http://host:port" in error.fix.en and variable in error.fix.zh


def test_a_url_the_http_stack_refuses_is_the_users_mistake_not_a_network_error(tmp_path):
    slept: list[float] = []
    url = "https://he\u0301llo.example/taco_train-1.0-py3-none-any.whl"  # a combining accent: no Host header holds it
    with pytest.raises(DownloadError) as caught:
        fetch(url, tmp_path, options=PATIENT, sleep=slept.append)
    assert (caught.value.kind, caught.value.retryable, slept) == ("scheme", False, [])
    assert "is not a valid URL" in caught.value.what.en and caught.value.what.zh != caught.value.what.en
