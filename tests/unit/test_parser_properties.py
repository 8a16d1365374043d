"""Properties of the parsers of files and variables anyone may write: any input gives a verdict or the
project's own error (never a traceback), no read starts past a file's end, and a sound file cut at any byte offset
is never judged sound. Bounded examples keep the unit tier quick."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from entrypoint.core.errors import UserError
from entrypoint.core.files import read_ends
from entrypoint.core.host import Host
from entrypoint.core.settings import Device
from entrypoint.fabric.decide import plan_fabric
from entrypoint.fabric.inventory import parse_nccl_conf
from entrypoint.inspect.assets import (
    HEAD_BYTES,
    InvalidAsset,
    _content_problem,
    _layout,
    _parse_json,
    check_norm_stats,
    check_safetensors,
)
from entrypoint.inspect.topology import Topology, resolve_topology
from tests.support.fakehosts import hcc_container
from tests.support.synthetic import (
    MP4_FTYP,
    make_dataset,
    mp4_box,
    mp4_bytes,
    norm_stats,
    parquet_bytes,
    write_safetensors,
)

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
REAL_PARQUET = Path(__file__).resolve().parents[1] / "support/real/lerobot/g1_policy_train/data/chunk-000"
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture
def reads(monkeypatch):
    """Every pread's (offset, file size): no read may start past the end."""
    seen: list[tuple[int, int]] = []
    real = os.pread

    def pread(fd: int, count: int, offset: int) -> bytes:
        seen.append((offset, os.fstat(fd).st_size))
        return real(fd, count, offset)

    monkeypatch.setattr(os, "pread", pread)
    return seen


def written(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def judged(path: Path, suffix: str):
    ends = read_ends(path, HEAD_BYTES, 8 if suffix == "parquet" else 0)
    return "empty" if not ends.size else _content_problem(suffix, ends, str(path))


def sound_files() -> dict[str, bytes]:
    real = sorted(REAL_PARQUET.glob("*.parquet"))[0].read_bytes()
    return {"synthetic": parquet_bytes(body=bytes(range(40)), footer=b"meta" * 5), "pyarrow": real}


@FAST
@given(data=st.data())
def test_a_parquet_file_cut_anywhere_is_never_sound(tmp_path, reads, data):
    for name, whole in sound_files().items():
        assert judged(written(tmp_path, "whole.parquet", whole), "parquet") is None
        cut = data.draw(st.integers(0, len(whole) - 1), label=name)
        assert judged(written(tmp_path, "cut.parquet", whole[:cut]), "parquet") is not None
    assert all(offset <= size for offset, size in reads)


@FAST
@given(blob=st.binary(max_size=200), suffix=st.sampled_from(["parquet", "mp4"]))
def test_any_bytes_get_a_verdict(tmp_path, reads, blob, suffix):
    judged(written(tmp_path, f"x.{suffix}", blob), suffix)
    assert all(offset <= size for offset, size in reads)


# What ffmpeg writes (LeRobot's videos): ftyp, free, mdat, then moov at the end; and the fast-start order, with
# moov first and a 64-bit mdat.
FFMPEG_MP4 = MP4_FTYP + mp4_box(b"free", b"") + mp4_box(b"mdat", bytes(range(200))) + mp4_box(b"moov", b"\x01" * 90)
FASTSTART_MP4 = MP4_FTYP + mp4_box(b"moov", b"\x02" * 90) + mp4_box(b"mdat", bytes(300), large=True)


@FAST
@given(data=st.data())
def test_an_mp4_cut_anywhere_is_never_sound(tmp_path, reads, data):
    for name, whole in {"synthetic": mp4_bytes(), "ffmpeg": FFMPEG_MP4, "fast start": FASTSTART_MP4}.items():
        assert judged(written(tmp_path, "whole.mp4", whole), "mp4") is None, name
        cut = data.draw(st.integers(0, len(whole) - 1), label=name)
        assert judged(written(tmp_path, "cut.mp4", whole[:cut]), "mp4") is not None, (name, cut)
    assert all(offset <= size for offset, size in reads)


def test_a_cut_mp4_says_where_its_boxes_stop_adding_up(tmp_path):
    cut = FFMPEG_MP4[: len(FFMPEG_MP4) - 10]  # moov loses its last 10 bytes
    problem = judged(written(tmp_path, "v.mp4", cut), "mp4")
    moov_at = len(MP4_FTYP) + 8 + 208
    assert problem.en == (
        f"cut short: its boxes stop adding up at byte {moov_at} of {len(cut)} (an interrupted download or copy)"
    )
    assert "文件不完整" in problem.zh
    ends_early = judged(written(tmp_path, "w.mp4", FFMPEG_MP4[:moov_at]), "mp4")  # cut exactly before moov
    assert "without the moov box every video has" in ends_early.en


def test_an_mp4_box_walk_reads_one_header_past_the_head_and_stops_at_64_boxes(tmp_path, reads):
    assert judged(written(tmp_path, "v.mp4", FFMPEG_MP4), "mp4") is None
    assert len(reads) == 2  # the head, then moov's header
    reads.clear()
    fragmented = MP4_FTYP + mp4_box(b"moof", bytes(8)) * 200  # 201 boxes: the walk gives up after 64, saying nothing
    assert judged(written(tmp_path, "f.mp4", fragmented), "mp4") is None
    assert len(reads) <= 1 + 64
    huge = MP4_FTYP + (2**32 - 1).to_bytes(4, "big") + b"mdat" + bytes(8)
    assert judged(written(tmp_path, "h.mp4", huge), "mp4") is not None  # claims 4 GiB of a 48-byte file


@FAST
@given(cut=st.integers(0, 8 + 256 + 63))
def test_a_safetensors_file_cut_anywhere_is_refused(tmp_path, reads, cut):
    whole = tmp_path / "model.safetensors"
    if not whole.exists():
        write_safetensors(whole, data_bytes=64)
    data = whole.read_bytes()
    assert check_safetensors(whole) == len(data)
    cut_file = written(tmp_path, "cut.safetensors", data[: min(cut, len(data) - 1)])
    with pytest.raises(InvalidAsset):
        check_safetensors(cut_file)
    assert all(offset <= size for offset, size in reads)


@FAST
@given(header=st.binary(max_size=64), length=st.integers(0, 2**64 - 1), tail=st.binary(max_size=64))
def test_any_safetensors_header_gets_a_verdict(tmp_path, reads, header, length, tail):
    path = written(tmp_path, "any.safetensors", length.to_bytes(8, "little") + header + tail)
    with contextlib.suppress(InvalidAsset):
        check_safetensors(path)
    assert all(offset <= size for offset, size in reads)


@FAST
@given(cut=st.integers(0, 10_000))
def test_json_files_cut_anywhere_are_refused(tmp_path, cut):
    info = (make_dataset(tmp_path / "ds", 2, video_keys=("cam",)) / "meta" / "info.json").read_bytes().rstrip()
    stats = json.dumps(norm_stats(3, 2)).encode()
    for whole in (info, stats):
        with pytest.raises(InvalidAsset):
            _parse_json(whole[: cut % len(whole)])
    assert _layout(_parse_json(info)).episodes == 2


@FAST
@given(value=JSON_VALUES)
def test_any_json_is_an_info_or_a_reason(value):
    with contextlib.suppress(InvalidAsset):
        _layout(value)


@FAST
@given(value=JSON_VALUES, where=st.sampled_from(["root", "norm_stats", "state", "mean"]))
def test_any_json_is_norm_stats_or_a_reason(tmp_path, value, where):
    data = norm_stats(3, 2)
    if where == "root":
        data = value
    elif where == "norm_stats":
        data["norm_stats"] = value
    elif where == "state":
        data["norm_stats"]["state"] = value
    else:
        data["norm_stats"]["state"]["mean"] = value
    path = written(tmp_path, "norm_stats.json", json.dumps(data).encode())
    try:
        dims = check_norm_stats(path)
    except InvalidAsset:
        return
    assert dims["actions"] == 2 and dims["state"] >= 1


TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
TIONE = ["GPU_NUM_PER_NODE", "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "GPU_NUM", "NODE_LIST", "INDEX"]


@FAST
@given(values=st.dictionaries(st.sampled_from(TIONE), TEXT | st.integers(-3, 20).map(str), max_size=8))
def test_any_tione_variables_give_a_topology_or_a_user_error(world, values):
    world.gpus(8)
    env = {"GPU_NUM_PER_NODE": "8", **values}
    try:
        topology = resolve_topology(Host(env=env, root=world.host), Device.GPU)
    except UserError as error:
        assert error.exit_code in (2, 3) and error.what.en and error.fix.en
        return
    assert 0 <= topology.node_rank < topology.nnodes and topology.nproc_per_node >= 1


@FAST
@given(entries=st.lists(st.tuples(TEXT, TEXT | st.integers(0, 16).map(str)), max_size=4), rank=st.integers(0, 3))
def test_any_node_list_gives_a_topology_or_a_user_error(world, entries, rank):
    world.gpus(8)
    node_list = ",".join(f"{host}:{gpus}" for host, gpus in entries)
    env = {"GPU_NUM_PER_NODE": "8", "WORLD_SIZE": "4", "RANK": str(rank), "MASTER_ADDR": "10.0.0.1"}
    try:
        resolve_topology(Host(env={**env, "NODE_LIST": node_list}, root=world.host), Device.GPU)
    except UserError as error:
        assert error.exit_code == 2


NCCL = ["NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "NCCL_NET", "NCCL_IB_ADDR_FAMILY"]


@pytest.fixture(scope="module")
def hcc(tmp_path_factory):
    return hcc_container(tmp_path_factory.mktemp("hcc")).root


@FAST
@given(values=st.dictionaries(st.sampled_from(NCCL), TEXT, max_size=6), conf=TEXT)
def test_any_nccl_presets_give_a_fabric_plan(hcc, values, conf):
    parse_nccl_conf(conf)
    topology = Topology(2, 0, 8, "10.0.0.5", 29500, "tione", "gpu")
    plan = plan_fabric(Host(env=values, root=hcc), topology)
    assert plan.transport.value in ("ib", "roce", "socket")
