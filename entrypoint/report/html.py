"""The report as one self-contained HTML page: inline CSS and SVG, no script, no font, no image, no link to load.

The first element of the body is the cause line (both languages); then the files that could not be read fully,
the timeline per node with each run's phases and attempts, the loss and step-time charts, the checkpoints saved,
the exit codes, the transport NCCL used, TACO, the health checks (when a record has them) and each run's last log
lines. Every heading is in English and Chinese. Everything taken from the files is escaped; the page's size is
bounded by the collector's limits (runs, points, lines, string lengths).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Sequence
from html import escape

from entrypoint.core.messages import Text
from entrypoint.report.charts import Series, line_chart, timeline
from entrypoint.report.collect import Experiment
from entrypoint.report.messages import MESSAGES as M

GENERATOR = '<meta name="generator" content="vla-entrypoint report">'  # how a page of ours is told from others
CSS = """
:root{color-scheme:light;--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--ok:#15803d;--fail:#b91c1c;--warn:#b45309}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans","PingFang SC","Microsoft YaHei",sans-serif;
color:var(--ink);margin:0 auto;padding:16px 24px 40px;max-width:1020px;background:#fff}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}h3{font-size:14px;margin:16px 0 6px}
.cause{font-size:15px;padding:12px 14px;border-radius:6px;margin:0;border-left:6px solid var(--muted);
background:#f9fafb;white-space:pre-wrap;overflow-wrap:anywhere}
.cause.ok{border-color:var(--ok);background:#f0fdf4}.cause.fail{border-color:var(--fail);background:#fef2f2}
.cause.unknown{border-color:var(--warn);background:#fffbeb}
.zh{color:#374151}.meta{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f3f4f6;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:var(--ok)}.fail{color:var(--fail)}.unknown{color:var(--warn)}
ul.problems li{color:var(--warn);overflow-wrap:anywhere}
pre{background:#f9fafb;border:1px solid var(--line);padding:8px;font-size:12px;overflow-x:auto;
white-space:pre-wrap;overflow-wrap:anywhere}
svg{display:block;max-width:100%;height:auto;font:11px system-ui,sans-serif}
svg .plot{fill:#fff;stroke:#d1d5db}svg .grid{stroke:#f1f5f9}svg .tick{fill:var(--muted)}
svg .axis{fill:var(--ink);font-size:12px}svg .series{fill:none;stroke-width:1.6}
svg .restart-mark{stroke-dasharray:4 3;stroke-width:1}
svg .row-label{fill:var(--ink);font-size:12px}svg .phase{fill:#93c5fd}svg .phase-training{fill:#60a5fa}
svg .phase-plan{fill:#c4b5fd}svg .phase-taco{fill:#fcd34d}svg .phase-master{fill:#fdba74}
svg .phase-preflight{fill:#6ee7b7}svg .attempt{fill:#a7f3d0;stroke:#047857;stroke-width:.5}
svg .restart line{stroke:var(--fail);stroke-width:2}svg .restart text{fill:var(--fail);font-size:10px}
svg .exit.ok{fill:var(--ok)}svg .exit.fail{fill:var(--fail)}svg .culprit{fill:var(--fail);font-weight:600}
svg .missing-note{fill:var(--warn)}
.legend{font-size:12px;color:var(--muted)}.key{margin-right:14px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
footer{margin-top:32px;color:var(--muted);font-size:12px}
"""


def _h(text: Text) -> str:
    return f"{escape(text.en)} · {escape(text.zh)}"


def _both(text: Text) -> str:
    return f'{escape(text.en)}<br><span class="zh">{escape(text.zh)}</span>'


def _cell(value: object) -> str:
    if value is None or value == "":
        return "<td>-</td>"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        shown = f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
        return f'<td class="num">{escape(shown)}</td>'
    return f"<td>{escape(str(value))}</td>"


def table(header: Sequence[Text], rows: Iterable[Sequence[object]], table_id: str = "") -> str:
    ident = f' id="{table_id}"' if table_id else ""
    head = "".join(f"<th>{_h(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(section_id: str, heading: Text, body: str) -> str:
    return f'<section id="{section_id}"><h2>{_h(heading)}</h2>{body}</section>'


def page(experiment: Experiment, summary: Text, generated_at: float | None = None) -> str:
    """The whole page."""
    latest = experiment.latest()
    outcomes = [r.outcome for r in latest.values()]
    if outcomes and all(o is not None and o.ok for o in outcomes) and not experiment.missing_nodes:
        state = "ok"
    elif any(o is not None and o.exit_code not in (0, None) for o in outcomes) or not latest:
        state = "fail"
    else:
        state = "unknown"
    when = time.strftime(
        "%Y-%m-%d %H:%M:%S UTC", time.gmtime(generated_at if generated_at is not None else time.time())
    )
    meta = M(
        "meta",
        exp=experiment.exp_name,
        folder=str(experiment.folder),
        runs=len(experiment.runs),
        nodes=len(experiment.nodes()),
        when=when,
    )
    sections = [
        f'<p id="cause" class="cause {state}">{_both(summary)}</p>',
        f"<h1>{_h(M('h-title'))} — {escape(experiment.exp_name)}</h1>",
        f'<p class="meta">{_both(meta)}</p>',
        _problems(experiment),
        _section("timeline", M("h-timeline"), timeline(experiment) + _node_details(experiment)),
        _section("charts", M("h-charts"), _charts(experiment)),
        _section("checkpoints", M("h-checkpoints"), _checkpoints(experiment)),
        _section("exit-codes", M("h-exit-codes"), _exit_codes(experiment)),
        _section("transport", M("h-transport"), _transport(experiment)),
        _section("taco", M("h-taco"), _taco(experiment)),
        _health(experiment),
        _section("last-lines", M("h-last-lines"), _last_lines(experiment)),
        f"<footer>{_both(M('footer'))}</footer>",
    ]
    title = escape(f"{experiment.exp_name} — vla-entrypoint report")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{GENERATOR}'
        f"<title>{title}</title><style>{CSS}</style></head><body>"
        + "".join(s for s in sections if s)
        + "</body></html>\n"
    )


def _problems(experiment: Experiment) -> str:
    found: list[tuple[str, Text]] = [("", p) for p in experiment.problems]
    found += [(run.label, p) for run in experiment.runs for p in run.problems]
    if experiment.older_runs:
        found.append(("", M("older-runs", count=experiment.older_runs)))
    for rank in experiment.missing_nodes:
        found.append((f"node {rank}", M("node-no-files")))
    if not found:
        return ""
    items = "".join(
        f"<li>{escape(label + ': ') if label else ''}{_both(problem)}</li>" for label, problem in found[:200]
    )
    more = f"<li>{_both(M('more-problems', count=len(found) - 200))}</li>" if len(found) > 200 else ""
    return _section("problems", M("h-problems"), f'<ul class="problems">{items}{more}</ul>')


def _node_details(experiment: Experiment) -> str:
    parts = []
    for run in sorted(experiment.runs, key=lambda r: (r.rank, r.stamp)):
        rows = [(p.name, p.start_s, p.seconds) for p in run.phases]
        phases = table([M("col-phase"), M("col-start-s"), M("col-duration-s")], rows) if rows else ""
        attempts = ""
        if run.attempts:
            attempts = table(
                [
                    M("col-attempt"),
                    M("col-start-s"),
                    M("col-detected-s"),
                    M("col-cause"),
                    M("col-resumed"),
                    M("col-best-step"),
                    M("col-detail"),
                ],
                [
                    (a.number, a.started_s, a.detected_s, a.cause, a.resumed_step, a.best_step, a.detail)
                    for a in run.attempts
                ],
            )
        culprit = ""
        if run.culprit is not None:
            text = M(
                "culprit",
                ranks=", ".join(map(str, run.culprit.ranks)) or "-",
                nodes=", ".join(map(str, run.culprit.nodes)) or "-",
                why=run.culprit.why or "-",
            )
            culprit = f'<p class="fail">{_both(text)}</p>'
        stall = ""
        if run.stall_report is not None:
            report = run.stall_report
            said = M(
                "stall-report",
                ranks=_list(report.get("ranks")),
                collective=_list(report.get("in_collective")),
                loading=_list(report.get("in_dataloader")),
            )
            stall = f"<p>{_both(said)}</p>"
        host = f" ({escape(run.host)})" if run.host else ""
        parts.append(
            f'<details class="node" data-node="{run.rank}" open><summary><b>{escape(run.label)}</b>{host}</summary>'
            f"{phases}{attempts}{culprit}{stall}</details>"
        )
    return "".join(parts)


def _list(value: object) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) and value else "-"


def _charts(experiment: Experiment) -> str:
    loss, step_time = [], []
    for run in experiment.runs:
        if run.scan is None or not run.scan.points:
            continue
        points = run.scan.points
        restarts = [float(p.step) for prev, p in itertools.pairwise(points) if p.attempt != prev.attempt]
        timed = [(float(p.step), p.step_time) for p in points if p.step_time is not None and p.step_time > 0]
        loss.append(Series(run.label, [(float(p.step), p.loss) for p in points if p.loss is not None], restarts))
        step_time.append(Series(run.label, timed, restarts))
    return line_chart("loss-chart", M("h-loss"), M("axis-loss"), M("axis-step"), loss) + line_chart(
        "step-time-chart", M("h-step-time"), M("axis-step-time"), M("axis-step"), step_time
    )


def _checkpoints(experiment: Experiment) -> str:
    rows = []
    for run in experiment.runs:
        saved = dict(run.checkpoints)
        if run.scan is not None:
            for step, path in run.scan.saves:
                saved.setdefault(step, path)
        rows += [(run.label, step, path) for step, path in sorted(saved.items())]
    if not rows:
        return f'<p class="empty">{_both(M("no-checkpoints"))}</p>'
    return table([M("col-run"), M("col-step"), M("col-path")], rows[:2000], "checkpoints-table")


def _exit_codes(experiment: Experiment) -> str:
    rows = []
    for run in sorted(experiment.runs, key=lambda r: (r.rank, r.stamp)):
        out = run.outcome
        rows.append(
            (
                run.label,
                run.host,
                out.exit_code if out else None,
                out.klass if out else M("no-outcome").en,
                (out.verdict if out else None) or run.gave_up,
                out.root_cause if out else None,
                run.last_step,
            )
        )
    for rank in experiment.missing_nodes:
        rows.append((f"node {rank}", None, None, M("node-no-files").en, None, None, None))
    header = [
        M("col-run"),
        M("col-host"),
        M("col-exit-code"),
        M("col-class"),
        M("col-verdict"),
        M("col-root-cause"),
        M("col-last-step"),
    ]
    return table(header, rows, "exit-codes-table")


def _transport(experiment: Experiment) -> str:
    rows = [
        (run.label, t["host"], t["kind"], t["net"], t["gdr_channels"], t["nics"], t["nccl_version"])
        for run in experiment.runs
        for t in run.transport
    ]
    if not rows:
        return f'<p class="empty">{_both(M("no-transport"))}</p>'
    header = [M("col-run"), M("col-host"), M("col-kind"), M("col-net"), M("col-gdr"), M("col-nics"), M("col-nccl")]
    return table(header, rows)


def _taco(experiment: Experiment) -> str:
    rows = [
        (run.label, run.taco["status"], run.taco["verdict"], f"{run.taco['message']} / {run.taco['message_zh']}")
        for run in experiment.runs
        if run.taco is not None
    ]
    if not rows:
        return f'<p class="empty">{_both(M("no-taco"))}</p>'
    return table([M("col-run"), M("col-status"), M("col-verdict"), M("col-message")], rows)


def _health(experiment: Experiment) -> str:
    runs = [run for run in experiment.runs if run.health is not None]
    if not runs:
        return ""
    parts = []
    for run in runs:
        parts.append(f"<h3>{escape(run.label)}</h3>{_generic(run.health)}")
    return _section("health", M("h-health"), "".join(parts))


def _generic(value: object) -> str:
    """A health record of any shape: a list of objects as a table of their keys, an object as key/value rows."""
    if isinstance(value, dict):
        checks = value.get("checks")
        if isinstance(checks, list) and checks and all(isinstance(c, dict) for c in checks):
            rest = {k: v for k, v in value.items() if k != "checks"}
            return (_generic(rest) if rest else "") + _generic(checks)
        rows = [(str(k), _flat(v)) for k, v in value.items()]
        return table([M("col-key"), M("col-value")], rows)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys: list[str] = []
        for item in value:
            keys += [str(k) for k in item if str(k) not in keys]
        keys = keys[:10]
        head = "".join(f"<th>{escape(k)}</th>" for k in keys)
        body = "".join(
            "<tr>" + "".join(_cell(_flat(item.get(k))) for k in keys) + "</tr>"
            for item in value
            if isinstance(item, dict)
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<pre>{escape(_flat(value))}</pre>"


def _flat(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)[:1000]


def _last_lines(experiment: Experiment) -> str:
    parts = []
    for run in sorted(experiment.runs, key=lambda r: (r.rank, r.stamp)):
        if run.scan is None or not run.scan.last_lines:
            continue
        parts.append(f"<h3>{escape(run.label)}</h3><pre>{escape(chr(10).join(run.scan.last_lines))}</pre>")
    return "".join(parts) or f'<p class="empty">{_both(M("no-lines"))}</p>'
