"""What the stall watchdog reports about a stuck job: each local process read from /proc (role, state, wait channel,
command line, global rank), its Python stack from py-spy, where the ranks wait (collective, data loading, process-
group setup), GPU utilisation from nvidia-smi, the `STALL:` lines and the stacks file; and the watchdog's own
firing rules at their edges (exactly at the limit, after a restart, with the watchdog off).

py-spy and nvidia-smi are small shell stand-ins in a folder that is the whole PATH; /proc is a folder of the test's
own (`watchdog.PROC`); the process tree is a fixed list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from entrypoint.launch import watchdog
from entrypoint.launch.processes import Proc, ProcessTree
from entrypoint.launch.progress import Progress
from entrypoint.launch.saves import SaveWatch
from entrypoint.launch.watchdog import (
    FIRST_SAVE_S,
    FLOOR_S,
    Diagnosis,
    DiagnosisMethod,
    ProcessReport,
    Role,
    Watchdog,
    diagnose,
    global_rank,
    gpu_utilisation,
    main_frames,
    py_spy_dump,
    stall_limit,
    summary_lines,
    write_stacks,
)
from tests.support.stall import Clock

SMI_ARGS = "--query-gpu=index,utilization.gpu,memory.used --format=csv,noheader"
HANG = f"exec {sys.executable} -c \"import time; time.sleep(10); print('late')\"\n"


@dataclass
class ListedTree(ProcessTree):
    """A process tree whose `refresh` returns a fixed list (torchrun is `root`)."""

    listed: list[Proc] = field(default_factory=list)

    def refresh(self) -> list[Proc]:
        return list(self.listed)


def tool(folder: Path, name: str, body: str) -> Path:
    """A shell stand-in `name` in `folder`."""
    path = folder / name
    path.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder that is the whole PATH: no real py-spy or nvidia-smi is ever found."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def fake_py_spy(tools: Path, stacks: dict[int, bytes], failing: dict[int, bytes] | None = None) -> None:
    """py-spy answering `dump --pid N` (exactly) with `stacks[N]`; `failing[N]` is printed with exit status 1."""
    folder = tools.parent / "stacks"
    folder.mkdir()
    for pid, text in stacks.items():
        (folder / str(pid)).write_bytes(text)
    for pid, text in (failing or {}).items():
        (folder / f"{pid}.fail").write_bytes(text)
    tool(
        tools,
        "py-spy",
        '[ "$#" -eq 3 ] && [ "$1" = dump ] && [ "$2" = --pid ] || exit 2\n'
        f'if [ -f "{folder}/$3.fail" ]; then cat "{folder}/$3.fail"; exit 1; fi\n'
        f'cat "{folder}/$3"\n',
    )


def fake_smi(tools: Path, output: str) -> None:
    """nvidia-smi answering the watchdog's query (exactly) with `output`."""
    (tools.parent / "smi.out").write_text(output)
    tool(tools, "nvidia-smi", f'[ "$*" = "{SMI_ARGS}" ] || exit 2\ncat "{tools.parent / "smi.out"}"\n')


@pytest.fixture
def proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "proc"
    folder.mkdir()
    monkeypatch.setattr(watchdog, "PROC", folder)
    return folder


def proc_files(proc: Path, pid: int, **files: bytes) -> None:
    (proc / str(pid)).mkdir()
    for name, content in files.items():
        (proc / str(pid) / name).write_bytes(content)


def dump(*threads: tuple[str, tuple[str, ...]]) -> str:
    """A py-spy dump: the header, then each thread's line and its frames (innermost first)."""
    lines = ["Process 101: python3 train.py", "Python v3.11.9 (/usr/bin/python3.11)", ""]
    for header, frames in threads:
        lines += [header, *(f"    {frame}" for frame in frames)]
    return "\n".join(lines) + "\n"


MAIN = 'Thread 0x7F01 (idle): "MainThread"'
COLLECTIVE = (
    "all_reduce (torch/distributed/distributed_c10d.py:2050)",
    "train_step (train.py:88)",
    "main (train.py:120)",
)
PIN_MEMORY = ('Thread 0x7F02 (idle): "pt_pin_memory"', ("__next__ (torch/utils/data/dataloader.py:630)",))
SETUP = (
    "_store_based_barrier (torch/distributed/distributed_c10d.py:4300)",
    "init_process_group (torch/distributed/distributed_c10d.py:1500)",
    "main (train.py:30)",
)
LOADER = ("_worker_loop (torch/utils/data/_utils/worker.py:308)", "_bootstrap (multiprocessing/process.py:314)")


# -- main_frames -----------------------------------------------------------------------------------------------------


def test_main_frames_are_the_main_threads_without_line_numbers() -> None:
    stack = dump((MAIN, COLLECTIVE), PIN_MEMORY)
    assert main_frames(stack) == (
        "all_reduce (torch/distributed/distributed_c10d.py)",
        "train_step (train.py)",
        "main (train.py)",
    )


def test_a_thread_without_frames_is_skipped_for_the_next_one() -> None:
    stack = dump(('Thread 0x7F03 (idle): "Thread-1"', ()), (MAIN, ("wait (threading.py:320)", "main (t.py)")))
    assert main_frames(stack) == ("wait (threading.py)", "main (t.py)")


def test_an_unnamed_first_thread_counts_as_the_main_one() -> None:
    assert main_frames(dump(("Thread 4242 (active)", ("step (train.py:9)",)))) == ("step (train.py)",)


def test_the_main_thread_is_chosen_by_its_name_wherever_it_is_listed() -> None:
    assert main_frames(dump(PIN_MEMORY, (MAIN, COLLECTIVE))) == (
        "all_reduce (torch/distributed/distributed_c10d.py)",
        "train_step (train.py)",
        "main (train.py)",
    )
    assert main_frames(dump(('Thread 0x7F04 (idle): "pt_elastic"', ("wait (threading.py:1)",)), (MAIN, ()))) == (
        "wait (threading.py)",
    )


def test_frames_outside_any_thread_and_text_without_threads_give_nothing() -> None:
    assert main_frames("    main (train.py:3)\n    run (x.py:1)\n") == ()
    assert main_frames("") == ()


# -- /proc readings --------------------------------------------------------------------------------------------------


def test_global_rank_is_read_from_the_environment(proc: Path) -> None:
    proc_files(proc, 7, environ=b"LOCAL_RANK=1\0RANK=12\0WORLD_SIZE=16\0")
    proc_files(proc, 8, environ=b"LOCAL_RANK=1\0WORLD_SIZE=16\0")
    proc_files(proc, 9, environ=b"PATH=/bin\0RANK=\xff\0")
    proc_files(proc, 10, environ=b"RANK=seven\0")
    assert [global_rank(pid) for pid in (7, 8, 9, 10, 11)] == [12, None, None, None, None]


def test_global_rank_reads_only_the_first_mebibyte(proc: Path) -> None:
    proc_files(proc, 7, environ=b"A=" + b"x" * watchdog.ENVIRON_LIMIT + b"\0RANK=3\0")
    proc_files(proc, 8, environ=b"A=" + b"x" * (watchdog.ENVIRON_LIMIT - 20) + b"\0RANK=3\0")
    assert (global_rank(7), global_rank(8)) == (None, 3)


# -- py-spy and nvidia-smi -------------------------------------------------------------------------------------------


def test_py_spy_dump_returns_its_output_with_bad_bytes_replaced(tools: Path) -> None:
    fake_py_spy(tools, {7: b"Thread 1 (idle)\n    f\xff (x.py:1)\n"})
    assert py_spy_dump(7) == "Thread 1 (idle)\n    f\ufffd (x.py:1)\n"


def test_py_spy_dump_gives_nothing_on_failure_blank_output_or_absence(tools: Path) -> None:
    assert py_spy_dump(7) is None  # not installed
    fake_py_spy(tools, {8: b" \n\n"}, failing={7: b"Error: Permission Denied\n"})
    assert (py_spy_dump(7), py_spy_dump(8)) == (None, None)


def test_a_hung_py_spy_is_given_up_after_its_bound(tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool(tools, "py-spy", HANG)
    monkeypatch.setattr(watchdog, "PYSPY_TIMEOUT_S", 0.3)
    assert py_spy_dump(7) is None


def test_gpu_utilisation_is_nvidia_smis_answer_trimmed(tools: Path) -> None:
    assert gpu_utilisation() is None  # not installed
    fake_smi(tools, "\n0, 97 %, 70123 MiB\n1, 0 %, 2 MiB\n\n")
    assert gpu_utilisation() == "0, 97 %, 70123 MiB\n1, 0 %, 2 MiB"
    fake_smi(tools, " \n")
    assert gpu_utilisation() is None


def test_a_stray_byte_from_nvidia_smi_is_replaced(tools: Path) -> None:
    tool(tools, "nvidia-smi", "printf '0, 97 %%, 1 MiB \\377\\n'\n")
    assert gpu_utilisation() == "0, 97 %, 1 MiB \ufffd"


def test_a_failing_nvidia_smi_is_quoted_in_its_own_words(tools: Path) -> None:
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    tool(tools, "nvidia-smi", f'echo "{said}"\nexit 9\n')
    assert gpu_utilisation() == said


def test_a_hung_nvidia_smi_is_reported_in_words(tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool(tools, "nvidia-smi", HANG)
    monkeypatch.setattr(watchdog, "NVIDIA_SMI_TIMEOUT_S", 0.3)
    assert gpu_utilisation() == "nvidia-smi did not answer within 0.3s"


# -- diagnose --------------------------------------------------------------------------------------------------------

LONG_ARGS = "--config " + "c" * 250


def stuck_job(proc: Path, tools: Path) -> ListedTree:
    """torchrun (pid 100) with four ranks and one data-loader worker:
    101 `python3` (the name only says so) in an all_reduce, its pin-memory thread in the data loader, global rank 12;
    102 `pt_main_thread` running `python` (the command line only says so) in process-group setup, global rank 3;
    103 a data-loader worker below 101 (its RANK inherited, not its own);
    104 a shell, never given to py-spy (py-spy would have a stack for it);
    105 `python3.11` that py-spy may not read and whose /proc files are gone."""
    proc_files(
        proc,
        101,
        cmdline=b"/opt/venv/bin/openpi-train\0" + LONG_ARGS.encode() + b"\0",
        wchan=b"do_epoll_wait\n",
        environ=b"LOCAL_RANK=0\0RANK=12\0",
    )
    proc_files(proc, 102, cmdline=b"python\0train.py\0", wchan=b"unix_stream_read_generic", environ=b"RANK=3\0")
    proc_files(proc, 103, cmdline=b"python3\0-c\0from multiprocessing\xff\0", wchan=b"pipe_read\n", environ=b"RANK=12")
    proc_files(proc, 104, cmdline=b"/bin/bash\0run.sh\0", wchan=b"do_wait\n")
    fake_py_spy(
        tools,
        {
            101: dump((MAIN, COLLECTIVE), PIN_MEMORY).encode(),
            102: dump((MAIN, SETUP)).encode(),
            103: dump((MAIN, LOADER)).encode(),
            104: dump((MAIN, COLLECTIVE)).encode(),
        },
        failing={105: b"Error: Permission Denied\n"},
    )
    fake_smi(tools, "0, 97 %, 70123 MiB\n1, 0 %, 2 MiB\n")
    return ListedTree(
        100,
        listed=[
            Proc(101, 100, "S", 5000, "python3"),
            Proc(102, 100, "S", 5001, "pt_main_thread"),
            Proc(103, 101, "R", 5100, "python3"),
            Proc(104, 100, "S", 5002, "bash"),
            Proc(105, 100, "D", 5003, "python3.11"),
        ],
    )


def test_diagnose_reads_every_process_and_sorts_where_the_ranks_wait(proc: Path, tools: Path) -> None:
    diagnosis = diagnose(stuck_job(proc, tools))
    assert diagnosis == Diagnosis(
        method=DiagnosisMethod.PY_SPY,
        processes=[
            ProcessReport(101, 100, Role.RANK, "S", "do_epoll_wait", ("/opt/venv/bin/openpi-train " + LONG_ARGS)[:200]),
            ProcessReport(102, 100, Role.RANK, "S", "unix_stream_read_generic", "python train.py"),
            ProcessReport(103, 101, Role.WORKER_CHILD, "R", "pipe_read", "python3 -c from multiprocessing\ufffd"),
            ProcessReport(104, 100, Role.RANK, "S", "do_wait", "/bin/bash run.sh"),
            ProcessReport(105, 100, Role.RANK, "D", "", ""),
        ],
        stacks={
            "101": dump((MAIN, COLLECTIVE), PIN_MEMORY),
            "102": dump((MAIN, SETUP)),
            "103": dump((MAIN, LOADER)),
        },
        in_collective=[101],
        in_dataloader=[101, 103],
        gpu="0, 97 %, 70123 MiB\n1, 0 %, 2 MiB",
        ranks={101: 12, 102: 3},
        in_setup=[102],
    )
    assert len(diagnosis.processes[0].cmdline) == 200


def test_without_py_spy_or_nvidia_smi_the_diagnosis_has_no_stacks(proc: Path, tools: Path) -> None:
    proc_files(proc, 101, cmdline=b"python\0train.py\0", wchan=b"futex_wait\n", environ=b"RANK=0\0")
    diagnosis = diagnose(ListedTree(100, listed=[Proc(101, 100, "S", 1, "python")]))
    assert diagnosis == Diagnosis(
        DiagnosisMethod.NONE,
        [ProcessReport(101, 100, Role.RANK, "S", "futex_wait", "python train.py")],
        {},
        [],
        [],
        None,
        {101: 0},
        [],
    )


def test_the_diagnosis_record_and_each_process_in_it() -> None:
    rank = ProcessReport(101, 100, Role.RANK, "S", "do_epoll_wait", "python train.py")
    child = ProcessReport(103, 101, Role.WORKER_CHILD, "D", "", "python -c x")
    diagnosis = Diagnosis(DiagnosisMethod.PY_SPY, [rank, child], {"101": "s"}, [101], [103], "0, 5 %", {101: 7}, [9])
    assert child.to_json() == {
        "pid": 103,
        "ppid": 101,
        "role": "worker-child",
        "state": "D",
        "wchan": "",
        "cmdline": "python -c x",
    }
    assert diagnosis.to_json() == {
        "method": "py-spy",
        "ranks": {"101": 7},
        "processes": [rank.to_json(), child.to_json()],
        "in_collective": [101],
        "in_dataloader": [103],
        "in_setup": [9],
        "gpu": "0, 5 %",
    }


# -- the STALL lines and the stacks file -----------------------------------------------------------------------------


def test_summary_lines_name_each_process_where_they_wait_and_the_gpus() -> None:
    rank = ProcessReport(101, 100, Role.RANK, "S", "", "python " + "a" * 120)
    other = ProcessReport(102, 100, Role.RANK, "S", "futex", "python train.py")
    child = ProcessReport(103, 101, Role.WORKER_CHILD, "D", "nfs_read", "python -c w")
    diagnosis = Diagnosis(DiagnosisMethod.PY_SPY, [rank, other, child], {}, [101, 102], [], "0, 97 %, 1 MiB", {}, [102])
    lines = summary_lines(diagnosis)
    assert [line.en for line in lines] == [
        "STALL: 2 local rank process(es), 1 child process(es) (data-loader workers):",
        "STALL:   pid 101 rank state=S wchan=-  " + ("python " + "a" * 120)[:100],
        "STALL:   pid 102 rank state=S wchan=futex  python train.py",
        "STALL:   pid 103 worker-child state=D wchan=nfs_read  python -c w",
        "STALL: in a collective: [101, 102]; in data loading: none seen",
        "STALL: in process-group setup, waiting for every rank to connect: [102] (a rank never joined: a node lost "
        "or not started?)",
        "STALL: GPU (index, utilisation, memory): 0, 97 %, 1 MiB",
    ]
    assert [line.zh for line in lines] == [
        "STALL:本地 2 个 rank 进程,1 个子进程(数据加载 worker):",
        "STALL:  进程 101 rank 状态=S wchan=-  " + ("python " + "a" * 120)[:100],
        "STALL:  进程 102 rank 状态=S wchan=futex  python train.py",
        "STALL:  进程 103 worker-child 状态=D wchan=nfs_read  python -c w",
        "STALL:处于集合通信中:[101, 102];处于数据加载中:未发现",
        "STALL:处于进程组建立阶段、等待所有 rank 连接:[102](有 rank 始终未加入:节点丢失或未启动?)",
        "STALL:GPU(编号、利用率、显存):0, 97 %, 1 MiB",
    ]


def test_summary_lines_without_stacks_say_why() -> None:
    child = ProcessReport(103, 101, Role.WORKER_CHILD, "S", "pipe_read", "python -c w")
    diagnosis = Diagnosis(DiagnosisMethod.NONE, [child], {}, [], [103], None)
    lines = summary_lines(diagnosis)
    assert [line.en for line in lines] == [
        "STALL: 0 local rank process(es), 1 child process(es) (data-loader workers):",
        "STALL:   pid 103 worker-child state=S wchan=pipe_read  python -c w",
        "STALL: in a collective: none seen; in data loading: [103]",
        "STALL: no Python stacks: py-spy is not installed or may not read the processes (needs ptrace permission)",
    ]
    assert lines[-1].zh == "STALL:没有 Python 调用栈:未安装 py-spy,或它无权读取这些进程(需要 ptrace 权限)"


def test_write_stacks_puts_every_stack_under_its_pid(tmp_path: Path) -> None:
    path = tmp_path / "node0.stacks.txt"
    path.write_text("an older file's text, longer than the new one " * 20)
    diagnosis = Diagnosis(DiagnosisMethod.PY_SPY, [], {"101": "a (训练.py)\n", "102": "b"}, [], [], None)
    write_stacks(diagnosis, path)
    assert path.read_bytes() == "==== pid 101 ====\na (训练.py)\n\n==== pid 102 ====\nb\n".encode()


REPO = Path(__file__).parents[2]
WRITE_STACKS = """
import json, sys
from pathlib import Path
from entrypoint.launch.watchdog import Diagnosis, DiagnosisMethod, write_stacks
stacks = json.loads(sys.argv[2])
write_stacks(Diagnosis(DiagnosisMethod.PY_SPY, [], stacks, [], [], None), Path(sys.argv[1]))
"""


def test_the_stacks_file_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """Written by a launcher in the C locale (set once started) without UTF-8 mode, where a text file opened without
    an encoding is ASCII: a Chinese path and the mark py-spy's undecodable bytes became are kept."""
    path = tmp_path / "node0.stacks.txt"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    env.update(PYTHONUTF8="0", PYTHONPATH=str(REPO))
    code = f"import locale\nlocale.setlocale(locale.LC_CTYPE, 'C')\n{WRITE_STACKS}"
    stacks = json.dumps({"101": "a (训练.py)\n", "102": "b \ufffd"})
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), stacks],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert path.read_bytes() == "==== pid 101 ====\na (训练.py)\n\n==== pid 102 ====\nb \ufffd\n".encode()


# -- the watchdog's firing rules at their edges -----------------------------------------------------------------------


def test_exactly_at_the_limit_is_not_yet_a_stall() -> None:
    clock = Clock()
    dog = Watchdog(None, 40, Progress(clock=clock), started_at=10.0, clock=clock)
    clock.now = 50.0
    assert dog.check() is None
    clock.now = 50.5
    assert dog.check() == (40.5, 40.0)


def test_with_the_watchdog_off_a_restarted_attempt_never_fires() -> None:
    clock = Clock()
    progress = Progress(clock=clock)
    progress.feed("step=1 loss=0.5\n")
    dog = Watchdog(0, 5, progress, started_at=0.0, clock=clock)
    dog.new_attempt(1.0)
    clock.now = 1000.0
    assert dog.check() is None


def test_a_restart_before_any_progress_fires_again_after_the_start_up_allowance() -> None:
    clock = Clock()
    dog = Watchdog(None, 5, Progress(clock=clock), started_at=0.0, clock=clock)
    clock.now = 6.0
    assert dog.check() == (6.0, 5.0)
    dog.new_attempt(6.0)
    clock.now = 11.0
    assert dog.check() is None
    clock.now = 12.0
    assert dog.check() == (6.0, 5.0)
    assert dog.check() is None  # once per silence


def test_after_a_restart_the_fixed_limit_returns_with_the_first_progress() -> None:
    clock = Clock()
    progress = Progress(clock=clock)
    progress.feed("step=1 loss=0.5\n")
    dog = Watchdog(10, 50, progress, started_at=0.0, clock=clock)
    dog.new_attempt(20.0)
    clock.now = 60.0
    assert dog.check() is None  # 40 s since the restart, within the start-up allowance of 50
    progress.feed("step=2 loss=0.5\n")
    clock.now = 71.0
    assert dog.check() == (11.0, 10.0)


@pytest.mark.parametrize(
    "setting, longest, expected",
    [
        (None, 10.0, FLOOR_S),  # 3x a short save is below the usual bound
        (None, 100.0, 300.0),
        (30, 100.0, 300.0),  # a measured save outweighs even a fixed bound
        (30, None, 30.0),  # before the first save is measured, a fixed bound is the user's word
        (None, None, FIRST_SAVE_S),
    ],
    ids=["short-saves", "long-saves", "fixed-long-saves", "fixed-first-save", "auto-first-save"],
)
def test_the_bound_while_a_save_may_run(setting: int | None, longest: float | None, expected: float) -> None:
    saving = SaveWatch(interval=10, total=100)
    progress = Progress(clock=lambda: 0.0, saving=saving)
    progress.feed("step=1 loss=0.5\n")
    saving.started_at = 5.0
    saving.seconds = [] if longest is None else [longest / 2, longest]
    assert stall_limit(setting, 60, progress) == expected


def test_the_floor_holds_over_a_short_start_up_allowance_and_without_a_save_in_flight() -> None:
    progress = Progress(clock=lambda: 0.0, saving=SaveWatch(interval=10, total=100, seconds=[500.0]))
    progress.feed("step=1 loss=0.5\n")
    assert progress.saving is not None and progress.saving.started_at is None
    assert stall_limit(None, 60, progress) == FLOOR_S
