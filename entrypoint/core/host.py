"""The one object that reads the machine: environment variables and the host's `/sys`, `/proc`, `/dev`, `/etc`.

`VLA_HOST_ROOT` (default `/`) prefixes every read of those trees, so tests and demos point a `Host` at a fake
machine built in a temporary directory. Nothing here writes; unreadable or garbage files read as absent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_GPU_DEV = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class Host:
    """A read-only view of one machine: `env` is its environment, `root` the prefix for system files."""

    env: Mapping[str, str] = field(default_factory=dict)
    root: Path = Path("/")

    @classmethod
    def current(cls, env: Mapping[str, str] | None = None) -> Host:
        env = dict(os.environ if env is None else env)
        return cls(env=env, root=Path(env.get("VLA_HOST_ROOT") or "/"))

    def path(self, system_path: str) -> Path:
        """Where an absolute system path (`/sys/...`) lives on this host."""
        return self.root / system_path.lstrip("/")

    def read(self, system_path: str) -> str | None:
        """The stripped text of a system file, or None when it is missing, unreadable or not text."""
        try:
            return self.path(system_path).read_text(encoding="utf-8", errors="strict").strip()
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    def listdir(self, system_path: str, prefix: str | tuple[str, ...] = "") -> list[str]:
        """Sorted entries of a system directory (only those starting with `prefix`, when given); empty when it is
        missing or unreadable."""
        try:
            names = os.listdir(self.path(system_path))
        except OSError:
            return []
        return sorted(name for name in names if name.startswith(prefix)) if prefix else sorted(names)

    def exists(self, system_path: str) -> bool:
        return os.path.lexists(self.path(system_path))

    def gpu_count(self) -> int:
        """GPUs this container can use: `/dev/nvidiaN` nodes, else `/proc/driver/nvidia/gpus/*` entries.

        Device nodes are preferred because a container sees only its allocated GPUs there, while the proc
        tree may list every GPU of the host. No tool (nvidia-smi) is run.
        """
        devices = [name for name in self.listdir("/dev") if _GPU_DEV.match(name)]
        if devices:
            return len(devices)
        return len(self.listdir("/proc/driver/nvidia/gpus"))


def process_age_s() -> float | None:
    """Seconds since this process was started (interpreter start-up and imports included), from /proc."""
    try:
        stat = Path("/proc/self/stat").read_text()
        started = int(stat[stat.rfind(")") + 2 :].split()[19]) / os.sysconf("SC_CLK_TCK")
        return round(float(Path("/proc/uptime").read_text().split()[0]) - started, 3)
    except (OSError, ValueError, IndexError):
        return None
