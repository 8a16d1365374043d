"""torchrun's worker entry: decide resume again for this attempt, record the attempt, then become the trainer.

torchrun starts every worker of every attempt with the same argv (`python -u -m entrypoint.launch.attempt [--facts
FOLDER] scripts/train_pytorch.py <trainer args>`), so the per-attempt decision is taken here. On attempt 0
(`TORCHELASTIC_RESTART_COUNT=0`) the plan's trainer arguments are used as they are: the plan is the launch. On a
restart global rank 0 reads the experiment folder again with `inspect.resume.decide_resume` (newest complete
checkpoint, incomplete folders never chosen): openpi's `--resume` only when a complete checkpoint exists,
`--no-resume` otherwise, and `--overwrite` never (the launcher always passes `--no-overwrite`). It moves incomplete
folders above the chosen step aside, then writes the decision in this attempt's facts file in node 0's attempts
folder on the shared log storage. Every other worker, on every node, waits for that file (`DECISION_WAIT_S`, the
newest node-0 file of this run: `launch.attempt_files`) and uses its decision, so a checkpoint whose save completes
while the nodes restart cannot make them disagree (one resuming, another starting fresh or ending as finished while
the rest train). A worker that gets no decision in time decides from the folder itself and says so (the facts say
`resume_decided_by: fallback`). When the decision is that the newest checkpoint is already openpi's last save the
worker ends 0 without training. Local rank 0 writes this attempt's facts (`<FOLDER>/<restart count>.json`: node,
ranks, restart count, decision and who took it, start time) for the launcher's record. Then `os.execv` replaces
this process with the trainer: same pid, so torchrun's monitoring and signals reach the trainer itself. Before a
restart (`--health MODE`) the node health gate runs first (`health/restart.py`): a node found faulty ends with 93.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from entrypoint.core.files import FileRefused, read_all
from entrypoint.core.messages import language
from entrypoint.core.numbers import whole_number
from entrypoint.launch.attempt_files import peer_file, peer_prefix
from entrypoint.launch.messages import say

RESUME_FLAGS = ("--resume", "--no-resume")
OVERWRITE_FLAGS = ("--overwrite", "--no-overwrite")
DECISION_WAIT_S = 120.0  # rank 0 decides in seconds; a network file system may show its file to other nodes late
DECISION_POLL_S = 0.25
FACTS_LIMIT = 64 << 10  # an attempt's facts file is a few hundred bytes


class DecidedBy(StrEnum):
    """Who took this attempt's resume decision (the facts' `resume_decided_by`)."""

    SELF = "self"  # global rank 0, or a worker with no attempts folder to share through
    RANK_0 = "rank-0"  # read from global rank 0's facts file of the same attempt
    FALLBACK = "fallback"  # no decision from rank 0 in time: this worker read the folder itself


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


def trainer_args(trainer: list[str], decision: Mapping[str, object]) -> tuple[list[str], bool]:
    """(trainer args following `decision`, a resume decision as JSON, whether there is anything left to train):
    `--resume` for action resume, else `--no-resume`; `--no-overwrite` always."""
    resume = "--resume" if decision.get("action") == "resume" else "--no-resume"
    args = [resume if a in RESUME_FLAGS else "--no-overwrite" if a in OVERWRITE_FLAGS else a for a in trainer]
    if resume not in args:
        args.append(resume)
    return args, decision.get("action") != "finished"


def redecide(trainer: list[str]) -> tuple[list[str], dict[str, object], bool]:
    """(trainer args for this attempt, the decision as JSON, whether there is anything left to train), from the
    experiment folder as it is now; global rank 0 also sets aside what the decision names. The launcher-owned flags
    in `trainer` name the folder and the save rule."""
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
    chosen = decision.to_json()
    args, left = trainer_args(trainer, chosen)
    return args, chosen, left


def attempt_port(master_port: int, restart: int) -> int:
    """The process-group store's port for restart `restart` (>= 1): past the preflight's MASTER_PORT + 1."""
    port = master_port + 1 + restart
    return port if port <= 65535 else master_port - 1 - restart


def decision_file(facts_dir: Path, restart: int, node_rank: int) -> Path | None:
    """Where global rank 0 records its decision for restart `restart`: its node's facts file, which is this
    worker's own folder on node 0, else the newest node-0 folder of this run beside it (None: none yet)."""
    name = f"{restart}.json"
    return facts_dir / name if node_rank == 0 else peer_file(facts_dir, node_rank, name, of_node=0)


def read_decision(facts_dir: Path, restart: int, node_rank: int) -> dict[str, object] | None:
    """Global rank 0's resume decision for restart `restart`, when its facts file is there and says one."""
    from entrypoint.inspect.resume import ResumeAction  # the folder's reader, only when a decision is read

    path = decision_file(facts_dir, restart, node_rank)
    if path is None:
        return None
    try:
        data = json.loads(read_all(path, FACTS_LIMIT))
    except (FileRefused, ValueError):
        return None
    decision = data.get("resume") if isinstance(data, dict) and data.get("restart_count") == restart else None
    if not isinstance(decision, dict) or decision.get("action") not in {a.value for a in ResumeAction}:
        return None
    return decision


def shared_decision(
    facts_dir: Path,
    restart: int,
    node_rank: int,
    wait_s: float = DECISION_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, object] | None:
    """`read_decision`, asked every `DECISION_POLL_S` until it answers or `wait_s` has passed (then None)."""
    deadline = clock() + wait_s
    while True:
        decision = read_decision(facts_dir, restart, node_rank)
        if decision is not None or clock() >= deadline:
            return decision
        sleep(max(0.0, min(DECISION_POLL_S, deadline - clock())))


def decide(
    args: AttemptArgs, restart: int, env: Mapping[str, str], wait_s: float = DECISION_WAIT_S
) -> tuple[list[str], dict[str, object], bool, DecidedBy]:
    """This restart's (trainer args, decision, anything left to train, who decided): global rank 0 decides from the
    folder; every other worker takes rank 0's decision (`shared_decision`), or decides itself after `wait_s`."""
    if env.get("RANK") == "0" or args.facts is None:
        trainer, decision, left = redecide(args.trainer)
        return trainer, decision, left, DecidedBy.SELF
    node_rank = int(env.get("GROUP_RANK", "0") or 0)
    shared = shared_decision(args.facts, restart, node_rank, wait_s)
    if shared is not None:
        trainer, left = trainer_args(args.trainer, shared)
        return trainer, shared, left, DecidedBy.RANK_0
    trainer, decision, left = redecide(args.trainer)
    if env.get("LOCAL_RANK", "0") == "0":  # one line per node
        prefix = peer_prefix(args.facts, node_rank, 0)
        folder = args.facts if node_rank == 0 or prefix is None else args.facts.parent / f"{prefix}*.attempts"
        fields = {"restart": restart, "node": node_rank, "waited": wait_s, "action": decision["action"]}
        say(sys.stderr, language(env), "attempt-no-decision", where=str(folder / f"{restart}.json"), **fields)
    return trainer, decision, left, DecidedBy.FALLBACK


def facts(
    env: Mapping[str, str], restart: int, decision: dict[str, object] | None, decided_by: DecidedBy | None = None
) -> dict[str, object]:
    """What the launcher's record keeps about this attempt on this node."""
    local = int(env.get("LOCAL_WORLD_SIZE", "1"))
    first = int(env.get("RANK", "0"))
    return {
        "restart_count": restart,
        "node_rank": int(env.get("GROUP_RANK", "0")),
        "ranks": list(range(first, first + local)),
        "store_port": whole_number(env.get("MASTER_PORT"), 65535),  # None when unset or not a port
        "resume": decision,
        "resume_decided_by": decided_by.value if decided_by is not None else None,
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
    trainer, decision, left, decided_by = args.trainer, None, True, None
    if restart > 0:
        try:
            trainer, decision, left, decided_by = decide(args, restart, os.environ)
        except (Usage, ValueError) as problem:
            print(f"entrypoint.launch.attempt: {problem}", file=sys.stderr)
            return 2
        if os.environ.get("MASTER_PORT", "").isdigit():
            os.environ["MASTER_PORT"] = str(attempt_port(int(os.environ["MASTER_PORT"]), restart))
            os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
    if args.facts is not None and os.environ.get("LOCAL_RANK", "0") == "0":
        write_facts(args.facts, restart, facts(os.environ, restart, decision, decided_by))
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
