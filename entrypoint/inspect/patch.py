"""openpi's transformers patch: applied only when absent, in the seed's log order.

The patch is present when `transformers/models/siglip/check.py` exists. The transformers package is located
with `importlib.util.find_spec`, which does not import it (importing transformers takes seconds).
"""

from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

PATCH_SCRIPT = "install_transformers_replace.sh"
MARKER = Path("models") / "siglip" / "check.py"


class PatchStatus(StrEnum):
    PRESENT = "present"  # the marker file exists: nothing to do
    APPLY = "apply"  # absent, and openpi's script will apply it before training
    UNAVAILABLE = "unavailable"  # absent, and openpi ships no script
    NO_TRANSFORMERS = "no-transformers"  # transformers is not installed


@dataclass(frozen=True)
class PatchState:
    """Whether openpi's transformers patch is in place, where transformers lives, and the script that applies it."""

    status: PatchStatus
    transformers_dir: Path | None
    script: Path

    def to_json(self) -> dict[str, object]:
        return {
            "status": str(self.status),
            "transformers_dir": str(self.transformers_dir) if self.transformers_dir else None,
            "script": str(self.script),
        }


def transformers_dir() -> Path | None:
    """Where the installed transformers package lives (without importing it); None when it is not installed."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def patch_state(openpi_dir: Path, package_dir: Path | None) -> PatchState:
    script = openpi_dir / PATCH_SCRIPT
    if package_dir is None:
        return PatchState(PatchStatus.NO_TRANSFORMERS, None, script)
    if (package_dir / MARKER).is_file():
        return PatchState(PatchStatus.PRESENT, package_dir, script)
    return PatchState(PatchStatus.APPLY if script.is_file() else PatchStatus.UNAVAILABLE, package_dir, script)


def apply_patch(state: PatchState, openpi_dir: Path) -> tuple[bool, str]:
    """Run the base image's patch script (only for status APPLY); return (ok, its combined output)."""
    result = subprocess.run(
        ["bash", str(state.script)],
        cwd=openpi_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        check=False,
    )
    ok = result.returncode == 0 and state.transformers_dir is not None and (state.transformers_dir / MARKER).is_file()
    return ok, result.stdout
