"""Unit-tier fixtures: a fake machine and CFS tree in a temp dir, and an in-process CLI runner."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import pytest

from entrypoint.cli import main
from tests.support.fakehosts import plain_vm
from tests.support.synthetic import make_assets_tree, make_openpi_tree

FAKE_BIN = Path(__file__).parent / "bin"
UNIT_TIMEOUT_S = 120  # the whole unit tier takes well under a minute; one test stuck this long is a hang


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The hook sees every collected test (image tier too): bound only the ones in this folder."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@dataclass
class World:
    """A temp machine: `host` is the VLA_HOST_ROOT tree, `assets` the CFS openpi-assets root, `openpi` the code."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> Path:
        return self.root / "host"

    @property
    def assets(self) -> Path:
        return self.root / "assets"

    @property
    def openpi(self) -> Path:
        return self.root / "openpi"

    @property
    def experiment(self) -> Path:
        return self.assets / "checkpoints" / "pi05_libero" / "pi05_libero_pytorch"

    def gpus(self, count: int) -> None:
        dev = self.host / "dev"
        dev.mkdir(parents=True, exist_ok=True)
        for old in dev.glob("nvidia[0-9]*"):
            old.unlink()
        for i in range(count):
            (dev / f"nvidia{i}").touch()

    def tione(self, nodes: int = 2, per_node: int = 8, rank: int = 0, **extra: str) -> dict[str, str]:
        """TI-ONE's DDP variables for node `rank` of a `nodes` x `per_node` job."""
        hosts = [f"10.0.0.{i + 1}:{per_node}" for i in range(nodes)]
        values = {
            "GPU_NUM_PER_NODE": str(per_node),
            "WORLD_SIZE": str(nodes),
            "RANK": str(rank),
            "INDEX": str(rank),
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "23456",
            "GPU_NUM": str(nodes * per_node),
            "NODE_LIST": ",".join(hosts),
        }
        values.update(extra)
        return values

    def cli(self, *args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> Result:
        """Run `vla-entrypoint ARGS` in this process with exactly the world's environment plus `env`."""
        full = {**self.env, **(env or {})}
        for name in drop:
            full.pop(name, None)
        out, err = io.StringIO(), io.StringIO()
        with (
            mock.patch.dict(os.environ, full, clear=True),
            mock.patch.object(tempfile, "tempdir", None),  # the temp dir comes from this call's TMPDIR, then back
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main(list(args))
        return Result(code, out.getvalue(), err.getvalue())

    def spawn(self, argv: tuple[str, ...], env: Mapping[str, str]) -> subprocess.Popen[str]:
        """`python -m entrypoint ARGV` started in the background with exactly `env` (the caller builds it from
        the world's), in the world's folder; stdout and stderr merged, as text, stdin closed."""
        return subprocess.Popen(
            [sys.executable, "-m", "entrypoint", *argv],
            env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
        )

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Every path under the world (but the HOME cache) with size and mtime, to prove nothing changed. The TMPDIR
        folder's own time is left out: Python's `tempfile` proves the folder writable with a file it removes at
        once; what stays inside it counts."""
        state = {}
        for path in sorted(self.root.rglob("*")):
            if "home" in path.relative_to(self.root).parts[:1] or path == self.root / "tmp":
                continue
            try:
                stat = path.lstat()
            except OSError:
                continue
            state[str(path)] = (stat.st_size, stat.st_mtime_ns)
        return state


@pytest.fixture
def world(tmp_path: Path) -> World:
    """A complete, valid single-node world with 8 GPUs, an ordinary VM network (no RDMA) and the seed's assets. Its
    own HOME and TMPDIR keep what the launcher writes there (TACO's default prefix, caches) inside the world: tests
    running side by side share nothing, and nothing is left in the machine's /tmp."""
    w = World(tmp_path)
    plain_vm(w.host)
    make_assets_tree(w.assets)
    make_openpi_tree(w.openpi)
    w.gpus(8)
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    w.env = {
        "PATH": f"{FAKE_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "LANG": "C.UTF-8",
        "VLA_HOST_ROOT": str(w.host),
        "VLA_ASSETS_ROOT": str(w.assets),
        "VLA_OPENPI_DIR": str(w.openpi),
        "VLA_BAKED_JOB_FILE": str(tmp_path / "no-baked-job.yaml"),
        "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"),
        "VLA_TACO": "off",  # TACO has its own tests (test_taco.py); the default wheel is cp312-only
        "VLA_HEALTH": "off",  # the node health gate has its own tests (test_health_*.py): no NVML here
    }
    return w
