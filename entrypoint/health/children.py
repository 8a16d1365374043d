"""Bounded child processes: the gate's probes run in a child of their own session, which is killed (the whole
group) when it outlives its bound, and whose output is read back bounded from a temporary file. A driver call that
never returns therefore costs at most the bound, never a hang of the launcher; a child that SIGKILL cannot end (stuck
in the kernel) is abandoned after `REAP_WAIT_S`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

OUTPUT_LIMIT = 4 << 20  # bytes of a child's output read back
REAP_WAIT_S = 2.0  # after SIGKILL: a child stuck in the kernel (a driver call) is left behind, not waited for


@dataclass(frozen=True)
class ChildRun:
    """How a bounded child ended: `code` None when it was killed at its bound (`timed_out`) or never started
    (`error`)."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    error: str | None = None

    def json_line(self) -> dict[str, object] | None:
        """The last line of stdout that is a JSON object (the child's answer), or None."""
        for text in reversed(self.stdout.strip().splitlines()):
            if text.startswith("{"):
                try:
                    data = json.loads(text)
                except (ValueError, RecursionError):
                    return None
                return data if isinstance(data, dict) else None
        return None

    def last_line(self) -> str:
        lines = [line for line in (self.stderr + "\n" + self.stdout).strip().splitlines() if line.strip()]
        return lines[-1][-300:] if lines else ""


def _read(handle: IO[bytes]) -> str:
    handle.seek(0)
    return handle.read(OUTPUT_LIMIT).decode("utf-8", "replace")


def run_child(argv: list[str], env: Mapping[str, str], timeout: float, cwd: str | None = None) -> ChildRun:
    """Run `argv` with `env`, killing its whole process group after `timeout` seconds."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                env=dict(env),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=cwd,
            )
        except OSError as error:
            return ChildRun(None, "", "", 0.0, error=f"{argv[0]}: {error.strerror or error}")
        try:
            code: int | None = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in the kernel (state D): abandoned
                proc.wait(timeout=REAP_WAIT_S)
            code, timed_out = None, True
        seconds = round(time.monotonic() - start, 3)
        return ChildRun(code, _read(out), _read(err), seconds, timed_out)
