"""While training runs: keep probing the CFS mounts the job writes to, and name a stalled one as the cause.

A checkpoint save or a log write that waits on a CFS that stopped answering looks, from the outside, like a hung
rank: no progress line, no error. `StorageWatch` probes the mounts holding the checkpoint and log folders (a child
each, `inspect.storage_probe`) every `interval` seconds. When one does not answer it says so at once on the
console ("CFS not answering at …"), and again when it answers; once it has not answered for `give_up_after`
seconds the job can neither save nor log, so `on_give_up` ends it with the cause named.

The probes are started by a watcher process of their own (`python -m entrypoint.launch.storage_watch`), started
while the storage still answers, not by the launcher: a child forked from the launcher inherits the node log's
file on CFS, and closing it (at exec) asks the storage to flush, which waits as long as the storage does. The
watcher holds no file on CFS; it reports one JSON line per round, which a thread of the launcher reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from entrypoint.core.messages import Catalogue, Lang, Text
from entrypoint.inspect.mounts import Mount
from entrypoint.inspect.storage_probe import Answer, probe
from entrypoint.launch.messages import line

M = Catalogue(
    "storage-watch",
    {
        "not-answering": (
            "CFS not answering at {point} ({fs} from {source}): checkpoint saves and node-log writes there wait for "
            "it; any stall from now on is the storage's, not a rank's",
            "CFS 无响应:{point}({fs},来源 {source});保存检查点与写节点日志都在等待它;此后的停滞源于存储,而非某个 rank",
        ),
        "answers-again": (
            "CFS at {point} answers again after {seconds:.0f} s",
            "{point} 处的 CFS 在 {seconds:.0f} 秒后恢复应答",
        ),
        "giving-up": (
            "CFS not answering at {point} for {seconds:.0f} s (limit {limit:.0f} s): ending the job, since it can "
            "neither save a checkpoint nor write its log; check the CFS instance in the TI-ONE console and submit "
            "the job again (it resumes from the newest complete checkpoint)",
            "{point} 处的 CFS 已 {seconds:.0f} 秒无响应(上限 {limit:.0f} 秒):任务既无法保存检查点也无法写日志,"
            "现结束任务;请在 TI-ONE 控制台检查 CFS 实例后重新提交(将从最新的完整检查点续训)",
        ),
        "root-cause": (
            "CFS not answering at {point} for {seconds:.0f} s",
            "{point} 处的 CFS {seconds:.0f} 秒无响应",
        ),
    },
)


class StorageWatch:
    """Probes `mounts` every `interval` seconds (each probe bounded by `timeout`); see the module's docstring."""

    def __init__(
        self,
        mounts: Sequence[Mount],
        interval: float,
        timeout: float,
        give_up_after: float | None,
        out: TextIO,
        lang: Lang | str,
        on_give_up: Callable[[Answer, float], None],
    ) -> None:
        self.mounts, self.interval, self.timeout, self.give_up_after = tuple(mounts), interval, timeout, give_up_after
        self.out, self.lang, self.on_give_up = out, lang, on_give_up
        self.stalled: Answer | None = None  # the mount not answering now (the longest-silent one), if any
        self.stalled_since: float | None = None  # time.monotonic() of its first unanswered probe
        self._silent: dict[str, tuple[Answer, float]] = {}  # each mount not answering: its last answer, since when
        self._watcher: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the watcher process and the thread that reads it (nothing when no CFS mount is written to)."""
        if not self.mounts:
            return
        spec = json.dumps([[m.point, m.fs_type, m.source, m.options] for m in self.mounts])
        self._watcher = subprocess.Popen(
            [sys.executable, "-m", __name__, str(self.interval), str(self.timeout), spec],
            stdin=subprocess.PIPE,  # closed by `stop` (or by this process's end): the watcher then ends
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        threading.Thread(target=self._follow, args=(self._watcher,), name="storage-watch", daemon=True).start()

    def stop(self) -> None:
        if self._watcher is not None:
            with contextlib.suppress(OSError):
                self._watcher.kill()

    def cause(self) -> Text | None:
        """The stall's cause when a mount is not answering now."""
        if self.stalled is None or self.stalled_since is None:
            return None
        seconds = time.monotonic() - self.stalled_since
        return M("root-cause", point=self.stalled.mount.point, seconds=seconds)

    def _follow(self, watcher: subprocess.Popen[bytes]) -> None:
        assert watcher.stdout is not None
        by_point = {m.point: m for m in self.mounts}
        for raw in watcher.stdout:
            try:
                rows = json.loads(raw)
                unanswered = [
                    Answer(by_point[r["point"]], float(r["seconds"]), str(r["stage"]), r["error"]) for r in rows
                ]
            except (ValueError, KeyError, TypeError):
                continue
            if self._round(unanswered, time.monotonic()):
                return

    def _round(self, unanswered: list[Answer], now: float) -> bool:
        """One round's answers; True when the job is given up. Each mount is followed on its own (said once when it
        stops answering, once when it answers again); the bound and the cause are the longest-silent one's."""
        current = {answer.mount.point: answer for answer in unanswered}
        for point, (_, since) in list(self._silent.items()):
            if point not in current:
                line(self.out, self.lang, M("answers-again", point=point, seconds=now - since))
                del self._silent[point]
        for point, answer in current.items():
            if point in self._silent:
                self._silent[point] = (answer, self._silent[point][1])
                continue
            self._silent[point] = (answer, now - answer.seconds)
            mount = answer.mount
            line(
                self.out, self.lang, M("not-answering", point=mount.point, fs=mount.fs_type, source=mount.source or "?")
            )
        if not self._silent:
            self.stalled, self.stalled_since = None, None
            return False
        answer, since = min(self._silent.values(), key=lambda silent: silent[1])
        self.stalled, self.stalled_since = answer, since
        seconds = now - since
        if self.give_up_after is None or seconds < self.give_up_after:
            return False
        limit = self.give_up_after
        line(self.out, self.lang, M("giving-up", point=answer.mount.point, seconds=seconds, limit=limit))
        self.on_give_up(answer, seconds)
        return True


def _watch(interval: float, timeout: float, mounts: list[Mount]) -> None:
    """The watcher process: every `interval` seconds probe `mounts` and print the unanswered ones as one JSON line;
    end when the launcher closes stdin or is gone."""
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], interval)
        if ready and not os.read(sys.stdin.fileno(), 1):
            return
        unanswered = [a.to_json() for a in probe(mounts, timeout) if not a.answered]
        try:
            sys.stdout.write(json.dumps(unanswered) + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            return


if __name__ == "__main__":
    _interval, _timeout, _spec = float(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
    _watch(_interval, _timeout, [Mount(*fields) for fields in _spec])
