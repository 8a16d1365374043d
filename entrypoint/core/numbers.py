"""Whole numbers in text someone else wrote (variables, system files, file names, logs, HTTP headers): one parser.

Python's `int(text)` raises ValueError past 4300 digits and accepts what no user means as a number (`²`, `١٠`,
`1_000`, blanks inside). `whole_number` takes ASCII digits only, never converts more digits than its `maximum` has
(so a 5000-digit value costs nothing and raises nothing) and returns None for anything out of range, which every
caller reports as such.
"""

from __future__ import annotations

import string

INT64_MAX = 2**63 - 1  # the largest value a C `long`, a torch int64 or a JSON consumer in C holds
_DIGITS = {10: frozenset(string.digits), 16: frozenset(string.hexdigits), 8: frozenset(string.octdigits)}


def whole_number(text: str | None, maximum: int = INT64_MAX, minimum: int = 0, base: int = 10) -> int | None:
    """The number `text` spells in ASCII digits of `base` (10, 16 or 8; blanks around it ignored, no sign, no
    prefix), when it lies within [`minimum`, `maximum`]; None for anything else, including an empty text."""
    if text is None:
        return None
    digits = text.strip()
    if not digits or not _DIGITS[base].issuperset(digits):
        return None
    digits = digits.lstrip("0") or "0"
    if len(digits) > _width(maximum, base):
        return None
    value = int(digits, base)
    return value if minimum <= value <= maximum else None


def leading_number(text: str, maximum: int = INT64_MAX) -> int | None:
    """C's `atoi` on `text` as NCCL reads a list entry: the leading ASCII digits (0 when there are none); None when
    they spell a number over `maximum`."""
    end = 0
    while end < len(text) and text[end] in _DIGITS[10]:
        end += 1
    return whole_number(text[:end], maximum) if end else 0


def _width(maximum: int, base: int) -> int:
    """How many digits of `base` the largest allowed number has."""
    width, rest = 1, maximum
    while rest >= base:
        rest //= base
        width += 1
    return width


def human_bytes(n: float) -> str:
    """`512 B`, `1.5 KiB`, `12.0 MiB`, `33.1 GiB` (GiB is the largest unit)."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"
