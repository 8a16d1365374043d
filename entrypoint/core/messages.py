"""Every word a user reads: one catalogue of bilingual templates and one renderer.

Each package declares its messages once, as a `Catalogue` section (`Catalogue("fabric", {...})`): an id maps to
an English and a Chinese `str.format` template with the same placeholders. Code asks a section for a `Text`
(`MESSAGES("no-rdma", device=name)`), never writes user-facing prose inline. `Catalogue.registry` holds every
template of every imported section, so a test can check all pairs at once.

`VLA_LANG` (`en`, `zh` or `both`) picks what is printed; without it a `zh*` `LANG` means Chinese, an English
`LANG` means English, and a container's usual `C`/`POSIX`/unset locale means both, because TI-ONE users mostly
read Chinese while containers rarely set a locale. Output that cannot hold Chinese (`PYTHONIOENCODING=ascii`, a
Latin-1 terminal) gets English alone, whatever was asked for: escaped Chinese would be unreadable. `render` is
the one way a `Text` becomes output; JSON flattens a `Text` one way only (`flatten`: `<key>` English, `<key>_zh`
Chinese).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar


class Lang(StrEnum):
    EN = "en"
    ZH = "zh"
    BOTH = "both"


@dataclass(frozen=True)
class Text:
    """One message in both languages, ready to print."""

    en: str
    zh: str

    def to_json(self) -> dict[str, str]:
        return {"en": self.en, "zh": self.zh}


@dataclass(frozen=True)
class Template:
    """An English and a Chinese `str.format` template."""

    en: str
    zh: str

    def placeholders(self, language: Lang) -> set[str]:
        """The field names a template uses (format specs and conversions ignored)."""
        import string  # the catalogue's tests ask; rendering never does

        text = self.en if language is Lang.EN else self.zh
        return {field.split(".")[0].split("[")[0] for _, field, _, _ in string.Formatter().parse(text) if field}


class Catalogue:
    """One package's messages, registered under `<section>.<id>` in the shared registry."""

    registry: ClassVar[dict[str, Template]] = {}

    def __init__(self, section: str, templates: Mapping[str, tuple[str, str]]) -> None:
        self.section = section
        self.templates = {name: Template(en, zh) for name, (en, zh) in templates.items()}
        for name, template in self.templates.items():
            key = f"{section}.{name}"
            if key in Catalogue.registry and Catalogue.registry[key] != template:
                raise ValueError(f"message {key} is declared twice")
            Catalogue.registry[key] = template

    def __call__(self, name: str, /, **fields: object) -> Text:
        """The message `name` with `fields` filled in, in both languages; a field that is itself a `Text` gives
        its English to the English template and its Chinese to the Chinese one."""
        template = self.templates[name]
        en = {k: v.en if isinstance(v, Text) else v for k, v in fields.items()}
        zh = {k: v.zh if isinstance(v, Text) else v for k, v in fields.items()}
        return Text(template.en.format(**en), template.zh.format(**zh))


def language(env: Mapping[str, str] | None = None, stream: object | None = None) -> Lang:
    """`VLA_LANG` when it names a language, else from `LC_ALL`/`LANG`, else both; English alone when `stream`
    (default: `sys.stdout`) cannot encode Chinese."""
    if not shows_chinese(sys.stdout if stream is None else stream):
        return Lang.EN
    env = os.environ if env is None else env
    chosen = env.get("VLA_LANG", "").strip().lower()
    if chosen in ("en", "zh", "both"):
        return Lang(chosen)
    locale = (env.get("LC_ALL") or env.get("LANG") or "").lower()
    if locale.startswith("zh"):
        return Lang.ZH
    if locale.startswith("en"):
        return Lang.EN
    return Lang.BOTH


def shows_chinese(stream: object) -> bool:
    """Whether text written to `stream` can hold Chinese: true for a stream without an encoding (a `StringIO`)."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        "中文".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def render(text: Text, lang: Lang | str, *, lead: str = "", indent: str | None = None) -> str:
    """The text as printed, without a final newline: `lead` starts the first line; with both languages the
    Chinese follows on a line of its own, starting with `indent` (default: blanks as wide as `lead`)."""
    if lang == Lang.EN:
        return lead + text.en
    if lang == Lang.ZH:
        return lead + text.zh
    return f"{lead}{text.en}\n{' ' * len(lead) if indent is None else indent}{text.zh}"


def flatten(text: Text | None, key: str) -> dict[str, str | None]:
    """A `Text` as JSON fields: `key` in English and `key_zh` in Chinese (None when there is no text)."""
    return {key: text.en if text else None, f"{key}_zh": text.zh if text else None}


def joined(parts: Iterable[Text], separator: str = ", ", separator_zh: str | None = None) -> Text:
    """Several texts as one list, each language joined with its own separator (`separator_zh` defaults to
    `separator`)."""
    items = list(parts)
    zh = separator if separator_zh is None else separator_zh
    return Text(separator.join(t.en for t in items), zh.join(t.zh for t in items))
