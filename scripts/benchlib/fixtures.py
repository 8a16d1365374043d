"""What the benchmarks run against: synthetic asset trees, the trainer stand-in, the seed's scripts staged for a
run, a wheel served over HTTP from this machine.

The trainer stand-in is a `torchrun` placed first on PATH: its first statement takes `time.time()`, so the
recorded moment is "the trainer's Python is up", the same moment the floor (`python3 -c ...`) records. It writes
{"t", "argv", ...} to $BENCH_TRAINER_STAMP (default /bench/out/trainer.json) and exits 0. A torchrun call that is
not training (no train_pytorch.py in its arguments, e.g. a bandwidth preflight) is handed to the real torchrun.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from scripts.benchlib.machine import REPO
from tests.support.synthetic import make_assets_tree, make_openpi_tree
from tests.support.taco_wheel import build_wheel as build_taco_wheel

CFS = "/home/tione/notebook/embodied-ai/openpi-assets"  # the seed's assets root in the container
OPENPI = "/workspace/openpi"
SEED_DIR = REPO / "scripts" / "bench_seed"
SEED_TACO_URL = (
    "https://taco-train-data-1251001002.cos.ap-shanghai.myqcloud.com/taco-train/"
    "taco_train-0.1.0%2Bnv-cp312-cp312-linux_x86_64.whl"
)
LIBERO_EPISODES = 1693
LIBERO_WEIGHTS = 14 * 10**9

# The first lines of the trainer stand-in and of the floor's `python3 -c`: identical, so the moments match.
STAMP_HEAD = "import time; _t = time.time()\n"
STAMP_WRITE = (
    "import json, os, sys\n"
    "with open(os.environ.get('BENCH_TRAINER_STAMP', '/bench/out/trainer.json'), 'w') as _f:\n"
    "    json.dump({'t': _t, 'mono': time.monotonic(), 'argv': sys.argv[1:], 'cwd': os.getcwd(),\n"
    "               'pid': os.getpid()}, _f)\n"
)
FLOOR_CODE = STAMP_HEAD + STAMP_WRITE

SHIM = f"""#!/usr/bin/env python3
# scripts/bench's torchrun stand-in: records when the trainer process started, then exits 0.
{STAMP_HEAD.strip()}
import os, shutil, sys
if not any(a.endswith("train_pytorch.py") for a in sys.argv[1:]):  # not training: the real torchrun
    here = os.path.dirname(os.path.realpath(__file__))
    rest = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.realpath(p) != here)
    real = shutil.which("torchrun", path=rest)
    if real is None:
        sys.exit("bench torchrun stand-in: no real torchrun on PATH")
    os.execv(real, [real] + sys.argv[1:])
{STAMP_WRITE.strip()}
"""

# Sourced by the (stand-in) NGC entrypoint before it execs the command: the moment the container's shell is up.
HOOK = 'echo "$EPOCHREALTIME" > "${BENCH_HOOK_STAMP:-/bench/out/hook}"\n'

MARK = 'echo "{name} $EPOCHREALTIME" >> "${{BENCH_MARKS:-/bench/out/marks}}"'


def write_shim(folder: Path, host: bool) -> Path:
    """`folder/torchrun`; for host runs also `python`/`pip` where the interpreter's folder lacks them."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "torchrun"
    shim.write_text(SHIM)
    shim.chmod(0o755)
    if host:
        bindir = Path(sys.executable).parent
        for name in ("python", "python3"):
            if not (bindir / name).exists():
                (folder / name).symlink_to(sys.executable)
        if not (bindir / "pip").exists():
            pip = folder / "pip"
            pip.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pip "$@"\n')
            pip.chmod(0o755)
    return shim


def openpi_tree(root: Path) -> Path:
    """A minimal openpi checkout (scripts/train_pytorch.py), enough for `vla-entrypoint check`."""
    return make_openpi_tree(root)


def make_tree(root: Path, episodes: int, weights: int) -> Path:
    """The openpi-assets tree (sparse weights), world-writable so containers of any uid can write logs."""
    if root.exists():
        shutil.rmtree(root)
    make_assets_tree(root, episodes=episodes, weights_size=weights, sparse_weights=True)
    for path in (root, root / "logs", root / "code", root / "checkpoints"):
        path.chmod(0o777)
    return root


def host_openpi(work: Path, tree: Path, code: Path) -> tuple[Path, Path]:
    """For runs outside Docker: a copy of the stand-in openpi tree with the seed's three extra mounts as links,
    and a copy of the stand-in transformers package with openpi's patch already applied (as the image bakes it).
    Returns (openpi dir, the folder to put on PYTHONPATH)."""
    standin = REPO / "tests" / "standin"
    openpi = work / "openpi"
    if openpi.exists():
        shutil.rmtree(openpi)
    shutil.copytree(standin / "workspace" / "openpi", openpi)
    for name, target in (("assets", tree / "assets"), ("checkpoints", tree / "checkpoints"), ("code", code)):
        (openpi / name).symlink_to(target)
    python = work / "python"
    if python.exists():
        shutil.rmtree(python)
    shutil.copytree(standin / "python", python)
    shutil.copytree(
        openpi / "src" / "openpi" / "models_pytorch" / "transformers_replace",
        python / "transformers",
        dirs_exist_ok=True,
    )
    return openpi, python


def stage_seed(code: Path, wheel_url: str, marks: bool, replace: dict[str, str] | None = None) -> Path:
    """Copy the seed's run.sh and train_pytorch.sh into `code` (the CFS code/ folder), pointing TACO_WHL at
    `wheel_url`; with `marks`, each `#@mark NAME` line becomes a timestamp; `replace` rewrites paths."""
    code.mkdir(parents=True, exist_ok=True)
    for name in ("run.sh", "train_pytorch.sh"):
        text = (SEED_DIR / name).read_text(encoding="utf-8").replace(SEED_TACO_URL, wheel_url)
        for old, new in (replace or {}).items():
            text = text.replace(old, new)
        if marks:
            lines = []
            for line in text.splitlines():
                if line.startswith("#@mark "):
                    line = MARK.format(name=line.split(None, 1)[1].strip())
                lines.append(line)
            text = "\n".join(lines) + "\n"
        (code / name).write_text(text, encoding="utf-8")
        (code / name).chmod(0o755)
    return code


def build_wheel(folder: Path) -> Path:
    """A small pure-Python taco_train wheel (py3-none-any, so any stand-in Python installs it) with the real
    one's layout, from the tests' wheel builder; its sitecustomize activates nothing."""
    return build_taco_wheel(
        folder,
        tag="py3-none-any",
        version="0.1.0+bench",
        sitecustomize="# scripts/bench stand-in prelude: activates nothing\n",
    )


def docker_gateway() -> str | None:
    """The host's address on Docker's default bridge (containers reach this machine there)."""
    ip = subprocess.run(
        ["docker", "network", "inspect", "bridge", "-f", "{{range .IPAM.Config}}{{.Gateway}}{{end}}"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if ip:
        return ip
    text = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True).stdout.split()
    if "inet" in text:
        return text[text.index("inet") + 1].split("/")[0]
    return None


class WheelServer:
    """`python3 -m http.server` serving one folder on `address`, in its own process."""

    def __init__(self, folder: Path, address: str, log: Path) -> None:
        with socket.socket() as probe:
            probe.bind((address, 0))
            self.port = probe.getsockname()[1]
        self.address = address
        with open(log, "ab") as output:  # the server process writes to its own copy of the descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "http.server", "--bind", address, str(self.port), "--directory", str(folder)],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection((address, self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"the wheel server on {address} did not start (see {log})") from None
                time.sleep(0.05)

    def url(self, name: str) -> str:
        return f"http://{self.address}:{self.port}/{name}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_marks(path: Path) -> dict[str, float]:
    marks: dict[str, float] = {}
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.rpartition(" ")
            if name and name not in marks:
                marks[name] = float(value)
    except (OSError, ValueError):
        pass
    return marks


def read_float(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def startup_record(logs: Path) -> dict | None:
    """The launcher's start-up record in `logs` (the newest `*.json` that is not an error file)."""
    candidates = [p for p in logs.glob("*.json") if not p.name.endswith(".error.json")] if logs.is_dir() else []
    candidates.sort(key=lambda p: p.stat().st_mtime)
    return read_json(candidates[-1]) if candidates else None


def clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        os.unlink(path)
