"""The report's first line: why the job ended as it did, in at most `LIMIT` characters per language.

Read from each node's newest run. A failure names the node that explains it best (one whose stall named a culprit,
else by outcome: node lost, do-not-requeue, stalled, crashed, preflight, mis-specified, killed), its exit code,
class and root cause, the culprit, the restarts and their causes, then the other nodes that failed and the nodes
that left no file. A success gives the step and loss reached, the restarts it recovered from and the checkpoints saved.
"""

from __future__ import annotations

from entrypoint.core.messages import Text, joined
from entrypoint.report.collect import Experiment, NodeRun
from entrypoint.report.messages import MESSAGES as M

LIMIT = 1024
_PRIORITY = (
    "node-lost",
    "do-not-requeue",
    "stalled",
    "training-crashed",
    "preflight-failed",
    "job-misspecified",
    "killed",
)


def _ranks(values: list[int]) -> str:
    shown = ", ".join(str(v) for v in values[:16])
    return shown + (", …" if len(values) > 16 else "")


def _steps(values: list[int]) -> str:
    return _ranks(sorted(set(values)))


def _restart_part(latest: dict[int, NodeRun]) -> Text | None:
    """How many restarts the job went through (the most any node counted) and why."""
    restarts = max((len(run.attempts) - 1 for run in latest.values()), default=0)
    if restarts <= 0:
        return None
    causes: list[str] = []
    for run in latest.values():
        for attempt in run.attempts:
            if attempt.cause and attempt.cause not in causes and attempt.number < len(run.attempts) - 1:
                causes.append(attempt.cause)
    return M("sum-restarts", count=restarts, causes=", ".join(causes) or "?")


def _culprit_part(run: NodeRun) -> Text | None:
    if run.culprit is None or not run.culprit.ranks:
        return None
    return M("sum-culprit", ranks=_ranks(run.culprit.ranks), nodes=_ranks(run.culprit.nodes))


def _primary(failed: list[NodeRun]) -> NodeRun:
    def rank(run: NodeRun) -> tuple[int, int, int]:
        klass = run.outcome.klass if run.outcome else None
        order = _PRIORITY.index(klass) if klass in _PRIORITY else len(_PRIORITY)
        return (0 if run.culprit and run.culprit.ranks else 1, order, run.rank)

    return min(failed, key=rank)


def cause_summary(experiment: Experiment) -> Text:
    """The cause line (each language at most `LIMIT` characters)."""
    latest = experiment.latest()
    if not latest:
        text = M("sum-nothing", exp=experiment.exp_name, folder=str(experiment.folder))
        return _cut(text)
    failed = [r for r in latest.values() if r.outcome is not None and r.outcome.exit_code not in (0, None)]
    unknown = [r for r in latest.values() if r.outcome is None or r.outcome.exit_code is None]
    parts: list[Text] = []
    if failed:
        first = _primary(failed)
        assert first.outcome is not None
        detail = first.outcome.klass or "?"
        if first.outcome.verdict:
            detail += f", {first.outcome.verdict}"
        fields = {"rank": first.rank, "code": first.outcome.exit_code, "detail": detail}
        if first.outcome.root_cause:
            parts.append(M("sum-failed-because", **fields, cause=first.outcome.root_cause))
        else:
            parts.append(M("sum-failed", **fields))
        culprit = next((p for p in (_culprit_part(r) for r in [first, *latest.values()]) if p), None)
        parts += [p for p in (culprit, _restart_part(latest)) if p]
        others = [r for r in failed if r is not first]
        if others:
            exits = [
                M("sum-node-exit", rank=r.rank, code=r.outcome.exit_code if r.outcome else "?") for r in others[:8]
            ]
            parts.append(M("sum-others-failed", nodes=joined(exits, ", ", "、")))
    elif unknown:
        parts.append(M("sum-unfinished", nodes=_ranks([r.rank for r in unknown])))
        reached = max((r.last_step for r in latest.values() if r.last_step is not None), default=None)
        scanned = [p.step for r in latest.values() if r.scan for p in r.scan.points[-1:]]
        step = reached if reached is not None else max(scanned, default=None)
        if step is not None:
            parts.append(M("sum-last-step", step=step))
        parts += [p for p in (_restart_part(latest),) if p]
    else:
        finished = all(r.outcome is not None and r.outcome.klass == "already-finished" for r in latest.values())
        parts.append(M("sum-finished" if finished else "sum-succeeded", count=len(latest)))
        zero = latest.get(0) or next(iter(latest.values()))
        if zero.last_step is not None:
            if zero.last_loss is not None:
                parts.append(M("sum-reached-loss", step=zero.last_step, loss=f"{zero.last_loss:.4g}"))
            else:
                parts.append(M("sum-reached", step=zero.last_step))
        restarts = _restart_part(latest)
        if restarts is not None:
            parts.append(M("sum-recovered", restarts=restarts))
        saved = [step for run in latest.values() for step, _ in run.checkpoints]
        if saved:
            parts.append(M("sum-checkpoints", steps=_steps(saved)))
    if experiment.missing_nodes:
        parts.append(M("sum-missing-nodes", nodes=_ranks(experiment.missing_nodes)))
    return _cut(joined(parts, "; ", ";"))


def _cut(text: Text) -> Text:
    """Each language cut to `LIMIT` characters (with an ellipsis), on one line."""

    def one(value: str) -> str:
        flat = " ".join(value.split())
        return flat if len(flat) <= LIMIT else flat[: LIMIT - 1] + "…"

    return Text(one(text.en), one(text.zh))
