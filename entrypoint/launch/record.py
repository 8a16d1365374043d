"""The per-node start-up record: a JSON file beside the node's log with the plan, phase timings and outcome,
so a failed job can be diagnosed after its containers are gone. Its strings are masked (`core.masking`): a root
cause or a diagnosis may quote training's command line or output."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint import __version__
from entrypoint.core.masking import mask_json


@dataclass
class StartupRecord:
    path: Path | None
    started_at: float = field(default_factory=time.time)
    phases: dict[str, float] = field(default_factory=dict)
    data: dict[str, object] = field(default_factory=dict)
    t0: float = field(default_factory=time.monotonic)  # time.monotonic() at start-up
    claimed: bool = False  # whether `path` is this run's own (see `write`)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase of start-up; the duration lands in `phases` even if the phase fails."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = round(time.monotonic() - start, 4)

    def since_start(self) -> float:
        return time.monotonic() - self.t0

    def write(self) -> None:
        """Write atomically (temp file + rename); a storage error never hides the job's own outcome. The first
        write claims `path` (a hard link fails when it exists): a run of this node that chose the same name at the
        same moment writes `<record>-<pid>.json` instead of over this one."""
        if self.path is None:
            return
        body = {
            "version": __version__,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "phases_s": self.phases,
            **self.data,
        }
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            text = json.dumps(mask_json(body), indent=2, ensure_ascii=False, default=str) + "\n"
            tmp.write_text(text, encoding="utf-8")
            if not self.claimed:
                self._claim(tmp)
            os.replace(tmp, self.path)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # left behind when the link made `path` the same file

    def _claim(self, tmp: Path) -> None:
        """Make `path` this run's: link `tmp` there if nothing is, else move to a name of this process's own."""
        assert self.path is not None
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            self.path = self.path.with_name(f"{self.path.stem}-{os.getpid()}{self.path.suffix}")
        except OSError:
            pass  # no hard links on this storage: a plain replace, as before
        self.claimed = True
