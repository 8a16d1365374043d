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
    "plan": {"core", "inspect", "fabric", "taco"},
    "launch": {"core", "inspect", "fabric", "taco", "plan"},
    "cli": {"core", "inspect", "fabric", "taco", "net", "fetch", "launch", "plan"},
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
# Narrow exceptions, each with its reason.
PURE_EXCEPTIONS = {
    # storage's writability probe creates and removes one temporary file inside the checkpoint folder.
    ("inspect/storage.py", "os.remove"),
    ("inspect/storage.py", "os.unlink"),
    # resume.set_aside renames incomplete steps on the way to launch (called from launch/ only).
    ("inspect/resume.py", "os.rename"),
    ("inspect/resume.py", "os.replace"),
    # patch.apply_patch runs openpi's script on the way to launch (called from launch/ only).
    ("inspect/patch.py", "subprocess"),
    # fabric.raise_memlock sets this process's limit on the way to launch (called from launch/ only).
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _package_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imports(path: Path) -> set[str]:
    """Every `entrypoint.X` package this module imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "entrypoint":
            parts = node.module.split(".")
            if len(parts) > 1:
                found.add(parts[1])
            else:  # `from entrypoint import X`
                found.update(alias.name for alias in node.names if alias.name != "__version__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "entrypoint" and len(parts) > 1:
                    found.add(parts[1])
    return found


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
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            name = f"{node.func.value.id}.{node.func.attr}"
            if name in SIDE_EFFECTS:
                used.add(name)
    return used


@pytest.mark.parametrize(
    "path", [p for p in _modules() if _package_of(p) in PURE], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_inspection_code_starts_nothing_and_writes_nothing(path: Path) -> None:
    relative = str(path.relative_to(PACKAGE))
    effects = {name for name in _calls(path) & SIDE_EFFECTS if (relative, name) not in PURE_EXCEPTIONS}
    assert not effects, f"{relative} is inspection code but calls {sorted(effects)}; move the action to launch/"


def test_the_rules_are_written_where_a_newcomer_looks() -> None:
    text = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    for package in ("core/", "inspect/", "fabric/", "taco/", "net/", "fetch/", "launch/", "plan.py", "cli.py"):
        assert package in text
