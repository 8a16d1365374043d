"""Exit codes and the one exception family for conditions that end a command.

A `UserError` carries what is wrong, where (a variable, flag or path) and the fix, in both languages; the CLI
prints it with `report.problem_block` and exits with the subclass's code, never with a traceback.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from entrypoint.core.masking import mask_json
from entrypoint.core.messages import Text, flatten


class ExitCode(IntEnum):
    """The process exit codes the launcher itself chooses (otherwise training's own, 128+N after signal N)."""

    OK = 0
    JOB_MISSPECIFIED = 2  # bad YAML, bad variable value, contradictory settings
    PREFLIGHT_FAILED = 3  # missing/corrupt assets, impossible topology, failed bandwidth preflight
    DO_NOT_REQUEUE = 93  # in-job restarts cannot help: the budget is spent, no progress, or the same exception again
    NODE_LOST = 75  # a node of a multi-node job was lost or never started: resubmitting (new machines) can help
    STALLED = 124  # the stall watchdog ended the job (stall_action fail)


class UserError(Exception):
    """A condition that stops the command: `what` is wrong at `where`; `fix` says what to do."""

    exit_code: ClassVar[ExitCode] = ExitCode.PREFLIGHT_FAILED

    def __init__(self, id: str, where: str, what: Text, fix: Text) -> None:
        super().__init__(what.en)
        self.id, self.where, self.what, self.fix = id, where, what, fix

    def to_json(self) -> dict[str, object]:
        """The error as JSON with secrets masked (a bad value may be quoted in the message)."""
        return mask_json(
            {
                "id": self.id,
                "exit_code": int(self.exit_code),
                **flatten(self.what, "message"),
                "where": self.where,
                **flatten(self.fix, "hint"),
            }
        )


class JobMisspecified(UserError):
    """The job is mis-specified (exit 2): fix the settings, not the machine."""

    exit_code = ExitCode.JOB_MISSPECIFIED


class PreflightFailed(UserError):
    """A preflight check failed (exit 3): the assets, storage or machine are not ready."""

    exit_code = ExitCode.PREFLIGHT_FAILED
