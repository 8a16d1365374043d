"""Findings: the outcome of one check, as the health-check summary and `plan --json` show it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from entrypoint.core.errors import ExitCode, UserError
from entrypoint.core.messages import Text, flatten


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # not checked on this machine (`check --assets`: a node's check); never affects the exit code


@dataclass(frozen=True)
class Finding:
    """One check's result. A failing finding carries the exit code it implies (2 mis-specified, 3 preflight)."""

    id: str
    status: Status
    message: Text
    hint: Text | None = None
    where: str | None = None
    exit_code: ExitCode = ExitCode.PREFLIGHT_FAILED

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "status": self.status.value,
            **flatten(self.message, "message"),
            **flatten(self.hint, "hint"),
            "where": self.where,
        }


def passed(id: str, message: Text, where: str | None = None) -> Finding:
    return Finding(id, Status.PASS, message, None, where)


def warned(id: str, message: Text, hint: Text, where: str | None = None) -> Finding:
    return Finding(id, Status.WARN, message, hint, where)


def failed(
    id: str, message: Text, hint: Text, where: str | None = None, exit_code: ExitCode = ExitCode.PREFLIGHT_FAILED
) -> Finding:
    return Finding(id, Status.FAIL, message, hint, where, exit_code)


def skipped(id: str, message: Text, where: str | None = None) -> Finding:
    """A check this machine cannot make (it belongs to a training node): shown, never failing."""
    return Finding(id, Status.SKIP, message, None, where)


def from_problem(problem: UserError) -> Finding:
    return Finding(problem.id, Status.FAIL, problem.what, problem.fix, problem.where, problem.exit_code)


def exit_code_of(findings: Iterable[Finding]) -> ExitCode:
    """2 if any failure is a mis-specification, else 3 if anything failed, else 0."""
    codes = {f.exit_code for f in findings if f.status is Status.FAIL}
    if ExitCode.JOB_MISSPECIFIED in codes:
        return ExitCode.JOB_MISSPECIFIED
    return ExitCode.PREFLIGHT_FAILED if codes else ExitCode.OK
