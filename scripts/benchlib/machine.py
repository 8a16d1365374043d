"""Facts about the machine a benchmark ran on, and helpers to run commands."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def sh(
    cmd: Sequence[str], check: bool = False, timeout: float | None = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing text output."""
    return subprocess.run(
        list(cmd), capture_output=True, text=True, errors="replace", check=check, timeout=timeout, **kwargs
    )


def out(cmd: Sequence[str]) -> str:
    try:
        result = sh(cmd, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _hypervisor() -> str:
    if shutil.which("systemd-detect-virt"):
        virt = out(["systemd-detect-virt", "--vm"])
        if virt and virt != "none":
            return f"{virt} virtual machine"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    return "a virtual machine (cpuinfo: hypervisor flag)" if " hypervisor" in flags else "none detected"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return None


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def filesystem(path: Path) -> str:
    """`ext4 on /dev/vda` for the file system holding `path`."""
    line = out(["df", "--output=fstype,source", str(path)]).splitlines()
    return " on ".join(line[-1].split()) if len(line) >= 2 else "unknown"


MEASURED_PATHS = ("entrypoint", "Dockerfile", "pyproject.toml")  # what a benchmark's figures depend on


def uncommitted_changes() -> bool:
    """True when the measured code (MEASURED_PATHS) differs from HEAD."""
    status = ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--", *MEASURED_PATHS]
    return bool(out(status))


def git_revision() -> str:
    rev = out(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    if not rev:
        return "unknown"
    dirty = uncommitted_changes()
    return rev + (" + uncommitted changes in entrypoint/, Dockerfile or pyproject.toml" if dirty else "")


def refuse_uncommitted(target: Path, allowed: bool) -> None:
    """Exit 2 before measuring when figures for `target` would describe code that no commit holds."""
    if uncommitted_changes() and not allowed:
        raise SystemExit(
            f"refusing to write {target}: entrypoint/, Dockerfile or pyproject.toml have uncommitted changes, so the "
            "figures would describe code no commit holds; commit first, or pass --allow-uncommitted for a trial run"
        )


def docker_facts() -> dict[str, str]:
    if not shutil.which("docker"):
        return {}
    info = out(
        [
            "docker",
            "info",
            "--format",
            "{{.ServerVersion}}|{{.Driver}}|{{.CgroupDriver}}|{{.CgroupVersion}}|{{.DefaultRuntime}}",
        ]
    )
    parts = info.split("|") if info else []
    facts = {}
    if len(parts) == 5:
        facts = {
            "docker": parts[0],
            "storage driver": parts[1],
            "cgroup": f"{parts[2]} v{parts[3]}",
            "runtime": parts[4],
        }
    buildx = out(["docker", "buildx", "version"]).split()
    if len(buildx) >= 2:
        facts["buildx"] = buildx[1]
    return facts


def running_containers() -> int:
    text = out(["docker", "ps", "-q"]) if shutil.which("docker") else ""
    return len(text.split()) if text else 0


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def facts(tree_dir: Path | None = None) -> dict[str, str]:
    mem = _memory_gb()
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": f"{_cpu_model()}, {os.cpu_count()} logical CPUs",
        "memory": f"{mem:.1f} GB" if mem else "unknown",
        "virtualization": _hypervisor(),
        "os": f"{_os_name()}, kernel {platform.release()}",
        "python (host)": f"{platform.python_version()} ({sys.executable})",
    }
    if tree_dir is not None:
        data["asset tree file system"] = filesystem(tree_dir)
    data.update(docker_facts())
    data["revision"] = git_revision()
    data["load average at start"] = load()
    data["other containers running at start"] = str(running_containers())
    return data
