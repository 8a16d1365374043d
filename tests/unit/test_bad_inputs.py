"""Bad inputs through the real command line: each exits 2 or 3, names the culprit and the fix, shows no
traceback, finishes promptly and changes nothing on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.edges import without_passes
from tests.support.synthetic import norm_stats

STATS = "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
WEIGHTS = "checkpoints/pi05_base_pytorch"
DATASET = "datasets/physical-intelligence/libero"


@dataclass
class Case:
    """`code` 0 means the job can still run correctly: then the culprit must appear as a warning."""

    id: str
    code: int
    culprit: str
    env: dict[str, str] | None = None
    setup: Callable[[Path], None] | None = None
    tione: bool = True
    host: Callable[[Path], None] | None = None


def write(relative: str, content: bytes | str) -> Callable[[Path], None]:
    def apply(assets: Path) -> None:
        path = assets / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return apply


def remove(relative: str) -> Callable[[Path], None]:
    def apply(assets: Path) -> None:
        target = assets / relative
        if target.is_dir():
            for child in sorted(target.rglob("*"), reverse=True):
                child.rmdir() if child.is_dir() else child.unlink()
            target.rmdir()
        else:
            target.unlink()

    return apply


def job(text: str) -> Callable[[Path], None]:
    return write("code/job.yaml", text)


def stats_with(**changes) -> str:
    data = norm_stats()
    data["norm_stats"]["actions"].update(changes)
    return json.dumps(data)


CASES = [
    # TI-ONE variables (exit 2)
    Case("rank-not-integer", 2, "RANK", {"RANK": "one"}),
    Case("rank-negative", 2, "RANK", {"RANK": "-1"}),
    Case("rank-out-of-range", 2, "RANK", {"RANK": "2"}),
    Case("world-size-zero", 2, "WORLD_SIZE", {"WORLD_SIZE": "0"}),
    Case("gpus-per-node-empty", 2, "GPU_NUM_PER_NODE", {"GPU_NUM_PER_NODE": ""}),
    Case("gpus-per-node-float", 2, "GPU_NUM_PER_NODE", {"GPU_NUM_PER_NODE": "8.0"}),
    Case("port-zero", 2, "MASTER_PORT", {"MASTER_PORT": "0"}),
    Case("port-too-big", 2, "MASTER_PORT", {"MASTER_PORT": "70000"}),
    Case("port-text", 2, "MASTER_PORT", {"MASTER_PORT": "http"}),
    Case("master-missing-multinode", 2, "MASTER_ADDR", {"MASTER_ADDR": ""}),
    Case("master-garbage", 2, "MASTER_ADDR", {"MASTER_ADDR": "not a host!"}),
    Case("master-loopback-multinode", 2, "MASTER_ADDR", {"MASTER_ADDR": "127.0.0.1"}),
    Case("gpu-num-mismatch", 2, "GPU_NUM", {"GPU_NUM": "12"}),
    Case("node-list-count", 2, "NODE_LIST", {"NODE_LIST": "10.0.0.1:8"}),
    Case("node-list-sum", 2, "NODE_LIST", {"NODE_LIST": "10.0.0.1:8,10.0.0.2:4", "GPU_NUM": "16"}),
    Case("node-list-garbage", 2, "NODE_LIST", {"NODE_LIST": "10.0.0.1,10.0.0.2"}),
    Case("index-disagrees", 2, "INDEX", {"INDEX": "1"}),
    Case("visible-devices-too-few", 2, "CUDA_VISIBLE_DEVICES", {"CUDA_VISIBLE_DEVICES": "0,1"}),
    Case("world-size-without-tione", 2, "WORLD_SIZE", {"WORLD_SIZE": "4"}, tione=False),
    Case("pet-elastic-range", 2, "PET_NNODES", {"PET_NNODES": "1:4"}, tione=False),
    Case(
        "pet-rank-out-of-range",
        2,
        "PET_NODE_RANK",
        {"PET_NNODES": "2", "PET_NODE_RANK": "2", "PET_MASTER_ADDR": "n0"},
        tione=False,
    ),
    Case("fewer-gpus-than-asked", 3, "nvidia", {"GPU_NUM_PER_NODE": "16", "GPU_NUM": "32", "NODE_LIST": ""}),
    # settings (exit 2)
    Case(
        "batch-not-divisible",
        2,
        "VLA_BATCH_SIZE",
        {"VLA_BATCH_SIZE": "100", "GPU_NUM_PER_NODE": "3", "GPU_NUM": "6", "NODE_LIST": ""},
    ),
    Case("batch-smaller-than-world", 2, "VLA_BATCH_SIZE", {"VLA_BATCH_SIZE": "8"}),
    Case("batch-text", 2, "VLA_BATCH_SIZE", {"VLA_BATCH_SIZE": "lots"}),
    Case("steps-zero", 2, "VLA_NUM_TRAIN_STEPS", {"VLA_NUM_TRAIN_STEPS": "0"}),
    Case("precision-bad", 2, "VLA_PRECISION", {"VLA_PRECISION": "fp8"}),
    Case("overwrite-bad", 2, "VLA_OVERWRITE", {"VLA_OVERWRITE": "please"}),
    Case("device-bad", 2, "VLA_DEVICE", {"VLA_DEVICE": "tpu"}),
    Case("assets-root-relative", 2, "VLA_ASSETS_ROOT", {"VLA_ASSETS_ROOT": "relative/path"}),
    Case("extra-args-unbalanced-quote", 2, "VLA_EXTRA_ARGS", {"VLA_EXTRA_ARGS": "--seed 'x"}),
    Case("job-file-missing", 2, "VLA_JOB_FILE", {"VLA_JOB_FILE": "/nonexistent/job.yaml"}),
    Case("job-file-unknown-key", 2, "save_intervall", setup=job("save_intervall: 5\n")),
    Case("job-file-syntax", 2, "line", setup=job("batch_size: [256\n")),
    Case("job-file-tab-indent", 2, "job.yaml", setup=job("env:\n\tA: 1\n")),
    Case("job-file-binary", 2, "job.yaml", setup=write("code/job.yaml", b"\xff\xfe\x00bad")),
    # assets (exit 3)
    Case("norm-stats-missing", 3, "norm_stats.json", setup=remove(STATS)),
    Case("norm-stats-empty", 3, "norm_stats.json", setup=write(STATS, "")),
    Case("norm-stats-wrong-json", 3, "norm_stats.json", setup=write(STATS, "{norm_stats: }")),
    Case("norm-stats-wrong-dims", 3, "norm_stats.json", setup=write(STATS, stats_with(q99=[1.0] * 3))),
    Case("norm-stats-a-folder", 3, "norm_stats.json", setup=lambda a: (remove(STATS)(a), (a / STATS).mkdir())),
    Case("weights-missing", 3, "pi05_base_pytorch", setup=remove(WEIGHTS)),
    Case(
        "weights-truncated", 3, "model.safetensors", setup=lambda a: os.truncate(a / WEIGHTS / "model.safetensors", 20)
    ),
    Case("weights-config-garbage", 0, "config.json", setup=write(f"{WEIGHTS}/config.json", "[1, 2")),
    Case("dataset-info-missing", 3, "info.json", setup=remove(f"{DATASET}/meta/info.json")),
    Case("dataset-info-not-object", 3, "info.json", setup=write(f"{DATASET}/meta/info.json", "[]")),
    Case(
        "dataset-info-bad-template",
        3,
        "info.json",
        setup=write(
            f"{DATASET}/meta/info.json",
            json.dumps({"total_episodes": 1, "chunks_size": 1000, "data_path": "data/{nope}.parquet", "features": {}}),
        ),
    ),
    Case(
        "dataset-episode-missing",
        3,
        "episode_000000.parquet",
        setup=remove(f"{DATASET}/data/chunk-000/episode_000000.parquet"),
    ),
    Case("dataset-tasks-missing", 3, "tasks.jsonl", setup=remove(f"{DATASET}/meta/tasks.jsonl")),
    Case(
        "dataset-symlink-loop",
        3,
        "episode_000001.parquet",
        setup=lambda a: (
            remove(f"{DATASET}/data/chunk-000/episode_000001.parquet")(a),
            os.symlink("episode_000001.parquet", a / DATASET / "data/chunk-000/episode_000001.parquet"),
        ),
    ),
    Case("openpi-missing", 3, "train_pytorch.py", {"VLA_OPENPI_DIR": "/nonexistent/openpi"}),
    # more settings (exit 2)
    Case("grace-negative", 2, "VLA_GRACE_PERIOD", {"VLA_GRACE_PERIOD": "-1"}),
    Case("stall-timeout-text", 2, "VLA_STALL_TIMEOUT", {"VLA_STALL_TIMEOUT": "soon"}),
    Case("preflight-bad", 2, "VLA_PREFLIGHT", {"VLA_PREFLIGHT": "maybe"}),
    Case("preflight-min-negative", 2, "VLA_PREFLIGHT_MIN_BUSBW", {"VLA_PREFLIGHT_MIN_BUSBW": "-5"}),
    Case("rendezvous-timeout-zero", 2, "VLA_RENDEZVOUS_TIMEOUT", {"VLA_RENDEZVOUS_TIMEOUT": "0"}),
    Case("taco-mode-bad", 2, "VLA_TACO", {"VLA_TACO": "sometimes"}),
    Case("dataset-id-escapes", 2, "VLA_DATASET_REPO_ID", {"VLA_DATASET_REPO_ID": "../../etc"}),
    Case("log-interval-zero", 2, "VLA_LOG_INTERVAL", {"VLA_LOG_INTERVAL": "0"}),
    Case("job-file-env-list", 2, "env", setup=job("env: {A: [1, 2]}\n")),
    Case("job-file-extra-args-bool", 2, "extra_args", setup=job("extra_args: [--seed, true]\n")),
    # more assets (exit 3)
    Case("weights-elsewhere-missing", 3, "/nonexistent/weights", {"VLA_WEIGHTS": "/nonexistent/weights"}),
    Case("weights-model-empty", 3, "model.safetensors", setup=write(f"{WEIGHTS}/model.safetensors", b"")),
    Case(
        "norm-stats-infinity",
        3,
        "norm_stats.json",
        setup=write(STATS, json.dumps(norm_stats()).replace("1.0", "Infinity", 1)),
    ),
    Case(
        "dataset-zero-chunk-size",
        3,
        "chunks_size",
        setup=write(
            f"{DATASET}/meta/info.json",
            json.dumps({"total_episodes": 1, "chunks_size": 0, "data_path": "data/x.parquet", "features": {}}),
        ),
    ),
    Case("dataset-episodes-empty", 3, "episodes.jsonl", setup=write(f"{DATASET}/meta/episodes.jsonl", "")),
    # fake host trees
    Case(
        "gpus-only-in-proc",
        3,
        "nvidia",
        host=lambda h: (
            [p.unlink() for p in (h / "dev").glob("nvidia[0-9]*")]
            + [(h / "proc/driver/nvidia/gpus" / f"0000:{i:02x}:00.0").mkdir(parents=True) for i in range(2)]
        ),
    ),
    Case(
        "sysfs-garbage-rdma",
        0,
        "no RDMA port has a usable RoCE v2 GID",
        host=lambda h: [
            (h / "sys/class/infiniband/mlx5_0/ports/1").mkdir(parents=True),
            (h / "sys/class/infiniband/mlx5_0/ports/1/state").write_bytes(b"\xff\xfe garbage"),
            (h / "sys/class/infiniband/mlx5_0/ports/1/link_layer").write_text(""),
        ],
    ),
    Case("preset-hca-matches-nothing", 0, "NCCL_IB_HCA", {"NCCL_IB_HCA": "=mlx5_9:1"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(world, case):
    env = (world.tione(nodes=2, per_node=8, rank=0) if case.tione else {}) | (case.env or {})
    if case.setup:
        case.setup(world.assets)
    if case.host:
        case.host(world.host)
    before = world.snapshot()
    result = world.cli("check", env=env)
    assert result.code == case.code, result.text
    problems = without_passes(result.text)
    assert case.culprit in problems, result.text
    if case.code == 0:
        warnings = [block for block in problems.split("  WARN  ")[1:] if case.culprit in block.split("\n  ")[0]]
        assert warnings, f"{case.culprit!r} is not named in a warning:\n{result.text}"
    assert "Traceback" not in result.text
    assert world.snapshot() == before


def test_matrix_is_large_enough():
    assert len(CASES) >= 60


def test_bad_input_in_json_mode_is_still_json(world):
    result = world.cli("check", "--json", env=world.tione(rank=5))
    payload = json.loads(result.out)
    assert result.code == 2 and payload["error"]["where"] == "RANK" and payload["error"]["hint_zh"]


def test_unknown_variable_is_named_with_a_suggestion(world):
    result = world.cli("check", env={"VLA_BATCHSIZE": "64"})
    assert result.code == 0 and "VLA_BATCHSIZE" in result.out and "VLA_BATCH_SIZE" in result.out
