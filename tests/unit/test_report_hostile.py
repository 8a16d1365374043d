"""The report reads files anyone may have written: huge, truncated, garbled, not UTF-8, the wrong kind of file,
missing. Each case plants one such file beside an otherwise sound two-node job and runs `vla-entrypoint report` in
a child with a time limit: the page is written (exit 0), says what was wrong with which file in both languages,
still shows the rest of the job, and no traceback ever appears."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.jobfiles import EXP, plant, record, step_lines
from tests.unit.conftest import World

LIMIT_S = 30.0
STAMP = "20261205-150000"


def stem(folder: Path, rank: int) -> Path:
    return folder / f"{EXP}-node{rank}-{STAMP}"


def sound_node0(folder: Path) -> None:
    plant(folder, 0, STAMP, log=step_lines(range(0, 20)), body=record(0))


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def replace(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)
    path.write_bytes(data)


@dataclass(frozen=True)
class Hostile:
    """Node 1's files made hostile by `damage` (node 0's are sound); the page must say `says` (English) and
    `says_zh`."""

    name: str
    damage: Callable[[Path], None]
    says: str
    says_zh: str


def node1(log: str | bytes | None = "", body: object = None) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        plant(folder, 1, STAMP, log=log, body=record(1) if body is None else body)  # type: ignore[arg-type]

    return make


def then(first: Callable[[Path], None], second: Callable[[Path], None]) -> Callable[[Path], None]:
    def both(folder: Path) -> None:
        first(folder)
        second(folder)

    return both


def garbage_attempts(folder: Path) -> None:
    """Node 1's attempts folder: an attempt record of NUL bytes and a gave-up note that is no JSON."""
    attempts = stem(folder, 1).with_suffix(".attempts")
    attempts.mkdir()
    replace(attempts / "3.json", b"\x00{{{")
    replace(attempts / "gave-up.json", b"budget")


def log_of(folder: Path) -> Path:
    return stem(folder, 1).with_suffix(".log")


def stall_of(folder: Path) -> Path:
    return stem(folder, 1).with_suffix(".stall.json")


WRONG_TYPES = {
    "host": ["x"],
    "phases_s": {"plan": "fast", "training": -3},
    "attempts": [{"attempt": "0"}, 7],
    "outcome": {"exit_code": "zero", "class": 5},
    "plan": {"topology": {"nnodes": 10**30}},
}
RECORD = ".json"
CASES = [
    Hostile(
        "truncated-record",
        node1(body=b'{"host": "node1", "outcome": {"exit_co'),
        "is not valid JSON",
        "不是合法的 JSON",
    ),
    Hostile("garbled-record", node1(body=os.urandom(3000)), "is not valid JSON", "已截断或损坏"),
    Hostile(
        "record-not-utf8",
        node1(body='{"host": "n\xe9ud"}'.encode("latin-1")),
        "is not all UTF-8 (damaged)",
        "并非全部为 UTF-8",
    ),
    Hostile("record-is-a-list", node1(body=b"[1, 2, 3]"), "holds a JSON list, not an object", "而不是对象"),
    Hostile("record-nested-too-deep", node1(body=b"[" * 200_000), "nested too deeply", "嵌套过深"),
    Hostile(
        "record-too-big",
        node1(body=b'{"x": "' + b"a" * (5 << 20) + b'"}'),
        "more than the 4194304 read",
        "超过读取上限",
    ),
    Hostile(
        "record-is-a-fifo",
        then(node1(), lambda f: fifo(stem(f, 1).with_suffix(RECORD))),
        "was not read: fifo",
        "未读取",
    ),
    Hostile("log-is-a-fifo", then(node1(), lambda f: fifo(log_of(f))), "was not read: fifo", "未读取"),
    Hostile("log-is-a-folder", then(node1(log=None), lambda f: log_of(f).mkdir()), "was not read: folder", "未读取"),
    Hostile(
        "log-dangling-link",
        then(node1(log=None), lambda f: log_of(f).symlink_to(f / "gone")),
        "was not read: dangling-link",
        "未读取",
    ),
    Hostile(
        "log-not-utf8",
        node1(log=b"step=1 loss=0.5\n\xff\xfe garbage \xc3\x28\n"),
        "is not all UTF-8",
        "并非全部为 UTF-8",
    ),
    Hostile("log-binary", node1(log=b"\x00" * 5000 + b"\nstep=1 loss=0.5\n"), "contains NUL bytes", "含有 NUL 字节"),
    Hostile("log-missing", node1(log=None), "no node log", "没有节点日志"),
    Hostile("log-empty", node1(log=b""), "is empty", "为空"),
    Hostile("record-missing", lambda f: plant(f, 1, STAMP, log="x\n"), "start-up record", "启动记录"),
    Hostile(
        "one-line-no-newline", node1(log=b"x" * (20 << 20)), "were read (its start, its end and windows", "只读取了"
    ),
    Hostile(
        "a-node-without-files", node1(body=record(1, nnodes=3)), "no file at all from this node", "没有留下任何文件"
    ),
    Hostile("attempts-garbage", then(node1(), garbage_attempts), "attempt record", "尝试记录"),
    Hostile(
        "stall-report-garbage",
        then(node1(), lambda f: replace(stall_of(f), b'{"ranks": [{')),
        "stall report",
        "停滞报告",
    ),
    Hostile("record-wrong-types", node1(body=WRONG_TYPES), "", ""),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_file_is_said_and_the_rest_is_shown(world: World, case: Hostile) -> None:
    folder = world.assets / "logs"
    sound_node0(folder)
    case.damage(folder)
    env = {**world.env, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(  # bounded: a report that hangs on a hostile file fails here
        [sys.executable, "-m", "entrypoint", "report"],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=LIMIT_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    page = (folder / f"{EXP}-report.html").read_text(encoding="utf-8")
    assert case.says in page and case.says_zh in page, case.name
    assert page.count('<circle class="pt"') >= 20  # node 0's curve is still there


def test_a_1_gib_log_is_reported_from_windows_in_bounded_memory(world: World) -> None:
    """A sparse 1 GiB node log with real progress text at its start, spread through it and at its end: the report
    reads windows of it (the charts say so), under 64 MiB of it, in a child whose address space is capped at 768 MiB
    (a whole read would not fit)."""
    folder = world.assets / "logs"
    log = plant(folder, 0, STAMP, log="", body=record(0, nnodes=1))
    chunk = step_lines(range(0, 40_000)).encode()  # about 3.4 MiB of dense progress lines
    with open(log, "wb") as handle:
        for offset in (0, 256 << 20, 512 << 20, (1 << 30) - len(chunk)):
            handle.seek(offset)
            handle.write(chunk)
        handle.truncate(1 << 30)
    assert log.stat().st_size == 1 << 30

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "entrypoint", "report", "--json"],
        env={**world.env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
        preexec_fn=cap,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    scan = json.loads(done.stdout)["runs"][0]["log_scan"]
    assert scan["size"] == 1 << 30 and scan["sampled"] and scan["read"] < 64 << 20
    assert scan["binary"]  # the holes read as NUL bytes, and the report says so
    assert scan["points"][-1][0] == 39_999  # the end of the log is always read
    print(f"\n1 GiB log: reported in {took:.2f}s, {scan['read'] / 2**20:.1f} MiB read")
