"""Synthetic openpi-assets trees shaped like the real ones (LIBERO dataset, norm stats, pi05 weights).

Used by the unit tests, the image tests, the demo and the benchmarks. Files are tiny stand-ins except where a
size is asked for: `weights_size` makes a sparse `model.safetensors` whose header claims that many bytes. Stand-ins
look like what they stand for to a reader of a few bytes at each end: episode parquet files carry `PAR1` at both
ends and a footer length that fits, mp4 files are `ftyp`, `mdat` and `moov` boxes that add up (real parquet,
written by pyarrow, is in `tests/support/real/`).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from entrypoint.inspect.train_configs import RELEASED
from tests.support.weights import write_shipped_weights

REPO_ID = "physical-intelligence/libero"
CONFIG = "pi05_libero"
STATE_DIM, ACTION_DIM = 8, 7


def write_safetensors(path: Path, data_bytes: int = 64, sparse: bool = False) -> None:
    """A valid safetensors file with one uint8 tensor of `data_bytes` bytes (sparse: holes, not data)."""
    header = json.dumps(
        {
            "__metadata__": {"format": "pt"},
            "weight": {"dtype": "U8", "shape": [data_bytes], "data_offsets": [0, data_bytes]},
        }
    ).encode()
    header += b" " * (-len(header) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
        if sparse:
            handle.truncate(8 + len(header) + data_bytes)
        else:
            handle.write(bytes(data_bytes))


# An mp4's first box: size 24, type ftyp, major brand isom, minor version 512, compatible brands isom, mp41.
MP4_FTYP = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isommp41"


def parquet_bytes(body: bytes = bytes(48), footer: bytes = bytes(8)) -> bytes:
    """A parquet file's frame around `body` and `footer` (its metadata): `PAR1`, the body, the footer, the footer's
    length (4 bytes, little-endian), `PAR1`."""
    return b"PAR1" + body + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def mp4_box(kind: bytes, body: bytes, large: bool = False) -> bytes:
    """One mp4 box; `large`: the 64-bit size form (size field 1, the size after the type)."""
    if large:
        return (1).to_bytes(4, "big") + kind + (16 + len(body)).to_bytes(8, "big") + body
    return (8 + len(body)).to_bytes(4, "big") + kind + body


def mp4_bytes(body: bytes = bytes(16)) -> bytes:
    """An mp4 file as ffmpeg lays it out, 64 bytes by default: the `ftyp` box, `body` in an `mdat` box, then a small
    `moov` box."""
    return MP4_FTYP + mp4_box(b"mdat", body) + mp4_box(b"moov", bytes(8))


def norm_stats(state_dim: int = STATE_DIM, action_dim: int = ACTION_DIM) -> dict:
    def block(n: int) -> dict:
        return {"mean": [0.0] * n, "std": [1.0] * n, "q01": [-1.0] * n, "q99": [1.0] * n}

    return {"norm_stats": {"state": block(state_dim), "actions": block(action_dim)}}


def make_dataset(root: Path, episodes: int, chunk_size: int = 1000, video_keys: tuple[str, ...] = ()) -> Path:
    """A LeRobot v2.1 dataset at `root` (= $HF_LEROBOT_HOME/<repo_id>) with one small file per episode."""
    features = {
        "state": {"dtype": "float32", "shape": [STATE_DIM]},
        "actions": {"dtype": "float32", "shape": [ACTION_DIM]},
        "image": {"dtype": "image", "shape": [256, 256, 3]},
    }
    features.update({key: {"dtype": "video", "shape": [256, 256, 3]} for key in video_keys})
    info = {
        "codebase_version": "v2.1",
        "robot_type": "panda",
        "total_episodes": episodes,
        "total_frames": episodes * 10,
        "total_tasks": 1,
        "total_videos": episodes * len(video_keys),
        "total_chunks": (episodes + chunk_size - 1) // chunk_size,
        "chunks_size": chunk_size,
        "fps": 10,
        "splits": {"train": f"0:{episodes}"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
        if video_keys
        else None,
        "features": features,
    }
    meta = root / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "info.json").write_text(json.dumps(info, indent=2))
    (meta / "tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": "pick up the bowl"}) + "\n")
    (meta / "episodes.jsonl").write_text(
        "".join(json.dumps({"episode_index": i, "length": 10}) + "\n" for i in range(episodes))
    )
    (meta / "episodes_stats.jsonl").write_text(
        "".join(json.dumps({"episode_index": i, "stats": {}}) + "\n" for i in range(episodes))
    )
    for i in range(episodes):
        chunk = i // chunk_size
        path = root / "data" / f"chunk-{chunk:03d}" / f"episode_{i:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(parquet_bytes())
        for key in video_keys:
            video = root / "videos" / f"chunk-{chunk:03d}" / key / f"episode_{i:06d}.mp4"
            video.parent.mkdir(parents=True, exist_ok=True)
            video.write_bytes(mp4_bytes())
    return root


def make_assets_tree(
    root: Path,
    episodes: int = 3,
    weights_size: int = 64,
    sparse_weights: bool = False,
    tokenizer: bool = True,
    video_keys: tuple[str, ...] = (),
) -> Path:
    """A complete openpi-assets tree at `root`, laid out as the seed's CFS folder."""
    make_dataset(root / "datasets" / REPO_ID, episodes, video_keys=video_keys)
    stats = root / "assets" / CONFIG / REPO_ID / "norm_stats.json"
    stats.parent.mkdir(parents=True, exist_ok=True)
    stats.write_text(json.dumps(norm_stats()))
    weights = root / "checkpoints" / "pi05_base_pytorch"
    if not write_shipped_weights(weights / "model.safetensors"):  # once a pi05 signature ships, weights it accepts
        write_safetensors(weights / "model.safetensors", weights_size, sparse=sparse_weights)
    (weights / "config.json").write_text(json.dumps({"model_type": "pi05", "paligemma_variant": "gemma_2b"}))
    if tokenizer:
        model = root / "cache" / "openpi" / "big_vision" / "paligemma_tokenizer.model"
        model.parent.mkdir(parents=True, exist_ok=True)
        model.write_bytes(b"\x0a\x05stand-in tokenizer")
    (root / "code").mkdir(exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    return root


def make_openpi_tree(root: Path, configs: Iterable[str] = RELEASED) -> Path:
    """A minimal openpi checkout: only what the launcher looks at. Its train `configs` are declared as openpi
    declares them: `TrainConfig(name=...)` entries in `src/openpi/training/config.py`, the `*_polaris` ones in a
    `training/misc` module that config.py imports."""
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    (root / "scripts" / "train_pytorch.py").write_text("# stand-in\n")
    training = root / "src" / "openpi" / "training"
    (training / "misc").mkdir(parents=True, exist_ok=True)
    names = sorted(configs)
    misc = [n for n in names if n.endswith("_polaris")]
    (training / "misc" / "polaris_config.py").write_text(train_configs_source(misc, in_function=True))
    (training / "config.py").write_text(train_configs_source([n for n in names if n not in misc]))
    return root


def train_configs_source(names: Iterable[str], in_function: bool = False) -> str:
    """Python source declaring `names` as openpi's config module does (or, `in_function`, as its misc modules do)."""
    entries = "".join(f"    TrainConfig(\n        name={name!r},\n        batch_size=32,\n    ),\n" for name in names)
    if in_function:
        body = entries.replace("\n    ", "\n        ").replace("    TrainConfig(", "        TrainConfig(", 1)
        return (
            "def get_polaris_configs():\n    from openpi.training.config import TrainConfig\n\n"
            f"    return [\n{body}    ]\n"
        )
    return (
        "import dataclasses\n\nimport openpi.training.misc.polaris_config as polaris_config\n\n\n"
        "@dataclasses.dataclass(frozen=True)\nclass TrainConfig:\n    name: str\n    batch_size: int = 32\n\n\n"
        f"_CONFIGS = [\n{entries}    *polaris_config.get_polaris_configs(),\n]\n"
        "_CONFIGS_DICT = {config.name: config for config in _CONFIGS}\n"
    )


def make_checkpoint(exp_dir: Path, step: int | str, complete: bool = True, missing: str | None = None) -> Path:
    """A step folder as openpi writes it (`step` may be any folder name); `missing` leaves out one file,
    `complete=False` writes tmp_<step>."""
    folder = exp_dir / (str(step) if complete else f"tmp_{step}")
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("model.safetensors", "optimizer.pt", "metadata.pt"):
        if name == missing:
            continue
        if name == "model.safetensors":
            write_safetensors(folder / name)
        else:
            (folder / name).write_bytes(os.urandom(16))
    return folder


SUITES = (
    "libero_10_no_noops_lerobot",
    "libero_spatial_no_noops_lerobot",
    "libero_object_no_noops_lerobot",
    "libero_goal_no_noops_lerobot",
)
RELEASE_FILES = {  # manifest entry -> path under the base URL (the seed's object-storage layout)
    "dataset": "datasets/libero/physical-intelligence.tar.gz",
    "norm-stats": "datasets/libero/norm_stats.json",
    "suites": "datasets/libero/libero_mujoco3.3.2.tar.gz",
    "weights": "models/PI05/pi05_base_pytorch.tar.gz",
}


def _noise(handle, size: int, seed: int) -> None:
    """Write `size` seeded random bytes, 16 MiB at a time."""
    import random

    source = random.Random(seed)
    while size > 0:
        step = min(size, 1 << 24)
        handle.write(source.randbytes(step))
        size -= step


def _fill(path: Path, size: int, seed: int) -> None:
    """A parquet frame of `size` bytes (at least 13) that compresses like image-heavy parquet: mostly random, about a
    fifth zeros (its footer)."""
    zeros = max(size // 5 - 12, 1)
    with open(path, "wb") as handle:
        handle.write(b"PAR1")
        _noise(handle, size - 12 - zeros, seed)
        handle.write(bytes(zeros) + zeros.to_bytes(4, "little") + b"PAR1")


def make_release(
    base: Path,
    episodes: int = 6,
    episode_bytes: int = 64 * 1024,
    weights_bytes: int = 256 * 1024,
    suite_episodes: int = 2,
    suite_episode_bytes: int | None = None,
    compresslevel: int = 6,
) -> dict[str, Path]:
    """The four files of the seed's step 2, shaped like the real ones, under `base` as the object storage lays them
    out: the LIBERO dataset tarball (`physical-intelligence/libero/…`), norm_stats.json, the per-suite tarball
    (`libero_mujoco3.3.2/<suite>/…`) and the weights tarball (`pi05_base_pytorch/{config.json,model.safetensors}`).
    Tarballs are gzip level 6, as `tar -czf` writes them."""
    import tarfile
    import tempfile

    paths = {name: base / relative for name, relative in RELEASE_FILES.items()}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        work = Path(scratch)
        dataset = make_dataset(work / "d" / REPO_ID, episodes)
        for index, episode in enumerate(sorted((dataset / "data").rglob("*.parquet"))):
            _fill(episode, episode_bytes, index)
        for suite in SUITES:
            root = make_dataset(work / "s" / "libero_mujoco3.3.2" / suite, suite_episodes)
            for index, episode in enumerate(sorted((root / "data").rglob("*.parquet"))):
                _fill(
                    episode,
                    suite_episode_bytes if suite_episode_bytes is not None else episode_bytes // 2,
                    1000 + index,
                )
        weights = work / "w" / "pi05_base_pytorch"
        write_safetensors(weights / "model.safetensors", weights_bytes)
        _fill_tensor(weights / "model.safetensors", weights_bytes)
        (weights / "config.json").write_text(json.dumps({"model_type": "pi05", "paligemma_variant": "gemma_2b"}))
        for name, folder, top in (
            ("dataset", work / "d", "physical-intelligence"),
            ("suites", work / "s", "libero_mujoco3.3.2"),
            ("weights", work / "w", "pi05_base_pytorch"),
        ):
            with tarfile.open(paths[name], "w:gz", compresslevel=compresslevel) as archive:
                archive.add(folder / top, top)
    paths["norm-stats"].write_text(json.dumps(norm_stats()))
    return paths


def _fill_tensor(path: Path, data_bytes: int) -> None:
    """Replace a safetensors file's zero tensor bytes with noise (weights do not compress)."""
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(size - data_bytes)
        _noise(handle, data_bytes, 7)


def edit_info(root: Path, **changes: object) -> None:
    """A dataset's meta/info.json with some keys changed (a value of None removes the key)."""
    path = root / "meta" / "info.json"
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))
