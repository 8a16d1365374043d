"""The closing line of `run`: what this run did, in words — never Python's `None`.

The CLI cases run `run` in a child process with a stand-in torchrun that prints a chosen output (or nothing, as a
worker node's torchrun does: openpi prints progress from global rank 0 only). The `Progress` cases cover every
shape of the sentence in both languages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.launch.progress import Progress
from tests.support.edges import run_cli
from tests.support.files import small_text
from tests.support.synthetic import make_checkpoint
from tests.unit.conftest import World

LIMIT_S = 60.0
LOGGED_40_SAVED_50 = (
    "step=30 loss=0.6000 lr=2.50e-06 grad_norm=1.10 time=2.0s\n"
    "step=40 loss=0.5000 lr=2.50e-06 grad_norm=1.10 time=2.0s\n"
    "Saved checkpoint at step 49 -> /ckpt/49\n"
    "Saved checkpoint at step 50 -> /ckpt/50\n"
)


@pytest.fixture
def printing_torchrun(tmp_path: Path) -> Path:
    """A stand-in torchrun that prints the file $STANDIN_OUTPUT and exits 0; returns its folder."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "torchrun"
    script.write_text('#!/bin/sh\ncat "$STANDIN_OUTPUT"\n')
    script.chmod(0o755)
    return folder


def run_printing(world: World, bin_dir: Path, output: str, **env: str) -> tuple[str, dict[str, object]]:
    """`run` with the stand-in printing `output`: (stdout, the start-up record's progress)."""
    (bin_dir / "output.txt").write_text(output)
    full = {"PATH": f"{bin_dir}:{world.env['PATH']}", "STANDIN_OUTPUT": str(bin_dir / "output.txt"), **env}
    ran = run_cli(world, ("run",), full, LIMIT_S)
    assert ran.code == 0, ran.text
    (record,) = (world.assets / "logs").glob("*.json")
    progress: dict[str, object] = json.loads(small_text(record))["progress"]
    return ran.out, progress


def closing_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if line.startswith("vla-entrypoint: training ended")]
    return line


def test_the_last_step_reached_counts_the_saved_step_and_only_this_runs_saves(world, printing_torchrun):
    """A resumed run that logged step 40 and then saved 49 and 50 reached 50; step 25, on disk from an earlier
    run, is not listed as saved by this one."""
    make_checkpoint(world.experiment, 25)
    out, progress = run_printing(world, printing_torchrun, LOGGED_40_SAVED_50)
    assert closing_line(out) == (
        "vla-entrypoint: training ended with exit code 0; last step reached 50 (last loss 0.5000, logged at step 40); "
        "checkpoints saved this run: 49, 50"
    )
    assert "到达的最后一步 50(最后损失 0.5000,记录于第 40 步);本次保存的检查点:49, 50" in out
    assert (progress["last_step_reached"], progress["last_step"]) == (50, 40)
    assert "None" not in out


def test_node_0_without_any_progress_says_so_in_words(world, printing_torchrun):
    out, progress = run_printing(world, printing_torchrun, "")
    assert closing_line(out).endswith("exit code 0; no training step was logged and no checkpoint saved this run")
    assert progress["last_step_reached"] is None and "None" not in out


def test_a_worker_node_points_at_node_0s_log(world, printing_torchrun):
    env = world.tione(nodes=2, per_node=8, rank=1, VLA_MASTER_WAIT_TIMEOUT="0")  # no node 0 runs here
    out, _ = run_printing(world, printing_torchrun, "", CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7", **env)
    assert closing_line(out) == (
        "vla-entrypoint: training ended with exit code 0; node 1 does not see training progress (openpi prints it "
        f"from global rank 0 only); see node 0's log in {world.assets / 'logs'}"
    )
    assert (
        f"节点 1 看不到训练进度(openpi 只在全局 rank 0 上输出进度);请查看 {world.assets / 'logs'} 中节点 0 的日志"
        in out
    )
    assert "None" not in out


SAVED_50 = "Saved checkpoint at step 50 -> /c/50"
NONE_SAVED = "checkpoints saved this run: none"
SUMMARIES = {  # id: (output lines, node rank, the English sentence)
    "logged": (["step=40 loss=0.5 lr=1e-05"], 0, f"last step reached 40, last loss 0.5000; {NONE_SAVED}"),
    "saved-after-logged": (
        ["step=40 loss=0.5", SAVED_50],
        0,
        "last step reached 50 (last loss 0.5000, logged at step 40); checkpoints saved this run: 50",
    ),
    "saved-only": ([SAVED_50], 0, "last step reached 50 (no loss logged); checkpoints saved this run: 50"),
    "loss-unreadable": (["step=10 loss=1.2.3"], 0, f"last step reached 10 (no loss logged); {NONE_SAVED}"),
    "loss-nan": (["step=10 loss=nan"], 0, f"last step reached 10, last loss nan; {NONE_SAVED}"),
    "nothing-node-0": ([], 0, "no training step was logged and no checkpoint saved this run"),
    "nothing-worker": (
        [],
        3,
        "node 3 does not see training progress (openpi prints it from global rank 0 only); see node 0's log in /logs",
    ),
    "worker-that-sees-progress": (["step=0 loss=1.0"], 1, f"last step reached 0, last loss 1.0000; {NONE_SAVED}"),
}


@pytest.mark.parametrize("case", list(SUMMARIES), ids=list(SUMMARIES))
def test_every_summary_is_words_in_both_languages(case: str) -> None:
    lines, rank, en = SUMMARIES[case]
    progress = Progress(clock=lambda: 0.0)
    progress.feed("".join(line + "\n" for line in lines))
    text = progress.summary(rank, "/logs")
    assert text.en == en
    assert "None" not in text.zh and text.zh != text.en
