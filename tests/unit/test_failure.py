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
