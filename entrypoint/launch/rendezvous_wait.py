"""A worker node's wait for node 0 before its first torchrun: MASTER_ADDR resolves, then node 0's port accepts a TCP
connection, each within the plan's bound (`inspect.topology.MasterWait`).

Without it a wrong or absent master costs torchrun's whole rendezvous timeout and ends in pages of trace; with it
the node exits 3 with one cause naming the name, what it resolved to and the port. The probe connects and closes
without sending a byte (torchrun's store drops such a connection). Each lookup runs in a daemon thread joined with
the time left, so a resolver that never answers cannot stretch the bound; attempts back off from 0.25 s to 5 s and a
progress line is printed at the first miss, then every 15 s. When both answer at once the cost is one lookup and one
connection (see scripts/bench_master_wait.py). Another node's end of the job (node 0 failed its checks, say) ends the
wait at the next attempt: the node exits with the job's code instead of waiting out the bound.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TextIO

from entrypoint.core.findings import Finding, failed
from entrypoint.core.messages import Lang, Text
from entrypoint.core.oserror import os_error_text
from entrypoint.inspect.topology import MasterWait
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.messages import say

FIRST_RETRY_S = 0.25
MAX_RETRY_S = 5.0
CONNECT_ATTEMPT_S = 5.0  # one connection attempt (an address that drops SYNs answers nothing)
LOOKUP_ATTEMPT_S = 30.0  # one lookup (a resolver's own retries across its servers stay under this)
PROGRESS_EVERY_S = 15.0
SETTING = "VLA_MASTER_WAIT_TIMEOUT"


class WaitStatus(StrEnum):
    REACHED = "reached"  # node 0's port accepted a connection
    UNRESOLVED = "unresolved"  # the name gave no address within the resolution bound
    UNREACHABLE = "unreachable"  # no address accepted a connection within the bound
    JOB_ENDED = "job-ended"  # another node ended the job while this one waited (`presence.py`)


@dataclass(frozen=True)
class WaitResult:
    """How the wait ended; `finding` is the one failing cause (None when node 0 answered)."""

    target: MasterWait
    status: WaitStatus
    addresses: tuple[str, ...]
    waited_s: float
    attempts: int
    error: str | None
    finding: Finding | None

    def to_json(self) -> dict[str, object]:
        return {
            **self.target.to_json(),
            "status": self.status.value,
            "addresses": list(self.addresses),
            "waited_s": round(self.waited_s, 3),
            "attempts": self.attempts,
            "error": self.error,
        }


def _reason(error: BaseException) -> Text:
    return os_error_text(error)


def lookup(addr: str, port: int, limit_s: float) -> tuple[tuple[str, ...], Text | None]:
    """One resolution of `addr`, given at most `limit_s`: its addresses in the resolver's order (then no error), or
    none and the error."""
    answer: list[tuple[tuple[str, ...], Text | None]] = []

    def resolve() -> None:
        try:
            infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:
            answer.append(((), _reason(error)))
        else:
            answer.append((tuple(dict.fromkeys(str(info[4][0]) for info in infos)), None))

    worker = threading.Thread(target=resolve, name="master-lookup", daemon=True)
    worker.start()
    worker.join(limit_s)
    return answer[0] if answer else ((), M("master-no-answer", limit=round(limit_s)))


def connect(addresses: tuple[str, ...], port: int, limit_s: float) -> Text | None:
    """Try each address (at least one) once, each for at most `limit_s`; None when one accepted, else the last
    error."""
    error = None
    for address in addresses:
        try:
            with socket.create_connection((address, port), timeout=limit_s):
                return None
        except OSError as failure:
            error = _reason(failure)
    assert error is not None, "no address to connect to"
    return error


class _Pacer:
    """Back-off between attempts and throttled progress lines, both against one clock."""

    def __init__(self, out: TextIO, lang: Lang | str) -> None:
        self.out, self.lang = out, lang
        self.start = time.monotonic()
        self.delay = FIRST_RETRY_S
        self.printed_at: float | None = None

    def waited(self) -> float:
        return time.monotonic() - self.start

    def left(self, bound_s: float) -> float:
        """Seconds left until `bound_s` after the start (at least a token 0.1 s, for one last attempt)."""
        return max(0.1, bound_s - self.waited())

    def progress(self, name: str, **fields: object) -> None:
        now = time.monotonic()
        if self.printed_at is None or now - self.printed_at >= PROGRESS_EVERY_S:
            say(self.out, self.lang, name, waited=round(now - self.start), **fields)
            self.printed_at = now

    def pause(self, bound_s: float) -> None:
        """Sleep the next back-off step, never past `bound_s` after the start."""
        time.sleep(max(0.0, min(self.delay, bound_s - self.waited())))
        self.delay = min(self.delay * 2, MAX_RETRY_S)


def wait_for_master(
    target: MasterWait, out: TextIO, lang: Lang | str = Lang.BOTH, job_ended: Callable[[], bool] | None = None
) -> WaitResult:
    """Wait until `target.addr` resolves (within `resolve_timeout_s`) and `target.port` accepts a connection (within
    `timeout_s`), printing progress while waiting. Never raises for a missing master: the result carries the cause.
    `job_ended`, asked before every pause: another node ended the job (node 0 failed its checks, say), so there is
    nothing left to wait for (`WaitStatus.JOB_ENDED`)."""
    pace = _Pacer(out, lang)
    attempts = 0

    def ended(addresses: tuple[str, ...] = ()) -> WaitResult | None:
        if job_ended is None or not job_ended():
            return None
        return WaitResult(target, WaitStatus.JOB_ENDED, addresses, pace.waited(), attempts, None, None)

    while True:
        attempts += 1
        addresses, problem = lookup(
            target.addr, target.port, min(LOOKUP_ATTEMPT_S, pace.left(target.resolve_timeout_s))
        )
        if addresses:
            break
        problem = problem or M("master-no-address")
        if pace.waited() >= target.resolve_timeout_s:
            return _unresolved(target, pace.waited(), attempts, problem)
        if (stop := ended()) is not None:
            return stop
        pace.progress(
            "master-resolving",
            variable=target.variable,
            addr=target.addr,
            bound=target.resolve_timeout_s,
            error=problem,
        )
        pace.pause(target.resolve_timeout_s)
    shown = ", ".join(addresses)
    while True:
        error = connect(addresses, target.port, min(CONNECT_ATTEMPT_S, pace.left(target.timeout_s)))
        if error is None:
            if pace.printed_at is not None:
                say(out, lang, "master-reached", addr=target.addr, port=target.port, waited=round(pace.waited()))
            return WaitResult(target, WaitStatus.REACHED, addresses, pace.waited(), attempts, None, None)
        if pace.waited() >= target.timeout_s:
            return _unreachable(target, addresses, pace.waited(), attempts, error)
        if (stop := ended(addresses)) is not None:
            return stop
        pace.progress(
            "master-connecting",
            addr=target.addr,
            port=target.port,
            addresses=shown,
            bound=target.timeout_s,
            error=error,
        )
        pace.pause(target.timeout_s)
        attempts += 1


def _unresolved(target: MasterWait, waited: float, attempts: int, problem: Text) -> WaitResult:
    what = M("master-unresolved", variable=target.variable, addr=target.addr, waited=round(waited), error=problem)
    fix = M("master-unresolved-fix", variable=target.variable, bound=target.resolve_timeout_s)
    finding = failed("topology.master-unresolved", what, fix, target.variable)
    return WaitResult(target, WaitStatus.UNRESOLVED, (), waited, attempts, problem.en, finding)


def _unreachable(
    target: MasterWait, addresses: tuple[str, ...], waited: float, attempts: int, error: Text
) -> WaitResult:
    shown = ", ".join(addresses)
    what = M(
        "master-unreachable", addr=target.addr, port=target.port, addresses=shown, waited=round(waited), error=error
    )
    fix = M("master-unreachable-fix", port=target.port, bound=target.timeout_s, setting=SETTING)
    finding = failed("topology.master-unreachable", what, fix, f"{target.addr}:{target.port}")
    return WaitResult(target, WaitStatus.UNREACHABLE, addresses, waited, attempts, error.en, finding)
