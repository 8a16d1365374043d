"""vla-entrypoint: a verified, explained torchrun launch of openpi training on TI-ONE.

The package mirrors the pipeline, one sub-package per stage:

- `core/`     the machine (`Host`), typed settings, the bilingual message catalogue and its renderer, findings,
              user errors, masking of secrets. Imports nothing else of ours.
- `inspect/`  pure inspections of the job: topology, batch, assets, storage, resume, environment, the
              transformers patch, openpi's trainer contract. Imports only `core/`.
- `fabric/`   RDMA/NCCL: what the machine has (inventory), what to set (decide), proof from NCCL's logs.
- `taco/`     the TACO acceleration wheel: plan, activation, build-time bake, the summary it prints.
- `net/`      HTTP downloads (shared by `taco/` and `fetch/`).
- `fetch/`    the `fetch-assets` command: manifest, download, streaming unpack, verification.
- `health/`   the node health gate: GPUs through NVML and the kernel log, RDMA ports, GPU measurements, each in a
              bounded child process; the verdict and the job's table. Runs from `launch/` (and `check`).
- `launch/`   everything with side effects on the job: run, supervisor, watchdog, preflight, record.
- `report/`   seeing the run: TensorBoard event files while it trains, the job's HTML report when it ends.
- `plan.py`   the hub: every inspection resolved into one `Plan`, which *is* the launch.
- `cli.py`    argv -> command.

Import rules (checked by tests/unit/test_architecture.py): `core/` imports nothing of ours; `inspect/` only
`core/`; `net/` only `core/`; `fabric/` and `taco/` only `core/`, `inspect/` and `net/`; `health/` only `core/`,
`inspect/` and `fabric/` (`plan.py` reads what the gate will run from it); `fetch/` never imports `launch/`;
`report/` only `core/` and `inspect/` (`launch/` feeds it); nothing but `cli.py` imports `cli.py`. Inspection code
(`core/`, `inspect/`, `fabric/`, `plan.py`)
starts no process and writes nothing: only `launch/` acts on the job, and `fetch/` / `taco/` act only inside their
own commands (downloading assets, installing the wheel on the way to launch, baking it at image build).
"""

__version__ = "0.1.0"
