"""One verification of the dataset per job, not per node: node 0 verifies and seals, the other nodes trust the seal.

Checking every episode file costs a few round trips per file to the CFS metadata server; N nodes doing it at the
same instant multiply that by N. So in a multi-node job node 0 verifies the dataset's content as always, and
once its plan passed `launch.run` writes a seal, `<log_dir>/.seals/<job key>.json` (atomically): the job key (a
digest of TI-ONE's job variables and the dataset's path), when it was written, the dataset's fingerprint taken
*before* the verification (the stat of its folder, `meta/`, `meta/info.json` and `data/`), and the verdict.
Another node of the same job waits for that seal (`run`: up to `storage_timeout`; `check`: not at all) and
trusts it only when all of these hold; otherwise it verifies by itself, exactly as node 0 did:
- the key is this job's (same variables, same dataset path);
- it was written after this node's process started, less `CLOCK_SKEW_S` (a seal of an earlier job, or an earlier
  try of this one, is never trusted);
- the verdict is a pass (a seal can only spare work, never turn a broken tree into a passing one);
- the dataset's fingerprint is unchanged (4 stat calls, however many episodes).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from entrypoint.core.files import FileRefused, read_all
from entrypoint.core.findings import Finding, Status, passed
from entrypoint.core.messages import Catalogue, Text

SEAL_FOLDER = ".seals"
SEAL_VERSION = 1
SEAL_LIMIT = 1 << 20  # a seal is a few KB; anything larger is not one of ours
CLOCK_SKEW_S = 120.0  # how far nodes' clocks (and their container starts) may differ
POLL_S = 0.25  # how often a node waiting for node 0's seal looks for it (one stat each time)
JOB_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_LIST", "GPU_NUM", "GPU_NUM_PER_NODE")
_FINGERPRINTED = ("", "meta", "meta/info.json", "data")

M = Catalogue(
    "seal",
    {
        "sealed": (
            "{verdict} (verified by node 0 {age:.0f} s ago; this node trusted its seal {path})",
            "{verdict}(由 0 号节点于 {age:.0f} 秒前校验;本节点采信其校验记录 {path})",
        ),
    },
)


class SealRole(StrEnum):
    """What this node does with the seal."""

    WRITE = "write"  # node 0 of a multi-node job: verify, then seal
    READ = "read"  # another node: trust node 0's seal when it is valid, else verify
    NONE = "none"  # one node, no dataset, or no log folder: verify, seal nothing


@dataclass
class Seal:
    """This node's part in sealing the dataset check; `trusted` tells whether the verdict came from the seal, and
    `reason` why a seal was not used."""

    role: SealRole
    path: Path | None = None
    key: str | None = None
    trusted: bool = False
    reason: str | None = None
    payload: dict[str, object] | None = field(default=None, repr=False)  # WRITE: what `write` will put there

    def to_json(self) -> dict[str, object]:
        return {
            "role": self.role.value,
            "path": str(self.path) if self.path else None,
            "trusted": self.trusted,
            "reason": self.reason,
        }


def job_key(env: Mapping[str, str], dataset: Path) -> str | None:
    """The digest naming this job's seal; None outside a multi-node TI-ONE job (nothing to share)."""
    try:
        nodes = int(env.get("WORLD_SIZE", "1")[:6])
    except ValueError:
        return None
    if nodes < 2 or not env.get("MASTER_ADDR"):
        return None
    text = "\n".join([*(f"{name}={env.get(name, '')[:4096]}" for name in JOB_VARIABLES), str(dataset)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def plan_seal(env: Mapping[str, str], dataset: Path | None, log_dir: Path | None, node_rank: int) -> Seal:
    """This node's role: node 0 writes, the others read, under the log folder; none without a job key."""
    key = job_key(env, dataset) if dataset is not None else None
    if key is None or log_dir is None:
        return Seal(SealRole.NONE)
    return Seal(SealRole.WRITE if node_rank == 0 else SealRole.READ, log_dir / SEAL_FOLDER / f"{key}.json", key)


def fingerprint(dataset: Path) -> dict[str, list[int]] | None:
    """The dataset's stat: its folder, `meta/`, `meta/info.json` and `data/` (size, mtime, inode); None when one
    cannot be read."""
    found: dict[str, list[int]] = {}
    for relative in _FINGERPRINTED:
        try:
            st = os.stat(dataset / relative)
        except (OSError, ValueError):
            return None
        found[relative or "."] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return found


def sealed_payload(
    seal: Seal, dataset: Path, before: dict[str, list[int]] | None, findings: list[Finding], total_bytes: int
) -> None:
    """Node 0: what `write` will seal, from the fingerprint taken before the verification, its findings and the
    episode files' total size."""
    verdict = [f for f in findings if f.id == "assets.dataset"]
    if seal.role is not SealRole.WRITE or before is None or len(findings) != 1 or len(verdict) != 1:
        return
    if verdict[0].status is not Status.PASS:
        return
    seal.payload = {
        "version": SEAL_VERSION,
        "key": seal.key,
        "dataset": str(dataset),
        "host": socket.gethostname(),
        "fingerprint": before,
        "verdict": "pass",
        "message": verdict[0].message.to_json(),
        "total_bytes": total_bytes,
    }


def trusted_verdict(
    seal: Seal,
    dataset: Path,
    wait_s: float,
    started_at: float,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Finding, int] | None:
    """Another node: node 0's verdict and the episode files' total size when a valid seal for this job appears
    within `wait_s` seconds, else None (with `seal.reason` saying why)."""
    if seal.role is not SealRole.READ or seal.path is None:
        return None
    deadline = time.monotonic() + wait_s
    while not os.path.lexists(seal.path):
        if time.monotonic() >= deadline:
            seal.reason = "no seal from node 0" + (f" within {wait_s:.0f} s" if wait_s else "")
            return None
        sleep(POLL_S)
    data = _read(seal.path)
    problem = _invalid(data, seal, dataset, started_at, clock())
    if problem is not None:
        seal.reason = problem
        return None
    assert data is not None
    message, written, total = data["message"], data["written_at"], data["total_bytes"]
    assert isinstance(message, dict) and isinstance(written, (int, float)) and isinstance(total, int)
    verdict = Text(str(message.get("en", "")), str(message.get("zh", "")))
    seal.trusted = True
    sealed = M("sealed", verdict=verdict, age=max(0.0, clock() - written), path=str(seal.path))
    return passed("assets.dataset", sealed, str(dataset)), total


def _read(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(read_all(path, SEAL_LIMIT))
    except (FileRefused, OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _invalid(data: dict[str, object] | None, seal: Seal, dataset: Path, started_at: float, now: float) -> str | None:
    """Why a seal read from disk may not be trusted; None when it may."""
    if data is None:
        return "the seal cannot be read"
    written, message, total = data.get("written_at"), data.get("message"), data.get("total_bytes")
    if data.get("version") != SEAL_VERSION or data.get("key") != seal.key or data.get("dataset") != str(dataset):
        return "the seal is for another job or dataset"
    numbers = (written, total)
    if any(not isinstance(n, (int, float)) or isinstance(n, bool) for n in numbers) or not isinstance(message, dict):
        return "the seal is malformed"
    if not isinstance(total, int) or not 0 <= total < 1 << 62:
        return "the seal is malformed"
    assert isinstance(written, (int, float))
    if written < started_at - CLOCK_SKEW_S or written > now + CLOCK_SKEW_S:
        return "the seal is older than this node's start"
    if data.get("verdict") != "pass":
        return "node 0's verdict was not a pass"
    if data.get("fingerprint") != fingerprint(dataset):
        return "the dataset changed since node 0 verified it"
    return None
