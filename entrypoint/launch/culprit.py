"""The culprit of a stall, named across nodes.

Every node writes its stall diagnosis beside its log on the shared folder, `<node log>.stall.json`: each local
worker's global rank (read from its environment, so it is right whatever rendezvous assigned), its main-thread
frames (py-spy), whether it sits in a collective or in data loading, the data-loader workers' states, the last
step its output showed and where its flight-recorder dumps are. Node 0 asks the other nodes for theirs
(`<exp>-stall-request.json`: a worker node's own output shows no progress, so its watchdog cannot see the stall),
waits up to `GATHER_WAIT_S` for them, reads each bounded, and names the outlier: the rank(s) behind in the flight
recorder, else the rank(s) whose frames differ from the one group most ranks share. A node that sent nothing is
named as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.messages import Catalogue, Text
from entrypoint.launch.flight_recorder import ANALYSER_TIMEOUT_S, AnalyserRun, AnalyserStatus, read_bounded
from entrypoint.launch.watchdog import Diagnosis, Role, in_setup_frames, main_frames

STALL = Catalogue(
    "launch",
    {
        "culprit-named": (
            "STALL: culprit rank(s) {ranks} on node(s) {nodes}: {why}",
            "STALL:问题 rank {ranks},位于节点 {nodes}:{why}",
        ),
        "culprit-by-trace": (
            "the flight recorder shows them behind: the others entered collective #{front} ({op}), they stopped "
            "at #{back}",
            "飞行记录器显示它们落后:其余 rank 已进入第 {front} 个集合通信({op}),它们停在第 {back} 个",
        ),
        "culprit-by-stack": (
            "their stack differs from the {count} rank(s) waiting in {frame}",
            "它们的调用栈不同于在 {frame} 等待的 {count} 个 rank",
        ),
        "culprit-none": (
            "STALL: no single rank stands out ({groups} stack group(s) among {ranks} rank(s)); read the stacks above",
            "STALL:没有哪个 rank 明显异常({ranks} 个 rank 中有 {groups} 组调用栈);请查看上方调用栈",
        ),
        "fr-absent": (
            "STALL: no flight recorder here (this torch has no torch.distributed.flight_recorder): culprit from stacks",
            "STALL:此处没有飞行记录器(该 torch 没有 torch.distributed.flight_recorder):按调用栈判断问题 rank",
        ),
        "fr-no-dumps": (
            "STALL: no flight recorder here: no rank wrote a dump (gloo ranks have no dump pipe): culprit from stacks",
            "STALL:此处没有飞行记录器:没有 rank 写出转储(gloo 进程没有转储管道):按调用栈判断问题 rank",
        ),
        "fr-failed": (
            "STALL: torch's flight-recorder analyser failed (exit {code}: {last}); the dumps are in {folder}",
            "STALL:torch 的飞行记录器分析器失败(退出码 {code}:{last});转储位于 {folder}",
        ),
        "fr-timed-out": (
            "STALL: torch's flight-recorder analyser did not finish within {seconds}s; the dumps are in {folder}",
            "STALL:torch 的飞行记录器分析器在 {seconds} 秒内未完成;转储位于 {folder}",
        ),
        "culprit-setup": (
            "STALL: {count} rank(s) wait in process-group setup ({frame}): they wait for a rank that never joined, "
            "so none of them is blamed",
            "STALL:{count} 个 rank 在进程组建立阶段等待({frame}):它们在等待始终未加入的 rank,因此不归咎于它们",
        ),
        "culprit-lost": (
            "STALL: node {node} sent no diagnosis within {seconds}s and shows no sign of life for {silent}s: it is "
            "lost (its container or machine ended?)",
            "STALL:节点 {node} 在 {seconds} 秒内未提交诊断,且 {silent} 秒没有存活迹象:该节点已丢失(容器或机器已结束?)",
        ),
        "culprit-missing": (
            "STALL: node {node} sent no diagnosis within {seconds}s: look at its own log in {folder}",
            "STALL:节点 {node} 在 {seconds} 秒内未提交诊断:请查看 {folder} 中该节点自己的日志",
        ),
    },
)

REPORT_FORMAT = 1
REPORT_LIMIT = 4 << 20  # bytes of one node's diagnosis read
GATHER_WAIT_S = 30.0
CLOCK_MARGIN_S = 60.0  # nodes' clocks may differ this much
FRAMES_KEPT = 40


def report_path(node_log: Path) -> Path:
    """`<node log>.stall.json`."""
    return node_log.with_suffix(".stall.json")


def request_path(log_dir: Path, exp_name: str) -> Path:
    return log_dir / f"{exp_name}-stall-request.json"


@dataclass(frozen=True)
class RankReport:
    rank: int
    pid: int
    frames: tuple[str, ...]
    in_collective: bool
    in_dataloader: bool

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "pid": self.pid,
            "frames": list(self.frames),
            "in_collective": self.in_collective,
            "in_dataloader": self.in_dataloader,
        }


@dataclass(frozen=True)
class NodeReport:
    """One node's stall diagnosis as it travels through the shared folder."""

    node_rank: int
    ranks: tuple[RankReport, ...]
    written_at: float  # epoch seconds
    host: str = ""
    last_step: int | None = None
    silent_s: float | None = None
    loaders: tuple[dict[str, object], ...] = ()
    fr_dumps: str | None = None  # the node's dump prefix, when fresh dumps arrived there
    request: float | None = None  # the `requested_at` of node 0's request this report answers

    def to_json(self) -> dict[str, object]:
        return {
            "format": REPORT_FORMAT,
            "node_rank": self.node_rank,
            "host": self.host,
            "written_at": self.written_at,
            "last_step": self.last_step,
            "silent_s": self.silent_s,
            "ranks": [r.to_json() for r in self.ranks],
            "loaders": list(self.loaders),
            "flight_recorder_dumps": self.fr_dumps,
            "answers_request": self.request,
        }


def node_report(
    node_rank: int,
    diagnosis: Diagnosis,
    last_step: int | None,
    silent_s: float | None,
    fr_dumps: str | None,
    clock: Callable[[], float] = time.time,
    request: float | None = None,
) -> NodeReport:
    """This node's report from its local diagnosis; `request`: node 0's request it answers."""
    ranks = tuple(
        RankReport(
            rank,
            pid,
            main_frames(diagnosis.stacks.get(str(pid), ""))[:FRAMES_KEPT],
            pid in diagnosis.in_collective,
            pid in diagnosis.in_dataloader,
        )
        for pid, rank in sorted(diagnosis.ranks.items(), key=lambda item: item[1])
    )
    loaders = tuple(
        {
            "pid": p.pid,
            "ppid": p.ppid,
            "state": p.state,
            "wchan": p.wchan,
            "in_dataloader": p.pid in diagnosis.in_dataloader,
        }
        for p in diagnosis.processes
        if p.role is Role.WORKER_CHILD
    )
    host = socket.gethostname()
    return NodeReport(node_rank, ranks, clock(), host, last_step, silent_s, loaders, fr_dumps, request)


def write_json(path: Path, body: Mapping[str, object]) -> bool:
    """Atomically (temp file + rename); False when the shared folder refused it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(body, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


def write_report(report: NodeReport, node_log: Path) -> bool:
    """Every node, on a stall (its own or node 0's request): its report beside its log."""
    return write_json(report_path(node_log), report.to_json())


def request_reports(log_dir: Path, exp_name: str, clock: Callable[[], float] = time.time) -> bool:
    """Node 0, on a stall: ask every other node for its report."""
    return write_json(request_path(log_dir, exp_name), {"format": REPORT_FORMAT, "requested_at": clock()})


def requested_since(log_dir: Path, exp_name: str, since: float) -> float | None:
    """A worker node, polled while training runs: the time of node 0's request when it is newer than `since`
    (epoch seconds, this node's start), else None. One stat and at most one small bounded read."""
    path = request_path(log_dir, exp_name)
    try:
        if path.stat().st_mtime < since - CLOCK_MARGIN_S:
            return None
    except OSError:
        return None
    body = _json(path)
    at = body.get("requested_at") if body else None
    return float(at) if isinstance(at, (int, float)) and at >= since - CLOCK_MARGIN_S else None


def _json(path: Path) -> dict[str, object] | None:
    data = read_bounded(path, REPORT_LIMIT)
    if data is None:
        return None
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31 else None


def parse_report(body: Mapping[str, object]) -> NodeReport | None:
    """A report read back; None when it is not one of ours."""
    node, written = _int(body.get("node_rank")), body.get("written_at")
    raw_ranks = body.get("ranks")
    if body.get("format") != REPORT_FORMAT or node is None or not isinstance(written, (int, float)):
        return None
    if not isinstance(raw_ranks, list):
        return None
    ranks = []
    for item in raw_ranks[:4096]:
        if not isinstance(item, dict) or _int(item.get("rank")) is None:
            continue
        frames = item.get("frames")
        frames_kept = tuple(str(f)[:300] for f in frames[:FRAMES_KEPT]) if isinstance(frames, list) else ()
        ranks.append(
            RankReport(
                item["rank"],
                _int(item.get("pid")) or 0,
                frames_kept,
                item.get("in_collective") is True,
                item.get("in_dataloader") is True,
            )
        )
    dumps = body.get("flight_recorder_dumps")
    step = _int(body.get("last_step"))
    answers = body.get("answers_request")
    return NodeReport(
        node,
        tuple(ranks),
        float(written),
        str(body.get("host", ""))[:100],
        step,
        None,
        (),
        dumps if isinstance(dumps, str) else None,
        float(answers) if isinstance(answers, (int, float)) and not isinstance(answers, bool) else None,
    )


@dataclass(frozen=True)
class Gathered:
    reports: dict[int, NodeReport]  # node rank -> its report
    missing: list[int]  # nodes that sent none in time


def gather(
    log_dir: Path,
    exp_name: str,
    nnodes: int,
    since: float,
    wait_s: float = GATHER_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
    known: Mapping[int, NodeReport] | None = None,
    request: float | None = None,
) -> Gathered:
    """Node 0: every node's newest report written after `since` (epoch seconds, less a clock margin), waiting up to
    `wait_s` for the missing ones. `known`: reports already in hand (node 0's own), not read back; `request`: only
    reports answering this request count (an earlier stall's reports are older answers). Files that are not reports
    (FIFOs, folders, huge or malformed files) are skipped without blocking."""
    deadline = clock() + wait_s
    while True:
        found = _scan(log_dir, exp_name, nnodes, since - CLOCK_MARGIN_S)
        if request is not None:
            found = {n: r for n, r in found.items() if r.request == request}
        reports = {**found, **(known or {})}
        missing = [n for n in range(nnodes) if n not in reports]
        if not missing or clock() >= deadline:
            return Gathered(reports, missing)
        pause(1.0)


def _scan(log_dir: Path, exp_name: str, nnodes: int, since: float) -> dict[int, NodeReport]:
    found: dict[int, NodeReport] = {}
    try:
        names = [e.name for e in os.scandir(log_dir)]
    except OSError:
        return found
    for node in range(nnodes):
        stem = f"{exp_name}-node{node}-"
        for name in names:
            if not (name.startswith(stem) and name.endswith(".stall.json")):
                continue
            body = _json(log_dir / name)
            report = parse_report(body) if body else None
            if report is None or report.node_rank != node or report.written_at < since:
                continue
            if node not in found or report.written_at > found[node].written_at:
                found[node] = report
    return found


class Method(StrEnum):
    FLIGHT_RECORDER = "flight-recorder"
    STACKS = "stacks"
    NONE = "none"


@dataclass(frozen=True)
class Culprit:
    """The record's `stall.culprit`."""

    method: Method
    ranks: list[int]
    nodes: list[int]
    why: Text | None
    groups: list[dict[str, object]] = field(default_factory=list)
    missing_nodes: list[int] = field(default_factory=list)
    setup_ranks: list[int] = field(default_factory=list)  # waiting in process-group setup: never the culprit
    silent_nodes: dict[int, float] = field(default_factory=dict)  # missing nodes with no sign of life: seconds

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method.value,
            "ranks": self.ranks,
            "nodes": self.nodes,
            "why": self.why.en if self.why else None,
            "stack_groups": self.groups,
            "missing_nodes": self.missing_nodes,
            "setup_ranks": self.setup_ranks,
            "lost_nodes": sorted(self.silent_nodes),
        }


def name_culprit(gathered: Gathered, trace_behind: Mapping[int, tuple[int, int, str]] | None = None) -> Culprit:
    """Name the outlier ranks and their nodes. `trace_behind`: from the flight recorder, rank -> (its last entered
    collective, the front's, the front's op), for the ranks behind; it wins over stacks. A rank waiting in
    process-group setup (`watchdog.SETUP_FRAMES`: for a connection, the store, a rendezvous) is never the culprit:
    it waits for a rank that is missing, so when any rank is there, stacks name nobody."""
    node_of = {r.rank: node for node, rep in gathered.reports.items() for r in rep.ranks}
    by_frames: dict[tuple[str, ...], list[int]] = {}
    for rep in gathered.reports.values():
        for r in rep.ranks:
            if r.frames:
                by_frames.setdefault(r.frames, []).append(r.rank)
    groups = sorted(by_frames.items(), key=lambda item: (-len(item[1]), min(item[1])))
    shown: list[dict[str, object]] = [{"frame": frames[0], "ranks": sorted(ranks)} for frames, ranks in groups]
    missing = list(gathered.missing)
    setup = sorted(r for frames, members in groups if in_setup_frames(frames) for r in members)
    if trace_behind and not set(trace_behind) & set(setup):
        ranks = sorted(trace_behind)
        back, front, op = trace_behind[ranks[0]]
        why = STALL("culprit-by-trace", front=front, op=op, back=back)
        return Culprit(Method.FLIGHT_RECORDER, ranks, _nodes(ranks, node_of), why, shown, missing)
    sizes = Counter(len(ranks) for _, ranks in groups)
    if not setup and len(groups) >= 2 and sizes[len(groups[0][1])] == 1:
        dominant_frames, dominant = groups[0]
        ranks = sorted(r for _, members in groups[1:] for r in members)
        why = STALL("culprit-by-stack", count=len(dominant), frame=dominant_frames[0])
        return Culprit(Method.STACKS, ranks, _nodes(ranks, node_of), why, shown, missing)
    if setup:
        frame = next(frames[0] for frames, members in groups if in_setup_frames(frames))
        why = STALL("culprit-setup", count=len(setup), frame=frame)
        return Culprit(Method.NONE, [], [], why, shown, missing, setup)
    return Culprit(Method.NONE, [], [], None, shown, missing)


def _nodes(ranks: list[int], node_of: Mapping[int, int]) -> list[int]:
    return sorted({node_of[r] for r in ranks if r in node_of})


def culprit_lines(culprit: Culprit, wait_s: float, folder: str) -> list[Text]:
    """The lines for the node log and the final summary: a missing node with no sign of life (`silent_nodes`) is
    named lost."""
    lines = []
    for node in culprit.missing_nodes:
        silent = culprit.silent_nodes.get(node)
        if silent is not None:
            lines.append(STALL("culprit-lost", node=node, seconds=f"{wait_s:.0f}", silent=f"{silent:.0f}"))
        else:
            lines.append(STALL("culprit-missing", node=node, seconds=f"{wait_s:.0f}", folder=folder))
    if culprit.setup_ranks and culprit.why is not None:
        lines.append(culprit.why)
    elif culprit.why is not None:
        nodes = ", ".join(map(str, culprit.nodes)) or "?"
        lines.append(STALL("culprit-named", ranks=", ".join(map(str, culprit.ranks)), nodes=nodes, why=culprit.why))
    else:
        count = sum(len(g["ranks"]) for g in culprit.groups if isinstance(g["ranks"], list))
        lines.append(STALL("culprit-none", groups=len(culprit.groups), ranks=count))
    return lines


def analyser_line(run: AnalyserRun | None, folder: str) -> Text | None:
    """One line on what torch's analyser made of the dumps (None when it ran cleanly; its output is in the record);
    `run` None: no dump arrived."""
    if run is None:
        return STALL("fr-no-dumps")
    if run.status is AnalyserStatus.ABSENT:
        return STALL("fr-absent")
    if run.status is AnalyserStatus.TIMED_OUT:
        return STALL("fr-timed-out", seconds=ANALYSER_TIMEOUT_S, folder=folder)
    if run.status in (AnalyserStatus.FAILED, AnalyserStatus.NO_PYTHON):
        last = run.tail[-1] if run.tail else "-"
        return STALL("fr-failed", code=run.exit_code if run.exit_code is not None else "-", last=last, folder=folder)
    return None
