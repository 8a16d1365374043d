"""Bilingual user-facing text and the problems that end a command.

Every message a user reads exists in English and Chinese. `VLA_LANG` (`en`, `zh` or `both`) picks what is
printed; without it a `zh*` `LANG` means Chinese, an English `LANG` means English, and a container's usual
`C`/`POSIX`/unset locale means both, because TI-ONE users mostly read Chinese while containers rarely set one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

EXIT_OK = 0
EXIT_JOB_SPEC = 2  # the job is mis-specified: bad YAML, bad variable value, contradictory settings
EXIT_PREFLIGHT = 3  # a preflight check failed: missing/corrupt assets, impossible topology


@dataclass(frozen=True)
class Text:
    """One message in both languages."""

    en: str
    zh: str

    def to_json(self) -> dict[str, str]:
        return {"en": self.en, "zh": self.zh}


def language(env: Mapping[str, str] | None = None) -> str:
    """Return `en`, `zh` or `both` from `VLA_LANG`, else from `LANG`/`LC_ALL`."""
    env = os.environ if env is None else env
    chosen = env.get("VLA_LANG", "").strip().lower()
    if chosen in ("en", "zh", "both"):
        return chosen
    locale = (env.get("LC_ALL") or env.get("LANG") or "").lower()
    if locale.startswith("zh"):
        return "zh"
    if locale.startswith("en"):
        return "en"
    return "both"


def render(text: Text, lang: str) -> str:
    """The text in the chosen language; `both` gives English then Chinese on one line."""
    if lang == "en":
        return text.en
    if lang == "zh":
        return text.zh
    return f"{text.en} / {text.zh}"


class Problem(Exception):
    """A condition that stops the command: what is wrong, where, and the fix. Never shown as a traceback."""

    def __init__(self, code: int, id: str, what: Text, where: str, fix: Text) -> None:
        super().__init__(what.en)
        self.code = code
        self.id = id
        self.what = what
        self.where = where
        self.fix = fix

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "exit_code": self.code,
            "message": self.what.en,
            "message_zh": self.what.zh,
            "where": self.where,
            "hint": self.fix.en,
            "hint_zh": self.fix.zh,
        }

    def render(self) -> str:
        """Both languages, always: this is the message a failed job leaves in its log."""
        return (
            f"vla-entrypoint: error [{self.id}] at {self.where}\n"
            f"  problem: {self.what.en}\n"
            f"  fix:     {self.fix.en}\n"
            f"  错误:    {self.what.zh}\n"
            f"  解决:    {self.fix.zh}"
        )


def job_error(id: str, where: str, what: Text, fix: Text) -> Problem:
    """A mis-specified job (exit 2)."""
    return Problem(EXIT_JOB_SPEC, id, what, where, fix)


def preflight_error(id: str, where: str, what: Text, fix: Text) -> Problem:
    """A failed preflight check (exit 3)."""
    return Problem(EXIT_PREFLIGHT, id, what, where, fix)
