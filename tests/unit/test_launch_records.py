"""What the launcher records and reads around a training attempt, pinned in-process: the attempt shim's argv, its
resume decision shared through node 0's facts file (wait, fallback and its message), the facts it writes and the
store port of a restart; the flight recorder's dump pipes, dump files, traces and torch's analyser; the start-up
record's file; the process tree read from /proc; and the stall exchange between nodes (share and verdict)."""

from __future__ import annotations

import json
import locale
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest

from entrypoint import __version__
from entrypoint.launch import attempt as attempt_module
from entrypoint.launch import flight_recorder as fr
from entrypoint.launch import processes as processes_module
from entrypoint.launch import stall_exchange as exchange_module
from entrypoint.launch.attempt import (
    AttemptArgs,
    DecidedBy,
    Usage,
    attempt_port,
    decide,
    decision_file,
    facts,
    flag_value,
    main,
    parse,
    read_decision,
    redecide,
    shared_decision,
    trainer_args,
    write_facts,
)
from entrypoint.launch.culprit import GATHER_WAIT_S, Method, NodeReport, RankReport, parse_report, report_path
from entrypoint.launch.flight_recorder import (
    AnalyserRun,
    AnalyserStatus,
    RankTrace,
    analyse,
    behind,
    collect,
    lagging,
    locations,
    prepare,
    read_bounded,
    read_dump,
    request_dumps,
    training_python,
    wait_for_dumps,
)
from entrypoint.launch.processes import Proc, ProcessTree, all_processes, descendants, read_proc
from entrypoint.launch.record import StartupRecord
from entrypoint.launch.stall_exchange import Exchange
from entrypoint.launch.watchdog import Diagnosis, DiagnosisMethod
from tests.support.files import small_text
from tests.support.jobfiles import shim_trainer_args
from tests.support.stall import BARRIER, SLEEP
from tests.support.synthetic import make_checkpoint

# ==== the attempt shim (entrypoint/launch/attempt.py) ============================================================


planned = shim_trainer_args  # checkpoints under the folder given


def resumed(base: Path, flag: str = "--resume") -> list[str]:
    return [*planned(base)[:-2], flag, "--no-overwrite"]


def decision_json(base: Path, action: str, step: int | None, complete: list[int], **extra: list[str]) -> dict:
    exp = base / "pi05_libero" / "exp"
    return {
        "action": action,
        "step": step,
        "experiment_dir": str(exp),
        "complete_steps": complete,
        "leftovers": extra.get("leftovers", []),
        "set_aside": extra.get("set_aside", []),
    }


def test_parse_reads_both_options_in_any_order() -> None:
    assert parse(["--facts", "/f", "--health", "fail", "train.py", "--a", "1"]) == AttemptArgs(
        Path("/f"), "train.py", ["--a", "1"], "fail"
    )
    assert parse(["--health", "warn", "--facts", "/g", "t.py"]) == AttemptArgs(Path("/g"), "t.py", [], "warn")
    assert parse(["t.py", "--facts", "x"]) == AttemptArgs(None, "t.py", ["--facts", "x"], None)


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--facts"], "--facts needs a value"),
        (["--facts", "/f", "--health"], "--health needs a value"),
        ([], "no trainer script given"),
        (["--facts", "/f"], "no trainer script given"),
        (["--health", "maybe", "t.py"], "--health maybe: warn or fail expected"),
    ],
)
def test_parse_refuses_an_argv_the_plan_never_builds(argv: list[str], problem: str) -> None:
    with pytest.raises(Usage) as refused:
        parse(argv)
    assert str(refused.value) == problem


@pytest.mark.parametrize(
    "args, value",
    [
        (["--exp-name", "a"], "a"),
        (["--exp_name", "a"], "a"),
        (["--exp-name=a=b"], "a=b"),
        (["--exp_name="], ""),
        (["--exp-name", "a", "--exp-name=b"], "b"),
        (["--exp-name", "a", "--exp-name"], "a"),
        (["--exp-namer", "a", "exp-name", "b"], None),
        ([], None),
    ],
)
def test_flag_value_takes_the_last_value_in_either_spelling(args: list[str], value: str | None) -> None:
    assert flag_value(args, "--exp-name") == value


def test_trainer_args_follow_the_decision_and_never_overwrite() -> None:
    trainer = ["cfg", "--no-resume", "--overwrite", "--x", "1", "--resume"]
    assert trainer_args(trainer, {"action": "resume"}) == (
        ["cfg", "--resume", "--no-overwrite", "--x", "1", "--resume"],
        True,
    )
    assert trainer_args(["cfg", "--resume"], {"action": "fresh"}) == (["cfg", "--no-resume"], True)
    assert trainer_args(["cfg"], {"action": "resume"}) == (["cfg", "--resume"], True)
    assert trainer_args(["cfg"], {}) == (["cfg", "--no-resume"], True)
    assert trainer_args(["cfg", "--no-resume"], {"action": "finished"}) == (["cfg", "--no-resume"], False)


def test_redecide_resumes_and_only_global_rank_0_sets_incomplete_folders_aside(tmp_path: Path, monkeypatch) -> None:
    base = tmp_path / "ckpt"
    exp = base / "pi05_libero" / "exp"
    make_checkpoint(exp, 25)
    make_checkpoint(exp, 50, missing="optimizer.pt")
    expected = decision_json(
        base, "resume", 25, [25], leftovers=["50 (missing optimizer.pt)"], set_aside=[str(exp / "50")]
    )
    monkeypatch.setenv("RANK", "1")
    assert redecide(planned(base)) == (resumed(base), expected, True)
    assert sorted(os.listdir(exp)) == ["25", "50"]  # another rank moves nothing
    monkeypatch.setenv("RANK", "0")
    assert redecide(planned(base)) == (resumed(base), expected, True)
    assert "50" not in os.listdir(exp) and len(os.listdir(exp)) == 2


def test_redecide_finds_a_relative_folder_and_a_finished_experiment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK", "0")
    make_checkpoint(tmp_path / "ckpt" / "pi05_libero" / "exp", 100)
    trainer = planned(Path("ckpt"))
    expected = decision_json(tmp_path / "ckpt", "finished", 100, [100])
    assert redecide(trainer) == ([*trainer[:-2], "--no-resume", "--no-overwrite"], expected, False)


def test_redecide_reads_the_config_and_save_interval_it_is_given(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RANK", "0")
    exp = tmp_path / "pi0_aloha" / "exp"
    make_checkpoint(exp, 99)  # 100 steps, a save every 40: openpi's last save is step 99
    trainer = ["pi0_aloha", "--exp-name", "exp", "--num-train-steps", "100", "--save-interval", "40"]
    trainer += ["--checkpoint-base-dir", str(tmp_path), "--resume", "--no-overwrite"]
    expected = {
        "action": "finished",
        "step": 99,
        "experiment_dir": str(exp),
        "complete_steps": [99],
        "leftovers": [],
        "set_aside": [],
    }
    assert redecide(trainer) == ([*trainer[:-2], "--no-resume", "--no-overwrite"], expected, False)


@pytest.mark.parametrize("drop", ["--exp-name", "--num-train-steps", "--save-interval", "--checkpoint-base-dir", "*"])
def test_redecide_refuses_arguments_without_the_launchers_flags(tmp_path: Path, drop: str) -> None:
    trainer = planned(tmp_path)
    trainer = [] if drop == "*" else [a for i, a in enumerate(trainer) if drop not in trainer[max(i - 1, 0) : i + 1]]
    with pytest.raises(Usage) as refused:
        redecide(trainer)
    assert str(refused.value) == "the trainer arguments lack the launcher's checkpoint flags"


def test_the_store_port_of_a_restart_stays_a_port() -> None:
    assert [attempt_port(29500, 1), attempt_port(29500, 3)] == [29502, 29504]
    assert [attempt_port(65533, 1), attempt_port(65533, 2), attempt_port(65534, 1)] == [65535, 65530, 65532]


STAMPS = {0: "20261203-120000", 1: "20261203-120002"}


def node_folder(logs: Path, node: int) -> Path:
    """Node `node`'s attempts folder with the `0.json` of its first attempt."""
    folder = logs / f"exp-node{node}-{STAMPS[node]}.attempts"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "0.json").exists():
        (folder / "0.json").write_text("{}")
    return folder


def record_decision(folder: Path, restart: int, decision: object, count: object = None) -> None:
    body = {"restart_count": restart if count is None else count, "resume": decision}
    (folder / f"{restart}.json").write_text(json.dumps(body))


def test_the_decision_file_is_node_0s_own_or_its_newest_peer(tmp_path: Path) -> None:
    own = node_folder(tmp_path, 1)
    assert decision_file(own, 2, 1) is None
    node0 = node_folder(tmp_path, 0)
    assert decision_file(node0, 2, 0) == node0 / "2.json"
    record_decision(node0, 2, {"action": "fresh"})
    assert decision_file(own, 2, 1) == node0 / "2.json"


def test_a_worker_takes_node_0s_decision_not_a_newer_file_of_another_node(tmp_path: Path) -> None:
    node0, node1 = node_folder(tmp_path, 0), node_folder(tmp_path, 1)
    own = tmp_path / "exp-node2-20261203-120004.attempts"
    own.mkdir()
    (own / "0.json").write_text("{}")
    record_decision(node0, 2, {"action": "fresh"})
    record_decision(node1, 2, {"action": "resume", "step": 25})  # node 1's own facts, after it decided alone
    now = time.time()
    for path, written in ((own / "0.json", now - 20), (node0 / "2.json", now - 10), (node1 / "2.json", now)):
        os.utime(path, (written, written))
    assert decision_file(own, 2, 2) == node0 / "2.json"
    assert read_decision(own, 2, 2) == {"action": "fresh"}


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"restart_count": 4, "resume": {"action": "resume"}}),
        json.dumps({"restart_count": 3, "resume": ["resume"]}),
        json.dumps({"restart_count": 3, "resume": {"action": "rewind"}}),
        json.dumps({"restart_count": 3, "resume": {"step": 1}}),
        json.dumps({"restart_count": 3}),
        " " * (65 << 10),
    ],
    ids=["garbled", "a-list", "another-restart", "not-an-object", "unknown-action", "no-action", "none", "huge"],
)
def test_a_facts_file_that_says_no_decision_is_no_decision(tmp_path: Path, body: str) -> None:
    node0 = node_folder(tmp_path, 0)
    (node0 / "3.json").write_text(body)
    assert read_decision(node0, 3, 0) is None


def test_the_decision_is_read_from_node_0s_facts(tmp_path: Path) -> None:
    own, node0 = node_folder(tmp_path, 1), node_folder(tmp_path, 0)
    assert read_decision(own, 3, 1) is None  # no file yet
    assert read_decision(node0, 3, 0) is None
    for action in ("fresh", "resume", "overwrite", "finished"):
        record_decision(node0, 3, {"action": action, "step": 7})
        assert read_decision(own, 3, 1) == read_decision(node0, 3, 0) == {"action": action, "step": 7}


class Ticks:
    """A clock moved only by the naps it is asked for; refuses to nap forever."""

    def __init__(self) -> None:
        self.now = 0.0
        self.naps: list[float] = []

    def clock(self) -> float:
        return self.now

    def nap(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds
        assert len(self.naps) < 20, "napping forever"


def test_the_wait_for_a_decision_ends_at_its_deadline(tmp_path: Path) -> None:
    own = node_folder(tmp_path, 1)
    ticks = Ticks()
    assert shared_decision(own, 3, 1, wait_s=1.0, clock=ticks.clock, sleep=ticks.nap) is None
    assert ticks.naps == [0.25, 0.25, 0.25, 0.25]
    ticks = Ticks()
    assert shared_decision(own, 3, 1, wait_s=0.625, clock=ticks.clock, sleep=ticks.nap) is None
    assert ticks.naps == [0.25, 0.25, 0.125]


def test_the_wait_never_naps_a_negative_time(tmp_path: Path) -> None:
    own = node_folder(tmp_path, 1)
    times = iter([0.0, 0.9, 1.3, 1.4])
    naps: list[float] = []
    assert shared_decision(own, 3, 1, wait_s=1.0, clock=lambda: next(times), sleep=naps.append) is None
    assert naps == [0.0]


def test_the_wait_returns_a_decision_already_there_without_napping(tmp_path: Path) -> None:
    own, node0 = node_folder(tmp_path, 1), node_folder(tmp_path, 0)
    record_decision(node0, 3, {"action": "fresh", "step": None})
    ticks = Ticks()
    assert shared_decision(own, 3, 1, wait_s=5, clock=ticks.clock, sleep=ticks.nap) == {"action": "fresh", "step": None}
    assert ticks.naps == []


def test_global_rank_0_or_a_worker_without_facts_decides_itself(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    base = tmp_path / "ckpt"
    make_checkpoint(base / "pi05_libero" / "exp", 25)
    node0 = node_folder(tmp_path / "logs", 0)
    record_decision(node0, 2, {"action": "fresh", "step": None})  # never read by these two
    expected = (resumed(base), decision_json(base, "resume", 25, [25]), True, DecidedBy.SELF)
    assert decide(AttemptArgs(node0, "t.py", planned(base)), 2, {"RANK": "0"}, wait_s=0) == expected
    assert decide(AttemptArgs(None, "t.py", planned(base)), 2, {"RANK": "5", "GROUP_RANK": "1"}) == expected


@pytest.mark.parametrize("group_rank", [None, ""])
def test_a_worker_of_node_0_takes_rank_0s_decision_from_its_own_folder(tmp_path: Path, group_rank: str | None) -> None:
    base = tmp_path / "ckpt"
    make_checkpoint(base / "pi05_libero" / "exp", 25)  # the folder says resume; rank 0 said fresh
    node0 = node_folder(tmp_path / "logs", 0)
    record_decision(node0, 2, {"action": "fresh", "step": None})
    env = {"RANK": "1"} | ({} if group_rank is None else {"GROUP_RANK": group_rank})
    shared = {"action": "fresh", "step": None}
    got = decide(AttemptArgs(node0, "t.py", planned(base, "--resume")), 2, env, wait_s=0)
    assert got == (resumed(base, "--no-resume"), shared, True, DecidedBy.RANK_0)


def test_a_worker_of_another_node_takes_a_finished_decision_and_trains_nothing(tmp_path: Path) -> None:
    own, node0 = node_folder(tmp_path / "logs", 1), node_folder(tmp_path / "logs", 0)
    record_decision(node0, 2, {"action": "finished", "step": 100})
    got = decide(AttemptArgs(own, "t.py", planned(tmp_path)), 2, {"RANK": "2", "GROUP_RANK": "1"}, wait_s=0)
    assert got == (planned(tmp_path), {"action": "finished", "step": 100}, False, DecidedBy.RANK_0)


NO_DECISION = (
    "vla-entrypoint: restart {restart}, node {node}: no resume decision from global rank 0 within {waited} s "
    "(looked for {where}); this node decided from the checkpoint folder itself: {action}. Had node 0 decided "
    "otherwise, the nodes start from different checkpoints: compare resume_decided_by in the nodes' start-up "
    "records.\n"
)


@pytest.mark.parametrize(
    "folder, node, where",
    [
        ("exp-node1-20261203-120002.attempts", "1", "{logs}/exp-node0-*.attempts/3.json"),
        ("exp-node0-20261203-120000.attempts", "0", "{logs}/exp-node0-20261203-120000.attempts/3.json"),
        ("odd.attempts", "1", "{logs}/odd.attempts/3.json"),
    ],
    ids=["peer-node", "node-0", "unnamed-folder"],
)
def test_no_decision_in_time_falls_back_and_says_where_it_looked(
    tmp_path: Path, capsys, folder: str, node: str, where: str
) -> None:
    logs = tmp_path / "logs"
    own = logs / folder
    own.mkdir(parents=True)
    (own / "0.json").write_text("{}")
    base = tmp_path / "ckpt"
    make_checkpoint(base / "pi05_libero" / "exp", 50)
    env = {"RANK": "3", "GROUP_RANK": node, "VLA_LANG": "en"}
    got = decide(AttemptArgs(own, "t.py", planned(base)), 3, env, wait_s=0)
    assert got == (resumed(base), decision_json(base, "resume", 50, [50]), True, DecidedBy.FALLBACK)
    line = NO_DECISION.format(restart=3, node=node, waited=0, where=where.format(logs=logs), action="resume")
    assert capsys.readouterr().err == line


def test_only_local_rank_0_says_it_decided_alone(tmp_path: Path, capsys) -> None:
    own = node_folder(tmp_path / "logs", 1)
    env = {"RANK": "3", "LOCAL_RANK": "1", "GROUP_RANK": "1", "VLA_LANG": "en"}
    got = decide(AttemptArgs(own, "t.py", planned(tmp_path / "ckpt")), 3, env, wait_s=0)
    assert got[1:] == (decision_json(tmp_path / "ckpt", "fresh", None, []), True, DecidedBy.FALLBACK)
    assert capsys.readouterr().err == ""


def test_the_facts_of_an_attempt(monkeypatch) -> None:
    monkeypatch.setattr(attempt_module, "time", SimpleNamespace(time=lambda: 1700000000.123456))
    env = {"LOCAL_WORLD_SIZE": "2", "RANK": "4", "GROUP_RANK": "2", "MASTER_PORT": "29503"}
    assert facts(env, 3, {"action": "fresh"}, DecidedBy.RANK_0) == {
        "restart_count": 3,
        "node_rank": 2,
        "ranks": [4, 5],
        "store_port": 29503,
        "resume": {"action": "fresh"},
        "resume_decided_by": "rank-0",
        "started_unix": 1700000000.123,
        "pid": os.getpid(),
    }
    assert facts({}, 0, None) == {
        "restart_count": 0,
        "node_rank": 0,
        "ranks": [0],
        "store_port": None,
        "resume": None,
        "resume_decided_by": None,
        "started_unix": 1700000000.123,
        "pid": os.getpid(),
    }


@pytest.mark.parametrize(
    ("port", "recorded"), [("", None), ("port", None), ("70000", None), ("65536", None), ("65535", 65535)]
)
def test_a_store_port_that_is_not_a_port_is_recorded_as_none(port: str, recorded: int | None) -> None:
    assert facts({"MASTER_PORT": port}, 1, None)["store_port"] == recorded


def test_facts_are_written_whole_and_a_storage_problem_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b.attempts"
    write_facts(folder, 2, {"restart_count": 2, "text": "第"})
    write_facts(folder, 3, {"restart_count": 3})
    assert sorted(os.listdir(folder)) == ["2.json", "3.json"]
    assert json.loads(small_text(folder / "2.json")) == {"restart_count": 2, "text": "第"}
    blocked = tmp_path / "file"
    blocked.write_text("x")
    write_facts(blocked, 1, {})  # no exception: training goes on
    assert blocked.read_text() == "x"


# -- the shim's main, in this process: the trainer's exec and the health gate are stand-ins --


@contextmanager
def shim(env: Mapping[str, str], monkeypatch, gate: int | None = None) -> Iterator[dict[str, Any]]:
    """Run `main` with exactly `env`; the dict gets `exec` (what os.execv got), `gate` (the gate's arguments and
    the environment it saw), `env` (the environment after main)."""
    seen: dict[str, Any] = {}

    def execv(path: str, argv: list[str]) -> None:
        seen["exec"] = (path, argv)

    def gate_restart(facts_dir: Path, restart: int, mode: str, environ: Mapping[str, str]) -> int:
        seen["gate"] = (facts_dir, restart, mode, dict(environ))
        assert gate is not None
        return gate

    import entrypoint.health.restart as health_restart

    monkeypatch.setattr(attempt_module.os, "execv", execv)
    monkeypatch.setattr(health_restart, "gate_restart", gate_restart)
    with mock.patch.dict(os.environ, dict(env), clear=True):
        yield seen
        seen["env"] = dict(os.environ)


def test_main_refuses_a_bad_argv_with_exit_2(monkeypatch, capsys) -> None:
    with shim({}, monkeypatch) as seen:
        assert main(["--health", "maybe", "t.py"]) == 2
    assert capsys.readouterr().err == "entrypoint.launch.attempt: --health maybe: warn or fail expected\n"
    assert "exec" not in seen


@pytest.mark.parametrize("count", [None, "", "0"])
def test_main_runs_the_first_attempt_as_planned(tmp_path: Path, monkeypatch, count: str | None) -> None:
    env = {"MASTER_PORT": "29500", "RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    env |= {} if count is None else {"TORCHELASTIC_RESTART_COUNT": count}
    trainer = planned(tmp_path / "ckpt", "--resume")
    with shim(env, monkeypatch) as seen:
        assert main(["--facts", str(tmp_path / "f"), "--health", "fail", "train.py", *trainer]) == 0
    assert seen["exec"] == (sys.executable, [sys.executable, "-u", "train.py", *trainer])
    assert seen["env"] == env and "gate" not in seen
    recorded = json.loads(small_text(tmp_path / "f" / "0.json"))
    assert (recorded["restart_count"], recorded["ranks"], recorded["resume"], recorded["resume_decided_by"]) == (
        0,
        [0, 1],
        None,
        None,
    )
    assert recorded["store_port"] == 29500 and recorded["pid"] == os.getpid()


def test_main_restarts_on_a_store_of_its_own_after_the_gate(tmp_path: Path, monkeypatch) -> None:
    base = tmp_path / "ckpt"
    make_checkpoint(base / "pi05_libero" / "exp", 25)
    env = {"TORCHELASTIC_RESTART_COUNT": "2", "MASTER_PORT": "29500", "RANK": "0", "LOCAL_RANK": "0"}
    with shim(env, monkeypatch, gate=0) as seen:
        assert main(["--facts", str(tmp_path / "f"), "--health", "warn", "train.py", *planned(base)]) == 0
    restarted = env | {"MASTER_PORT": "29503", "TORCHELASTIC_USE_AGENT_STORE": "False"}
    assert seen["exec"] == (sys.executable, [sys.executable, "-u", "train.py", *resumed(base)])
    assert seen["gate"] == (tmp_path / "f", 2, "warn", restarted) and seen["env"] == restarted
    recorded = json.loads(small_text(tmp_path / "f" / "2.json"))
    assert recorded["resume"] == decision_json(base, "resume", 25, [25]) and recorded["store_port"] == 29503
    assert (recorded["restart_count"], recorded["resume_decided_by"]) == (2, "self")


def test_a_faulty_node_ends_with_the_gates_code(tmp_path: Path, monkeypatch) -> None:
    env = {"TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0"}
    with shim(env, monkeypatch, gate=93) as seen:
        assert main(["--facts", str(tmp_path / "f"), "--health", "fail", "t.py", *planned(tmp_path)]) == 93
    assert "exec" not in seen and seen["gate"][:3] == (tmp_path / "f", 1, "fail")
    assert seen["env"] == env  # no MASTER_PORT: none to move


def test_a_restart_without_facts_or_health_mode_runs_no_gate(tmp_path: Path, monkeypatch) -> None:
    env = {"TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0", "MASTER_PORT": "port"}  # not a number: left alone
    with shim(env, monkeypatch) as seen:
        assert main(["--health", "fail", "t.py", *planned(tmp_path)]) == 0
    with shim({"TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0"}, monkeypatch) as other:
        assert main(["--facts", str(tmp_path / "f"), "t.py", *planned(tmp_path)]) == 0
    assert "gate" not in seen and "gate" not in other and seen["env"] == env
    assert seen["exec"][1][3:] == other["exec"][1][3:] == planned(tmp_path)
    assert os.listdir(tmp_path / "f") == ["1.json"]


def test_main_after_the_last_save_trains_nothing(tmp_path: Path, monkeypatch) -> None:
    make_checkpoint(tmp_path / "pi05_libero" / "exp", 100)
    env = {"TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0"}
    with shim(env, monkeypatch, gate=93) as seen:
        assert main(["--facts", str(tmp_path / "f"), "--health", "fail", "t.py", *planned(tmp_path)]) == 0
    assert "exec" not in seen and "gate" not in seen
    assert json.loads(small_text(tmp_path / "f" / "1.json"))["resume"]["action"] == "finished"


def test_only_local_rank_0_writes_the_facts(tmp_path: Path, monkeypatch) -> None:
    with shim({"LOCAL_RANK": "1"}, monkeypatch) as seen:
        assert main(["--facts", str(tmp_path / "f"), "t.py"]) == 0
    assert seen["exec"] == (sys.executable, [sys.executable, "-u", "t.py"]) and not (tmp_path / "f").exists()


def test_a_restarted_worker_of_node_0_trains_as_global_rank_0_decided(tmp_path: Path, monkeypatch, capsys) -> None:
    base = tmp_path / "ckpt"
    make_checkpoint(base / "pi05_libero" / "exp", 25)  # the folder says resume; rank 0 said fresh
    node0 = node_folder(tmp_path / "logs", 0)
    record_decision(node0, 2, {"action": "fresh", "step": None})
    real = attempt_module.shared_decision
    monkeypatch.setattr(  # no two-minute wait where no decision is found
        attempt_module, "shared_decision", lambda folder, restart, node, wait_s: real(folder, restart, node, 0)
    )
    env = {"TORCHELASTIC_RESTART_COUNT": "2", "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0", "MASTER_PORT": "29500"}
    with shim(env, monkeypatch) as seen:
        assert main(["--facts", str(node0), "t.py", *planned(base, "--resume")]) == 0
    assert seen["exec"] == (sys.executable, [sys.executable, "-u", "t.py", *resumed(base, "--no-resume")])
    assert seen["env"] == env | {"MASTER_PORT": "29503", "TORCHELASTIC_USE_AGENT_STORE": "False"}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "steps, problem",
    [
        ("abc", "invalid literal for int() with base 10: 'abc'"),
        (None, "the trainer arguments lack the launcher's checkpoint flags"),
    ],
)
def test_a_restart_with_unusable_trainer_arguments_ends_with_2(
    tmp_path: Path, monkeypatch, capsys, steps: str | None, problem: str
) -> None:
    trainer = planned(tmp_path)
    trainer = trainer[:3] + trainer[5:] if steps is None else [*trainer[:4], steps, *trainer[5:]]
    with shim({"TORCHELASTIC_RESTART_COUNT": "1", "RANK": "0"}, monkeypatch) as seen:
        assert main(["--facts", str(tmp_path / "f"), "t.py", *trainer]) == 2
    assert capsys.readouterr().err == f"entrypoint.launch.attempt: {problem}\n"
    assert "exec" not in seen and not (tmp_path / "f").exists()


# ==== the flight recorder (entrypoint/launch/flight_recorder.py) =================================================


def test_locations_take_the_first_name_set() -> None:
    assert locations({}) == (None, None)
    both = {"TORCH_FR_DUMP_TEMP_FILE": "/a/rank_", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/b/rank_"}
    assert locations(both | {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "/p/pipe_"}) == ("/a/rank_", "/p/pipe_")
    assert locations(both | {"TORCH_FR_DUMP_TEMP_FILE": "", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": ""}) == (
        "/b/rank_",
        None,
    )


def test_prepare_creates_the_dump_folder_or_returns_why_not(tmp_path: Path) -> None:
    assert prepare({}) is None
    env = {"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "a" / "b" / "rank_")}
    assert prepare(env) is None and prepare(env) is None
    assert (tmp_path / "a" / "b").is_dir() and os.listdir(tmp_path / "a" / "b") == []
    (tmp_path / "file").write_text("x")
    error = prepare({"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "file" / "fr" / "rank_")})
    assert isinstance(error, OSError) and error.filename == str(tmp_path / "file" / "fr")


def test_a_dump_is_asked_through_each_ranks_pipe_without_blocking(tmp_path: Path) -> None:
    prefix = str(tmp_path / "pipe_")
    os.mkfifo(f"{prefix}0.pipe")
    os.mkfifo(f"{prefix}2.pipe")  # nobody reads it: skipped
    os.mkfifo(f"{prefix}3.pipe")
    (tmp_path / "pipe_4.pipe").write_text("")  # not a FIFO
    reader0 = os.open(f"{prefix}0.pipe", os.O_RDONLY | os.O_NONBLOCK)
    reader3 = os.open(f"{prefix}3.pipe", os.O_RDONLY | os.O_NONBLOCK)
    filler = os.open(f"{prefix}3.pipe", os.O_WRONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(BlockingIOError):  # rank 3's pipe is full: its write fails
            while True:
                os.write(filler, b"x" * 65536)
        assert request_dumps(prefix, [1, 4, 2, 3, 0]) == [0]  # asked past the others
        assert os.read(reader0, 10) == b"1"
        assert (tmp_path / "pipe_4.pipe").read_text() == ""
    finally:
        for fd in (reader0, reader3, filler):
            os.close(fd)


def test_wait_for_dumps_counts_fresh_regular_dumps_until_its_deadline(tmp_path: Path) -> None:
    prefix = str(tmp_path / "rank_")
    for name, body, mtime in (("0", b"x", 1000), ("1", b"", 2000), ("3", b"x", 999.5), ("5", b"x", 3000)):
        (tmp_path / f"rank_{name}").write_bytes(body)
        os.utime(tmp_path / f"rank_{name}", (mtime, mtime))
    (tmp_path / "rank_2").mkdir()
    ticks = Ticks()
    got = wait_for_dumps(prefix, [5, 3, 0, 0, 1, 2, 4], since=1000.0, timeout=1.0, clock=ticks.clock, pause=ticks.nap)
    assert got == [0, 5] and ticks.naps == [0.5, 0.5]
    ticks = Ticks()
    assert wait_for_dumps(prefix, [5, 0, 0], 1000.0, timeout=5, clock=ticks.clock, pause=ticks.nap) == [0, 5]
    assert ticks.naps == []


def test_read_bounded_reads_regular_files_up_to_the_limit(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"0123456789")
    assert read_bounded(small, 10) == b"0123456789" and read_bounded(small, 11) == b"0123456789"
    assert read_bounded(small, 9) is None
    big = tmp_path / "big"
    body = bytes(range(256)) * 10240  # 2.5 MiB: several reads
    big.write_bytes(body)
    assert read_bounded(big, 3 << 20) == body and read_bounded(big, len(body)) == body
    os.mkfifo(tmp_path / "fifo")
    assert read_bounded(tmp_path / "fifo", 10) is None
    assert read_bounded(tmp_path, 1 << 20) is None and read_bounded(tmp_path / "missing", 10) is None
    status = Path("/proc/self/status")  # says size 0, holds more than 100 bytes
    assert read_bounded(status, 100) is None and (read_bounded(status, 1 << 20) or b"").startswith(b"Name:")


def test_read_bounded_gives_none_when_reading_fails(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "f").write_bytes(b"abc")

    def failing(fd: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(fr.os, "read", failing)
        got = read_bounded(tmp_path / "f", 10)
    assert got is None


def test_read_bounded_refuses_a_file_that_grows_while_read_and_reads_no_further(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "rank_0"
    path.write_bytes(b"a" * (1 << 20))
    real_fstat, real_read = os.fstat, os.read
    read: list[int] = []

    def fstat(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        with path.open("ab") as grows:  # torch writes on just after the file was measured
            grows.write(b"b" * (1 << 20))
        return info

    def reading(fd: int, size: int) -> bytes:
        chunk = real_read(fd, size)
        read.append(len(chunk))
        return chunk

    with monkeypatch.context() as patched:
        patched.setattr(fr.os, "fstat", fstat)
        patched.setattr(fr.os, "read", reading)
        got = read_bounded(path, 1 << 20)
    assert got is None and sum(read) == (1 << 20) + 1


def dump(path: Path, entries: object) -> Path:
    path.write_bytes(pickle.dumps({"version": "2.10", "entries": entries}))
    return path


def collective(seq: object, name: object, state: str = "scheduled", group: object = ("0", "default_pg")) -> dict:
    return {"process_group": group, "collective_seq_id": seq, "profiling_name": name, "state": state}


def test_a_dump_gives_the_last_collectives_of_the_default_group(tmp_path: Path) -> None:
    entries = [
        collective(3, "nccl:all_reduce", "completed"),
        collective(3, "nccl:broadcast", "completed"),  # the same sequence number again: the first one stays
        collective(5, "nccl:all_gather", "started", group=["0"]),
        collective(5, "nccl:again", "started", group="0"),
        collective(4, "nccl:reduce", "completed", group=0),
        collective(4, "nccl:reduce_again", "completed"),  # the first completion of #4 stays
        collective(8, "nccl:group_01", "completed", group="01"),
        collective(9, "nccl:other_group", "completed", group=("1", "pg")),
        collective(9, "nccl:no_group", "completed", group=[]),
        collective("10", "nccl:text_seq", "completed"),
        collective(11, "nccl:p2p", "completed") | {"is_p2p": True},
        "not an entry",
    ]
    trace = read_dump(dump(tmp_path / "rank_3", entries), 3)
    assert trace == RankTrace(3, 5, "nccl:all_gather", 4, "nccl:reduce")
    assert trace.to_json() == {
        "rank": 3,
        "last_entered": {"seq": 5, "op": "nccl:all_gather"},
        "last_completed": {"seq": 4, "op": "nccl:reduce"},
    }
    assert read_dump(dump(tmp_path / "rank_4", [collective(2, None)]), 4) == RankTrace(4, 2, "None", None, None)
    assert read_dump(dump(tmp_path / "rank_5", []), 5) == RankTrace(5, None, None, None, None)


def test_a_dump_reads_past_other_entries_wherever_they_stand(tmp_path: Path) -> None:
    entries = [
        "not an entry",
        collective(7, "nccl:p2p", "completed") | {"is_p2p": True},
        collective(8, "nccl:other_group", "completed", group=("1", "pg")),
        collective("9", "nccl:text_seq", "completed"),
        collective(2, "nccl:all_reduce", "completed"),
        collective(3, "nccl:broadcast"),
    ]
    trace = read_dump(dump(tmp_path / "rank_1", entries), 1)
    assert trace == RankTrace(1, 3, "nccl:broadcast", 2, "nccl:all_reduce")


@pytest.mark.parametrize(
    "data",
    [
        pickle.dumps(["entries"]),
        pickle.dumps({"entries": "none"}),
        pickle.dumps({}),
        pickle.dumps(Path("x")),
        b"not a pickle",
        b"",
    ],
    ids=["a-list", "entries-not-a-list", "no-entries", "a-class", "garbage", "empty"],
)
def test_what_is_not_a_dump_gives_no_trace(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "rank_0").write_bytes(data)
    assert read_dump(tmp_path / "rank_0", 0) is None


def test_a_missing_dump_gives_no_trace(tmp_path: Path) -> None:
    assert read_dump(tmp_path / "rank_0", 0) is None


def test_the_ranks_behind_the_front() -> None:
    assert behind([]) == [] and behind([RankTrace(0, 5, "a", None, None)]) == []
    assert behind([RankTrace(0, 5, "a", None, None), RankTrace(1, None, None, None, None)]) == []
    traces = [
        RankTrace(3, 5, "a", None, None),
        RankTrace(0, 7, "b", 6, "b"),
        RankTrace(2, None, None, None, None),
        RankTrace(1, 5, "a", None, None),
        RankTrace(4, 7, "c", None, None),
    ]
    assert behind(traces) == [1, 3]
    assert lagging(traces) == {3: (5, 7, "b"), 1: (5, 7, "b")}
    assert lagging([RankTrace(0, 3, "a", None, None), RankTrace(1, 3, "a", None, None)]) == {}
    assert lagging([RankTrace(0, 0, "a", None, None), RankTrace(1, 1, "b", None, None)]) == {0: (0, 1, "b")}
    nameless = [RankTrace(2, 0, "x", None, None), RankTrace(0, 3, None, None, None), RankTrace(1, 3, "y", None, None)]
    assert lagging(nameless) == {2: (0, 3, "?")}


def test_an_analyser_run_as_json() -> None:
    run = AnalyserRun(AnalyserStatus.TIMED_OUT, None, ("a", "b"))
    assert run.to_json() == {"status": "timed-out", "exit_code": None, "output_tail": ["a", "b"]}


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_the_training_python_is_torchruns_interpreter_else_python3_on_path(tmp_path: Path) -> None:
    python = executable(tmp_path / "venv" / "bin" / "python3.11", "#!/bin/sh\n")
    on_path = executable(tmp_path / "path" / "python3", "#!/bin/sh\n")
    env = {"PATH": str(tmp_path / "path")}
    torchrun = tmp_path / "torchrun"
    torchrun.write_bytes(f"#!{python} -E \xff\nimport sys\n".encode("latin-1"))
    assert training_python(str(torchrun), env) == str(python)
    assert training_python(str(torchrun), {}) == str(python)
    for head in ("#!/bin/sh\n", f"#!\n{python}\n", f"{python}\n", f"#!{python.parent / 'python'}\n", "#!"):
        torchrun.write_text(head)
        assert training_python(str(torchrun), env) == str(on_path), head
    plain = tmp_path / "venv" / "bin" / "python3"
    plain.write_text("")  # not executable
    torchrun.write_text(f"#!{plain}\n")
    assert training_python(str(torchrun), env) == str(on_path)
    assert training_python(str(tmp_path / "missing"), env) == str(on_path)
    assert training_python(str(tmp_path / "missing"), {"PATH": str(tmp_path / "venv")}) is None


def test_a_torchrun_over_a_mebibyte_is_not_read_for_its_interpreter(tmp_path: Path) -> None:
    python = executable(tmp_path / "venv" / "bin" / "python3", "#!/bin/sh\n")
    on_path = executable(tmp_path / "path" / "python3", "#!/bin/sh\n")
    env = {"PATH": str(tmp_path / "path")}
    torchrun = tmp_path / "torchrun"
    head = f"#!{python}\n".encode()
    torchrun.write_bytes(head.ljust(1 << 20, b"#"))
    assert training_python(str(torchrun), env) == str(python)
    torchrun.write_bytes(head.ljust((1 << 20) + 1, b"#"))
    assert training_python(str(torchrun), env) == str(on_path)


def test_the_analyser_runs_on_the_folder_with_the_trainers_environment(tmp_path: Path) -> None:
    fake = executable(tmp_path / "python", '#!/bin/sh\necho "args: $*"\necho "mark: $MARK" >&2\n')
    run = analyse(tmp_path / "all", str(fake), {"MARK": "m1"})
    args = f"args: -m torch.distributed.flight_recorder.fr_trace {tmp_path / 'all'} -p rank_"
    assert run == AnalyserRun(AnalyserStatus.OK, 0, (args, "mark: m1"))


@pytest.mark.parametrize(
    "script, status, code",
    [
        ("echo \"ModuleNotFoundError: No module named 'torch.distributed.flight_recorder'\"; exit 1", "absent", 1),
        ("echo \"ModuleNotFoundError: No module named 'yaml'\"; exit 1", "failed", 1),
        ("echo \"KeyError: 'entries'\"; exit 3", "failed", 3),
    ],
)
def test_an_analyser_that_fails_says_how(tmp_path: Path, script: str, status: str, code: int) -> None:
    run = analyse(tmp_path, str(executable(tmp_path / "python", f"#!/bin/sh\n{script}\n")), {})
    assert run == AnalyserRun(AnalyserStatus(status), code, (script.split('"')[1],))


def test_the_analysers_output_is_cut_to_its_tail(tmp_path: Path) -> None:
    lines = "\n".join(f"line {i}" for i in range(25)) + "\n" + "y" * 350 + "\n\xff\n"
    (tmp_path / "out").write_bytes(lines.encode("latin-1"))
    run = analyse(tmp_path, str(executable(tmp_path / "python", f"#!/bin/sh\ncat {tmp_path / 'out'}\n")), {})
    assert run.tail == (*(f"line {i}" for i in range(7, 25)), "y" * 300, "\ufffd")


def test_an_analyser_that_cannot_start_or_hangs(tmp_path: Path) -> None:
    assert analyse(tmp_path, None, {}) == AnalyserRun(AnalyserStatus.NO_PYTHON, None, ())
    assert analyse(tmp_path, str(tmp_path / "none"), {}) == AnalyserRun(AnalyserStatus.NO_PYTHON, None, ())
    hang = executable(tmp_path / "python", "#!/bin/sh\nsleep 300 &\nwait\n")  # a child too: the whole session is killed
    run = analyse(tmp_path, str(hang), {}, timeout=0.3)
    assert (run.status, run.exit_code) == (AnalyserStatus.TIMED_OUT, None)


@pytest.mark.parametrize("error", [ProcessLookupError, PermissionError])
def test_an_analyser_out_of_time_that_cannot_be_signalled_keeps_its_output(
    tmp_path: Path, monkeypatch, error: type[OSError]
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    python = executable(tmp_path / "python", f"#!/bin/sh\necho started\nread line < {gate}\n")

    def killpg(pid: int, sig: int) -> None:  # the analyser ends by itself (gone, or not ours to signal)
        with open(gate, "wb"):  # opens once the script waits on the gate, after its output
            pass
        raise error

    with monkeypatch.context() as patched:
        patched.setattr(fr.os, "killpg", killpg)
        run = analyse(tmp_path, str(python), {}, timeout=0.05)
    assert run == AnalyserRun(AnalyserStatus.TIMED_OUT, None, ("started",))


def test_collect_links_each_dump_as_the_analyser_wants_it(tmp_path: Path) -> None:
    (tmp_path / "n0").mkdir()
    sources = {3: tmp_path / "n0" / "rank_3", 1: tmp_path / "n1_rank_1", 2: tmp_path / "missing", 4: tmp_path / "n0"}
    sources[3].write_bytes(b"three")
    sources[1].write_bytes(b"one")
    into = tmp_path / "x" / "all"
    into.mkdir(parents=True)
    (into / "rank_1").write_bytes(b"stale")
    assert collect(sources, into) == [1, 3]
    assert sorted(os.listdir(into)) == ["rank_1", "rank_3"]
    assert os.path.samefile(into / "rank_1", sources[1]) and os.path.samefile(into / "rank_3", sources[3])
    assert collect({}, tmp_path / "new" / "all") == [] and (tmp_path / "new" / "all").is_dir()


def test_collect_copies_where_links_are_refused(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a").write_bytes(b"dump a")
    (tmp_path / "b").write_bytes(b"dump b")
    into = tmp_path / "all"
    (into / "rank_2").mkdir(parents=True)  # cannot be replaced by a copy

    def refuse(source: object, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    with monkeypatch.context() as patched:
        patched.setattr(fr.os, "link", refuse)
        got = collect({3: tmp_path / "a", 2: tmp_path / "b", 1: tmp_path / "missing"}, into)
    assert got == [3] and (into / "rank_3").read_bytes() == b"dump a"
    assert not os.path.samefile(into / "rank_3", tmp_path / "a") and sorted(os.listdir(into)) == ["rank_2", "rank_3"]


# ==== the start-up record (entrypoint/launch/record.py) ==========================================================


def test_the_record_holds_the_run_masked_and_readable(tmp_path: Path) -> None:
    path = tmp_path / "exp.json"
    record = StartupRecord(path, started_at=365 * 86400 + 3661.7)
    record.phases["plan"] = 0.25
    record.data.update({"log": tmp_path / "exp.log", "why": "磁盘已满", "api_token": "abcdefgh", "n": 3})
    record.write()
    expected = {
        "version": __version__,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": "1971-01-01T01:01:01Z",
        "phases_s": {"plan": 0.25},
        "log": str(tmp_path / "exp.log"),
        "why": "磁盘已满",
        "api_token": "***",
        "n": 3,
    }
    assert small_text(path) == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
    assert os.listdir(tmp_path) == ["exp.json"] and record.path == path and record.claimed
    record.data["n"] = 4
    record.write()
    assert json.loads(small_text(path))["n"] == 4 and os.listdir(tmp_path) == ["exp.json"]


def test_a_record_without_a_path_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    StartupRecord(None).write()
    assert os.listdir(tmp_path) == []


def test_a_record_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for path in (tmp_path / "file" / "exp.json", tmp_path / "missing" / "exp.json"):
        record = StartupRecord(path)
        record.write()  # no exception: the job's own outcome is what the user sees
    assert os.listdir(tmp_path) == ["file"] and (tmp_path / "file").read_text() == "x"


@contextmanager
def ascii_locale() -> Iterator[None]:
    """The C locale, whose ASCII is what a text file opened without an encoding gets (except in Python's UTF-8
    mode, where nothing changes)."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_the_record_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    record = StartupRecord(tmp_path / "exp.json", started_at=0.0, data={"why": "磁盘已满"})
    with ascii_locale():
        record.write()
    assert json.loads(small_text(tmp_path / "exp.json")) == {
        "version": __version__,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": "1970-01-01T00:00:00Z",
        "phases_s": {},
        "why": "磁盘已满",
    }


def test_a_taken_record_name_moves_to_one_of_this_process(tmp_path: Path) -> None:
    path = tmp_path / "exp.json"
    path.write_text("{}")
    record = StartupRecord(path)
    record.write()
    assert record.path == tmp_path / f"exp-{os.getpid()}.json" and path.read_text() == "{}"
    assert sorted(os.listdir(tmp_path)) == sorted(["exp.json", f"exp-{os.getpid()}.json"])


def test_phases_are_timed_even_when_they_fail_and_time_since_start(tmp_path: Path) -> None:
    record = StartupRecord(tmp_path / "r.json", t0=time.monotonic() - 100)
    with pytest.raises(RuntimeError), record.phase("fetch"):
        raise RuntimeError("boom")
    with record.phase("plan"):
        pass
    assert list(record.phases) == ["fetch", "plan"] and all(0 <= s < 60 for s in record.phases.values())
    assert 100 <= record.since_start() < 200


# ==== the process tree (entrypoint/launch/processes.py) ==========================================================


def stat_line(pid: int, name: str, state: str, ppid: int, start: int) -> str:
    middle = " ".join(str(1000 + i) for i in range(17))  # pgrp .. itrealvalue
    return f"{pid} ({name}) {state} {ppid} {middle} {start} 4242 4343 4444\n"


def fake_proc(root: Path, entries: Mapping[str, str]) -> Path:
    for pid, stat in entries.items():
        (root / pid).mkdir(parents=True)
        if stat:
            (root / pid / "stat").write_text(stat)
    return root


def test_a_stat_line_is_read_even_with_parentheses_in_the_name(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {"12": stat_line(12, "a) (b", "S", 7, 777), "13": "13 (x) S 1 2\n", "14": ""})
    (proc / "15").mkdir()
    (proc / "15" / "stat").write_text(stat_line(15, "y", "R", 1, 0).replace(" R 1 ", " R zz "))
    assert read_proc(12, proc) == Proc(12, 7, "S", 777, "a) (b")
    assert [read_proc(pid, proc) for pid in (13, 14, 15, 16)] == [None, None, None, None]


def test_all_processes_lists_only_numbered_readable_entries(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        {"12": stat_line(12, "python", "S", 1, 10), "3": stat_line(3, "sh", "Z", 12, 20), "4": "", "self": "x"},
    )
    (proc / "77").write_text("")  # a file, not a process folder
    assert sorted(all_processes(proc), key=lambda p: p.pid) == [
        Proc(3, 12, "Z", 20, "sh"),
        Proc(12, 1, "S", 10, "python"),
    ]
    assert all_processes(tmp_path / "missing") == [] and all_processes(proc / "77") == []


def test_descendants_come_parents_first() -> None:
    tree = [Proc(5, 3, "S", 0, "e"), Proc(4, 2, "S", 0, "d"), Proc(2, 1, "S", 0, "b"), Proc(3, 1, "S", 0, "c")]
    tree += [Proc(9, 8, "S", 0, "x"), Proc(1, 0, "S", 0, "root")]
    assert [p.pid for p in descendants(1, tree)] == [2, 3, 4, 5]
    assert descendants(5, tree) == [] and descendants(8, tree) == [tree[4]]


def test_the_tree_remembers_a_worker_in_its_own_session_and_kills_it(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys; p = subprocess.Popen(['sleep', '60'], start_new_session=True); "
        "print(p.pid, flush=True); p.wait()"
    )
    root = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    worker = None
    try:
        assert root.stdout is not None
        worker = int(root.stdout.readline())
        tree = ProcessTree(root.pid)
        current = tree.refresh()
        assert [(p.pid, p.ppid, p.name) for p in current] == [(worker, root.pid, "sleep")]
        assert tree.seen == {worker: current[0]}
        assert [(p.pid, p.start) for p in tree.alive()] == [(worker, current[0].start)]
        assert tree.kill() == [worker]
        assert root.wait(timeout=10) == -signal.SIGKILL
    finally:
        for pid in (root.pid, worker):
            if pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        root.wait(timeout=10)
        if root.stdout is not None:
            root.stdout.close()


def test_alive_skips_reused_pids_zombies_and_the_gone() -> None:
    zombie = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # it has exited, not yet reaped
        me, dead = read_proc(os.getpid()), read_proc(zombie.pid)
        assert me is not None and dead is not None and dead.state == "Z"
        tree = ProcessTree(1)
        tree.seen = {me.pid: me, dead.pid: dead, 4194305: Proc(4194305, 1, "S", 1, "gone")}
        assert [p.pid for p in tree.alive()] == [me.pid]
        tree.seen = {me.pid: Proc(me.pid, me.ppid, "S", me.start + 1, me.name)}
        assert tree.alive() == []
    finally:
        zombie.wait(timeout=10)


@pytest.mark.parametrize("group_error", [ProcessLookupError, PermissionError])
def test_kill_goes_on_past_processes_it_may_not_or_cannot_signal(monkeypatch, group_error: type[OSError]) -> None:
    calls: list[tuple[str, int, int]] = []

    def killpg(pid: int, sig: int) -> None:
        calls.append(("killpg", pid, sig))
        raise group_error

    def kill(pid: int, sig: int) -> None:
        calls.append(("kill", pid, sig))
        if pid == 11:
            raise PermissionError
        if pid == 12:
            raise ProcessLookupError

    monkeypatch.setattr(processes_module, "os", SimpleNamespace(killpg=killpg, kill=kill))
    living = [Proc(11, 1, "S", 5, "a"), Proc(12, 1, "S", 5, "b"), Proc(13, 1, "S", 5, "c")]
    monkeypatch.setattr(ProcessTree, "alive", lambda self: living)
    assert ProcessTree(10).kill() == [13]
    assert calls == [("killpg", 10, signal.SIGKILL)] + [("kill", pid, signal.SIGKILL) for pid in (11, 12, 13)]


# ==== the stall exchange (entrypoint/launch/stall_exchange.py) ===================================================


def diagnosis(ranks: dict[int, int]) -> Diagnosis:
    return Diagnosis(DiagnosisMethod.PY_SPY, [], {}, [], [], None, ranks)


def recorder(monkeypatch, name: str) -> list[dict[str, Any]]:
    """Record every call of `stall_exchange.<name>` (positional and keyword arguments), then make it."""
    real: Callable[..., Any] = getattr(exchange_module, name)
    calls: list[dict[str, Any]] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, **kwargs})
        return real(*args, **kwargs)

    monkeypatch.setattr(exchange_module, name, recorded)
    return calls


def test_node_0_asks_the_others_only_when_there_are_others(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(exchange_module, "time", SimpleNamespace(time=lambda: 1234.5))
    logs = tmp_path / "logs"
    logs.mkdir()
    assert Exchange(0, 1, logs, "exp", None).ask_others() is None and os.listdir(logs) == []
    assert Exchange(0, 2, logs, "exp", None).ask_others() == 1234.5
    assert json.loads(small_text(logs / "exp-stall-request.json")) == {"format": 1, "requested_at": 1234.5}
    assert Exchange(0, 2, tmp_path / "missing", "exp", None).ask_others() is None


def test_a_node_shares_its_report_with_the_dumps_it_asked_for(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(exchange_module, "time", SimpleNamespace(time=lambda: 1000.0))
    waits = recorder(monkeypatch, "wait_for_dumps")
    dumps = tmp_path / "node1.fr"
    dumps.mkdir()
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{dumps}/rank_", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{tmp_path}/pipe_"}
    os.mkfifo(tmp_path / "pipe_2.pipe")
    (dumps / "rank_2").write_bytes(b"dump")
    node_log = tmp_path / "logs" / "exp-node1-s.log"
    node_log.parent.mkdir()
    reader = os.open(tmp_path / "pipe_2.pipe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        shared = Exchange(1, 2, node_log.parent, "exp", node_log, env).share(diagnosis({20: 2, 30: 3}), 7, 12.5, 99.0)
        assert os.read(reader, 10) == b"1"
    finally:
        os.close(reader)
    assert (shared.asked, shared.dumped, shared.written) == ([2], [2], True)
    assert waits == [{"args": (f"{dumps}/rank_", [2]), "since": 999.0}]
    report = shared.report
    assert (report.node_rank, report.last_step, report.silent_s, report.request) == (1, 7, 12.5, 99.0)
    assert [(r.rank, r.pid) for r in report.ranks] == [(2, 20), (3, 30)] and report.fr_dumps == f"{dumps}/rank_"
    assert parse_report(json.loads(small_text(report_path(node_log)))) == NodeReport(
        1, report.ranks, report.written_at, report.host, 7, None, (), f"{dumps}/rank_", 99.0
    )


def test_a_node_without_dump_pipes_or_log_folder_shares_what_it_has(tmp_path: Path, monkeypatch) -> None:
    waits = recorder(monkeypatch, "wait_for_dumps")
    asks = recorder(monkeypatch, "request_dumps")
    (tmp_path / "rank_2").write_bytes(b"dump")
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/rank_"}
    shared = Exchange(1, 2, tmp_path, "exp", None, env).share(diagnosis({20: 2}), None, None, None)
    assert (shared.asked, shared.dumped, shared.written, shared.report.fr_dumps) == ([], [], False, None)
    os.mkfifo(tmp_path / "pipe_2.pipe")  # a pipe but nowhere to dump: nothing is waited for
    reader = os.open(tmp_path / "pipe_2.pipe", os.O_RDONLY | os.O_NONBLOCK)
    try:
        env = {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{tmp_path}/pipe_"}
        other = Exchange(1, 2, tmp_path, "exp", tmp_path / "n.log", env).share(diagnosis({20: 2}), 3, 1.0, None)
    finally:
        os.close(reader)
    assert (other.asked, other.dumped, other.written, other.report.fr_dumps) == ([2], [], True, None)
    assert waits == [] and sorted(os.listdir(tmp_path)) == ["n.stall.json", "pipe_2.pipe", "rank_2"]
    assert [(a["args"][0], list(a["args"][1])) for a in asks] == [(f"{tmp_path}/pipe_", [2])]  # no pipe: none asked


def trace_dump(path: Path, entered: int, mtime: float) -> None:
    dump(path, [collective(entered, "nccl:all_reduce" if entered % 2 else "nccl:broadcast")])
    os.utime(path, (mtime, mtime))


def test_node_0s_verdict_reads_the_fresh_dumps_and_names_the_rank_behind(tmp_path: Path, monkeypatch) -> None:
    gathers = recorder(monkeypatch, "gather")
    waits = recorder(monkeypatch, "wait_for_dumps")
    written = float(int(time.time()))
    dumps = tmp_path / "node0.fr"
    dumps.mkdir()
    trace_dump(dumps / "rank_0", 5, written - 25)  # written as the dump wait began: fresh
    trace_dump(dumps / "rank_1", 4, written)
    trace_dump(dumps / "rank_2", 9, written - 25.5)  # from before this stall
    (dumps / "rank_3").write_bytes(b"garbled")
    ranks = tuple(RankReport(r, 10 + r, BARRIER, True, False) for r in range(4))
    own = NodeReport(0, ranks, written, fr_dumps=f"{dumps}/rank_")
    python = executable(tmp_path / "python", '#!/bin/sh\necho "$*"\n')
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{dumps}/rank_"}
    verdict = Exchange(0, 1, tmp_path, "exp", None, env, str(python)).verdict(own, 42.0)
    folder = dumps / "all"
    traces = [RankTrace(0, 5, "nccl:all_reduce", None, None), RankTrace(1, 4, "nccl:broadcast", None, None)]
    analyser = AnalyserRun(AnalyserStatus.OK, 0, (f"-m torch.distributed.flight_recorder.fr_trace {folder} -p rank_",))
    assert (verdict.dumps, verdict.traces, verdict.analyser, verdict.folder) == ([0, 1, 3], traces, analyser, folder)
    culprit = verdict.culprit
    assert (culprit.method, culprit.ranks, culprit.nodes, culprit.missing_nodes) == (
        Method.FLIGHT_RECORDER,
        [1],
        [0],
        [],
    )
    assert culprit.why is not None and culprit.why.en == (
        "the flight recorder shows them behind: the others entered collective #5 (nccl:all_reduce), they stopped at #4"
    )
    assert verdict.flight_recorder_json() == {
        "dumps": [0, 1, 3],
        "folder": str(folder),
        "traces": [t.to_json() for t in traces],
        "analyser": analyser.to_json(),
    }
    assert [(g["args"], g["since"], g["wait_s"], g["known"], g["request"]) for g in gathers] == [
        ((tmp_path, "exp", 1), written, 0, {0: own}, 42.0)
    ]
    assert waits == [{"args": (f"{dumps}/rank_", [0, 1, 2, 3]), "since": written - 25, "timeout": 0}]


def test_node_0_waits_for_the_other_nodes_answers_to_its_request(tmp_path: Path, monkeypatch) -> None:
    gathers = recorder(monkeypatch, "gather")
    logs = tmp_path / "logs"
    logs.mkdir()
    now = time.time()
    other = NodeReport(1, (RankReport(2, 12, BARRIER, True, False), RankReport(3, 13, SLEEP, False, False)), now)
    other = NodeReport(**(vars(other) | {"request": 77.0}))  # node 1 has no dumps: read past it
    assert exchange_module.write_report(other, logs / "exp-node1-s.log")
    dumps = tmp_path / "node0.fr"
    dumps.mkdir()
    trace_dump(dumps / "rank_0", 4, now)
    trace_dump(dumps / "rank_1", 4, now)  # the recorder shows nobody behind: stacks decide
    ranks = (RankReport(0, 10, BARRIER, True, False), RankReport(1, 11, BARRIER, True, False))
    own = NodeReport(0, ranks, now, fr_dumps=f"{dumps}/rank_")
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{dumps}/rank_"}
    verdict = Exchange(0, 2, logs, "exp", logs / "exp-node0-s.log", env).verdict(own, 77.0)
    traces = [RankTrace(0, 4, "nccl:broadcast", None, None), RankTrace(1, 4, "nccl:broadcast", None, None)]
    analyser = AnalyserRun(AnalyserStatus.NO_PYTHON, None, ())
    assert (verdict.dumps, verdict.traces, verdict.analyser, verdict.folder) == (
        [0, 1],
        traces,
        analyser,
        dumps / "all",
    )
    assert (verdict.culprit.method, verdict.culprit.ranks, verdict.culprit.nodes) == (Method.STACKS, [3], [1])
    assert [g["wait_s"] for g in gathers] == [GATHER_WAIT_S]


def test_node_0_without_its_request_or_a_dump_folder_it_can_make(tmp_path: Path, monkeypatch) -> None:
    gathers = recorder(monkeypatch, "gather")
    now = time.time()
    (tmp_path / "file").write_text("x")
    dumps = tmp_path / "fr"
    dumps.mkdir()
    trace_dump(dumps / "rank_0", 3, now)
    own = NodeReport(0, (RankReport(0, 10, BARRIER, True, False),), now, fr_dumps=f"{dumps}/rank_")
    env = {"TORCH_FR_DUMP_TEMP_FILE": f"{tmp_path}/file/fr/rank_"}  # its `all` folder cannot be made
    verdict = Exchange(0, 2, tmp_path, "exp", None, env, sys.executable).verdict(own, None)
    assert (verdict.dumps, verdict.traces, verdict.analyser) == ([], [], None)
    assert verdict.folder == tmp_path / "file" / "fr" / "all"
    assert verdict.flight_recorder_json()["folder"] is None
    assert (verdict.culprit.method, verdict.culprit.missing_nodes) == (Method.NONE, [1])
    nowhere = Exchange(0, 2, tmp_path, "exp", None, {}, sys.executable).verdict(own, None)  # no dump folder
    assert (nowhere.dumps, nowhere.traces, nowhere.analyser, nowhere.folder) == ([], [], None, None)
    assert nowhere.flight_recorder_json() == {"dumps": [], "folder": None, "traces": [], "analyser": None}
    assert [g["wait_s"] for g in gathers] == [0, 0]
