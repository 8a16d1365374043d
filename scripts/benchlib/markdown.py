"""docs/benchmarks.md: sections between markers, so that each producer rewrites only its own sections.

A section is everything between `<!-- bench:NAME begin -->` and `<!-- bench:NAME end -->`. `update` replaces
the sections it is given and leaves every other line of the file as it is; a section whose markers are missing
is inserted before the next known section that exists (order: ORDER), else appended. Placeholders (the TACO and
GPU sections, written by others) are inserted only when their markers are absent and are never overwritten.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

ORDER = ("intro", "machine", "startup", "assets", "image", "fetch", "taco", "gpu")


def begin(name: str) -> str:
    return f"<!-- bench:{name} begin -->"


def end(name: str) -> str:
    return f"<!-- bench:{name} end -->"


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- bench:{re.escape(name)} begin[^\n]*-->\n.*?<!-- bench:{re.escape(name)} end -->\n?", re.S)


def block(name: str, body: str) -> str:
    return f"{begin(name)}\n{body.rstrip()}\n{end(name)}\n"


def sections_in(text: str) -> list[str]:
    return re.findall(r"<!-- bench:([\w.-]+) begin", text)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header))] + [line(r) for r in rows])


def update(text: str, sections: Mapping[str, str], placeholders: Mapping[str, str] = {}) -> str:
    """Return `text` with `sections` replaced or inserted and `placeholders` inserted where absent."""
    if not text.strip():
        text = ""
    for name, body in list(sections.items()) + [(n, b) for n, b in placeholders.items() if n not in sections]:
        is_placeholder = name not in sections
        found = _pattern(name).search(text)
        if found:
            if not is_placeholder:
                text = text[: found.start()] + block(name, body) + text[found.end() :]
            continue
        text = _insert(text, name, block(name, body))
    return text


def _insert(text: str, name: str, new: str) -> str:
    present = sections_in(text)
    later = ORDER[ORDER.index(name) + 1 :] if name in ORDER else ()
    for other in later:
        if other in present:
            at = text.index(f"<!-- bench:{other} begin")
            return text[:at] + new + "\n" + text[at:]
    return (text.rstrip("\n") + "\n\n" + new) if text.strip() else new


def update_file(path: Path, sections: Mapping[str, str], placeholders: Mapping[str, str] = {}) -> None:
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(update(old, sections, placeholders), encoding="utf-8")


def write_section(path: Path, name: str, body: str) -> None:
    """Replace (or append) the one section `name` of the Markdown file at `path`, leaving every other line."""
    update_file(path, {name: body})


def add_write_options(parser: argparse.ArgumentParser) -> None:
    """`--write FILE` and `--allow-uncommitted`, as every section-owning benchmark script takes them."""
    parser.add_argument("--write", type=Path, help="put the section into this Markdown file")
    parser.add_argument(
        "--allow-uncommitted", action="store_true", help="write figures of uncommitted code (trial runs only)"
    )
