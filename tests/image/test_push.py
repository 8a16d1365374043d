"""scripts/push_image.py against a real registry (tests/image/registry.py) through the local Docker daemon.

Each case states the outcome a user sees: exit code, the message id in `[...]`, the digest lines on stdout, and
that the password shows up nowhere (output, our argv, ~/.docker/config.json).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import docker
import docker.errors
import pytest

from tests.image.registry import Registry, free_port, running_registry
from tests.support.files import small_text

pytestmark = pytest.mark.image

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "push_image.py"
USER = "pusher"
DIGEST_LINE = re.compile(r"^(?P<ref>\S+)@(?P<digest>sha256:[0-9a-f]{64})$")


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("push_image", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script executes
    spec.loader.exec_module(module)
    return module


push_image = load_script()


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    docker_client = docker.from_env()
    try:
        yield docker_client
    finally:
        docker_client.close()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with running_registry(tmp_path_factory.mktemp("registry"), USER, f"right-{uuid.uuid4().hex}") as running:
        yield running


@pytest.fixture
def make_image(client: docker.DockerClient) -> Iterator[Callable[..., str]]:
    """Import a one-file image (unique content) under every given reference; return its Id. Removed afterwards."""
    made: list[str] = []

    def make(*refs: str) -> str:
        payload = uuid.uuid4().bytes * 64
        tar_bytes = io.BytesIO()
        with tarfile.open(fileobj=tar_bytes, mode="w") as tar:
            info = tarfile.TarInfo("payload.bin")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        name, _, tag = refs[0].rpartition(":")
        reply = client.api.import_image_from_data(tar_bytes.getvalue(), repository=name, tag=tag)
        image_id = str(json.loads(reply)["status"])
        made.append(image_id)
        for ref in refs[1:]:
            client.images.get(image_id).tag(ref)
        return image_id

    yield make
    for image_id in made:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(image_id, force=True)


def run_script(
    args: list[str], home: Path, env: dict[str, str], stdin: str = ""
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Run the script as a user would, with HOME at `home` so ~/.docker/config.json is ours to inspect."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("TCR_USERNAME", "TCR_PASSWORD", "DOCKER_CONFIG")}
    full_env.update(HOME=str(home), PYTHONIOENCODING="utf-8", **env)
    argv = [sys.executable, str(SCRIPT), *args]
    return argv, subprocess.run(argv, input=stdin, capture_output=True, text=True, env=full_env, timeout=60)


def assert_secret_absent(secret: str, argv: list[str], done: subprocess.CompletedProcess[str], home: Path) -> None:
    assert secret not in " ".join(argv)
    assert secret not in done.stdout and secret not in done.stderr
    for config in (home / ".docker" / "config.json", Path.home() / ".docker" / "config.json"):
        assert not config.exists() or secret not in small_text(config)
    assert not (home / ".docker").exists()


def test_push_prints_digests_and_pulls_back(
    registry: Registry, make_image: Callable[..., str], client: docker.DockerClient, tmp_path: Path
) -> None:
    refs = [f"{registry.host}/ns/tiny:v1", f"{registry.host}/ns/tiny:latest"]
    image_id = make_image(*refs)
    argv, done = run_script(refs, tmp_path, {"TCR_USERNAME": USER, "TCR_PASSWORD": registry.password})
    assert done.returncode == 0, done.stderr
    matches = [DIGEST_LINE.match(line) for line in done.stdout.splitlines()]
    digests = {m["ref"]: m["digest"] for m in matches if m}
    assert len(digests) == len(matches) and list(digests) == refs
    assert f"{refs[0]}: 1/1 layers" in done.stderr and "Pushed" in done.stderr
    assert "\x1b[K" not in done.stderr  # stderr is no terminal: plain lines, no in-place rewriting
    assert_secret_absent(registry.password, argv, done, tmp_path)

    for ref in refs:
        client.images.remove(ref)
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(image_id)
    for ref, digest in digests.items():
        name, _, tag = ref.rpartition(":")
        pulled = client.images.pull(name, tag=tag, auth_config=registry.auth_config)
        assert pulled.id == image_id
        assert f"{name}@{digest}" in pulled.attrs["RepoDigests"]


@pytest.mark.parametrize("source", ["env", "stdin"])
def test_wrong_password_fails_without_echoing_it(
    source: str, registry: Registry, make_image: Callable[..., str], tmp_path: Path
) -> None:
    planted = f"planted-{uuid.uuid4().hex}"
    ref = f"{registry.host}/ns/tiny:wrong-{source}"
    make_image(ref)
    if source == "env":
        argv, done = run_script([ref], tmp_path, {"TCR_USERNAME": USER, "TCR_PASSWORD": planted})
    else:
        argv, done = run_script(["--username", USER, "--password-stdin", ref], tmp_path, {}, stdin=planted + "\n")
    assert done.returncode == 1
    assert "[push-auth]" in done.stderr and "TCR_PASSWORD" in done.stderr and "错误" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert_secret_absent(planted, argv, done, tmp_path)


def test_error_inside_push_stream_fails(make_image: Callable[..., str], tmp_path: Path) -> None:
    """A read-only registry accepts the login and then refuses the upload inside the HTTP-200 push stream."""
    password = f"ro-{uuid.uuid4().hex}"
    with running_registry(tmp_path / "ro", USER, password, readonly=True) as read_only:
        ref = f"{read_only.host}/ns/tiny:ro"
        make_image(ref)
        argv, done = run_script([ref], tmp_path, {"TCR_USERNAME": USER, "TCR_PASSWORD": password})
    assert done.returncode == 1
    assert "[push-failed]" in done.stderr and "405" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    assert_secret_absent(password, argv, done, tmp_path)


def test_unreachable_registry_fails(make_image: Callable[..., str], tmp_path: Path) -> None:
    ref = f"localhost:{free_port()}/ns/tiny:nowhere"
    make_image(ref)
    _, done = run_script([ref], tmp_path, {"TCR_USERNAME": USER, "TCR_PASSWORD": "unused-secret"})
    assert done.returncode == 1
    assert "[push-unreachable]" in done.stderr and "无法连接" in done.stderr and "Traceback" not in done.stderr


def test_unknown_local_image_is_bad_input(tmp_path: Path) -> None:
    ref = f"localhost:{free_port()}/ns/absent-{uuid.uuid4().hex[:12]}:v1"
    _, done = run_script([ref], tmp_path, {"TCR_USERNAME": USER, "TCR_PASSWORD": "unused-secret"})
    assert done.returncode == 2
    assert "[image-missing]" in done.stderr and "docker images" in done.stderr


OK_REF = "ccr.ccs.tencentyun.com/my-ns/vla-openpi:v1"


@pytest.mark.parametrize(
    ("argv", "env", "stdin", "message_id"),
    [
        pytest.param([OK_REF], {"TCR_USERNAME": USER}, "", "password-missing", id="no-password"),
        pytest.param([OK_REF], {"TCR_USERNAME": USER, "TCR_PASSWORD": ""}, "", "password-missing", id="empty-password"),
        pytest.param(["--password-stdin", OK_REF], {"TCR_USERNAME": USER}, "\n", "password-missing", id="empty-stdin"),
        pytest.param([OK_REF], {"TCR_PASSWORD": "x"}, "", "username-missing", id="no-username"),
        pytest.param(
            ["-p", "planted-argv-secret", OK_REF], {"TCR_USERNAME": USER}, "", "password-argv", id="password-in-argv"
        ),
        pytest.param(["ccr.ccs.tencentyun.com/a/img:v1"], {}, "", "ref-namespace", id="namespace-too-short"),
        pytest.param([f"ccr.ccs.tencentyun.com/{'n' * 31}/img:v1"], {}, "", "ref-namespace", id="namespace-too-long"),
        pytest.param(["ccr.ccs.tencentyun.com/-ns/img:v1"], {}, "", "ref-namespace", id="namespace-leading-separator"),
        pytest.param(["ccr.ccs.tencentyun.com/ns./img:v1"], {}, "", "ref-namespace", id="namespace-trailing-separator"),
        pytest.param(["ccr.ccs.tencentyun.com/n_-s/img:v1"], {}, "", "ref-namespace", id="namespace-double-separator"),
        pytest.param(["ccr.ccs.tencentyun.com/My-NS/img:v1"], {}, "", "ref-namespace", id="namespace-uppercase"),
        pytest.param(["ccr.ccs.tencentyun.com/img:v1"], {}, "", "ref-namespace", id="namespace-missing"),
        pytest.param(["my-ns/img:v1"], {}, "", "ref-registry", id="registry-missing"),
        pytest.param(["ccr.ccs.tencentyun.com/my-ns/img"], {}, "", "ref-tag", id="tag-missing"),
        pytest.param(["ccr.ccs.tencentyun.com/my-ns/img:-v1"], {}, "", "ref-tag", id="tag-invalid"),
        pytest.param([f"ccr.ccs.tencentyun.com/my-ns/img@sha256:{'0' * 64}"], {}, "", "ref-digest", id="digest"),
        pytest.param(["ccr.ccs.tencentyun.com/my-ns/Img:v1"], {}, "", "ref-repository", id="repository-uppercase"),
    ],
)
def test_bad_input_exits_2(
    argv: list[str],
    env: dict[str, str],
    stdin: str,
    message_id: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Rejected before the Docker engine is contacted: exit 2, bilingual message, no secret echoed."""
    for name in ("TCR_USERNAME", "TCR_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert push_image.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"[{message_id}]" in err and "错误:" in err and "解决:" in err
    assert "planted-argv-secret" not in err


@pytest.mark.parametrize(
    "text",
    [
        OK_REF,
        "ccr.ccs.tencentyun.com/my.ns_1-x/vla-openpi:2026.12-rc_1",
        "myinstance.tencentcloudcr.com/team/vla/openpi:v1",
        "localhost:5000/ns/tiny:v1",
    ],
)
def test_valid_references_parse(text: str) -> None:
    assert str(push_image.parse_reference(text)) == text


PUSH_CHUNKS = [
    {"status": "The push refers to repository [r/ns/img]"},
    {"status": "Preparing", "progressDetail": {}, "id": "aaa"},
    {"status": "Preparing", "progressDetail": {}, "id": "bbb"},
    {"status": "Layer already exists", "progressDetail": {}, "id": "bbb"},
    {"status": "Pushing", "progressDetail": {"current": 512, "total": 1024}, "id": "aaa"},
    {"status": "Pushing", "progressDetail": {"current": 2048, "total": 1024}, "id": "aaa"},
    {"status": "Pushed", "progressDetail": {}, "id": "aaa"},
    {"progressDetail": {}, "aux": {"Tag": "v1", "Digest": "sha256:" + "0" * 64, "Size": 1}},
]


@pytest.mark.parametrize(
    ("tty", "chunks", "expected"),
    [
        pytest.param(
            False,
            PUSH_CHUNKS,
            "r/ns/img:v1: 0/1 layers, 0 B\n"
            "  layer bbb: Layer already exists\n"
            "  layer aaa: Pushed\n"
            "r/ns/img:v1: 2/2 layers, 1.0 KiB / 1.0 KiB (100%)\n",
            id="plain",
        ),
        pytest.param(False, PUSH_CHUNKS[:2], "r/ns/img:v1: 0/1 layers, 0 B\n", id="plain-unchanged-at-close"),
        pytest.param(
            True,
            PUSH_CHUNKS,
            "\rr/ns/img:v1: 0/1 layers, 0 B\x1b[K\rr/ns/img:v1: 2/2 layers, 1.0 KiB / 1.0 KiB (100%)\x1b[K\n",
            id="tty",
        ),
    ],
)
def test_progress_aggregates_layer_bytes(tty: bool, chunks: list[dict[str, object]], expected: str) -> None:
    """The clock stands still, so only the first update and the closing line are drawn, plus plain layer events."""
    out = io.StringIO()
    progress = push_image.Progress("r/ns/img:v1", out, tty=tty, clock=lambda: 0.0)
    for chunk in chunks:
        progress.feed(chunk)
    progress.close()
    assert out.getvalue() == expected
