"""The fabric's one side effect, for launch to call: raising the soft locked-memory limit to the hard one."""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from typing import Protocol


class Limits(Protocol):
    """What `raise_memlock` uses of the `resource` module."""

    @property
    def RLIMIT_MEMLOCK(self) -> int: ...

    @property
    def RLIM_INFINITY(self) -> int: ...

    def getrlimit(self, resource: int, /) -> tuple[int, int]: ...

    def setrlimit(self, resource: int, limits: tuple[int, int], /) -> None: ...


@dataclass(frozen=True)
class MemlockChange:
    """What `raise_memlock` did: limits before/after (bytes, `math.inf` = unlimited) and any error."""

    before: tuple[float, float]
    after: tuple[float, float]
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def to_json(self) -> dict[str, object]:
        def show(pair: tuple[float, float]) -> list[object]:
            return ["unlimited" if v == math.inf else int(v) for v in pair]

        return {"before": show(self.before), "after": show(self.after), "changed": self.changed, "error": self.error}


def raise_memlock(limits: Limits = resource) -> MemlockChange:
    """Raise this process's soft RLIMIT_MEMLOCK to its hard limit, so RDMA registration in the training
    processes (which inherit it) is not capped by a small soft default. `limits` is the `resource` module
    (tests pass a stand-in). Never raises."""

    def readable(pair: tuple[int, int]) -> tuple[float, float]:
        soft, hard = (math.inf if v == limits.RLIM_INFINITY else v for v in pair)
        return soft, hard

    soft, hard = limits.getrlimit(limits.RLIMIT_MEMLOCK)
    before = readable((soft, hard))
    if soft == hard:
        return MemlockChange(before, before)
    try:
        limits.setrlimit(limits.RLIMIT_MEMLOCK, (hard, hard))
    except (ValueError, OSError) as error:
        return MemlockChange(before, before, str(error))
    return MemlockChange(before, readable(limits.getrlimit(limits.RLIMIT_MEMLOCK)))
