"""Wheels: what a wheel's file name promises, whether this interpreter can use it, and installing one into a
folder of its own (`pip install --target`), as the image build and the start-time install both do.

Compatibility is decided from the file name alone (PEP 427 tags against `packaging.tags.sys_tags()`), so a
wheel for another Python is refused before anything is downloaded. An install folder carries a `WHEEL.json`
record ({"file", "sha256"}) naming the wheel it came from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from entrypoint.core.messages import Text
from entrypoint.core.oserror import os_error_text
from entrypoint.taco.messages import MESSAGES as M

RECORD = "WHEEL.json"


@dataclass(frozen=True)
class WheelName:
    """A parsed wheel file name: distribution (canonical), version and the tags it is built for."""

    file: str
    name: str
    version: str
    tags: frozenset[Tag]

    @property
    def tag_text(self) -> str:
        return ".".join(sorted(str(t) for t in self.tags))


def parse_wheel_name(file: str) -> WheelName:
    """Parse `name-version[-build]-python-abi-platform.whl`; raises ValueError with the reason."""
    try:
        name, version, _build, tags = parse_wheel_filename(file)
    except InvalidWheelFilename as error:
        raise ValueError(str(error)) from None
    return WheelName(file, canonicalize_name(name), str(version), tags)


def interpreter_tags() -> list[Tag]:
    """The running interpreter's tags, most specific first."""
    return list(sys_tags())


def describe_interpreter(tags: Iterable[Tag]) -> Text:
    """`CPython 3.13 (cp313-cp313-manylinux_2_41_x86_64, …)` from an interpreter's tag list."""
    tags = list(tags)
    if not tags:
        return M("interpreter-no-tags")
    first = tags[0]
    version = ""
    if first.interpreter[:2] in ("cp", "pp") and first.interpreter[2:].isdigit():
        digits = first.interpreter[2:]
        version = f"{'CPython' if first.interpreter.startswith('cp') else 'PyPy'} {digits[0]}.{digits[1:]}"
    return M("interpreter", name=version or first.interpreter, tag=first)


def fits(wheel: WheelName, tags: Iterable[Tag]) -> bool:
    """True when the interpreter accepts at least one of the wheel's tags."""
    return not wheel.tags.isdisjoint(tags)


def install(
    wheel: Path,
    target: Path,
    env: Mapping[str, str],
    python: str = sys.executable,
    timeout_s: float = 600,
    output_chars: int = 800,
) -> Text | None:
    """`pip install --no-deps --no-cache-dir --no-index --target TARGET WHEEL` with `python`.

    Installs into a sibling temp folder first and swaps it in, so `target` is either the old content or the
    complete new one. Returns None when installed, else why not (with the last `output_chars` of pip's output).
    """
    staging = target.with_name(f".{target.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        python,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-cache-dir",
        "--no-index",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
        "--target",
        str(staging),
        str(wheel),
    ]
    pip_env = {**env, "PIP_ROOT_USER_ACTION": "ignore", "PIP_NO_INPUT": "1"}
    pip_env.pop("PIP_TARGET", None)
    try:
        result = subprocess.run(command, env=pip_env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        return M("pip-timeout", seconds=timeout_s)
    except OSError as error:
        return M("pip-cannot-run", python=python, error=os_error_text(error))
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        output = (result.stdout + result.stderr).strip()[-output_chars:]
        code = result.returncode
        return M("pip-exit-output", code=code, output=output) if output else M("pip-exit", code=code)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return None


def write_record(prefix: Path, file: str, sha256: str) -> None:
    """Record which wheel `prefix` holds."""
    (prefix / RECORD).write_text(json.dumps({"file": file, "sha256": sha256}, indent=2) + "\n", encoding="utf-8")


def read_record(prefix: Path) -> dict[str, str] | None:
    """`prefix`'s record, or None when it is missing or unreadable."""
    try:
        data = json.loads((prefix / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("file"), str) and isinstance(data.get("sha256"), str):
        return {"file": data["file"], "sha256": data["sha256"]}
    return None


def tree_size(path: Path) -> int:
    """Bytes of the regular files under `path`."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
