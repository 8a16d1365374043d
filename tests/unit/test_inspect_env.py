"""What the launcher derives, in-process, before a single training process starts: the batch split check, the
training processes' environment and flight-recorder variables, where a path is mounted (the mount table read
without trust), openpi's command line and save rule, and whether openpi's transformers patch is in place.

Each test compares whole results (a whole `Finding`, `EnvPlan`, `Location`, `Mount` or argv list), so that a
changed message, boundary, branch or default shows as a failure."""

from __future__ import annotations

import importlib
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, Status
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.core.settings import Device, Precision, Settings
from entrypoint.inspect.batch import check_batch, nearest_valid
from entrypoint.inspect.environment import EnvPlan, flight_recorder_env, node_datasets_cache, training_env
from entrypoint.inspect.mounts import (
    LINE_LIMIT,
    Location,
    Mount,
    Placement,
    holding_mount,
    locate,
    mount_table,
    nearest_existing,
    parse_mountinfo,
    read_mountinfo,
)
from entrypoint.inspect.openpi import SAVED_LINE, STEP_LINE, TrainerFlags, final_step_saved
from entrypoint.inspect.patch import PatchState, PatchStatus, patch_state, transformers_dir
from entrypoint.inspect.topology import Topology, TopologySource


def topology(nnodes: int, per_node: int) -> Topology:
    return Topology(nnodes, 0, per_node, "10.0.0.1", 29500, TopologySource.TIONE, Device.GPU)


# ---------------------------------------------------------------- the global batch


@pytest.mark.parametrize(
    "batch, processes, expected",
    [
        (256, 24, [240, 264]),
        (5, 8, [8]),  # the multiple below would be 0: omitted
        (8, 8, [8, 16]),
        (9, 8, [8, 16]),
        (1, 1, [1, 2]),
    ],
)
def test_the_nearest_valid_batches_are_the_multiples_around_it(batch: int, processes: int, expected: list[int]) -> None:
    assert nearest_valid(batch, processes) == expected


def test_a_batch_that_divides_passes_naming_the_split() -> None:
    assert check_batch(48, topology(3, 8)) == Finding(
        "batch",
        Status.PASS,
        Text(
            "global batch 48 = 2 per process x 24 processes (3 node(s) x 8)",
            "全局 batch 48 = 每进程 2 x 24 个进程(3 个节点 x 8)",
        ),
        None,
        "VLA_BATCH_SIZE",
    )


def test_a_batch_that_does_not_divide_fails_offering_both_neighbours() -> None:
    assert check_batch(256, topology(3, 8)) == Finding(
        "batch",
        Status.FAIL,
        Text(
            "global batch size 256 does not divide by 24 processes (3 node(s) x 8); openpi would silently train 10 "
            "per process",
            "全局 batch 256 不能被 24 个进程(3 个节点 x 8)整除;openpi 会静默地按每进程 10 训练",
        ),
        Text("Set VLA_BATCH_SIZE to a multiple of 24: 240 or 264.", "请把 VLA_BATCH_SIZE 设为 24 的倍数:240 或 264。"),
        "VLA_BATCH_SIZE",
        ExitCode.JOB_MISSPECIFIED,
    )


def test_a_batch_smaller_than_the_process_count_is_offered_one_choice() -> None:
    finding = check_batch(5, topology(1, 8))
    assert (finding.status, finding.exit_code, finding.where) == (
        Status.FAIL,
        ExitCode.JOB_MISSPECIFIED,
        "VLA_BATCH_SIZE",
    )
    assert finding.message == Text(
        "global batch size 5 does not divide by 8 processes (1 node(s) x 8); openpi would silently train 0 per process",
        "全局 batch 5 不能被 8 个进程(1 个节点 x 8)整除;openpi 会静默地按每进程 0 训练",
    )
    assert finding.hint == Text("Set VLA_BATCH_SIZE to a multiple of 8: 8.", "请把 VLA_BATCH_SIZE 设为 8 的倍数:8。")


# ---------------------------------------------------------------- the training environment


def test_offer_keeps_a_present_value_even_an_empty_one() -> None:
    plan = EnvPlan()
    plan.offer({"A": "", "B": "mine"}, "A", "1")
    plan.offer({"A": "", "B": "mine"}, "B", "2")
    plan.offer({"A": "", "B": "mine"}, "C", "3")
    assert plan == EnvPlan(set={"C": "3"}, kept={"A": "", "B": "mine"}, removed=[])


def test_merge_adds_the_others_values_and_removals_once() -> None:
    plan = EnvPlan(set={"A": "1", "B": "1"}, kept={"K": "k"}, removed=["RANK", "PET_X"])
    plan.merge(EnvPlan(set={"B": "2", "C": "3"}, kept={"L": "l"}, removed=["PET_X", "PET_Y"]))
    assert plan == EnvPlan(
        set={"A": "1", "B": "2", "C": "3"}, kept={"K": "k", "L": "l"}, removed=["RANK", "PET_X", "PET_Y"]
    )


def test_apply_drops_the_removed_names_and_exports_the_set_ones() -> None:
    inherited = {"RANK": "1", "PATH": "/bin", "OMP_NUM_THREADS": "4", "PET_X": "x"}
    plan = EnvPlan(set={"OMP_NUM_THREADS": "1", "NEW": "n"}, kept={"PATH": "/bin"}, removed=["RANK", "PET_X"])
    assert plan.apply(inherited) == {"PATH": "/bin", "OMP_NUM_THREADS": "1", "NEW": "n"}
    assert inherited == {"RANK": "1", "PATH": "/bin", "OMP_NUM_THREADS": "4", "PET_X": "x"}  # not changed


def test_the_json_form_masks_secrets_and_sorts_the_removed_names() -> None:
    plan = EnvPlan(set={"HF_TOKEN": "hf_abcdefgh", "B": "2"}, kept={"WANDB_API_KEY": "k1234567"}, removed=["Z", "A"])
    assert plan.to_json() == {
        "set": {"B": "2", "HF_TOKEN": "***"},
        "kept": {"WANDB_API_KEY": "***"},
        "removed": ["A", "Z"],
    }


def test_the_datasets_cache_is_a_folder_per_node_rank_under_the_assets_root() -> None:
    settings = Settings(assets_root="/cfs/openpi-assets")
    assert node_datasets_cache(settings, 3) == Path("/cfs/openpi-assets/cache/datasets/node3")


DEFAULTS = {
    "JAX_PLATFORMS": "cpu",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "OMP_NUM_THREADS": "1",
    "PYTHONUNBUFFERED": "1",
    "PYTHONFAULTHANDLER": "1",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
}


def test_without_a_dataset_or_tokenizer_only_the_seeds_defaults_are_set() -> None:
    settings = Settings(assets_root="/a", dataset_repo_id=None)
    assert training_env({"PATH": "/bin"}, settings, True, None, 0) == EnvPlan(set=DEFAULTS, kept={}, removed=[])


def test_a_complete_dataset_turns_the_hub_offline_and_the_cache_goes_to_the_nodes_folder() -> None:
    settings = Settings(assets_root="/a")
    plan = training_env({}, settings, True, Path("/a/tok"), 2)
    assert plan == EnvPlan(
        set={
            **DEFAULTS,
            "HF_LEROBOT_HOME": "/a/datasets",
            "HF_DATASETS_CACHE": "/a/cache/datasets/node2",
            "HF_HUB_OFFLINE": "1",
            "OPENPI_DATA_HOME": "/a/tok",
        },
        kept={},
        removed=[],
    )


def test_an_incomplete_dataset_leaves_the_hub_reachable() -> None:
    plan = training_env({}, Settings(assets_root="/a"), False, None, 0)
    assert plan.set == {**DEFAULTS, "HF_LEROBOT_HOME": "/a/datasets", "HF_DATASETS_CACHE": "/a/cache/datasets/node0"}


def test_inherited_values_are_kept_the_job_file_wins_and_node_level_names_are_removed() -> None:
    inherited = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "PET_NPROC": "8",
        "PET_ADDR": "x",
        "XPET_KEEP": "k",
        "PETS": "p",
        "OMP_NUM_THREADS": "",  # present though empty: kept
        "JAX_PLATFORMS": "gpu",  # the job file sets it too: the job file wins, nothing is kept
        "HF_DATASETS_CACHE": "/mine",
    }
    settings = Settings(assets_root="/a", env={"JAX_PLATFORMS": "cuda", "EXTRA": "e"})
    plan = training_env(inherited, settings, False, None, 1)
    assert plan == EnvPlan(
        set={
            "JAX_PLATFORMS": "cuda",
            "EXTRA": "e",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
            "PYTHONUNBUFFERED": "1",
            "PYTHONFAULTHANDLER": "1",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
            "HF_LEROBOT_HOME": "/a/datasets",
        },
        kept={"OMP_NUM_THREADS": "", "HF_DATASETS_CACHE": "/mine"},
        removed=["WORLD_SIZE", "RANK", "PET_ADDR", "PET_NPROC"],
    )
    assert plan.apply(inherited) == {
        "XPET_KEEP": "k",
        "PETS": "p",
        "OMP_NUM_THREADS": "",
        "HF_DATASETS_CACHE": "/mine",
        **plan.set,
    }


FR_ALL = {
    "TORCH_FR_BUFFER_SIZE": "20000",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "20000",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/run/vla/pipe_",
    "TORCH_FR_DUMP_TEMP_FILE": "/logs/node0/rank_",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/logs/node0/rank_",
}


def test_the_flight_recorder_is_on_with_dumps_beside_the_log() -> None:
    plan = flight_recorder_env({}, {}, Path("/logs/node0"), "/run/vla/pipe_")
    assert plan == EnvPlan(set=FR_ALL, kept={}, removed=[])


def test_without_a_log_folder_no_dump_location_is_set() -> None:
    plan = flight_recorder_env({}, {}, None, "/p")
    assert plan == EnvPlan(
        set={
            "TORCH_FR_BUFFER_SIZE": "20000",
            "TORCH_NCCL_TRACE_BUFFER_SIZE": "20000",
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/p",
        },
        kept={},
        removed=[],
    )


def test_a_group_the_job_file_names_is_left_whole_and_the_others_still_set() -> None:
    chosen = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "5"}
    inherited = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "7", "TORCH_FR_BUFFER_SIZE": "9"}
    plan = flight_recorder_env(inherited, chosen, Path("/logs/node0"), "/run/vla/pipe_")
    rest = {k: v for k, v in FR_ALL.items() if "BUFFER" not in k}
    assert plan == EnvPlan(set=rest, kept={}, removed=[])


def test_an_inherited_name_keeps_its_group_and_the_others_still_set() -> None:
    inherited = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "7", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}
    plan = flight_recorder_env(inherited, {}, Path("/logs/node0"), "/run/vla/pipe_")
    rest = {k: v for k, v in FR_ALL.items() if "BUFFER" not in k and "ON_TIMEOUT" not in k}
    assert plan == EnvPlan(set=rest, kept=inherited, removed=[])


# ---------------------------------------------------------------- mounts: the table


ROOT = "1 0 0:50 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l"


def parsed(*lines: str) -> tuple[Mount, ...]:
    return parse_mountinfo(("\n".join(lines) + "\n").encode())


@pytest.mark.parametrize("fs_type", ["overlay", "overlayfs", "aufs", "rootfs", "fuse.fuse-overlayfs"])
def test_each_container_root_type_at_slash_is_the_containers_own_disk(fs_type: str) -> None:
    assert Mount("/", fs_type, "x").container_root
    assert not Mount("/x", fs_type, "x").container_root


def test_a_plain_disk_at_slash_is_not_a_container_root() -> None:
    assert not Mount("/", "ext4", "/dev/vda").container_root


@pytest.mark.parametrize(
    "fs_type, network",
    [
        ("nfs", True),
        ("nfs4", True),
        ("nfs3", True),  # not listed: any nfs* type
        ("cifs", True),
        ("smb3", True),
        ("smbfs", True),
        ("ceph", True),
        ("cephfs", True),
        ("glusterfs", True),
        ("lustre", True),
        ("gpfs", True),
        ("fuse.goosefs", True),
        ("fuse", True),
        ("ext4", False),
        ("xfs", False),
        ("tmpfs", False),
        ("overlay", False),
    ],
)
def test_network_file_systems_are_told_from_local_ones(fs_type: str, network: bool) -> None:
    assert Mount("/m", fs_type, "s").network is network


def test_the_placement_and_patch_words_that_records_carry() -> None:
    assert [str(p) for p in Placement] == ["mounted", "own-disk", "missing", "unknown"]
    assert [str(p) for p in PatchStatus] == ["present", "apply", "unavailable", "no-transformers"]


def test_the_options_do_not_make_two_mounts_differ() -> None:
    assert Mount("/", "ext4", "a", "rw") == Mount("/", "ext4", "a", "ro") and Mount("/", "ext4", "a").options == ""


def test_a_line_keeps_its_fields_and_both_option_lists() -> None:
    (mount,) = parsed("36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - nfs4 10.0.0.9:/cfs rw,vers=4.1,hard")
    assert (mount.point, mount.fs_type, mount.source, mount.options) == (
        "/mnt/parent",
        "nfs4",
        "10.0.0.9:/cfs",
        "rw,noatime,rw,vers=4.1,hard",
    )


def test_a_line_without_super_options_or_source_still_reads() -> None:
    with_source, without = parsed("1 0 0:5 / / rw - ext4 /dev/vda", "2 1 0:6 / /m ro,nosuid - tmpfs")
    assert (with_source.point, with_source.fs_type, with_source.source, with_source.options) == (
        "/",
        "ext4",
        "/dev/vda",
        "rw",
    )
    assert (without.point, without.fs_type, without.source, without.options) == ("/m", "tmpfs", "", "ro,nosuid")


def test_the_separator_is_looked_for_after_the_options_only() -> None:
    """A `-` in the options' place is not the separator; a source named `-` is not one either."""
    first, second = parsed("1 0 0:5 / /a - master:1 - ext4 /dev/a rw", "2 0 0:6 / /b rw - tmpfs - rw")
    assert (first.point, first.fs_type, first.source) == ("/a", "ext4", "/dev/a")
    assert (second.point, second.fs_type, second.source, second.options) == ("/b", "tmpfs", "-", "rw,rw")


@pytest.mark.parametrize(
    "bad", ["2 1 0:5 / /x rw -", "3 1 0:6 / /y rw - ", "no separator at all", "4 1 0:7 / rel rw - ext4 /dev/a rw"]
)
def test_a_bad_line_is_skipped_and_the_lines_after_it_still_read(bad: str) -> None:
    after = "9 1 0:9 / /cfs rw - nfs4 h:/c rw"
    assert parsed(ROOT, bad, after) == (Mount("/", "overlay", "overlay"), Mount("/cfs", "nfs4", "h:/c"))


def test_fields_are_split_at_single_spaces_only() -> None:
    (mount,) = parsed("1 0 0:5 / /a\tb rw - ext4 /dev/a rw")
    assert mount.point == "/a\tb"


def test_escapes_are_octal_bytes_and_other_backslashes_stay() -> None:
    (mount,) = parsed(r"1 0 0:5 / /m\040n\012o\134p\0401\08\777 rw - nfs h:/a\040b rw")
    assert mount.point == "/m n\no\\p 1\\08\udcff" and mount.source == "h:/a b"


def test_a_line_exactly_at_the_length_limit_is_kept_and_one_byte_more_is_not() -> None:
    head = "1 0 0:5 / /"
    tail = " rw - ext4 /dev/a rw"
    exact = head + "a" * (LINE_LIMIT - len(head) - len(tail)) + tail
    longer = head + "a" * (LINE_LIMIT + 1 - len(head) - len(tail)) + tail
    assert len(exact) == LINE_LIMIT and len(longer) == LINE_LIMIT + 1
    assert [len(m.point) for m in parsed(longer, exact)] == [len(exact) - len(head) - len(tail) + 1]


def write_table(path: Path, size: int) -> bytes:
    """A table of exactly `size` bytes (no final newline): a root line, then lines padded to fit."""
    data = ROOT.encode()
    number = 2
    while len(data) < size:
        data += f"\n{number} 1 0:{number} / /m{number} rw - tmpfs tmpfs rw,".encode()
        number += 1
    data = data[:size]
    path.write_bytes(data)
    return data


def test_a_table_of_exactly_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "mountinfo"
    data = write_table(path, 200_000)  # several 64 KiB blocks
    expected = parse_mountinfo(data)
    assert len(expected) > 3000 and read_mountinfo(path, limit=200_000) == expected


def test_the_last_bytes_of_a_table_at_the_limit_are_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "mountinfo"
    path.write_bytes(b"1 0 0:5 / / rw - ext4 /dev/vda rw,vers=4.1")
    table = read_mountinfo(path, limit=path.stat().st_size)
    assert table is not None and len(table) == 1 and table[0].options == "rw,rw,vers=4.1"


@pytest.mark.parametrize("size, limit", [(65_536 + 100, 65_536), (200_000, 100_000), (100_001, 100_000)])
def test_a_table_past_the_limit_reads_as_unknown(tmp_path: Path, size: int, limit: int) -> None:
    path = tmp_path / "mountinfo"
    write_table(path, size)
    assert read_mountinfo(path, limit=limit) is None


def test_a_table_with_no_valid_line_reads_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "mountinfo"
    path.write_bytes(b"garbage\nmore garbage\n")
    assert read_mountinfo(path) is None


def test_a_table_swapped_for_a_fifo_after_the_check_does_not_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is opened non-blocking: a FIFO put in the table's place between the type check and the open reads
    as unknown at once instead of waiting for a writer."""
    fifo = tmp_path / "mountinfo"
    os.mkfifo(fifo)
    result: list[object] = []
    monkeypatch.setattr(stat, "S_ISREG", lambda mode: True)  # the check saw a regular file
    worker = threading.Thread(target=lambda: result.append(read_mountinfo(fifo)), daemon=True)
    worker.start()
    worker.join(5)
    blocked = worker.is_alive()
    monkeypatch.undo()
    if blocked:  # release the reader: a writer that opens and closes at once
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
    assert not blocked and result == [None]


def test_an_impossible_table_path_reads_as_unknown() -> None:
    assert read_mountinfo(Path("/proc/self/mount\x00info")) is None


def test_a_read_error_reads_as_unknown_and_closes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mountinfo"
    path.write_bytes((ROOT + "\n").encode())
    closed: list[int] = []
    real_close = os.close

    def failing_read(fd: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    def recording_close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(os, "read", failing_read)
    monkeypatch.setattr(os, "close", recording_close)
    assert read_mountinfo(path) is None
    monkeypatch.undo()
    assert len(closed) == 1


def test_the_hosts_table_is_read_under_its_root(tmp_path: Path) -> None:
    table = tmp_path / "proc" / "self" / "mountinfo"
    table.parent.mkdir(parents=True)
    table.write_bytes((ROOT + "\n2 1 0:6 / /cfs rw - nfs4 h:/c rw\n").encode())
    assert mount_table(Host(env={}, root=tmp_path)) == (Mount("/", "overlay", "overlay"), Mount("/cfs", "nfs4", "h:/c"))
    assert mount_table(Host(env={}, root=tmp_path / "elsewhere")) is None


# ---------------------------------------------------------------- mounts: which one holds a path


def test_the_holding_mount_is_the_longest_whole_component_prefix() -> None:
    root, cfs, other = Mount("/", "ext4", "r"), Mount("/cfs", "nfs4", "c"), Mount("/cfs-other", "tmpfs", "t")
    mounts = (root, cfs, other)
    assert holding_mount("/cfs", mounts) == cfs
    assert holding_mount("/cfs/a/b", mounts) == cfs
    assert holding_mount("/cfs-other/x", mounts) == other
    assert holding_mount("/cfsx", mounts) == root
    assert holding_mount("/", mounts) == root


def test_the_last_mount_over_a_point_holds_it_and_no_mount_holds_nothing() -> None:
    old, new = Mount("/cfs", "nfs", "old"), Mount("/cfs", "nfs4", "new")
    assert holding_mount("/cfs/a", (old, new)) is new
    assert holding_mount("/cfs/a", (new, Mount("/", "ext4", "r"))) is new  # shorter points after it do not win
    assert holding_mount("/data/x", (Mount("/cfs", "nfs", "c"), Mount("/srv", "nfs", "s"))) is None
    assert holding_mount("/", (Mount("/cfs", "nfs", "c"),)) is None


def test_the_nearest_existing_folder_is_what_mkdir_would_write_into(tmp_path: Path) -> None:
    assert nearest_existing(tmp_path) == tmp_path
    assert nearest_existing(tmp_path / "a" / "b" / "c") == tmp_path
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert nearest_existing(tmp_path / "dangling") == tmp_path / "dangling"
    assert nearest_existing(Path("/")) == Path("/")


def test_a_relative_path_is_located_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    monkeypatch.chdir(tmp_path)
    root = Mount("/", "overlay", "overlay")
    here = tmp_path.resolve() / "d"  # the working folder as the kernel reports it: links resolved
    assert locate(Path("d"), (root,)) == Location(here, True, here, root, False)


def test_a_missing_path_with_a_mount_beside_it_is_not_inside_one(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    root, other = Mount("/", "overlay", "overlay"), Mount(str(tmp_path.resolve() / "other"), "nfs4", "h:/o")
    where = locate(tmp_path / "missing", (root, other))
    assert where == Location(tmp_path / "missing", False, tmp_path.resolve(), root, False)


def test_a_mount_below_the_path_makes_it_inside_and_one_at_the_path_does_not(tmp_path: Path) -> None:
    here = str(tmp_path.resolve())
    root, at, below = Mount("/", "overlay", "overlay"), Mount(here, "ext4", "a"), Mount(here + "/sub", "nfs", "b")
    assert locate(tmp_path, (root, below)) == Location(tmp_path, True, tmp_path.resolve(), root, True)
    assert locate(tmp_path, (root, at)) == Location(tmp_path, True, tmp_path.resolve(), at, False)
    beside = Mount(here + "-x", "nfs", "c")
    assert locate(tmp_path, (root, beside)).inside is False


def test_an_empty_table_gives_no_mount(tmp_path: Path) -> None:
    assert locate(tmp_path, ()) == Location(tmp_path, True, tmp_path.resolve(), None, False)


def test_a_path_that_cannot_be_resolved_is_located_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(path: object, *args: object, **kwargs: object) -> str:
        raise OSError(40, "Too many levels of symbolic links")

    monkeypatch.setattr(os.path, "realpath", failing)
    root = Mount("/", "overlay", "overlay")
    where = locate(tmp_path / "a" / "b", (root,))
    monkeypatch.undo()
    assert where == Location(tmp_path / "a" / "b", False, tmp_path, root, False)


OVERLAY = Mount("/", "overlay", "overlay")
EXT4_ROOT = Mount("/", "ext4", "/dev/vda")
NFS = Mount("/cfs", "nfs4", "10.0.0.9:/cfs")


@pytest.mark.parametrize(
    "location, own, container, placement",
    [
        (Location(Path("/x"), True, Path("/x"), None), False, False, Placement.UNKNOWN),
        (Location(Path("/x"), False, Path("/"), None), False, False, Placement.MISSING),
        (Location(Path("/x"), True, Path("/x"), OVERLAY), True, True, Placement.OWN_DISK),
        (Location(Path("/x"), True, Path("/x"), OVERLAY, True), False, False, Placement.MOUNTED),
        (Location(Path("/x"), True, Path("/x"), EXT4_ROOT), True, False, Placement.OWN_DISK),
        (Location(Path("/cfs"), True, Path("/cfs"), NFS), False, False, Placement.MOUNTED),
        (Location(Path("/cfs/a"), False, Path("/cfs"), NFS), False, False, Placement.MISSING),
        (Location(Path("/a"), False, Path("/"), OVERLAY), True, True, Placement.MISSING),
    ],
    ids=["unknown", "missing-unknown", "container", "container-inside", "machine", "nfs", "missing-nfs", "missing"],
)
def test_where_a_location_lies(location: Location, own: bool, container: bool, placement: Placement) -> None:
    assert (location.on_own_disk, location.on_container_disk, location.placement) == (own, container, placement)


@pytest.mark.parametrize(
    "mount, en, zh",
    [
        (None, "an unknown file system (the mount table could not be read)", "未知文件系统(无法读取挂载表)"),
        (
            Mount("/cfs", "nfs4", "10.0.0.9:/cfs"),
            "the network file system nfs4 mounted at /cfs (from 10.0.0.9:/cfs)",
            "挂载于 /cfs 的网络文件系统 nfs4(来源 10.0.0.9:/cfs)",
        ),
        (
            Mount("/data", "ext4", "/dev/vdb"),
            "the local file system ext4 mounted at /data (from /dev/vdb), not shared between machines",
            "挂载于 /data 的本地文件系统 ext4(来源 /dev/vdb),不在机器之间共享",
        ),
        (
            Mount("/", "overlay", "overlay"),
            "the container's own disk (overlay mounted at /)",
            "容器自身的磁盘(挂载于 / 的 overlay)",
        ),
        (
            Mount("/", "xfs", "/dev/vda"),
            "this machine's own disk (xfs mounted at /)",
            "本机自身的磁盘(挂载于 / 的 xfs)",
        ),
    ],
    ids=["unknown", "network", "local", "container", "machine"],
)
def test_the_holding_mount_in_words(mount: Mount | None, en: str, zh: str) -> None:
    assert Location(Path("/x"), True, Path("/x"), mount).described() == Text(en, zh)


def test_long_mount_fields_are_cut_each_at_its_own_length() -> None:
    fs, point, source = "f" * 41, "/" + "p" * 120, "s" * 81
    text = Location(Path("/x"), True, Path("/x"), Mount(point, fs, source)).described()
    cut = f"the local file system {'f' * 40}… mounted at {point[:120]}… (from {'s' * 80}…)"
    assert text.en == cut + ", not shared between machines"
    short = Location(Path("/x"), True, Path("/x"), Mount("/" + "p" * 119, "f" * 40, "s" * 80)).described()
    assert (
        short.en
        == f"the local file system {'f' * 40} mounted at /{'p' * 119} (from {'s' * 80}), not shared between machines"
    )


# ---------------------------------------------------------------- openpi's contract


@pytest.mark.parametrize("steps, interval, saved", [(50, 25, True), (49, 25, False), (51, 25, False), (7, 7, True)])
def test_the_final_step_is_saved_only_at_a_multiple_of_the_interval(steps: int, interval: int, saved: bool) -> None:
    assert final_step_saved(steps, interval) is saved


def flags(**changes: object) -> TrainerFlags:
    values: dict[str, object] = {
        "exp_name": "exp",
        "batch_size": 32,
        "num_train_steps": 50,
        "log_interval": 10,
        "save_interval": 25,
        "precision": Precision.BFLOAT16,
        "wandb": False,
        "weights": None,
        "assets_base_dir": Path("/a/assets"),
        "checkpoint_base_dir": Path("/a/checkpoints"),
        "num_workers": None,
        "resume": False,
    }
    return TrainerFlags(**{**values, **changes})  # type: ignore[arg-type]


def test_the_trainer_command_line_without_weights_or_workers() -> None:
    assert flags().argv("pi05_libero") == [
        "scripts/train_pytorch.py",
        "pi05_libero",
        "--exp-name",
        "exp",
        "--pytorch-weight-path",
        "None",
        "--pytorch-training-precision",
        "bfloat16",
        "--batch-size",
        "32",
        "--num-train-steps",
        "50",
        "--log-interval",
        "10",
        "--save-interval",
        "25",
        "--no-wandb-enabled",
        "--assets-base-dir",
        "/a/assets",
        "--checkpoint-base-dir",
        "/a/checkpoints",
        "--no-resume",
        "--no-overwrite",
    ]


def test_the_trainer_command_line_with_everything_given() -> None:
    given = flags(
        weights=Path("/a/weights/pi05"),
        precision=Precision.FLOAT32,
        wandb=True,
        num_workers=0,
        resume=True,
        extra_args=("--fsdp-devices", "2"),
    )
    assert given.argv("cfg") == [
        "scripts/train_pytorch.py",
        "cfg",
        "--exp-name",
        "exp",
        "--pytorch-weight-path",
        "/a/weights/pi05",
        "--pytorch-training-precision",
        "float32",
        "--batch-size",
        "32",
        "--num-train-steps",
        "50",
        "--log-interval",
        "10",
        "--save-interval",
        "25",
        "--wandb-enabled",
        "--assets-base-dir",
        "/a/assets",
        "--checkpoint-base-dir",
        "/a/checkpoints",
        "--num-workers",
        "0",
        "--resume",
        "--no-overwrite",
        "--fsdp-devices",
        "2",
    ]


@pytest.mark.parametrize(
    "line, step, loss, time",
    [
        ("step=10 loss=0.1234 lr=2.50e-05 grad_norm=1.67 time=19.1s", "10", "0.1234", "19.1"),
        ("[rank0] step=3 loss=nan lr=1e-4", "3", "nan", None),
        ("step=7 loss=-1.5e+00 mytime=2s time=4.0s", "7", "-1.5e+00", "4.0"),
    ],
)
def test_a_trainer_step_line_gives_its_step_loss_and_time(line: str, step: str, loss: str, time: str | None) -> None:
    match = STEP_LINE.search(line)
    assert match is not None and (match["step"], match["loss"], match["time"]) == (step, loss, time)


def test_only_whole_step_and_save_lines_match() -> None:
    assert STEP_LINE.search("substep=3 loss=1.0") is None
    saved = SAVED_LINE.search("INFO Saved checkpoint at step 25 -> /a/ckpt/25 (2.1 GB)")
    assert saved is not None and (saved["step"], saved["path"]) == ("25", "/a/ckpt/25")


# ---------------------------------------------------------------- openpi's transformers patch


def test_the_patch_state_of_each_case(tmp_path: Path) -> None:
    openpi, package = tmp_path / "openpi", tmp_path / "site" / "transformers"
    openpi.mkdir()
    (package / "models" / "siglip").mkdir(parents=True)
    script = openpi / "install_transformers_replace.sh"
    assert patch_state(openpi, None) == PatchState(PatchStatus.NO_TRANSFORMERS, None, script)
    assert patch_state(openpi, package) == PatchState(PatchStatus.UNAVAILABLE, package, script)
    script.mkdir()  # a folder is no script
    assert patch_state(openpi, package) == PatchState(PatchStatus.UNAVAILABLE, package, script)
    script.rmdir()
    script.write_text("#!/bin/sh\n")
    (package / "models" / "siglip" / "check.py").mkdir()  # a folder is no marker
    assert patch_state(openpi, package) == PatchState(PatchStatus.APPLY, package, script)
    (package / "models" / "siglip" / "check.py").rmdir()
    (package / "models" / "siglip" / "check.py").write_text("")
    assert patch_state(openpi, package) == PatchState(PatchStatus.PRESENT, package, script)


def test_the_patch_state_in_json() -> None:
    present = PatchState(
        PatchStatus.PRESENT, Path("/site/transformers"), Path("/openpi/install_transformers_replace.sh")
    )
    assert present.to_json() == {
        "status": "present",
        "transformers_dir": "/site/transformers",
        "script": "/openpi/install_transformers_replace.sh",
    }
    absent = PatchState(PatchStatus.NO_TRANSFORMERS, None, Path("/o/install_transformers_replace.sh"))
    assert absent.to_json() == {
        "status": "no-transformers",
        "transformers_dir": None,
        "script": "/o/install_transformers_replace.sh",
    }


def test_the_transformers_package_is_found_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "transformers"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert transformers_dir() == package
    assert "transformers" not in sys.modules


def test_a_transformers_module_that_is_no_package_or_none_at_all_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "transformers.py").write_text("")
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert transformers_dir() is None
    monkeypatch.setitem(sys.modules, "transformers", None)  # what find_spec reads as not installed
    assert transformers_dir() is None
