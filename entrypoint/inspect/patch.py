"""openpi's transformers patch: applied only when absent, in the seed's log order.

The patch is present when `transformers/models/siglip/check.py` exists. The transformers package is located
with `importlib.util.find_spec`, which does not import it (importing transformers takes seconds).
"""

from __future__ import annotations

import importlib.util
import subprocess
from dataclasses import dataclass
from pathlib import Path

PATCH_SCRIPT = "install_transformers_replace.sh"
MARKER = Path("models") / "siglip" / "check.py"


@dataclass(frozen=True)
class PatchState:
    """`status`: present | apply | unavailable (no script) | no-transformers."""

    status: str
    transformers_dir: Path | None
    script: Path

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "transformers_dir": str(self.transformers_dir) if self.transformers_dir else None,
            "script": str(self.script),
        }


def transformers_dir() -> Path | None:
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def patch_state(openpi_dir: Path, package_dir: Path | None) -> PatchState:
    script = openpi_dir / PATCH_SCRIPT
    if package_dir is None:
        return PatchState("no-transformers", None, script)
    if (package_dir / MARKER).is_file():
        return PatchState("present", package_dir, script)
    return PatchState("apply" if script.is_file() else "unavailable", package_dir, script)


def apply_patch(state: PatchState, openpi_dir: Path) -> tuple[bool, str]:
    """Run the base image's patch script (only for status `apply`); return (ok, its combined output)."""
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
