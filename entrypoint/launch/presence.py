"""Which nodes of this run are alive, and how the job ended: one small folder per run in the shared log folder.

`<log_dir>/.runs/<exp>-<digest>/` (`run_folder`: the digest of TI-ONE's job variables, the same on every node)
holds one beat file per node and, once any node ends the job, `end.json`:
- `node<k>.<token>.<attempt>.<seq>`: node k's launcher renames its beat every `BEAT_S` (token: random, one per
  launcher process; attempt: its torchrun's current attempt), from its start to its end; a clean end (exit 0)
  renames it `node<k>.<token>.done`;
- `end.json`: exit code, outcome class, cause (both languages), the node and host that ended the job, the lost
  nodes. The first node to end the job writes it; every other node adopts it (`announce` returns the one that
  stands), so every node ends with the same code and cause.

A node lists the folder once per poll (`look`: one directory read, names only, never a stat; plus one stat and
one read of `end.json` when the listing shows it): every node's beat and the job's end are in that one listing.
The folder is this run's only, so the cost does not grow with earlier runs, and the listing holds one name per
node. Liveness uses the observer's own clock: a node is lost when its beat name has not changed for `lost_after`
seconds (`VLA_RENDEZVOUS_TIMEOUT`), counted from this node's start for a node never seen; nodes' clocks never
matter. Once this node's workers failed (`failed_at`: a lost node's ranks make the others' collectives fail), a node
silent since before the failure is lost after `AFTER_FAILURE_S` already: the job is ending or restarting anyway, and
a restart would wait for that node's ranks. `end.json` counts only when written during this run (its time at or
after this process's start, less `CLOCK_SKEW_S`: an earlier try of the same job left it). A network file system may
show a change to other machines late (NFS caches a folder's attributes up to 60 s): the bounds stay above that.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.errors import ExitCode
from entrypoint.core.files import FileRefused, read_all
from entrypoint.core.messages import Catalogue, Text, joined
from entrypoint.inspect.seal import CLOCK_SKEW_S, JOB_VARIABLES

RUNS_FOLDER = ".runs"
END_FILE = "end.json"
END_LIMIT = 64 << 10  # an end record is a few hundred bytes
BEAT_S = 2.0  # how often a node renames its beat
# Once this node's workers failed: a node silent since before that is lost after this (or `lost_after`, if shorter).
# Above the 60 s a network file system may take to show a change (NFS caches a folder's attributes that long).
AFTER_FAILURE_S = 60.0
DONE = "done"
NODE_LOST_CLASS = "node-lost"  # the start-up record's `outcome.class` when a node was lost

PRESENCE = Catalogue(
    "launch",
    {
        "lost": (
            "NODE LOST: {nodes}; no sign of life within the bound ({bound} s: VLA_RENDEZVOUS_TIMEOUT={setting} s, "
            "or {after} s once training failed; beats in {folder}): every node ends with exit code {code}; resubmit "
            "the job (new machines) and it resumes from the newest checkpoint",
            "节点丢失:{nodes};在时限内没有存活迹象({bound} 秒:VLA_RENDEZVOUS_TIMEOUT={setting} 秒,训练失败后为 "
            "{after} 秒;心跳位于 {folder}):"
            "所有节点以退出码 {code} 结束;请重新提交任务(换新机器),它会从最新的检查点继续",
        ),
        "lost-never": (
            "node {node} ({host}) never showed up in {seconds} s",
            "节点 {node}({host})在 {seconds} 秒内从未出现",
        ),
        "lost-silent": (
            "node {node} ({host}) stopped: last seen {seconds} s ago",
            "节点 {node}({host})已停止:最后一次出现在 {seconds} 秒前",
        ),
    },
)


def run_folder(log_dir: Path, exp_name: str, env: Mapping[str, str]) -> Path | None:
    """This run's folder; None outside a multi-node TI-ONE job (nothing to share)."""
    try:
        nodes = int(env.get("WORLD_SIZE", "1")[:6])
    except ValueError:
        return None
    if nodes < 2 or not env.get("MASTER_ADDR"):
        return None
    text = "\n".join([*(f"{name}={env.get(name, '')[:4096]}" for name in JOB_VARIABLES), exp_name])
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return log_dir / RUNS_FOLDER / f"{exp_name}-{digest}"


def node_hosts(env: Mapping[str, str], nnodes: int) -> list[str]:
    """Each node's host from TI-ONE's `NODE_LIST` (`host:gpus,…`, in node-rank order); `?` where it says none."""
    entries = [e.strip().rpartition(":")[0] for e in env.get("NODE_LIST", "").split(",") if e.strip()]
    return [entries[n] if n < len(entries) and entries[n] else "?" for n in range(nnodes)]


@dataclass(frozen=True)
class Beat:
    """One node's beat as its name says: `attempt` None once the node ended cleanly."""

    node: int
    token: str
    attempt: int | None
    seq: int

    @property
    def name(self) -> str:
        tail = DONE if self.attempt is None else f"{self.attempt}.{self.seq}"
        return f"node{self.node}.{self.token}.{tail}"


def parse_beat(name: str) -> Beat | None:
    parts = name.split(".")
    if len(parts) not in (3, 4) or not parts[0].startswith("node") or not parts[0][4:].isdigit():
        return None
    node, token = int(parts[0][4:]), parts[1]
    if len(parts) == 3:
        return Beat(node, token, None, 0) if parts[2] == DONE else None
    if not (parts[2].isdigit() and parts[3].isdigit()):
        return None
    return Beat(node, token, int(parts[2]), int(parts[3]))


@dataclass(frozen=True)
class LostNode:
    node: int
    host: str
    silent_s: float
    never_seen: bool  # no beat of it in this run's folder
    bound_s: float = 0.0  # the bound it was judged by

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "host": self.host,
            "silent_s": round(self.silent_s, 1),
            "never_seen": self.never_seen,
            "bound_s": self.bound_s,
        }


@dataclass(frozen=True)
class JobEnd:
    """How the job ended, as the node that ended it said (`end.json`)."""

    code: int
    outcome: str  # the start-up record's `outcome.class`
    cause: Text
    node: int
    host: str
    lost: tuple[LostNode, ...] = ()
    verdict: str | None = None  # the restart verdict behind a do-not-requeue end

    def to_json(self) -> dict[str, object]:
        return {
            "exit_code": self.code,
            "class": self.outcome,
            "cause": {"en": self.cause.en, "zh": self.cause.zh},
            "node": self.node,
            "host": self.host,
            "lost": [n.to_json() for n in self.lost],
            "verdict": self.verdict,
        }


def parse_end(body: object) -> JobEnd | None:
    """An end record read back; None when it is not one of ours."""
    if not isinstance(body, dict):
        return None
    code, node, cause = body.get("exit_code"), body.get("node"), body.get("cause")
    if not isinstance(code, int) or not isinstance(node, int) or not isinstance(cause, dict):
        return None
    lost = []
    for item in body.get("lost") or []:
        if isinstance(item, dict) and isinstance(item.get("node"), int):
            silent = item.get("silent_s")
            seconds = float(silent) if isinstance(silent, (int, float)) else 0.0
            lost.append(
                LostNode(item["node"], str(item.get("host", "?"))[:200], seconds, item.get("never_seen") is True)
            )
    text = Text(str(cause.get("en", ""))[:4000], str(cause.get("zh", ""))[:4000])
    verdict = body.get("verdict")
    host = str(body.get("host", "?"))[:200]
    kept = str(verdict)[:100] if isinstance(verdict, str) else None
    return JobEnd(code, str(body.get("class", ""))[:100], text, node, host, tuple(lost), kept)


@dataclass
class Presence:
    """This node's part: its beat (a thread of its own, so that no phase of the launcher holds it up) and what it
    sees of the others. `clock`: the observer's monotonic clock; `wall`: epoch seconds (only to date `end.json`)."""

    folder: Path
    node_rank: int
    nnodes: int
    hosts: list[str]
    lost_after: float
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    token: str = field(default_factory=lambda: secrets.token_hex(4))
    attempt: int = 0  # this node's torchrun attempt, carried by its beat
    failed_at: float | None = None  # when this node last saw its workers fail (`clock`)
    joined: bool = False  # torchrun started workers here: every node joined its rendezvous
    host: str = field(default_factory=socket.gethostname)
    _beat: Beat | None = field(default=None, init=False)
    _started_at: float = field(default=0.0, init=False)
    _started_epoch: float = field(default=0.0, init=False)
    _seen: dict[int, frozenset[str]] = field(default_factory=dict, init=False)  # node -> its beat names last seen
    _changed_at: dict[int, float] = field(default_factory=dict, init=False)
    _beats: dict[int, list[Beat]] = field(default_factory=dict, init=False)
    _end: JobEnd | None = field(default=None, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def start(self) -> None:
        """Create the folder and this node's beat (removing its own beats of an earlier try), then beat every
        `BEAT_S` from a daemon thread."""
        self._started_at, self._started_epoch = self.clock(), self.wall()
        self._changed_at = dict.fromkeys(range(self.nnodes), self._started_at)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            for name in os.listdir(self.folder):
                beat = parse_beat(name)
                if beat is not None and beat.node == self.node_rank and beat.token != self.token:
                    with contextlib.suppress(OSError):
                        (self.folder / name).unlink()
        except OSError:
            pass  # the beat below tries again; a node that cannot write here looks lost to the others
        self.beat()
        self._thread = threading.Thread(target=self._beating, name="presence", daemon=True)
        self._thread.start()

    def _beating(self) -> None:
        while not self._stop.wait(BEAT_S):
            self.beat()

    def beat(self) -> None:
        """Rename this node's beat to the next one (create it when it is not there)."""
        with self._lock:
            if self._stop.is_set() and self._beat is not None and self._beat.attempt is None:
                return
            old = self._beat
            new = Beat(self.node_rank, self.token, self.attempt, (old.seq + 1) if old else 0)
            try:
                if old is None:
                    (self.folder / new.name).touch()
                else:
                    os.replace(self.folder / old.name, self.folder / new.name)
                self._beat = new
            except OSError:
                with contextlib.suppress(OSError):
                    (self.folder / new.name).touch()
                    self._beat = new

    def finish(self, clean: bool) -> None:
        """Stop beating; a clean end leaves `node<k>.<token>.done`, so that nobody takes this node for lost."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=BEAT_S * 2)
        if not clean:
            return
        with self._lock:
            old = self._beat
            done = Beat(self.node_rank, self.token, None, 0)
            with contextlib.suppress(OSError):
                if old is None:
                    (self.folder / done.name).touch()
                else:
                    os.replace(self.folder / old.name, self.folder / done.name)
                self._beat = done

    def look(self) -> JobEnd | None:
        """List the folder once: note every node's beat, and return the job's end when a node of this run ended it
        (this node's own included)."""
        now = self.clock()
        try:
            names = os.listdir(self.folder)
        except OSError:
            return self._end
        by_node: dict[int, set[str]] = {}
        beats: dict[int, list[Beat]] = {}
        for name in names:
            beat = parse_beat(name)
            if beat is not None and 0 <= beat.node < self.nnodes:
                by_node.setdefault(beat.node, set()).add(name)
                beats.setdefault(beat.node, []).append(beat)
        for node in range(self.nnodes):
            seen = frozenset(by_node.get(node, ()))
            if seen and seen != self._seen.get(node, frozenset()):
                self._changed_at[node] = now
            self._seen[node] = seen
        self._beats = beats
        if END_FILE in names and self._end is None:
            self._end = self._read_end()
        return self._end

    def _read_end(self) -> JobEnd | None:
        path = self.folder / END_FILE
        try:
            if path.stat().st_mtime < self._started_epoch - CLOCK_SKEW_S:
                return None  # an earlier try of this job left it
            return parse_end(json.loads(read_all(path, END_LIMIT)))
        except (OSError, FileRefused, ValueError, RecursionError):
            return None

    def running(self) -> list[int]:
        """The other nodes seen in this run whose newest beat is not a `done` (as of the last `look`)."""
        return [n for n in range(self.nnodes) if n != self.node_rank and self.seen(n) and not self.done(n)]

    def done(self, node: int) -> bool:
        """Whether `node` ended cleanly during this run (its newest beat is a `done`)."""
        return any(b.attempt is None for b in self._beats.get(node, []))

    def lost(self) -> list[LostNode]:
        """The nodes whose beat has not changed for the bound (as of the last `look`), never this one: `lost_after`,
        or `AFTER_FAILURE_S` for a node seen once and silent since before this node's workers failed. Once torchrun
        started workers here (`joined`), a node never seen is not lost: it started, but shares no beat."""
        found = []
        for node in range(self.nnodes):
            silent = self.silent_for(node)
            bound = self.lost_after
            if self.seen(node) and self.failed_at is not None and self._changed_at[node] <= self.failed_at:
                bound = min(bound, AFTER_FAILURE_S)
            if self.joined and not self.seen(node):
                continue  # it joined torchrun's rendezvous, so it started: it shares no beat (`unshared`)
            if node != self.node_rank and silent > bound and not self.done(node):
                found.append(LostNode(node, self.hosts[node], silent, not self.seen(node), bound))
        return found

    def unshared(self) -> list[int]:
        """Nodes that joined torchrun's rendezvous but whose beat this node never saw after `lost_after`: the log
        folder is not shared between the nodes (a local disk), or theirs cannot be written."""
        if not self.joined or self.clock() - self._started_at <= self.lost_after:
            return []
        return [n for n in range(self.nnodes) if n != self.node_rank and not self.seen(n)]

    def seen(self, node: int) -> bool:
        """Whether a beat of `node` has been seen in this run's folder."""
        return bool(self._seen.get(node))

    def silent_for(self, node: int) -> float:
        """Seconds since `node`'s beat last changed (since this node's start, for a node never seen)."""
        return self.clock() - self._changed_at.get(node, self._started_at)

    def changed_since(self, node: int, since: float) -> bool:
        """Whether `node`'s beat changed (or it ended cleanly) after `since` (this node's clock)."""
        return self._changed_at.get(node, self._started_at) > since or self.done(node)

    def ahead(self, attempt: int) -> tuple[int, int] | None:
        """(node, its attempt) for a node whose torchrun runs a newer attempt than `attempt`, when one does."""
        for node, beats in sorted(self._beats.items()):
            newest = max((b.attempt for b in beats if b.attempt is not None and b.token), default=None)
            if node != self.node_rank and newest is not None and newest > attempt:
                return node, newest
        return None

    def announce(self, end: JobEnd) -> JobEnd:
        """End the job with `end` unless a node of this run already did: the end that stands (written atomically;
        a folder that refuses it leaves the peers to find this node lost)."""
        standing = self.look()
        if standing is not None:
            return standing
        tmp = self.folder / f".{END_FILE}.{self.token}.tmp"
        try:
            tmp.write_text(json.dumps(end.to_json(), ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.folder / END_FILE)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._end = end
        return end

    def settle(self, since: float, peer_first_s: float, pause: Callable[[float], None] = time.sleep) -> JobEnd | None:
        """This node's training failed at `since` (its clock): wait until another node's end appears (returned), a
        node is lost (returned as this node's end, not yet announced) or every other node's beat seen in this run has
        changed since (None: all are alive, this node's own cause stands) and `peer_first_s` more have passed without
        another node's end. A node never seen is not waited for: torchrun ran, so it is not a node that never
        started (that one is named before torchrun gives up its rendezvous), but one that shares no beat. Bounded by
        the lost-node bound after a failure (`AFTER_FAILURE_S`, or `lost_after` if shorter)."""
        self.failed_at = since if self.failed_at is None else max(self.failed_at, since)
        alive_at: float | None = None
        while True:
            end = self.look()
            if end is not None:
                return end
            lost = self.lost()
            if lost:
                return self.lost_end(lost)
            now = self.clock()
            others = [n for n in range(self.nnodes) if n != self.node_rank and self.seen(n)]
            if alive_at is None and all(self.changed_since(n, since) for n in others):
                alive_at = now
            if alive_at is not None and now - alive_at >= peer_first_s:
                return None
            if now - since > min(self.lost_after, AFTER_FAILURE_S) + BEAT_S * 2:
                return None
            pause(0.5)

    def wait_done(self, bound_s: float, pause: Callable[[float], None] = time.sleep) -> list[int]:
        """After this node's clean end: wait until every other node seen in this run ended cleanly too (each writes
        its record before its `done`; a node never seen shares no beat and is not waited for), a node ended the job or
        is lost, or `bound_s` passed. The nodes not done, as of the last look."""
        started = self.clock()
        while True:
            end = self.look()
            pending = self.running()
            if not pending or end is not None or self.lost() or self.clock() - started >= bound_s:
                return pending
            pause(0.5)

    def lost_end(self, lost: list[LostNode]) -> JobEnd:
        """This node's end for `lost` nodes (exit `ExitCode.NODE_LOST`), not yet announced."""
        names = joined(
            PRESENCE(
                "lost-never" if n.never_seen else "lost-silent", node=n.node, host=n.host, seconds=f"{n.silent_s:.0f}"
            )
            for n in lost
        )
        code = int(ExitCode.NODE_LOST)
        bound = f"{max(n.bound_s for n in lost):.0f}"
        setting, after = f"{self.lost_after:.0f}", f"{min(self.lost_after, AFTER_FAILURE_S):.0f}"
        fields = {"bound": bound, "setting": setting, "after": after, "folder": str(self.folder), "code": code}
        cause = PRESENCE("lost", nodes=names, **fields)
        return JobEnd(code, NODE_LOST_CLASS, cause, self.node_rank, self.host, tuple(lost))

    def to_json(self) -> dict[str, object]:
        """The start-up record's `presence`."""
        return {"folder": str(self.folder), "token": self.token, "lost_after_s": self.lost_after}
