"""openpi's transformers patch: whether it is in place, and whether openpi's script can apply it.

The patch is present when `transformers/models/siglip/check.py` exists. The transformers package is located
with `importlib.util.find_spec`, which does not import it (importing transformers takes seconds). Applying it
(`launch.run.apply_patch`, only when absent, in the seed's log order) is launch's.
"""

from __future__ import annotations

import importlib.util
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
