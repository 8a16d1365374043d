"""What `run` leaves in a log folder, made by hand: a node's log, start-up record, attempts and stall report, shaped
as the launcher writes them (`launch/record.py`, `launch/restarts.py`, `launch/attempt.py`, `launch/culprit.py`), so
the report can be tested on any job, hostile ones included, without running one."""

from __future__ import annotations

import json
from pathlib import Path

EXP = "pi05_libero_pytorch"


def step_lines(steps: range, loss0: float = 1.5, interval_s: float = 0.6, clock: int = 3600) -> str:
    """openpi's progress lines for `steps` (one per step), with its `HH:MM:SS.mmm [I]` prefix."""
    lines = []
    for i, step in enumerate(steps):
        t = clock + i
        prefix = f"{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}.000 [I]"
        loss = loss0 / (1 + step)
        lines.append(f"{prefix} step={step} loss={loss:.4f} lr=2.50e-05 grad_norm=1.10 time={interval_s:.1f}s")
    return "\n".join(lines) + "\n"


def record(
    rank: int,
    nnodes: int = 2,
    code: int | None = 0,
    klass: str = "succeeded",
    attempts: list[dict[str, object]] | None = None,
    **extra: object,
) -> dict[str, object]:
    """A start-up record as `run` writes it (the keys the report reads)."""
    body: dict[str, object] = {
        "version": "0.1.0",
        "host": f"node{rank}",
        "pid": 100 + rank,
        "started_at": "2026-12-05T07:00:00Z",
        "phases_s": {"plan": 0.08, "prepare": 0.01, "taco": 0.0, "training": 20.0},
        "launch_after_s": 0.2,
        "plan": {
            "topology": {"nnodes": nnodes, "node_rank": rank, "nproc_per_node": 2},
            "settings": {"values": {"batch_size": 32, "num_train_steps": 30}},
        },
        "progress": {"last_step": 29, "last_loss": 0.05, "last_step_reached": 30, "step_time_s": 0.6},
        "taco": {"status": "off", "outcome": {"verdict": "off", "message": "TACO: off", "message_zh": "TACO:已关闭"}},
    }
    if code is not None:
        body["outcome"] = {"exit_code": code, "class": klass, "signal": None, "root_cause": None}
    if attempts is not None:
        body["attempts"] = attempts
    body.update(extra)
    return body


def plant(
    folder: Path,
    rank: int,
    stamp: str = "20261205-150000",
    *,
    log: str | bytes | None = "",
    body: dict[str, object] | bytes | None = None,
    attempts: dict[int, dict[str, object]] | None = None,
    gave_up: str | None = None,
    stall: dict[str, object] | None = None,
    exp: str = EXP,
) -> Path:
    """Node `rank`'s files of one run in `folder`; returns the log's path (written only when `log` is not None)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{exp}-node{rank}-{stamp}"
    log_path = stem.with_name(stem.name + ".log")
    if log is not None:
        log_path.write_bytes(log if isinstance(log, bytes) else log.encode())
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        stem.with_name(stem.name + ".json").write_bytes(data)
    if attempts is not None or gave_up is not None:
        facts = stem.with_name(stem.name + ".attempts")
        facts.mkdir(exist_ok=True)
        for number, fact in (attempts or {}).items():
            (facts / f"{number}.json").write_text(json.dumps(fact))
        if gave_up is not None:
            (facts / "gave-up.json").write_text(json.dumps({"verdict": gave_up, "node_rank": rank}))
    if stall is not None:
        stem.with_name(stem.name + ".stall.json").write_text(json.dumps(stall))
    return log_path


def restarted_job(folder: Path) -> None:
    """Two nodes, one worker killed on node 1 at step 12: both restarted once (resumed from step 10), then exit 0."""
    detail = "RuntimeError: Connection closed by peer"
    attempts: list[dict[str, object]] = [
        {"attempt": 0, "started_s": 1.0, "cause": "collective-error", "detail": detail, "detected_s": 9.0},
        {"attempt": 1, "started_s": 9.6, "resumed_step": 10, "best_step": 30, "checkpoints_saved": 4},
    ]
    attempts[0].update(restarted_s=9.6, best_step=12, checkpoints_saved=2)
    saves = [(s, f"/cfs/checkpoints/pi05_libero/{EXP}/{s}") for s in (5, 10, 15, 20, 25, 30)]
    log0 = (
        step_lines(range(0, 13))
        + "vla-entrypoint: RESTART 1/2: the workers ended (collective-error); torchrun restarted them on this node "
        "0.6 s after that was seen, resuming from step 10\n"
        + step_lines(range(10, 31))
        + "".join(f"Saved checkpoint at step {s} -> {p}\n" for s, p in saves)
    )
    node0 = record(0, attempts=attempts)
    node0["progress"] = {**node0["progress"], "checkpoints_saved": [{"step": s, "path": p} for s, p in saves]}  # type: ignore[dict-item]
    plant(folder, 0, log=log0, body=node0)
    plant(
        folder,
        1,
        log="vla-entrypoint: RESTART 1/2: the workers ended (worker-exited)\n",
        body=record(1, attempts=attempts),
    )


def shim_trainer_args(checkpoints: Path, resume_flag: str = "--no-resume") -> list[str]:
    """The trainer arguments the plan gives the attempt shim: 100 steps, a save every 25, checkpoints under
    `checkpoints`."""
    return [
        "pi05_libero",
        "--exp-name",
        "exp",
        "--num-train-steps",
        "100",
        "--save-interval",
        "25",
        "--checkpoint-base-dir",
        str(checkpoints),
        resume_flag,
        "--no-overwrite",
    ]
