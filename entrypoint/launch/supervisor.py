"""Supervising torchrun: relay its output to the console and the node log, forward signals, enforce the grace
period, act on a stall, follow torchrun's in-job restarts (`restarts.py`). torchrun runs in its own session so that
after a signal and the grace period the whole process tree can be killed; the exit code is training's own, 128+N
when the job was ended by signal N, 124 after a stall with no restart left, 93 when restarting cannot help.

Stalls: node 0's watchdog detects them (a worker node is given none: its output shows no progress); node 0 asks
the other nodes for their diagnosis and names the culprit (`stall_exchange.py`), then ends its workers when a
restart is left (every node's agent then restarts: the peers' collectives fail, or they see node 0's newer
attempt) or ends with 124. A worker node answers node 0's request on its next poll of the shared log folder.

One end for every node (`presence.py`): however a node ends the job (124, 93, a lost node's 75, training's own
failure), it says so in this run's folder before it ends anything, and every other node ends its torchrun and
workers with the same exit code and cause on its next look (every `PEER_CHECK_S`).

Secrets: the launcher's own lines are masked as text (`core.masking.mask_text`); training's output is relayed byte
for byte except that the secret values this run hands to torchrun (secret flags' values, secret-named variables,
URL passwords) are replaced by `***` wherever training echoes them (a chunk's tail that could begin one is held
back until the next chunk).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import BinaryIO, Protocol, TextIO

from entrypoint.core.errors import ExitCode
from entrypoint.core.masking import StreamMask, mask_text, remember, secrets_in
from entrypoint.core.messages import Lang, Text
from entrypoint.core.settings import StallAction
from entrypoint.launch.culprit import GATHER_WAIT_S, analyser_line, culprit_lines, report_path, requested_since
from entrypoint.launch.failure import OutputTail
from entrypoint.launch.messages import MESSAGES as M
from entrypoint.launch.messages import line, say
from entrypoint.launch.presence import JobEnd, Presence
from entrypoint.launch.processes import ProcessTree
from entrypoint.launch.restarts import Attempt, Attempts, Cause, Verdict
from entrypoint.launch.stall_exchange import Exchange
from entrypoint.launch.watchdog import Diagnosis, DiagnosisMethod, Watchdog, diagnose, summary_lines, write_stacks

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
BANNER = "!" * 100
PEER_CHECK_S = 2.0  # how often this run's folder and node 0's stall request are read
RESTART_WAIT_S = 60.0  # after a stall ended the workers: a new attempt must start by then, or the node ends (124)


class StartFailed(Exception):
    """torchrun could not be started at all (`error` says why): nothing ran."""

    def __init__(self, program: str, error: OSError) -> None:
        super().__init__(f"{program}: {error.strerror or error}")
        self.program, self.error = program, error


class Reader(Protocol):
    """Something fed the training output as it arrives."""

    def feed(self, chunk: str) -> None: ...


class Tee(io.TextIOBase, TextIO):  # TextIO: anything that prints may be given it
    """Text written here (the launcher's own lines, masked) goes to the console and, once opened, to the node's log
    file; `write_bytes` relays training's output as given.

    The log file lives on CFS, which may stop answering: it is written by a thread of its own through a bounded
    queue, so that neither the console nor training (whose output the relay must keep draining) ever waits for
    the storage. While the file does not keep up, what does not fit in the queue is left out of the file and
    counted (`dropped`); `close` waits for the file at most `close_wait_s`."""

    QUEUE_CHUNKS = 4096  # training's output in 64 KiB reads: up to 256 MiB waiting for a slow file

    def __init__(self, console: TextIO) -> None:
        self.console: TextIO | None = console
        self._file: BinaryIO | None = None
        self._queue: queue.Queue[bytes | None] = queue.Queue(self.QUEUE_CHUNKS)
        self._writer: threading.Thread | None = None
        self.dropped = 0

    @property
    def file(self) -> BinaryIO | None:
        return self._file

    @file.setter
    def file(self, handle: BinaryIO | None) -> None:
        """Start writing the node log to `handle` (from its own thread)."""
        self._file = handle
        if handle is not None and self._writer is None:
            self._writer = threading.Thread(target=self._write_file, name="node-log", daemon=True)
            self._writer.start()

    def write(self, text: str) -> int:
        shown = mask_text(text)
        self._to_console(lambda console: console.write(shown))
        self._to_file(shown.encode("utf-8", "replace"))
        return len(text)

    def write_bytes(self, data: bytes) -> None:
        def relay(console: TextIO) -> None:
            buffer = getattr(console, "buffer", None)
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                console.write(data.decode("utf-8", "replace"))

        self._to_console(relay)
        self._to_file(data)

    def close_file(self, wait_s: float) -> bool:
        """Let the writer finish what is queued, within `wait_s`; False when the file did not keep up (its storage
        is not answering): the thread is then left behind."""
        if self._writer is None:
            return True
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=wait_s)
        self._writer.join(timeout=wait_s)
        return not self._writer.is_alive()

    def _to_console(self, write: Callable[[TextIO], object]) -> None:
        """A console that is gone (closed pipe, full disk behind a redirect) is dropped: training and the node log
        go on, since the job must not die because nobody is reading its output."""
        if self.console is None:
            return
        try:
            write(self.console)
            self.console.flush()
        except (OSError, ValueError):
            self.console = None

    def _to_file(self, data: bytes) -> None:
        if self._file is None:
            return
        try:
            self._queue.put_nowait(data)
        except queue.Full:
            self.dropped += len(data)

    def _write_file(self) -> None:
        """The node log's own thread. A file that can no longer be written (CFS full or gone) is dropped the same
        way as a console; the console and the start-up record remain."""
        while (data := self._queue.get()) is not None:
            handle = self._file
            if handle is None:
                continue
            try:
                handle.write(data)
                handle.flush()
            except (OSError, ValueError):
                self._file = None


class Supervisor:
    """Runs torchrun, relays output to the Tee and to `readers`, forwards signals, enforces the grace period, acts
    on a stall."""

    def __init__(
        self,
        command: list[str],
        cwd: str,
        env: Mapping[str, str],
        out: Tee,
        readers: list[Reader],
        grace: int,
        watchdog: Watchdog | None = None,
        tail: OutputTail | None = None,
        stall_action: StallAction = StallAction.FAIL,
        stacks_path: Path | None = None,
        lang: Lang | str = Lang.BOTH,
        attempts: Attempts | None = None,
        exchange: Exchange | None = None,
        presence: Presence | None = None,
    ) -> None:
        self.command, self.cwd, self.env = command, cwd, dict(env)
        self.out, self.readers, self.grace, self.lang = out, readers, grace, lang
        self.watchdog, self.tail, self.stall_action, self.stacks_path = watchdog, tail, stall_action, stacks_path
        self.stall: dict[str, object] | None = None
        self.stall_ended: bool = False  # the stall ended the job (no restart left)
        self.attempts = attempts
        self.gave_up: Verdict | None = None  # restarting cannot help: the job ends with DO_NOT_REQUEUE
        self._announce: Attempt | None = None  # a restart whose line waits for its attempt's facts
        self._fault_check_at = 0.0
        self.exchange = exchange
        self.presence = presence
        self.job_end: JobEnd | None = None  # the end every node of this run ends with, once one node ended the job
        self.ended_at: float | None = None  # when torchrun ended (monotonic)
        self.verdict_line: Text | None = None  # why this node gave up (DO_NOT_REQUEUE)
        self._presence_check_at = 0.0
        self._workers: frozenset[int] = frozenset()
        self._said_unshared = False
        self.culprit_line: Text | None = None  # the latest stall's culprit line, repeated as the node's last line
        # Set by `run`: the cause when the CFS the job writes to is not answering now (`storage_watch.py`).
        self.storage_cause: Callable[[], Text | None] | None = None
        self._said_no_recorder = False
        self._started_epoch = time.time()
        self._request_check_at = 0.0
        self._request_seen: float | None = None
        self._restart_deadline: float | None = None  # a stall ended the workers: the new attempt must start by then
        self.signalled: int | None = None
        self.kill_deadline: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.tree: ProcessTree | None = None
        if attempts is not None:
            self.readers = [*readers, attempts]
        remember(secrets_in(command, env))  # from here on masked in every line, log and record of this process
        self.mask = StreamMask()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """Forward a stop to torchrun; one that comes while torchrun is being started is kept and forwarded as soon
        as it runs (`run`)."""
        if self.proc is not None and self.proc.poll() is not None:
            return
        if self.signalled is None:
            self.signalled = signum
            self.kill_deadline = time.monotonic() + self.grace
            say(self.out, self.lang, "signal-received", signal=signal.Signals(signum).name, grace=self.grace)
        if self.proc is not None:
            self.proc.send_signal(signum)

    def _relay(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            data = self.mask.feed(chunk) if chunk else self.mask.flush()
            if data:
                self.out.write_bytes(data)
                text = data.decode("utf-8", "replace")
                for reader in self.readers:
                    reader.feed(text)
            if not chunk:
                return

    def run(self) -> int:
        """Supervise torchrun to its end; its exit code. Raises `StartFailed` when it cannot be started."""
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED_SIGNALS}
        try:
            try:
                self.proc = subprocess.Popen(
                    self.command,
                    cwd=self.cwd,
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as error:  # not executable, a bad #! line, a vanished cwd, an argv too long
                raise StartFailed(self.command[0], error) from None
            if self.signalled is not None:  # the platform asked to stop while torchrun was being started
                self.proc.send_signal(self.signalled)
            self.tree = ProcessTree(self.proc.pid)
            reader = threading.Thread(target=self._relay, name="relay", daemon=True)
            reader.start()
            while True:
                try:
                    code = self.proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    current = self.tree.refresh()
                    workers = frozenset(p.pid for p in current if p.ppid == self.tree.root)
                    if self.presence is not None and self._workers - workers:  # a failure: lost nodes show sooner
                        self.presence.failed_at = time.monotonic()
                    if self.presence is not None and workers:  # workers start once every node joined torchrun
                        self.presence.joined = True
                    self._workers = workers
                    if self.attempts is not None and self.gave_up is None:
                        self._follow_attempts(workers)
                    if self.exchange is not None and self.exchange.node_rank != 0:
                        self._answer_request()
                    if self.presence is not None and self.job_end is None:
                        self._watch_nodes()
                    stalled = self._check_stall()
                    if stalled is not None:
                        self._on_stall(*stalled)
                    if self._restart_deadline is not None and time.monotonic() > self._restart_deadline:
                        self._restart_missing()
                    if self.kill_deadline is not None and time.monotonic() > self.kill_deadline:
                        killed = self.tree.kill()
                        say(self.out, self.lang, "grace-over", count=len(killed))
                        self.kill_deadline = None
            self.ended_at = time.monotonic()
            leftovers = self.tree.kill()  # workers that outlived torchrun must not hold GPUs or the output pipe
            if leftovers and self.signalled is None:
                say(self.out, self.lang, "leftovers-killed", count=len(leftovers))
            reader.join(timeout=10)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.signalled is not None:
            return 128 + self.signalled
        if self.job_end is not None:
            return self.job_end.code
        if self.stall_ended:
            return ExitCode.STALLED
        if self.gave_up is None and code != 0 and self.attempts is not None:
            verdict = self.attempts.torchrun_failed(time.monotonic())
            if verdict is not None:  # `run` settles how the job ends first (a node may have been lost)
                self._give_up(verdict, tell=False)
        if self.gave_up is not None:
            return ExitCode.DO_NOT_REQUEUE
        return 128 - code if code < 0 else code

    def _follow_attempts(self, workers: frozenset[int]) -> None:
        """A new attempt of the worker group: judge the one that ended, then announce the restart (once its
        workers have recorded it) or end the job when another attempt cannot help."""
        assert self.attempts is not None and self.tree is not None
        fault = None
        if time.monotonic() >= self._fault_check_at:  # the health gate's verdicts, read at most every PEER_CHECK_S
            self._fault_check_at = time.monotonic() + PEER_CHECK_S
            fault = self.attempts.node_fault()
        if fault is not None:  # the health gate found this node faulty before a restart: restarts here cannot help
            self._give_up(Verdict.NODE_FAULT, fault)
            return
        started = self.attempts.observe(workers)
        if started is not None and started.number > 0:
            self._restart_deadline = None
            if self.watchdog is not None:
                self.watchdog.new_attempt(started.started_at)  # the start-up allowance again, for this attempt
            verdict = self.attempts.verdict()
            if verdict is not Verdict.RETRY:
                self._give_up(verdict)
                self.tree.kill()
                return
            self._announce = started
            if self.presence is not None:
                self.presence.attempt = started.number
                self.presence.beat()  # the peers learn of the new attempt at once
        pending = self._announce
        if pending is not None and (
            self.attempts.read_facts(pending) is not None or time.monotonic() - pending.started_at > 10
        ):
            self._announce = None
            self._say_restart(pending)

    def _say_restart(self, started: Attempt) -> None:
        assert self.attempts is not None
        ended = self.attempts.attempts[started.number - 1]
        step = self.attempts.resumed_step(started)
        detected = ended.detected_at if ended.detected_at is not None else started.started_at
        say(
            self.out,
            self.lang,
            "restart",
            n=started.number,
            max=self.attempts.max_restarts,
            cause=ended.cause.value if ended.cause else "?",
            delay=f"{started.started_at - detected:.1f}",
            resume=M("restart-resume-step", step=step) if step is not None else M("restart-resume-fresh"),
        )

    def _give_up(self, verdict: Verdict, why: Text | None = None, tell: bool = True) -> None:
        """End the job with DO_NOT_REQUEUE; say why (`why`, else this node's own verdict), note it in the attempts
        folder and (`tell`) end the job on every node."""
        assert self.attempts is not None
        self.gave_up = verdict
        why = why or self.attempts.verdict_text(verdict, int(ExitCode.DO_NOT_REQUEUE))
        self.attempts.record_gave_up(verdict)
        self.out.write(f"\n{BANNER}\n")
        line(self.out, self.lang, why)
        self.out.write(BANNER + "\n")
        self.verdict_line = why
        if tell:
            code = int(ExitCode.DO_NOT_REQUEUE)
            self.end_job(JobEnd(code, "do-not-requeue", why, self._node, self._host, verdict=verdict.value))

    @property
    def _node(self) -> int:
        return self.presence.node_rank if self.presence is not None else 0

    @property
    def _host(self) -> str:
        return self.presence.host if self.presence is not None else ""

    def _watch_nodes(self) -> None:
        """Every `PEER_CHECK_S`, one look at this run's folder (`presence.py`): another node ended the job (this
        node ends the same way), a node is lost (this node ends the job), or a node runs a newer attempt while this
        node's workers run on (a rank of theirs hung, so no error reached them): this node restarts them too."""
        assert self.presence is not None
        now = time.monotonic()
        if now < self._presence_check_at:
            return
        self._presence_check_at = now + PEER_CHECK_S
        end = self.presence.look()
        if end is not None:
            self.end_job(end)
            return
        lost = self.presence.lost()
        if lost:
            self.end_job(self.presence.lost_end(lost))
            return
        unshared = self.presence.unshared()
        if unshared and not self._said_unshared:
            self._said_unshared = True
            nodes = ", ".join(map(str, unshared))
            say(self.out, self.lang, "presence-unshared", nodes=nodes, folder=str(self.presence.folder))
        attempt = self.attempts.current if self.attempts is not None else None
        ahead = self.presence.ahead(attempt.number) if attempt is not None and attempt.cause is None else None
        if ahead is not None and self.attempts is not None:
            node, number = ahead
            self.attempts.stalled(M("restart-peer-ahead", node=node, attempt=number).en, Cause.PEER_RESTARTED)
            self._end_workers(abort=False)

    def end_job(self, end: JobEnd) -> JobEnd:
        """End the job with `end` unless a node already ended it (then with that node's end): tell the other nodes
        (before anything here is killed, so that they learn it from this node first), say it (another node's end,
        or a lost node, in one line, also this node's last), and end torchrun and every worker here (a rank asleep
        outside any collective included). Returns the end that stands."""
        standing = self.presence.announce(end) if self.presence is not None else end
        self.job_end = standing
        if standing.node != self._node or standing.lost:
            shown = standing.cause
            if standing.node != self._node:
                fields = {"node": standing.node, "host": standing.host, "code": standing.code}
                shown = M("job-ended-by", cause=standing.cause, **fields)
            self.out.write(f"\n{BANNER}\n")
            line(self.out, self.lang, shown)
            self.out.write(BANNER + "\n")
            self.culprit_line = shown
        if self.tree is not None:
            self.tree.kill()
        return standing

    def _check_stall(self) -> tuple[float, float] | None:
        """The watchdog's verdict (node 0 only); none while the current attempt's workers are being ended."""
        if self.watchdog is None:
            return None
        attempt = self.attempts.current if self.attempts is not None else None
        if attempt is not None and attempt.cause is not None:
            return None
        return self.watchdog.check()

    def _diagnose(self) -> Diagnosis:
        """Every local process's state and stack, printed and written beside the log; nothing is stopped."""
        assert self.tree is not None
        diagnosis = diagnose(self.tree)
        for text in summary_lines(diagnosis):
            line(self.out, self.lang, text)
        for pid, stack in diagnosis.stacks.items():
            say(self.out, self.lang, "stall-stack", pid=pid)
            self.out.write(f"{stack}\n")
        if self.stacks_path is not None and diagnosis.stacks:
            write_stacks(diagnosis, self.stacks_path)
        return diagnosis

    def _answer_request(self) -> None:
        """A worker node: when node 0 has asked for every node's diagnosis since the last answer, diagnose, dump
        and write this node's report (training goes on; node 0 decides)."""
        assert self.exchange is not None
        now = time.monotonic()
        if now < self._request_check_at:
            return
        self._request_check_at = now + PEER_CHECK_S
        exchange = self.exchange
        at = requested_since(exchange.log_dir, exchange.exp_name, self._started_epoch)
        if at is None or at == self._request_seen:
            return
        self._request_seen = at
        self.out.write(f"\n{BANNER}\n")
        say(self.out, self.lang, "stall-requested")
        diagnosis = self._diagnose()
        shared = exchange.share(diagnosis, None, None, at)
        if shared.written and exchange.node_log is not None:
            say(self.out, self.lang, "stall-shared", path=str(report_path(exchange.node_log)))
        else:
            say(self.out, self.lang, "stall-not-shared", folder=str(exchange.log_dir))
        self.out.write(BANNER + "\n")
        self.stall = {
            "requested_at": at,
            "diagnosis": diagnosis.to_json(),
            "stacks_file": str(self.stacks_path) if self.stacks_path and diagnosis.stacks else None,
            "flight_recorder": {"asked": shared.asked, "dumps": shared.dumped},
        }

    def _name_culprit(self, diagnosis: Diagnosis, silent: float, request: float | None) -> dict[str, object]:
        """Node 0: share its own diagnosis, read every node's, name the culprit; the record's additions."""
        assert self.exchange is not None
        last_step = self.watchdog.progress.last_step if self.watchdog is not None else None
        shared = self.exchange.share(diagnosis, last_step, silent, request)
        verdict = self.exchange.verdict(shared.report, request)
        if self.presence is not None and verdict.culprit.missing_nodes:  # no diagnosis, and no beat either: lost
            self.presence.look()
            quiet = {n: self.presence.silent_for(n) for n in verdict.culprit.missing_nodes}
            lost = {n: seconds for n, seconds in quiet.items() if seconds >= GATHER_WAIT_S}
            verdict = dataclasses.replace(verdict, culprit=dataclasses.replace(verdict.culprit, silent_nodes=lost))
        folder = str(verdict.folder or self.exchange.log_dir)
        note = analyser_line(verdict.analyser, folder)
        if note is not None and (verdict.analyser is not None or not self._said_no_recorder):
            line(self.out, self.lang, note)
        self._said_no_recorder = self._said_no_recorder or verdict.analyser is None
        lines = culprit_lines(verdict.culprit, GATHER_WAIT_S, str(self.exchange.log_dir))
        for text in lines:
            line(self.out, self.lang, text)
        self.culprit_line = lines[-1]
        return {
            "culprit": verdict.culprit.to_json(),
            "flight_recorder": {"asked": shared.asked, **verdict.flight_recorder_json()},
        }

    def _on_stall(self, silent: float, limit: float) -> None:
        """Warn loudly, ask the other nodes for their diagnosis, diagnose without stopping anything, name the
        culprit; then (action fail) restart the workers while restarts are left, else end the job."""
        assert self.tree is not None and self.proc is not None
        self.out.write(f"\n{BANNER}\n")
        say(self.out, self.lang, "stall", silent=f"{silent:.0f}", limit=f"{limit:.0f}")
        for output in list(self.tail.lines)[-20:] if self.tail else []:
            self.out.write(f"  | {output}\n")
        storage = self.storage_cause() if self.storage_cause is not None else None
        if storage is not None:  # the ranks wait for the storage: no rank to blame, and no restart could save
            line(self.out, self.lang, storage)
            self.culprit_line = storage
            self.stall = {"silent_s": round(silent, 1), "limit_s": round(limit, 1), "storage": storage.en}
            if self.stall_action is StallAction.FAIL:
                self._end_stalled(tell=False)  # the run's folder may be on that storage: the peers find this node lost
            return
        request = self.exchange.ask_others() if self.exchange is not None else None
        diagnosis = self._diagnose()
        found = self._name_culprit(diagnosis, silent, request) if self.exchange is not None else {}
        if self.stall_action is not StallAction.FAIL:
            self.stall = self._stall_record(silent, limit, diagnosis) | found
            say(self.out, self.lang, "stall-warn-only")
            self.out.write(BANNER + "\n")
            return
        workers = [p for p in self.tree.refresh() if p.ppid == self.tree.root]
        if self.attempts is not None and self.attempts.restarts_left > 0 and workers:
            culprit = found.get("culprit")
            nodes = culprit.get("nodes", []) if isinstance(culprit, dict) else []
            self._restart_after_stall(silent, limit, diagnosis, tuple(n for n in nodes if isinstance(n, int)))
            self.stall = (self.stall or {}) | found
            return
        if not diagnosis.stacks:
            # No py-spy: faulthandler (PYTHONFAULTHANDLER=1) prints every thread's stack on SIGABRT; the job ends
            # anyway.
            ranks = [proc for proc in self.tree.alive() if proc.ppid == self.tree.root]
            for proc in ranks:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc.pid, signal.SIGABRT)
            if ranks:  # their stacks reach the output as they die
                diagnosis.method = DiagnosisMethod.FAULTHANDLER
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=10)
        self.stall = self._stall_record(silent, limit, diagnosis) | found
        self._end_stalled()

    def _end_stalled(self, tell: bool = True) -> None:
        """End the node with 124 after a stall, and (`tell`) the job on every node with it."""
        assert self.tree is not None
        self.stall_ended = True
        code = int(ExitCode.STALLED)
        say(self.out, self.lang, "stall-ending", code=code)
        self.out.write(BANNER + "\n")
        silent = self.stall.get("silent_s", "?") if self.stall else "?"
        cause = self.culprit_line or M("stalled-root-cause", silent=silent)
        if tell:
            self.end_job(JobEnd(code, "stalled", cause, self._node, self._host))
        else:
            self.tree.kill()

    def _restart_missing(self) -> None:
        """A stall ended the workers but torchrun started no new attempt in time: end the node as without restarts."""
        self._restart_deadline = None
        self.out.write(f"\n{BANNER}\n")
        say(self.out, self.lang, "stall-restart-missing", seconds=f"{RESTART_WAIT_S:.0f}")
        self._end_stalled()

    def _restart_after_stall(
        self, silent: float, limit: float, diagnosis: Diagnosis, culprit_nodes: tuple[int, ...] = ()
    ) -> None:
        """Restarts are left: end this node's workers (never torchrun), so that its agent restarts the group; the
        peers' collectives then fail and their agents restart too. Without py-spy stacks, SIGABRT makes
        faulthandler print every rank's stack first."""
        assert self.attempts is not None and self.tree is not None
        self.stall = self._stall_record(silent, limit, diagnosis)
        self.attempts.stalled(f"{silent:.0f} s without progress (limit {limit:.0f} s)", culprit_nodes=culprit_nodes)
        say(self.out, self.lang, "stall-restarting", left=self.attempts.restarts_left)
        self.out.write(BANNER + "\n")
        self._end_workers(abort=not diagnosis.stacks)
        self._restart_deadline = time.monotonic() + RESTART_WAIT_S

    def _end_workers(self, abort: bool) -> None:
        """SIGKILL every process below torchrun (or SIGABRT its workers, for faulthandler's stacks): its agent sees
        the group fail and restarts it. Said first, since torchrun reports them as failed (`exitcode: -9`)."""
        assert self.tree is not None
        sent = signal.SIGABRT if abort else signal.SIGKILL
        say(self.out, self.lang, "workers-ended", signal=sent.name, code=-int(sent))
        for proc in self.tree.refresh():
            if abort and proc.ppid != self.tree.root:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGABRT if abort else signal.SIGKILL)

    def _stall_record(self, silent: float, limit: float, diagnosis: Diagnosis) -> dict[str, object]:
        """The start-up record's `stall`."""
        return {
            "silent_s": round(silent, 1),
            "limit_s": round(limit, 1),
            "action": self.stall_action.value,
            "diagnosis": diagnosis.to_json(),
            "stacks_file": str(self.stacks_path) if self.stacks_path and diagnosis.stacks else None,
        }
