"""torchrun's worker entry: decide resume again for this attempt, record the attempt, then become the trainer.

torchrun starts every worker of every attempt with the same argv (`python -u -m entrypoint.launch.attempt [--facts
FOLDER] scripts/train_pytorch.py <trainer args>`), so the per-attempt decision is taken here. On attempt 0
(`TORCHELASTIC_RESTART_COUNT=0`) the plan's trainer arguments are used as they are: the plan is the launch. On a
restart the experiment folder is read again with `inspect.resume.decide_resume` (newest complete checkpoint,
incomplete folders never chosen): openpi's `--resume` only when a complete checkpoint exists, `--no-resume`
otherwise, and `--overwrite` never (the launcher always passes `--no-overwrite`). Global rank 0 moves incomplete
folders above the chosen step aside before it becomes the trainer; every other rank reads the folder only after
the process group has formed, which needs rank 0. When the newest checkpoint is already openpi's last save the
worker ends 0 without training. Local rank 0 writes this attempt's facts (`<FOLDER>/<restart count>.json`: node,
ranks, restart count, decision, start time) for the launcher's record. Then `os.execv` replaces this process with
the trainer: same pid, so torchrun's monitoring and signals reach the trainer itself. Before a restart
(`--health MODE`) the node health gate runs first (`health/restart.py`): a node found faulty ends with exit 93.

A restarted attempt gets a store of its own: with the static rendezvous torchrun keeps one TCPStore (in node 0's
agent) for all attempts, and in torch 2.6 the workers of attempt N find attempt N-1's keys there: gloo's
connectFullMesh then dials ranks that are gone ("Connection closed by peer") and the attempt fails at once. So on
a restart the worker uses torch's other documented mode, `TORCHELASTIC_USE_AGENT_STORE=False` (global rank 0
hosts the process group's store), on `MASTER_PORT + 1 + N` (below MASTER_PORT near 65535): every node counts
the same N, because every node's agent restarts once per fault.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RESUME_FLAGS = ("--resume", "--no-resume")
OVERWRITE_FLAGS = ("--overwrite", "--no-overwrite")


class Usage(Exception):
    """The shim's argv is not what the plan builds."""


@dataclass(frozen=True)
class AttemptArgs:
    facts: Path | None
    script: str
    trainer: list[str]
    health: str | None = None  # the node health gate's mode before a restart (needs `facts`)


def parse(argv: list[str]) -> AttemptArgs:
    """`[--facts FOLDER] [--health MODE] <script> <trainer args...>`."""
    options: dict[str, str] = {}
    while argv[:1] in (["--facts"], ["--health"]):
        if len(argv) < 2:
            raise Usage(f"{argv[0]} needs a value")
        options[argv[0]], argv = argv[1], argv[2:]
    if not argv:
        raise Usage("no trainer script given")
    if options.get("--health", "warn") not in ("warn", "fail"):
        raise Usage(f"--health {options['--health']}: warn or fail expected")
    facts = Path(options["--facts"]) if "--facts" in options else None
    return AttemptArgs(facts, argv[0], argv[1:], options.get("--health"))


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of `flag` (`--flag value` or `--flag=value`; `_` and `-` alike), the last one given."""
    found = None
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name.replace("_", "-") != flag:
            continue
        if eq:
            found = value
        elif i + 1 < len(args):
            found = args[i + 1]
    return found


def redecide(trainer: list[str]) -> tuple[list[str], dict[str, object], bool]:
    """(trainer args for this attempt, the decision as JSON, whether there is anything left to train), from the
    experiment folder as it is now. The launcher-owned flags in `trainer` name the folder and the save rule."""
    from entrypoint.core.settings import Settings
    from entrypoint.inspect.resume import ResumeAction, decide_resume, set_aside

    base, steps, interval = (
        flag_value(trainer, f) for f in ("--checkpoint-base-dir", "--num-train-steps", "--save-interval")
    )
    exp_name = flag_value(trainer, "--exp-name")
    if not trainer or base is None or exp_name is None or steps is None or interval is None:
        raise Usage("the trainer arguments lack the launcher's checkpoint flags")
    settings = Settings(
        checkpoint_base_dir=str(Path(base).absolute()),
        train_config=trainer[0],
        exp_name=exp_name,
        num_train_steps=int(steps),
        save_interval=int(interval),
    )
    decision = decide_resume(settings)
    if os.environ.get("RANK") == "0" and decision.action is not ResumeAction.FINISHED:
        set_aside(decision)
    resume = "--resume" if decision.action is ResumeAction.RESUME else "--no-resume"
    args = [resume if a in RESUME_FLAGS else "--no-overwrite" if a in OVERWRITE_FLAGS else a for a in trainer]
    if resume not in args:
        args.append(resume)
    return args, decision.to_json(), decision.action is not ResumeAction.FINISHED


def attempt_port(master_port: int, restart: int) -> int:
    """The process-group store's port for restart `restart` (>= 1): past the preflight's MASTER_PORT + 1."""
    port = master_port + 1 + restart
    return port if port <= 65535 else master_port - 1 - restart


def facts(env: Mapping[str, str], restart: int, decision: dict[str, object] | None) -> dict[str, object]:
    """What the launcher's record keeps about this attempt on this node."""
    local = int(env.get("LOCAL_WORLD_SIZE", "1"))
    first = int(env.get("RANK", "0"))
    return {
        "restart_count": restart,
        "node_rank": int(env.get("GROUP_RANK", "0")),
        "ranks": list(range(first, first + local)),
        "store_port": int(env["MASTER_PORT"]) if "MASTER_PORT" in env else None,
        "resume": decision,
        "started_unix": round(time.time(), 3),
        "pid": os.getpid(),
    }


def write_facts(folder: Path, restart: int, body: dict[str, object]) -> None:
    """`<folder>/<restart>.json`, atomically; a storage problem never stops training."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{restart}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, folder / f"{restart}.json")
    except OSError:
        pass


def main(argv: list[str]) -> int:
    try:
        args = parse(argv)
    except Usage as problem:
        print(f"entrypoint.launch.attempt: {problem}", file=sys.stderr)
        return 2
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
    trainer, decision, left = args.trainer, None, True
    if restart > 0:
        try:
            trainer, decision, left = redecide(args.trainer)
        except (Usage, ValueError) as problem:
            print(f"entrypoint.launch.attempt: {problem}", file=sys.stderr)
            return 2
        if os.environ.get("MASTER_PORT", "").isdigit():
            os.environ["MASTER_PORT"] = str(attempt_port(int(os.environ["MASTER_PORT"]), restart))
            os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
    if args.facts is not None and os.environ.get("LOCAL_RANK", "0") == "0":
        write_facts(args.facts, restart, facts(os.environ, restart, decision))
    if not left:
        return 0  # the newest checkpoint is openpi's last save: this worker has nothing to train
    if restart > 0 and args.facts is not None and args.health is not None:  # before any rank touches a GPU
        from entrypoint.health.restart import gate_restart

        sys.stdout.flush()
        code = gate_restart(args.facts, restart, args.health, os.environ)
        if code:
            return code
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-u", args.script, *trainer])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
