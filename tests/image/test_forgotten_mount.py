"""A TI-ONE job started without its CFS storage row, in a real container (overlay root, TI-ONE's variables): the
job stops at once with the missing mount as its one cause, never reaching torchrun or writing checkpoints."""

from __future__ import annotations

import re

from tests.image.conftest import CFS_IN_CONTAINER, run_container, tione_env

# The storage driver decides the root's type: overlay (overlay2) or fuse.fuse-overlayfs (the fuse-overlayfs driver).
CONTAINER_DISK = re.compile(r"container's own disk \((overlay|fuse\.fuse-overlayfs) mounted at /\)")


def fails(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("  FAIL  ")]


def test_a_job_without_the_storage_row_stops_with_the_mount_as_its_one_cause(docker_client, built_image):
    result = run_container(docker_client, built_image, env=tione_env())
    assert result.code == 3, result.logs
    (headline,) = fails(result.stdout)
    assert "storage.assets-mount" in headline and f"the assets root {CFS_IN_CONTAINER} does not exist" in headline
    assert CONTAINER_DISK.search(result.stdout)
    assert f"container path {CFS_IN_CONTAINER}" in result.stdout and "存储设置中添加一行" in result.stdout
    assert "start command:" not in result.stdout  # torchrun never started
    print(f"\nforgotten storage row refused in {result.seconds:.1f}s (container start included)")
    assert result.seconds < 30


def test_a_root_on_the_containers_own_disk_is_refused(docker_client, built_image):
    result = run_container(docker_client, built_image, command=["check"], env=tione_env(VLA_ASSETS_ROOT="/opt"))
    assert result.code == 3, result.logs
    (headline,) = fails(result.stdout)
    assert "the assets root /opt is not a mounted file system" in headline
    assert CONTAINER_DISK.search(headline)
    assert "storage.not-checked" in result.stdout and "storage.checkpoint" in result.stdout
