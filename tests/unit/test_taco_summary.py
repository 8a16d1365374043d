"""Reading taco-train's `optimization summary` box out of training output, whole or streamed."""

from __future__ import annotations

import pytest

from entrypoint.taco.summary import SummaryReader, applied_count, parse_summary

UNICODE = """\
step=40 loss=0.1234
╭──────────────────────────────────────────────╮
│ taco-train — optimization summary            │
├──────────────────────────────────────────────┤
│ openpi_skip_outer_checkpoint  applied ×1     │
│ openpi_compile                applied ×3     │
│ tf32                          applied ×1     │
│ cudnn_benchmark               off            │
╰──────────────────────────────────────────────╯
Saved checkpoint at step 50 -> /x/50
"""
EXPECTED = {
    "openpi_skip_outer_checkpoint": "applied ×1",
    "openpi_compile": "applied ×3",
    "tf32": "applied ×1",
    "cudnn_benchmark": "off",
}

ASCII = """\
+------------------------------------------+
| taco-train - optimization summary        |
+------------------------------------------+
| openpi_compile   | n/a (openpi not installed) |
| tf32             | applied x2                 |
+------------------------------------------+
"""

PLAIN = """\
taco-train — optimization summary
  tf32: applied ×1
  memory: off

next line of output
"""

PREFIXED = """\
[rank0]:┌──────────────────────────────────┐
[rank0]:│ taco-train — optimization summary │
[rank1]:step=49 loss=0.2
[rank0]:├──────────────────────────────────┤
[rank0]:│ tf32             applied ×1       │
[rank1]:│ fake_feature     applied ×9       │
[rank0]:│ \x1b[32mgc_tuning\x1b[0m        applied ×1       │
[rank0]:└──────────────────────────────────┘
"""

TWO_BOXES = UNICODE.replace("applied ×3", "off") + UNICODE

TRUNCATED = """\
│ taco-train — optimization summary │
├───────────────────────────────────┤
│ tf32        applied ×1            │
│ memory      off"""

HEADER_ROW = """\
╭────────────────────────────────────╮
│ taco-train — optimization summary  │
│ feature            status          │
├────────────────────────────────────┤
│ tf32               applied ×1      │
╰────────────────────────────────────╯
"""

MENTION = "vla-entrypoint: rank 0 printed no 'taco-train — optimization summary' box\ntf32 applied ×1\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        (UNICODE, EXPECTED),
        (ASCII, {"openpi_compile": "n/a (openpi not installed)", "tf32": "applied x2"}),
        (PLAIN, {"tf32": "applied ×1", "memory": "off"}),
        (PREFIXED, {"tf32": "applied ×1", "gc_tuning": "applied ×1"}),
        (TWO_BOXES, EXPECTED),
        (TRUNCATED, {"tf32": "applied ×1", "memory": "off"}),
        (HEADER_ROW, {"tf32": "applied ×1"}),
        (MENTION, None),
        ("step=1 loss=2\n", None),
    ],
    ids=[
        "unicode-box",
        "ascii-box",
        "no-borders",
        "torchrun-prefix-interleaved-ansi",
        "last-box-wins",
        "cut-off-at-exit",
        "header-row",
        "a-mention-is-no-box",
        "no-box",
    ],
)
def test_parse_summary(text, expected):
    assert parse_summary(text) == expected


@pytest.mark.parametrize("size", [1, 7, 64, 4096], ids=["1-char", "7-chars", "64-chars", "whole"])
def test_streamed_in_any_chunks(size):
    reader = SummaryReader()
    text = UNICODE.replace("\n", "\r\n")
    for start in range(0, len(text), size):
        reader.feed(text[start : start + size])
    assert reader.close() == EXPECTED


@pytest.mark.parametrize(
    "status, count",
    [
        ("applied ×3", 3),
        ("applied x2", 2),
        ("Applied", 1),
        ("off", None),
        ("n/a (openpi not installed)", None),
        ("not applied", None),
    ],
    ids=["times", "ascii-x", "bare", "off", "n/a", "not-applied"],
)
def test_applied_count(status, count):
    assert applied_count(status) == count
