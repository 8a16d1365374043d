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


def test_lines_ended_by_a_carriage_return_alone():
    """A progress bar's output ends lines with \\r only; the box is still read line by line."""
    assert parse_summary(UNICODE.replace("\n", "\r")) == EXPECTED


def test_colours_on_the_last_line_without_a_newline_are_removed():
    text = TRUNCATED.replace("memory      off", "memory      \x1b[2moff\x1b[0m")
    assert parse_summary(text) == {"tf32": "applied ×1", "memory": "off"}


def test_a_logging_prefix_holding_a_column_rule():
    """The prefix is everything before the title's left border, even when the prefix holds a `|` itself."""
    text = (
        "12:00:01 | INFO | | taco-train - optimization summary |\n"
        "12:00:01 | INFO | | tf32          | applied x1        |\n"
        "12:00:01 | INFO | | memory        | off               |\n"
    )
    assert parse_summary(text) == {"tf32": "applied x1", "memory": "off"}


def test_a_prefix_right_before_an_unbordered_title():
    text = "[rank0]:taco-train — optimization summary\n[rank0]:tf32: applied ×1\n[rank1]:loss: 0.5\n"
    assert parse_summary(text) == {"tf32": "applied ×1"}


def test_a_bordered_title_at_the_start_of_the_line_ignores_unbordered_lines_before_the_rows():
    """Another process's `epoch 3` printed between the title and the first row is no feature."""
    text = "│ taco-train — optimization summary │\nepoch 3\n│ tf32   applied ×1 │\n"
    assert parse_summary(text) == {"tf32": "applied ×1"}


def test_rows_without_padding_inside_the_borders():
    text = "|taco-train - optimization summary|\n|tf32|applied x2|\n|memory|off|\n"
    assert parse_summary(text) == {"tf32": "applied x2", "memory": "off"}


def test_an_ascii_box_ends_at_its_closing_rule():
    """A table printed after the box (another `| name | value |`) is not read into the summary."""
    assert parse_summary(ASCII + "| loss | 0.5 |\n") == {
        "openpi_compile": "n/a (openpi not installed)",
        "tf32": "applied x2",
    }


def test_an_empty_box_ends_at_its_bottom_border():
    text = "╭────╮\n│ taco-train — optimization summary │\n╰────╯\n│ loss   0.5 │\n"
    assert parse_summary(text) is None


def test_blank_and_unreadable_rows_inside_a_bordered_box_do_not_end_it():
    text = (
        "│ taco-train — optimization summary │\n"
        "│ tf32          applied ×1          │\n"
        "│                                   │\n"
        "│ memory        off                 │\n"
        "│ 2 of 3 features                   │\n"
        "│ gc_tuning     applied ×1          │\n"
        "╰───────────────────────────────────╯\n"
    )
    assert parse_summary(text) == {"tf32": "applied ×1", "memory": "off", "gc_tuning": "applied ×1"}


def test_a_box_is_read_for_at_most_200_lines():
    """Rows up to the 200th line after the title count; a box never closed is ended there."""
    rows = ["│ first   applied ×1 │"] + ["other output"] * 198 + ["│ last    applied ×1 │", "other output"]
    text = "│ taco-train — optimization summary │\n" + "\n".join(rows) + "\n│ late    applied ×1 │\n"
    assert parse_summary(text) == {"first": "applied ×1", "last": "applied ×1"}
