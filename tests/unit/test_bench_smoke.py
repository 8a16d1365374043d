"""Smoke test of scripts/bench, so CI exercises it: the Markdown writer, and a `--quick --no-docker` run (start-up
outside Docker and asset verification on a tiny tree) into a temp file. The Docker parts run in the full benchmark."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.benchlib import machine
from scripts.benchlib import markdown as md
from scripts.benchlib.stats import summarize
from tests.support.files import small_text

REPO = Path(__file__).resolve().parents[2]


def test_sections_are_replaced_and_other_sections_kept() -> None:
    text = md.update("", {"startup": "## Start-up\n\nold"}, {"gpu": "## GPU\n\nplaceholder"})
    text = text.replace("placeholder", "measured on an H200 by the GPU run")
    text += "\nA paragraph someone added by hand.\n"
    new = md.update(
        text, {"startup": "## Start-up\n\nnew", "assets": "## Assets\n\nfresh"}, {"gpu": "## GPU\n\nplaceholder"}
    )
    assert "old" not in new and "## Start-up\n\nnew" in new
    assert "measured on an H200 by the GPU run" in new and "placeholder" not in new  # placeholders never overwrite
    assert "A paragraph someone added by hand." in new
    assert md.sections_in(new) == ["startup", "assets", "gpu"]  # assets inserted before gpu, in ORDER
    assert md.update(new, {"startup": "## Start-up\n\nnew", "assets": "## Assets\n\nfresh"}, {"gpu": "x"}) == new


def test_summary_median_and_spread() -> None:
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high, s.n) == (2.5, 1.0, 10.0, 4)
    assert s.q1 <= s.median <= s.q3


def test_gpu_bench_cancels_a_constant_order_effect() -> None:
    """The entrypoint 2 % slower, and whichever runs second in a pair 30 % slower: the per-pair ratios swing between
    0.78 and 1.33, the ABBA blocks recover 1.02 and 1.30."""
    bench_gpu = importlib.import_module("scripts.bench_gpu")
    true_ratio, second_slower = 1.02, 1.30
    entrypoint_first = true_ratio / second_slower  # entrypoint, then bare (which pays the order factor)
    bare_first = true_ratio * second_slower
    cancelled, factor = bench_gpu.order_cancelled([entrypoint_first, bare_first] * 3)
    assert cancelled == pytest.approx([true_ratio] * 3) and factor == pytest.approx([second_slower] * 3)


def test_quick_run_without_docker(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\n<!-- bench:gpu begin -->\n## GPU\n\nkept\n<!-- bench:gpu end -->\n")
    proc = subprocess.run(
        [str(REPO / "scripts" / "bench"), "--quick", "--no-docker", "--no-plot", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = small_text(out)
    assert md.sections_in(text) == ["intro", "machine", "startup", "assets", "taco", "gpu"]
    assert "## GPU\n\nkept" in text
    for row in ("(a) ours", "(b) seed", "(c) floor", "pip install of the wheel", "phase: plan", "floor: `find TREE"):
        assert row in text, row
    assert "Outside Docker" in text and "In Docker" not in text


@pytest.mark.parametrize("script", ["scripts.bench_assets", "scripts.bench_check"])
def test_figures_of_uncommitted_code_are_not_written(script: str, tmp_path: Path, monkeypatch) -> None:
    """docs/benchmarks.md must name a revision that holds the measured code: a dirty tree is refused up front."""
    monkeypatch.setattr(machine, "uncommitted_changes", lambda: True)
    target = tmp_path / "benchmarks.md"
    with pytest.raises(SystemExit, match=r"uncommitted changes.*commit first"):
        importlib.import_module(script).main(["--write", str(target)])
    assert not target.exists()


@pytest.mark.parametrize("check_ms, verdict", [(150.0, "within"), (400.0, "past")], ids=["within", "past"])
def test_check_start_up_is_reported_against_a_regression_guard(check_ms: float, verdict: str) -> None:
    """The start-up ratio is a guard that catches a slower `check`, never a goal the report claims."""
    from scripts import bench_check as bc

    found = {name: bc.Way(name, ["x"], "floor") for name in ("floor", "libraries", "imports", "check")}
    results = {
        "floor": [0.016, 0.017],
        "libraries": [0.06, 0.07],
        "imports": [0.13, 0.14],
        "check": [check_ms / 1000] * 2,
    }
    survey = bc.Survey(["json"], 37, 42, 24)
    run = bc.Run(3, 10, bc.GUARD, None, "abc1234", survey, 0.1)
    text = bc.markdown(found, results, [("json", 0.001)], run)
    assert f"{verdict} the\nregression guard of 15×" in text and "--guard 15" in text
    assert "goal is" not in text


def test_metrics_bench_writes_its_section(tmp_path: Path) -> None:
    """scripts/bench_metrics on a few lines: its section lands in the file between its markers, others kept."""
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\n<!-- bench:gpu begin -->\n## GPU\n\nkept\n<!-- bench:gpu end -->\n")
    small = ("--lines", "300", "--reps", "1", "--idle", "0.2")
    proc = subprocess.run(
        [sys.executable, "-m", "scripts.bench_metrics", *small, "--write", str(out), "--allow-uncommitted"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert md.sections_in(text) == ["gpu", "metrics"] and "kept" in text
    assert "| metrics thread: one logged step (6 scalars encoded and written) |" in text
