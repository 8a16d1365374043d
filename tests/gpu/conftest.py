"""GPU tier: runs only where an NVIDIA GPU is present (the lent GPU machine); skipped elsewhere."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.synthetic import make_assets_tree

REPO = Path(__file__).resolve().parents[2]
STANDIN_OPENPI = REPO / "tests" / "standin" / "workspace" / "openpi"
NGC_ENTRYPOINT = Path("/opt/nvidia/nvidia_entrypoint.sh")


def pytest_collection_modifyitems(config, items):
    has_gpu = os.path.exists("/dev/nvidia0") and shutil.which("nvidia-smi") is not None
    for item in items:
        if "tests/gpu/" in str(item.fspath):
            item.add_marker(pytest.mark.gpu)
            if not has_gpu:
                item.add_marker(
                    pytest.mark.skip(reason="no NVIDIA GPU on this machine (GPU tier runs on the lent GPU machine)")
                )


@pytest.fixture
def gpu_env(tmp_path) -> dict[str, str]:
    """One single-GPU node described by torchrun's `PET_*` variables, the stand-in trainer, a synthetic CFS tree.
    Not TI-ONE's variables: the tree lies in a temp folder on the machine's own disk, which a TI-ONE job refuses
    (the storage row is missing); outside TI-ONE that is a warning."""
    assets = make_assets_tree(tmp_path / "openpi-assets", episodes=4)
    return {
        **os.environ,
        "PET_NNODES": "1",
        "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": "1",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": "29511",
        "VLA_ASSETS_ROOT": str(assets),
        "VLA_OPENPI_DIR": str(STANDIN_OPENPI),
        "VLA_TACO": "off",
        "VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"),
        # the repository first, then what the machine's PYTHONPATH holds (scripts/gpu-tier puts tensorboardX there)
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
