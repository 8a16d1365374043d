"""Whole numbers in text others wrote go through one bounded parser: thousands of digits, Unicode digits and
values out of range are refused (None) wherever the package reads a number, never a ValueError."""

from __future__ import annotations

from pathlib import Path

import pytest

from entrypoint.core.numbers import INT64_MAX, leading_number, whole_number
from entrypoint.fabric.draft import NcclList
from entrypoint.fabric.inventory import nccl_version
from entrypoint.fabric.rdma import _version_tuple
from entrypoint.inspect.weights import job_model
from entrypoint.launch.progress import Progress
from entrypoint.net.download import _Transfer
from entrypoint.taco.summary import applied_count
from tests.support.fakehosts import FakeHost

HUGE = "9" * 5000  # past Python's 4300-digit limit on int()


@pytest.mark.parametrize(
    "text, maximum, minimum, base, expected",
    [
        ("42", INT64_MAX, 0, 10, 42),
        (" 42\n", INT64_MAX, 0, 10, 42),
        ("000000000000000000000000007", INT64_MAX, 0, 10, 7),
        (str(INT64_MAX), INT64_MAX, 0, 10, INT64_MAX),
        (str(INT64_MAX + 1), INT64_MAX, 0, 10, None),
        (HUGE, INT64_MAX, 0, 10, None),
        ("0" * 5000 + "1", INT64_MAX, 0, 10, 1),
        ("65536", 65535, 1, 10, None),
        ("0", 65535, 1, 10, None),
        ("²", INT64_MAX, 0, 10, None),
        ("١٠", INT64_MAX, 0, 10, None),
        ("1_000", INT64_MAX, 0, 10, None),
        ("-1", INT64_MAX, 0, 10, None),
        ("+1", INT64_MAX, 0, 10, None),
        ("1 2", INT64_MAX, 0, 10, None),
        ("", INT64_MAX, 0, 10, None),
        (None, INT64_MAX, 0, 10, None),
        ("ff", INT64_MAX, 0, 16, 255),
        ("f" * 5000, INT64_MAX, 0, 16, None),
        ("17", INT64_MAX, 0, 8, 15),
    ],
    ids=[
        "plain",
        "blanks-around",
        "leading-zeros",
        "int64-max",
        "past-int64",
        "5000-digits",
        "5000-zeros-then-one",
        "past-maximum",
        "under-minimum",
        "superscript",
        "arabic-indic",
        "underscore",
        "negative",
        "plus-sign",
        "blank-inside",
        "empty",
        "none",
        "hex",
        "hex-5000-digits",
        "octal",
    ],
)
def test_whole_number(text, maximum, minimum, base, expected):
    assert whole_number(text, maximum, minimum, base) == expected


@pytest.mark.parametrize(
    "text, expected",
    [("1", 1), ("12abc", 12), ("", 0), ("abc", 0), ("256", None), (HUGE, None)],
    ids=["digits", "digits-then-text", "empty", "no-digits", "past-maximum", "5000-digits"],
)
def test_leading_number_reads_like_atoi_within_a_bound(text, expected):
    assert leading_number(text, 255) == expected


@pytest.mark.parametrize(
    "value, out_of_range, matches_port_1",
    [
        ("mlx5_0:1", (), True),
        (f"mlx5_0:{HUGE}", (f"mlx5_0:{HUGE}",), False),
        ("mlx5_0:256", ("mlx5_0:256",), False),
        ("mlx5_0:1,mlx5_0:99999", ("mlx5_0:99999",), True),
        ("mlx5_0", (), True),
    ],
    ids=["port-1", "port-5000-digits", "port-256", "one-good-one-bad", "no-port"],
)
def test_nccl_list_ports_out_of_range_match_nothing(value, out_of_range, matches_port_1):
    rule = NcclList.parse(value)
    assert rule.out_of_range == out_of_range
    assert rule.matches("mlx5_0", 1) is matches_port_1


@pytest.mark.parametrize(
    "major, expected",
    [("2", "2.18.1"), (HUGE, None), ("10000", None)],
    ids=["plain", "5000-digits", "past-any-version"],
)
def test_an_nccl_header_with_an_absurd_version_gives_none(tmp_path: Path, major, expected):
    header = f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR 18\n#define NCCL_PATCH 1\n"
    fake = FakeHost(tmp_path).file("/venv/site/nvidia/nccl/include/nccl.h", header)
    assert nccl_version(fake.host(), ["/venv/site"]) == expected


@pytest.mark.parametrize(
    "version, expected",
    [("2.21.5", (2, 21)), (f"{HUGE}.1.1", None), ("2.x.1", None), (None, None)],
    ids=["plain", "5000-digits", "garbage", "unknown"],
)
def test_version_tuple_is_bounded(version, expected):
    assert _version_tuple(version) == expected


def test_a_step_line_with_thousands_of_digits_is_not_progress():
    progress = Progress(clock=lambda: 1.0)
    progress.feed(f"step={HUGE} loss=0.5 lr=1e-5\nSaved checkpoint at step {HUGE} -> /x\n | {HUGE}/9 [\n")
    progress.feed("step=3 loss=0.25 lr=1e-5\n")
    assert progress.last_step == 3 and progress.saves == []


@pytest.mark.parametrize(
    "header, expected",
    [("bytes 0-9/10", 10), (f"bytes 0-9/{HUGE}", None), ("bytes */*", None)],
    ids=["plain", "total-5000-digits", "unknown"],
)
def test_a_content_range_total_is_bounded(header, expected):
    assert _Transfer.total_from(header) == expected


@pytest.mark.parametrize(
    "status, expected",
    [("applied", 1), ("applied x3", 3), (f"applied ×{HUGE}", None), ("skipped", None)],
    ids=["alone", "times-3", "times-5000-digits", "not-applied"],
)
def test_a_taco_summary_count_is_bounded(status, expected):
    assert applied_count(status) == expected


@pytest.mark.parametrize(
    "value, known",
    [("8", True), (HUGE, False)],
    ids=["plain", "5000-digits"],
)
def test_an_action_dim_flag_is_bounded(value, known):
    model = job_model("pi05_libero", ("--model.action-dim", value))
    assert (model is not None) is known
