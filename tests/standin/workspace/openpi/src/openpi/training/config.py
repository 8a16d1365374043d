"""STAND-IN for openpi's `src/openpi/training/config.py` (tests and demos only): the train configs the stand-in
trainer (`scripts/train_pytorch.py`, which keeps its own copy of these values) accepts, declared the way openpi
declares its configs: `TrainConfig(name=...)` entries in `_CONFIGS`. The launcher reads the names from this file's
source text (`entrypoint/inspect/train_configs.py`); nothing imports it."""

import dataclasses

LIBERO = "physical-intelligence/libero"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    name: str
    exp_name: str | None = None
    repo_id: str | None = None
    batch_size: int = 32
    num_train_steps: int = 30_000
    save_interval: int = 1000
    pytorch_weight_path: str | None = None
    overwrite: bool = False
    wandb_enabled: bool = True


_CONFIGS = [
    TrainConfig(
        name="pi05_libero",
        repo_id=LIBERO,
        batch_size=256,
        pytorch_weight_path="/path/to/your/pytorch_weight_path",
    ),
    TrainConfig(
        name="debug",
        exp_name="debug",
        batch_size=2,
        num_train_steps=10,
        save_interval=100,
        overwrite=True,
        wandb_enabled=False,
    ),
    TrainConfig(
        name="debug_pi05",
        exp_name="debug_pi05",
        batch_size=2,
        num_train_steps=10,
        save_interval=100,
        overwrite=True,
        wandb_enabled=False,
    ),
]

_CONFIGS_DICT = {config.name: config for config in _CONFIGS}
