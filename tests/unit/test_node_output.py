"""The node's output never ends the job: a console or log that fails is dropped and the other one goes on."""

from __future__ import annotations

import io
import threading
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
        assert tee.close_file(5)
    assert tee.console is None
    assert small_bytes(tmp_path / "node.log") == b"vla-entrypoint: start command: torchrun ...\nstep=10 loss=0.9\n"


def test_a_full_log_leaves_the_console_going() -> None:
    console = io.StringIO()
    tee = Tee(console)
    tee.file = FullLog()
    tee.write("first\n")
    tee.write_bytes(b"second\n")
    assert tee.close_file(5)
    assert tee.file is None
    assert console.getvalue() == "first\nsecond\n"


class StalledLog(io.BytesIO):
    """A node log on a CFS that stopped answering: every write waits until `answer` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.answer.wait(30)
        return super().write(data)


def test_a_stalled_log_never_holds_up_the_console_or_training() -> None:
    console = io.StringIO()
    tee = Tee(console)
    log = StalledLog()
    tee.file = log
    for n in range(Tee.QUEUE_CHUNKS + 10):  # far more than the queue holds: the relay must never wait
        tee.write_bytes(b"step=%d loss=0.9\n" % n)
    assert console.getvalue().count("loss=0.9") == Tee.QUEUE_CHUNKS + 10
    assert tee.dropped > 0
    assert not tee.close_file(0.2)  # the file did not keep up: the writer is left behind, the launcher goes on
    log.answer.set()
