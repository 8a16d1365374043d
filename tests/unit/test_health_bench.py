"""Smoke run of scripts/bench_health.py against the fakes, so CI exercises it: both tiers timed, the figures shown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import health as fake

REPO = Path(__file__).resolve().parents[2]


def test_bench_health_times_both_tiers(tmp_path: Path) -> None:
    python, answer = fake.active_python(tmp_path / "python", fake.figures(2))
    env = fake.child_env(tmp_path / "nvml", fake.node(2)) | answer
    command = [
        sys.executable,
        "-m",
        "scripts.bench_health",
        "--reps",
        "2",
        "--active-reps",
        "1",
        "--python",
        str(python),
    ]
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "| passive tier, child process (as the launcher runs it) |" in done.stdout
    assert "| active tier, child process (wall) |" in done.stdout and "| 1 | NVIDIA H200 | 780.0 |" in done.stdout
    assert "Probe: ok through nvml, driver 580.159.04, 2 GPU(s)" in " ".join(done.stdout.split())
