"""What a run finds for each entry before it does anything: complete, resumable, in place already, or missing.

Read only: the entry's records in the workspace (`done.json`, `state.json`) and the tree itself. A record is
trusted while the files it lists keep their sizes; a tree made without this tool (the seed's `wget` + `tar -xf`)
is recognised by the same checks `vla-entrypoint check` runs and adopted as is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from entrypoint.core.messages import Text
from entrypoint.fetch.manifest import AssetCheck, Entry
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.fetch.unpack import MemberKind
from entrypoint.fetch.workspace import DoneRecord, Workspace

_SHOWN = 5  # changed files named in a message


class EntryState(StrEnum):
    COMPLETE = "complete"  # recorded, and the tree still matches the record
    ADOPTED = "adopted"  # not recorded, but a copy made without this tool passes the entry's check
    RESUME = "resume"  # an interrupted run saved its state
    CHANGED = "changed"  # recorded, but files changed since
    FORCED = "forced"  # --force
    PARTIAL_TREE = "partial-tree"  # some of what the entry provides is there, but it fails its check
    MISSING = "missing"


@dataclass(frozen=True)
class EntryStatus:
    """An entry's state, the line that explains it, and whether the run has work to do for it."""

    state: EntryState
    message: Text
    work: bool


def inspect_entry(root: Path, workspace: Workspace, entry: Entry, force: bool) -> EntryStatus:
    done = workspace.done(entry)
    state = workspace.state(entry)
    if done is not None and not force and _record_fits(done, entry):
        if done.get("adopted"):
            if adoptable(root, entry):
                return EntryStatus(EntryState.COMPLETE, M("state-complete-adopted"), False)
        else:
            bad = _changed(root, done)
            if not bad:
                finished, files = done.get("finished", "?"), len(done.get("files", []))
                return EntryStatus(EntryState.COMPLETE, M("state-complete", finished=finished, files=files), False)
            return EntryStatus(EntryState.CHANGED, M("state-changed", paths=", ".join(bad)), True)
    if state is not None:
        extract = state.get("extract") or {}
        if not extract:
            return EntryStatus(EntryState.RESUME, M("state-resume-file", at=state.get("have", 0)), True)
        at = (extract.get("checkpoint") or {}).get("in_offset", 0)
        members = extract.get("members", 0)
        return EntryStatus(EntryState.RESUME, M("state-resume-archive", at=at, members=members), True)
    if force:
        return EntryStatus(EntryState.FORCED, M("state-forced"), True)
    if adoptable(root, entry):
        return EntryStatus(EntryState.ADOPTED, M("state-adopted"), False)
    present = [p for p in entry.provides if os.path.lexists(root / p)]
    if present:
        return EntryStatus(EntryState.PARTIAL_TREE, M("state-partial-tree", paths=", ".join(present)), True)
    return EntryStatus(EntryState.MISSING, M("state-missing"), True)


def adoptable(root: Path, entry: Entry) -> bool:
    """Whether a copy made without this tool (the seed's wget + tar) passes the entry's check."""
    from entrypoint.core.findings import Status
    from entrypoint.inspect.assets import InvalidAsset, check_dataset_folder, check_norm_stats, check_weights

    if entry.check is AssetCheck.NONE or not entry.provides:
        return False
    path = root / entry.provides[0]

    def dataset_complete(folder: Path) -> bool:
        return check_dataset_folder(folder)[1]

    try:
        match entry.check:
            case AssetCheck.LEROBOT_DATASET:
                return dataset_complete(path)
            case AssetCheck.LEROBOT_DATASETS:
                folders = (
                    [p for p in sorted(path.iterdir()) if (p / "meta" / "info.json").is_file()] if path.is_dir() else []
                )
                return bool(folders) and all(dataset_complete(p) for p in folders)
            case AssetCheck.NORM_STATS:
                check_norm_stats(path)
                return True
            case AssetCheck.WEIGHTS:
                findings, _ = check_weights(path)
                return all(f.status is Status.PASS for f in findings)
            case _:
                return path.is_file() and path.stat().st_size > 0
    except (InvalidAsset, OSError):
        return False


def _changed(root: Path, done: DoneRecord) -> list[str]:
    """Files a completion record lists that are missing or changed size (at most a few, for the message)."""
    bad = []
    for path, size, kind in done.get("files", []):
        try:
            stat = (root / path).lstat()
        except OSError:
            bad.append(path)
        else:
            if kind in (MemberKind.FILE, MemberKind.HARDLINK) and stat.st_size != size:
                bad.append(path)
        if len(bad) >= _SHOWN:
            break
    return bad


def _record_fits(done: DoneRecord, entry: Entry) -> bool:
    """A completion record still answers the manifest: same pinned sha256 and size when the manifest pins them."""
    recorded = done.get("sha256")
    if entry.sha256 and recorded and recorded != entry.sha256:
        return False
    if entry.sha256 and not recorded and not done.get("adopted"):
        return False
    return not (entry.size is not None and done.get("size") not in (None, entry.size))
