"""Inline SVG for the report: the per-node timeline and line charts (loss and seconds per step against the step).

Plain SVG elements with classes the page's CSS colours; every value drawn is a number computed here and every
text is escaped, so nothing read from a log reaches the page as markup. Each logged point is one
`<circle class="pt">` (with a `<title>` the browser shows on hover: no script needed); a chart draws at most
`MAX_POINTS` of them, evenly thinned beyond that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import TypeVar

from entrypoint.core.messages import Text
from entrypoint.report.collect import Experiment, NodeRun
from entrypoint.report.messages import MESSAGES as M

MAX_POINTS = 2000
WIDTH = 960
LABEL_W = 190  # the timeline's row labels
ROW_H = 46
T = TypeVar("T")
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f")


def _num(value: float) -> str:
    return f"{value:.1f}"


def _bilingual(text: Text) -> str:
    return f"{escape(text.en)} · {escape(text.zh)}"


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values spanning [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low] if math.isfinite(low) else [0.0]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    values: list[float] = []
    value = first
    while value <= high + step * 1e-9 and len(values) < 50:
        values.append(round(value, 12))
        value += step
    return values


def _label(value: float) -> str:
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.2g}"
    return f"{value:.6g}"


@dataclass
class Series:
    """One series: `name`, its (x, y) points in the order logged (a new polyline wherever x goes back), and the x
    positions of restarts, drawn as dashed lines."""

    name: str
    points: Sequence[tuple[float, float]] = field(default_factory=list)
    restarts: Sequence[float] = field(default_factory=list)


def thin(items: Sequence[T], limit: int) -> list[T]:
    """About `limit` of `items`, evenly spread, the last one always among them (a curve ends where its data does)."""
    if len(items) <= limit:
        return list(items)
    kept = list(items[:: math.ceil(len(items) / limit)])
    if kept[-1] is not items[-1]:
        kept.append(items[-1])
    return kept


def _segments(points: Sequence[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """The points cut where x goes back (a resumed attempt logging steps again), one polyline each."""
    found: list[list[tuple[float, float]]] = []
    for point in points:
        if not found or point[0] < found[-1][-1][0]:
            found.append([])
        found[-1].append(point)
    return found


def line_chart(chart_id: str, title: Text, y_title: Text, x_title: Text, series: list[Series]) -> str:
    """An SVG line chart, or a sentence when there is nothing to draw."""
    shown = [s for s in series if s.points]
    total = sum(len(s.points) for s in shown)
    if total > MAX_POINTS:
        shown = [Series(s.name, thin(s.points, max(1, MAX_POINTS * len(s.points) // total)), s.restarts) for s in shown]
    heading = f"<h3>{_bilingual(title)}</h3>"
    if not shown:
        return heading + f'<p class="empty" id="{chart_id}">{_bilingual(M("chart-empty"))}</p>'
    xs = [x for s in shown for x, _ in s.points]
    ys = [y for s in shown for _, y in s.points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        y0, y1 = y0 - abs(y0) * 0.1 - 1e-9, y1 + abs(y1) * 0.1 + 1e-9
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    left, right, top, bottom, height = 70, 20, 14, 44, 280
    plot_w, plot_h = WIDTH - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * plot_h

    parts = [
        f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title.en)}" xmlns="http://www.w3.org/2000/svg">',
        f'<rect class="plot" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/>',
    ]
    for value in ticks(y0, y1):
        y = py(value)
        parts.append(f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{_num(y)}" y2="{_num(y)}"/>')
        parts.append(f'<text class="tick" x="{left - 6}" y="{_num(y + 4)}" text-anchor="end">{_label(value)}</text>')
    for value in ticks(x0, x1, 8):
        tick_x = _num(px(value))
        parts.append(f'<line class="grid" x1="{tick_x}" x2="{tick_x}" y1="{top}" y2="{top + plot_h}"/>')
        parts.append(
            f'<text class="tick" x="{tick_x}" y="{top + plot_h + 16}" text-anchor="middle">{_label(value)}</text>'
        )
    parts.append(
        f'<text class="axis" x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">'
        f"{_bilingual(x_title)}</text>"
    )
    parts.append(
        f'<text class="axis" transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">'
        f"{_bilingual(y_title)}</text>"
    )
    for index, one in enumerate(shown):
        colour = COLOURS[index % len(COLOURS)]
        for restart in one.restarts:
            if x0 <= restart <= x1:
                mark = _num(px(restart))
                parts.append(
                    f'<line class="restart-mark" x1="{mark}" x2="{mark}" y1="{top}" y2="{top + plot_h}" '
                    f'stroke="{colour}"/>'
                )
        for segment in _segments(one.points):
            path = " ".join(f"{_num(px(x))},{_num(py(y))}" for x, y in segment)
            parts.append(f'<polyline class="series" points="{path}" stroke="{colour}"/>')
        name = escape(one.name)
        for x, y in one.points:
            parts.append(
                f'<circle class="pt" data-series="{index}" cx="{_num(px(x))}" cy="{_num(py(y))}" r="2.6" '
                f'fill="{colour}"><title>{name}: {_label(x)} → {_label(y)}</title></circle>'
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><span class="swatch" style="background:{COLOURS[i % len(COLOURS)]}"></span>'
        f"{escape(s.name)} ({len(s.points)})</span>"
        for i, s in enumerate(shown)
    )
    return heading + "".join(parts) + f'<p class="legend">{legend}</p>'


def _run_end(run: NodeRun) -> float:
    """Seconds from the run's start to its last known moment."""
    ends = [p.start_s + p.seconds for p in run.phases]
    ends += [a.detected_s or a.started_s or 0.0 for a in run.attempts]
    return max(ends, default=0.0)


def timeline(experiment: Experiment) -> str:
    """Every run as a row (grouped by node): its phases, attempts, restarts and end, on one time axis."""
    runs = sorted(experiment.runs, key=lambda r: (r.rank, r.stamp))
    missing = experiment.missing_nodes
    rows = len(runs) + len(missing)
    if rows == 0:
        return f'<p class="empty">{_bilingual(M("timeline-empty"))}</p>'
    starts = [r.started_at for r in runs if r.started_at is not None]
    origin = min(starts) if starts else 0.0
    offsets = {id(r): (r.started_at - origin if r.started_at is not None else 0.0) for r in runs}
    span = max([offsets[id(r)] + _run_end(r) for r in runs] + [1.0])
    top, axis_h = 10, 30
    height = top + rows * ROW_H + axis_h
    plot_w = WIDTH - LABEL_W - 20

    def px(seconds: float) -> float:
        return LABEL_W + max(0.0, seconds) / span * plot_w

    parts = [
        f'<svg id="timeline-chart" class="timeline" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="timeline" xmlns="http://www.w3.org/2000/svg">'
    ]
    for value in ticks(0.0, span, 8):
        tick_x = _num(px(value))
        parts.append(f'<line class="grid" x1="{tick_x}" x2="{tick_x}" y1="{top}" y2="{top + rows * ROW_H}"/>')
        parts.append(
            f'<text class="tick" x="{tick_x}" y="{top + rows * ROW_H + 14}" text-anchor="middle">'
            f"{_label(value)} s</text>"
        )
    for row, run in enumerate(runs):
        y = top + row * ROW_H
        base = offsets[id(run)]
        klass = "ok" if run.outcome and run.outcome.ok else "fail" if run.outcome else "unknown"
        parts.append(f'<g class="node-row {klass}" data-node="{run.rank}" data-stamp="{escape(run.stamp)}">')
        parts.append(f'<text class="row-label" x="4" y="{y + 20}">{escape(run.label)}</text>')
        for phase in run.phases:
            x, w = px(base + phase.start_s), max(1.5, phase.seconds / span * plot_w)
            name = escape(phase.name)
            parts.append(
                f'<rect class="phase phase-{name}" x="{_num(x)}" y="{y + 4}" width="{_num(w)}" height="12">'
                f"<title>{name}: {phase.start_s:.1f} s + {phase.seconds:.1f} s</title></rect>"
            )
        end_of_training = base + _run_end(run)
        for index, attempt in enumerate(run.attempts):
            if attempt.started_s is None:
                continue
            following = run.attempts[index + 1] if index + 1 < len(run.attempts) else None
            stop = attempt.detected_s or (following.started_s if following else None) or (end_of_training - base)
            x, w = px(base + attempt.started_s), max(1.5, (stop - attempt.started_s) / span * plot_w)
            parts.append(
                f'<rect class="attempt" data-attempt="{attempt.number}" x="{_num(x)}" y="{y + 19}" width="{_num(w)}" '
                f'height="9"><title>{_bilingual(M("attempt-n", n=attempt.number))}: '
                f"{escape(attempt.cause or '-')}</title></rect>"
            )
            if attempt.number > 0:
                why = (run.attempts[index - 1].cause or "?") if index > 0 else "?"
                cause, rx = escape(why), _num(x)
                parts.append(
                    f'<g class="restart" data-node="{run.rank}" data-attempt="{attempt.number}" data-cause="{cause}">'
                    f'<line x1="{rx}" x2="{rx}" y1="{y + 1}" y2="{y + ROW_H - 3}"/>'
                    f'<text x="{_num(x + 3)}" y="{y + 40}">↻{attempt.number} {cause}</text>'
                    f"<title>{_bilingual(M('restart-n', n=attempt.number, cause=why))}</title></g>"
                )
        if run.outcome is not None and run.outcome.exit_code is not None:
            parts.append(
                f'<text class="exit {klass}" x="{_num(min(px(end_of_training) + 4, WIDTH - 56))}" y="{y + 14}">'
                f"exit {run.outcome.exit_code}</text>"
            )
        if run.culprit is not None and run.culprit.ranks:
            ranks = ",".join(str(r) for r in run.culprit.ranks)
            nodes = ",".join(str(n) for n in run.culprit.nodes)
            parts.append(
                f'<text class="culprit" x="{WIDTH - 20}" y="{y + 40}" text-anchor="end">'
                f"⚠ rank {escape(ranks)} @ node {escape(nodes)}</text>"
            )
        parts.append("</g>")
    for row, rank in enumerate(missing, start=len(runs)):
        y = top + row * ROW_H
        parts.append(
            f'<g class="node-row missing" data-node="{rank}"><text class="row-label" x="4" y="{y + 20}">node {rank}'
            f'</text><text class="missing-note" x="{LABEL_W}" y="{y + 20}">{_bilingual(M("node-no-files"))}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)
