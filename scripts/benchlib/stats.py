"""Summaries of repeated timings: median with min/max and the interquartile range."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    low: float  # min
    high: float  # max
    q1: float
    q3: float

    def to_json(self) -> dict[str, float]:
        return {"n": self.n, "median": self.median, "min": self.low, "max": self.high, "q1": self.q1, "q3": self.q3}


def summarize(values: Iterable[float]) -> Summary:
    data = sorted(values)
    if not data:
        raise ValueError("no values to summarize")
    if len(data) >= 2:
        q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    else:
        q1 = q3 = data[0]
    return Summary(len(data), statistics.median(data), data[0], data[-1], q1, q3)


def seconds(value: float) -> str:
    """A duration for a table: ms below 1 s, else s."""
    if abs(value) < 0.0995:
        return f"{value * 1000:.1f} ms"
    if abs(value) < 0.9995:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if abs(value) < 10 else f"{value:.1f} s"


def spread(s: Summary) -> str:
    """`min–max (IQR q1–q3)` in the unit `seconds` picks for the median."""
    if s.n == 1:
        return "(1 run)"
    return f"{seconds(s.low)} – {seconds(s.high)} (IQR {seconds(s.q1)} – {seconds(s.q3)})"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}×" if b > 0 else "n/a"


def size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"
