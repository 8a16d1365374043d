"""The README's settings table is the user's reference: every setting appears once, with its variable, its flag and
the default the loader really uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

from entrypoint.core.settings import KEYS, Kind

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(
    r"^\| `(?P<name>[a-z0-9_]+)` \| (?P<env>`VLA_[A-Z0-9_]+`|\(YAML only\)) \| (?P<flag>`--[a-z0-9-]+`|—) \| "
    r"(?P<default>[^|]*) \|"
)


def _rows() -> dict[str, list[re.Match[str]]]:
    rows: dict[str, list[re.Match[str]]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            rows.setdefault(match["name"], []).append(match)
    return rows


def _shown(default: object) -> str:
    """How the table writes a default: `value` for scalars, JSON for lists and maps."""
    if default is None:
        return "(unset)"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, list | dict):
        return json.dumps(default)
    return str(default)


def test_every_setting_has_one_row_with_its_variable_and_flag() -> None:
    rows = _rows()
    missing = [key.name for key in KEYS if key.name not in rows]
    assert not missing, f"settings missing from README's table: {missing}"
    for key in KEYS:
        (row,) = rows[key.name]
        expected = ("(YAML only)", "—") if key.kind is Kind.ENV else (f"`{key.env}`", f"`{key.flag}`")
        assert (row["env"], row["flag"]) == expected
    assert set(rows) <= {key.name for key in KEYS}, "README lists settings that do not exist"


def test_defaults_in_the_table_are_the_loaders() -> None:
    """A plain default is written as the loader's value; URLs and long values may be described in words instead."""
    rows = _rows()
    wrong = []
    for key in KEYS:
        written = rows[key.name][0]["default"].strip()
        literal = written.startswith("`") and written.endswith("`") and "://" not in str(key.default)
        if literal and written.strip("`") != _shown(key.default):
            wrong.append(f"{key.name}: README {written}, loader {_shown(key.default)!r}")
    assert not wrong, wrong
