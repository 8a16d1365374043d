"""Storage checks: the assets root is a mounted file system, and the checkpoint folder is writable, off the
container's own disk and has room for the saves this run will make.

A TI-ONE job sees CFS only through its storage row. When the assets root is not mounted (`check_assets_root`)
that is the one cause: the findings of every check under the root are folded into one line, and checkpoints
and node logs are never written there. The root must exist everywhere, and must be mounted apart from the
container's own root file system (overlay layers at `/`) in a TI-ONE job (`required`); elsewhere (a trial on a
plain disk, a machine whose `/` is its own disk) a root on `/` is a warning.

openpi keeps every checkpoint (model + optimizer, about 3x the base weights file: 21 GB for pi05), so the
estimate is (saves still to come) x (3 x weights size), or a pi05-sized default when no weights are used. The
datasets cache training builds before its first step (`CacheDemand`: about the dataset's size for each cache folder,
less what the folder already holds) takes its room from the same free space when it lives on the checkpoints' file
system (by default: one folder per node rank under the assets root, on the CFS), so the two are counted together.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from entrypoint.core.findings import Finding, Status, failed, passed, warned
from entrypoint.core.messages import Text, joined
from entrypoint.core.oserror import os_error_text
from entrypoint.core.settings import Settings
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.mounts import Location, Mount, Placement, locate, nearest_existing
from entrypoint.inspect.openpi import final_step_saved, save_count

CHECKPOINT_TO_WEIGHTS = 3  # model.safetensors (~1x, fp32 weights) + optimizer.pt (~2x, AdamW moments)
DEFAULT_CHECKPOINT_BYTES = 21 * 10**9  # measured for pi05: 7.47 GB model + 13.47 GB optimizer
GB = 10**9
CACHE_SCAN_ENTRIES = 20_000  # a built Arrow cache holds a few dozen files; a folder with more is taken as built
CACHE_SCAN_S = 5.0  # cache folders a slow file system cannot list by then are taken as built too


ROOT_MOUNT = "storage.assets-mount"
NOT_CHECKED = "storage.not-checked"
CHECKPOINT_STORAGE = "storage.checkpoint"  # how the folded checkpoint checks are named in the folded line


def inside(where: str | Path | None, folder: Path) -> bool:
    """Whether the path `where` is `folder` or lies below it (absolute paths, whole components)."""
    if where is None or not os.path.isabs(where):
        return False
    path, top = os.path.abspath(where), os.path.abspath(folder)
    return path == top or path.startswith(top.rstrip("/") + "/")


@dataclass(frozen=True)
class RootStorage:
    """Where the assets root lives and what follows from it. `findings` are the asset findings with the verdict
    on the mount in front; `unmounted` means that verdict failed: the findings under the root were folded into
    one line, and nothing under the root is checked or written (`covers`). `mounts` is the table it was read
    from (None: unreadable) and `required` whether the root must be mounted (a TI-ONE job)."""

    location: Location
    mounts: tuple[Mount, ...] | None
    required: bool
    findings: tuple[Finding, ...]

    @property
    def unmounted(self) -> bool:
        return any(f.id == ROOT_MOUNT and f.status is Status.FAIL for f in self.findings)

    def covers(self, path: Path) -> bool:
        """Whether `path` is under an unmounted root: not to be checked, created or written."""
        return self.unmounted and inside(path, self.location.path)

    def withheld(self, path: Path) -> Text | None:
        """Why nothing may be written at `path` (it is under an unmounted root); None when it may."""
        return M("root-withheld", path=path, root=self.location.path) if self.covers(path) else None


def check_assets_root(
    settings: Settings, mounts: Sequence[Mount] | None, required: bool, findings: Sequence[Finding], nnodes: int = 1
) -> RootStorage:
    """Judge the mount under the assets root; under a failing verdict, fold those of `findings` (the asset and
    resume checks) whose path is under the root into one line.

    Missing root: fail. On the root file system (`/`, nothing mounted below the root): fail when `required` and
    `/` is a container's overlay, else warn. Mounted: pass, naming the file system; a warning when a job of
    `nnodes` > 1 has it on a local file system (restarts, the stall diagnosis and a lost node's naming go through
    a folder every node must see: one machine's folder bind-mounted into every node's container is shared; the
    run says at once if the nodes turn out not to see each other, `launch.presence`). Unknown (no readable mount
    table): no verdict."""
    root = Path(os.path.abspath(settings.assets_root))
    table = tuple(mounts) if mounts is not None else None
    location = locate(root, table)
    where = location.described()
    verdict: Finding | None = None
    match location.placement:
        case Placement.MISSING:
            holder = location.mount
            fix = (
                M("root-missing-under-mount-fix", point=holder.point, root=root)
                if holder is not None and holder.point != "/"
                else M("root-mount-fix", root=root)
            )
            what = M("root-missing", root=root, existing=location.existing, where=where)
            verdict = failed(ROOT_MOUNT, what, fix, str(root))
        case Placement.OWN_DISK if required and location.on_container_disk:
            what = M("root-not-mounted", root=root, where=where)
            verdict = failed(ROOT_MOUNT, what, M("root-mount-fix", root=root), str(root))
        case Placement.OWN_DISK:
            what = M("root-own-disk", root=root, where=where)
            verdict = warned(ROOT_MOUNT, what, M("root-own-disk-fix", root=root), str(root))
        case Placement.MOUNTED if nnodes > 1 and location.mount is not None and not location.mount.network:
            what = M("root-local-multinode", root=root, where=where, nodes=nnodes)
            verdict = warned(ROOT_MOUNT, what, M("root-local-multinode-fix", root=root), str(root))
        case Placement.MOUNTED:
            verdict = passed(ROOT_MOUNT, M("root-mounted", root=root, where=where), str(root))
    if verdict is None:
        return RootStorage(location, table, required, tuple(findings))
    if verdict.status is not Status.FAIL:
        return RootStorage(location, table, required, (verdict, *findings))
    kept = [f for f in findings if not inside(f.where, root)]
    names = [f.id for f in findings if inside(f.where, root)]
    if inside(settings.experiment_dir, root):
        names.append(CHECKPOINT_STORAGE)
    summary = M("root-folded", count=len(names), names=", ".join(names))
    folded = [warned(NOT_CHECKED, summary, M("root-folded-fix"), str(root))] if names else []
    return RootStorage(location, table, required, (verdict, *folded, *kept))


def unwritable_reason(path: Path) -> Text | None:
    """Why files cannot be created under `path` (or where it would be created); None when they can."""
    target = nearest_existing(path)
    if not target.is_dir():
        return M("folder-not-a-folder", target=target)
    try:
        if os.statvfs(target).f_flag & os.ST_RDONLY:
            return M("folder-read-only", target=target)
    except OSError as exc:
        return M("folder-unusable", target=target, error=os_error_text(exc))
    if not os.access(target, os.W_OK | os.X_OK):
        return M("folder-not-writable", target=target, uid=os.getuid())
    return None


def free_bytes(path: Path) -> int | None:
    try:
        stats = os.statvfs(nearest_existing(path))
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


@dataclass(frozen=True)
class CacheDemand:
    """The datasets caches training builds: `folders` (this node's first; one per node rank for the default node
    folders) and the bytes they still need together."""

    folders: tuple[Path, ...]
    needed: int


def held_bytes(folder: Path, limit: int = CACHE_SCAN_ENTRIES, deadline: float | None = None) -> int | None:
    """The bytes of the files under `folder` (links not followed; 0 when it does not exist), or None when it holds
    more than `limit` entries or cannot be listed before `deadline` (a `time.monotonic()` value; default
    `CACHE_SCAN_S` from now): a cache that large is taken as built."""
    total, seen = 0, 0
    deadline = time.monotonic() + CACHE_SCAN_S if deadline is None else deadline
    pending = [folder]
    while pending:
        if time.monotonic() > deadline:
            return None
        try:
            listing = os.scandir(pending.pop())
        except OSError:
            continue
        with listing:
            for entry in listing:
                seen += 1
                if seen > limit or time.monotonic() > deadline:
                    return None
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    return total


def cache_demand(
    env: Mapping[str, str], dataset_bytes: int, node_folders: Sequence[Path], node_rank: int
) -> CacheDemand:
    """What the datasets caches still need (`env`: the training processes' environment): about the dataset's size
    for each cache folder, less what the folder already holds (a reused cache needs nothing more). Every node rank
    builds into its own node folder (`node_folders`, indexed by node rank) when the cache is the default one;
    otherwise there is the one folder `env` names."""
    cache = datasets_cache_dir(env)
    own = node_folders[node_rank]
    default = os.path.abspath(cache) == os.path.abspath(own)
    folders = (own, *(f for i, f in enumerate(node_folders) if i != node_rank)) if default else (cache,)
    needed, deadline = 0, time.monotonic() + CACHE_SCAN_S  # one bound for every folder together
    for folder in folders:
        held = held_bytes(folder, deadline=deadline)
        needed += 0 if held is None else max(0, dataset_bytes - held)
    return CacheDemand(folders, needed)


def _same_file_system(one: Path, other: Path) -> bool:
    try:
        return os.stat(nearest_existing(one)).st_dev == os.stat(nearest_existing(other)).st_dev
    except OSError:
        return False


def _with_cache_fix(fix: Text, shared: CacheDemand | None) -> Text:
    return fix if shared is None else joined([fix, M("checkpoint-cache-fix")], " ", "")


def check_checkpoint_storage(
    settings: Settings,
    resume_step: int | None,
    weights_bytes: int | None,
    root: RootStorage | None = None,
    cache: CacheDemand | None = None,
) -> list[Finding]:
    """Writable checkpoint folder and room for one checkpoint (fail, exit 3); room for every coming save and the
    final step being saved (warn). With the assets root's verdict (`root`): nothing when the folder is under an
    unmounted root (folded there), and a failure when a TI-ONE job would write checkpoints to the container's own
    disk. A datasets cache (`cache`) on the same file system is built before the first save: both bounds then
    include what it still needs, and the finding says so."""
    folder = settings.experiment_dir
    if root is not None and root.covers(folder):
        return []
    if root is not None and root.required:
        location = locate(folder, root.mounts)
        if location.on_container_disk:
            return [
                failed(
                    "storage.checkpoint-mount",
                    M("checkpoint-own-disk", folder=folder, where=location.described()),
                    M(
                        "checkpoint-own-disk-fix",
                        base=settings.path("checkpoint_base_dir"),
                        variable=settings.where("checkpoint_base_dir"),
                    ),
                    str(folder),
                )
            ]
    reason = unwritable_reason(folder)
    if reason is not None:
        return [
            failed(
                "storage.checkpoint-writable",
                M("checkpoint-unwritable", reason=reason),
                M("checkpoint-unwritable-fix", folder=settings.path("checkpoint_base_dir")),
                str(folder),
            )
        ]
    findings = [passed("storage.checkpoint-writable", M("checkpoint-writable", folder=folder), str(folder))]
    target = nearest_existing(folder)
    saves = save_count(settings.num_train_steps, settings.save_interval, resume_step or 0)
    per_save = CHECKPOINT_TO_WEIGHTS * weights_bytes if weights_bytes else DEFAULT_CHECKPOINT_BYTES
    shared = cache if cache is not None and cache.needed and _same_file_system(folder, cache.folders[0]) else None
    extra = shared.needed if shared is not None else 0
    needed = saves * per_save + extra
    free = free_bytes(folder)
    also: Text | str = ""
    if shared is not None:
        count = len(shared.folders)
        name = "checkpoint-and-cache" if count == 1 else "checkpoint-and-caches"
        also = M(name, cache=shared.folders[0], count=count, others=count - 1, size=extra / GB)
    fields = {"free": free / GB if free is not None else 0.0, "target": target, "per_save": per_save / GB}
    if free is not None and saves and free < per_save + extra:
        findings.append(
            failed(
                "storage.checkpoint-space",
                M("checkpoint-no-room", **fields, also=also),
                _with_cache_fix(M("checkpoint-no-room-fix"), shared),
                str(folder),
            )
        )
    elif free is not None and free < needed:
        findings.append(
            warned(
                "storage.checkpoint-space",
                M("checkpoint-short-of-room", **fields, saves=saves, needed=needed / GB, also=also),
                _with_cache_fix(M("checkpoint-short-of-room-fix"), shared),
                str(folder),
            )
        )
    elif free is not None:
        findings.append(
            passed(
                "storage.checkpoint-space",
                M("checkpoint-room", **fields, saves=saves, also=also),
                str(folder),
            )
        )
    steps, interval = settings.num_train_steps, settings.save_interval
    if not final_step_saved(steps, interval):
        findings.append(
            warned(
                "storage.final-step",
                M("final-step-not-saved", steps=steps, interval=interval, before_last=steps - 1),
                M("final-step-not-saved-fix", example=(steps // interval + 1) * interval),
                "VLA_NUM_TRAIN_STEPS",
            )
        )
    return findings


def datasets_cache_dir(env: Mapping[str, str]) -> Path:
    """Where `datasets` builds its Arrow cache: HF_DATASETS_CACHE, else HF_HOME/datasets, else
    ~/.cache/huggingface/datasets."""
    if env.get("HF_DATASETS_CACHE"):
        return Path(env["HF_DATASETS_CACHE"])
    home = Path(env["HF_HOME"]) if env.get("HF_HOME") else Path(env.get("HOME", "/root")) / ".cache" / "huggingface"
    return home / "datasets"


def check_datasets_cache(
    env: Mapping[str, str], dataset_bytes: int, node_folder: Path, root: RootStorage | None = None
) -> list[Finding]:
    """The Arrow cache where training builds it (`env`: the training processes' environment): a writable folder
    with about the dataset's size free, since the cache is as large as the dataset (warn otherwise). The finding
    says when the cache is `node_folder` (this node's folder under the assets root, which a new container reuses).
    Nothing when the folder is under an unmounted assets root: that verdict is the one cause, and nothing there is
    checked."""
    cache = datasets_cache_dir(env)
    if root is not None and root.covers(cache):
        return []
    reason = unwritable_reason(cache)
    fix = M("datasets-cache-fix")
    if reason is not None:
        return [warned("storage.datasets-cache", M("datasets-cache-unwritable", reason=reason), fix, str(cache))]
    free = free_bytes(cache)
    if free is not None and free < dataset_bytes:
        small = M("datasets-cache-small", free=free / GB, cache=cache, size=dataset_bytes / GB)
        return [warned("storage.datasets-cache", small, fix, str(cache))]
    if os.path.abspath(cache) == os.path.abspath(node_folder):
        what = M("datasets-cache-node-folder", cache=cache, size=dataset_bytes / GB)
    else:
        what = M("datasets-cache-writable", cache=cache)
    return [passed("storage.datasets-cache", what, str(cache))]
