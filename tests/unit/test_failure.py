"""The root cause of a failed run, from recorded torchrun and worker output."""

from __future__ import annotations

import json

import pytest

from entrypoint.core import masking
from entrypoint.launch.failure import OutputTail, root_cause

TORCHRUN_SIGKILL = """\
E1202 17:49:28.034000 10 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 1 (pid: 14) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 33, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
scripts/train_pytorch.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_17:49:28
  host      : node0
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 14)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 14
============================================================
"""  # noqa: E501 (torchrun's own line, verbatim)

WORKER_ERROR = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "scripts/train_pytorch.py", line 10, in <module>
[rank1]: FileNotFoundError: [Errno 2] No such file or directory: 'norm_stats.json'
""" + TORCHRUN_SIGKILL.replace("-9 (pid: 14)", "1 (pid: 14)").replace(
    "Signal 9 (SIGKILL) received by PID 14",
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
)


def tail_of(text: str) -> OutputTail:
    tail = OutputTail()
    tail.feed(text)
    return tail


@pytest.mark.parametrize(
    "output, expected",
    [
        (
            TORCHRUN_SIGKILL,
            "rank 1 (local_rank: 1) on node0: exitcode -9 (pid: 14), Signal 9 (SIGKILL) received by PID 14",
        ),
        (
            WORKER_ERROR,
            "FileNotFoundError: [Errno 2] No such file or directory: 'norm_stats.json' — "
            "rank 1 (local_rank: 1) on node0: exitcode 1 (pid: 14)",
        ),
        ("all good\n", None),
    ],
    ids=["killed-worker", "worker-exception", "nothing"],
)
def test_root_cause_from_output(output, expected):
    assert root_cause(None, tail_of(output)) == expected


def test_error_file_wins_unless_it_only_names_torchrun(tmp_path):
    error = tmp_path / "error.json"
    error.write_text(json.dumps({"message": {"message": "RuntimeError: NCCL timeout on rank 3", "extraInfo": {}}}))
    assert root_cause(error, tail_of(TORCHRUN_SIGKILL)) == "RuntimeError: NCCL timeout on rank 3"
    error.write_text(json.dumps({"message": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "}))
    assert root_cause(error, tail_of(TORCHRUN_SIGKILL)).startswith("rank 1")


@pytest.mark.parametrize(
    "message, shown",
    [
        ("ValueError: unknown arguments: --wandb-key=k-1a2b3c", "ValueError: unknown arguments: --wandb-key=***"),
        ("HTTPError: 403 for https://u:p4ss@hub.example/x?sig=s1", "HTTPError: 403 for https://***@hub.example/x?sig=***"),
        ("PermissionError: token remembered-secret-9 rejected", "PermissionError: token *** rejected"),
    ],
)  # fmt: skip
def test_root_cause_is_masked(tmp_path, message, shown):
    """The cause lands in the console, the node log and the start-up record: a secret in it is masked, whether it
    comes from the error file or from the output's last traceback."""
    masking.remember(["remembered-secret-9"])
    try:
        error = tmp_path / "error.json"
        error.write_text(json.dumps({"message": {"message": message}}))
        assert root_cause(error, tail_of("")) == shown
        traceback = f"[rank0]: Traceback (most recent call last):\n[rank0]: {message}\n"
        assert root_cause(None, tail_of(traceback)) == shown
    finally:
        masking.forget()


# -- the output's tail -----------------------------------------------------------------------------------------------


def test_the_tail_keeps_the_last_200_lines_without_blank_ones_and_a_line_split_across_chunks():
    assert list(tail_of("first\n").lines) == ["first"]
    tail = OutputTail()
    tail.feed("".join(f"line {i}\n" for i in range(250)) + "\n   \n")
    assert len(tail.lines) == 200 and tail.lines[0] == "line 50" and tail.lines[-1] == "line 249"
    tail.feed("progress 1%\rprogress 2%\rValueEr")
    assert list(tail.lines)[-2:] == ["progress 1%", "progress 2%"]  # a carriage return ends a line
    tail.feed("ror: x\n")  # the rest waited for its end
    assert tail.lines[-1] == "ValueError: x" and tail.lines[0] == "line 53"


# -- torchrun's error file -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, cause",
    [
        ('{"message": "first line\\nRuntimeError: the last line  "}', "RuntimeError: the last line"),
        ('{"message": {"message": "OSError: disk full"}}', "OSError: disk full"),
        ('{"message": ""}', None),
        ('{"message": {"extraInfo": {}}}', None),
        ('{"other": 1}', None),
        ('["RuntimeError: x"]', None),
        ("{not json", None),
        ('{"message": "RuntimeError: caf\u00e9 \u8282\u70b9"}', "RuntimeError: caf\u00e9 \u8282\u70b9"),
    ],
    ids=["last-line", "nested", "empty", "nested-without-message", "no-message", "a-list", "malformed", "non-ascii"],
)
def test_the_error_file_gives_its_messages_last_line(tmp_path, content, cause):
    error = tmp_path / "error.json"
    error.write_text(content, encoding="utf-8")
    assert root_cause(error, tail_of("")) == cause


def test_a_missing_error_file_falls_back_to_the_output(tmp_path):
    assert root_cause(tmp_path / "absent.json", tail_of(TORCHRUN_SIGKILL)).startswith("rank 1 (local_rank: 1)")


def test_an_error_file_naming_only_torchrun_is_the_cause_when_the_output_says_nothing(tmp_path):
    error = tmp_path / "error.json"
    error.write_text(json.dumps({"message": "SignalException: Process 7 got signal: 15"}))
    assert root_cause(error, tail_of("all good\n")) == "SignalException: Process 7 got signal: 15"


# -- the worker's exception ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output, cause",
    [
        pytest.param(
            "Traceback (most recent call last):\nKeyError: 'a'\nTraceback (most recent call last):\n"
            '  File "t.py", line 1\nRuntimeError: the second\n',
            "RuntimeError: the second",
            id="the-last-traceback",
        ),
        pytest.param("ValueError: printed, not raised\n", None, id="no-traceback"),
        pytest.param(
            "Traceback (most recent call last):\nKeyError: 'a'\nValueError: printed after it\n",
            "KeyError: 'a'",
            id="only-the-line-ending-the-traceback",
        ),
        pytest.param(
            "[rank3]: Traceback (most recent call last):\n[rank3]: KeyboardInterrupt\n", "KeyboardInterrupt", id="rank"
        ),
        pytest.param("Traceback (most recent call last):\nSystemExit: 2\n", "SystemExit: 2", id="exit"),
        pytest.param("Traceback (most recent call last):\n[E] MyException\n", "MyException", id="bare-prefix"),
        pytest.param(
            "Traceback (most recent call last):\nErrorsFound: 3\nmodule.TimeoutError: late\n",
            "module.TimeoutError: late",
            id="a-word-that-only-starts-with-error",
        ),
        pytest.param(
            "Traceback (most recent call last):\nOSError: x\nTraceback (most recent call last):\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n",
            "OSError: x",
            id="torchruns-own-traceback-skipped",
        ),
    ],
)
def test_the_worker_exception_is_the_line_ending_its_last_traceback(output, cause):
    assert root_cause(None, tail_of(output)) == cause


# -- torchrun's verdict ----------------------------------------------------------------------------------------------


ROOT = "Root Cause (first observed failure):\n[0]:\n"
FILLER = "  error_file: <N/A>\n"


@pytest.mark.parametrize(
    "block, verdict",
    [
        pytest.param("  rank : 2\n", "rank 2: exitcode ?", id="rank-only"),
        pytest.param("  host : n1\n  exitcode : 1\n", None, id="no-rank"),
        pytest.param("  rank : 2\n  rank : 5\n  exitcode: 3\n", "rank 2: exitcode 3", id="the-first-field-wins"),
        pytest.param("  traceback : boom\n  rank : 2\n", "rank 2: exitcode ?, boom", id="traceback"),
        pytest.param(FILLER * 9 + "  rank : 2\n", "rank 2: exitcode ?", id="rank-on-the-last-line-read"),
        pytest.param(FILLER * 10 + "  rank : 2\n", None, id="rank-past-the-block"),
    ],
)
def test_torchruns_verdict_is_read_from_its_root_cause_block(block, verdict):
    assert root_cause(None, tail_of(ROOT + block)) == verdict


def test_the_last_root_cause_block_is_the_one_read():
    output = ROOT + "  rank : 1\n" + ROOT + "  rank : 4\n  host : n2\n"
    assert root_cause(None, tail_of(output)) == "rank 4 on n2: exitcode ?"


OTHER_FAILURE = """\
Failures:
[1]:
  time      : 2026-12-02_17:49:28
  host      : node0
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 16)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
"""


def test_the_first_observed_failure_is_read_not_the_other_failures_listed_before_it():
    output = TORCHRUN_SIGKILL.replace("  host      : node0\n", "").replace("Root Cause", OTHER_FAILURE + "Root Cause")
    assert root_cause(None, tail_of(output)) == (
        "rank 1 (local_rank: 1): exitcode -9 (pid: 14), Signal 9 (SIGKILL) received by PID 14"
    )
