"""The message catalogue: every English/Chinese pair matches, no English slips into Chinese, no prose inline."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import entrypoint
from entrypoint.core.messages import Catalogue, Lang, Template, Text, flatten, language, render

PACKAGE = Path(entrypoint.__file__).resolve().parent
# English fragments that mean a Chinese template was not translated (fields are filled in at run time and
# are not checked here; paths, variables, flags and commands inside a Chinese template are expected).
DENY_IN_CHINESE = (
    "node(s)",
    "process(es)",
    "file(s)",
    "read-only file system",
    "no such file",
    "permission denied",
    "does not exist",
    "not found",
    " or ",
    " and ",
    " the ",
    " is ",
    " not ",
    "please",
    "cannot",
)


def _all_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="entrypoint."):
        if info.name not in ("entrypoint.__main__",):
            names.append(info.name)
    return sorted(names)


@pytest.fixture(scope="module")
def registry() -> dict[str, Template]:
    for name in _all_modules():
        importlib.import_module(name)
    return dict(Catalogue.registry)


def test_the_catalogue_is_in_use(registry: dict[str, Template]) -> None:
    sections = {key.split(".")[0] for key in registry}
    assert {"core", "inspect", "fabric", "taco", "net", "fetch", "launch", "plan"} <= sections, sorted(sections)


def test_each_pair_uses_the_same_placeholders(registry: dict[str, Template]) -> None:
    mismatched = {
        key: (sorted(t.placeholders(Lang.EN)), sorted(t.placeholders(Lang.ZH)))
        for key, t in registry.items()
        if t.placeholders(Lang.EN) != t.placeholders(Lang.ZH)
    }
    assert not mismatched


def test_no_chinese_template_keeps_english_prose(registry: dict[str, Template]) -> None:
    untranslated = {
        key: [phrase for phrase in DENY_IN_CHINESE if phrase in t.zh.lower()] for key, t in registry.items()
    }
    assert not {k: v for k, v in untranslated.items() if v}


def test_no_template_is_empty_or_identical(registry: dict[str, Template]) -> None:
    blank = [k for k, t in registry.items() if not t.en.strip() or not t.zh.strip()]
    untranslated = [k for k, t in registry.items() if t.en == t.zh]
    assert not blank and not untranslated


def _inline_prose(path: Path) -> list[int]:
    """Lines where a `Text(...)` is built from literal prose instead of a catalogue entry."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        is_text = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Text"
        if is_text and any(isinstance(arg, (ast.Constant, ast.JoinedStr)) for arg in node.args):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p.name != "messages.py" and "__pycache__" not in p.parts],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_user_facing_prose_lives_in_the_catalogue(path: Path) -> None:
    assert not _inline_prose(path), f"{path.relative_to(PACKAGE)}: inline Text(...) at lines {_inline_prose(path)}"


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"VLA_LANG": "zh"}, Lang.ZH),
        ({"VLA_LANG": "EN"}, Lang.EN),
        ({"VLA_LANG": "klingon", "LANG": "zh_CN.UTF-8"}, Lang.ZH),
        ({"LANG": "en_US.UTF-8"}, Lang.EN),
        ({"LC_ALL": "zh_TW", "LANG": "en_US"}, Lang.ZH),
        ({"LANG": "C.UTF-8"}, Lang.BOTH),
        ({}, Lang.BOTH),
    ],
    ids=["vla-lang-zh", "vla-lang-case", "bad-vla-lang-falls-back", "lang-en", "lc-all-wins", "c-locale", "unset"],
)
def test_language_choice(env: dict[str, str], expected: Lang) -> None:
    assert language(env) is expected


def test_one_renderer_for_every_shape() -> None:
    text = Text("disk full", "磁盘已满")
    assert render(text, Lang.EN, lead="  FAIL  ") == "  FAIL  disk full"
    assert render(text, Lang.ZH) == "磁盘已满"
    assert render(text, Lang.BOTH, lead="x: ") == "x: disk full\n   磁盘已满"
    assert render(text, Lang.BOTH, lead="x: ", indent="-> ") == "x: disk full\n-> 磁盘已满"
    assert flatten(text, "message") == {"message": "disk full", "message_zh": "磁盘已满"}
    assert flatten(None, "hint") == {"hint": None, "hint_zh": None}


def test_a_section_cannot_redefine_a_message() -> None:
    Catalogue("test-only", {"same": ("a {x}", "甲 {x}")})
    Catalogue("test-only", {"same": ("a {x}", "甲 {x}")})  # importing a module twice is harmless
    with pytest.raises(ValueError, match="declared twice"):
        Catalogue("test-only", {"same": ("b {x}", "乙 {x}")})
    Catalogue.registry.pop("test-only.same")
