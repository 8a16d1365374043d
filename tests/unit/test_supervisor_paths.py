"""Every path of a running job through the supervisor, in this process, as the user sees it: the exit code, the lines
printed, and what is left behind (the stall record, the job's end in the run's folder, the attempts folder).

torchrun is a shell script (its workers are `sleep`s, so that /proc shows a real process tree); the watchdog and the
stall exchange are scripted, and the supervisor's tick (0.5 s) moves the stand-in on through hooks run at each of the
watchdog's checks or on a line the launcher prints (a signal to torchrun: no sleep synchronises anything). Paths: a
clean end, torchrun's own exit code or signal, forwarded signals and the grace period, workers left behind, a stall
(ended, warned, restarted, restart never coming, storage not answering), the culprit and lost nodes, a worker node
answering node 0, in-job restarts and the verdicts that stop them, another node's end, a lost node, a node ahead.
The methods whose effect needs no real process are driven one at a time with a fake process tree and clock."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from entrypoint.core import masking
from entrypoint.core.errors import ExitCode
from entrypoint.core.messages import Lang, Text
from entrypoint.core.settings import StallAction
from entrypoint.launch import supervisor as supervising
from entrypoint.launch.culprit import Culprit, Method, NodeReport, request_reports
from entrypoint.launch.failure import OutputTail
from entrypoint.launch.flight_recorder import AnalyserRun, AnalyserStatus
from entrypoint.launch.presence import JobEnd, LostNode, Presence
from entrypoint.launch.processes import Proc, ProcessTree
from entrypoint.launch.progress import Progress
from entrypoint.launch.restarts import Attempt, Attempts, Cause, Verdict
from entrypoint.launch.stall_exchange import Exchange, Shared
from entrypoint.launch.stall_exchange import Verdict as Named
from entrypoint.launch.supervisor import StartFailed, Supervisor, Tee
from entrypoint.launch.watchdog import Diagnosis, DiagnosisMethod, ProcessReport, Role, Watchdog

LEAD = "vla-entrypoint: "
BANNER = "!" * 100
OPEN = f"\n{BANNER}\n"  # a loud block starts
CLOSE = f"{BANNER}\n"  # and ends
STACK = 'Thread 4242 (idle): "MainThread"\n    all_reduce (torch/distributed/distributed_c10d.py:2501)\n'


def said(*texts: str) -> str:
    """Launcher lines as printed in English."""
    return "".join(f"{LEAD}{text}\n" for text in texts)


# ---------------------------------------------------------------------------------------------------------------
# Stand-ins


def torchrun(script: str, *args: str) -> list[str]:
    """A stand-in torchrun: `script` run by /bin/sh (no core files from the ranks it aborts)."""
    return ["/bin/sh", "-c", "ulimit -c 0\n" + script, "torchrun", *args]


def environment(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **extra}


class Console(io.StringIO):
    """The launcher's console. `on(phrase, action)`: the first write holding `phrase` runs `action` (once)."""

    def __init__(self) -> None:
        super().__init__()
        self.actions: list[tuple[str, Callable[[], None]]] = []

    def on(self, phrase: str, action: Callable[[], None]) -> None:
        self.actions.append((phrase, action))

    def write(self, text: str) -> int:
        written = super().write(text)
        for item in [item for item in self.actions if item[0] in text]:
            self.actions.remove(item)
            item[1]()
        return written


@dataclass
class Watch(Watchdog):
    """The watchdog as the supervisor uses it: successive checks return `verdicts` (then None), and run `hooks` (then
    nothing): what happens in the job during that tick."""

    verdicts: list[tuple[float, float] | None] = field(default_factory=list)
    hooks: list[Callable[[], None]] = field(default_factory=list)
    checks: int = 0

    def check(self) -> tuple[float, float] | None:
        self.checks += 1
        if self.hooks:
            self.hooks.pop(0)()
        return self.verdicts.pop(0) if self.verdicts else None


def watch(*verdicts: tuple[float, float] | None, hooks: tuple[Callable[[], None], ...] = ()) -> Watch:
    progress = Progress()
    progress.last_step = 40
    return Watch(None, 60, progress, 0.0, verdicts=list(verdicts), hooks=list(hooks))


def poke(supervisor: Supervisor) -> Callable[[], None]:
    """Move the stand-in on: SIGUSR1 to torchrun (its trap does the next phase)."""

    def send() -> None:
        assert supervisor.proc is not None
        os.kill(supervisor.proc.pid, signal.SIGUSR1)

    return send


def to_launcher(signum: int) -> Callable[[], None]:
    """The platform signals the launcher."""
    return lambda: os.kill(os.getpid(), signum)


@dataclass(frozen=True)
class Peers(Exchange):
    """The stall exchange with the other nodes, scripted: what node 0's request, this node's share and the verdict
    give; every call noted in `calls`."""

    request: float | None = None
    shared: Shared | None = None
    named: Named | None = None
    calls: list[tuple[object, ...]] = field(default_factory=list)

    def ask_others(self) -> float | None:
        self.calls.append(("ask",))
        return self.request

    def share(self, diagnosis: Diagnosis, last_step: int | None, silent: float | None, request: float | None) -> Shared:
        self.calls.append(("share", diagnosis, last_step, silent, request))
        assert self.shared is not None
        return self.shared

    def verdict(self, own: NodeReport, request: float | None) -> Named:
        self.calls.append(("verdict", own, request))
        assert self.named is not None
        return self.named


REPORT = NodeReport(0, (), 1000.0)


def peers(tmp_path: Path, **fields: object) -> Peers:
    log_dir = tmp_path / "logs"
    log_dir.mkdir(exist_ok=True)
    return Peers(fields.pop("node_rank", 0), 2, log_dir, "exp", log_dir / "node0.log", **fields)  # type: ignore[arg-type]


def named(culprit: Culprit, analyser: AnalyserRun | None = None, folder: Path | None = None) -> Named:
    return Named(culprit, [], [], analyser, folder)


BY_STACK = Culprit(
    Method.STACKS,
    [3],
    [1],
    Text("their stack differs", "调用栈不同"),
    [{"frame": "all_reduce (x)", "ranks": [0, 1, 2]}, {"frame": "sleep (y)", "ranks": [3]}],
)


def diagnosis(stacks: bool = True) -> Diagnosis:
    """One rank (pid 4242, global rank 3), its stack when `stacks`."""
    rank = ProcessReport(4242, 4200, Role.RANK, "S", "futex_wait", "python train.py")
    method = DiagnosisMethod.PY_SPY if stacks else DiagnosisMethod.NONE
    return Diagnosis(method, [rank], {"4242": STACK} if stacks else {}, [4242] if stacks else [], [], None, {4242: 3})


def diagnosed(monkeypatch: pytest.MonkeyPatch, stacks: bool = True) -> list[ProcessTree]:
    """Each diagnosis the supervisor takes is `diagnosis(stacks)`; the trees it was taken of, in order."""
    trees: list[ProcessTree] = []

    def diagnose(tree: ProcessTree) -> Diagnosis:
        trees.append(tree)
        return diagnosis(stacks)

    monkeypatch.setattr(supervising, "diagnose", diagnose)
    return trees


SUMMARY = said(
    "STALL: 1 local rank process(es), 0 child process(es) (data-loader workers):",
    "STALL:   pid 4242 rank state=S wchan=futex_wait  python train.py",
)


def summary(stacks: bool = True) -> str:
    """What the supervisor prints of `diagnosis(stacks)`."""
    if stacks:
        return (
            SUMMARY
            + said("STALL: in a collective: [4242]; in data loading: none seen", "STALL: Python stack of pid 4242:")
            + f"{STACK}\n"
        )
    return SUMMARY + said(
        "STALL: in a collective: none seen; in data loading: none seen",
        "STALL: no Python stacks: py-spy is not installed or may not read the processes (needs ptrace permission)",
    )


LATE_KILL = re.compile(r"vla-entrypoint: killed [12] process\(es\) torchrun left behind\n\Z")


def settled(output: str) -> str:
    """The output but its last line when that counts workers the supervisor itself has just killed (ending the job):
    some may still be dying when torchrun's end is seen, and are counted as left behind."""
    return LATE_KILL.sub("", output)


class Lines:
    """A reader of the training output (what `Progress` or the tail would see)."""

    def __init__(self) -> None:
        self.text = ""

    def feed(self, chunk: str) -> None:
        self.text += chunk


def launcher(
    tmp_path: Path, script: str, *args: str, env: dict[str, str] | None = None, **options: object
) -> tuple[Supervisor, Console]:
    console = Console()
    readers = options.pop("readers", [])
    grace = options.pop("grace", 30)
    lang = options.pop("lang", Lang.EN)
    command = torchrun(script, *args)
    supervisor = Supervisor(
        command,
        str(tmp_path),
        env or environment(),
        Tee(console),
        readers,  # type: ignore[arg-type]
        grace,  # type: ignore[arg-type]
        lang=lang,  # type: ignore[arg-type]
        **options,  # type: ignore[arg-type]
    )
    return supervisor, console


# ---------------------------------------------------------------------------------------------------------------
# Whole runs with a stand-in torchrun


def test_a_clean_run_relays_its_output_and_ends_with_0_leaving_the_signals_as_they_were(tmp_path: Path) -> None:
    token = f"hf_{tmp_path.name}_5e1f"
    flag = f"wandb-{tmp_path.name}-77"
    script = (
        'echo "cwd=$PWD"; echo "where=$WHERE"; echo "oops" >&2\n'
        'flag=$2; read -r stat < /proc/$$/stat; set -- $stat; [ "$6" = "$$" ] && echo "own session"\n'
        'echo "token=$HF_TOKEN flag=$flag"; printf "\\377 tail without newline, ends like a secret: hf"'
    )
    lines = Lines()
    before = [signal.getsignal(s) for s in supervising.FORWARDED_SIGNALS]
    masking.forget()  # only what this supervisor hands to torchrun is known as secret
    supervisor, console = launcher(
        tmp_path, script, "--wandb-key", flag, env=environment(WHERE="here", HF_TOKEN=token), readers=[lines]
    )
    assert supervisor.run() == 0
    expected = f"cwd={tmp_path}\nwhere=here\noops\nown session\ntoken=*** flag=***\n"
    expected += "\ufffd tail without newline, ends like a secret: hf"  # held back until the end, then given up
    assert console.getvalue() == expected and lines.text == expected
    assert [signal.getsignal(s) for s in supervising.FORWARDED_SIGNALS] == before
    assert supervisor.ended_at is not None and supervisor.job_end is None and supervisor.signalled is None


@pytest.mark.parametrize(
    "end, code",
    [("exit 3", 3), ("kill -KILL $$", 128 + 9), ("exit 0", 0)],
    ids=["its-own-code", "killed-by-a-signal", "zero"],
)
def test_torchrun_s_own_end_is_the_exit_code(tmp_path: Path, end: str, code: int) -> None:
    supervisor, console = launcher(tmp_path, end)
    assert (supervisor.run(), console.getvalue()) == (code, "")


def test_torchrun_failing_with_restarts_left_ends_with_its_own_code(tmp_path: Path) -> None:
    """torchrun gave up by itself (its rendezvous failed, say) while restarts were left: nothing says another attempt
    cannot help, so its own exit code stands."""
    script = f"trap 'kill $W' USR1\nsleep 30 & W=$!; wait $W; wait $W 2>/dev/null\n{TRACEBACK}\nexit 1"
    attempts = Attempts(3, 0.0, Progress())
    supervisor, console = launcher(tmp_path, script, attempts=attempts)
    supervisor.watchdog = watch(hooks=(poke(supervisor),))
    assert supervisor.run() == 1
    assert console.getvalue().endswith(f"{BOOM}\n") and supervisor.gave_up is None
    assert attempts.attempts[0].cause is Cause.TRAINER_EXCEPTION


def test_a_torchrun_that_cannot_start_says_which_program_and_why(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-torchrun")
    supervisor = Supervisor([missing], str(tmp_path), environment(), Tee(io.StringIO()), [], 1)
    with pytest.raises(StartFailed) as failure:
        supervisor.run()
    assert str(failure.value) == f"{missing}: No such file or directory"
    assert failure.value.program == missing and isinstance(failure.value.error, FileNotFoundError)
    assert str(StartFailed("tr", OSError("odd"))) == "tr: odd"  # an error without strerror shows itself


def test_workers_torchrun_left_behind_are_killed_and_counted(tmp_path: Path) -> None:
    """A worker in a session of its own outlives torchrun: after torchrun ends, it is killed and said."""
    script = "setsid sleep 30 &\nsleep 30 & W=$!\ntrap 'kill $W' USR1\nwait $W; wait $W 2>/dev/null; exit 0"
    supervisor, console = launcher(tmp_path, script)
    supervisor.watchdog = watch(hooks=(poke(supervisor),))
    assert supervisor.run() == 0
    assert console.getvalue() == said("killed 1 process(es) torchrun left behind")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_a_signal_is_forwarded_and_the_exit_code_says_which(tmp_path: Path, sig: signal.Signals) -> None:
    name = sig.name[3:]
    script = f"trap 'echo \"torchrun got {name}\"; exit 7' {name}\nsleep 30 & wait $!"
    supervisor, console = launcher(tmp_path, script, grace=12)
    supervisor.watchdog = watch(hooks=(to_launcher(sig),))
    assert supervisor.run() == 128 + int(sig)
    expected = said(f"received {sig.name}; forwarding to torchrun, killing everything left after 12s")
    assert console.getvalue() == expected + f"torchrun got {name}\n"


def test_a_signal_while_torchrun_is_being_started_is_forwarded_once_it_runs(tmp_path: Path) -> None:
    supervisor, console = launcher(tmp_path, "sleep 30 & wait $!", grace=12)
    supervisor._on_signal(signal.SIGTERM, None)  # before Popen returned: no torchrun to forward it to yet
    assert supervisor.run() == 128 + signal.SIGTERM
    assert console.getvalue().startswith(
        said("received SIGTERM; forwarding to torchrun, killing everything left after 12s")
    )


def test_a_second_signal_is_forwarded_without_a_second_announcement_and_leftovers_go_unsaid(tmp_path: Path) -> None:
    script = (
        "trap 'echo \"torchrun got TERM\"' TERM\ntrap 'echo \"torchrun got INT\"; exit 5' INT\n"
        "setsid sleep 30 &\nwhile :; do sleep 30 & wait $!; done"
    )
    supervisor, console = launcher(tmp_path, script)
    supervisor.watchdog = watch(hooks=(to_launcher(signal.SIGTERM), to_launcher(signal.SIGINT)))
    assert supervisor.run() == 128 + signal.SIGTERM
    expected = said("received SIGTERM; forwarding to torchrun, killing everything left after 30s")
    assert console.getvalue() == expected + "torchrun got TERM\ntorchrun got INT\n"
    assert supervisor.signalled == signal.SIGTERM


def test_after_the_grace_period_the_whole_tree_is_killed(tmp_path: Path) -> None:
    """torchrun ignores SIGTERM: once the grace period (0 s) is over, its tree is killed, a worker in a session of its
    own too."""
    script = "trap '' TERM\nsetsid sleep 30 &\nexec sleep 30"
    supervisor, console = launcher(tmp_path, script, grace=0)
    supervisor.watchdog = watch(hooks=(to_launcher(signal.SIGTERM),))
    assert supervisor.run() == 128 + signal.SIGTERM
    assert console.getvalue() == said(
        "received SIGTERM; forwarding to torchrun, killing everything left after 0s",
        "grace period over; killed the training process tree (1 left)",
    )
    assert supervisor.kill_deadline is None


STALL = "STALL: no training progress for 93s (limit 62s). Last output lines:"  # silent 93.46 s, limit 61.66 s
RESTARTING = (
    "restarts left: {left}: this node's workers are ended (torchrun stays) so that every node restarts them from the "
    "newest complete checkpoint"
)
KILLED = (
    "the launcher ends this node's workers (SIGKILL) so that torchrun restarts them; torchrun reports them below as "
    "`exitcode: -9`: that is this, not a crash"
)
ENDING = "STALL: ending this node with exit code 124 so the platform ends the job"


def test_a_stall_without_restarts_aborts_the_ranks_for_their_stacks_and_ends_the_job_with_124(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No py-spy stacks: each rank (not the process below it) gets SIGABRT so that faulthandler prints its stack, the
    supervisor waits for torchrun, then ends the job with 124; the last 20 lines of output are shown."""
    diagnosed(monkeypatch, stacks=False)
    script = (
        'i=1; while [ $i -le 25 ]; do echo "line $i"; i=$((i+1)); done\n'
        "rank() { trap 'kill $S; wait $S 2>/dev/null; echo \"rank 0: SIGABRT\"; exit 134' ABRT\n"
        "sleep 30 & S=$!; wait $S; }\n"
        "rank & wait $!; exit 1"
    )
    tail = OutputTail()
    supervisor, console = launcher(tmp_path, script, readers=[tail], tail=tail, watchdog=watch((93.46, 61.66)))
    assert supervisor.run() == ExitCode.STALLED
    output = console.getvalue()
    assert "rank 0: SIGABRT\n" in output  # the rank's own last words, relayed while the supervisor waited for it
    shown = "".join(f"  | line {n}\n" for n in range(6, 26))
    relayed = "".join(f"line {n}\n" for n in range(1, 26))
    assert output.replace("rank 0: SIGABRT\n", "") == (
        relayed + OPEN + said(STALL) + shown + summary(stacks=False) + said(ENDING) + CLOSE
    )
    record = diagnosis(stacks=False)
    record.method = DiagnosisMethod.FAULTHANDLER
    assert supervisor.stall == {
        "silent_s": 93.5,
        "limit_s": 61.7,
        "action": "fail",
        "diagnosis": record.to_json(),
        "stacks_file": None,
    }
    cause = Text("no progress for 93.5s", "93.5 秒没有进展")
    assert supervisor.job_end == JobEnd(124, "stalled", cause, 0, "") and supervisor.stall_ended


def facts(folder: Path) -> str:
    """The stand-in's rank 0 of attempt 1 records that it resumed from step 25 (shell builtins only: a short-lived
    command started by torchrun would look like a worker of a new attempt)."""
    folder.mkdir(parents=True, exist_ok=True)
    return f'echo \'{{"resume": {{"step": 25}}}}\' > {folder}/1.json'


def test_a_stall_with_restarts_left_ends_the_workers_and_announces_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py-spy stacks were taken: every process below torchrun is killed (SIGKILL), torchrun stays and starts a new
    attempt, which is announced once its rank 0 recorded where it resumed; then training ends well (0)."""
    diagnosed(monkeypatch, stacks=True)
    folder = tmp_path / "attempts"
    script = (
        f"sleep 30 & sleep 30 & wait\n{facts(folder)}\n"
        "sleep 30 & W=$!\ntrap 'kill $W' USR1\nwait $W; wait $W 2>/dev/null; exit 0"
    )
    attempts = Attempts(2, 0.0, Progress(), folder)
    watchdog = watch((93.46, 61.66))
    supervisor, console = launcher(tmp_path, script, watchdog=watchdog, attempts=attempts)
    console.on("RESTART 1/2", poke(supervisor))
    assert supervisor.run() == 0
    first, second = attempts.attempts
    assert first.detected_at is not None
    delay = f"{second.started_at - first.detected_at:.1f}"
    restart = f"RESTART 1/2: the workers ended (stall); torchrun restarted them on this node {delay} s after that was "
    assert console.getvalue() == (
        OPEN
        + said(STALL)
        + summary(stacks=True)
        + said(RESTARTING.format(left=2))
        + CLOSE
        + said(KILLED, restart + "seen, resuming from step 25")
    )
    assert (first.cause, first.detail, first.culprit_nodes) == (Cause.STALL, "93 s without progress (limit 62 s)", ())
    assert supervisor.stall == {
        "silent_s": 93.5,
        "limit_s": 61.7,
        "action": "fail",
        "diagnosis": diagnosis(stacks=True).to_json(),
        "stacks_file": None,
    }
    assert watchdog.started_at == second.started_at  # the start-up allowance again, for the new attempt
    assert supervisor.job_end is None and not supervisor.stall_ended and supervisor._restart_deadline is None


def test_a_restart_that_never_comes_ends_the_job_with_124(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers were ended for a restart, but torchrun starts no new attempt within the bound (0 s here)."""
    diagnosed(monkeypatch, stacks=True)
    monkeypatch.setattr(supervising, "RESTART_WAIT_S", 0.0)
    attempts = Attempts(2, 0.0, Progress())
    supervisor, console = launcher(
        tmp_path, "sleep 30 & wait; exec sleep 30", watchdog=watch((93.46, 61.66)), attempts=attempts
    )
    assert supervisor.run() == ExitCode.STALLED
    missing = "STALL: torchrun started no new attempt within 0s after this node's workers were ended"
    assert console.getvalue() == (
        OPEN
        + said(STALL)
        + summary(stacks=True)
        + said(RESTARTING.format(left=2))
        + CLOSE
        + said(KILLED)
        + OPEN
        + said(missing, ENDING)
        + CLOSE
    )
    assert supervisor.job_end is not None and supervisor.job_end.code == 124 and supervisor._restart_deadline is None
    assert len(attempts.attempts) == 1


def test_a_stall_while_the_storage_does_not_answer_blames_no_rank_and_ends_this_node_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranks wait for the CFS: its cause is printed and the node ends with 124 without a diagnosis, without a
    restart and without telling the other nodes (the run's folder may be on that storage)."""
    trees = diagnosed(monkeypatch)
    storage = Text("STORAGE: the CFS has not answered for 120 s", "存储:CFS 已 120 秒无响应")
    attempts = Attempts(2, 0.0, Progress())
    supervisor, console = launcher(tmp_path, "sleep 30 & wait", watchdog=watch((93.46, 61.66)), attempts=attempts)
    supervisor.storage_cause = lambda: storage
    assert supervisor.run() == ExitCode.STALLED
    assert settled(console.getvalue()) == OPEN + said(STALL, storage.en, ENDING) + CLOSE
    assert supervisor.stall == {"silent_s": 93.5, "limit_s": 61.7, "storage": storage.en}
    assert supervisor.culprit_line == storage and supervisor.job_end is None and trees == []
    assert attempts.attempts[0].cause is None


def test_torchrun_failing_after_the_last_allowed_restart_ends_with_93(tmp_path: Path) -> None:
    """Restarts 1 of 1: attempt 0's worker dies, attempt 1 is announced, then fails too and torchrun gives up: the job
    ends with DO_NOT_REQUEUE, said on this node and noted in the attempts folder, not told to the others (the
    launcher settles that). The run's folder learns the new attempt and the workers' failure."""
    folder = tmp_path / "attempts"
    phase = "sleep 30 & W=$!; wait $W; wait $W 2>/dev/null"
    script = f"trap 'kill $W' USR1\n{phase}\n{facts(folder)}\n{phase}\nexit 1"
    attempts = Attempts(1, 0.0, Progress(), folder)
    presence = Presence(tmp_path / "run", 0, 1, ["host-a"], 600, host="host-a")
    supervisor, console = launcher(tmp_path, script, attempts=attempts, presence=presence)
    supervisor.watchdog = watch(hooks=(poke(supervisor), poke(supervisor)))
    presence.start()
    try:
        code = supervisor.run()
    finally:
        presence.finish(clean=False)
    assert code == ExitCode.DO_NOT_REQUEUE
    spent = (
        "DO NOT REQUEUE: all 1 in-job restarts are spent and training failed again; exit 93. Read the attempts in "
        "the start-up record and fix the cause before starting the job again."
    )
    restart = "RESTART 1/1: the workers ended (worker-exited); torchrun restarted them on this node 0.0 s after that"
    assert console.getvalue() == said(restart + " was seen, resuming from step 25") + OPEN + said(spent) + CLOSE
    assert supervisor.gave_up is Verdict.BUDGET_SPENT and supervisor.verdict_line is not None
    assert supervisor.verdict_line.en == spent and supervisor.job_end is None
    assert json.loads((folder / "gave-up.json").read_text()) == {"verdict": "budget-spent", "node_rank": 0}
    assert presence.joined and presence.failed_at is not None and presence.attempt == 1
    assert attempts.attempts[1].detected_at is not None  # torchrun's own failure ended it
    assert not (tmp_path / "run" / "end.json").exists()


BOOM = "ValueError: batch_size=0 on rank 3"
TRACEBACK = f'printf "[rank3]: Traceback (most recent call last):\\n[rank3]:   File train.py\\n[rank3]: {BOOM}\\n"'


def test_the_same_exception_twice_ends_the_job_on_every_node_with_93(tmp_path: Path) -> None:
    """Attempts 0 and 1 end with the same exception of the trainer: when attempt 2 starts, the supervisor ends the job
    with DO_NOT_REQUEUE, written to the run's folder for every node, and kills torchrun."""
    phase = "sleep 30 & W=$!; wait $W; wait $W 2>/dev/null"
    script = f"trap 'kill $W' USR1\n{phase}\n{TRACEBACK}\n{phase}\n{TRACEBACK}\n{phase}"
    attempts = Attempts(5, 0.0, Progress())
    presence = Presence(tmp_path / "run", 0, 1, ["host-a"], 600, host="host-a")
    supervisor, console = launcher(tmp_path, script, attempts=attempts, presence=presence)
    supervisor.watchdog = watch(hooks=(poke(supervisor), poke(supervisor)))
    presence.start()
    try:
        code = supervisor.run()
    finally:
        presence.finish(clean=False)
    why = (
        f"DO NOT REQUEUE: attempts 0 and 1 ended with the same exception in the trainer: {BOOM}; a restart would fail "
        "the same way; exit 93. Fix the trainer or its settings."
    )
    traceback = f"[rank3]: Traceback (most recent call last):\n[rank3]:   File train.py\n[rank3]: {BOOM}\n"
    assert code == ExitCode.DO_NOT_REQUEUE
    assert settled(console.getvalue()) == traceback + traceback + OPEN + said(why) + CLOSE
    assert supervisor.gave_up is Verdict.SAME_EXCEPTION and len(attempts.attempts) == 3
    end = json.loads((tmp_path / "run" / "end.json").read_text())
    assert (end["exit_code"], end["class"], end["cause"]["en"], end["node"], end["host"], end["verdict"]) == (
        93,
        "do-not-requeue",
        why,
        0,
        "host-a",
        "same-exception",
    )


def test_a_worker_node_answers_node_0_s_request_while_training_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Node 1 has no watchdog of its own: on node 0's request (in the shared log folder) it diagnoses its ranks, shares
    the diagnosis and training goes on."""
    diagnosed(monkeypatch)
    exchange = peers(tmp_path, node_rank=1, shared=Shared([3], [3], True, REPORT))
    at = time.time()
    assert request_reports(exchange.log_dir, "exp", clock=lambda: at)
    script = "sleep 30 & W=$!\ntrap 'kill $W' USR1\nwait $W; wait $W 2>/dev/null; exit 0"
    supervisor, console = launcher(tmp_path, script, exchange=exchange)
    supervisor.watchdog = watch(hooks=(poke(supervisor),))
    assert supervisor.run() == 0
    assert (
        console.getvalue()
        == OPEN
        + said(ASKED)
        + summary()
        + said(f"STALL: this node's diagnosis is in {tmp_path}/logs/node0.stall.json for node 0")
        + CLOSE
    )
    assert supervisor.stall is not None and supervisor.stall["requested_at"] == at


# ---------------------------------------------------------------------------------------------------------------
# One method at a time: a fake process tree, torchrun's handle, os.kill and the clock

RANK_A = Proc(101, 100, "S", 1, "python")
LOADER = Proc(103, 101, "S", 3, "pt_data_worker")  # below rank A
RANK_B = Proc(102, 100, "S", 2, "python")
ASKED = "STALL: node 0 found no training progress and asks every node for its diagnosis; this node's follows"


@dataclass
class Tree(ProcessTree):
    """torchrun (pid 100), two ranks and a data-loader worker; `kill` is counted."""

    procs: list[Proc] = field(default_factory=lambda: [RANK_A, LOADER, RANK_B])
    kills: int = 0

    def refresh(self) -> list[Proc]:
        return list(self.procs)

    def alive(self) -> list[Proc]:
        return list(self.procs)

    def kill(self) -> list[int]:
        self.kills += 1
        return [p.pid for p in self.procs]


class Child:
    """torchrun's handle: `code` None while it runs; it outlasts any wait."""

    def __init__(self) -> None:
        self.code: int | None = None
        self.signals: list[int] = []
        self.waits: list[float | None] = []

    def poll(self) -> int | None:
        return self.code

    def send_signal(self, signum: int) -> None:
        self.signals.append(signum)

    def wait(self, timeout: float | None = None) -> int:
        """torchrun does not end within `timeout`."""
        self.waits.append(timeout)
        raise subprocess.TimeoutExpired("torchrun", timeout or 0)


class Kills:
    """`os` as the supervisor sees it: each kill noted; the pids in `refuse` raise as a process that is gone or not
    ours does."""

    def __init__(self, refuse: dict[int, type[OSError]] | None = None) -> None:
        self.sent: list[tuple[int, int]] = []
        self.refuse = refuse or {}

    def kill(self, pid: int, signum: int) -> None:
        self.sent.append((pid, signum))
        if pid in self.refuse:
            raise self.refuse[pid](pid, "refused")


class Clock:
    """`time` as the supervisor sees it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now

    def __call__(self) -> float:
        return self.now


@dataclass
class Bench:
    supervisor: Supervisor
    out: io.StringIO
    clock: Clock
    kills: Kills
    tree: Tree


def bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse: dict[int, type[OSError]] | None = None, **options: object
) -> Bench:
    out = io.StringIO()
    options.setdefault("lang", Lang.EN)
    supervisor = Supervisor(["torchrun"], str(tmp_path), {}, Tee(out), [], 30, **options)  # type: ignore[arg-type]
    clock, kills, tree = Clock(), Kills(refuse), Tree(100)
    monkeypatch.setattr(supervising, "time", clock)
    monkeypatch.setattr(supervising, "os", kills)
    supervisor.tree = tree
    supervisor.proc = Child()  # type: ignore[assignment]
    return Bench(supervisor, out, clock, kills, tree)


def test_a_new_supervisor_has_seen_nothing_yet(tmp_path: Path) -> None:
    lines, env = Lines(), {"A": "1"}
    attempts = Attempts(2, 0.0, Progress())
    plain = Supervisor(["torchrun"], str(tmp_path), env, Tee(io.StringIO()), [lines], 30)
    assert plain.readers == [lines] and plain.env == env and plain.env is not env
    watched = Supervisor(["torchrun"], str(tmp_path), env, Tee(io.StringIO()), [lines], 30, attempts=attempts)
    assert watched.readers == [lines, attempts]  # the attempts follow the output too
    outcome = (plain.stall, plain.stall_ended, plain.gave_up, plain.job_end, plain.ended_at, plain.verdict_line)
    assert outcome == (None, False, None, None, None, None)
    handles = (plain.culprit_line, plain.storage_cause, plain.signalled, plain.kill_deadline, plain.proc, plain.tree)
    assert handles == (None, None, None, None, None, None)
    assert (plain.attempts, plain.exchange, plain.presence, plain.stall_action) == (None, None, None, StallAction.FAIL)


def test_a_signal_is_forwarded_every_time_but_announced_and_timed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = bench(tmp_path, monkeypatch)
    child = b.supervisor.proc
    ended = Child()
    ended.code = 0
    b.supervisor.proc = ended  # type: ignore[assignment]
    b.supervisor._on_signal(signal.SIGTERM, None)  # torchrun already ended
    assert (b.out.getvalue(), b.supervisor.signalled, ended.signals) == ("", None, [])
    b.supervisor.proc = None
    b.supervisor._on_signal(signal.SIGTERM, None)  # torchrun not started yet: kept, `run` forwards it
    assert (b.supervisor.signalled, b.supervisor.kill_deadline) == (signal.SIGTERM, 1030.0)
    b.supervisor.proc = child
    b.supervisor._on_signal(signal.SIGTERM, None)
    b.clock.now += 5
    b.supervisor._on_signal(signal.SIGINT, None)
    assert isinstance(child, Child) and child.signals == [signal.SIGTERM, signal.SIGINT]
    assert (b.supervisor.signalled, b.supervisor.kill_deadline) == (signal.SIGTERM, 1030.0)
    assert b.out.getvalue() == said("received SIGTERM; forwarding to torchrun, killing everything left after 30s")


def test_workers_are_ended_with_sigkill_all_of_them_or_with_sigabrt_the_ranks_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that is gone or not ours is passed over; the others are still signalled."""
    b = bench(tmp_path, monkeypatch, refuse={101: ProcessLookupError, 103: PermissionError})
    b.supervisor._end_workers(abort=True)
    assert b.kills.sent == [(101, signal.SIGABRT), (102, signal.SIGABRT)]
    b.kills.sent.clear()
    b.supervisor._end_workers(abort=False)
    assert b.kills.sent == [(101, signal.SIGKILL), (103, signal.SIGKILL), (102, signal.SIGKILL)]
    assert b.out.getvalue() == said(
        KILLED.replace("SIGKILL", "SIGABRT").replace("-9", "-6"),
        KILLED,
    )


def test_the_stall_check_is_the_watchdog_s_but_not_while_an_attempt_is_being_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = bench(tmp_path, monkeypatch)
    assert b.supervisor._check_stall() is None  # no watchdog: a worker node
    b = bench(tmp_path, monkeypatch, watchdog=watch((93.46, 61.66)))
    assert b.supervisor._check_stall() == (93.46, 61.66)  # restarts off
    attempts = Attempts(2, 0.0, Progress())
    watchdog = watch((93.46, 61.66), (120.0, 60.0))
    b = bench(tmp_path, monkeypatch, watchdog=watchdog, attempts=attempts)
    assert b.supervisor._check_stall() == (93.46, 61.66)  # before any attempt
    attempts.observe(frozenset({101}))
    attempts.stalled("ended", Cause.STALL)
    assert b.supervisor._check_stall() is None and watchdog.checks == 1
    attempts.observe(frozenset({102}))
    assert b.supervisor._check_stall() == (120.0, 60.0) and watchdog.checks == 2


def tail_of(count: int) -> OutputTail:
    tail = OutputTail()
    tail.feed("".join(f"line {n}\n" for n in range(1, count + 1)))
    return tail


NO_DUMPS = "STALL: no flight recorder here: no rank wrote a dump (gloo ranks have no dump pipe): culprit from stacks"
NAMED = "STALL: culprit rank(s) 3 on node(s) 1: their stack differs"


def test_a_stall_with_stall_action_warn_names_the_culprit_and_lets_training_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Node 0 asks the others, diagnoses its own ranks (stacks written beside the log), names the culprit from every
    node's diagnosis, and ends nothing."""
    trees = diagnosed(monkeypatch)
    exchange = peers(tmp_path, request=1234.5, shared=Shared([3], [], True, REPORT), named=named(BY_STACK))
    stacks = tmp_path / "node0.stacks.txt"
    b = bench(
        tmp_path,
        monkeypatch,
        watchdog=watch(),
        stall_action=StallAction.WARN,
        exchange=exchange,
        tail=tail_of(3),
        stacks_path=stacks,
    )
    b.supervisor._on_stall(93.46, 61.66)
    shown = "  | line 1\n  | line 2\n  | line 3\n"
    assert (
        b.out.getvalue()
        == OPEN
        + said(STALL)
        + shown
        + summary()
        + said(NO_DUMPS, NAMED, "STALL: stall_action=warn: training goes on")
        + CLOSE
    )
    assert b.supervisor.stall == {
        "silent_s": 93.5,
        "limit_s": 61.7,
        "action": "warn",
        "diagnosis": diagnosis().to_json(),
        "stacks_file": str(stacks),
        "culprit": BY_STACK.to_json(),
        "flight_recorder": {"asked": [3], "dumps": [], "folder": None, "traces": [], "analyser": None},
    }
    assert stacks.read_text() == f"==== pid 4242 ====\n{STACK}\n"
    assert trees == [b.tree] and exchange.calls[0] == ("ask",)
    assert exchange.calls[1:] == [("share", diagnosis(), 40, 93.46, 1234.5), ("verdict", REPORT, 1234.5)]
    assert b.supervisor.culprit_line == Text(NAMED, "STALL:问题 rank 3,位于节点 1:调用栈不同")
    assert (b.tree.kills, b.kills.sent, b.supervisor.stall_ended, b.supervisor.job_end) == (0, [], False, None)


def test_a_stall_with_restarts_left_passes_the_culprit_nodes_to_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without stacks the ranks get SIGABRT (faulthandler prints their stacks), the loader is left alone; the next
    attempt must start within RESTART_WAIT_S."""
    diagnosed(monkeypatch, stacks=False)
    attempts = Attempts(1, 0.0, Progress())
    attempts.observe(frozenset({101, 102}))
    exchange = peers(tmp_path, shared=Shared([], [], True, REPORT), named=named(BY_STACK))
    b = bench(tmp_path, monkeypatch, attempts=attempts, exchange=exchange, tail=tail_of(30))
    b.supervisor._on_stall(93.46, 61.66)
    shown = "".join(f"  | line {n}\n" for n in range(11, 31))
    aborted = KILLED.replace("SIGKILL", "SIGABRT").replace("-9", "-6")
    assert b.out.getvalue() == OPEN + said(STALL) + shown + summary(stacks=False) + said(
        NO_DUMPS, NAMED, RESTARTING.format(left=1)
    ) + CLOSE + said(aborted)
    assert b.kills.sent == [(101, signal.SIGABRT), (102, signal.SIGABRT)]
    ended = attempts.attempts[0]
    assert (ended.cause, ended.detail, ended.culprit_nodes) == (
        Cause.STALL,
        "93 s without progress (limit 62 s)",
        (1,),
    )
    assert b.supervisor._restart_deadline == 1000.0 + supervising.RESTART_WAIT_S == 1060.0
    assert b.supervisor.stall == {
        "silent_s": 93.5,
        "limit_s": 61.7,
        "action": "fail",
        "diagnosis": diagnosis(stacks=False).to_json(),
        "stacks_file": None,
        "culprit": BY_STACK.to_json(),
        "flight_recorder": {"asked": [], "dumps": [], "folder": None, "traces": [], "analyser": None},
    }
    assert (b.tree.kills, b.supervisor.job_end) == (0, None)


def test_a_stall_with_no_restart_left_ends_the_job_with_the_culprit_as_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last restart is spent: each rank gets SIGABRT for its stacks, torchrun is waited for (10 s at most), and
    every node ends with 124 and the culprit line. A rank already gone, or not ours, is passed over."""
    diagnosed(monkeypatch, stacks=False)
    attempts = Attempts(1, 0.0, Progress())
    attempts.observe(frozenset({101}))
    attempts.observe(frozenset({102}))  # attempt 1 of 1: no restart left
    exchange = peers(tmp_path, shared=Shared([], [], True, REPORT), named=named(BY_STACK))
    refuse: dict[int, type[OSError]] = {101: ProcessLookupError, 102: PermissionError}  # gone, or not ours
    stacks = tmp_path / "stacks.txt"
    b = bench(tmp_path, monkeypatch, refuse, attempts=attempts, exchange=exchange, stacks_path=stacks)
    b.supervisor._on_stall(93.46, 61.66)
    assert b.out.getvalue() == OPEN + said(STALL) + summary(stacks=False) + said(NO_DUMPS, NAMED, ENDING) + CLOSE
    assert b.supervisor.stall is not None and b.supervisor.stall["stacks_file"] is None and not stacks.exists()
    assert b.kills.sent == [(101, signal.SIGABRT), (102, signal.SIGABRT)]
    assert isinstance(b.supervisor.proc, Child) and b.supervisor.proc.waits == [10]
    record = diagnosis(stacks=False)
    record.method = DiagnosisMethod.FAULTHANDLER
    assert b.supervisor.stall is not None and b.supervisor.stall["diagnosis"] == record.to_json()
    assert b.supervisor.stall["culprit"] == BY_STACK.to_json()
    culprit = Text(NAMED, "STALL:问题 rank 3,位于节点 1:调用栈不同")
    assert b.supervisor.job_end == JobEnd(124, "stalled", culprit, 0, "")
    assert b.tree.kills == 1 and b.supervisor.stall_ended and b.supervisor._restart_deadline is None


def test_a_stall_with_no_rank_left_and_no_stacks_waits_for_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diagnosed(monkeypatch, stacks=False)
    b = bench(tmp_path, monkeypatch, attempts=Attempts(3, 0.0, Progress()))
    b.tree.procs = [LOADER]  # the ranks are gone, only a loader is left: no restart of nothing
    b.supervisor._on_stall(93.46, 61.66)
    assert b.kills.sent == [] and isinstance(b.supervisor.proc, Child) and b.supervisor.proc.waits == []
    assert b.supervisor.stall is not None and b.supervisor.stall["diagnosis"] == diagnosis(stacks=False).to_json()
    assert b.out.getvalue() == OPEN + said(STALL) + summary(stacks=False) + said(ENDING) + CLOSE
    assert b.supervisor.job_end == JobEnd(124, "stalled", Text("no progress for 93.5s", "93.5 秒没有进展"), 0, "")


def test_a_stall_with_py_spy_stacks_kills_the_tree_without_sigabrt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diagnosed(monkeypatch, stacks=True)
    stacks = tmp_path / "stacks.txt"
    b = bench(tmp_path, monkeypatch, stacks_path=stacks)
    b.supervisor._on_stall(93.46, 61.66)
    assert b.kills.sent == [] and isinstance(b.supervisor.proc, Child) and b.supervisor.proc.waits == []
    assert b.supervisor.stall is not None and b.supervisor.stall["stacks_file"] == str(stacks)
    assert b.supervisor.stall["diagnosis"] == diagnosis(stacks=True).to_json() and b.tree.kills == 1


def test_a_stall_while_the_storage_does_not_answer_only_warns_with_stall_action_warn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trees = diagnosed(monkeypatch)
    storage = Text("STORAGE: the CFS has not answered for 120 s", "存储:CFS 已 120 秒无响应")
    b = bench(tmp_path, monkeypatch, stall_action=StallAction.WARN)
    b.supervisor.storage_cause = lambda: storage
    b.supervisor._on_stall(93.46, 61.66)
    assert b.out.getvalue() == OPEN + said(STALL, storage.en)
    assert b.supervisor.stall == {"silent_s": 93.5, "limit_s": 61.7, "storage": storage.en}
    assert (trees, b.tree.kills, b.supervisor.stall_ended, b.supervisor.culprit_line) == ([], 0, False, storage)


def test_a_stall_with_storage_answering_goes_on_to_the_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trees = diagnosed(monkeypatch)
    b = bench(tmp_path, monkeypatch, stall_action=StallAction.WARN)
    b.supervisor.storage_cause = lambda: None
    b.supervisor._on_stall(93.46, 61.66)
    assert trees == [b.tree]
    assert (
        b.out.getvalue() == OPEN + said(STALL) + summary() + said("STALL: stall_action=warn: training goes on") + CLOSE
    )


def test_a_stall_ends_the_job_on_every_node_as_this_node_and_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    presence = Presence(folder, 2, 3, ["host-a", "host-b", "host-c"], 600, host="host-c")
    b = bench(tmp_path, monkeypatch, presence=presence)
    b.supervisor._end_stalled()  # no stall record: the silence is unknown
    cause = Text("no progress for ?s", "? 秒没有进展")
    assert b.supervisor.job_end == JobEnd(124, "stalled", cause, 2, "host-c")
    end = json.loads((folder / "end.json").read_text())
    assert (end["exit_code"], end["class"], end["cause"], end["node"], end["host"]) == (
        124,
        "stalled",
        {"en": "no progress for ?s", "zh": "? 秒没有进展"},
        2,
        "host-c",
    )
    assert b.out.getvalue() == said(ENDING) + CLOSE and b.tree.kills == 1 and b.supervisor.stall_ended
    b = bench(tmp_path, monkeypatch)
    b.supervisor.stall = {"requested_at": 1.7e9}  # a record without the silence
    b.supervisor._end_stalled()
    assert b.supervisor.job_end == JobEnd(124, "stalled", cause, 0, "")


def test_a_restart_that_never_came_says_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = bench(tmp_path, monkeypatch)
    b.supervisor._restart_deadline = 990.0
    b.supervisor._restart_missing()
    missing = "STALL: torchrun started no new attempt within 60s after this node's workers were ended"
    assert b.out.getvalue() == OPEN + said(missing, ENDING) + CLOSE
    assert b.supervisor._restart_deadline is None and b.supervisor.job_end is not None
    assert b.supervisor.job_end.code == 124 and b.tree.kills == 1


def quiet(presence: Presence) -> Presence:
    """Started (its folder and beat made) but not beating on its own: the test moves its clock."""
    presence.start()
    presence.finish(clean=False)
    return presence


def test_node_0_names_a_node_silent_for_the_whole_wait_lost_and_another_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes 1 and 2 sent no diagnosis: node 1 has shown no sign of life for GATHER_WAIT_S (30 s) and is named lost,
    node 2 beat 29.9 s ago and is only missing. The analyser's output is shown whenever it ran; 'no dumps' only
    once."""
    diagnosed(monkeypatch)
    clock = Clock()
    clock.now = 0.0
    presence = quiet(Presence(tmp_path / "run", 0, 3, ["host-a", "host-b", "host-c"], 600, clock=clock))
    (tmp_path / "run" / "node2.cafe.0.0").touch()
    clock.now = 0.1
    presence.look()
    clock.now = 30.0
    groups: list[dict[str, object]] = [
        {"frame": "all_reduce (x)", "ranks": [0, 1]},
        {"frame": "sleep (y)", "ranks": [2, 3]},
    ]
    nobody = Culprit(Method.NONE, [], [], None, groups, [1, 2])
    failed = AnalyserRun(AnalyserStatus.FAILED, 1, ("KeyError: 'entries'",))
    exchange = peers(tmp_path, shared=Shared([0], [0], True, REPORT), named=named(nobody, failed, tmp_path / "fr"))
    b = bench(tmp_path, monkeypatch, exchange=exchange, presence=presence)
    found = b.supervisor._name_culprit(diagnosis(), 93.46, 1234.5)
    log_dir = tmp_path / "logs"
    lines = (
        "STALL: node 1 sent no diagnosis within 30s and shows no sign of life for 30s: it is lost (its container or "
        "machine ended?)",
        f"STALL: node 2 sent no diagnosis within 30s: look at its own log in {log_dir}",
        "STALL: no single rank stands out (2 stack group(s) among 4 rank(s)); read the stacks above",
    )
    analysed = (
        f"STALL: torch's flight-recorder analyser failed (exit 1: KeyError: 'entries'); the dumps are in {tmp_path}/fr"
    )
    assert b.out.getvalue() == said(analysed, *lines)
    assert found["culprit"] == {**nobody.to_json(), "lost_nodes": [1]}
    assert found["flight_recorder"] == {
        "asked": [0],
        "dumps": [],
        "folder": None,
        "traces": [],
        "analyser": failed.to_json(),
    }
    assert exchange.calls[0] == ("share", diagnosis(), None, 93.46, 1234.5)  # no watchdog: no step known
    assert b.supervisor.culprit_line is not None and b.supervisor.culprit_line.en == lines[-1]


def test_without_the_run_s_folder_a_missing_node_is_named_missing_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = Culprit(Method.NONE, [], [], None, [], [1])
    exchange = peers(tmp_path, shared=Shared([], [], True, REPORT), named=named(missing))
    b = bench(tmp_path, monkeypatch, exchange=exchange, watchdog=watch())
    found = b.supervisor._name_culprit(diagnosis(), 93.46, 1234.5)
    assert b.out.getvalue() == said(
        NO_DUMPS,
        f"STALL: node 1 sent no diagnosis within 30s: look at its own log in {tmp_path}/logs",
        "STALL: no single rank stands out (0 stack group(s) among 0 rank(s)); read the stacks above",
    )
    assert found["culprit"] == missing.to_json() and exchange.calls[0] == ("share", diagnosis(), 40, 93.46, 1234.5)


def test_no_dumps_is_said_at_the_first_stall_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exchange = peers(tmp_path, shared=Shared([], [], True, REPORT), named=named(BY_STACK))
    b = bench(tmp_path, monkeypatch, exchange=exchange)
    b.supervisor._name_culprit(diagnosis(), 93.46, None)
    b.supervisor._name_culprit(diagnosis(), 93.46, None)
    absent = peers(
        tmp_path,
        shared=Shared([], [], True, REPORT),
        named=named(BY_STACK, AnalyserRun(AnalyserStatus.ABSENT, None, ())),
    )
    b.supervisor.exchange = absent
    b.supervisor._name_culprit(diagnosis(), 93.46, None)
    fine = peers(
        tmp_path, shared=Shared([], [], True, REPORT), named=named(BY_STACK, AnalyserRun(AnalyserStatus.OK, 0, ()))
    )
    b.supervisor.exchange = fine
    b.supervisor._name_culprit(diagnosis(), 93.46, None)
    absent_line = (
        "STALL: no flight recorder here (this torch has no torch.distributed.flight_recorder): culprit from stacks"
    )
    assert b.out.getvalue() == said(NO_DUMPS, NAMED, NAMED, absent_line, NAMED, NAMED)


def test_a_worker_node_answers_each_request_once_and_says_where_its_diagnosis_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trees = diagnosed(monkeypatch)
    stacks = tmp_path / "node1.stacks.txt"
    exchange = peers(tmp_path, node_rank=1, shared=Shared([3], [], True, REPORT))
    b = bench(tmp_path, monkeypatch, exchange=exchange, stacks_path=stacks)
    b.supervisor._answer_request()  # no request yet
    at = time.time()
    assert request_reports(exchange.log_dir, "exp", clock=lambda: at)
    b.clock.now = 1001.9
    b.supervisor._answer_request()  # looked less than PEER_CHECK_S ago
    assert b.out.getvalue() == "" and trees == []
    b.clock.now = 1002.0
    b.supervisor._answer_request()
    shared = f"STALL: this node's diagnosis is in {tmp_path}/logs/node0.stall.json for node 0"
    assert b.out.getvalue() == OPEN + said(ASKED) + summary() + said(shared) + CLOSE
    assert b.supervisor.stall == {
        "requested_at": at,
        "diagnosis": diagnosis().to_json(),
        "stacks_file": str(stacks),
        "flight_recorder": {"asked": [3], "dumps": []},
    }
    assert exchange.calls == [("share", diagnosis(), None, None, at)] and trees == [b.tree]
    assert stacks.read_text() == f"==== pid 4242 ====\n{STACK}\n"
    b.clock.now += 2.0
    b.supervisor._answer_request()  # the same request: answered already
    assert len(exchange.calls) == 1


@pytest.mark.parametrize("written, node_log", [(False, True), (True, False)], ids=["refused", "no-log-folder"])
def test_a_worker_node_whose_diagnosis_could_not_be_shared_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: bool, node_log: bool
) -> None:
    diagnosed(monkeypatch, stacks=False)
    exchange = peers(tmp_path, node_rank=1, shared=Shared([], [], written, REPORT))
    if not node_log:
        exchange = Peers(1, 2, exchange.log_dir, "exp", None, shared=exchange.shared)
    b = bench(tmp_path, monkeypatch, exchange=exchange, stacks_path=tmp_path / "stacks.txt")
    at = time.time()
    request_reports(exchange.log_dir, "exp", clock=lambda: at)
    b.supervisor._answer_request()
    refused = (
        f"STALL: this node's diagnosis could not be written to the log folder {tmp_path}/logs; node 0 will name this "
        "node as silent. Check that the folder is shared and writable."
    )
    assert b.out.getvalue() == OPEN + said(ASKED) + summary(stacks=False) + said(refused) + CLOSE
    assert b.supervisor.stall is not None and b.supervisor.stall["stacks_file"] is None
    assert not (tmp_path / "stacks.txt").exists()  # no stack to write


CAUSE = Text("STALL: culprit rank(s) 3 on node(s) 1", "STALL:问题 rank 3,位于节点 1")


def test_this_node_s_own_end_is_told_to_the_others_and_ends_everything_here_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = bench(tmp_path, monkeypatch)
    end = JobEnd(124, "stalled", CAUSE, 0, "")
    assert b.supervisor.end_job(end) is end
    assert (b.supervisor.job_end, b.out.getvalue(), b.tree.kills, b.supervisor.culprit_line) == (end, "", 1, None)
    b.supervisor.tree = None  # torchrun never started: nothing to kill
    assert b.supervisor.end_job(end) is end


def test_another_node_s_end_stands_and_is_said_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "run"
    hosts = ["host-a", "host-b"]
    first = quiet(Presence(folder, 1, 2, hosts, 600, host="host-b"))
    theirs = first.announce(JobEnd(124, "stalled", CAUSE, 1, "host-b"))
    presence = quiet(Presence(folder, 0, 2, hosts, 600, host="host-a"))
    b = bench(tmp_path, monkeypatch, presence=presence)
    standing = b.supervisor.end_job(JobEnd(75, "node-lost", Text("lost", "丢失"), 0, "host-a"))
    assert standing == theirs and b.supervisor.job_end == theirs and b.tree.kills == 1
    shown = Text(
        "JOB ENDED by node 1 (host-b): STALL: culprit rank(s) 3 on node(s) 1 — this node ends its torchrun and "
        "workers too, with the same exit code 124",
        "任务已由节点 1(host-b)结束:STALL:问题 rank 3,位于节点 1 — 本节点也结束其 torchrun 与 worker,退出码同为 124",
    )
    assert b.out.getvalue() == OPEN + said(shown.en) + CLOSE and b.supervisor.culprit_line == shown


def test_a_lost_node_ended_by_this_node_is_said_as_its_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = bench(tmp_path, monkeypatch, lang=Lang.ZH)
    lost = JobEnd(75, "node-lost", Text("NODE LOST: node 1", "节点丢失:节点 1"), 0, "", (LostNode(1, "b", 99.0, True),))
    b.supervisor.end_job(lost)
    assert b.out.getvalue() == OPEN + f"{LEAD}节点丢失:节点 1\n" + CLOSE and b.supervisor.culprit_line == lost.cause


def node(presence: Presence, name: str) -> None:
    """Another node's beat appears in the run's folder (or moves on)."""
    for old in presence.folder.glob(name.rsplit(".", 2)[0] + ".*"):
        old.unlink()
    (presence.folder / name).touch()


def test_the_run_s_folder_is_read_every_peer_check_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    presence = quiet(Presence(tmp_path / "run", 0, 2, ["host-a", "host-b"], 600))
    looks: list[float] = []
    b = bench(tmp_path, monkeypatch, presence=presence)
    real = presence.look

    def look() -> JobEnd | None:
        looks.append(b.clock.now)
        return real()

    monkeypatch.setattr(presence, "look", look)
    for now in (1000.0, 1001.9, 1002.0, 1003.9, 1004.0):
        b.clock.now = now
        b.supervisor._watch_nodes()
    assert looks == [1000.0, 1002.0, 1004.0] and b.out.getvalue() == "" and b.supervisor.job_end is None


def test_another_node_s_end_read_from_the_folder_ends_this_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    presence = quiet(Presence(folder, 0, 2, ["host-a", "host-b"], 600))
    quiet(Presence(folder, 1, 2, ["host-a", "host-b"], 600)).announce(JobEnd(93, "do-not-requeue", CAUSE, 1, "host-b"))
    b = bench(tmp_path, monkeypatch, presence=presence)
    b.supervisor._watch_nodes()
    assert b.supervisor.job_end is not None and (b.supervisor.job_end.code, b.supervisor.job_end.node) == (93, 1)
    assert b.tree.kills == 1 and "JOB ENDED by node 1 (host-b)" in b.out.getvalue()


def test_a_lost_node_ends_the_job_with_75(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    presence = quiet(Presence(tmp_path / "run", 0, 2, ["host-a", "host-b"], 60, clock=clock))
    clock.now += 61
    b = bench(tmp_path, monkeypatch, presence=presence)
    b.supervisor._watch_nodes()
    end = b.supervisor.job_end
    assert end is not None and (end.code, end.outcome, [n.node for n in end.lost]) == (75, "node-lost", [1])
    assert b.out.getvalue() == OPEN + said(end.cause.en) + CLOSE and end.cause.en.startswith("NODE LOST: node 1")
    assert json.loads((tmp_path / "run" / "end.json").read_text())["exit_code"] == 75 and b.tree.kills == 1


def test_nodes_that_joined_but_share_no_beat_are_named_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    presence = quiet(Presence(tmp_path / "run", 0, 3, ["host-a", "host-b", "host-c"], 60, clock=clock))
    presence.joined = True
    clock.now += 61
    b = bench(tmp_path, monkeypatch, presence=presence)
    b.supervisor._watch_nodes()
    b.clock.now += 2
    b.supervisor._watch_nodes()
    unshared = (
        f"node(s) 1, 2 joined training but never left a beat in {tmp_path}/run: the log folder is not shared between "
        "the nodes (a local disk?), so in-job restarts, the stall diagnosis and a lost node's naming cannot work; put "
        "VLA_ASSETS_ROOT (and the log folder) on the CFS every node mounts"
    )
    assert b.out.getvalue() == said(unshared) and b.supervisor.job_end is None


def test_a_node_running_a_newer_attempt_restarts_this_node_s_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Node 1 runs attempt 1 while this node's attempt 0 runs on (its ranks hung, no error reached them): this node's
    workers are killed so that its agent restarts them; once the attempt is being ended, no second time."""
    presence = quiet(Presence(tmp_path / "run", 0, 2, ["host-a", "host-b"], 600))
    node(presence, "node1.beef.1.7")
    attempts = Attempts(3, 0.0, Progress())
    b = bench(tmp_path, monkeypatch, presence=presence, attempts=attempts)
    b.supervisor._watch_nodes()  # no attempt seen here yet: nothing to compare
    assert b.kills.sent == []
    attempts.observe(frozenset({101, 102}))
    b.clock.now += 2
    b.supervisor._watch_nodes()
    b.clock.now += 2
    b.supervisor._watch_nodes()
    current = attempts.attempts[0]
    assert (current.cause, current.detail) == (
        Cause.PEER_RESTARTED,
        "node 1 started attempt 1 while this node's workers ran on",
    )
    assert b.kills.sent == [(101, signal.SIGKILL), (103, signal.SIGKILL), (102, signal.SIGKILL)]
    assert b.out.getvalue() == said(KILLED) and b.supervisor.job_end is None


def test_a_node_on_the_same_attempt_is_not_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    presence = quiet(Presence(tmp_path / "run", 0, 2, ["host-a", "host-b"], 600))
    node(presence, "node1.beef.1.7")
    attempts = Attempts(3, 0.0, Progress())
    attempts.observe(frozenset({101}))
    attempts.observe(frozenset({102}))  # attempt 1 here too
    b = bench(tmp_path, monkeypatch, presence=presence, attempts=attempts)
    b.supervisor._watch_nodes()
    assert b.kills.sent == [] and attempts.attempts[1].cause is None


def test_the_health_gate_s_verdict_is_read_every_peer_check_s_and_a_fault_ends_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = Text("DO NOT REQUEUE: GPU 3 failed the health gate", "请勿重新排队:GPU 3 未通过健康检查")
    attempts = Attempts(3, 0.0, Progress(), tmp_path / "attempts")
    answers: list[Text | None] = [None, None, fault]
    reads: list[float] = []
    b = bench(tmp_path, monkeypatch, attempts=attempts)

    def node_fault() -> Text | None:
        reads.append(b.clock.now)
        return answers.pop(0)

    monkeypatch.setattr(attempts, "node_fault", node_fault)
    for now in (1000.0, 1001.9, 1002.0, 1003.9):
        b.clock.now = now
        b.supervisor._follow_attempts(frozenset({101}))
    assert reads == [1000.0, 1002.0] and b.supervisor.gave_up is None and b.out.getvalue() == ""
    b.clock.now = 1004.0
    b.supervisor._follow_attempts(frozenset({101}))
    assert b.supervisor.gave_up is Verdict.NODE_FAULT and b.supervisor.verdict_line == fault
    assert b.out.getvalue() == OPEN + said(fault.en) + CLOSE
    assert b.supervisor.job_end == JobEnd(93, "do-not-requeue", fault, 0, "", verdict="node-fault")
    assert json.loads((tmp_path / "attempts" / "gave-up.json").read_text()) == {"verdict": "node-fault", "node_rank": 0}


def test_a_restart_is_announced_once_its_facts_are_in_or_after_10_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 starts 2 s after attempt 0's workers were seen gone; without facts from its rank 0 it is announced
    10 s after it started, as resuming from the start. The run's folder learns of the attempt at once."""
    presence = quiet(Presence(tmp_path / "run", 0, 2, ["host-a", "host-b"], 600))
    b = bench(tmp_path, monkeypatch, presence=presence)
    attempts = Attempts(3, 0.0, Progress(), clock=b.clock)
    watchdog = watch()
    b.supervisor.attempts, b.supervisor.watchdog = attempts, watchdog
    b.supervisor._follow_attempts(frozenset({101}))  # attempt 0: no restart
    assert watchdog.started_at == 0.0 and presence.attempt == 0
    b.clock.now = 1001.0
    b.supervisor._follow_attempts(frozenset())
    b.supervisor._restart_deadline = 1060.0
    b.clock.now = 1003.0
    b.supervisor._follow_attempts(frozenset({102}))
    assert watchdog.started_at == 1003.0 and b.supervisor._restart_deadline is None
    assert presence.attempt == 1 and any(p.name.endswith(".1.1") for p in (tmp_path / "run").iterdir())
    b.clock.now = 1013.0  # 10 s: not yet
    b.supervisor._follow_attempts(frozenset({102}))
    assert b.out.getvalue() == ""
    b.clock.now = 1013.5
    b.supervisor._follow_attempts(frozenset({102}))
    b.supervisor._follow_attempts(frozenset({102}))  # said once
    assert b.out.getvalue() == said(
        "RESTART 1/3: the workers ended (worker-exited); torchrun restarted them on this node 2.0 s after that was "
        "seen, resuming from the start (no complete checkpoint yet)"
    )


def test_a_restart_with_nothing_known_of_the_attempt_before_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = bench(tmp_path, monkeypatch)
    attempts = Attempts(3, 0.0, Progress())
    attempts.attempts = [Attempt(0, 10.0, 0, None), Attempt(1, 12.5, 0, None)]
    b.supervisor.attempts = attempts
    b.supervisor._say_restart(attempts.attempts[1])
    assert b.out.getvalue() == said(
        "RESTART 1/3: the workers ended (?); torchrun restarted them on this node 0.0 s after that was seen, resuming "
        "from the start (no complete checkpoint yet)"
    )


def test_a_new_attempt_after_the_last_allowed_one_ends_the_job_on_every_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = bench(tmp_path, monkeypatch, lang=Lang.ZH)
    attempts = Attempts(1, 0.0, Progress())
    b.supervisor.attempts = attempts
    b.supervisor._follow_attempts(frozenset({101}))
    b.supervisor._follow_attempts(frozenset({102}))
    b.supervisor._follow_attempts(frozenset({103}))  # a third attempt: restarts 1 of 1 are spent
    why = attempts.verdict_text(Verdict.BUDGET_SPENT, 93)
    assert why.zh.startswith("请勿重新排队:1 次任务内重启已用完")
    assert b.out.getvalue() == OPEN + f"{LEAD}{why.zh}\n" + CLOSE
    assert b.supervisor.job_end == JobEnd(93, "do-not-requeue", why, 0, "", verdict="budget-spent")
    assert b.tree.kills == 2  # the job is ended, and torchrun with it


# ---------------------------------------------------------------------------------------------------------------
# The node's output


def test_the_launcher_s_lines_are_masked_and_reach_the_log_even_when_not_utf_8(tmp_path: Path) -> None:
    secret = f"pw-{tmp_path.name}-9"
    masking.remember([secret])
    console = io.StringIO()
    tee = Tee(console)
    assert tee.file is None and tee.dropped == 0 and tee.close_file(0.1)  # nothing to wait for
    with open(tmp_path / "node.log", "wb") as log:
        tee.file = log
        assert tee.write(f"password {secret} \udcff!\n") == len(secret) + 13
        assert tee.close_file(5)
    assert console.getvalue() == "password *** \udcff!\n"
    assert (tmp_path / "node.log").read_bytes() == b"password *** ?!\n" and tee.dropped == 0


def test_training_output_reaches_a_byte_console_and_the_log_as_given_and_a_text_console_decoded(
    tmp_path: Path,
) -> None:
    raw = io.BytesIO()
    tee = Tee(io.TextIOWrapper(raw, encoding="utf-8"))
    with open(tmp_path / "node.log", "wb") as log:
        tee.file = log
        tee.write_bytes(b"\xff step=1\n")
        assert tee.close_file(5)
    assert raw.getvalue() == b"\xff step=1\n" == (tmp_path / "node.log").read_bytes()
    text = io.StringIO()
    Tee(text).write_bytes(b"\xff step=1\n")
    assert text.getvalue() == "\ufffd step=1\n"


class HeldLog(io.BytesIO):
    """A node log on a CFS that stops answering at the first write: `entered` once the writer is held there."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.answer = threading.Event(), threading.Event()

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.entered.set()
        self.answer.wait(30)
        return super().write(data)


class SmallTee(Tee):
    QUEUE_CHUNKS = 2


def test_what_a_held_log_cannot_take_is_counted_in_bytes() -> None:
    console = io.StringIO()
    tee = SmallTee(console)
    log = HeldLog()
    tee.file = log
    tee.write_bytes(b"a" * 10)  # taken by the writer, which waits on the storage
    assert log.entered.wait(10)
    for size, letter in ((20, b"b"), (30, b"c"), (40, b"d"), (50, b"e")):
        tee.write_bytes(letter * size)  # two fit in the queue, two do not
    assert tee.dropped == 90 and console.getvalue() == "a" * 10 + "b" * 20 + "c" * 30 + "d" * 40 + "e" * 50
    assert not tee.close_file(0.05)  # the storage still does not answer: the launcher goes on without it
    log.answer.set()


class RecordedThread(threading.Thread):
    """A real thread that remembers whether it was a daemon and how long it was waited for."""

    made: ClassVar[list[RecordedThread]] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.waited: list[float | None] = []
        RecordedThread.made.append(self)

    def join(self, timeout: float | None = None) -> None:
        self.waited.append(timeout)
        super().join(timeout)


def test_the_relay_is_a_daemon_waited_for_at_most_10_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker outside torchrun's tree can keep the output pipe open: the launcher must end all the same."""
    RecordedThread.made = []
    monkeypatch.setattr(supervising.threading, "Thread", RecordedThread)
    supervisor, _ = launcher(tmp_path, "exit 0")
    assert supervisor.run() == 0
    (relay,) = [t for t in RecordedThread.made if t.waited]
    assert relay.daemon and relay.waited == [10]


class StuckQueue:
    """The node log's queue when its storage stopped answering: full, and put waits for nobody."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def put(self, item: object, block: bool = True, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)
        raise supervising.queue.Full


def test_closing_a_stuck_log_waits_only_the_given_time(monkeypatch: pytest.MonkeyPatch) -> None:
    tee = Tee(io.StringIO())
    writer = RecordedThread(target=lambda: None)
    writer.start()
    writer_join = writer.join
    stuck = StuckQueue()
    monkeypatch.setattr(tee, "_queue", stuck)
    monkeypatch.setattr(tee, "_writer", writer)
    assert tee.close_file(0.25) and stuck.timeouts == [0.25] and writer.waited == [0.25]
    writer_join()
