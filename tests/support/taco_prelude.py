"""STAND-IN for taco-train's `taco_train/prelude/sitecustomize.py` (tests only; installed as sitecustomize.py).

Keeps the documented contract and none of the speed-ups:
- reads `TACO_TRAIN_FEATURES` (comma list; `auto` = tf32, cudnn_benchmark, gc_tuning), `TACO_TRAIN_ALL=1` (every
  documented feature), `TACO_TRAIN_REPORT=1`, `TACO_TRAIN_LOGLEVEL` (debug/info print each feature to stderr);
- "applies" each requested feature once per process: openpi-only features are `n/a (openpi not installed)` unless
  `openpi` is importable, wan features `n/a (wan not installed)`, unknown names `n/a (unknown feature)`;
- with `TACO_STANDIN_MARKS=<file>`, appends one JSON line per process that imported it and per forked child
  (DataLoader workers): {host, pid, ppid, rank, local_rank, role: process|fork, applied: [...]};
- at exit, in the main process of rank 0 (`RANK=0`) with `TACO_TRAIN_REPORT=1`, prints the summary box
  `taco-train — optimization summary`, one line per feature: `applied ×N`, `off`, or `n/a (…)`.
"""

import atexit
import importlib.util
import json
import os
import socket
import sys

_DOCUMENTED = (
    "openpi_compile",
    "openpi_sdpa",
    "openpi_skip_outer_checkpoint",
    "tf32",
    "compile",
    "cudnn_benchmark",
    "dataloader",
    "cuda_prefetch",
    "thread_affinity",
    "gc_tuning",
    "memory",
    "fused_adamw",
    "split_k_batchnorm",
    "ulimit",
    "wan_disable_addmm",
    "wan_compile",
    "wan_vae_chunk",
    "wan_fused_padcat",
    "wan_rope_f32",
    "wan_rmsnorm",
)
_GENERIC = (
    "tf32",
    "compile",
    "cudnn_benchmark",
    "dataloader",
    "cuda_prefetch",
    "thread_affinity",
    "gc_tuning",
    "memory",
    "fused_adamw",
    "split_k_batchnorm",
    "ulimit",
)
_AUTO = ("tf32", "cudnn_benchmark", "gc_tuning")
_PID = os.getpid()


def _requested():
    if os.environ.get("TACO_TRAIN_ALL") == "1":
        return list(_DOCUMENTED)
    names = []
    for name in os.environ.get("TACO_TRAIN_FEATURES", "auto").split(","):
        for one in _AUTO if name.strip() == "auto" else (name.strip(),):
            if one and one not in names:
                names.append(one)
    return names


def _status(name):
    if name not in _DOCUMENTED:
        return "n/a (unknown feature)"
    if name.startswith("openpi_") and importlib.util.find_spec("openpi") is None:
        return "n/a (openpi not installed)"
    if name.startswith("wan_"):
        return "n/a (wan not installed)"
    return "applied"


_STATUS = {name: _status(name) for name in _requested()}
_APPLIED = [name for name, status in _STATUS.items() if status == "applied"]


def _mark(role):
    path = os.environ.get("TACO_STANDIN_MARKS")
    if not path:
        return
    line = (
        json.dumps(
            {
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "rank": os.environ.get("RANK"),
                "local_rank": os.environ.get("LOCAL_RANK"),
                "role": role,
                "applied": _APPLIED,
            }
        )
        + "\n"
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _report():
    if os.getpid() != _PID or os.environ.get("TACO_TRAIN_REPORT") != "1" or os.environ.get("RANK") != "0":
        return
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return  # a spawned DataLoader worker, not the rank itself
    rows = [(name, "applied ×1" if status == "applied" else status) for name, status in _STATUS.items()]
    rows += [(name, "off") for name in _GENERIC if name not in _STATUS]
    title = "taco-train — optimization summary"
    width = max([len(title)] + [32 + len(status) for _, status in rows]) + 2
    lines = ["╭" + "─" * width + "╮", f"│ {title:<{width - 1}}│", "├" + "─" * width + "┤"]
    lines += [f"│ {name:<31}{status:<{width - 32}}│" for name, status in rows]
    lines.append("╰" + "─" * width + "╯")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


if os.environ.get("TACO_TRAIN_LOGLEVEL", "warning").lower() in ("debug", "info"):
    for _name, _state in _STATUS.items():
        print(f"taco-train: {_name}: {_state} (pid {_PID})", file=sys.stderr)
_mark("process")
os.register_at_fork(after_in_child=lambda: _mark("fork"))
atexit.register(_report)
