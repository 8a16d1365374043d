"""The node's output never ends the job: a console or log that fails is dropped and the other one goes on."""

from __future__ import annotations

import io
from pathlib import Path

from entrypoint.launch.supervisor import Tee
from tests.support.files import small_bytes


class GoneConsole(io.StringIO):
    """A console whose reader went away (`run | head`, a closed pipe)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


class FullLog(io.BytesIO):
    """A node log on a file system that just filled up."""

    def write(self, data: bytes) -> int:  # type: ignore[override]
        raise OSError(28, "No space left on device")


def test_a_closed_console_leaves_the_node_log_complete(tmp_path: Path) -> None:
    tee = Tee(GoneConsole())
    with open(tmp_path / "node.log", "ab") as log:
        tee.file = log
        tee.write("vla-entrypoint: start command: torchrun ...\n")
        tee.write_bytes(b"step=10 loss=0.9\n")
    assert tee.console is None
    assert small_bytes(tmp_path / "node.log") == b"vla-entrypoint: start command: torchrun ...\nstep=10 loss=0.9\n"


def test_a_full_log_leaves_the_console_going() -> None:
    console = io.StringIO()
    tee = Tee(console)
    tee.file = FullLog()
    tee.write("first\n")
    tee.write_bytes(b"second\n")
    assert tee.file is None
    assert console.getvalue() == "first\nsecond\n"
