"""Shared storage that stops answering must not hang the launcher: each network mount is probed in a child first.

A stalled NFS or FUSE mount (CFS) blocks the process that touches it, often in a wait no signal ends; only a child
process can be abandoned. So before the launcher touches the assets root, the checkpoint folder or the log folder,
`StorageProbe.require` starts one short child per network mount holding (or mounted below) those paths, which
stats the mount point and lists a few entries, and waits for all of them within the bound
(`VLA_STORAGE_TIMEOUT`). A mount that does not answer in time, or answers with an error (a dead FUSE daemon:
"Transport endpoint is not connected"), raises `StorageNotAnswering` (exit 3) naming the mount point, its source
and options from the mount table, and how long the probe waited; the child is killed and left behind. Answers
slower than `SLOW_S` are a warning with the figure. Local file systems (the container's own disk, a tmpfs) are
never probed: they cannot stall that way, and probing them would only cost start-up time.

Each mount is probed once per process (`StorageProbe` remembers the answers), so the price is one child per CFS
mount per command, ~20 ms, in parallel.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from entrypoint.core.errors import PreflightFailed
from entrypoint.core.findings import Finding, passed, warned
from entrypoint.core.messages import Catalogue
from entrypoint.inspect.mounts import Mount, holding_mount

if TYPE_CHECKING:
    import subprocess

SLOW_S = 1.0  # an answer slower than this is worth a warning: every later file operation pays the same
ENTRIES_READ = 8  # the probe lists this many entries of the mount point: one real round trip, never a whole folder
# The child: stat the mount point, then read a few entries of it; each step printed as it completes.
_CHILD = (
    "import os,sys\n"
    "p=sys.argv[1]\n"
    "os.stat(p);print('stat',flush=True)\n"
    "with os.scandir(p) as it:\n"
    f"  [e.name for _,e in zip(range({ENTRIES_READ}),it)]\n"
    "print('list',flush=True)\n"
)

M = Catalogue(
    "storage-probe",
    {
        "not-answering": (
            "the shared storage is not answering: {fs} at {point} (from {source}; options {options}) gave no answer "
            "within {waited:.1f} s ({stage}); nothing under it was touched",
            "共享存储无响应:挂载在 {point} 的 {fs}(来源 {source};选项 {options})在 {waited:.1f} 秒内没有应答"
            "({stage});未访问其下任何文件",
        ),
        "broken": (
            "the shared storage fails: {fs} at {point} (from {source}) answered '{error}' after {waited:.2f} s",
            "共享存储出错:挂载在 {point} 的 {fs}(来源 {source})在 {waited:.2f} 秒后返回 '{error}'",
        ),
        "fix": (
            "Check the CFS instance and the job's storage row in the TI-ONE console (the instance's state, the network "
            "between this node and it), then submit the job again. {variable} (now {timeout} s) sets how long to wait.",
            "请在 TI-ONE 控制台检查 CFS 实例与任务的存储挂载(实例状态、本节点与它之间的网络),然后重新提交任务。"
            "{variable}(当前 {timeout} 秒)决定等待多久。",
        ),
        "stage-stat": ("looking up the mount point", "查询挂载点"),
        "stage-list": ("listing the mount point", "列出挂载点内容"),
        "answered": (
            "{fs} at {point} answered in {ms:.0f} ms",
            "挂载在 {point} 的 {fs} 在 {ms:.0f} 毫秒内应答",
        ),
        "slow": (
            "{fs} at {point} answered only after {seconds:.1f} s: every file operation there is as slow, so checks "
            "and checkpoint saves will take longer",
            "挂载在 {point} 的 {fs} 在 {seconds:.1f} 秒后才应答:其上每次文件操作都同样慢,检查与保存检查点会更久",
        ),
        "slow-fix": (
            "Check the CFS instance's load and throughput tier in the TI-ONE console.",
            "请在 TI-ONE 控制台检查 CFS 实例的负载与性能规格。",
        ),
    },
)

TIMEOUT_VARIABLE = "VLA_STORAGE_TIMEOUT"


@dataclass(frozen=True)
class Answer:
    """How one mount answered its probe: `stage` is the last step it completed ('' none, 'stat', 'list'),
    `error` the OS error it answered with, `seconds` how long it took (or how long the probe waited)."""

    mount: Mount
    seconds: float
    stage: str
    error: str | None = None

    @property
    def answered(self) -> bool:
        return self.stage == "list" and self.error is None

    def finding(self) -> Finding:
        fields = {"fs": self.mount.fs_type, "point": self.mount.point}
        if self.seconds > SLOW_S:
            return warned(
                "storage.responsive", M("slow", seconds=self.seconds, **fields), M("slow-fix"), self.mount.point
            )
        return passed("storage.responsive", M("answered", ms=self.seconds * 1000, **fields), self.mount.point)

    def to_json(self) -> dict[str, object]:
        return {
            "point": self.mount.point,
            "fs_type": self.mount.fs_type,
            "source": self.mount.source,
            "seconds": round(self.seconds, 4),
            "stage": self.stage,
            "error": self.error,
        }


class StorageNotAnswering(PreflightFailed):
    """A network mount the command needs did not answer its probe (or answered with an error)."""

    def __init__(self, answer: Answer, timeout: float) -> None:
        mount = answer.mount
        fields = {"fs": mount.fs_type, "point": mount.point, "source": mount.source or "?", "waited": answer.seconds}
        if answer.error is not None:
            what = M("broken", error=answer.error, **fields)
        else:
            stage = M("stage-list" if answer.stage == "stat" else "stage-stat")
            what = M("not-answering", options=mount.options or "?", stage=stage, **fields)
        fix = M("fix", variable=TIMEOUT_VARIABLE, timeout=f"{timeout:g}")
        super().__init__("storage.not-answering", mount.point, what, fix)
        self.answer = answer


def mounts_touched(paths: Iterable[Path], mounts: Sequence[Mount]) -> list[Mount]:
    """The network mounts that touching `paths` may reach: the one holding each path and any mounted below it
    (the seed's layout mounts sub-folders of the assets root separately). Paths are taken as written (absolute,
    '..' folded): resolving links would already touch the storage."""
    found: dict[str, Mount] = {}
    for path in paths:
        lexical = os.path.abspath(path)
        holder = holding_mount(lexical, mounts)
        candidates = [holder] if holder is not None else []
        candidates += [m for m in mounts if m.point != lexical and m.point.startswith(lexical.rstrip("/") + "/")]
        for mount in candidates:
            if mount.network:
                found[mount.point] = holding_mount(mount.point, mounts) or mount  # the one mounted last wins
    return list(found.values())


class StorageProbe:
    """Probes each network mount once, in a child, within `timeout` seconds (see the module's docstring)."""

    def __init__(self, mounts: Sequence[Mount] | None, timeout: float, python: str = sys.executable) -> None:
        self.mounts = tuple(mounts or ())
        self.timeout = timeout
        self.python = python
        self.answers: dict[str, Answer] = {}

    def require(self, paths: Iterable[Path]) -> None:
        """Return once every network mount `paths` may touch has answered; raise `StorageNotAnswering` for the
        first that did not (the others' answers are kept)."""
        todo = [m for m in mounts_touched(paths, self.mounts) if m.point not in self.answers]
        if not todo:
            return
        for answer in probe(todo, self.timeout, self.python):
            self.answers[answer.mount.point] = answer
        for mount in todo:
            answer = self.answers[mount.point]
            if not answer.answered:
                raise StorageNotAnswering(answer, self.timeout)

    def findings(self) -> list[Finding]:
        """One line per mount probed: how fast it answered (a warning when slow)."""
        return [answer.finding() for answer in self.answers.values() if answer.answered]

    def to_json(self) -> list[dict[str, object]]:
        return [answer.to_json() for answer in self.answers.values()]


def probe(mounts: Sequence[Mount], timeout: float, python: str = sys.executable) -> list[Answer]:
    """Probe `mounts` at once, one child each; every answer comes back within `timeout` (plus the children's
    start), and a child that has not finished by then is killed and never waited for."""
    import subprocess  # only when there is a network mount to probe: `check` on a local tree starts no child

    started = time.monotonic()
    children = []
    for mount in mounts:
        child = subprocess.Popen(
            [python, "-I", "-S", "-c", _CHILD, mount.point],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C is for the launcher; it decides what the child gets
        )
        children.append((mount, child))
    answers = []
    for mount, child in children:
        left = max(0.0, started + timeout - time.monotonic())
        try:
            out, err = child.communicate(timeout=left)
        except subprocess.TimeoutExpired as expired:
            child.kill()  # freed by the kernel when the storage answers or the mount is aborted; never awaited
            stage = _last_stage(child, expired.stdout or b"")
            answers.append(Answer(mount, time.monotonic() - started, stage))
            continue
        stages = out.decode("ascii", "replace").split()
        error = None if child.returncode == 0 else _os_error(err)
        answers.append(Answer(mount, time.monotonic() - started, stages[-1] if stages else "", error))
    return answers


def _last_stage(child: subprocess.Popen[bytes], printed: bytes) -> str:
    """The last step a killed child printed: what `communicate` read before its timeout (`printed`), then what is
    left in the pipe, read without blocking (it may still be open)."""
    if child.stdout is None:
        return ""
    os.set_blocking(child.stdout.fileno(), False)
    data = printed
    try:
        data += child.stdout.read() or b""
    except OSError:
        pass  # nothing more to read: what was printed before the timeout tells
    finally:
        child.stdout.close()
        if child.stderr is not None:
            child.stderr.close()
    stages = data.decode("ascii", "replace").split()
    return stages[-1] if stages else ""


def _os_error(err: bytes) -> str:
    """The OS error a child's traceback ends with (`[Errno 107] Transport endpoint is not connected: '/x'`)."""
    last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
    text = last[0].split(": ", 1)[-1]
    return text[:200]
