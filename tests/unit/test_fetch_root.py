"""`fetch-assets` and a missing CFS mount, through the real command line in a child process: a missing assets root
is refused (exit 3, nothing created, nothing downloaded) unless `--create-root` asks for it, and `--dry-run` shows
each source's size from one HEAD request, or why it is unknown, within the short timeout and without writing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from entrypoint.core.numbers import human_bytes
from tests.support.files import small_bytes
from tests.support.httpserver import FileServer, closed_port_url, serve

OVERLAY_ROOT = "1 0 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"
STATS = b'{"norm_stats": {}}\n' * 10
BLOB = os.urandom(300 * 1024)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FileServer]:
    files = tmp_path / "served"
    files.mkdir()
    (files / "norm_stats.json").write_bytes(STATS)
    (files / "blob.bin").write_bytes(BLOB)
    with serve(files, status={"/gone.bin": 404}) as running:
        yield running


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that accepts connections (the kernel does, into the backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/silent.bin"


def manifest(tmp_path: Path, *entries: tuple[str, str]) -> Path:
    """A manifest of single files: (name, url) -> `files/<name>`."""
    path = tmp_path / "manifest.yaml"
    listed = [{"name": name, "url": url, "to": f"files/{name}", "check": "file"} for name, url in entries]
    path.write_text(json.dumps({"entries": listed}))
    return path


def fetch_assets(tmp_path: Path, root: Path, *argv: str, limit_s: float = 60) -> tuple[int, str, float]:
    """`python -m entrypoint fetch-assets` in a child on a machine whose `/` is the container's overlay; returns
    the exit code, stdout + stderr and the seconds it took."""
    host = tmp_path / "host"
    (host / "proc" / "self").mkdir(parents=True, exist_ok=True)
    (host / "proc" / "self" / "mountinfo").write_text(OVERLAY_ROOT)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "VLA_LANG": "both",
        "VLA_HOST_ROOT": str(host),
        "VLA_BAKED_JOB_FILE": str(tmp_path / "no-baked-job.yaml"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = [sys.executable, "-m", "entrypoint", "fetch-assets", "--assets-root", str(root), "--allow-http"]
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--no-check", "--retries", "1", *argv],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=limit_s,
        stdin=subprocess.DEVNULL,
    )
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    return done.returncode, text, time.monotonic() - started


def test_a_missing_root_is_refused_and_nothing_is_created_or_downloaded(tmp_path: Path, server: FileServer) -> None:
    root = tmp_path / "cfs" / "openpi-assets"
    plan = manifest(tmp_path, ("stats", f"{server.url}/norm_stats.json"))
    code, text, _ = fetch_assets(tmp_path, root, "--manifest", str(plan))
    assert code == 3, text
    assert f"the assets root {root} (from --assets-root) does not exist" in text
    assert f"its nearest existing folder {tmp_path} is on the container's own disk (overlay mounted at /)" in text
    assert "The CFS mount may be missing" in text and "add --create-root" in text
    assert "资源根目录" in text and "可能缺少 CFS 挂载" in text and "--create-root" in text.split("解决:")[1]
    assert not (tmp_path / "cfs").exists() and server.requests == []


def test_create_root_creates_it_says_where_and_fetches(tmp_path: Path, server: FileServer) -> None:
    root = tmp_path / "cfs" / "openpi-assets"
    plan = manifest(tmp_path, ("stats", f"{server.url}/norm_stats.json"))
    code, text, _ = fetch_assets(tmp_path, root, "--manifest", str(plan), "--create-root")
    assert code == 0, text
    assert f"created the assets root {root} on the container's own disk (overlay mounted at /)" in text
    assert small_bytes(root / "files" / "stats") == STATS


def test_dry_run_shows_each_size_or_why_it_is_unknown_within_the_short_timeout(
    tmp_path: Path, server: FileServer, silent_url: str
) -> None:
    root = tmp_path / "assets"
    root.mkdir()
    plan = manifest(
        tmp_path,
        ("stats", f"{server.url}/norm_stats.json"),
        ("blob", f"{server.url}/blob.bin"),
        ("gone", f"{server.url}/gone.bin"),
        ("silent", silent_url),
        ("refused", closed_port_url("/r.bin")),
    )
    code, text, seconds = fetch_assets(tmp_path, root, "--manifest", str(plan), "--dry-run", "--timeout", "1")
    assert code == 0, text
    lines = {name: next(x for x in text.splitlines() if x.startswith(f"  {name} ")) for name in ("stats", "blob")}
    assert f"size {human_bytes(len(STATS))}" in lines["stats"] and f"size {human_bytes(len(BLOB))}" in lines["blob"]
    assert "size unknown (HTTP 404)" in text and "大小未知(HTTP 404)" in text
    assert "size unknown (offline: no answer within 1 s)" in text and "大小未知(离线:1 秒内无应答)" in text
    assert "size unknown (offline or unreachable: " in text
    assert f"{human_bytes(len(STATS) + len(BLOB))} to fetch for 2 entries, plus 3 of unknown size" in text
    assert f"note: {root} is on the container's own disk" in text  # an existing root on `/` is named as such
    assert seconds < 10  # one short timeout for all sources at once, not one per source with retries
    assert {r.method for r in server.requests} == {"HEAD"} and list(root.iterdir()) == []  # nothing written


def test_dry_run_without_the_root_lists_the_sizes_then_refuses(tmp_path: Path, server: FileServer) -> None:
    root = tmp_path / "cfs" / "openpi-assets"
    plan = manifest(tmp_path, ("blob", f"{server.url}/blob.bin"))
    code, text, _ = fetch_assets(tmp_path, root, "--manifest", str(plan), "--dry-run")
    assert code == 3 and f"size {human_bytes(len(BLOB))}" in text and "add --create-root" in text
    assert not (tmp_path / "cfs").exists()
    code, text, _ = fetch_assets(tmp_path, root, "--manifest", str(plan), "--dry-run", "--create-root")
    assert code == 0 and "--create-root would create it on the container's own disk" in text
    assert not (tmp_path / "cfs").exists()


def test_a_redirected_size_request_stays_a_head_request(tmp_path: Path, server: FileServer) -> None:
    """urllib turns a redirected request into a GET; the size request must not start downloading the file."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from entrypoint.net.download import head_size

    class Redirect(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(302)
            self.send_header("Location", f"{server.url}/blob.bin")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Redirect) as redirecting:
        Thread(target=redirecting.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        answer = head_size(f"http://127.0.0.1:{redirecting.server_address[1]}/a.bin", 5, allow_http=True)
        redirecting.shutdown()
    assert answer.size == len(BLOB) and [r.method for r in server.requests] == ["HEAD"]
