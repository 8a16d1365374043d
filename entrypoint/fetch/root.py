"""The assets root `fetch-assets` fills: it must already exist (CFS mounted there) unless `--create-root` says to
make it.

A root that does not exist usually means the CFS mount is missing on the dev machine: creating it would put 55 GB
on the machine's own disk, where no TI-ONE job sees them. So a missing root ends the command (exit 3) saying where
it looked, which file system its nearest existing folder is on, and the flag; with `--create-root` it is created
(after everything that can be refused has been checked). An existing root on the machine's own root file system
gets a note. The mount table is read through `Host` (`VLA_HOST_ROOT` points tests at a fake one).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from entrypoint.core.errors import PreflightFailed
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.core.settings import Settings
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.fetch.workspace import io_problem
from entrypoint.inspect.mounts import Location, locate, mount_table


def locate_root(settings: Settings, env: Mapping[str, str]) -> Location:
    """Where the settings' assets root lives on this machine (read only)."""
    return locate(Path(settings.assets_root), mount_table(Host.current(env)))


def _given(settings: Settings) -> Text:
    """Where the root's value came from, in words."""
    source = settings.sources.get("assets_root", "default")
    if source == "command line":
        return M("root-given-flag")
    if source == "environment":
        return M("root-given-env")
    if source == "default":
        return M("root-given-default")
    return M("root-given-job-file", source=source)


def missing_root(settings: Settings, location: Location) -> PreflightFailed:
    """The refusal for a root that does not exist (exit 3): where it looked, the likely missing mount, the flag."""
    root = location.path
    what = M("root-missing", root=root, given=_given(settings), existing=location.existing, where=location.described())
    return PreflightFailed("fetch.root-missing", str(root), what, M("root-missing-fix", root=root))


def notes(location: Location, create: bool) -> list[Text]:
    """What to say about the root before the entries: that it would be created (`create`), or that it is on the
    machine's own disk."""
    if not location.exists and create:
        return [M("root-would-create", root=location.path, where=location.described())]
    if location.exists and location.on_own_disk:
        return [M("root-own-disk", root=location.path, where=location.described())]
    return []


def create_root(location: Location) -> Text:
    """Create the missing root (`--create-root`); the line that says so. A failure is exit 3 (`io_problem`)."""
    try:
        os.makedirs(location.path, exist_ok=True)
    except OSError as error:
        raise io_problem(error, location.path) from None
    return M("root-created", root=location.path, where=location.described())
