"""The package's house rules, read from the source: which package may import which, and where side effects live.

The rules are stated in `entrypoint/__init__.py`; these tests keep the code and the statement in step.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "entrypoint"

# package -> the packages of ours it may import (itself always allowed)
ALLOWED = {
    "core": set(),
    "inspect": {"core"},
    "net": {"core"},
    "fabric": {"core", "inspect"},
    "taco": {"core", "inspect", "net"},
    "fetch": {"core", "inspect", "net"},
    "health": {"core", "inspect", "fabric"},
    "plan": {"core", "inspect", "fabric", "taco", "health"},
    "report": {"core", "inspect"},
    "launch": {"core", "inspect", "fabric", "taco", "plan", "health", "report"},
    "cli": {"core", "inspect", "fabric", "taco", "net", "fetch", "launch", "plan", "health", "report"},
    "__main__": {"cli"},
}
# Modules that only inspect: they start no process and change nothing on disk.
PURE = ("core", "inspect", "fabric", "plan")
SIDE_EFFECTS = {
    "subprocess",
    "os.system",
    "os.replace",
    "os.rename",
    "os.remove",
    "os.unlink",
    "os.makedirs",
    "os.mkdir",
    "shutil.move",
    "shutil.rmtree",
    "shutil.copy",
    "shutil.copyfile",
    "os.execv",
    "os.execvpe",
    "os.kill",
}
# Methods that act whatever they are called on (a `Path`, the `resource` module or a stand-in for it).
SIDE_EFFECT_METHODS = {
    ".setrlimit",
    ".write_text",
    ".write_bytes",
    ".unlink",
    ".mkdir",
    ".rmdir",
    ".touch",
    ".symlink_to",
    ".hardlink_to",
}
# Narrow exceptions, each with its reason.
PURE_EXCEPTIONS = {
    # resume.set_aside renames incomplete steps on the way to launch (called from launch/ only).
    ("inspect/resume.py", "os.rename"),
    # memlock.raise_memlock sets this process's locked-memory limit on the way to launch (called from launch/ only).
    ("fabric/memlock.py", ".setrlimit"),
    # storage_probe starts a child that only stats and lists a mount point: a stalled CFS can hang only a child.
    ("inspect/storage_probe.py", "subprocess"),
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _package_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """Every `entrypoint.X` package this module (a file under `root`, the `entrypoint` folder) imports, at any
    depth of the file, relative imports (`from . import x`, `from ..core import y`) included."""
    relative = path.relative_to(root)
    package = ["entrypoint", *relative.parts[:-1]]  # what `from . import` names, for a module and an __init__ alike
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            parts = base + (node.module.split(".") if node.module else [])
            if parts[:1] != ["entrypoint"]:
                continue
            if len(parts) > 1:
                found.add(parts[1])
            else:  # `from entrypoint import X`, `from .. import X`
                found.update(alias.name for alias in node.names if alias.name != "__version__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "entrypoint" and len(parts) > 1:
                    found.add(parts[1])
    return found


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    root = tmp_path / "entrypoint"
    (root / "fetch").mkdir(parents=True)
    module = root / "fetch" / "job.py"
    module.write_text(
        "from . import unpack\nfrom .manifest import Entry\nfrom ..launch import run\nfrom .. import plan\n"
        "from ..core.messages import Text\nimport json\nfrom os import path\n"
    )
    assert _imports(module, root) == {"fetch", "launch", "plan", "core"}
    (root / "__main__.py").write_text("from . import cli\n")
    assert _imports(root / "__main__.py", root) == {"cli"}
    (root / "fetch" / "__init__.py").write_text("from .job import run\nfrom ..net import download\n")
    assert _imports(root / "fetch" / "__init__.py", root) == {"fetch", "net"}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_house_rules(path: Path) -> None:
    package = _package_of(path)
    if package == "__init__":
        return
    forbidden = _imports(path) - ALLOWED[package] - {package}
    assert not forbidden, (
        f"{path.relative_to(PACKAGE)} ({package}/) imports {sorted(forbidden)}; allowed: {sorted(ALLOWED[package])}"
    )


def _calls(path: Path) -> set[str]:
    """Names of side-effecting calls and imports in a module (`subprocess` when imported at all)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Import) and any(a.name == "subprocess" for a in node.names)) or (
            isinstance(node, ast.ImportFrom) and node.module == "subprocess"
        ):
            used.add("subprocess")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            if f"{receiver}.{node.func.attr}" in SIDE_EFFECTS:
                used.add(f"{receiver}.{node.func.attr}")
            elif f".{node.func.attr}" in SIDE_EFFECT_METHODS:
                used.add(f".{node.func.attr}")
    return used


@pytest.mark.parametrize(
    "path", [p for p in _modules() if _package_of(p) in PURE], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_inspection_code_starts_nothing_and_writes_nothing(path: Path) -> None:
    relative = str(path.relative_to(PACKAGE))
    effects = {name for name in _calls(path) if (relative, name) not in PURE_EXCEPTIONS}
    assert not effects, f"{relative} is inspection code but calls {sorted(effects)}; move the action to launch/"


@pytest.mark.parametrize("module, name", sorted(PURE_EXCEPTIONS))
def test_every_exception_is_still_needed(module: str, name: str) -> None:
    assert _package_of(PACKAGE / module) in PURE, f"{module} is not inspection code: it needs no exception"
    assert name in _calls(PACKAGE / module), f"{module} no longer calls {name}: remove it from PURE_EXCEPTIONS"


def test_the_rules_are_written_where_a_newcomer_looks() -> None:
    text = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    for package in (
        "core/",
        "inspect/",
        "fabric/",
        "taco/",
        "net/",
        "fetch/",
        "health/",
        "launch/",
        "plan.py",
        "cli.py",
    ):
        assert package in text
