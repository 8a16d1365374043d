"""In-job restarts as the launcher sees them: each attempt of torchrun's worker group on this node, why it ended,
and whether another attempt can help.

Retry classes, decided before any GPU time is spent: a misspecified job (exit 2) and a failed preflight (exit 3)
end before torchrun starts, so they are never retried; a worker killed by a signal, a collective or store error (a
lost peer node shows up as one) and a stall are retryable, as long as restarts are left and the attempts make
progress; an exception in the trainer's own code that ends two attempts in a row identically is not. torchrun's
elastic agent does the restarting (`--max_restarts`); this module only watches the workers come and go (from
/proc), reads why they ended (the attempt's own output), and gives the verdict that stops a hopeless series with
`ExitCode.DO_NOT_REQUEUE`.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.masking import mask_text
from entrypoint.core.messages import Text
from entrypoint.health.restart import blamed_nodes, node_fault, write_note
from entrypoint.launch.failure import worker_exception
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.progress import Progress

GAVE_UP_FILE = "gave-up.json"  # in a node's attempts folder: that node ended the job with DO_NOT_REQUEUE

TAIL_LINES = 200
# An exception whose line names one of these is the process group's or the store's, not the trainer's own code:
# a peer rank or node went away, or the network failed.
_COLLECTIVE = re.compile(
    r"DistBackendError|DistNetworkError|DistStoreError|NCCL|[Gg]loo|ProcessGroup|c10d|Connection (?:closed|reset)"
    r"|Broken pipe|Socket Timeout|timed out|Timed out|peer",
)


def is_collective(text: str) -> bool:
    """Whether an exception line is the process group's or the store's (a peer went away), not the trainer's."""
    return _COLLECTIVE.search(text) is not None


class Cause(StrEnum):
    """Why an attempt ended (the record's `attempts[].cause`)."""

    WORKER_EXITED = "worker-exited"  # a worker ended without a Python exception: killed by a signal, or os._exit
    COLLECTIVE_ERROR = "collective-error"  # an NCCL/gloo/store error: a peer rank or node failed, or the network
    TRAINER_EXCEPTION = "trainer-exception"  # the trainer's own code raised
    STALL = "stall"  # the stall watchdog found no progress; the launcher ended this node's workers
    PEER_RESTARTED = "peer-restarted"  # another node's workers started a newer attempt; this node's had not failed


class Verdict(StrEnum):
    RETRY = "retry"
    BUDGET_SPENT = "budget-spent"
    SAME_EXCEPTION = "same-exception"
    NO_PROGRESS = "no-progress"
    NODE_FAULT = "node-fault"  # the node health gate found this node faulty before a restart


@dataclass
class Attempt:
    """One attempt of this node's worker group; times are `clock()` values."""

    number: int
    started_at: float
    saves_before: int
    event_before: float | None
    best_step: int | None = None
    saves: int = 0
    best_saved: int | None = None  # the highest step this attempt saved a checkpoint of
    cause: Cause | None = None
    detail: str | None = None
    detected_at: float | None = None
    first_step_at: float | None = None
    facts: dict[str, object] | None = None
    culprit_nodes: tuple[int, ...] = ()  # a stall: the nodes node 0's diagnosis named

    @property
    def reached(self) -> int | None:
        """The furthest step this attempt showed: logged or saved, whichever is later; None when it showed neither."""
        steps = [s for s in (self.best_step, self.best_saved) if s is not None]
        return max(steps) if steps else None


@dataclass
class Attempts:
    """Every attempt of this run on this node. Feed it the training output (it keeps the current attempt's tail);
    call `observe` on each supervision tick with the live worker pids."""

    max_restarts: int
    t0: float
    progress: Progress
    facts_dir: Path | None = None
    clock: Callable[[], float] = time.monotonic
    node_rank: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    _pending: str = ""
    _workers: frozenset[int] = frozenset()

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def restarts(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def restarts_left(self) -> int:
        return max(0, self.max_restarts - self.restarts)

    def feed(self, chunk: str) -> None:
        text = (self._pending + chunk).replace("\r", "\n")
        *lines, self._pending = text.split("\n")
        self.tail.extend(line for line in lines if line.strip())

    def observe(self, workers: frozenset[int]) -> Attempt | None:
        """Note workers that ended (a failure detected) and new ones (an attempt started); returns the attempt that
        has just started, if one has."""
        now = self.clock()
        self._track_progress(now)
        gone, new = self._workers - workers, workers - self._workers
        self._workers = workers
        attempt = self.current
        if gone and attempt is not None and attempt.detected_at is None:
            attempt.detected_at = now
        if not new or (attempt is not None and attempt.detected_at is None and self._workers - new):
            return None  # no new workers, or more of the same attempt's workers still starting
        if attempt is not None:
            self.ended(attempt, now)
        started = Attempt(len(self.attempts), now, len(self.progress.saves), self.progress.last_event_at)
        self.attempts.append(started)
        self.tail.clear()
        return started

    def _track_progress(self, now: float) -> None:
        attempt = self.current
        if attempt is None or self.progress.last_event_at == attempt.event_before:
            return
        # a step this attempt logged: an earlier attempt's last step stays behind when only a bar or a save moved
        if self.progress.last_step is not None and (self.progress.last_step_at or 0) > attempt.started_at:
            if attempt.first_step_at is None:
                attempt.first_step_at = now
            attempt.best_step = max(attempt.best_step or 0, self.progress.last_step)
        mine = self.progress.saves[attempt.saves_before :]
        attempt.saves = len(mine)
        attempt.best_saved = max((saved.step for saved in mine), default=None)

    def record_gave_up(self, verdict: Verdict) -> None:
        """Note in this node's attempts folder that it ended the job (`gave-up.json`, for the job's report; the other
        nodes learn it from this run's folder, `presence.py`)."""
        if self.facts_dir is None:
            return
        try:
            self.facts_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.facts_dir / f".{GAVE_UP_FILE}.tmp"
            tmp.write_text(json.dumps({"verdict": verdict.value, "node_rank": self.node_rank}), encoding="utf-8")
            os.replace(tmp, self.facts_dir / GAVE_UP_FILE)
        except OSError:
            pass  # the peers still end: their workers lose this node's ranks

    def stalled(self, detail: str, cause: Cause = Cause.STALL, culprit_nodes: tuple[int, ...] = ()) -> None:
        """The launcher ends this attempt's workers because of a stall (or a peer's newer attempt); a stall's culprit
        nodes are noted at once, for the health gate of their restart."""
        attempt = self.current
        if attempt is not None:
            attempt.cause, attempt.detail, attempt.culprit_nodes = cause, detail, culprit_nodes
            attempt.detected_at = attempt.detected_at or self.clock()
            self._note(attempt)

    def _note(self, attempt: Attempt) -> None:
        """Tell the next attempt's health gate why this one ended and which nodes it is blamed on."""
        if self.facts_dir is not None and attempt.cause is not None:
            blamed = blamed_nodes(attempt.cause.value, attempt.detail, self.node_rank, attempt.culprit_nodes)
            write_note(self.facts_dir, attempt.number, attempt.cause.value, attempt.detail, self.node_rank, blamed)

    def node_fault(self) -> Text | None:
        """Why this node's health gate failed before a restart of this run, when it did."""
        return node_fault(self.facts_dir) if self.facts_dir is not None else None

    def ended(self, attempt: Attempt, now: float) -> None:
        """Settle why `attempt` ended, from its own output (call once its workers are gone)."""
        self._track_progress(now)
        if attempt.detected_at is None:
            attempt.detected_at = now
        if attempt.cause is not None:
            return
        exception = worker_exception(list(self.tail))
        if exception is None:
            attempt.cause = Cause.WORKER_EXITED
        else:
            attempt.cause = Cause.COLLECTIVE_ERROR if is_collective(exception) else Cause.TRAINER_EXCEPTION
            attempt.detail = mask_text(exception)[:300]
        self._note(attempt)

    def verdict(self) -> Verdict:
        """Whether a new attempt may follow the last one that ended (all but the current, which has just started,
        or the current when torchrun itself ended): `judge` over the attempts that ended."""
        ended = [a for a in self.attempts if a.cause is not None]
        return judge(ended, self.max_restarts, progress_seen=self.progress.step_reached is not None)

    def torchrun_failed(self, now: float) -> Verdict | None:
        """torchrun itself ended with a failure: settle the current attempt and judge the series. The verdict that
        ends the job with `ExitCode.DO_NOT_REQUEUE` (the last allowed attempt failing is `BUDGET_SPENT`); None when
        restarts are off or no attempt was seen (the training's own exit code stands)."""
        last = self.current
        if self.max_restarts <= 0 or last is None:
            return None
        self.ended(last, now)
        verdict = self.verdict()
        return None if verdict is Verdict.RETRY else verdict

    def verdict_text(self, verdict: Verdict, code: int) -> Text:
        ended = [a for a in self.attempts if a.cause is not None]
        last = ended[-1]
        if verdict is Verdict.SAME_EXCEPTION:
            return M("restart-same-exception", a=last.number - 1, b=last.number, detail=last.detail, code=code)
        if verdict is Verdict.NO_PROGRESS:
            best = max((a.reached or 0 for a in ended[:-1]), default=0)
            step = last.reached if last.reached is not None else "-"
            return M("restart-no-progress", n=last.number, step=step, best=best, code=code)
        return M("restart-budget-spent", restarts=self.max_restarts, code=code)

    def read_facts(self, attempt: Attempt) -> dict[str, object] | None:
        """What this attempt's local rank 0 recorded (`launch/attempt.py`), once it has."""
        if attempt.facts is None and self.facts_dir is not None:
            try:
                data = json.loads((self.facts_dir / f"{attempt.number}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            attempt.facts = data if isinstance(data, dict) else None
        return attempt.facts

    def resumed_step(self, attempt: Attempt) -> int | None:
        facts = self.read_facts(attempt) or {}
        decision = facts.get("resume")
        step = decision.get("step") if isinstance(decision, dict) else None
        return step if isinstance(step, int) else None

    def to_json(self) -> list[dict[str, object]]:
        """The record's `attempts`: for each, why it ended, when that was detected, when the next one started and
        from which step it resumed (seconds since the launcher started)."""

        def since(t: float | None) -> float | None:
            return round(t - self.t0, 3) if t is not None else None

        rows: list[dict[str, object]] = []
        for i, attempt in enumerate(self.attempts):
            following = self.attempts[i + 1] if i + 1 < len(self.attempts) else None
            self.read_facts(attempt)
            rows.append(
                {
                    "attempt": attempt.number,
                    "started_s": since(attempt.started_at),
                    "resumed_step": self.resumed_step(attempt) if attempt.number else None,
                    "first_step_s": since(attempt.first_step_at),
                    "best_step": attempt.best_step,
                    "checkpoints_saved": attempt.saves,
                    "cause": attempt.cause.value if attempt.cause else None,
                    "detail": attempt.detail,
                    "detected_s": since(attempt.detected_at),
                    "restarted_s": since(following.started_at) if following else None,
                    "facts": attempt.facts,
                }
            )
        return rows


def judge(ended: Sequence[Attempt], max_restarts: int, progress_seen: bool) -> Verdict:
    """Whether a new attempt may follow the last of `ended` (the attempts that ended, oldest first), from their
    records alone. In order: the last allowed attempt (number `max_restarts`) has ended: `BUDGET_SPENT`; it and the
    one before ended with the same exception of the trainer's own code: `SAME_EXCEPTION`; neither of the last two
    got past every step the attempts before it reached (a save counts as a step reached; returning to the same step
    is not progress) while this node sees progress at all (`progress_seen`: only the node of global rank 0 does):
    `NO_PROGRESS`; else `RETRY`."""
    if not ended:
        return Verdict.RETRY
    last = ended[-1]
    if last.number >= max_restarts:
        return Verdict.BUDGET_SPENT
    if len(ended) >= 2:
        before = ended[-2]
        if last.cause is Cause.TRAINER_EXCEPTION and before.cause is last.cause and before.detail == last.detail:
            return Verdict.SAME_EXCEPTION
        if progress_seen and not _progressed(ended, -1) and not _progressed(ended, -2):
            return Verdict.NO_PROGRESS
    return Verdict.RETRY


def _progressed(ended: Sequence[Attempt], index: int) -> bool:
    """Whether `ended[index]` got past every step the attempts before it reached, logged or saved (the first attempt
    has nothing before it: any step counts)."""
    reached = ended[index].reached
    best_before = max((a.reached for a in ended[:index] if a.reached is not None), default=-1)
    return reached is not None and reached > best_before
