"""Output nobody can read, or that cannot hold Chinese: a closed stdout or stderr (`check >&-`), an ASCII-only or
Latin-1 stdout (`PYTHONIOENCODING=ascii`, `LC_ALL=C`). The exit code stays right, no traceback, errors still reach
an open stderr, and text that cannot be shown in Chinese comes in English (JSON escapes it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.conftest import World

REPO = Path(__file__).parents[2]
BAD_BATCH = {"VLA_BATCH_SIZE": "lots"}


def launched(world: World, argv: tuple[str, ...], env: dict[str, str], closed: str = "") -> subprocess.CompletedProcess:
    """`python -m entrypoint ARGV` with `closed` (e.g. `>&-`, `2>&-`) applied by a shell first."""
    full = {**world.env, **world.tione(nodes=1, per_node=8), **env, "PYTHONPATH": str(REPO)}
    command = ["sh", "-c", f'exec "$@" {closed}', "sh", sys.executable, "-m", "entrypoint", *argv]
    return subprocess.run(command, env=full, cwd=world.root, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    "argv, env, closed, code, stderr_has",
    [
        (("check",), {}, ">&-", 0, b""),
        (("check",), BAD_BATCH, ">&-", 2, b"VLA_BATCH_SIZE"),
        (("check", "--json"), BAD_BATCH, ">&-", 2, b"VLA_BATCH_SIZE"),
        (("plan",), {}, ">&-", 0, b""),
        (("check",), BAD_BATCH, "2>&-", 2, b""),
        (("check",), BAD_BATCH, ">&- 2>&-", 2, b""),
        (("run",), {}, ">&-", 0, b""),
        (("chek",), {}, ">&-", 2, b"chek"),
    ],
    ids=[
        "check-ok",
        "check-error-on-stderr",
        "json-error-on-stderr",
        "plan",
        "stderr-closed",
        "both-closed",
        "run-trains",
        "usage-error",
    ],
)
def test_a_closed_stream_changes_nothing_but_what_is_shown(world: World, argv, env, closed, code, stderr_has) -> None:
    done = launched(world, argv, env, closed)
    assert done.returncode == code, done.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in done.stderr and stderr_has in done.stderr


def test_a_run_with_a_closed_stdout_still_writes_its_node_log(world: World) -> None:
    done = launched(world, ("run",), {}, ">&-")
    log = next((world.assets / "logs").glob("*.log")).read_text()
    assert done.returncode == 0 and "step=10 loss=0.9000" in log and "health check summary: PASS" in log


@pytest.mark.parametrize(
    "env",
    [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"}, {"LC_ALL": "C", "LANG": "C"}],
    ids=["ascii", "latin-1", "c-locale"],
)
@pytest.mark.parametrize(
    "argv, extra, code",
    [(("check",), {}, 0), (("check",), BAD_BATCH, 2), (("plan",), {"VLA_LANG": "zh"}, 0), (("run",), {}, 0)],
    ids=["check", "error", "plan-asked-for-chinese", "run"],
)
def test_an_output_without_chinese_gets_english(world: World, env, argv, extra, code) -> None:
    done = launched(world, argv, {**env, **extra})
    text = done.stdout + done.stderr
    assert done.returncode == code and b"Traceback" not in text, text.decode(errors="replace")[-2000:]
    encoding = env.get("PYTHONIOENCODING")
    if encoding:  # English alone, nothing the stream could not hold
        text.decode(encoding)
        assert b"health check" in text or b"problem:" in text


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_json_on_an_output_without_chinese_is_escaped_and_still_whole(world: World, encoding: str) -> None:
    done = launched(world, ("check", "--json"), {"PYTHONIOENCODING": encoding, **BAD_BATCH})
    document = json.loads(done.stdout.decode("ascii"))
    assert done.returncode == 2 and "无效" in document["error"]["message_zh"]
