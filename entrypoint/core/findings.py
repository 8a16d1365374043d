"""Findings: the outcome of one check, as the health-check summary and `plan --json` show it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from entrypoint.core.errors import ExitCode, UserError
from entrypoint.core.messages import Text


class Status(str, Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One check's result. A failing finding carries the exit code it implies (2 mis-specified, 3 preflight)."""

    id: str
    status: Status
    message: Text
    hint: Text | None = None
    where: str | None = None
    exit_code: int = ExitCode.PREFLIGHT_FAILED

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "status": self.status.value,
            "message": self.message.en,
            "message_zh": self.message.zh,
            "hint": self.hint.en if self.hint else None,
            "hint_zh": self.hint.zh if self.hint else None,
            "where": self.where,
        }


def passed(id: str, message: Text, where: str | None = None) -> Finding:
    return Finding(id, Status.PASS, message, None, where)


def warned(id: str, message: Text, hint: Text, where: str | None = None) -> Finding:
    return Finding(id, Status.WARN, message, hint, where)


def failed(
    id: str, message: Text, hint: Text, where: str | None = None, exit_code: int = ExitCode.PREFLIGHT_FAILED
) -> Finding:
    return Finding(id, Status.FAIL, message, hint, where, exit_code)


def from_problem(problem: UserError) -> Finding:
    return Finding(problem.id, Status.FAIL, problem.what, problem.fix, problem.where, problem.exit_code)


def exit_code_of(findings: list[Finding]) -> int:
    """2 if any failure is a mis-specification, else 3 if anything failed, else 0."""
    codes = {f.exit_code for f in findings if f.status is Status.FAIL}
    if ExitCode.JOB_MISSPECIFIED in codes:
        return ExitCode.JOB_MISSPECIFIED
    return ExitCode.PREFLIGHT_FAILED if codes else 0
