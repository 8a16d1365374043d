"""A forgotten or wrong CFS mount: the mount table read without trust, and a TI-ONE job whose assets root is not
mounted stopping with that one cause, before anything is written to the container's disk.

The table tests feed `parse_mountinfo` / `read_mountinfo` what a kernel writes and what it never would; the
command-line tests run `python -m entrypoint` in a child process against a fake machine whose
`/proc/self/mountinfo` (under `VLA_HOST_ROOT`) says where the temp assets tree is mounted."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from entrypoint.inspect.mounts import (
    LINE_LIMIT,
    Mount,
    Placement,
    locate,
    parse_mountinfo,
    read_mountinfo,
)
from tests.support.edges import Outcome, run_cli
from tests.unit.conftest import World

ROOT_OVERLAY = "1 0 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w"
PROC = "2 1 0:51 / /proc rw,nosuid - proc proc rw"


def line(number: int, point: str, fs_type: str, source: str, optional: str = "shared:7") -> str:
    """One mountinfo line as the kernel writes it (the mount point already escaped)."""
    return f"{number} 1 0:{number} / {point} rw,relatime {optional} - {fs_type} {source} rw,vers=4.1"


def table(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


# ---------------------------------------------------------------- the table


def test_a_containers_table_is_read_line_by_line_with_optional_fields() -> None:
    mounts = parse_mountinfo(
        table(ROOT_OVERLAY, PROC, line(3, "/home/tione/notebook", "nfs4", "10.0.0.9:/cfs", "shared:2 master:3"))
    )
    assert mounts == (
        Mount("/", "overlay", "overlay"),
        Mount("/proc", "proc", "proc"),
        Mount("/home/tione/notebook", "nfs4", "10.0.0.9:/cfs"),
    )
    assert mounts[2].network and not mounts[0].network
    assert Mount("/x", "fuse.goosefs", "g").network and not Mount("/x", "ext4", "/dev/vdb").network


def test_escaped_spaces_tabs_and_backslashes_are_unescaped() -> None:
    (_, mount) = parse_mountinfo(table(ROOT_OVERLAY, line(2, r"/mnt/my\040cfs\011x\134y", "nfs", r"h:/a\040b")))
    assert mount.point == "/mnt/my cfs\tx\\y" and mount.source == "h:/a b"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "garbage",
        "1 0 0:5 / /nofs rw - ",  # the separator without a file system type
        "1 0 0:5 / /mnt rw shared:1 overlay overlay rw",  # no separator
        "1 0 0:5 / - overlay overlay rw",  # too few fields before the separator
        "1 0 0:5 / relative rw - ext4 /dev/x rw",  # a mount point that is not absolute
        "1 0 0:5 / /" + "a" * LINE_LIMIT + " rw - nfs h:/x rw",  # longer than any mount point can be
        "\x00\xff\xfe binary \x01 - \x02",
    ],
    ids=["empty", "one-word", "no-type", "no-separator", "few-fields", "relative-point", "huge-line", "binary"],
)
def test_lines_a_kernel_never_writes_are_skipped_and_the_rest_is_kept(bad: str) -> None:
    data = table(ROOT_OVERLAY, bad, line(3, "/cfs", "nfs4", "h:/x"))
    assert [m.point for m in parse_mountinfo(data)] == ["/", "/cfs"]


def test_the_source_field_may_be_missing() -> None:
    assert parse_mountinfo(b"1 0 0:5 / / rw - rootfs\n") == (Mount("/", "rootfs", ""),)


def _bounded(call, seconds: float = 5.0):
    """`call()` in a thread; fails the test (instead of hanging it) when it takes longer than `seconds`."""
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still reading after {seconds} s"
    return result[0]


@pytest.mark.parametrize("kind", ["fifo", "folder", "missing", "empty", "dangling-link"])
def test_a_table_that_is_not_a_readable_file_reads_as_unknown_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "mountinfo"
    if kind == "fifo":
        os.mkfifo(path)  # a reader that opened it blocking would wait forever for a writer
    elif kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "dangling-link":
        path.symlink_to(tmp_path / "nowhere")
    assert _bounded(lambda: read_mountinfo(path)) is None


def test_a_table_past_the_limit_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "mountinfo"
    path.write_bytes(table(ROOT_OVERLAY, *(line(i, f"/m{i}", "tmpfs", "tmpfs") for i in range(2, 200))))
    size = path.stat().st_size
    assert read_mountinfo(path, limit=size - 1) is None  # cut short it could miss the mount that matters
    assert read_mountinfo(path, limit=size)[-1].point == "/m199"


def test_the_proc_file_of_this_machine_is_read_although_it_reports_size_zero() -> None:
    mounts = read_mountinfo(Path("/proc/self/mountinfo"))
    assert mounts is not None and any(m.point == "/" for m in mounts)


# ---------------------------------------------------------------- where a path lives


def test_the_longest_mount_point_holds_a_path_and_the_last_mounted_wins(tmp_path: Path) -> None:
    cfs = tmp_path / "cfs"
    (cfs / "assets").mkdir(parents=True)
    mounts = parse_mountinfo(
        table(
            ROOT_OVERLAY,
            line(2, str(tmp_path), "ext4", "/dev/vdb"),
            line(3, str(cfs), "nfs", "old:/x"),
            line(4, str(cfs), "nfs4", "10.0.0.9:/cfs"),  # mounted over the previous one
            line(5, f"{cfs}-other", "tmpfs", "tmpfs"),  # a prefix by characters, not by components
        )
    )
    where = locate(cfs / "assets", mounts)
    assert where.placement is Placement.MOUNTED and where.mount == Mount(str(cfs), "nfs4", "10.0.0.9:/cfs")
    assert "nfs4" in where.described().en and str(cfs) in where.described().zh


def test_a_root_on_the_root_file_system_is_on_the_containers_own_disk(tmp_path: Path) -> None:
    where = locate(tmp_path, parse_mountinfo(table(ROOT_OVERLAY, PROC)))
    assert where.placement is Placement.OWN_DISK
    assert where.described().en == "the container's own disk (overlay mounted at /)"


def test_a_machine_whose_root_is_its_own_disk_is_told_apart_from_a_container(tmp_path: Path) -> None:
    where = locate(tmp_path, parse_mountinfo(table("1 0 254:0 / / rw,relatime - ext4 /dev/vda rw")))
    assert where.placement is Placement.OWN_DISK and not where.on_container_disk
    assert where.described().en == "this machine's own disk (ext4 mounted at /)"


def test_a_missing_path_is_missing_and_its_nearest_existing_folder_is_located(tmp_path: Path) -> None:
    where = locate(tmp_path / "a" / "b", parse_mountinfo(table(ROOT_OVERLAY)))
    assert where.placement is Placement.MISSING and where.existing == tmp_path.resolve() and where.on_container_disk


def test_a_mount_inside_the_root_counts_as_mounted(tmp_path: Path) -> None:
    (tmp_path / "datasets").mkdir()
    mounts = parse_mountinfo(table(ROOT_OVERLAY, line(2, str(tmp_path.resolve() / "datasets"), "nfs4", "h:/d")))
    assert locate(tmp_path, mounts).placement is Placement.MOUNTED


def test_a_link_is_followed_to_the_mount_it_points_into(tmp_path: Path) -> None:
    (tmp_path / "cfs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "cfs")
    mounts = parse_mountinfo(table(ROOT_OVERLAY, line(2, str((tmp_path / "cfs").resolve()), "nfs4", "h:/c")))
    assert locate(tmp_path / "link", mounts).placement is Placement.MOUNTED


def test_without_a_table_the_placement_is_unknown(tmp_path: Path) -> None:
    assert locate(tmp_path, None).placement is Placement.UNKNOWN
    assert locate(tmp_path / "gone", None).placement is Placement.MISSING


# ---------------------------------------------------------------- the real command line


def mounted_as(world: World, *lines: str) -> None:
    """The fake machine's mount table."""
    path = world.host / "proc" / "self" / "mountinfo"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def cli(world: World, *argv: str, tione: bool = True, limit_s: float = 60, **env: str) -> Outcome:
    base = world.tione(nodes=2, per_node=8, rank=0) if tione else {}
    outcome = run_cli(world, argv, {**base, **env}, limit_s)
    assert outcome.code != -1 and "Traceback" not in outcome.text, outcome.text[-3000:]
    return outcome


def fails(outcome: Outcome) -> list[str]:
    return [text for text in outcome.out.splitlines() if text.startswith("  FAIL  ")]


def test_a_tione_run_without_the_storage_row_stops_with_the_mount_as_the_one_cause(world: World) -> None:
    mounted_as(world, ROOT_OVERLAY, PROC)
    before = world.snapshot()
    started = time.monotonic()
    outcome = cli(world, "run")
    seconds = time.monotonic() - started
    assert outcome.code == 3, outcome.text[-3000:]
    (headline,) = fails(outcome)  # one cause, not one per asset
    assert "storage.assets-mount" in headline and "not a mounted file system" in headline
    assert "container's own disk (overlay mounted at /)" in headline
    assert "storage row" in outcome.out and "存储挂载行" in outcome.out and "不是挂载的文件系统" in outcome.out
    assert "storage.not-checked" in outcome.out and "storage.checkpoint" in outcome.out
    for advice in ("Download the", "Copy the converted", "Copy paligemma"):  # no per-asset advice
        assert advice not in outcome.out
    assert world.snapshot() == before  # no checkpoint folder, no log, no record on the container's disk
    assert not world.experiment.exists() and not list((world.assets / "logs").glob("*node0*"))
    assert seconds < 30


def test_a_tione_job_whose_assets_root_does_not_exist_creates_nothing(world: World) -> None:
    mounted_as(world, ROOT_OVERLAY, PROC)
    missing = world.root / "cfs" / "openpi-assets"
    outcome = cli(world, "run", VLA_ASSETS_ROOT=str(missing))
    assert outcome.code == 3
    (headline,) = fails(outcome)
    assert f"the assets root {missing} does not exist: no CFS is mounted there" in headline
    assert "资源根目录" in outcome.out and "不存在" in outcome.out
    assert not (world.root / "cfs").exists()


def test_a_missing_root_below_a_mounted_cfs_points_at_the_rows_cfs_path(world: World) -> None:
    cfs = world.root / "cfs"
    cfs.mkdir()
    mounted_as(world, ROOT_OVERLAY, line(2, str(cfs.resolve()), "nfs4", "10.0.0.9:/"))
    outcome = cli(world, "check", VLA_ASSETS_ROOT=str(cfs / "openpi-assets"))
    assert outcome.code == 3 and "network file system nfs4" in outcome.out
    assert f"{cfs.resolve()} is mounted but holds no {cfs / 'openpi-assets'}" in outcome.out


def test_the_mounted_cfs_is_named_and_the_job_passes(world: World) -> None:
    mounted_as(world, ROOT_OVERLAY, PROC, line(2, str(world.assets.resolve()), "nfs4", "10.0.0.9:/cfs"))
    outcome = cli(world, "check")
    assert outcome.code == 0, outcome.text[-3000:]
    assert "PASS  storage.assets-mount" in outcome.out and "network file system nfs4" in outcome.out
    assert "storage.checkpoint-writable" in outcome.out


@pytest.mark.parametrize("nodes, status", [(2, "WARN"), (1, "PASS")])
def test_a_multi_node_job_on_a_local_file_system_is_warned_that_nodes_must_share_it(world, nodes, status) -> None:
    mounted_as(world, ROOT_OVERLAY, PROC, line(2, str(world.assets.resolve()), "ext4", "/dev/vdb"))
    base = world.tione(nodes=nodes, per_node=8, rank=0)
    outcome = run_cli(world, ("check",), base, 60)
    assert outcome.code == 0, outcome.text[-3000:]
    assert f"{status}  storage.assets-mount" in outcome.out and "local file system ext4" in outcome.out
    assert ("need the log folder shared by every node" in outcome.out) is (nodes > 1)


def test_checkpoints_outside_the_mounted_root_on_the_containers_disk_fail(world: World) -> None:
    mounted_as(world, ROOT_OVERLAY, line(2, str(world.assets.resolve()), "nfs4", "10.0.0.9:/cfs"))
    local = world.root / "local-checkpoints"
    outcome = cli(world, "check", VLA_CHECKPOINT_BASE_DIR=str(local))
    assert outcome.code == 3
    (headline,) = fails(outcome)
    assert "storage.checkpoint-mount" in headline and "would fill the container's disk" in headline
    assert "VLA_CHECKPOINT_BASE_DIR" in outcome.out and not local.exists()


def test_a_trial_outside_tione_on_a_plain_disk_still_runs_with_a_warning(world: World) -> None:
    mounted_as(world, ROOT_OVERLAY, PROC)
    outcome = cli(world, "check", tione=False)
    assert outcome.code == 0, outcome.text[-3000:]
    assert "WARN  storage.assets-mount" in outcome.out and "fine for a trial on this machine" in outcome.out
    assert "PASS  storage.checkpoint-writable" in outcome.out


def test_a_tione_job_on_a_machine_without_containers_only_warns(world: World) -> None:
    mounted_as(world, "1 0 254:0 / / rw,relatime - ext4 /dev/vda rw", PROC)
    outcome = cli(world, "check")
    assert outcome.code == 0, outcome.text[-3000:]
    assert "WARN  storage.assets-mount" in outcome.out and "this machine's own disk (ext4 mounted at /)" in outcome.out


def test_a_fifo_for_the_mount_table_neither_hangs_nor_blocks_the_job(world: World) -> None:
    path = world.host / "proc" / "self" / "mountinfo"
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    outcome = cli(world, "check", limit_s=20)
    assert outcome.code == 0 and "storage.assets-mount" not in outcome.out  # unknown: no verdict, no hang
