"""The attempts folders of one run's nodes, side by side in the shared log folder.

Each node's workers record their attempts in `<log_dir>/<exp>-node<rank>-<stamp>.attempts/` (`<n>.json` per attempt,
written by the node's local rank 0; `0.json` at the run's first attempt). The nodes name their folders with their
own clocks, so a node finds its peers by name (same experiment, another node rank) and tells this run's files from
an earlier run's by time: a peer's file counts when it was written at or after this node's own `0.json`.
"""

from __future__ import annotations

import os
from pathlib import Path


def peer_prefix(own: Path, node_rank: int, of_node: int | None = None) -> str | None:
    """The name every peer folder of this run starts with (`<exp>-node`, or `<exp>-node<of_node>-`); None when
    `own` is not named like an attempts folder of node `node_rank`."""
    cut = own.name.rfind(f"-node{node_rank}-")
    if cut < 0:
        return None
    return own.name[:cut] + "-node" + (f"{of_node}-" if of_node is not None else "")


def peer_folders(own: Path, node_rank: int, of_node: int | None = None) -> tuple[list[Path], float | None]:
    """Other nodes' attempts folders beside `own` (only node `of_node`'s when given), and the time this node's
    first attempt was recorded (None when `own/0.json` cannot be read: then no peer file can be dated)."""
    prefix = peer_prefix(own, node_rank, of_node)
    if prefix is None:
        return [], None
    try:
        since = (own / "0.json").stat().st_mtime
        names = [e.name for e in os.scandir(own.parent) if e.name.endswith(".attempts") and e.is_dir()]
    except OSError:
        return [], None
    return [own.parent / n for n in names if n.startswith(prefix) and n != own.name], since


def peer_file(own: Path, node_rank: int, name: str, of_node: int | None = None) -> Path | None:
    """The newest file `name` in a peer folder (`peer_folders`) written during this run, if any."""
    folders, since = peer_folders(own, node_rank, of_node)
    if since is None:
        return None
    found: list[tuple[float, Path]] = []
    for folder in folders:
        try:
            written = (folder / name).stat().st_mtime
        except OSError:
            continue
        if written >= since:
            found.append((written, folder / name))
    return max(found)[1] if found else None
