"""openpi's PyTorch trainer contract: its command line, checkpoint layout, save rule and log lines, and what its
train configs expect of the assets (which dataset features the norm stats normalise).

Facts from `scripts/train_pytorch.py`: the loop runs `global_step` 0..N-1, increments, then saves when
`step % save_interval == 0` or `step == N - 1` (step >= 1), so 50 steps at interval 25 save 25, 49 and 50.
A checkpoint is written to `tmp_<step>/` and renamed to `<step>/`; only global rank 0 saves and logs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from entrypoint.core.settings import Precision

TRAINER_SCRIPT = "scripts/train_pytorch.py"
CHECKPOINT_FILES = ("model.safetensors", "optimizer.pt", "metadata.pt")
NORM_STATS_FILE = "norm_stats.json"
TOKENIZER_RELATIVE = Path("big_vision") / "paligemma_tokenizer.model"
TOKENIZER_URL = "gs://big_vision/paligemma_tokenizer.model"  # what openpi downloads when it is not staged

# What `--pytorch-weight-path` takes for "no weights": `TrainConfig.pytorch_weight_path` is `str | None`, tyro reads
# the word None as None for such a field, and the trainer then loads nothing (random initialisation). Passing it
# always also replaces a config's own default, which for pi05_libero is a placeholder path that would fail to load.
NO_WEIGHTS = "None"
# Train configs reading a LeRobot dataset through `LeRobotLiberoDataConfig`: which dataset feature (meta/info.json)
# becomes each norm-stats key. `LiberoInputs` passes both through unchanged before `Normalize`, which slices the
# stats to the data's last dimension: stats shorter than the data cannot be broadcast against it.
_LIBERO_FEATURES = {"state": "state", "actions": "actions"}
NORM_STATS_FEATURES = dict.fromkeys(
    ("pi0_libero", "pi0_libero_low_mem_finetune", "pi0_fast_libero", "pi0_fast_libero_low_mem_finetune", "pi05_libero"),
    _LIBERO_FEATURES,
)

# `step=10 loss=0.1234 lr=2.50e-05 grad_norm=1.67 time=19.1s` (grad_norm may be absent)
STEP_LINE = re.compile(r"\bstep=(?P<step>\d+) loss=(?P<loss>[-+0-9.eE]+|nan|inf)\b(?:.*?\btime=(?P<time>[0-9.]+)s)?")
# `Saved checkpoint at step 25 -> /path/25`
SAVED_LINE = re.compile(r"Saved checkpoint at step (?P<step>\d+) -> (?P<path>\S+)")


def save_count(num_train_steps: int, save_interval: int, after_step: int = 0) -> int:
    """How many checkpoints openpi will save beyond `after_step` (the step a resumed run starts from): the
    multiples of the interval in (after_step, N], and N - 1 when it is not one of them. Arithmetic only, so a
    step count of 10**12 costs what 50 does."""
    if num_train_steps <= after_step:
        return 0
    multiples = num_train_steps // save_interval - after_step // save_interval
    last = num_train_steps - 1
    return multiples + (1 if last >= 1 and last > after_step and last % save_interval else 0)


def final_step_saved(num_train_steps: int, save_interval: int) -> bool:
    """Whether the weights after the last step are saved (only when N is a multiple of the interval)."""
    return num_train_steps % save_interval == 0


@dataclass(frozen=True)
class TrainerFlags:
    """What goes after the config name on the trainer's command line."""

    exp_name: str
    batch_size: int
    num_train_steps: int
    log_interval: int
    save_interval: int
    precision: Precision
    wandb: bool
    weights: Path | None
    assets_base_dir: Path
    checkpoint_base_dir: Path
    num_workers: int | None
    resume: bool
    extra_args: tuple[str, ...] = ()

    def argv(self, train_config: str) -> list[str]:
        """`train_pytorch.py` arguments. `--no-overwrite` always: openpi's overwrite deletes the experiment on every
        rank (a race on shared storage) and is the default of its debug configs, where it would also refuse --resume.
        `--pytorch-weight-path None` (`NO_WEIGHTS`) when there are no weights: random initialisation."""
        weights = str(self.weights) if self.weights is not None else NO_WEIGHTS
        args = [TRAINER_SCRIPT, train_config, "--exp-name", self.exp_name, "--pytorch-weight-path", weights]
        args += [
            "--pytorch-training-precision",
            str(self.precision),
            "--batch-size",
            str(self.batch_size),
            "--num-train-steps",
            str(self.num_train_steps),
            "--log-interval",
            str(self.log_interval),
            "--save-interval",
            str(self.save_interval),
            "--wandb-enabled" if self.wandb else "--no-wandb-enabled",
            "--assets-base-dir",
            str(self.assets_base_dir),
            "--checkpoint-base-dir",
            str(self.checkpoint_base_dir),
        ]
        if self.num_workers is not None:
            args += ["--num-workers", str(self.num_workers)]
        args.append("--resume" if self.resume else "--no-resume")
        args.append("--no-overwrite")
        return args + list(self.extra_args)
