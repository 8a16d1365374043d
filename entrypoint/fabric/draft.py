"""What the fabric rules share: the `Draft` they record decisions and findings in, and NCCL's list syntax."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from entrypoint.core.findings import Finding, warned
from entrypoint.core.messages import Text, flatten
from entrypoint.core.numbers import leading_number
from entrypoint.fabric.inventory import ENVIRONMENT, Preset, RdmaPort
from entrypoint.fabric.messages import MESSAGES as M

MAX_PORT = 255  # RDMA port numbers are one byte (`ibv_query_port`'s port_num)
_NO_PORT = -1  # what an out-of-range port becomes: no port has that number


@dataclass(frozen=True)
class NcclList:
    """NCCL's `NCCL_IB_HCA` / `NCCL_SOCKET_IFNAME` syntax: `[^][=]name[:port],…`. Names match as prefixes
    (`mlx5_1` also matches `mlx5_10`) unless `=` asks for exact names; a leading `^` selects what does *not*
    match; an entry without a port matches every port. A port past `MAX_PORT` (an RDMA port number is one byte)
    matches nothing and is listed in `out_of_range`, however many digits it has."""

    entries: tuple[tuple[str, int | None], ...]
    exact: bool
    exclude: bool
    out_of_range: tuple[str, ...] = ()

    @classmethod
    def parse(cls, value: str) -> NcclList:
        exclude = value.startswith("^")
        value = value[1:] if exclude else value
        exact = value.startswith("=")
        value = value[1:] if exact else value
        entries, out_of_range = [], []
        for item in value.split(","):
            name, sep, port = item.partition(":")
            if not name:
                continue
            number = leading_number(port, MAX_PORT) if sep and port else None  # NCCL reads the port with atoi()
            if sep and port and number is None:
                out_of_range.append(item)
                number = _NO_PORT
            entries.append((name, number))
        return cls(tuple(entries), exact, exclude, tuple(out_of_range))

    def matches(self, name: str, port: int | None = None) -> bool:
        hit = not self.entries or any(
            (name == ref if self.exact else name.startswith(ref)) and (want is None or port is None or want == port)
            for ref, want in self.entries
        )
        return hit != self.exclude


@dataclass(frozen=True)
class Decision:
    """One variable: the value we export or keep (None = left unset), why, and which files said so."""

    variable: str
    value: str | None
    reason: Text
    sources: tuple[str, ...]
    kept: bool

    def to_json(self) -> dict[str, object]:
        return {
            "variable": self.variable,
            "value": self.value,
            "kept": self.kept,
            **flatten(self.reason, "reason"),
            "sources": list(self.sources),
        }


class Draft:
    """Decisions and findings as `plan_fabric` accumulates them; `presets` are the platform's values."""

    def __init__(self, presets: Mapping[str, Preset]) -> None:
        self.presets = presets
        self.decisions: list[Decision] = []
        self.findings: list[Finding] = []
        self.env_set: dict[str, str] = {}

    def set(self, variable: str, value: str, reason: Text, sources: Sequence[str]) -> None:
        self.env_set[variable] = value
        self.decisions.append(Decision(variable, value, reason, tuple(sources), False))

    def unset(self, variable: str, reason: Text, sources: Sequence[str] = ()) -> None:
        self.decisions.append(Decision(variable, None, reason, tuple(sources), False))

    def keep(self, variable: str, verdict: Text) -> None:
        """Keep the platform's value of `variable` (it must be a preset), with what we found about it."""
        preset = self.presets[variable]
        reason = M("kept", source=preset.source, verdict=verdict)
        self.decisions.append(Decision(variable, preset.value, reason, (source_of(variable, preset),), True))

    def warn(self, id: str, message: Text, hint: Text, where: str | None = None) -> None:
        self.findings.append(warned(id, message, hint, where))


def source_of(variable: str, preset: Preset) -> str:
    """Where a preset came from, as a decision's source: `environment: <variable>` or the config file."""
    return f"environment: {variable}" if preset.source == ENVIRONMENT else preset.source


def port_names(ports: Iterable[RdmaPort]) -> str:
    return ", ".join(p.name for p in ports)
