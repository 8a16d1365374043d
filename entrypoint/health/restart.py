"""The gate before an in-job restart, run by the attempt shim (`launch/attempt.py`) of every worker of a restarted
attempt, before any of them touches a GPU.

Local rank 0 runs the gate for the whole node: the passive tier always, the active tier too when the attempt that
ended was blamed on this node (`blamed_nodes`: its own workers died without a Python exception, an exception names a
GPU error, or node 0's stall diagnosis named this node). Blame comes from the launchers' notes,
`<attempts folder>/<n>.ended.json` (this node's own, waited for up to `BLAME_WAIT_S`, and the other nodes' of this
run). Local rank 0 writes the verdict, `<attempts folder>/<restart>.health.json`; the other local ranks wait for it
(bounded) and follow it. A node that fails ends every worker with `DO_NOT_REQUEUE` (93), and its launcher ends the
job with the cause and the advice to resubmit: in-job restarts run on the same machine, a new TI-ONE job gets new
ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from entrypoint.core.errors import ExitCode
from entrypoint.core.files import FileRefused, read_all
from entrypoint.core.findings import Status
from entrypoint.core.host import Host
from entrypoint.core.messages import Text, joined, language, render
from entrypoint.core.report import health_summary
from entrypoint.core.settings import Device, HealthMode
from entrypoint.health.gate import Context, GateResult, run_gate, this_host
from entrypoint.health.messages import MESSAGES as M
from entrypoint.health.spec import HealthGate, gate_spec
from entrypoint.health.verdict import Node

NOTE_SUFFIX = ".ended.json"
VERDICT_SUFFIX = ".health.json"
BLAME_WAIT_S = 5.0
VERDICT_MARGIN_S = 15.0
NOTE_LIMIT = 64 << 10
LEAD = "vla-entrypoint: "
# An exception that names a GPU or driver fault (not the trainer's own bug, which fails the same way twice).
GPU_ERROR = re.compile(
    r"CUDA error|CUDA driver error|cudaError|CUBLAS_STATUS_EXECUTION_FAILED|uncorrectable ECC|ECC error|\bXid\b"
    r"|GPU is lost|fallen off the bus|unspecified launch failure|illegal memory access|NVML|Cuda failure",
    re.IGNORECASE,
)


def blamed_nodes(cause: str, detail: str | None, node_rank: int, culprit_nodes: Sequence[int] = ()) -> list[int]:
    """The nodes a failed attempt is blamed on, as the node that saw it judges: a stall's culprit nodes (node 0),
    this node when its own workers died without a Python exception or with one that names a GPU fault."""
    if cause == "stall":
        return sorted(set(culprit_nodes))
    if cause == "worker-exited" or (detail is not None and GPU_ERROR.search(detail)):
        return [node_rank]
    return []


def _write_json(path: Path, body: Mapping[str, object]) -> bool:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        body = json.loads(read_all(path, NOTE_LIMIT))
    except (FileRefused, ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def write_note(
    facts_dir: Path, attempt: int, cause: str, detail: str | None, node_rank: int, blamed: Sequence[int]
) -> None:
    """The launcher's note on an ended attempt (`<n>.ended.json`); a storage problem is ignored."""
    body = {"attempt": attempt, "cause": cause, "detail": detail, "node_rank": node_rank, "blamed_nodes": list(blamed)}
    _write_json(facts_dir / f"{attempt}{NOTE_SUFFIX}", body)


def _peer_folders(facts_dir: Path, node_rank: int) -> list[Path]:
    """The other nodes' attempts folders of this run (same experiment prefix, written since this node's first
    attempt)."""
    cut = facts_dir.name.rfind(f"-node{node_rank}-")
    if cut < 0:
        return []
    prefix = facts_dir.name[:cut] + "-node"
    try:
        since = (facts_dir / "0.json").stat().st_mtime
        names = [e.name for e in os.scandir(facts_dir.parent) if e.name.endswith(".attempts")]
    except OSError:
        return []
    folders = []
    for name in names:
        folder = facts_dir.parent / name
        if name.startswith(prefix) and name != facts_dir.name:
            with contextlib.suppress(OSError):
                if folder.stat().st_mtime >= since - 60:
                    folders.append(folder)
    return folders


def blamed_here(
    facts_dir: Path,
    previous: int,
    node_rank: int,
    wait_s: float = BLAME_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> bool:
    """Whether attempt `previous` was blamed on this node, by this node's note (waited for) or another node's."""
    own = facts_dir / f"{previous}{NOTE_SUFFIX}"
    deadline = clock() + wait_s
    while not own.exists() and clock() < deadline:
        pause(0.1)
    for path in [own, *(folder / own.name for folder in _peer_folders(facts_dir, node_rank))]:
        note = _read_json(path)
        blamed = note.get("blamed_nodes") if note else None
        if isinstance(blamed, list) and node_rank in blamed:
            return True
    return False


def verdict_path(facts_dir: Path, restart: int) -> Path:
    return facts_dir / f"{restart}{VERDICT_SUFFIX}"


def node_fault(facts_dir: Path) -> Text | None:
    """The message of this node's failed restart gate, when one failed during this run."""
    try:
        names = sorted(n for n in os.listdir(facts_dir) if n.endswith(VERDICT_SUFFIX) and n[:1].isdigit())
    except OSError:
        return None
    for name in names:
        body = _read_json(facts_dir / name)
        message = body.get("message") if body else None
        if body and body.get("status") == Status.FAIL.value and isinstance(message, dict):
            return Text(str(message.get("en", ""))[:4000], str(message.get("zh", ""))[:4000])
    return None


def _spec(mode: str, env: Mapping[str, str]) -> tuple[HealthGate, Node]:
    local = int(env.get("LOCAL_WORLD_SIZE", "1") or 1)
    world = int(env.get("WORLD_SIZE", str(local)) or local)
    nnodes = max(1, world // max(1, local))
    node = Node(int(env.get("GROUP_RANK", "0") or 0), this_host(), local, nnodes)
    return gate_spec(HealthMode(mode), Device.GPU, nnodes, local, True), node


def _fault_text(result: GateResult, restart: int) -> Text:
    failing = [f.message for f in result.findings if f.status is Status.FAIL]
    serials = result.faulty_serials()
    listed = M("restart-serials", serials=", ".join(serials)) if serials else ""
    return M(
        "restart-fault",
        node=result.node.label,
        n=restart,
        cause=joined(failing, "; "),
        serials=listed,
        code=int(ExitCode.DO_NOT_REQUEUE),
    )


def _follow(facts_dir: Path, restart: int, spec: HealthGate, out: TextIO, env: Mapping[str, str]) -> int:
    """A local rank other than 0: wait for local rank 0's verdict, bounded, and follow it."""
    path = verdict_path(facts_dir, restart)
    bound = spec.passive_timeout_s + BLAME_WAIT_S + spec.active_timeout_s + VERDICT_MARGIN_S
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        body = _read_json(path) if path.exists() else None
        if body is not None:
            if body.get("status") == Status.FAIL.value:
                out.write(render(M("restart-peer-fault", n=restart), language(env), lead=LEAD) + "\n")
                return int(ExitCode.DO_NOT_REQUEUE)
            return 0
        time.sleep(0.1)
    out.write(render(M("restart-no-verdict", seconds=f"{bound:g}", n=restart), language(env), lead=LEAD) + "\n")
    return 0


def gate_restart(facts_dir: Path, restart: int, mode: str, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Before restart `restart` of this node's workers: 0 to go on, `DO_NOT_REQUEUE` when this node is faulty."""
    spec, node = _spec(mode, env)
    if env.get("LOCAL_RANK", "0") != "0":
        return _follow(facts_dir, restart, spec, out, env)
    lang = language(env)
    blamed = blamed_here(facts_dir, restart - 1, node.rank)
    cut = facts_dir.name.rfind(f"-node{node.rank}-")
    try:
        since = (facts_dir / "0.json").stat().st_mtime
    except OSError:
        since = time.time() - 24 * 3600
    context = Context(
        spec=spec,
        node=node,
        host=Host.current(env),
        env=env,
        share=facts_dir.with_suffix(VERDICT_SUFFIX),
        log_dir=facts_dir.parent,
        exp_name=facts_dir.name[:cut] if cut > 0 else facts_dir.name,
        since=since,
        python=sys.executable,
        stage=f"restart-{restart}",
    )
    result = run_gate(context, active=blamed, wait_s=0.0)
    tiers = M("tiers-active" if blamed else "tiers-passive")
    health_summary(result.findings, M("heading").en, lang, out)
    body: dict[str, object] = {"status": result.status.value, "restart": restart, "blamed": blamed, **result.to_json()}
    if result.failed:
        message = _fault_text(result, restart)
        body["message"] = message.to_json()
        _write_json(verdict_path(facts_dir, restart), body)
        out.write(render(message, lang, lead=LEAD) + "\n")
        out.flush()
        return int(ExitCode.DO_NOT_REQUEUE)
    _write_json(verdict_path(facts_dir, restart), body)
    verdict = M("verdict-warn" if result.status is Status.WARN else "verdict-pass")
    out.write(render(M("restart-gate", n=restart, tiers=tiers, verdict=verdict), lang, lead=LEAD) + "\n")
    out.flush()
    return 0
