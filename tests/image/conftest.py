"""Image-tier fixtures: the stand-in base and the real Dockerfile built through bake, a CFS tree to mount,
and container helpers. This tier never skips: without Docker or buildx it fails, saying what is missing.
The session ends by checking that no registry a test started is left running or listening."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.image.registry import LAUNCHED, listening, registry_running
from tests.support.synthetic import make_assets_tree

REPO = Path(__file__).resolve().parents[2]
IMAGE = "vla-entrypoint/openpi-standin:test"
STANDIN_BASE = "vla-entrypoint/standin-base:latest"
OURS = "vla-entrypoint/"  # every image the tier builds or tags is named under it
CFS_IN_CONTAINER = "/home/tione/notebook/embodied-ai/openpi-assets"


def _need(condition: bool, what: str) -> None:
    if not condition:
        pytest.fail(f"the image tier cannot run: {what}. Run scripts/setup-tools test (as root) first.", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def no_registry_left() -> Iterator[None]:
    """After the session, every registry started by a test has exited and nothing listens on its port."""
    yield
    left = [f"pid {pid} on port {port}" for pid, port in LAUNCHED if registry_running(pid) or listening(port)]
    assert not left, f"registries left behind by the tests: {', '.join(left)}"


@pytest.fixture(scope="session", autouse=True)
def no_dangling_image_left() -> Iterator[None]:
    """Images the session leaves untagged (a stand-in rebuilt over its old tag, a stand-in TACO wheel baked again) are
    removed when it ends, whatever the outcome; dangling images that were there before, or were another project's,
    are left alone. The tagged stand-ins stay on purpose: the next run reuses them and their build cache (README)."""
    import docker.errors

    try:
        client = docker.from_env(timeout=300)
        before = {image.id: image.tags for image in client.images.list()}
    except Exception:  # no engine: the docker_client fixture fails the tests that need one, saying why
        yield
        return
    yield
    for image in client.images.list(filters={"dangling": True}):
        tags = before.get(image.id)
        if tags is None or (tags and all(tag.startswith(OURS) for tag in tags)):
            try:
                client.images.remove(image.id)
            except docker.errors.APIError as error:  # still used by a container that outlived its test
                print(f"\nimage tier: dangling image {image.short_id} not removed: {error}")
    client.close()


@pytest.fixture(scope="session")
def docker_client():
    import docker.errors

    _need(shutil.which("docker") is not None, "the docker CLI is missing")
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as exc:  # the SDK raises several unrelated types for an absent daemon
        pytest.fail(f"the image tier cannot run: no Docker engine ({exc})", pytrace=False)
    _need(
        subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0, "docker buildx is missing"
    )
    return client


@pytest.fixture(scope="session")
def built_image(docker_client) -> str:
    """Build (or reuse) the stand-in base, then the project's Dockerfile over it through bake."""
    start = time.monotonic()
    subprocess.run([str(REPO / "scripts" / "build-standin-base")], cwd=REPO, check=True)
    base_done = time.monotonic()
    subprocess.run(
        [str(REPO / "scripts" / "build-image"), "--progress", "plain", "openpi-standin"], cwd=REPO, check=True
    )
    print(f"\nstand-in base ready in {base_done - start:.1f}s; image built in {time.monotonic() - base_done:.1f}s")
    return IMAGE


@pytest.fixture
def cfs(tmp_path: Path) -> Path:
    """A synthetic openpi-assets tree, the one folder a TI-ONE job mounts."""
    root = make_assets_tree(tmp_path / "openpi-assets", episodes=4)
    os.chmod(root, 0o777)
    return root


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def logs(self) -> str:
        return self.stdout + self.stderr


def tione_env(
    nodes: int = 1, per_node: int = 2, rank: int = 0, master: str = "127.0.0.1", **extra: str
) -> dict[str, str]:
    """TI-ONE's DDP variables for a CPU stand-in job (VLA_DEVICE=cpu: gloo, no GPU checks)."""
    env = {
        "GPU_NUM_PER_NODE": str(per_node),
        "WORLD_SIZE": str(nodes),
        "RANK": str(rank),
        "INDEX": str(rank),
        "MASTER_ADDR": master,
        "MASTER_PORT": "23456",
        "GPU_NUM": str(nodes * per_node),
        "VLA_DEVICE": "cpu",
    }
    env.update(extra)
    return env


def run_container(
    client,
    image: str,
    command: list[str] | None = None,
    env: dict[str, str] | None = None,
    mounts: dict[str, str] | None = None,
    timeout: int = 300,
    **kwargs,
) -> Finished:
    """Run a container to completion; always removed afterwards."""
    volumes = {host: {"bind": inside, "mode": "rw"} for host, inside in (mounts or {}).items()}
    start = time.monotonic()
    container = client.containers.run(image, command, environment=env or {}, volumes=volumes, detach=True, **kwargs)
    try:
        code = container.wait(timeout=timeout)["StatusCode"]
        return Finished(
            code,
            container.logs(stdout=True, stderr=False).decode(),
            container.logs(stdout=False, stderr=True).decode(),
            time.monotonic() - start,
        )
    finally:
        container.remove(force=True)
