"""Which train configs openpi knows, so a misspelt `train_config` is refused before anything is looked up under it.

openpi's trainer takes its config by name from `_CONFIGS` in `src/openpi/training/config.py`: `TrainConfig(name=...)`
entries there and in the `openpi.training` modules it imports (`training/misc/*_config.py`). This module reads those
files as source text with `ast` (bounded in size and in the number of modules; nothing of openpi is imported or run)
and collects every `TrainConfig(...)` call's literal `name`. Without an openpi tree (the dev machine), the names of
openpi's release (`RELEASED`) stand in, and the finding says the name was not checked against the image's openpi.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from entrypoint.core.errors import ExitCode
from entrypoint.core.files import FileRefused, describe, read_text
from entrypoint.core.findings import Finding, failed, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.settings import Settings
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import joined, shown, verbatim

CONFIG_MODULE = "openpi.training.config"
SOURCE_LIMIT = 1 << 20  # openpi's config.py is about 45 KB
MODULE_LIMIT = 16  # modules read in all: config.py and the `openpi.training` modules it imports
_CONFIG_CALL = "TrainConfig"
_CLOSEST = 3

# openpi's train config names at commit 15a9616 (`config.py` and `training/misc/`), for a machine without openpi.
RELEASED = frozenset(
    {
        "pi0_aloha",
        "pi05_aloha",
        "pi0_aloha_towel",
        "pi0_aloha_tupperware",
        "pi0_droid",
        "pi0_fast_droid",
        "pi05_droid",
        "pi0_libero",
        "pi0_libero_low_mem_finetune",
        "pi0_fast_libero",
        "pi0_fast_libero_low_mem_finetune",
        "pi05_libero",
        "pi0_aloha_pen_uncap",
        "pi05_aloha_pen_uncap",
        "pi0_fast_full_droid_finetune",
        "pi05_full_droid_finetune",
        "pi05_droid_finetune",
        "pi0_aloha_sim",
        "debug",
        "debug_restore",
        "debug_pi05",
        "paligemma_binning_droid",
        "paligemma_fast_droid",
        "paligemma_fast_specialist_droid",
        "paligemma_vq_droid",
        "paligemma_diffusion_droid",
        "pi05_droid_jointpos_polaris",
        "pi0_fast_droid_jointpos_polaris",
        "pi0_droid_jointpos_polaris",
        "pi0_droid_jointpos_100k_polaris",
        "paligemma_binning_droid_jointpos",
    }
)


@dataclass(frozen=True)
class Unread:
    """Why openpi's config names could not be read: `path` is the file, `reason` what was wrong with it."""

    path: Path
    reason: Text


def module_path(openpi_dir: Path, module: str) -> Path:
    """Where a module of openpi's `src/` layout lives."""
    return openpi_dir.joinpath("src", *module.split(".")).with_suffix(".py")


def config_names(openpi_dir: Path) -> frozenset[str] | Unread:
    """Every literal `TrainConfig(name=...)` in openpi's config module and the `openpi.training` modules it imports
    (at most `MODULE_LIMIT` files of at most `SOURCE_LIMIT` bytes each); `Unread` when config.py cannot be read,
    parsed, or names no config."""
    first = module_path(openpi_dir, CONFIG_MODULE)
    names: set[str] = set()
    queue, seen, read = [CONFIG_MODULE], {CONFIG_MODULE}, 0
    while queue and read < MODULE_LIMIT:
        module = queue.pop(0)
        read += 1
        path = module_path(openpi_dir, module)
        tree = _parse(path)
        if isinstance(tree, Unread):
            if module == CONFIG_MODULE:
                return tree
            continue  # an imported module openpi itself could not load either: config.py says more
        names.update(_names(tree))
        for imported in _training_imports(tree):
            if imported not in seen:
                seen.add(imported)
                queue.append(imported)
    return frozenset(names) if names else Unread(first, M("train-configs-none", call=_CONFIG_CALL))


def _parse(path: Path) -> ast.Module | Unread:
    try:
        text = read_text(path, SOURCE_LIMIT)
    except FileRefused as refused:
        return Unread(path, describe(refused))
    try:
        return ast.parse(text, str(path))
    except SyntaxError as error:
        return Unread(path, M("train-configs-syntax", line=error.lineno or 0, error=shown(error.msg or "", 80)))
    except (ValueError, RecursionError, MemoryError):
        return Unread(path, M("train-configs-unparsable"))


def _names(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if called != _CONFIG_CALL:
            continue
        for keyword in node.keywords:
            if (
                keyword.arg == "name"
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
            ):
                yield keyword.value.value


def _training_imports(tree: ast.Module) -> Iterator[str]:
    """The `openpi.training.*` modules a module imports at its top level or inside functions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        yield from (m for m in modules if m.startswith("openpi.training.") and m != CONFIG_MODULE)


def closest(name: str, names: frozenset[str]) -> list[str]:
    """The names nearest a misspelt one, best first."""
    return difflib.get_close_matches(name, sorted(names), n=_CLOSEST, cutoff=0.6)


def _listed(names: list[str]) -> Text:
    return joined(verbatim(n) for n in names)


def check_train_config(settings: Settings) -> Finding:
    """`settings.train-config`: pass when openpi's config module names the config; fail (exit 2) naming the closest
    names when it does not; when openpi's names cannot be read here, a note (a released name) or a warning."""
    name, where = settings.train_config, settings.where("train_config")
    found = config_names(Path(settings.openpi_dir))
    if isinstance(found, Unread):
        if name in RELEASED:
            what = M("train-config-unchecked-released", name=name, path=found.path, reason=found.reason)
            return passed("settings.train-config", what, where)
        near = closest(name, RELEASED)
        suggestion = M("train-config-closest", names=_listed(near)) if near else M("train-config-no-closest")
        what = M("train-config-unchecked", name=name, where=where, path=found.path, reason=found.reason)
        return warned("settings.train-config", what, M("train-config-unchecked-fix", where=where, closest=suggestion))
    source = module_path(Path(settings.openpi_dir), CONFIG_MODULE)
    if name in found:
        what = M("train-config-known", name=name, count=len(found), path=source)
        return passed("settings.train-config", what, where)
    near = closest(name, found)
    suggestion = M("train-config-closest", names=_listed(near)) if near else M("train-config-no-closest")
    what = M("train-config-unknown", name=shown(name, 80), where=where, path=source, count=len(found))
    fix = M("train-config-unknown-fix", where=where, closest=suggestion, example=near[0] if near else min(found))
    return failed("settings.train-config", what, fix, where, ExitCode.JOB_MISSPECIFIED)
