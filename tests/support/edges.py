"""The edge-case harness: one hostile input, run through the real command line in a child process, judged on
everything a user would notice.

Each `Edge` says what the user did (argv, variables, files planted in the world) and what they must see: the exit
code, the culprit named outside PASS lines, a fix in English and Chinese, no traceback, nothing on disk changed by
`check`/`plan`, an answer within `limit_s` (a hang fails the case instead of stalling the suite), and no planted
secret anywhere in stdout, stderr, logs or records. Files are scanned in bounded chunks (`tests/support/files.py`):
a world holds sparse weights the size of the real ones.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from tests.support.files import file_states, holding, written_since

CJK = re.compile(r"[\u4e00-\u9fff]")
READ_ONLY_COMMANDS = ("check", "plan")


class WorldLike(Protocol):
    root: Path
    env: dict[str, str]

    @property
    def assets(self) -> Path: ...

    @property
    def host(self) -> Path: ...

    def snapshot(self) -> dict[str, tuple[int, int]]: ...


@dataclass(frozen=True)
class Edge:
    """One hostile input. `code` 0 means the job can still run: the culprit must then appear as a warning."""

    id: str
    family: str
    code: int
    culprit: str
    argv: tuple[str, ...] = ("check",)
    env: Mapping[str, str] = field(default_factory=dict)
    setup: Callable[[WorldLike], None] | None = None
    secrets: tuple[str, ...] = ()
    limit_s: float = 20.0
    tione: bool = True


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    seconds: float
    written: tuple[Path, ...] = ()  # regular files under the world the command created or changed (`check_edge`)

    @property
    def text(self) -> str:
        return self.out + self.err


def run_cli(world: WorldLike, argv: tuple[str, ...], env: Mapping[str, str], limit_s: float) -> Outcome:
    """`python -m entrypoint ARGV` in a child with exactly the world's environment plus `env`; a child still
    running after `limit_s` is killed and reported as exit code -1 (the case fails, the suite goes on)."""
    full = {**world.env, **env, "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "entrypoint", *argv],
            env=full,
            cwd=world.root,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=limit_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
        return Outcome(-1, out, f"[harness] still running after {limit_s}s: killed", time.monotonic() - start)
    return Outcome(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def without_passes(text: str) -> str:
    """The output minus PASS findings (and the lines indented under them), so a culprit is not found in praise."""
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("  PASS  "):
            skipping = True
            continue
        if skipping and line.startswith("      "):
            continue
        skipping = False
        kept.append(line)
    return "\n".join(kept)


def logs_and_records(root: Path) -> list[Path]:
    """Every log, record and stacks file under a `logs` folder of `root`, for the secrets check."""
    return [
        path
        for path in root.rglob("*")
        if path.suffix in (".log", ".json", ".txt")
        and "logs" in path.parts
        and path.is_file()
        and not path.is_symlink()
    ]


def check_edge(world: WorldLike, edge: Edge, base_env: Mapping[str, str]) -> Outcome:
    """Run `edge` and assert everything the harness promises; returns the outcome for extra assertions."""
    if edge.setup is not None:
        edge.setup(world)
    before = world.snapshot() if edge.argv[0] in READ_ONLY_COMMANDS else None
    states = file_states(world.root)
    outcome = run_cli(world, edge.argv, {**base_env, **edge.env}, edge.limit_s)
    shown = outcome.text
    assert outcome.code != -1, f"{edge.id}: hung ({outcome.err})\n{outcome.out[-2000:]}"
    assert outcome.code == edge.code, f"{edge.id}: exit {outcome.code}, expected {edge.code}\n{shown[-3000:]}"
    assert "Traceback (most recent call last)" not in shown, f"{edge.id}: traceback\n{shown[-3000:]}"
    assert edge.culprit in without_passes(shown), f"{edge.id}: culprit {edge.culprit!r} not named\n{shown[-3000:]}"
    if edge.code != 0:
        assert CJK.search(shown) and re.search(r"(fix|->|hint)", shown), f"{edge.id}: no bilingual fix\n{shown}"
    else:
        assert "WARN" in without_passes(shown), f"{edge.id}: exit 0 without a warning\n{shown[-3000:]}"
    if before is not None:
        assert world.snapshot() == before, f"{edge.id}: {edge.argv[0]} changed something on disk"
    for secret in edge.secrets:
        assert secret not in shown, f"{edge.id}: secret printed"
    needles = [secret.encode() for secret in edge.secrets]
    for path in logs_and_records(world.root):
        assert not holding(path, needles), f"{edge.id}: secret written to a log or record ({path})"
    return replace(outcome, written=tuple(written_since(states, world.root)))
