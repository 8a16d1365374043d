"""The start-up timeline (PNG): one stacked bar per way, segments at their median, in Docker and outside it.

matplotlib is a dev tool here: `ensure_matplotlib` installs it with pip when it is missing (as scripts/setup-tools
installs the test tools), unless told not to.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from scripts.benchlib.startup import Result

COLORS = {
    "container start to entrypoint shell": "#9e9e9e",
    "container start, python3 up": "#9e9e9e",
    "python3 up": "#bdbdbd",
    "Python start, imports (derived)": "#4c78a8",
    "spawn torchrun, trainer Python up": "#b279a2",
    "torchrun | tee, trainer Python up": "#b279a2",
    "launcher, other (log, health summary, record)": "#72b7b2",
    "shell starts run.sh": "#f2cf5b",
    "transformers patch script": "#f58518",
    "existence checks": "#eeca3b",
    "pip install of the wheel": "#e45756",
    "shell starts train_pytorch.sh": "#ff9da6",
    "exports": "#9d755d",
}
EXTRA = ["#54a24b", "#88d27a", "#439894", "#83bcb6", "#d67195", "#fcbfd2"]


def ensure_matplotlib(install: bool, log) -> bool:
    if importlib.util.find_spec("matplotlib") is not None:
        return True
    if not install:
        return False
    log("matplotlib is missing: installing it with pip (a dev tool for the plot only)")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "matplotlib"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        log(f"could not install matplotlib; no plot:\n{proc.stderr[-1000:]}")
        return False
    return True


def _color(name: str, extra: dict[str, str]) -> str:
    if name in COLORS:
        return COLORS[name]
    if name not in extra:
        extra[name] = EXTRA[len(extra) % len(EXTRA)]
    return extra[name]


def timeline(results: list[Result], labels: dict[str, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("a", "a"), ("b+marks", "b"), ("c", "c")]  # (b) is drawn from its instrumented runs
    fig, axes = plt.subplots(len(results), 1, figsize=(11, 2.3 + 1.9 * len(results)), squeeze=False, sharex=True)
    extra: dict[str, str] = {}
    seen: dict[str, Any] = {}
    for ax, result in zip(axes[:, 0], results, strict=True):
        names, y = [], 0
        for way, label_way in rows:
            if way not in result.samples or not result.samples[way]:
                continue
            left = 0.0
            for name, summary in result.segments(way):
                width = summary.median * 1000
                bar = ax.barh(
                    y, width, left=left, color=_color(name, extra), edgecolor="white", linewidth=0.6, height=0.6
                )
                seen.setdefault(name, bar)
                if width > 45:
                    ax.text(left + width / 2, y, f"{width:.0f}", ha="center", va="center", fontsize=7, color="black")
                left += width
            total = result.total(way).median * 1000
            ax.text(left + 8, y, f"{total:.0f} ms", va="center", fontsize=8, fontweight="bold")
            names.append(labels[label_way] + (" (instrumented copy)" if way == "b+marks" else ""))
            y += 1
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(
            "ms since " + ("`docker run` (host clock)" if result.mode == "docker" else "process spawn"), fontsize=8
        )
        ax.set_title(
            (
                "In Docker: container start → trainer process up"
                if result.mode == "docker"
                else "Outside Docker: process start → trainer process up"
            )
            + " (median per segment)",
            fontsize=10,
        )
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="x", labelbottom=True)
    axes[0, 0].set_xlim(0, axes[0, 0].get_xlim()[1] * 1.08)
    fig.legend(
        handles=list(seen.values()), labels=list(seen.keys()), loc="lower center", ncol=3, fontsize=7, frameon=False
    )
    fig.tight_layout(rect=(0, 0.06 + 0.02 * ((len(seen) + 2) // 3), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
