"""The push tests' registry is the binary that `scripts/setup-tools test` extracted under the checkout, run as a child
process of the test and stopped by it: nothing from a host package or service is used, and nothing is left
listening afterwards, even when the test process is killed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.image.registry import CERTS_D, REGISTRY_BIN, REPO, listening, registry_running, running_registry

pytestmark = pytest.mark.image

USER = "pusher"


def parent_of(pid: int) -> int:
    """The parent process id of `pid`, from /proc/<pid>/stat (field 4, after the parenthesised command name)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_registry_is_a_child_process_stopped_on_exit(tmp_path: Path) -> None:
    assert REGISTRY_BIN.is_relative_to(REPO / ".work")
    with running_registry(tmp_path, USER, f"pw-{uuid.uuid4().hex}") as registry:
        assert parent_of(registry.pid) == os.getpid()
        assert Path(f"/proc/{registry.pid}/exe").resolve() == REGISTRY_BIN.resolve()
        assert listening(registry.port)
        assert (CERTS_D / registry.host / "ca.crt").is_file()
    assert not registry_running(registry.pid)
    assert not listening(registry.port)
    assert not (CERTS_D / registry.host).exists()


def test_registry_dies_with_a_killed_test_process(tmp_path: Path) -> None:
    """A test process killed outright (no cleanup runs) still leaves no registry behind: the kernel stops it."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.image.registry import running_registry\n"
        "with running_registry(Path(sys.argv[1]), 'pusher', 'secret') as r:\n"
        "    print(r.pid, r.port, r.host, flush=True)\n"
        "    time.sleep(600)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    started = holder.stdout.readline().split()
    try:
        pid, port = int(started[0]), int(started[1])
        assert listening(port) and registry_running(pid)
        holder.kill()
        holder.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (registry_running(pid) or listening(port)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not registry_running(pid) and not listening(port)
    finally:
        holder.kill()
        holder.wait(timeout=10)
        if len(started) == 3:  # the killed process could not remove its trust entry
            shutil.rmtree(CERTS_D / started[2], ignore_errors=True)
