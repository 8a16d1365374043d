"""STAND-IN for openpi's `scripts/train_pytorch.py`, baked into the stand-in base image for tests and demos only.

It keeps the contract of openpi's PyTorch trainer (openpi commit 15a9616) and none of its model: it trains a
263-parameter MLP on synthetic data with real DDP (gloo on CPU, NCCL on GPU) under torchrun.

Kept from openpi (`scripts/train_pytorch.py`, `src/openpi/training/config.py`):
- configs `pi05_libero`, `debug`, `debug_pi05` with openpi's defaults (the debug configs default to
  `--overwrite`, `--exp-name` = config name and `--no-wandb-enabled`); an unknown config or flag is a usage
  error (exit 2, like tyro); `--resume` with `--overwrite` raises ValueError. Flags may use `-` or `_`;
  nested overrides such as `--model.paligemma-variant gemma_2b` are accepted and ignored.
- `pi05_libero` needs `<assets_base_dir>/pi05_libero/physical-intelligence/libero/norm_stats.json`, the
  LeRobot dataset at `$HF_LEROBOT_HOME/physical-intelligence/libero` (meta/info.json is checked) and
  `<--pytorch-weight-path>/model.safetensors` (header checked; tensors whose names match are loaded).
- torchrun's WORLD_SIZE/RANK/LOCAL_RANK/MASTER_ADDR/MASTER_PORT, `init_process_group(nccl|gloo, env://)`,
  per-rank batch `batch_size // world_size` with no divisibility check.
- the loop and its rank-0 log lines, in openpi's log format:
  `step=N loss=… lr=… grad_norm=… time=…s` for N = 0..num_train_steps-1 when N % log_interval == 0;
  after step N the counter becomes N+1 and a checkpoint is saved when
  `(N+1) % save_interval == 0` or `N+1 == num_train_steps - 1` (50 steps at interval 25 save 25, 49, 50),
  logged as `Saved checkpoint at step S -> <path>`.
- checkpoints `<checkpoint_base_dir>/<config>/<exp>/<S>/` = model.safetensors, optimizer.pt, metadata.pt
  (global_step, config, timestamp) and, with norm stats, assets/<asset id>/norm_stats.json; written by global
  rank 0 into tmp_<S>/ and renamed. `--resume` continues from the highest all-digit step folder (fails when the
  folder or a step is missing); `--overwrite` deletes the experiment folder on every rank; an existing folder
  without either is reused.
Stand-in only: STANDIN_STEP_SECONDS (float, default 0) sleeps after every step so tests can interrupt a run;
STANDIN_SAVE_SECONDS sleeps inside each checkpoint write (a slow file system); STANDIN_FAULT injects a stall:
  `hang-collective@R:S`  at step S every rank enters a barrier that rank R never joins (it sleeps forever)
  `hang-dataloader@S`    rank 0's data-loader worker blocks forever when producing the batch of step S
  `silent@S`             rank 0 stops printing at step S but keeps training (slowly: 1 s a step)
  `raise@S`              every rank raises the same RuntimeError at step S, in every attempt
The stalls fire in torchrun's first attempt only (TORCHELASTIC_RESTART_COUNT 0 or unset), as a transient fault
would, so that an in-job restart can get past them; `raise` repeats identically, as a bug in the trainer does.
STANDIN_USE_JAX=1 runs a JAX op in rank 0's data path at step 1, as openpi's transforms do, and logs JAX's backend
and this process's GPU memory (from nvidia-smi), to show what JAX_PLATFORMS does to GPU memory.
Batches come from a torch DataLoader with `--num-workers` worker processes, as in openpi. The progress bar is a
plain imitation of tqdm's. SIGTERM ends the process like any Python program.
"""

import argparse
import dataclasses
import json
import logging
import math
import os
import platform
import shutil
import struct
import sys
import time
import uuid
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

LIBERO = "physical-intelligence/libero"  # LeRobot repo id, also the asset id of its norm stats
STATE_DIM, ACTION_DIM = 8, 7  # LIBERO's state and action sizes
SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


@dataclasses.dataclass(frozen=True)
class CosineDecaySchedule:
    """openpi's warmup + cosine decay learning-rate schedule (its defaults)."""

    warmup_steps: int = 1_000
    peak_lr: float = 2.5e-5
    decay_steps: int = 30_000
    decay_lr: float = 2.5e-6

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            start = self.peak_lr / (self.warmup_steps + 1)
            return start + (self.peak_lr - start) * step / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.decay_steps - self.warmup_steps))
        return self.decay_lr + (self.peak_lr - self.decay_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The subset of openpi's TrainConfig that the PyTorch trainer's command line reaches."""

    name: str
    exp_name: str | None = None
    repo_id: str | None = None  # None: fake data
    project_name: str = "openpi"
    pytorch_weight_path: str | None = None
    pytorch_training_precision: str = "bfloat16"
    lr_schedule: CosineDecaySchedule = CosineDecaySchedule()
    weight_decay: float = 1e-10
    clip_gradient_norm: float = 1.0
    assets_base_dir: str = "./assets"
    checkpoint_base_dir: str = "./checkpoints"
    seed: int = 42
    batch_size: int = 32
    num_workers: int = 2
    num_train_steps: int = 30_000
    log_interval: int = 100
    save_interval: int = 1000
    overwrite: bool = False
    resume: bool = False
    wandb_enabled: bool = True

    def __post_init__(self) -> None:
        if self.resume and self.overwrite:
            raise ValueError("Cannot resume and overwrite at the same time.")

    @property
    def assets_dirs(self) -> Path:
        return (Path(self.assets_base_dir) / self.name).resolve()

    @property
    def checkpoint_dir(self) -> Path:
        return (Path(self.checkpoint_base_dir) / self.name / str(self.exp_name)).resolve()


CONFIGS = {
    "pi05_libero": TrainConfig(
        name="pi05_libero",
        repo_id=LIBERO,
        batch_size=256,
        lr_schedule=CosineDecaySchedule(warmup_steps=10_000, peak_lr=5e-5, decay_steps=1_000_000, decay_lr=5e-5),
        pytorch_weight_path="/path/to/your/pytorch_weight_path",
        num_train_steps=30_000,
    ),
    **{
        name: TrainConfig(
            name=name,
            exp_name=name,
            batch_size=2,
            num_train_steps=10,
            save_interval=100,
            overwrite=True,
            wandb_enabled=False,
        )
        for name in ("debug", "debug_pi05")
    },
}


def parse_args(argv: list[str]) -> tuple[TrainConfig, list[str]]:
    """The config named first plus flag overrides, and the nested `--a.b value` overrides that were ignored."""
    parser = argparse.ArgumentParser(
        prog="train_pytorch.py", allow_abbrev=False, description="Stand-in for openpi's PyTorch trainer (tests only)."
    )
    parser.add_argument("config", choices=sorted(CONFIGS), help="openpi config name")
    for flag in ("exp-name", "project-name", "pytorch-weight-path", "assets-base-dir", "checkpoint-base-dir"):
        parser.add_argument(f"--{flag}")
    for flag in ("batch-size", "num-workers", "num-train-steps", "log-interval", "save-interval", "seed"):
        parser.add_argument(f"--{flag}", type=int)
    parser.add_argument("--pytorch-training-precision", choices=("bfloat16", "float32"))
    for flag in ("resume", "overwrite", "wandb-enabled"):
        parser.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction)

    kept: list[str] = []
    ignored: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        name, eq, value = token.partition("=")
        if name.startswith("--"):
            name = name.replace("_", "-")
            if "." in name:  # a nested tyro override, e.g. --model.paligemma-variant gemma_2b
                ignored.append(f"{name}={value if eq else next(tokens, '')}")
                continue
        kept.append(name + eq + value)
    args = parser.parse_args(kept)
    overrides = {key: val for key, val in vars(args).items() if key != "config" and val is not None}
    if overrides.get("pytorch_weight_path") == "None":  # tyro reads the word None as None for an optional field
        overrides["pytorch_weight_path"] = None
    config = dataclasses.replace(CONFIGS[args.config], **overrides)
    if not config.exp_name:
        parser.error("the following arguments are required: --exp-name")
    return config, ignored


def init_logging() -> None:
    """openpi's log format: `HH:MM:SS.mmm [I] <message padded to 80> (pid:file:line)` on stderr."""

    class Formatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            record.levelname = record.levelname[:1]
            return super().format(record)

    handler = logging.StreamHandler()
    handler.setFormatter(
        Formatter(
            fmt="%(asctime)s.%(msecs)03d [%(levelname)s] %(message)-80s (%(process)d:%(filename)s:%(lineno)s)",
            datefmt="%H:%M:%S",
        )
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def setup_ddp() -> tuple[bool, int, torch.device]:
    """Join torchrun's process group when WORLD_SIZE > 1; return (ddp?, local rank, device)."""
    use_ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if use_ddp:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", init_method="env://")
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return use_ddp, local_rank, device


def latest_step(checkpoint_dir: Path) -> int | None:
    """The highest step folder (a name of digits only) in an experiment folder, or None."""
    steps = [int(d.name) for d in checkpoint_dir.iterdir() if d.is_dir() and d.name.isdigit()]
    return max(steps) if steps else None


def prepare_checkpoint_dir(config: TrainConfig) -> bool:
    """openpi's resume/overwrite handling, run on every rank; True when resuming."""
    ckpt_dir = config.checkpoint_dir
    if config.resume:
        if not ckpt_dir.exists():
            raise FileNotFoundError(f"Experiment checkpoint directory {ckpt_dir} does not exist for resume")
        step = latest_step(ckpt_dir)
        if step is None:
            raise FileNotFoundError(f"No valid checkpoints found in {ckpt_dir} for resume")
        logging.info(f"Resuming from experiment checkpoint directory: {ckpt_dir} at step {step}")
        logging.info(f"Using existing experiment checkpoint directory: {ckpt_dir}")
        return True
    if config.overwrite and ckpt_dir.exists():
        shutil.rmtree(ckpt_dir)
        logging.info(f"Overwriting checkpoint directory: {ckpt_dir}")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    logging.info(f"Created experiment checkpoint directory: {ckpt_dir}")
    return False


def init_wandb(config: TrainConfig, *, resuming: bool) -> None:
    """What wandb.init needs that a job can get wrong: an API key (or offline mode) and, to resume, the run id."""
    if not config.wandb_enabled:
        return
    if os.environ.get("WANDB_MODE") not in ("offline", "disabled") and not os.environ.get("WANDB_API_KEY"):
        raise RuntimeError(
            "wandb: api_key not configured (no-tty). call wandb.login(key=[your_api_key]) "
            "(stand-in: pass --no-wandb-enabled)"
        )
    id_file = config.checkpoint_dir / "wandb_id.txt"
    if resuming:
        logging.info(f"wandb (stand-in, no upload): resuming run {id_file.read_text().strip()}")
    else:
        id_file.write_text(uuid.uuid4().hex[:8])


def load_norm_stats(config: TrainConfig) -> dict | None:
    """`<assets_dirs>/<asset id>/norm_stats.json`'s stats, checked for openpi's shape; None when the file is absent."""
    stats_dir = config.assets_dirs / LIBERO
    path = stats_dir / "norm_stats.json"
    if not path.exists():
        logging.info(f"Norm stats not found in {stats_dir}, skipping.")
        return None
    try:
        stats = json.loads(path.read_text())["norm_stats"]
        for key in ("state", "actions"):
            lengths = {len(stats[key][field]) for field in ("mean", "std", "q01", "q99")}
            if len(lengths) != 1:
                raise ValueError(f"{key}: mean/std/q01/q99 lengths differ: {sorted(lengths)}")
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"Invalid norm stats in {path}: {err!r}; expected "
            '{"norm_stats": {"state": {"mean", "std", "q01", "q99"}, "actions": {...}}}'
        ) from err
    logging.info(f"Loaded norm stats from {stats_dir}")
    return stats


def check_dataset(repo_id: str) -> None:
    """Fail like an offline lerobot would when the dataset is not at $HF_LEROBOT_HOME/<repo_id>."""
    hf_home = Path(os.environ.get("HF_HOME", "~/.cache/huggingface")).expanduser()
    root = Path(os.environ.get("HF_LEROBOT_HOME", hf_home / "lerobot")) / repo_id
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise FileNotFoundError(
            f"LeRobot dataset {repo_id!r} not found: {info_path} is missing "
            "(set HF_LEROBOT_HOME to the folder that holds it; the stand-in never downloads)"
        )
    try:
        info = json.loads(info_path.read_text())
    except ValueError as err:
        raise ValueError(f"Invalid LeRobot metadata {info_path}: {err}") from err
    logging.info(
        f"LeRobot dataset {repo_id}: {info.get('total_episodes')} episodes, "
        f"{info.get('total_frames')} frames at {info.get('fps')} fps ({root})"
    )


def fault(kind: str) -> list[int] | None:
    """The numbers of STANDIN_FAULT=`kind@a[:b]`, or None when that fault is not asked for (or, except `raise`,
    when this is a restarted attempt)."""
    name, _, where = os.environ.get("STANDIN_FAULT", "").partition("@")
    if kind != "raise" and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") not in ("", "0"):
        return None
    return [int(n) for n in where.split(":")] if name == kind else None


def report_jax_memory() -> None:
    """Touch JAX like openpi's data transforms, then log its backend and this process's GPU memory."""
    import subprocess

    import jax
    import jax.numpy as jnp

    float(jnp.ones(8).sum())
    used = "n/a"
    try:
        rows = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.splitlines()
        used = next((r.split(",")[1].strip() for r in rows if r.split(",")[0].strip() == str(os.getpid())), "0")
    except (OSError, subprocess.TimeoutExpired, IndexError):
        pass
    logging.info(f"stand-in: jax backend={jax.default_backend()}; GPU memory of this process: {used} MiB")


def _hang_forever(reason: str) -> None:
    logging.info(f"stand-in fault: {reason}; hanging")
    while True:
        time.sleep(3600)


class SyntheticBatches(torch.utils.data.IterableDataset):
    """Endless (state, actions) batches: actions are one fixed linear map of the state, plus noise."""

    def __init__(self, batch_size: int, seed: int, rank: int) -> None:
        if batch_size <= 0:  # what torch's DataLoader says for openpi's per-rank batch of 0
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.batch_size, self.seed, self.rank = batch_size, seed, rank

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        workers, worker = (info.num_workers, info.id) if info else (1, 0)
        target = torch.randn(STATE_DIM, ACTION_DIM, generator=torch.Generator().manual_seed(self.seed))
        rng = torch.Generator().manual_seed(self.seed + 1 + self.rank * 64 + worker)
        hang = fault("hang-dataloader")
        produced = 0
        while True:
            batch_index = produced * workers + worker  # batches come round-robin from the workers
            if hang is not None and self.rank == 0 and batch_index == hang[0]:
                _hang_forever(f"data-loader worker {worker} blocked at batch {batch_index}")
            state = torch.randn(self.batch_size, STATE_DIM, generator=rng)
            yield state, state @ target + 0.01 * torch.randn(self.batch_size, ACTION_DIM, generator=rng)
            produced += 1


def save_safetensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Write the safetensors format: u64 little-endian header size, JSON header (8-byte aligned), raw data."""
    names = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, tensor in tensors.items():
        data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {
            "dtype": names[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for data in blobs:
            f.write(data)


def load_safetensors(module: nn.Module, path: Path, *, strict: bool) -> None:
    """Check the file's header and load the tensors named like `module`'s; strict: every tensor must be there."""
    if not path.is_file():
        raise FileNotFoundError(f"No such file or directory: {path}")
    size = path.stat().st_size
    state = module.state_dict()
    loaded = 0
    with path.open("rb") as f:
        try:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > size - 8:
                raise ValueError(f"header length {header_len} exceeds the file ({size} bytes)")
            header = json.loads(f.read(header_len))
            for name, spec in header.items():
                if name == "__metadata__":
                    continue
                begin, end = spec["data_offsets"]
                dtype = SAFETENSORS_DTYPES.get(spec["dtype"])
                if not 0 <= begin <= end <= size - 8 - header_len:
                    raise ValueError(f"tensor {name!r} lies outside the file (truncated?)")
                if name not in state or dtype is None or list(state[name].shape) != spec["shape"]:
                    continue
                f.seek(8 + header_len + begin)
                tensor = torch.frombuffer(bytearray(f.read(end - begin)), dtype=dtype).reshape(spec["shape"])
                state[name].copy_(tensor)
                loaded += 1
        except (struct.error, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path} is not a valid safetensors file: {err}") from err
    if strict and loaded != len(state):
        raise RuntimeError(f"{path}: loaded {loaded} of the model's {len(state)} tensors")
    logging.info(f"stand-in: loaded {loaded}/{len(state)} model tensors from {path}")


def save_checkpoint(
    model: nn.Module, optim: torch.optim.Optimizer, step: int, config: TrainConfig, norm_stats: dict | None
) -> None:
    """openpi's checkpoint: written to tmp_<step>/, then renamed to <step>/ (replacing an old one)."""
    final_dir = config.checkpoint_dir / str(step)
    time.sleep(float(os.environ.get("STANDIN_SAVE_SECONDS", "0")))
    tmp_dir = config.checkpoint_dir / f"tmp_{step}"
    if tmp_dir.exists():
        shutil.rmtree(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    save_safetensors(model.state_dict(), tmp_dir / "model.safetensors")
    torch.save(optim.state_dict(), tmp_dir / "optimizer.pt")
    metadata = {"global_step": step, "config": dataclasses.asdict(config), "timestamp": time.time()}
    torch.save(metadata, tmp_dir / "metadata.pt")
    if norm_stats is not None:
        (tmp_dir / "assets" / LIBERO).mkdir(parents=True)
        (tmp_dir / "assets" / LIBERO / "norm_stats.json").write_text(json.dumps({"norm_stats": norm_stats}, indent=2))
    if final_dir.exists():
        shutil.rmtree(final_dir)
    tmp_dir.rename(final_dir)
    logging.info(f"Saved checkpoint at step {step} -> {final_dir}")


def load_checkpoint(model: nn.Module, optim: torch.optim.Optimizer, checkpoint_dir: Path, device: torch.device) -> int:
    """Load the latest step folder's model, optimizer and metadata; return its global step."""
    step = latest_step(checkpoint_dir)
    if step is None:
        raise FileNotFoundError(f"No checkpoints found in {checkpoint_dir}")
    ckpt_dir = checkpoint_dir / str(step)
    logging.info("Loading model state...")
    if not (ckpt_dir / "model.safetensors").exists():
        raise FileNotFoundError(f"No model checkpoint found at {ckpt_dir}")
    load_safetensors(model, ckpt_dir / "model.safetensors", strict=True)
    logging.info("Loaded model state from safetensors format")
    logging.info("Loading optimizer state...")
    if not (ckpt_dir / "optimizer.pt").exists():
        raise FileNotFoundError(f"No optimizer checkpoint found at {ckpt_dir}")
    optim.load_state_dict(torch.load(ckpt_dir / "optimizer.pt", map_location=device, weights_only=False))
    logging.info("Loaded optimizer state from pt format")
    logging.info("Loading metadata...")
    metadata = torch.load(ckpt_dir / "metadata.pt", map_location=device, weights_only=False)
    logging.info(f"Successfully loaded all checkpoint components from step {step}")
    return metadata.get("global_step", step)


def log_gpu_memory(device: torch.device, step: int, phase: str) -> None:
    """openpi's GPU memory line (CUDA only)."""
    if device.type != "cuda":
        return
    allocated, reserved = torch.cuda.memory_allocated(device) / 1e9, torch.cuda.memory_reserved(device) / 1e9
    stats = torch.cuda.memory_stats(device)
    ddp = f" | DDP: rank={dist.get_rank()}, world_size={dist.get_world_size()}" if dist.is_initialized() else ""
    logging.info(
        f"Step {step} ({phase}): GPU memory - allocated: {allocated:.2f}GB, reserved: {reserved:.2f}GB, "
        f"free: {reserved - allocated:.2f}GB, "
        f"peak_allocated: {stats.get('allocated_bytes.all.peak', 0) / 1e9:.2f}GB, "
        f"peak_reserved: {stats.get('reserved_bytes.all.peak', 0) / 1e9:.2f}GB{ddp}"
    )


class ProgressBar:
    """A plain imitation of openpi's tqdm bar: carriage-return updates on stderr (rank 0 only)."""

    def __init__(self, total: int, initial: int) -> None:
        self.total, self.initial, self.n, self.start = total, initial, initial, time.time()

    def update(self, **postfix: object) -> None:
        self.n += 1
        elapsed = time.time() - self.start
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        done = self.n / max(1, self.total)
        fields = ", ".join(f"{key}={value}" for key, value in postfix.items())
        sys.stderr.write(
            f"\rTraining: {100 * done:3.0f}%|{'#' * int(10 * done):<10}| {self.n}/{self.total} "
            f"[{elapsed:.0f}s, {rate:.2f}it/s, {fields}]"
        )
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")


def check_replicas_agree(module: nn.Module, world_size: int, is_main: bool) -> None:
    """Stand-in only: prove the all-reduce worked, every rank having trained on different data."""
    checksum = torch.cat([p.detach().float().reshape(-1) for p in module.parameters()]).sum().reshape(1)
    gathered = [torch.zeros_like(checksum) for _ in range(world_size)]
    dist.all_gather(gathered, checksum)
    if any(not torch.equal(other, checksum) for other in gathered):
        raise RuntimeError(f"stand-in: DDP replicas differ after training: {[g.item() for g in gathered]}")
    if is_main:
        logging.info(f"stand-in: DDP replicas agree on all {world_size} ranks (parameter sum {checksum.item():.6f})")


def train(config: TrainConfig) -> None:
    """openpi's train_loop, step for step, around a tiny model."""
    step_seconds = float(os.environ.get("STANDIN_STEP_SECONDS", "0"))
    use_ddp, local_rank, device = setup_ddp()
    is_main = not use_ddp or dist.get_rank() == 0
    torch.manual_seed(config.seed + local_rank)

    resuming = prepare_checkpoint_dir(config)
    if is_main:
        init_wandb(config, resuming=resuming)

    world_size = dist.get_world_size() if use_ddp else 1
    local_batch_size = config.batch_size // world_size
    logging.info(
        f"Using batch size per GPU: {local_batch_size} (total batch size across {world_size} GPUs: {config.batch_size})"
    )
    norm_stats = None
    if config.repo_id is not None:
        norm_stats = load_norm_stats(config)
        check_dataset(config.repo_id)
        if norm_stats is None:
            raise ValueError(
                "Normalization stats not found. "
                "Make sure to run `scripts/compute_norm_stats.py --config-name=<your-config>`."
            )
    logging.info(f"local_batch_size: {local_batch_size}")
    rank = dist.get_rank() if use_ddp else 0
    loader = iter(
        torch.utils.data.DataLoader(
            SyntheticBatches(local_batch_size, config.seed, rank), batch_size=None, num_workers=config.num_workers
        )
    )

    model: nn.Module = nn.Sequential(nn.Linear(STATE_DIM, 16), nn.Tanh(), nn.Linear(16, ACTION_DIM)).to(device)
    logging.info("Gradient checkpointing is not supported for this model")
    if is_main:
        log_gpu_memory(device, 0, "after_model_creation")
    module = model
    if use_ddp:
        model = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=True,
            gradient_as_bucket_view=True,
            static_graph=world_size >= 8,
        )
    if config.pytorch_weight_path is not None:
        logging.info(f"Loading weights from: {config.pytorch_weight_path}")
        load_safetensors(module, Path(config.pytorch_weight_path) / "model.safetensors", strict=False)
        logging.info(f"Loaded PyTorch weights from {config.pytorch_weight_path}")

    schedule = config.lr_schedule
    optim = torch.optim.AdamW(
        model.parameters(), lr=schedule.peak_lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=config.weight_decay
    )
    global_step = 0
    if resuming:
        global_step = load_checkpoint(module, optim, config.checkpoint_dir, device)
        logging.info(f"Resumed training from step {global_step}")

    if is_main:
        logging.info(f"Running on: {platform.node()} | world_size={world_size}")
        logging.info(
            f"Training config: batch_size={config.batch_size}, effective_batch_size={local_batch_size}, "
            f"num_train_steps={config.num_train_steps}"
        )
        logging.info("Memory optimizations: gradient_checkpointing=False")
        logging.info(
            f"LR schedule: warmup={schedule.warmup_steps}, peak_lr={schedule.peak_lr:.2e}, "
            f"decay_steps={schedule.decay_steps}, end_lr={schedule.decay_lr:.2e}"
        )
        logging.info(f"Optimizer: AdamW, weight_decay={config.weight_decay}, clip_norm={config.clip_gradient_norm}")
        logging.info("EMA is not supported for PyTorch training")
        logging.info(f"Training precision: {config.pytorch_training_precision}")
    bar = ProgressBar(config.num_train_steps, global_step) if is_main else None

    model.train()
    start_time = time.time()
    infos: list[tuple[float, float, float]] = []
    hang_collective, silent, fail = fault("hang-collective"), fault("silent"), fault("raise")
    while global_step < config.num_train_steps:
        if fail is not None and global_step == fail[0]:
            raise RuntimeError(f"stand-in fault: the trainer's own code fails at step {global_step}")
        if hang_collective is not None and global_step == hang_collective[1]:
            if rank == hang_collective[0]:
                _hang_forever(f"rank {rank} skips the barrier at step {global_step}")
            dist.barrier()
        if silent is not None and is_main and global_step == silent[0]:
            logging.info("stand-in fault: rank 0 stops printing")
            logging.disable(logging.CRITICAL)
            bar, step_seconds = None, 1.0
        state, actions = (t.to(device) for t in next(loader))
        if global_step == 1 and is_main and os.environ.get("STANDIN_USE_JAX") == "1":
            report_jax_memory()
        for group in optim.param_groups:
            group["lr"] = schedule(global_step)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.pytorch_training_precision == "bfloat16"):
            prediction = model(state)
        loss = nn.functional.mse_loss(prediction.float(), actions)
        loss.backward()
        if global_step < 5 and is_main:
            log_gpu_memory(device, global_step, "after_backward")
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=config.clip_gradient_norm)
        optim.step()
        optim.zero_grad(set_to_none=True)

        if is_main:
            infos.append((loss.item(), optim.param_groups[0]["lr"], float(grad_norm)))
            if global_step % config.log_interval == 0:
                elapsed = time.time() - start_time
                avg_loss, avg_lr, avg_grad_norm = (sum(column) / len(infos) for column in zip(*infos, strict=True))
                logging.info(
                    f"step={global_step} loss={avg_loss:.4f} lr={avg_lr:.2e} "
                    f"grad_norm={avg_grad_norm:.2f} time={elapsed:.1f}s"
                )
                start_time = time.time()
                infos = []

        global_step += 1
        saving = global_step % config.save_interval == 0 and global_step > 0
        if is_main and (saving or global_step == config.num_train_steps - 1):
            save_checkpoint(module, optim, global_step, config, norm_stats)
        if bar is not None:
            bar.update(loss=f"{loss.item():.4f}", lr=f"{optim.param_groups[0]['lr']:.2e}", step=global_step)
        time.sleep(step_seconds)

    if bar is not None:
        bar.close()
    if use_ddp:
        check_replicas_agree(module, world_size, is_main)
        dist.barrier()
        dist.destroy_process_group()


def main() -> None:
    init_logging()
    config, ignored = parse_args(sys.argv[1:])
    if ignored:
        logging.info(f"stand-in: ignoring nested overrides {' '.join(ignored)}")
    train(config)


if __name__ == "__main__":
    main()
