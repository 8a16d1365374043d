"""`vla-entrypoint fetch-assets` against real HTTP servers on 127.0.0.1 (tests/httpserver.py) serving synthetic
tarballs shaped like the seed's: parallel ranges, one stream, a server without ranges, dropped connections, corrupt
bytes, interruptions resumed from checkpoints, bad input, and the decoder checkpoints themselves."""

from __future__ import annotations

import bz2
import contextlib
import errno
import filecmp
import gzip
import hashlib
import io
import json
import lzma
import os
import random
import shutil
import socket
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from entrypoint.cli import main
from entrypoint.core.messages import Lang
from entrypoint.core.numbers import human_bytes
from entrypoint.fetch import unpack, workspace
from entrypoint.fetch.progress import Progress
from entrypoint.fetch.unpack import ArchiveError, ArchiveFormat, ArchiveReader, StdlibDecoder, make_decoder
from entrypoint.fetch.workspace import STATE_DIR
from entrypoint.net.download import DownloadOptions, OrderedStream, ResumableSha256, probe
from tests.support.files import small_bytes, small_text
from tests.support.httpserver import closed_port_url, serve
from tests.support.synthetic import RELEASE_FILES, make_assets_tree, make_release
from tests.support.weights import write_shipped_weights
from tests.unit.conftest import Result

DATASET = "datasets/physical-intelligence/libero"
STATS = "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
FAST = (
    "--allow-http",
    "--backoff",
    "0.01",
    "--timeout",
    "5",
    "--retries",
    "3",
    "--checkpoint-span",
    "65536",
    "--persist-every",
    "0",
    "--create-root",  # each test starts from a fresh folder; a missing root without the flag is test_fetch_root.py's
)


@dataclass
class Release:
    base: Path  # served folder, laid out like the object storage
    files: dict[str, Path]
    expected: dict[str, bytes | str]  # the tree `tar -xf` would give: relative path -> bytes (or 'link -> target')

    def sha256(self, name: str) -> str:
        with open(self.files[name], "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()


def snapshot(root: Path, *, hidden: bool = False) -> dict[str, bytes | str]:
    """Files under `root` (without `.vla-fetch` unless `hidden`): relative path -> content, or '-> target' for links."""
    tree: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not hidden and relative.split("/")[0] == STATE_DIR:
            continue
        if path.is_symlink():
            tree[relative] = "-> " + os.readlink(path)
        elif path.is_file():
            tree[relative] = small_bytes(path)
    return tree


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    base = tmp_path_factory.mktemp("release")
    files = make_release(base, episodes=8, episode_bytes=160 * 1024, weights_bytes=640 * 1024)
    reference = tmp_path_factory.mktemp("reference")
    for name, into in (("dataset", "datasets"), ("suites", "datasets"), ("weights", "checkpoints")):
        with tarfile.open(files[name]) as archive:
            archive.extractall(reference / into)
    (reference / STATS).parent.mkdir(parents=True)
    shutil.copy(files["norm-stats"], reference / STATS)
    return Release(base, files, snapshot(reference))


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def fetch(
    root: Path, *args: str, lang: str = "en", allow_http: bool = True, env: dict[str, str] | None = None
) -> Result:
    """`vla-entrypoint fetch-assets --assets-root ROOT <FAST> ARGS` in this process, with a clean environment plus
    `env` (`allow_http=False` leaves out FAST's --allow-http)."""
    flags = [flag for flag in FAST if allow_http or flag != "--allow-http"]
    # The synthetic release carries a 256 KiB stand-in for the 7.5 GB pi05 weights, which the shipped weights
    # signature rightly refuses; the final check reads sparse weights of the real model's shape instead.
    weights = root.parent / "pi05-weights"
    if not (weights / "model.safetensors").exists():
        write_shipped_weights(weights / "model.safetensors")
    env = {
        **(env or {}),
        "VLA_WEIGHTS": str(weights),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent / "home"),
        "LANG": "C.UTF-8",
        "VLA_LANG": lang,
        "VLA_BAKED_JOB_FILE": str(root.parent / "no-baked-job.yaml"),
    }
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env, clear=True), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["fetch-assets", "--assets-root", str(root), *flags, *args])
    return Result(code, out.getvalue(), err.getvalue())


def manifest(tmp_path: Path, base_url: str, **pins: dict) -> str:
    """The built-in manifest with `base_url` and per-entry extra keys (e.g. sha256, size); returns its path."""
    import yaml

    from entrypoint.fetch.manifest import BUILTIN

    data = yaml.safe_load(BUILTIN.read_text())
    data["base_url"] = base_url
    for entry in data["entries"]:
        entry.update(pins.get(entry["name"].replace("-", "_"), {}))
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def dataset_gets(server) -> list:
    return [r for r in server.gets() if r.path.endswith(RELEASE_FILES["dataset"])]


# ---------------------------------------------------------------- end to end


@pytest.mark.parametrize(
    "behaviour, flags",
    [
        ({}, ("--segment-mib", "0.25")),
        ({}, ("--segments", "1")),
        ({"ranges": False}, ()),
        ({"drop_after": 100_000, "drops": 6}, ("--segment-mib", "0.25")),
        ({"ranges": False, "drop_after": 300_000, "drops": 2}, ()),
    ],
    ids=["parallel-ranges", "one-stream", "server-without-ranges", "drops-mid-transfer", "no-ranges-and-drops"],
)
def test_fetch_unpacks_the_seed_tree_then_a_rerun_downloads_nothing(release, tmp_path, behaviour, flags):
    root = tmp_path / "assets"
    with serve(release.base, **behaviour) as server:
        first = fetch(root, "--base-url", server.url, *flags)
        assert first.code == 0, first.text
        assert snapshot(root) == release.expected  # byte for byte what tar -xf gives, nothing more
        assert sorted(p.name for p in (root / ".vla-fetch").iterdir()) == [
            "dataset",
            "lock",
            "norm-stats",
            "suites",
            "weights",
        ]
        assert all(
            sorted(p.name for p in (root / ".vla-fetch" / e).iterdir()) == ["done.json"]
            for e in ("dataset", "norm-stats", "suites", "weights")
        )  # no staging, .part or state left
        assert "health check summary: PASS" in first.out and "verified: size + gzip CRC-32" in first.out
        assert (
            "start command:  (leave empty" in first.out
            and "-> /home/tione/notebook/embodied-ai/openpi-assets" in first.out
        )
        gets = dataset_gets(server)
        if flags == ("--segment-mib", "0.25"):
            starts = {int(r.range.split("=")[1].split("-")[0]) for r in gets if r.range and r.range != "bytes=0-0"}
            assert len(starts) >= 4  # several segments
        if behaviour.get("ranges") is False:
            assert {r.status for r in gets} == {200} and "does not support range requests" in first.out
        if behaviour.get("drops"):
            assert any(
                r.sent < release.files["dataset"].stat().st_size and r.sent == behaviour["drop_after"] for r in gets
            )
        requests = len(server.requests)
        start = time.monotonic()
        second = fetch(root, "--base-url", server.url, *flags)
        assert second.code == 0, second.text
        assert len(server.requests) == requests and "nothing to fetch" in second.out
        assert time.monotonic() - start < 3
        assert snapshot(root) == release.expected


@pytest.mark.parametrize(
    "entry, interrupt, flags",
    [
        ("dataset", "network-gives-up", ("--segments", "1")),
        ("dataset", "network-gives-up", ("--segment-mib", "0.125")),
        ("dataset", "ctrl-c", ("--segments", "1")),
        ("weights", "network-gives-up", ("--segments", "1")),
        ("dataset", "network-gives-up", ("--segments", "1", "--no-checkpoints")),
    ],
    ids=[
        "network-gives-up-resumes-at-a-checkpoint",
        "parallel-segments-give-up-then-resume",
        "ctrl-c-resumes-at-a-checkpoint",
        "inside-one-large-file-resumes-inside-it",
        "no-checkpoints-rereads-but-skips-members",
    ],
)
def test_an_interrupted_fetch_resumes_where_it_stopped(release, tmp_path, monkeypatch, entry, interrupt, flags):
    root = tmp_path / "assets"
    size = release.files[entry].stat().st_size
    checkpoints = "--no-checkpoints" not in flags
    pinned = manifest(tmp_path, "", **{entry: {"sha256": release.sha256(entry), "size": size}})
    extra = ("--manifest", pinned, "--only", entry, "--no-check", *flags)
    with serve(release.base) as server:
        if interrupt == "network-gives-up":  # at a fixed place: parallel segments arrive in any order under load
            server.behave(cut_at=size * 6 // 10)
            first = fetch(root, "--base-url", server.url, *extra)
            assert first.code == 3, first.text
            assert "[fetch.network]" in first.err and "resumes where it stopped" in first.err
        else:
            real_add = Progress.add

            def add(self, count):
                real_add(self, count)
                if self.session > size * 6 // 10:
                    raise KeyboardInterrupt

            monkeypatch.setattr(Progress, "add", add)
            first = fetch(root, "--base-url", server.url, *extra)
            monkeypatch.undo()
            assert first.code == 130 and "run the same command to resume" in first.out
        state = json.loads(small_text(root / f".vla-fetch/{entry}/state.json"))
        if entry == "weights":  # stopped inside model.safetensors: the state says how far its file got
            assert state["extract"]["partial"]["path"] == "pi05_base_pytorch/model.safetensors"
        else:
            assert state["extract"]["members"] > 0
        assert (
            not (root / "datasets").exists() and not (root / "checkpoints").exists()
        )  # nothing unverified in the tree
        server.behave(cut_at=None)
        served_before, requests_before = server.bytes_sent, len(server.gets())
        second = fetch(root, "--base-url", server.url, *extra)
        assert second.code == 0, second.text
        asked = [
            r.range
            for r in server.gets()[requests_before:]
            if r.path.endswith(RELEASE_FILES[entry]) and r.range != "bytes=0-0"
        ]
        start = min(int(a.split("=")[1].split("-")[0]) for a in asked)  # the first byte the second run asked for
        if checkpoints:
            assert start > 0 and server.bytes_sent - served_before < size  # not downloaded again from the start
            assert "sha256 as pinned" in second.out  # the hash state travelled with the checkpoint
        else:
            assert start == 0 and "skips the" in second.out and "members already unpacked" in second.out
        top = "datasets/physical" if entry == "dataset" else "checkpoints/"
        assert snapshot(root) == {k: v for k, v in release.expected.items() if k.startswith(top)}


@pytest.mark.parametrize(
    "entry, pin, text",
    [
        ("dataset", False, "the archive is damaged"),
        ("norm-stats", True, "is not the manifest's"),
    ],
    ids=["archive-unpinned", "file-with-pinned-sha256"],
)
def test_corrupt_bytes_are_refused_and_kept_aside(release, tmp_path, entry, pin, text):
    root = tmp_path / "assets"
    pins = {entry.replace("-", "_"): {"sha256": release.sha256(entry)}} if pin else {}
    with serve(release.base, corrupt=True) as server:
        bad = fetch(root, "--manifest", manifest(tmp_path, server.url, **pins), "--only", entry)
        assert bad.code == 3 and text in bad.err and "[fetch.verify]" in bad.err, bad.text
        kept = list((root / ".vla-fetch" / entry).glob("tree.bad-*"))
        assert len(kept) == 1 and str(kept[0]) in bad.err
        assert not (root / "datasets").exists() and not (root / STATS).exists()
        server.behave(corrupt=False)
        good = fetch(root, "--manifest", manifest(tmp_path, server.url, **pins), "--only", entry, "--no-check")
        assert good.code == 0 and "done," in good.out, good.text
        assert kept[0].exists()  # the bad copy is never deleted


def test_a_full_disk_stops_cleanly_and_the_next_run_finishes(release, tmp_path, monkeypatch):
    root = tmp_path / "assets"
    budget = [500_000]
    real_open = open

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            if len(data) > budget[0]:
                raise OSError(errno.ENOSPC, "No space left on device")
            budget[0] -= len(data)
            return self.handle.write(data)

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    monkeypatch.setattr(unpack, "open", lambda *a, **k: FullDisk(real_open(*a, **k)), raising=False)
    with serve(release.base) as server:
        full = fetch(root, "--base-url", server.url, "--only", "dataset", "--no-check")
        assert full.code == 3 and "[fetch.disk-full]" in full.err and "run the same command again" in full.err, (
            full.text
        )
        monkeypatch.undo()
        again = fetch(root, "--base-url", server.url, "--only", "dataset", "--no-check")
        assert again.code == 0 and "done," in again.out, again.text
        assert int(dataset_gets(server)[-1].range.split("=")[1].split("-")[0]) > 0
    assert {k: v for k, v in snapshot(root).items() if k.startswith("datasets/")} == {
        k: v for k, v in release.expected.items() if k.startswith("datasets/physical")
    }


def test_a_partially_extracted_tree_is_completed_and_nothing_is_deleted(release, tmp_path):
    root = tmp_path / "assets"
    with tarfile.open(release.files["dataset"]) as archive:  # what an interrupted `tar -xf` leaves
        members = archive.getmembers()
        archive.extractall(root / "datasets", members=members[: len(members) // 2])
    episode = next(p for p in sorted((root / DATASET / "data").rglob("*.parquet")))
    os.truncate(episode, 1000)  # the file tar was writing
    (root / DATASET / "my-notes.txt").write_text("mine")
    with serve(release.base) as server:
        result = fetch(root, "--base-url", server.url)
    assert result.code == 0, result.text
    assert "is incomplete (an interrupted tar -xf?)" in result.out and "moved aside" in result.out
    tree = snapshot(root)
    assert tree.pop(f"{DATASET}/my-notes.txt") == b"mine"
    aside = [k for k in tree if ".old-" in k]
    assert len(aside) == 1 and tree.pop(aside[0]) == release.expected[episode.relative_to(root).as_posix()][:1000]
    assert tree == release.expected


def test_a_tree_made_by_the_seeds_commands_is_adopted_without_downloading(release, tmp_path):
    root = make_assets_tree(tmp_path / "assets")
    for suite in ("libero_10_no_noops_lerobot",):
        shutil.copytree(root / DATASET, root / "datasets/libero_mujoco3.3.2" / suite)
    with serve(release.base) as server:
        result = fetch(root, "--base-url", server.url)
        assert result.code == 0, result.text
        assert server.requests == [] and result.out.count("already in place") == 4
        again = fetch(root, "--base-url", server.url)
        assert again.code == 0 and server.requests == [] and again.out.count("complete (found in place") == 4


def test_keep_tarballs_then_force_unpacks_the_kept_copy_offline(release, tmp_path):
    root = tmp_path / "assets"
    with serve(release.base) as server:
        kept = fetch(root, "--base-url", server.url, "--only", "weights", "--keep-tarballs", "--no-check")
        assert kept.code == 0 and "done," in kept.out, kept.text
        tarball = root / ".vla-fetch/tarballs/pi05_base_pytorch.tar.gz"
        assert filecmp.cmp(tarball, release.files["weights"], shallow=False)
        (root / "checkpoints/pi05_base_pytorch/config.json").unlink()
        server.behave(status={"/" + RELEASE_FILES["weights"]: 503})  # the network is of no use now
        again = fetch(root, "--base-url", server.url, "--only", "weights", "--no-check")
        assert "files changed since it was fetched" in again.out and "unpacking the kept tarball" in again.out, (
            again.text
        )
        assert (root / "checkpoints/pi05_base_pytorch/config.json").exists()
        assert not [r for r in server.gets() if r.status == 503]


def test_an_unsafe_archive_is_refused(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    with tarfile.open(served / "evil.tar.gz", "w:gz") as archive:
        for name in ("fine/ok.txt", "../escaped.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            archive.addfile(info, io.BytesIO(b"hi"))
    (tmp_path / "m.yaml").write_text("entries: [{name: evil, url: evil.tar.gz, into: datasets}]\n")
    root = tmp_path / "assets"
    with serve(served) as server:
        result = fetch(root, "--manifest", str(tmp_path / "m.yaml"), "--base-url", server.url, "--no-check")
    assert result.code == 3 and "unsafe archive member refused" in result.err, result.text
    assert not (tmp_path / "escaped.txt").exists() and not (root / "escaped.txt").exists()
    assert not (root / "datasets").exists() and list((root / ".vla-fetch/evil").glob("tree.bad-*"))


@pytest.mark.parametrize("suffix, mode", [("tar", "w"), ("tar.bz2", "w:bz2"), ("tar.xz", "w:xz")])
def test_other_archive_formats_unpack_too(release, tmp_path, suffix, mode):
    served = tmp_path / "served"
    served.mkdir()
    with tarfile.open(release.files["weights"]) as source, tarfile.open(served / f"weights.{suffix}", mode) as target:
        for member in source:
            target.addfile(member, source.extractfile(member) if member.isreg() else None)
    (tmp_path / "m.yaml").write_text(f"entries: [{{name: w, url: weights.{suffix}, into: checkpoints}}]\n")
    root = tmp_path / "assets"
    with serve(served) as server:
        result = fetch(root, "--manifest", str(tmp_path / "m.yaml"), "--base-url", server.url, "--no-check")
    assert result.code == 0, result.text
    assert snapshot(root) == {k: v for k, v in release.expected.items() if k.startswith("checkpoints/")}


def bad_manifest(tmp_path: Path, text: str) -> str:
    (tmp_path / "bad.yaml").write_text(text)
    return str(tmp_path / "bad.yaml")


@pytest.mark.parametrize(
    "case, code, text",
    [
        ("unreachable", 3, "cannot reach"),
        ("404", 3, "HTTP 404"),
        ("ftp-url", 2, "unsupported address"),
        ("malformed-url", 2, "is not a valid URL"),
        ("plain-http-not-allowed", 2, "plain http"),
        ("manifest-syntax", 2, "is not valid YAML (line"),
        ("manifest-unknown-key", 2, "Did you mean 'sha256'?"),
        ("manifest-escapes-root", 2, "leaves the assets root"),
        ("unknown-entry", 2, "Did you mean 'dataset'?"),
        ("size-differs", 3, "the manifest pins 12345"),
        ("read-only-destination", 3, "Read-only file system"),
        ("not-enough-space", 3, "is free under"),
        ("another-run-at-once", 3, "another fetch-assets is already filling"),
    ],
    ids=lambda v: v if isinstance(v, str) and not v[:1].isupper() and " " not in v else None,
)
def test_bad_input_gives_a_clear_message_and_a_safe_state(release, tmp_path, monkeypatch, case, code, text):
    root = tmp_path / "assets"
    with serve(release.base) as server:
        args: tuple[str, ...] = ("--base-url", server.url)
        if case == "unreachable":
            args = ("--base-url", closed_port_url("/"))
        elif case == "404":
            args = ("--base-url", server.url + "/nowhere")
        elif case == "ftp-url":
            args = ("--base-url", "ftp://example.invalid/x")
        elif case == "malformed-url":
            args = ("--base-url", "http://exa mple.invalid/x")
        elif case == "manifest-syntax":
            args = ("--manifest", bad_manifest(tmp_path, "entries:\n  - name: [oops\n"))
        elif case == "manifest-unknown-key":
            args = (
                "--manifest",
                bad_manifest(tmp_path, "entries: [{name: a, url: http://x/a.json, to: a.json, sha265: x}]\n"),
            )
        elif case == "manifest-escapes-root":
            args = (
                "--manifest",
                bad_manifest(tmp_path, "entries: [{name: a, url: http://x/a.tgz, into: ../outside}]\n"),
            )
        elif case == "unknown-entry":
            args += ("--only", "datset")
        elif case == "size-differs":
            args = ("--manifest", manifest(tmp_path, server.url, weights={"size": 12345}))
        elif case == "read-only-destination":
            real_mkdir = os.mkdir

            def read_only(path, *rest, **kw):
                if str(path).startswith(str(root)):
                    raise OSError(errno.EROFS, "Read-only file system", str(path))
                return real_mkdir(path, *rest, **kw)

            monkeypatch.setattr(os, "mkdir", read_only)
        elif case == "not-enough-space":
            monkeypatch.setattr(workspace, "free_bytes", lambda path: 100_000)
        elif case == "another-run-at-once":
            import fcntl

            (root / ".vla-fetch").mkdir(parents=True)
            holder = (root / ".vla-fetch" / "lock").open("a+")
            fcntl.flock(
                holder.fileno(), fcntl.LOCK_EX
            )  # what a running fetch-assets holds; released when the test ends
        start = time.monotonic()
        result = fetch(root, "--retries", "2", *args, allow_http=case != "plain-http-not-allowed")
        assert time.monotonic() - start < 10
    assert result.code == code and text in result.err, result.text
    assert "Traceback" not in result.text
    assert "fix:" in result.err and "解决:" in result.err  # what, where, fix; both languages
    assert all(r.range == "bytes=0-0" for r in server.requests)  # at most one-byte probes before the problem was found
    for leftover in ("datasets", "checkpoints", "assets"):
        assert not (root / leftover).exists()


@pytest.mark.parametrize(
    "code, words, lookups",
    [
        (socket.EAI_NONAME, "Name or service not known", 1),
        (socket.EAI_AGAIN, "Temporary failure in name resolution", 3),
    ],
    ids=["offline-no-such-name", "resolver-failing-for-now"],
)
def test_an_offline_fetch_says_what_it_retries_and_gives_up_on_a_name_that_does_not_exist(
    tmp_path, monkeypatch, code, words, lookups
):
    asked: list[str] = []

    def getaddrinfo(host, *args, **kwargs):
        asked.append(host)
        raise socket.gaierror(code, words)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    result = fetch(tmp_path / "assets", "--base-url", "https://objects.example/release", "--retries", "6")
    assert result.code == 3 and "Traceback" not in result.text
    assert asked == ["objects.example"] * lookups  # not the 6 tries (31 s of backoff) a failing server gets
    assert "error [fetch.network]" in result.err and "objects.example" in result.err and f"({words})" in result.err
    retries = [line for line in result.out.splitlines() if "next lookup in" in line]
    assert len(retries) == lookups - 1
    for number, line in enumerate(retries, 1):
        assert f"cannot resolve objects.example ({words}): lookup {number} of 3; next lookup in" in line


@pytest.mark.parametrize("variable", ["https_proxy", "HTTPS_PROXY"])
def test_a_malformed_proxy_variable_exits_2_naming_it(tmp_path, variable):
    start = time.monotonic()
    result = fetch(
        tmp_path / "assets",
        "--base-url",
        "https://objects.example/release",
        "--backoff",
        "2",
        env={variable: "http://proxy.example:31 28"},
    )
    assert time.monotonic() - start < 5  # never retried
    assert result.code == 2 and f"error [fetch.scheme] at {variable}" in result.err, result.text
    assert f"Write {variable} as http://host:port" in result.err and "解决:" in result.err


def test_an_optional_entry_that_is_not_there_is_skipped(release, tmp_path):
    root = tmp_path / "assets"
    with serve(release.base, status={"/" + RELEASE_FILES["suites"]: 404}) as server:
        result = fetch(root, "--base-url", server.url)
    assert result.code == 0 and "suites: optional and not available" in result.out and "HTTP 404" in result.out, (
        result.text
    )
    assert not (root / "datasets/libero_mujoco3.3.2").exists() and (root / DATASET).is_dir()


def test_dry_run_and_help(release, tmp_path):
    root = tmp_path / "assets"
    with serve(release.base) as server:
        result = fetch(root, "--base-url", server.url, "--dry-run", lang="both")
        assert result.code == 0 and not root.exists()
        assert sorted(r.method for r in server.requests) == ["HEAD"] * 4  # sizes asked, nothing downloaded
    assert result.out.count("not present: will be fetched") == 4 and result.out.count("不存在:将下载") == 4
    assert f"size {human_bytes(release.files['weights'].stat().st_size)}" in result.out
    usage = io.StringIO()
    with contextlib.redirect_stdout(usage):
        assert main(["fetch-assets", "--help"]) == 0
    for flag in (
        "--manifest",
        "--base-url",
        "--segments",
        "--keep-tarballs",
        "--only",
        "--skip",
        "--dry-run",
        "--create-root",
        "--force",
    ):
        assert flag in usage.getvalue()
    assert "--checkpoint-span" not in usage.getvalue()  # test knobs stay hidden


# ---------------------------------------------------------------- the parts


def _text(size: int, seed: int) -> bytes:
    words = [random.Random(seed + i).randbytes(random.Random(i).randint(2, 6)).hex() for i in range(500)]
    pick = random.Random(seed)
    return " ".join(pick.choice(words) for _ in range(size // 8)).encode()[:size]


def _blocks(data: bytes, start: int = 0, size: int = 50_000):
    for offset in range(start, len(data), size):
        yield data[offset : offset + size]


@pytest.mark.parametrize("kind", ["gzip-text", "gzip-incompressible", "gzip-two-members", "tar"])
def test_every_checkpoint_resumes_decoding_and_hashing_exactly(kind):
    data = (
        _text(600_000, 1) + random.Random(2).randbytes(200_000)
        if kind != "gzip-incompressible"
        else random.Random(3).randbytes(700_000)
    )
    if kind == "gzip-two-members":
        compressed = gzip.compress(data[:300_000]) + gzip.compress(data[300_000:]) + bytes(100)  # and zero padding
    elif kind == "tar":
        compressed = data
    else:
        compressed = gzip.compress(data)
    fmt = ArchiveFormat.TAR if kind == "tar" else ArchiveFormat.GZIP
    digest = hashlib.sha256(compressed).hexdigest()
    reader = ArchiveReader(_blocks(compressed), make_decoder(fmt, 40_000), hasher=ResumableSha256())
    assert reader.read() == data and reader.hasher.hexdigest() == digest
    assert len(reader.checkpoints) >= 3
    if kind == "gzip-text":
        assert any(c.bits for c in reader.checkpoints)  # boundaries inside a byte: the primed bits matter
    for checkpoint in reader.checkpoints:
        resumed = ArchiveReader(
            _blocks(compressed, checkpoint.in_offset),
            make_decoder(fmt, 40_000, checkpoint),
            in_offset=checkpoint.in_offset,
            out_offset=checkpoint.out_offset,
            hasher=ResumableSha256(checkpoint.sha_state),
        )
        assert resumed.read() == data[checkpoint.out_offset :]
        assert resumed.hasher.hexdigest() == digest


def _flip(data: bytes) -> bytes:
    return data[:5000] + bytes(b ^ 0x55 for b in data[5000:5010]) + data[5010:]


def _zero_crc(data: bytes) -> bytes:
    return data[:-8] + bytes(4) + data[-4:]


def _zero_length(data: bytes) -> bytes:
    return data[:-4] + bytes(4)


@pytest.mark.parametrize(
    "damage, en, zh",
    [
        (lambda c: c[:-9], "the archive ends early: the compressed data stops at byte", "归档提前结束"),
        (_flip, "corrupt compressed data near byte", "压缩数据损坏"),
        (_zero_crc, "the gzip CRC-32 check failed near byte", "gzip CRC-32 校验失败"),
        (_zero_length, "the gzip length check failed near byte", "gzip 长度校验失败"),
        (
            lambda c: c + b"garbage",
            "unexpected bytes after the end of the compressed data",
            "压缩数据结束后出现多余字节",
        ),
    ],
    ids=["truncated", "flipped-bytes", "bad-crc", "bad-length", "trailing-garbage"],
)
@pytest.mark.parametrize("resumable", [True, False], ids=["libz", "stdlib"])
def test_damaged_gzip_is_an_archive_error(damage, en, zh, resumable):
    compressed = gzip.compress(_text(200_000, 4))
    reader = ArchiveReader(_blocks(damage(compressed)), make_decoder(ArchiveFormat.GZIP, 40_000, resumable=resumable))
    with pytest.raises(ArchiveError) as caught:
        reader.read()
    assert caught.value.text.en.startswith(en)
    assert zh in caught.value.text.zh


@pytest.mark.parametrize(
    "damage, en",
    [(_zero_crc, "the gzip CRC-32 check failed"), (_zero_length, "the gzip length check failed")],
    ids=["bad-crc", "bad-length"],
)
def test_a_resumed_gzip_still_checks_its_trailer(damage, en):
    compressed = gzip.compress(_text(200_000, 4))
    first = ArchiveReader(_blocks(compressed), make_decoder(ArchiveFormat.GZIP, 40_000))
    first.read()
    checkpoint = first.checkpoints[-1]
    assert checkpoint.raw  # resumed in raw-deflate mode: the trailer is checked by unpack, not by zlib
    resumed = ArchiveReader(
        _blocks(damage(compressed), checkpoint.in_offset),
        make_decoder(ArchiveFormat.GZIP, 40_000, checkpoint),
        in_offset=checkpoint.in_offset,
        out_offset=checkpoint.out_offset,
    )
    with pytest.raises(ArchiveError) as caught:
        resumed.read()
    assert caught.value.text.en.startswith(en)


@pytest.mark.parametrize(
    "kind, compress",
    [(ArchiveFormat.GZIP, gzip.compress), (ArchiveFormat.BZ2, bz2.compress), (ArchiveFormat.XZ, lzma.compress)],
    ids=["gzip", "bz2", "xz"],
)
@pytest.mark.parametrize("block", [7, 100_000], ids=["7-byte-blocks", "100k-blocks"])
def test_standard_library_decoders_read_concatenated_streams(kind, compress, block):
    data = bytes(600_000) + random.Random(6).randbytes(100_000) + b"abc" * 100_000
    joined = compress(data) + compress(data[:1000]) + bytes(30)  # two streams, then zero padding
    assert ArchiveReader(_blocks(joined, size=block), StdlibDecoder(kind)).read() == data + data[:1000]
    with pytest.raises(ArchiveError, match="ends early"):
        ArchiveReader(_blocks(joined[:-60], size=block), StdlibDecoder(kind)).read()
    with pytest.raises(ArchiveError, match="unexpected bytes after the end of the compressed data"):
        ArchiveReader(_blocks(joined + b"garbage", size=block), StdlibDecoder(kind)).read()


@pytest.mark.parametrize(
    "behaviour", [{}, {"ranges": False}, {"drop_after": 70_000, "drops": 4}], ids=["ranges", "no-ranges", "drops"]
)
def test_ordered_stream_delivers_in_order_within_its_window(tmp_path, behaviour):
    data = random.Random(5).randbytes(1_000_003)
    (tmp_path / "blob.bin").write_bytes(data)
    options = DownloadOptions(timeout_s=5, attempts=4, backoff_s=0.01, allow_http=True, chunk_bytes=16384)
    with serve(tmp_path, **behaviour) as server:
        remote = probe(server.url + "/blob.bin", options)
        assert remote.size == len(data) and remote.ranges == ("ranges" not in behaviour)
        for start in (0, 123_457):
            with OrderedStream(remote, start, options=options, segments=3, segment_bytes=65536, window=4) as stream:
                assert b"".join(stream) == data[start:]
                assert stream.ahead <= 4 * 65536


def test_progress_shows_bytes_rate_and_eta_per_file_and_overall():
    ticks = iter(range(1000))
    out = io.StringIO()
    progress = Progress(out, Lang.EN, tty=False, every_s=1, total=4 << 20, clock=lambda: next(ticks) * 0.5)
    progress.begin("[1/2] dataset", 2 << 20, 0)
    for _ in range(8):
        progress.add(256 << 10)
    lines = out.getvalue().splitlines()
    assert lines and all(
        "[1/2] dataset" in line and "/s" in line and "ETA" in line and "| all " in line for line in lines
    )
    first = "[1/2] dataset  256.0 KiB of 2.0 MiB 12%  512.0 KiB/s  ETA 4s  | all 256.0 KiB of 4.0 MiB 6% ETA 15s"
    last = "[1/2] dataset  2.0 MiB of 2.0 MiB 100%  512.0 KiB/s  ETA 0s  | all 2.0 MiB of 4.0 MiB 50% ETA 5s"
    assert (lines[0], lines[-1]) == (first, last)  # the last line shows the file complete
    assert len(lines) == 5  # throttled to one a second (every other block), plus the line that completes the file


# ---- edges: numeric options, malformed URLs, manifests that are not files ----


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--timeout", "-1"),
        ("--timeout", "0"),
        ("--segments", "0"),
        ("--segments", "65"),
        ("--segment-mib", "1e300"),
        ("--segment-mib", "nan"),
        ("--retries", "0"),
        ("--backoff", "-1"),
        ("--checkpoint-span", "0"),
        ("--persist-every", "inf"),
    ],
)
def test_numeric_options_out_of_range_exit_2_before_anything(tmp_path, flag, value):
    result = fetch(tmp_path / "root", flag, value)
    assert result.code == 2 and f"error [fetch.option] at {flag}" in result.err
    assert "is out of range" in result.err and "超出范围" in result.err and not (tmp_path / "root").exists()


@pytest.mark.parametrize(
    "url, problem",
    [
        ("https://host:99999/x.whl", "the port '99999' is not a number from 1 to 65535"),
        ("https://host:0/x.whl", "the port '0' is not a number from 1 to 65535"),
        ("https://host:http/x.whl", "the port 'http' is not a number from 1 to 65535"),
        ("https://[::1/x.whl", "the brackets around an IPv6 address do not match"),
        ("http://:80/x.whl", "it names no host"),
        ("https:///x.whl", "it names no host"),
        ("https://host/a b.whl", "it contains spaces or control characters"),
        ("https://objects..example/x.whl", "the host name 'objects..example' has an empty part"),
    ],
)
def test_a_malformed_url_is_refused_by_the_source_policy(url, problem):
    from entrypoint.net.source import DownloadError, FailureKind, check_scheme, source_name

    with pytest.raises(DownloadError) as caught:
        check_scheme(url, allow_http=True)
    assert caught.value.kind is FailureKind.SCHEME and problem in caught.value.what.en
    assert caught.value.what.zh != caught.value.what.en
    assert source_name(url).endswith(".whl")  # naming the file never raises either


@pytest.mark.parametrize(
    "url, shown",
    [
        ("https://user:pa55@host:99999/x.whl?sig=1", "https://host:99999/x.whl?…"),
        ("https://user:pa55@[::1/x?token=2#frag", "https://[::1/x?…"),
        ("https://u:pa55@h:abc/x", "https://h:abc/x"),
        ("http://:80/", "http://:80/"),
        ("https://h:0/x", "https://h:0/x"),
        ("https://user:pa55@example.com:8443/a?b", "https://example.com:8443/a?…"),
    ],
)
def test_safe_url_never_raises_and_never_shows_credentials(url, shown):
    from entrypoint.core.masking import safe_url

    assert safe_url(url) == shown


@pytest.mark.parametrize(
    "base_url, text",
    [("https://[::1", "brackets"), ("https://h:99999/x", "'99999'"), ("http://:80/", "no host")],
)
def test_a_malformed_base_url_names_the_flag(tmp_path, base_url, text):
    result = fetch(tmp_path / "root", "--dry-run", "--base-url", base_url)
    assert result.code == 2 and "error [fetch.manifest] at --base-url" in result.err and text in result.err


@pytest.mark.parametrize("kind", ["fifo", "folder", "duplicate-key", "deep", "huge-size"])
def test_a_manifest_that_is_not_a_plain_yaml_file_exits_2(tmp_path, kind):
    path = tmp_path / "manifest.yaml"
    if kind == "fifo":
        os.mkfifo(path)  # never opened for reading: that would block
    elif kind == "folder":
        path.mkdir()
    elif kind == "duplicate-key":
        path.write_text("entries:\n- name: a\n  url: https://h/a.json\n  to: a.json\n  to: b.json\n")
    elif kind == "deep":
        path.write_text("entries: " + "[" * 2000 + "]" * 2000 + "\n")
    else:
        path.write_text(f"entries:\n- name: a\n  url: https://h/a.json\n  to: a.json\n  size: {'9' * 5000}\n")
    result = fetch(tmp_path / "root", "--dry-run", "--manifest", str(path))
    assert result.code == 2 and "Traceback" not in result.text and "error [fetch.manifest]" in result.err
