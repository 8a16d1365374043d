"""Two containers as two TI-ONE nodes on a compose network run a real gloo DDP job with the default command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.files import small_text
from tests.support.synthetic import make_assets_tree

pytestmark = pytest.mark.image


@pytest.fixture(scope="session")
def two_node_cfs(tmp_path_factory, built_image) -> Path:
    root = make_assets_tree(tmp_path_factory.mktemp("cfs") / "openpi-assets", episodes=4)
    os.environ["VLA_TEST_CFS"] = str(root)
    os.environ["VLA_TEST_IMAGE"] = built_image
    return root


@pytest.fixture(scope="session")
def docker_compose_file(two_node_cfs) -> str:  # the CFS tree and image must exist before compose starts
    return str(Path(__file__).with_name("docker-compose.yml"))


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    return ["up -d"]  # `up --wait` treats one-shot job containers as failures; the test waits itself


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down -v"]


def test_two_node_job(two_node_cfs, docker_services, docker_compose_project_name, docker_client):
    containers = {
        c.labels["com.docker.compose.service"]: c
        for c in docker_client.containers.list(
            all=True, filters={"label": f"com.docker.compose.project={docker_compose_project_name}"}
        )
    }
    assert set(containers) == {"node0", "node1"}
    codes = {name: c.wait(timeout=600)["StatusCode"] for name, c in containers.items()}
    logs = {name: c.logs().decode() for name, c in containers.items()}
    assert codes == {"node0": 0, "node1": 0}, logs
    experiment = two_node_cfs / "checkpoints/pi05_libero/pi05_libero_pytorch"
    assert sorted(p.name for p in experiment.iterdir()) == ["25", "49", "50"]
    assert "Saved checkpoint at step 50" in logs["node0"] and "Saved checkpoint" not in logs["node1"]
    assert "4 in all" in logs["node0"]
    for name in ("node0", "node1"):  # the bandwidth preflight ran across both nodes before training
        assert "health check: bandwidth preflight" in logs[name] and "all-reduce bus bandwidth" in logs[name]
    for name in ("node0", "node1"):  # the stand-in has no GPU: the node health gate says so in one line, and passes
        assert logs[name].count("node health gate skipped: no GPU here (VLA_DEVICE=cpu)") == 1, logs[name]
    for rank in (0, 1):
        (log,) = (two_node_cfs / "logs").glob(f"pi05_libero_pytorch-node{rank}-*.log")
        record = json.loads(small_text(log.with_suffix(".json")))
        assert record["outcome"]["exit_code"] == 0
        assert record["plan"]["topology"]["node_rank"] == rank
        assert record["health"]["status"] == "skipped" and record["plan"]["health"]["runs"] is False
    print(f"\nnode logs: {sorted(p.name for p in (two_node_cfs / 'logs').iterdir())}")
