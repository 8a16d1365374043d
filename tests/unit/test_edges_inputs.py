"""Hostile input at the edges: TI-ONE variables, `VLA_*` settings and flags, job YAML, `run` and `fetch-assets`.

Each case is what a user (or a platform) really can hand the launcher — numbers past Python's 4300-digit limit,
names longer than a file system takes, an experiment name that makes this node's log file name too long, a job
file that is a folder, a FIFO or a YAML bomb, a torchrun that is on PATH but cannot run, malformed URLs, nan as a
timeout, command-line slips — run through the real command line (`tests/support/edges.py`): the exit code, no
traceback, the culprit named, a fix in both languages, nothing changed on disk by `check`/`plan`, a bounded time.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.edges import Edge, WorldLike, check_edge
from tests.support.fakehosts import hcc_container
from tests.unit.conftest import FAKE_BIN, World

HUGE = "9" * 5000  # over Python's 4300-digit limit on int()
LONG = "n" * 300  # one name over the 255 bytes a file system allows
PAST_INT64 = str(2**63)
TIONE = World(Path(".")).tione  # TI-ONE's variables for a job shape, without a world


# ---- setups: what the user did besides the variables ----


def job_text(text: str) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        (world.assets / "code").mkdir(parents=True, exist_ok=True)
        (world.assets / "code" / "job.yaml").write_text(text)

    return setup


def job_bytes(data: bytes) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        (world.assets / "code").mkdir(parents=True, exist_ok=True)
        (world.assets / "code" / "job.yaml").write_bytes(data)

    return setup


def job_thing(kind: str) -> Callable[[WorldLike], None]:
    """`code/job.yaml` as something that is not a regular file."""

    def setup(world: WorldLike) -> None:
        target = world.assets / "code" / "job.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        if kind == "folder":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "dangling":
            target.symlink_to(world.root / "nowhere.yaml")
        elif kind == "loop":
            target.symlink_to(target)

    return setup


def fifo_at(name: str) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        os.mkfifo(world.root / name)

    return setup


def torchrun(content: bytes | None, mode: int = 0o755, kind: str = "file") -> Callable[[WorldLike], None]:
    """A `torchrun` first on PATH that is broken in one way: its bytes, its mode, or not a file at all."""

    def setup(world: WorldLike) -> None:
        folder = world.root / "broken-bin"
        folder.mkdir(exist_ok=True)
        target = folder / "torchrun"
        if kind == "folder":
            target.mkdir()
        elif kind == "dangling":
            target.symlink_to(folder / "gone")
        elif kind == "fifo":
            os.mkfifo(target, 0o755)
        else:
            target.write_bytes(content or b"")
            target.chmod(mode)
        only_broken(world, folder)

    return setup


def only_broken(world: WorldLike, folder: Path) -> None:
    """PATH with `folder` first and without any working torchrun (exec would skip to a working one): the stand-in's
    folder and any other that holds one (a machine with torch installed)."""
    kept = [
        part
        for part in world.env["PATH"].split(os.pathsep)
        if part != str(FAKE_BIN) and not os.path.lexists(os.path.join(part or ".", "torchrun"))
    ]
    world.env["PATH"] = os.pathsep.join([str(folder), *kept])


def nested_interpreter(world: WorldLike) -> None:
    """torchrun's #! interpreter is itself a script whose interpreter is missing (the kernel follows both)."""
    folder = world.root / "broken-bin"
    folder.mkdir(exist_ok=True)
    interpreter = folder / "python-wrapper"
    interpreter.write_text("#!/nonexistent/python3\n")
    interpreter.chmod(0o755)
    (folder / "torchrun").write_text(f"#!{interpreter}\nprint('never')\n")
    (folder / "torchrun").chmod(0o755)
    only_broken(world, folder)


def roce_node(world: WorldLike) -> None:
    """This node is a TI-ONE HCC container with RoCE ports (the fabric rules judge NCCL variables there)."""
    hcc_container(world.host)


def manifest(entry: dict[str, object] | None = None, text: str | None = None) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        body = text if text is not None else json.dumps({"entries": [entry]})
        (world.root / "manifest.yaml").write_text(body)

    return setup


def manifest_thing(kind: str) -> Callable[[WorldLike], None]:
    def setup(world: WorldLike) -> None:
        target = world.root / "manifest.yaml"
        if kind == "folder":
            target.mkdir()
        else:
            os.mkfifo(target)

    return setup


STATS_ENTRY = {"name": "stats", "url": "https://example.com/norm_stats.json", "to": "x/norm_stats.json"}


def entry(**changes: object) -> dict[str, object]:
    return {**STATS_ENTRY, **changes}


def nested(depth: int) -> str:
    """A job file whose `env` nests `depth` block mappings deep (indentation, not brackets)."""
    lines = ["env:"] + [f"{'  ' * (level + 1)}k{level}:" for level in range(depth)]
    return "\n".join(lines) + " 1\n"


BOMB = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
FETCH = ("fetch-assets", "--assets-root", "fresh")
TORCHRUN_SCRIPT = b"#!/bin/sh\nexit 0\n"


def edge(id: str, family: str, code: int, culprit: str, **fields: object) -> Edge:
    return Edge(id, family, code, culprit, **fields)  # type: ignore[arg-type]


def tione(id: str, code: int, culprit: str, **fields: object) -> Edge:
    return edge(id, "tione", code, culprit, **fields)


def settings(id: str, code: int, culprit: str, **fields: object) -> Edge:
    return edge(id, "settings", code, culprit, **fields)


def job(id: str, code: int, culprit: str, **fields: object) -> Edge:
    return edge(id, "job-yaml", code, culprit, **fields)


def run(id: str, code: int, culprit: str, **fields: object) -> Edge:
    return edge(id, "run", code, culprit, **fields)


def fetch(id: str, code: int, culprit: str, *argv: str, **fields: object) -> Edge:
    return edge(id, "fetch", code, culprit, argv=(*FETCH, *argv), tione=False, **fields)


EDGES = [
    # TI-ONE's variables: numbers past Python's int() limit, and a node rank that makes the log name too long
    tione("rank-5000-digits", 2, "RANK", env={"RANK": HUGE}),
    tione("world-size-5000-digits", 2, "WORLD_SIZE", env={"WORLD_SIZE": HUGE}),
    tione("master-port-5000-digits", 2, "MASTER_PORT", env={"MASTER_PORT": HUGE}),
    tione("gpus-per-node-5000-digits", 2, "GPU_NUM_PER_NODE", env={"GPU_NUM_PER_NODE": HUGE}),
    tione("gpu-num-5000-digits", 2, "GPU_NUM", env={"GPU_NUM": HUGE}),
    tione("index-5000-digits", 2, "INDEX", env={"INDEX": HUGE}),
    tione("node-list-count-5000-digits", 2, "NODE_LIST", env={"NODE_LIST": f"10.0.0.1:{HUGE},10.0.0.2:8"}),
    tione("pet-nnodes-5000-digits", 2, "PET_NNODES", env={"PET_NNODES": HUGE}, tione=False),
    # NCCL variables and the host's NCCL: numbers past int()'s limit are refused as out of range, never a traceback
    tione("nccl-ib-hca-port-5000-digits", 0, "NCCL_IB_HCA", env={"NCCL_IB_HCA": f"mlx5_bond_0:{HUGE}"},
          setup=roce_node),
    tione("nccl-ib-hca-port-out-of-range", 0, "mlx5_bond_1:256", env={"NCCL_IB_HCA": "mlx5_bond_0:1,mlx5_bond_1:256"},
          setup=roce_node),
    tione("rank-11-makes-the-log-name-too-long", 2, "VLA_EXP_NAME",
          env={**TIONE(nodes=12, per_node=8, rank=11), "VLA_EXP_NAME": "e" * 222}),
    tione("exp-name-one-byte-too-long-at-rank-0", 2, "VLA_EXP_NAME", env={"VLA_EXP_NAME": "e" * 223}),
    tione("exp-name-from-the-job-file-too-long", 2, "exp_name", setup=job_text(f"exp_name: {'e' * 240}\n")),
    # VLA_* settings and flags: numbers
    settings("steps-5000-digits", 2, "VLA_NUM_TRAIN_STEPS", env={"VLA_NUM_TRAIN_STEPS": HUGE}),
    settings("batch-size-past-int64", 2, "VLA_BATCH_SIZE", env={"VLA_BATCH_SIZE": PAST_INT64}),
    settings("grace-period-20-digits", 2, "VLA_GRACE_PERIOD", env={"VLA_GRACE_PERIOD": "9" * 20}),
    settings("stall-timeout-5000-digits", 2, "VLA_STALL_TIMEOUT", env={"VLA_STALL_TIMEOUT": HUGE}),
    settings("flag-batch-size-5000-digits", 2, "--batch-size", argv=("check", "--batch-size", HUGE)),
    settings("flag-save-interval-past-int64", 2, "--save-interval", argv=("check", "--save-interval", PAST_INT64)),
    settings("superscript-digits", 2, "VLA_BATCH_SIZE", env={"VLA_BATCH_SIZE": "²⁵⁶"}),
    settings("arabic-indic-digits", 2, "VLA_LOG_INTERVAL", env={"VLA_LOG_INTERVAL": "١٠"}),
    settings("busbw-infinite", 2, "VLA_PREFLIGHT_MIN_BUSBW", env={"VLA_PREFLIGHT_MIN_BUSBW": "1e999"}),
    settings("busbw-nan", 2, "VLA_PREFLIGHT_MIN_BUSBW", env={"VLA_PREFLIGHT_MIN_BUSBW": "nan"}),
    # empty is not 'none'
    settings("weights-empty", 2, "VLA_WEIGHTS", env={"VLA_WEIGHTS": ""}),
    settings("dataset-empty", 2, "VLA_DATASET_REPO_ID", env={"VLA_DATASET_REPO_ID": ""}),
    settings("asset-id-blank", 2, "VLA_ASSET_ID", env={"VLA_ASSET_ID": "   "}),
    settings("wheel-sha256-empty", 2, "VLA_TACO_WHEEL_SHA256", env={"VLA_TACO_WHEEL_SHA256": ""}),
    settings("num-workers-empty", 2, "VLA_NUM_WORKERS", env={"VLA_NUM_WORKERS": ""}),
    settings("flag-weights-empty", 2, "--weights", argv=("check", "--weights", "")),
    # names and paths a file system refuses
    settings("assets-root-long-name", 2, "VLA_ASSETS_ROOT", env={"VLA_ASSETS_ROOT": f"/tmp/{LONG}"}),
    settings("openpi-dir-long-name", 2, "VLA_OPENPI_DIR", env={"VLA_OPENPI_DIR": f"/opt/{LONG}/openpi"}),
    settings("weights-long-name", 2, "VLA_WEIGHTS", env={"VLA_WEIGHTS": f"checkpoints/{LONG}"}),
    settings("checkpoint-dir-long-name", 2, "VLA_CHECKPOINT_BASE_DIR", env={"VLA_CHECKPOINT_BASE_DIR": LONG}),
    settings("log-dir-long-name", 2, "VLA_LOG_DIR", env={"VLA_LOG_DIR": f"logs/{LONG}"}),
    settings("lerobot-home-long-name", 2, "VLA_LEROBOT_HOME", env={"VLA_LEROBOT_HOME": LONG}),
    settings("assets-base-dir-long-name", 2, "VLA_ASSETS_BASE_DIR", env={"VLA_ASSETS_BASE_DIR": LONG}),
    settings("dataset-id-long-name", 2, "VLA_DATASET_REPO_ID", env={"VLA_DATASET_REPO_ID": f"org/{LONG}"}),
    settings("asset-id-long-name", 2, "VLA_ASSET_ID", env={"VLA_ASSET_ID": f"org/{LONG}"}),
    settings("train-config-long-name", 2, "VLA_TRAIN_CONFIG", env={"VLA_TRAIN_CONFIG": "c" * 256}),
    # a train config openpi does not define, wherever it was set
    settings("train-config-typo", 2, "VLA_TRAIN_CONFIG", env={"VLA_TRAIN_CONFIG": "pi05_librero"}),
    settings("flag-train-config-typo", 2, "--train-config", argv=("check", "--train-config", "pi05_librero")),
    settings("train-config-typo-assets", 2, "VLA_TRAIN_CONFIG", argv=("check", "--assets"),
             env={"VLA_TRAIN_CONFIG": "pi05_librero"}, tione=False),
    settings("exp-name-256-bytes", 2, "VLA_EXP_NAME", env={"VLA_EXP_NAME": "e" * 256}),
    settings("taco-wheel-long-name", 2, "VLA_TACO_WHEEL", env={"VLA_TACO_WHEEL": f"/wheels/{LONG}.whl"}),
    settings("job-file-long-name", 2, "VLA_JOB_FILE", env={"VLA_JOB_FILE": f"/tmp/{LONG}.yaml"}),
    settings("flag-assets-root-long-name", 2, "--assets-root", argv=("check", "--assets-root", f"/{LONG}")),
    settings("flag-exp-name-log-too-long", 2, "--exp-name", argv=("check", "--exp-name", "x" * 230)),
    settings("checkpoint-path-over-4095-bytes", 2, "VLA_CHECKPOINT_BASE_DIR",
             env={"VLA_CHECKPOINT_BASE_DIR": "/".join(["c" * 250] * 17)}),
    # bytes, not characters: 100 CJK characters are 300 bytes
    settings("log-dir-multibyte", 2, "VLA_LOG_DIR", env={"VLA_LOG_DIR": "日志" * 50}),
    # flags the launcher owns, smuggled in through extra args
    settings("extra-args-overwrite", 2, "VLA_EXTRA_ARGS", env={"VLA_EXTRA_ARGS": "--overwrite"}),
    settings("extra-args-resume", 2, "--resume", env={"VLA_EXTRA_ARGS": "--seed 1 --resume"}),
    settings("extra-args-no-resume", 2, "--no-resume", env={"VLA_EXTRA_ARGS": "--no-resume"}),
    settings("extra-args-exp-name-eq", 2, "--exp-name", env={"VLA_EXTRA_ARGS": "--exp-name=other"}),
    settings("extra-args-underscore", 2, "--batch-size", env={"VLA_EXTRA_ARGS": "--batch_size=4"}),
    settings("extra-args-weights", 2, "--pytorch-weight-path", env={"VLA_EXTRA_ARGS": "--pytorch-weight-path /w"}),
    settings("extra-args-checkpoint-dir", 2, "--checkpoint-base-dir",
             env={"VLA_EXTRA_ARGS": "--checkpoint-base-dir /elsewhere"}),
    settings("flag-extra-args-overwrite", 2, "--extra-args", argv=("check", "--extra-args", "--overwrite")),
    # flags that make the trainer print something and exit 0 without training
    settings("extra-args-help", 2, "VLA_EXTRA_ARGS passes --help", env={"VLA_EXTRA_ARGS": "--help"}),
    settings("extra-args-h", 2, "VLA_EXTRA_ARGS passes -h", env={"VLA_EXTRA_ARGS": "--seed 1 -h"}),
    settings("extra-args-help-eq", 2, "passes --help", env={"VLA_EXTRA_ARGS": "--help=true"}),
    settings("extra-args-tyro-completion", 2, "passes --tyro-write-completion",
             env={"VLA_EXTRA_ARGS": "--tyro-write-completion bash /tmp/x"}),
    settings("flag-extra-args-help", 2, "--extra-args passes --help", argv=("check", "--extra-args", "--help")),
    # TACO wheel URLs with a malformed host or port, a scheme, a name: the error names the setting and the value
    settings("taco-wheel-port-out-of-range", 2, "VLA_TACO_WHEEL: https://host:99999",
             env={"VLA_TACO": "on", "VLA_TACO_WHEEL": "https://host:99999/x.whl"}),
    settings("taco-wheel-port-not-a-number", 2, "VLA_TACO_WHEEL: https://host:http",
             env={"VLA_TACO": "on", "VLA_TACO_WHEEL": "https://host:http/x.whl"}),
    settings("taco-wheel-open-ipv6", 2, "VLA_TACO_WHEEL: https://[::1/x.whl",
             env={"VLA_TACO": "on", "VLA_TACO_WHEEL": "https://[::1/x.whl"}),
    settings("taco-wheel-no-host", 2, "VLA_TACO_WHEEL: http://:80/x.whl",
             env={"VLA_TACO": "on", "VLA_TACO_ALLOW_HTTP": "1", "VLA_TACO_WHEEL": "http://:80/x.whl"}),
    settings("taco-wheel-ftp", 2, "VLA_TACO_WHEEL: unsupported address ftp://",
             env={"VLA_TACO": "on", "VLA_TACO_WHEEL": "ftp://host/x.whl"}),
    settings("taco-wheel-not-a-wheel-name", 2, "VLA_TACO_WHEEL: https://host/x.zip is not a wheel",
             env={"VLA_TACO": "on", "VLA_TACO_WHEEL": "https://host/x.zip"}),
    settings("taco-wheel-flag-malformed", 2, "--taco-wheel: https://host:0",
             argv=("check", "--taco-wheel", "https://host:0/x.whl"), env={"VLA_TACO": "on"}),
    settings("taco-wheel-bad-port-auto-warns", 0, "VLA_TACO_WHEEL: https://host:99999",
             env={"VLA_TACO": "auto", "VLA_TACO_WHEEL": "https://host:99999/x.whl"}),
    # command-line slips
    settings("bad-choice", 2, "--precision", argv=("check", "--precision", "fp8")),
    settings("unknown-command", 2, "chekc", argv=("chekc",)),
    settings("unknown-command-close", 2, "Did you mean 'check'?", argv=("chek",)),
    settings("unknown-command-json", 2, "Did you mean 'plan'?", argv=("pln", "--json")),
    settings("missing-value", 2, "--batch-size", argv=("check", "--batch-size")),
    settings("unknown-flag", 2, "--batch-sise", argv=("check", "--batch-sise", "64")),
    settings("unknown-flag-json", 2, "--bogus", argv=("check", "--json", "--bogus")),
    settings("boolean-with-value", 2, "--wandb", argv=("check", "--wandb=yes")),
    settings("default-run-unknown-flag", 2, "--bogus", argv=("--bogus",)),
    settings("preflight-has-no-batch-flag", 2, "--batch-size", argv=("preflight", "--batch-size", "8")),
    # job YAML: nesting, bombs, numbers, duplicate keys, tags
    job("deep-flow-lists", 2, "job.yaml", setup=job_text("env: " + "[" * 5000 + "]" * 5000 + "\n")),
    job("deep-flow-mappings", 2, "job.yaml", setup=job_text("env: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")),
    job("deep-block-mappings", 2, "job.yaml", setup=job_text(nested(60))),
    job("alias-bomb", 2, "job.yaml", setup=job_text(BOMB), limit_s=10),
    job("recursive-alias", 2, "*a", setup=job_text("extra_args: &a [--seed, *a]\n")),
    job("integer-5000-digits", 2, "job.yaml", setup=job_text(f"batch_size: {HUGE}\n")),
    job("hex-integer-huge", 2, "job.yaml", setup=job_text(f"num_train_steps: 0x{'f' * 5000}\n")),
    job("integer-past-int64", 2, "batch_size", setup=job_text(f"batch_size: {PAST_INT64}\n")),
    job("duplicate-key", 2, "batch_size", setup=job_text("batch_size: 64\nnum_train_steps: 10\nbatch_size: 128\n")),
    job("duplicate-env-key", 2, "NCCL_DEBUG", setup=job_text("env:\n  NCCL_DEBUG: INFO\n  NCCL_DEBUG: WARN\n")),
    job("python-object-tag", 2, "!!python/object", setup=job_text("batch_size: !!python/object:os.system 1\n")),
    job("binary-tag", 2, "!!binary", setup=job_text("exp_name: !!binary aGVsbG8=\n")),
    job("set-tag", 2, "!!set", setup=job_text("extra_args: !!set {a, b}\n")),
    job("custom-tag", 2, "!secret", setup=job_text("env: {HF_TOKEN: !secret hf}\n")),
    job("two-documents", 2, "job.yaml", setup=job_text("batch_size: 64\n---\nbatch_size: 128\n")),
    job("nul-character", 2, "job.yaml", setup=job_bytes(b"batch_size: 64\x00\n")),
    job("over-256-kib", 2, "job.yaml", setup=job_text("# " + "x" * 300_000 + "\n")),
    job("weights-empty-string", 2, "weights", setup=job_text("weights: ''\n")),
    job("train-config-typo", 2, "job.yaml: train_config", setup=job_text("train_config: pi05_librero\n")),
    job("taco-wheel-malformed", 2, "job.yaml: taco_wheel: https://h:99999", env={"VLA_TACO": "on"},
        setup=job_text("taco_wheel: https://h:99999/x.whl\n")),
    job("extra-args-overwrite", 2, "extra_args", setup=job_text("extra_args: [--overwrite]\n")),
    job("extra-args-resume-eq", 2, "--resume", setup=job_text("extra_args: ['--resume=true']\n")),
    job("argument-over-128-kib", 2, "extra_args", setup=job_text(f"extra_args: [--note, {'a' * 140_000}]\n")),
    job("variable-over-128-kib", 2, "BIG", setup=job_text(f"env: {{BIG: {'b' * 140_000}}}\n")),
    # job files that are not files
    job("job-yaml-is-a-folder", 2, "job.yaml", setup=job_thing("folder")),
    job("job-yaml-is-a-fifo", 2, "job.yaml", setup=job_thing("fifo"), limit_s=10),
    job("job-yaml-dangling-link", 2, "job.yaml", setup=job_thing("dangling")),
    job("job-yaml-link-loop", 2, "job.yaml", setup=job_thing("loop")),
    job("job-file-variable-fifo", 2, "VLA_JOB_FILE", env={"VLA_JOB_FILE": "job.fifo"}, setup=fifo_at("job.fifo"),
        limit_s=10),
    job("job-file-variable-folder", 2, "VLA_JOB_FILE", env={"VLA_JOB_FILE": "/"}),
    job("job-file-flag-folder", 2, "--job-file", argv=("check", "--job-file", "/")),
    job("baked-job-file-fifo", 2, "baked.fifo", env={"VLA_BAKED_JOB_FILE": "baked.fifo"}, setup=fifo_at("baked.fifo"),
        limit_s=10),
    # run: a torchrun that is on PATH but cannot run, and names or arguments that would crash the start
    run("torchrun-not-executable", 3, "torchrun", argv=("run",), setup=torchrun(TORCHRUN_SCRIPT, 0o644)),
    run("torchrun-bad-interpreter", 3, "/nonexistent/python", argv=("run",),
        setup=torchrun(b"#!/nonexistent/python\n")),
    run("torchrun-env-program-missing", 3, "no-such-python", argv=("run",),
        setup=torchrun(b"#!/usr/bin/env no-such-python\n")),
    run("torchrun-nested-interpreter", 3, "python-wrapper", argv=("run",), setup=nested_interpreter),
    run("torchrun-not-a-program", 3, "torchrun", argv=("run",), setup=torchrun(b"torchrun, but as prose\n")),
    run("torchrun-empty", 3, "torchrun", argv=("run",), setup=torchrun(b"")),
    run("torchrun-a-folder", 3, "torchrun", argv=("run",), setup=torchrun(None, kind="folder")),
    run("torchrun-dangling-link", 3, "torchrun", argv=("run",), setup=torchrun(None, kind="dangling")),
    run("torchrun-a-fifo", 3, "torchrun", argv=("run",), setup=torchrun(None, kind="fifo"), limit_s=10),
    run("check-torchrun-not-executable", 3, "torchrun", setup=torchrun(TORCHRUN_SCRIPT, 0o600)),
    run("check-torchrun-bad-interpreter", 3, "/nonexistent/sh", setup=torchrun(b"#!/nonexistent/sh\n")),
    run("preflight-torchrun-not-executable", 3, "torchrun", argv=("preflight",),
        setup=torchrun(TORCHRUN_SCRIPT, 0o644)),
    run("run-exp-name-log-too-long", 2, "VLA_EXP_NAME", argv=("run",), env={"VLA_EXP_NAME": "r" * 230}),
    run("run-log-dir-long-name", 2, "VLA_LOG_DIR", argv=("run",), env={"VLA_LOG_DIR": f"/tmp/{LONG}"}),
    run("run-extra-args-overwrite", 2, "VLA_EXTRA_ARGS", argv=("run",), env={"VLA_EXTRA_ARGS": "--overwrite"}),
    run("run-extra-args-help", 2, "VLA_EXTRA_ARGS passes --help", argv=("run",), env={"VLA_EXTRA_ARGS": "--help"}),
    run("run-argument-too-long", 2, "extra_args", argv=("run",),
        setup=job_text(f"extra_args: [--note, {'a' * 140_000}]\n")),
    run("run-weights-empty", 2, "VLA_WEIGHTS", argv=("run",), env={"VLA_WEIGHTS": ""}),
    run("run-taco-wheel-bad-port", 2, "https://h:0/x.whl", argv=("run",),
        env={"VLA_TACO": "on", "VLA_TACO_WHEEL": "https://h:0/x.whl"}),
    run("run-unknown-flag", 2, "--bogus", argv=("run", "--bogus")),
    run("run-train-config-typo", 2, "VLA_TRAIN_CONFIG", argv=("run",), env={"VLA_TRAIN_CONFIG": "pi05_librero"}),
    # fetch-assets: numeric options, URLs, manifests
    fetch("timeout-nan", 2, "--timeout", "--timeout", "nan"),
    fetch("timeout-inf", 2, "--timeout", "--timeout", "inf"),
    fetch("timeout-negative", 2, "--timeout", "--timeout", "-5"),
    fetch("timeout-zero", 2, "--timeout", "--timeout", "0"),
    fetch("timeout-text", 2, "--timeout", "--timeout", "soon"),
    fetch("segments-zero", 2, "--segments", "--segments", "0"),
    fetch("segments-huge", 2, "--segments", "--segments", "100000"),
    fetch("segments-5000-digits", 2, "--segments", "--segments", HUGE),
    fetch("segment-mib-inf", 2, "--segment-mib", "--segment-mib", "inf"),
    fetch("segment-mib-1e300", 2, "--segment-mib", "--segment-mib", "1e300"),
    fetch("retries-zero", 2, "--retries", "--retries", "0"),
    fetch("unknown-flag", 2, "--segmetns", "--segmetns", "2"),
    fetch("base-url-port-out-of-range", 2, "--base-url", "--dry-run", "--base-url", "https://host:99999/x"),
    fetch("base-url-open-ipv6", 2, "--base-url", "--dry-run", "--base-url", "https://[::1/x"),
    fetch("base-url-no-host", 2, "--base-url", "--dry-run", "--allow-http", "--base-url", "http://:80/"),
    fetch("manifest-url-bad-port", 2, "stats", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(entry(url="https://host:99999/x.json"))),
    fetch("manifest-url-open-ipv6", 2, "stats", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(entry(url="https://[::1/x.json"))),
    fetch("manifest-url-no-host", 2, "stats", "--dry-run", "--allow-http", "--manifest", "manifest.yaml",
          setup=manifest(entry(url="http://:80/x.json"))),
    fetch("manifest-size-5000-digits", 2, "manifest.yaml", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(text=f"entries:\n- name: stats\n  url: https://example.com/s.json\n  to: s.json\n"
                              f"  size: {HUGE}\n")),
    fetch("manifest-size-past-int64", 2, "size", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(entry(size=2**63))),
    fetch("manifest-duplicate-key", 2, "url", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(text="entries:\n- name: stats\n  url: https://a.example/s.json\n  url: https://b.example/s.json\n"
                              "  to: s.json\n")),
    fetch("manifest-deeply-nested", 2, "manifest.yaml", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(text="entries: " + "[" * 3000 + "]" * 3000 + "\n")),
    fetch("manifest-alias-bomb", 2, "manifest.yaml", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest(text=BOMB)),
    fetch("manifest-a-fifo", 2, "--manifest", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest_thing("fifo"), limit_s=10),
    fetch("manifest-a-folder", 2, "--manifest", "--dry-run", "--manifest", "manifest.yaml",
          setup=manifest_thing("folder")),
    fetch("manifest-path-long-name", 2, "--manifest", "--dry-run", "--manifest", f"{LONG}.yaml"),
    edge("assets-root-long-name", "fetch", 2, "--assets-root", argv=("fetch-assets", "--dry-run", "--assets-root",
         f"/tmp/{LONG}"), tione=False),
    fetch("job-file-a-folder", 2, "--job-file", "--dry-run", "--job-file", "/"),
]  # fmt: skip


@pytest.mark.parametrize("case", EDGES, ids=[f"{e.family}-{e.id}" for e in EDGES])
def test_edge(world: World, case: Edge) -> None:
    (world.root / "fresh").mkdir(exist_ok=True)
    base = world.tione(nodes=2, per_node=8, rank=0) if case.tione else {}
    check_edge(world, case, base)


def test_the_matrix_covers_every_family() -> None:
    families = {e.family for e in EDGES}
    assert families == {"tione", "settings", "job-yaml", "run", "fetch"}
    assert len(EDGES) >= 70 and len({(e.family, e.id) for e in EDGES}) == len(EDGES)


def test_a_fix_names_what_to_set_instead_of_an_owned_flag(world: World) -> None:
    result = world.cli("check", env={"VLA_EXTRA_ARGS": "--overwrite"})
    assert result.code == 2 and "VLA_OVERWRITE=1" in result.out and "请改为设置 VLA_OVERWRITE=1" in result.out
    result = world.cli("check", env={"VLA_EXTRA_ARGS": "--num-train-steps=5"})
    assert "set VLA_NUM_TRAIN_STEPS instead (or num_train_steps in the job file)" in result.out


def test_every_owned_flag_has_a_hint() -> None:
    """The flags refused in extra args are read from the argv the launcher builds; each has a setting to name."""
    from entrypoint.plan import OWNED_FLAG_SETTINGS, launcher_flags

    owned = launcher_flags()
    assert {"--overwrite", "--no-overwrite", "--resume", "--no-resume", "--exp-name", "--batch-size"} <= owned
    assert owned == set(OWNED_FLAG_SETTINGS)


def test_the_log_name_limit_is_exact(world: World) -> None:
    """222 bytes of experiment name still fit `<exp>-node0-<stamp>.error.json` in 255 bytes; 223 do not."""
    assert world.cli("check", env={"VLA_EXP_NAME": "e" * 222}).code == 0
    result = world.cli("check", "--json", env={"VLA_EXP_NAME": "e" * 223})
    plan = json.loads(result.out)
    assert result.code == 2 and [c["id"] for c in plan["checks"] if c["status"] == "fail"] == ["settings.name-too-long"]
    assert "by at least 1 bytes" in next(c["hint"] for c in plan["checks"] if c["status"] == "fail")


def test_a_run_with_a_too_long_name_writes_nothing(world: World) -> None:
    result = world.cli("run", env={"VLA_EXP_NAME": "r" * 230})
    assert result.code == 2 and "Traceback" not in result.text
    assert not (world.assets / "logs").exists() or not any((world.assets / "logs").iterdir())


def test_a_torchrun_that_works_passes(world: World) -> None:
    """The stand-in (`#!/usr/bin/env python3`) and a plain shell script pass the torchrun check."""
    assert world.cli("check").code == 0
    folder = world.root / "good-bin"
    folder.mkdir()
    (folder / "torchrun").write_bytes(TORCHRUN_SCRIPT)
    (folder / "torchrun").chmod(0o755)
    result = world.cli("plan", "--json", env={"PATH": f"{folder}{os.pathsep}{world.env['PATH']}"})
    assert result.code == 0 and json.loads(result.out)["command"][0] == str(folder / "torchrun")


def test_the_interpreter_check_follows_a_real_interpreter(world: World) -> None:
    folder = world.root / "good-bin"
    folder.mkdir()
    (folder / "torchrun").write_text(f"#!{sys.executable}\nprint('ok')\n")
    (folder / "torchrun").chmod(0o755)
    assert world.cli("check", env={"PATH": f"{folder}{os.pathsep}{world.env['PATH']}"}).code == 0
