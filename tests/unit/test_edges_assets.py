"""Hostile asset trees and host files: what `check` must refuse (or warn about) without hanging, tracing back or
trusting a number someone wrote.

Each case plants one thing in an otherwise valid world and runs the real command line (`tests/support/edges.py`):
non-regular files where a file belongs (FIFO, folder, device, socket, dangling link, link loop), git-lfs pointers
from a clone without git-lfs, safetensors that the real library refuses (written by the `safetensors` library and
then corrupted), episode files that are not what their names claim (real parquet written by pyarrow and a real
LeRobot v2.1 episode, cut or altered), LeRobot v3.0 datasets, path templates that reach into Python objects or ask
for a billion-character width, counts of a billion episodes, JSON nested past Python's recursion limit, integers
past its 4300-digit limit, checkpoint folders named `²`, `①` or `00010`, and step counts of 10**12.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from entrypoint.core.files import FileRefused, Problem, entries, read_all, read_ends, read_ends_of
from entrypoint.core.settings import load_settings
from entrypoint.inspect.assets import InvalidAsset, check_dataset_folder, check_safetensors, inspect_assets
from tests.support.edges import Edge, WorldLike, check_edge
from tests.support.synthetic import edit_info, make_checkpoint, make_dataset, mp4_bytes, parquet_bytes
from tests.unit.conftest import World

REAL = Path(__file__).resolve().parents[1] / "support" / "real"
G1 = REAL / "lerobot" / "g1_policy_train"
LFS_CLONE = REAL / "lerobot" / "new_test_lfs"
DATASET = "datasets/physical-intelligence/libero"
META = f"{DATASET}/meta"
INFO = f"{META}/info.json"
EPISODE = f"{DATASET}/data/chunk-000/episode_000001.parquet"
NORM_STATS = "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
WEIGHTS = "checkpoints/pi05_base_pytorch"
MODEL = f"{WEIGHTS}/model.safetensors"
CONFIG = f"{WEIGHTS}/config.json"
TOKENIZER = "big_vision/paligemma_tokenizer.model"
STAGED_TOKENIZER = f"cache/openpi/{TOKENIZER}"
EXPERIMENT = "checkpoints/pi05_libero/pi05_libero_pytorch"
HUGE_INT = "9" * 5000  # past Python's 4300-digit limit
DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit
Setup = Callable[[WorldLike], None]


def lfs_pointer_text(name: str = "data/chunk-000/episode_000000.parquet") -> str:
    """The real pointer a clone without git-lfs left for `name` (QianHuixun/New-Test)."""
    return json.loads((LFS_CLONE / "lfs_pointers.json").read_text())["pointer_files"][name]


# ---- setups ----


def at(world: WorldLike, relative: str) -> Path:
    return world.assets / relative


def thing(relative: str, kind: str) -> Setup:
    """Replace whatever is at `relative` with something that is not a regular file."""

    def setup(world: WorldLike) -> None:
        target = at(world, relative)
        if target.is_dir() and not target.is_symlink():
            for child in sorted(target.rglob("*"), reverse=True):
                child.rmdir() if child.is_dir() else child.unlink()
            target.rmdir()
        elif target.exists() or target.is_symlink():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(target)
        elif kind == "folder":
            target.mkdir()
        elif kind == "dangling":
            target.symlink_to(world.root / "gone" / target.name)
        elif kind == "loop":
            target.symlink_to(target)
        elif kind == "dev-zero":
            target.symlink_to("/dev/zero")
        elif kind == "socket":  # bound in a short folder (a socket's path is at most 107 bytes), then moved
            with tempfile.TemporaryDirectory(dir="/tmp") as short, socket.socket(socket.AF_UNIX) as server:
                server.bind(f"{short}/s")
                os.rename(f"{short}/s", target)
        else:
            raise ValueError(kind)

    return setup


def content(relative: str, data: bytes | str) -> Setup:
    def setup(world: WorldLike) -> None:
        target = at(world, relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)

    return setup


def sparse(relative: str, size: int) -> Setup:
    """A file of `size` bytes that takes no room (a hole)."""

    def setup(world: WorldLike) -> None:
        with open(at(world, relative), "wb") as handle:
            handle.truncate(size)

    return setup


def info(**changes: object) -> Setup:
    """meta/info.json with some keys changed (a value of None removes the key)."""

    def setup(world: WorldLike) -> None:
        edit_info(at(world, INFO).parent.parent, **changes)

    return setup


def removed(relative: str) -> Setup:
    def setup(world: WorldLike) -> None:
        target = at(world, relative)
        target.rmdir() if target.is_dir() and not target.is_symlink() else target.unlink()

    return setup


def info_text(text: str) -> Setup:
    return content(INFO, text)


def both(*setups: Setup) -> Setup:
    def setup(world: WorldLike) -> None:
        for each in setups:
            each(world)

    return setup


def with_videos(world: WorldLike) -> None:
    """The world's dataset again, with one video key."""
    root = at(world, DATASET)
    for child in sorted(root.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    make_dataset(root, episodes=3, video_keys=("observation.images.top",))


VIDEO = f"{DATASET}/videos/chunk-000/observation.images.top/episode_000002.mp4"


def tensors() -> dict[str, np.ndarray]:
    return {
        "a.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b.bias": np.ones(5, dtype=np.float16),
        "c.steps": np.arange(3, dtype=np.int64),
    }


def library_file(path: Path) -> None:
    """A safetensors file written by the safetensors library itself."""
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors(), str(path), metadata={"format": "pt"})


def split(path: Path) -> tuple[dict[str, dict[str, object]], bytes]:
    data = path.read_bytes()
    (length,) = struct.unpack_from("<Q", data)
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def join(path: Path, header: dict[str, dict[str, object]], body: bytes) -> None:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def corrupt(path: Path, how: str) -> None:
    """Corrupt a library-written safetensors file in one of the ways the library refuses."""
    header, body = split(path)
    if how == "trailing":
        path.write_bytes(path.read_bytes() + b"\0" * 16)
    elif how == "truncated":
        os.truncate(path, path.stat().st_size - 3)
    elif how == "gap":  # the last tensor moved 8 bytes further, its old place left empty
        last = max((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][0])
        start, end = header[last]["data_offsets"]
        header[last]["data_offsets"] = [start + 8, end + 8]
        join(path, header, body[:start] + bytes(8) + body[start:])
    elif how == "overlap":  # the last tensor starts 4 bytes inside the one before it
        last = max((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"][0])
        start, end = header[last]["data_offsets"]
        header[last]["data_offsets"] = [start - 4, end - 4]
        join(path, header, body[:-4])
    elif how == "shape":  # a shape that does not fill the tensor's bytes
        header["a.weight"]["shape"] = [3, 3]
        join(path, header, body)
    elif how == "dtype":
        header["b.bias"]["dtype"] = "F17"
        join(path, header, body)
    elif how == "shape-overflow":
        header["a.weight"]["shape"] = [2**40, 2**40, 0]
        join(path, header, body)
    elif how == "metadata":
        header["__metadata__"] = {"format": 1}  # type: ignore[dict-item]
        join(path, header, body)
    else:
        raise ValueError(how)


def weights_model(how: str) -> Setup:
    def setup(world: WorldLike) -> None:
        model = at(world, MODEL)
        library_file(model)
        corrupt(model, how)

    return setup


def real_parquet(data: bytes | None = None) -> bytes:
    return (G1 / "data" / "chunk-000" / "episode_000029.parquet").read_bytes() if data is None else data


def pyarrow_parquet(rows: int = 10) -> bytes:
    """A parquet file written by pyarrow, shaped like a LeRobot episode."""
    table = pa.table(
        {
            "state": pa.array([[0.0] * 8] * rows, type=pa.list_(pa.float32())),
            "actions": pa.array([[0.0] * 7] * rows, type=pa.list_(pa.float32())),
            "frame_index": pa.array(range(rows), type=pa.int64()),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def footer_length(data: bytes, length: int) -> bytes:
    return data[:-8] + length.to_bytes(4, "little") + data[-4:]


def every_episode(data: bytes) -> Setup:
    def setup(world: WorldLike) -> None:
        for path in at(world, f"{DATASET}/data").rglob("*.parquet"):
            path.write_bytes(data)

    return setup


def lfs_clone(world: WorldLike) -> None:
    """The dataset as `git clone` without git-lfs leaves it (real info.json and pointers of QianHuixun/New-Test)."""
    root = at(world, DATASET)
    for child in sorted(root.rglob("*"), reverse=True):
        child.rmdir() if child.is_dir() else child.unlink()
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_bytes((LFS_CLONE / "info.json").read_bytes())
    for name, text in json.loads((LFS_CLONE / "lfs_pointers.json").read_text())["pointer_files"].items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def v3_dataset(world: WorldLike) -> None:
    """A LeRobot v3.0 dataset: episodes packed into data/chunk-000/file-000.parquet."""
    root = at(world, DATASET)
    data = json.loads((root / "meta" / "info.json").read_text())
    data.update(
        codebase_version="v3.0",
        data_path="data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        video_path="videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        data_files_size_in_mb=100,
        video_files_size_in_mb=500,
    )
    (root / "meta" / "info.json").write_text(json.dumps(data))
    (root / "data" / "chunk-000" / "file-000.parquet").write_bytes(pyarrow_parquet())


def checkpoint(step: int | str, **change: bytes | str) -> Setup:
    """A complete step folder named `step`; `change` gives a file other bytes, or makes it a thing ('fifo' …)."""

    def setup(world: WorldLike) -> None:
        folder = make_checkpoint(at(world, EXPERIMENT), step)
        for name, value in change.items():
            filename = name.replace("_", ".")
            if isinstance(value, bytes):
                (folder / filename).write_bytes(value)
            else:
                thing(str((folder / filename).relative_to(world.assets)), value)(world)

    return setup


def checkpoint_model(step: int, how: str) -> Setup:
    def setup(world: WorldLike) -> None:
        checkpoint(step)(world)
        model = at(world, f"{EXPERIMENT}/{step}/model.safetensors")
        library_file(model)
        corrupt(model, how)

    return setup


def tmp_named(name: bytes) -> Setup:
    def setup(world: WorldLike) -> None:
        os.makedirs(os.fsencode(at(world, EXPERIMENT)) + b"/" + name)

    return setup


def in_home(kind: str) -> Setup:
    """The tokenizer where openpi itself looks (~/.cache/openpi) as something broken, and none staged."""

    def setup(world: WorldLike) -> None:
        at(world, STAGED_TOKENIZER).unlink()
        target = world.root / "home" / ".cache" / "openpi" / "big_vision" / "paligemma_tokenizer.model"
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "lfs":
            target.write_text(lfs_pointer_text())
        else:
            thing(os.path.relpath(target, world.assets), kind)(world)

    return setup


# ---- the table ----


def edge(id: str, family: str, code: int, culprit: str, **fields: object) -> Edge:
    return Edge(id, family, code, culprit, **fields)  # type: ignore[arg-type]


def asset(id: str, code: int, culprit: str, setup: Setup, **fields: object) -> Edge:
    return edge(id, "assets", code, culprit, setup=setup, **fields)


def host(id: str, code: int, culprit: str, **fields: object) -> Edge:
    return edge(id, "host", code, culprit, **fields)


def settings(id: str, code: int, culprit: str, **fields: object) -> Edge:
    return edge(id, "settings", code, culprit, **fields)


FIFO_LIMIT = 10.0  # a hang is killed here; the check itself answers in well under a second

EDGES = [
    # norm stats
    asset("norm-stats-fifo", 3, "norm_stats.json", thing(NORM_STATS, "fifo"), limit_s=FIFO_LIMIT),
    asset("norm-stats-folder", 3, "norm_stats.json", thing(NORM_STATS, "folder")),
    asset("norm-stats-dangling-link", 3, "norm_stats.json", thing(NORM_STATS, "dangling")),
    asset("norm-stats-link-loop", 3, "norm_stats.json", thing(NORM_STATS, "loop")),
    asset("norm-stats-dev-zero", 3, "norm_stats.json", thing(NORM_STATS, "dev-zero"), limit_s=FIFO_LIMIT),
    asset("norm-stats-socket", 3, "norm_stats.json", thing(NORM_STATS, "socket")),
    asset("norm-stats-lfs-pointer", 3, "git lfs pull", content(NORM_STATS, lfs_pointer_text())),
    asset("norm-stats-nested-100k", 3, "norm_stats.json", content(NORM_STATS, DEEP)),
    asset("norm-stats-5000-digit-integer", 3, "norm_stats.json", content(NORM_STATS, f'{{"norm_stats": {HUGE_INT}}}')),
    asset("norm-stats-400-digit-value", 3, "norm_stats.json",
          content(NORM_STATS, json.dumps({"norm_stats": {k: {f: [int("9" * 400)] for f in ("mean", "std", "q01", "q99")}
                                                          for k in ("state", "actions")}}))),
    asset("norm-stats-64-mib", 3, "norm_stats.json", sparse(NORM_STATS, 64 << 20)),
    asset("norm-stats-not-utf8", 3, "norm_stats.json", content(NORM_STATS, b"\xff\xfe{}")),
    asset("norm-stats-real-look-alike", 3, "norm_stats.json",
          content(NORM_STATS, (REAL / "norm_stats" / "beta-vla_norm_stats.json").read_bytes())),
    # base weights
    # config.json: openpi's trainer never reads it, so its problems are warnings (docs/validation.md)
    asset("config-json-fifo", 0, "config.json", thing(CONFIG, "fifo"), limit_s=FIFO_LIMIT),
    asset("config-json-lfs-pointer", 0, "git lfs pull", content(CONFIG, lfs_pointer_text())),
    asset("config-json-nested-100k", 0, "config.json", content(CONFIG, DEEP)),
    asset("model-fifo", 3, "model.safetensors", thing(MODEL, "fifo"), limit_s=FIFO_LIMIT),
    asset("model-folder", 3, "model.safetensors", thing(MODEL, "folder")),
    asset("model-dangling-link", 3, "model.safetensors", thing(MODEL, "dangling")),
    asset("model-dev-zero", 3, "model.safetensors", thing(MODEL, "dev-zero"), limit_s=FIFO_LIMIT),
    asset("model-lfs-pointer", 3, "git lfs pull", content(MODEL, lfs_pointer_text())),
    asset("model-trailing-bytes", 3, "after its last tensor", weights_model("trailing")),
    asset("model-truncated", 3, "truncated", weights_model("truncated")),
    asset("model-gap-between-tensors", 3, "a gap", weights_model("gap")),
    asset("model-overlapping-tensors", 3, "overlapping", weights_model("overlap")),
    asset("model-shape-does-not-fill", 3, "a.weight", weights_model("shape")),
    asset("model-unknown-dtype", 3, "F17", weights_model("dtype")),
    asset("model-shape-overflows-64-bits", 3, "a.weight", weights_model("shape-overflow")),
    asset("model-metadata-not-strings", 3, "__metadata__", weights_model("metadata")),
    asset("model-header-length-past-file", 3, "model.safetensors",
          content(MODEL, struct.pack("<Q", 2**63) + b"{}")),
    asset("model-header-nested-100k", 3, "model.safetensors",
          content(MODEL, struct.pack("<Q", len(DEEP)) + DEEP.encode())),
    asset("weights-path-is-a-file", 3, "not a folder", content("weights.bin", b"x"),
          env={"VLA_WEIGHTS": "weights.bin"}),
    # the dataset: meta/info.json
    asset("info-json-fifo", 3, "info.json", thing(INFO, "fifo"), limit_s=FIFO_LIMIT),
    asset("info-json-lfs-pointer", 3, "git lfs pull", content(INFO, lfs_pointer_text("meta/tasks.jsonl"))),
    asset("info-json-1-gib-hole", 3, "info.json", sparse(INFO, 1 << 30)),
    asset("info-json-valid-over-32-mib", 3, "at most 32 MiB", info(notes="x" * (33 << 20))),
    asset("total-episodes-1e9", 3, "info.json's total_episodes, 1000000000", info(total_episodes=10**9), limit_s=5),
    asset("total-episodes-1e7-chunks-of-1", 3, "info.json's total_episodes, 10000000",
          info(total_episodes=10**7, chunks_size=1), limit_s=5),
    asset("total-episodes-4000-digits", 3, "'total_episodes' is a number of 4000 digits, past any dataset's",
          info_text('{"total_episodes": ' + "9" * 4000 + ', "data_path": "x{episode_index}", "features": {}}')),
    asset("total-episodes-5000-digits", 3, "info.json",
          info_text('{"total_episodes": ' + HUGE_INT + ', "data_path": "x{episode_index}", "features": {}}')),
    asset("total-episodes-float-1e9", 3, "total_episodes", info(total_episodes=1e9)),
    asset("chunks-size-zero", 3, "chunks_size", info(chunks_size=0)),
    asset("data-path-billion-wide", 3, "0999999999d",
          info(data_path="data/chunk-{episode_chunk:0999999999d}/episode_{episode_index:06d}.parquet"), limit_s=5),
    asset("data-path-attribute", 3, "episode_index.__class__",
          info(data_path="data/{episode_index.__class__}/episode_{episode_index:06d}.parquet")),
    asset("data-path-index", 3, "episode_index[0]", info(data_path="data/{episode_index[0]}.parquet")),
    asset("data-path-conversion", 3, "episode_index!r", info(data_path="data/{episode_index!r}.parquet")),
    asset("data-path-unbalanced", 3, "data_path", info(data_path="data/{episode_index.parquet")),
    asset("data-path-unknown-field", 3, "{episode}", info(data_path="data/episode_{episode:06d}.parquet")),
    asset("data-path-no-index", 3, "episode_index", info(data_path="data/chunk-{episode_chunk:03d}/all.parquet")),
    asset("data-path-absolute", 3, "relative path", info(data_path="/etc/episode_{episode_index:06d}.parquet")),
    asset("data-path-dot-dot", 3, "relative path", info(data_path="../../{episode_index:06d}.parquet")),
    asset("video-path-key-formatted", 3, "video_key", both(with_videos, info(
          video_path="videos/chunk-{episode_chunk:03d}/{video_key:>40}/episode_{episode_index:06d}.mp4"))),
    asset("info-json-nested-100k", 3, "info.json", info_text(DEEP)),
    asset("lerobot-v3-dataset", 3, "v3.0", v3_dataset),
    asset("v3-layout-under-v2-version", 3, "v2.1",
          info(data_path="data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet")),
    # the dataset: meta/*.jsonl and episode files
    asset("cloned-without-git-lfs", 3, "git lfs pull", lfs_clone),
    asset("episodes-are-lfs-pointers", 3, "episode_000001.parquet", content(EPISODE, lfs_pointer_text())),
    asset("episode-not-parquet", 3, "PAR1", content(EPISODE, b"<html>404 Not Found</html>\n" * 4)),
    asset("episode-real-parquet-cut", 3, "episode_000001.parquet", content(EPISODE, real_parquet()[:30000])),
    asset("episode-real-parquet-footer-too-long", 3, "footer length",
          content(EPISODE, footer_length(real_parquet(), 10**6))),
    asset("episode-pyarrow-footer-zero", 3, "footer length", content(EPISODE, footer_length(pyarrow_parquet(), 0))),
    asset("episode-fifo", 3, "episode_000001.parquet", thing(EPISODE, "fifo"), limit_s=FIFO_LIMIT),
    asset("episode-folder", 3, "episode_000001.parquet", thing(EPISODE, "folder")),
    asset("episode-dangling-link", 3, "episode_000001.parquet", thing(EPISODE, "dangling")),
    asset("episode-dev-zero", 3, "episode_000001.parquet", thing(EPISODE, "dev-zero"), limit_s=FIFO_LIMIT),
    asset("chunk-folder-fifo", 3, "episode_000000.parquet", thing(f"{DATASET}/data/chunk-000", "fifo"),
          limit_s=FIFO_LIMIT),
    asset("video-not-mp4", 3, "ftyp", both(with_videos, content(VIDEO, parquet_bytes()))),
    asset("video-lfs-pointer", 3, "episode_000002.mp4", both(with_videos, content(VIDEO, lfs_pointer_text(
          "videos/chunk-000/observation.images.ego_view/episode_000002.mp4")))),
    asset("episodes-jsonl-fifo", 3, "episodes.jsonl", thing(f"{DATASET}/meta/episodes.jsonl", "fifo"),
          limit_s=FIFO_LIMIT),
    asset("tasks-jsonl-folder", 3, "tasks.jsonl", thing(f"{DATASET}/meta/tasks.jsonl", "folder")),
    asset("episodes-jsonl-not-json", 3, "episodes.jsonl", content(f"{META}/episodes.jsonl", "PK\x03\x04zip")),
    asset("stats-dangling-link", 3, "episodes_stats.jsonl", thing(f"{META}/episodes_stats.jsonl", "dangling")),
    asset("stats-missing", 3, "episodes_stats.jsonl|stats.json", removed(f"{META}/episodes_stats.jsonl")),
    asset("dataset-root-is-a-file", 3, "info.json", both(thing(DATASET, "folder"), removed(DATASET),
                                                          content(DATASET, b"not a folder"))),
    # resume: checkpoint folders openpi would misread, files a loader would choke on
    asset("step-superscript-two", 0, "²", checkpoint("²")),
    asset("step-circled-one-beside-25", 0, "①", both(checkpoint(25), checkpoint("①"))),
    asset("step-zero-padded-00010", 0, "00010", checkpoint("00010")),
    asset("step-arabic-indic-three", 0, "٣", both(checkpoint(1), checkpoint("٣"))),
    asset("checkpoint-model-trailing", 0, "after its last tensor",
          both(checkpoint(1), checkpoint_model(2, "trailing"))),
    asset("checkpoint-model-gap", 0, "a gap", checkpoint_model(2, "gap")),
    asset("checkpoint-model-lfs", 0, "git-lfs pointer",
          checkpoint(3, model_safetensors=lfs_pointer_text().encode())),
    asset("checkpoint-optimizer-fifo", 0, "optimizer.pt", checkpoint(4, optimizer_pt="fifo"), limit_s=FIFO_LIMIT),
    asset("checkpoint-metadata-empty", 0, "metadata.pt", checkpoint(5, metadata_pt=b"")),
    asset("tmp-folder-not-utf8", 0, "tmp_\\udcff", tmp_named(b"tmp_\xff")),
    # host files: the tokenizer where openpi looks, the experiment folder, the datasets cache
    host("tokenizer-in-home-fifo", 3, "paligemma_tokenizer.model", setup=in_home("fifo"), limit_s=FIFO_LIMIT),
    host("tokenizer-in-home-lfs-pointer", 3, "git-lfs pointer", setup=in_home("lfs")),
    host("tokenizer-in-home-folder", 3, "paligemma_tokenizer.model", setup=in_home("folder")),
    host("tokenizer-staged-dev-zero", 0, "paligemma_tokenizer.model", setup=thing(STAGED_TOKENIZER, "dev-zero")),
    host("tokenizer-openpi-data-home-fifo", 3, "paligemma_tokenizer.model", env={"OPENPI_DATA_HOME": "openpi-home"},
         setup=lambda w: thing(f"../openpi-home/{TOKENIZER}", "fifo")(w), limit_s=FIFO_LIMIT),
    host("experiment-folder-fifo", 3, "pi05_libero_pytorch", setup=thing(EXPERIMENT, "fifo"), limit_s=FIFO_LIMIT),
    host("datasets-cache-fifo", 0, "hf-datasets", setup=lambda w: os.mkfifo(w.root / "hf-datasets")),
    # huge numbers in settings: arithmetic, never a list of steps
    settings("steps-10-to-the-12", 0, "VLA_SAVE_INTERVAL", env={"VLA_NUM_TRAIN_STEPS": str(10**12)}, limit_s=5),
    settings("steps-1e9-plus-one", 0, "VLA_NUM_TRAIN_STEPS", env={"VLA_NUM_TRAIN_STEPS": str(10**9 + 1)}, limit_s=5),
    settings("steps-int64-max", 0, "VLA_NUM_TRAIN_STEPS", env={"VLA_NUM_TRAIN_STEPS": str(2**63 - 1)}, limit_s=5),
    settings("steps-and-interval-int64-max", 0, "VLA_NUM_TRAIN_STEPS",
             env={"VLA_NUM_TRAIN_STEPS": str(2**63 - 1), "VLA_SAVE_INTERVAL": str(2**62)}, limit_s=5),
    settings("steps-1e12-resumed", 0, "VLA_SAVE_INTERVAL", env={"VLA_NUM_TRAIN_STEPS": str(10**12)},
             setup=checkpoint(25), limit_s=5),
    settings("flag-steps-1e12-plan", 0, "VLA_SAVE_INTERVAL", argv=("plan", "--num-train-steps", str(10**12)),
             limit_s=5),
    settings("flag-steps-int64-max-plan", 0, "VLA_NUM_TRAIN_STEPS", argv=("plan", "--num-train-steps", str(2**63 - 1)),
             limit_s=5),
]  # fmt: skip

SAYS = {  # what the output must say beyond the culprit
    "norm-stats-fifo": "FIFO",
    "norm-stats-dangling-link": "symbolic link",
    "norm-stats-dev-zero": "device",
    "norm-stats-lfs-pointer": "git-lfs pointer",
    "norm-stats-nested-100k": "nested too deeply",
    "norm-stats-5000-digit-integer": "more than 4300 digits",
    "norm-stats-400-digit-value": "non-finite",
    "norm-stats-64-mib": "(64.0 MiB); the launcher reads a JSON asset (info.json, norm stats, config.json) of at most",
    "model-trailing-bytes": "16 bytes after its last tensor",
    "model-lfs-pointer": "git-lfs pointer",
    "info-json-1-gib-hole": "1073741824 bytes",
    "total-episodes-1e9": "999999997 of the 1000000000",
    "data-path-billion-wide": "not a simple integer format",
    "data-path-attribute": "attribute or index access",
    "lerobot-v3-dataset": "--revision v2.1",
    "v3-layout-under-v2-version": "LeRobot v3.0 dataset",
    "cloned-without-git-lfs": "cloned without git-lfs",
    "episode-not-parquet": "no PAR1 magic",
    "episode-real-parquet-cut": "no PAR1 magic",
    "episode-fifo": "FIFO",
    "step-superscript-two": "would crash",
    "step-zero-padded-00010": "would load the folder 10",
    "checkpoint-optimizer-fifo": "FIFO",
    "tokenizer-in-home-lfs-pointer": "paligemma_tokenizer.model",
    "steps-10-to-the-12": "saves 40000000001 checkpoint(s)",
}


@pytest.mark.parametrize("case", EDGES, ids=[f"{e.family}-{e.id}" for e in EDGES])
def test_edge(world: World, case: Edge) -> None:
    base = world.tione(nodes=2, per_node=8, rank=0) if case.tione else {}
    outcome = check_edge(world, case, base)
    if case.id in SAYS:
        assert SAYS[case.id] in outcome.text, f"{case.id}: does not say {SAYS[case.id]!r}\n{outcome.text[-3000:]}"


def test_the_matrix() -> None:
    families = {e.family for e in EDGES}
    assert families == {"assets", "host", "settings"}
    assert len(EDGES) >= 60 and len({e.id for e in EDGES}) == len(EDGES)
    assert set(SAYS) <= {e.id for e in EDGES}


# ---- the same edges in process: the reader, the loader's rules, real files, bounds ----


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "norm_stats.json"
    os.mkfifo(fifo)
    with pytest.raises(FileRefused) as caught:
        read_ends(fifo, 64, 8)
    assert caught.value.problem is Problem.FIFO
    (refused,) = read_ends_of([str(fifo)], 64, 8)  # as if a FIFO took a file's place after the listing
    assert isinstance(refused, FileRefused) and refused.problem is Problem.FIFO


@pytest.mark.parametrize(
    "make, problem",
    [
        (lambda p: p.symlink_to("/dev/zero"), Problem.DEVICE),
        (lambda p: p.mkdir(), Problem.FOLDER),
        (lambda p: p.symlink_to(p.parent / "gone"), Problem.DANGLING_LINK),
        (lambda p: p.symlink_to(p), Problem.LINK_LOOP),
        (lambda p: None, Problem.MISSING),
    ],
    ids=["dev-zero", "folder", "dangling", "loop", "missing"],
)
def test_what_is_not_a_regular_file_is_named(tmp_path: Path, make: Callable[[Path], None], problem: Problem) -> None:
    path = tmp_path / "x"
    make(path)
    with pytest.raises(FileRefused) as caught:
        read_all(path, 1024)
    assert caught.value.problem is problem
    if problem is Problem.DANGLING_LINK:
        assert caught.value.detail == str(tmp_path / "gone")


def test_reads_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big"
    with open(path, "wb") as handle:
        handle.truncate(1 << 40)  # a terabyte of hole
    with pytest.raises(FileRefused) as caught:
        read_all(path, 1 << 20)
    assert (caught.value.problem, caught.value.size) == (Problem.TOO_BIG, 1 << 40)
    path.write_bytes(b"PAR1" + bytes(100) + b"PAR1")
    ends = read_ends(path, 4, 4)
    assert (ends.size, ends.head, ends.tail) == (108, b"PAR1", b"PAR1")
    assert read_ends(path, 200, 300).tail == path.read_bytes()


def test_what_took_a_files_place_after_the_stat_is_refused_once_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat passed (a regular file was there); by the open a device has taken its place: nothing is read."""
    from entrypoint.core import files

    monkeypatch.setattr(files, "_require_regular", lambda path: None)  # the stat saw a regular file
    for reader in (lambda p: read_all(p, 1024), lambda p: files.read_text(p)):
        with pytest.raises(FileRefused) as caught:
            reader("/dev/zero")
        assert caught.value.problem is Problem.DEVICE


@pytest.mark.parametrize("grown_to, problem", [(30, None), (300, Problem.TOO_BIG)], ids=["within-limit", "past-limit"])
def test_a_file_that_grows_while_it_is_read_is_read_whole_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grown_to: int, problem: Problem | None
) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"x" * grown_to)
    real_lseek = os.lseek
    monkeypatch.setattr(os, "lseek", lambda fd, pos, how: min(real_lseek(fd, pos, how), 10))  # measured at 10 bytes
    if problem is None:
        assert read_all(path, 100) == b"x" * grown_to  # not the 10 bytes it had when measured
        return
    with pytest.raises(FileRefused) as caught:
        read_all(path, 100)
    assert (caught.value.problem, caught.value.limit) == (problem, 100)


def test_text_is_read_by_the_same_reader_and_must_be_utf8(tmp_path: Path) -> None:
    from entrypoint.core.files import describe, read_text

    path = tmp_path / "job.yaml"
    path.write_text("batch_size: 64  # 批大小\n", encoding="utf-8")
    assert read_text(path) == "batch_size: 64  # 批大小\n"
    path.write_bytes(b"batch_size: \xff\n")
    with pytest.raises(FileRefused) as caught:
        read_text(path)
    assert caught.value.problem is Problem.NOT_UTF8 and "not UTF-8" in describe(caught.value).en
    with pytest.raises(FileRefused) as caught:
        read_text(path, limit=4)
    assert caught.value.problem is Problem.TOO_BIG and "at most 4 bytes" in describe(caught.value).en


def test_a_listing_names_each_kind_without_opening_anything(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert entries(tmp_path) == {
        "file": None,
        "folder": Problem.FOLDER,
        "fifo": Problem.FIFO,
        "link": None,
        "dangling": Problem.DANGLING_LINK,
    }
    with pytest.raises(FileRefused):
        entries(tmp_path / "fifo")


CORRUPTIONS = ["trailing", "truncated", "gap", "overlap", "shape", "dtype", "shape-overflow", "metadata"]


@pytest.mark.parametrize("how", [None, *CORRUPTIONS])
def test_the_check_refuses_what_the_safetensors_library_refuses(tmp_path: Path, how: str | None) -> None:
    path = tmp_path / "model.safetensors"
    library_file(path)
    if how is not None:
        corrupt(path, how)
    try:
        with safe_open(str(path), "np") as opened:
            library_accepts = sorted(opened.keys()) == ["a.weight", "b.bias", "c.steps"]
    except SafetensorError:
        library_accepts = False
    try:
        check_safetensors(path)
        check_accepts = True
    except InvalidAsset:
        check_accepts = False
    assert library_accepts == check_accepts == (how is None)


@pytest.mark.parametrize(
    "header, body",
    [
        ({"z": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}, "w": {"dtype": "U8", "shape": [4],
          "data_offsets": [0, 4]}}, bytes(4)),
        ({"w": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}}, bytes(2)),
        ({"__metadata__": None, "w": {"dtype": "BF16", "shape": [], "data_offsets": [0, 2]}}, bytes(2)),
        ({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4], "extra": 1}}, bytes(4)),
    ],
    ids=["zero-size-tensor", "sub-byte-dtype", "scalar-null-metadata", "extra-key"],
)  # fmt: skip
def test_what_the_library_accepts_passes(tmp_path: Path, header: dict[str, dict[str, object]], body: bytes) -> None:
    path = tmp_path / "model.safetensors"
    join(path, header, body)
    with safe_open(str(path), "np") as opened:
        assert list(opened.keys())
    assert check_safetensors(path) == path.stat().st_size


def real_v21_dataset(root: Path) -> Path:
    """The real G1 v2.1 meta files, the real episode's bytes at each of its 100 episode paths, an mp4 per video."""
    (root / "meta").mkdir(parents=True)
    for name in ("info.json", "episodes.jsonl", "tasks.jsonl", "episodes_stats.jsonl"):
        (root / "meta" / name).write_bytes((G1 / "meta" / name).read_bytes())
    (root / "data" / "chunk-000").mkdir(parents=True)
    (root / "videos" / "chunk-000" / "observation.images.cam_high").mkdir(parents=True)
    for episode in range(100):
        (root / f"data/chunk-000/episode_{episode:06d}.parquet").write_bytes(real_parquet())
        (root / f"videos/chunk-000/observation.images.cam_high/episode_{episode:06d}.mp4").write_bytes(mp4_bytes())
    return root


def test_a_real_v21_dataset_passes(tmp_path: Path) -> None:
    root = real_v21_dataset(tmp_path / "G1")
    findings, complete, size = check_dataset_folder(root)
    assert complete and [f.id for f in findings] == ["assets.dataset"]
    assert "100 episodes, 200 files" in findings[0].message.en
    assert size == 100 * (len(real_parquet()) + len(mp4_bytes()))


@pytest.mark.parametrize("rows", [1, 100, 20_000])
def test_parquet_written_by_pyarrow_passes_and_its_damage_does_not(tmp_path: Path, rows: int) -> None:
    root = make_dataset(tmp_path / "ds", episodes=3)
    data = pyarrow_parquet(rows)
    for path in (root / "data").rglob("*.parquet"):
        path.write_bytes(data)
    assert check_dataset_folder(root)[1]
    episode = root / "data/chunk-000/episode_000001.parquet"
    for damaged in (data[: len(data) // 2], data[:-1], footer_length(data, len(data)), b"PAR1PAR1"):
        episode.write_bytes(damaged)
        findings, complete, _ = check_dataset_folder(root)
        assert not complete and [f.id for f in findings] == ["assets.dataset-content"], damaged[-8:]


def test_a_clone_without_git_lfs_is_named_file_by_file(world: World) -> None:
    lfs_clone(world)
    report = inspect_assets(load_settings(world.env), world.env)
    (finding,) = [f for f in report.findings if f.status.value == "fail"]
    pointers = json.loads((LFS_CLONE / "lfs_pointers.json").read_text())["pointer_files"]
    assert finding.id == "assets.dataset-lfs" and f"{len(pointers)} files under" in finding.message.en
    assert "git lfs pull" in finding.hint.en and "git lfs pull" in finding.hint.zh


@pytest.mark.parametrize("episodes, chunk_size", [(10**9, 1000), (10**9, 1), (10**18, 10**18), (2**63 - 1, 7)])
def test_the_claimed_episode_count_never_sizes_the_work(tmp_path: Path, episodes: int, chunk_size: int) -> None:
    root = make_dataset(tmp_path / "ds", episodes=3)
    data = json.loads((root / "meta/info.json").read_text())
    data.update(total_episodes=episodes, chunks_size=chunk_size)
    (root / "meta/info.json").write_text(json.dumps(data))
    started = time.perf_counter()
    findings, complete, _ = check_dataset_folder(root)
    assert time.perf_counter() - started < 1.0
    (missing,) = [f for f in findings if f.id == "assets.dataset-files"]
    found = 3 if chunk_size >= 3 else 1  # with chunks of 1, episodes 1 and 2 belong in chunk-001 and chunk-002
    assert f"{episodes - found} of the {episodes} episode files" in missing.message.en and not complete
    assert f"info.json's total_episodes, {episodes}" in missing.message.en and "info.json" in missing.hint.zh


def test_files_far_beyond_the_first_episodes_are_read_back_through_the_template(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", episodes=1)
    data = json.loads((root / "meta/info.json").read_text())
    data.update(total_episodes=10**9)
    (root / "meta/info.json").write_text(json.dumps(data))
    far = root / "data/chunk-123456/episode_123456789.parquet"
    far.parent.mkdir()
    far.write_bytes(b"not parquet")
    (root / "data/chunk-123456/episode_123456788.parquet").write_bytes(parquet_bytes())
    (root / "data/chunk-123456/episode_12345678.parquet").write_bytes(parquet_bytes())  # not where 12345678 goes
    findings, _, _ = check_dataset_folder(root)
    texts = {f.id: f.message.en for f in findings}
    assert f"{10**9 - 3} of the {10**9} episode files" in texts["assets.dataset-files"]
    assert "1 of 1000000000 episode files" in texts["assets.dataset-content"]
    assert "episode_123456789.parquet (no PAR1 magic" in texts["assets.dataset-content"]


@pytest.mark.parametrize("spec", ["", "d", "0", "3", "03", "03d", "06d", "6d", "006d", "99d"])
def test_a_template_makes_the_paths_python_formatting_makes(tmp_path: Path, spec: str) -> None:
    template = f"data/chunk-{{episode_chunk:{spec}}}/episode_{{episode_index:{spec}}}.parquet"
    root = make_dataset(tmp_path / "ds", episodes=12, chunk_size=5)
    for old in sorted((root / "data").rglob("*"), reverse=True):
        old.rmdir() if old.is_dir() else old.unlink()
    data = json.loads((root / "meta/info.json").read_text())
    data.update(data_path=template)
    (root / "meta/info.json").write_text(json.dumps(data))
    for episode in range(12):
        path = root / template.format(episode_chunk=episode // 5, episode_index=episode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(parquet_bytes())
    findings, complete, _ = check_dataset_folder(root)
    assert complete, [f.message.en for f in findings]


def test_slow_storage_is_read_by_a_few_threads_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for index in range(300):
        path = tmp_path / f"episode_{index:06d}.parquet"
        path.write_bytes(parquet_bytes(body=index.to_bytes(4, "little") * 30))
        paths.append(str(path))
    paths.insert(150, str(tmp_path / "gone.parquet"))
    in_turn = read_ends_of(paths, 64, 8)
    monkeypatch.setattr("entrypoint.core.files._SLOW_S", 0.0)  # every storage looks slow: threads take over
    started = threading.active_count()
    shared = read_ends_of(paths, 64, 8)
    assert [str(e) if isinstance(e, FileRefused) else e for e in shared] == [
        str(e) if isinstance(e, FileRefused) else e for e in in_turn
    ]
    assert isinstance(shared[150], FileRefused) and shared[150].problem is Problem.MISSING
    assert threading.active_count() == started


def test_a_claimed_count_past_int64_is_refused_as_out_of_range(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", episodes=3)
    data = json.loads((root / "meta/info.json").read_text())
    data.update(total_episodes=2**63)
    (root / "meta/info.json").write_text(json.dumps(data))
    (finding,) = check_dataset_folder(root)[0]
    assert f"'total_episodes' is {2**63}, past any dataset's count" in finding.message.en
    assert "超出任何数据集的数量范围" in finding.message.zh and "info.json" in finding.message.en


def test_the_videos_box_walk_on_slow_storage_finds_the_one_cut_video_among_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every video's boxes are walked (one read past its first 64 bytes each); on slow storage by a few threads,
    with the same verdict: only the cut one is named, and the sizes add up."""
    root = make_dataset(tmp_path / "physical-intelligence" / "libero", 100, video_keys=("observation.images.top",))
    video = mp4_bytes(body=bytes(100))  # moov's header lies past the first 64 bytes
    folder = root / "videos" / "chunk-000" / "observation.images.top"
    for path in folder.iterdir():
        path.write_bytes(video)
    (folder / "episode_000077.mp4").write_bytes(video[:-3])
    for slow in (False, True):
        if slow:
            monkeypatch.setattr("entrypoint.core.files._SLOW_S", 0.0)  # every storage looks slow: threads take over
        findings, complete, _ = check_dataset_folder(root)
        (broken,) = [f for f in findings if f.status.value == "fail"]
        assert not complete and "episode_000077.mp4" in broken.message.en and "cut short" in broken.message.en
        assert "episode_000076" not in broken.message.en
