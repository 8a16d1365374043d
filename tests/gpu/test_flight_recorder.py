"""The flight recorder on the installed torch (the lent GPU machine: torch 2.11): what a dump holds, that the launcher
reads it safely and names the rank behind, that a dump can be asked of a live NCCL rank through its pipe, and what
torch's own analyser makes of the dumps, always within its time bound. Self-contained, under a minute:
`python -m pytest tests/gpu/test_flight_recorder.py -q`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from entrypoint.inspect.environment import flight_recorder_env
from entrypoint.launch.flight_recorder import (
    ANALYSER_TIMEOUT_S,
    AnalyserStatus,
    analyse,
    behind,
    read_dump,
    request_dumps,
    wait_for_dumps,
)

torch = pytest.importorskip("torch")

# Two gloo ranks on CPU: three all-reduces and a barrier together, then rank 0 enters one more all-reduce that rank 1
# never joins (rank 1 is the culprit); each rank dumps its own recorder on demand.
GLOO_RANK = """
import datetime, os, sys, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
t = torch.ones(4)
for _ in range(3):
    dist.all_reduce(t)
dist.barrier()
if rank == 0:
    try:
        dist.all_reduce(t)
    except RuntimeError:
        pass
open(sys.argv[1] + str(rank), "wb").write(torch._C._distributed_c10d._dump_fr_trace())
"""

# One NCCL rank: an all-reduce, then it waits (bounded) while the test asks it for a dump through its pipe.
NCCL_RANK = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(0)
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
open(sys.argv[1], "w").write("ready")
deadline = time.time() + 40
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.2)
dist.destroy_process_group()
"""


def recorder_env(tmp_path: Path, port: int) -> tuple[dict[str, str], Path, str]:
    dumps, pipes = tmp_path / "node0.fr", str(tmp_path / "pipe_")
    dumps.mkdir()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    env.update(flight_recorder_env({}, {}, dumps, pipes).set)
    return env, dumps, pipes


def test_gloo_dumps_name_the_rank_that_skipped_a_collective(tmp_path):
    env, dumps, _ = recorder_env(tmp_path, 29611)
    script = tmp_path / "rank.py"
    script.write_text(GLOO_RANK)
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script), str(dumps / "rank_")], env={**env, "RANK": str(r), "WORLD_SIZE": "2"}
        )
        for r in (0, 1)
    ]
    assert [p.wait(timeout=40) for p in ranks] == [0, 0]
    traces = [read_dump(dumps / f"rank_{r}", r) for r in (0, 1)]
    assert all(t is not None for t in traces), traces
    print("gloo traces:", [t.to_json() for t in traces if t])
    assert behind(t for t in traces if t) == [1]
    started = time.monotonic()
    run = analyse(dumps, sys.executable, env, timeout=ANALYSER_TIMEOUT_S)
    print("analyser on gloo dumps:", run.to_json(), f"{time.monotonic() - started:.1f}s")
    assert run.status in (AnalyserStatus.OK, AnalyserStatus.FAILED, AnalyserStatus.ABSENT)
    assert time.monotonic() - started < ANALYSER_TIMEOUT_S


# No `torch.cuda.is_available()` here: in the test process it could leave a CUDA context on the GPU, which the health
# gate of a later test would rightly see as memory in use by another process (the conftest skips without a GPU).
def test_a_live_nccl_rank_dumps_when_asked_through_its_pipe(tmp_path):
    env, dumps, pipes = recorder_env(tmp_path, 29612)
    script, ready, done = tmp_path / "nccl.py", tmp_path / "ready", tmp_path / "done"
    script.write_text(NCCL_RANK)
    rank = subprocess.Popen(
        [sys.executable, str(script), str(ready), str(done)], env={**env, "RANK": "0", "WORLD_SIZE": "1"}
    )
    try:
        deadline = time.monotonic() + 40
        while not ready.exists() and rank.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ready.exists(), "the NCCL rank never got through its all-reduce"
        asked_at = time.time()
        asked = []
        while not asked and time.monotonic() < deadline:  # the monitor thread makes its pipe shortly after init
            asked = request_dumps(pipes, [0])
            time.sleep(0.2)
        assert asked == [0]
        started = time.monotonic()
        assert wait_for_dumps(str(dumps / "rank_"), [0], since=asked_at - 1, timeout=20) == [0]
        print(f"NCCL dump on request after {time.monotonic() - started:.1f}s, {(dumps / 'rank_0').stat().st_size} B")
        trace = read_dump(dumps / "rank_0", 0)
        assert trace is not None and trace.entered is not None, trace
        print("nccl trace:", trace.to_json())
    finally:
        done.write_text("done")
        rank.wait(timeout=30)
    run = analyse(dumps, sys.executable, env)
    print("analyser on the NCCL dump:", run.to_json())
    assert run.status is not AnalyserStatus.TIMED_OUT
