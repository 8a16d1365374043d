"""The plan's decisions, pinned in-process: `entrypoint/plan.py` function by function, then `build_plan` whole.

Guards what `plan --json` shows and `run` starts: each field of `NodeFiles`, `Launch` and `Plan` as JSON, torchrun's
argv, this node's file names (and the same-second `-2` suffix), the locked-memory intent, NCCL's debug routing and
the error file, each torchrun that cannot start and why, names and arguments too long for Linux, the trainer flags
the launcher owns, the transformers patch line, unknown `VLA_*` variables, and each branch of `build_plan` (a worker
node, the dev machine's `check --assets`, an unmounted assets root, a mount that does not answer, a sealed dataset
verdict, a resume). Every message is compared whole, in English and Chinese.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from entrypoint import plan as P
from entrypoint.core.errors import ExitCode
from entrypoint.core.findings import Finding, Status
from entrypoint.core.host import Host
from entrypoint.core.messages import Text
from entrypoint.core.settings import Device, PreflightMode, Settings, load_settings
from entrypoint.fabric.decide import FabricPlan
from entrypoint.fabric.inventory import Gdr, Memlock, Transport
from entrypoint.inspect import storage
from entrypoint.inspect.environment import EnvPlan
from entrypoint.inspect.mounts import Location, Mount
from entrypoint.inspect.patch import PatchState, PatchStatus
from entrypoint.inspect.prefetch import Prefetch
from entrypoint.inspect.resume import ResumeAction, ResumeDecision
from entrypoint.inspect.scope import Scope
from entrypoint.inspect.seal import CLOCK_SKEW_S, SealRole, job_key
from entrypoint.inspect.storage import ROOT_MOUNT, RootStorage
from entrypoint.inspect.storage_probe import StorageNotAnswering, StorageProbe
from entrypoint.inspect.topology import MasterWait, Topology, TopologySource
from tests.support.synthetic import make_checkpoint, write_safetensors
from tests.unit.conftest import FAKE_BIN, World

CLOCK = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
STAMP = "20231114-221320"
EXP = "pi05_libero_pytorch"
OVERLAY = "1 0 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run files are named in local time: pin it to UTC so `CLOCK` names them `STAMP`."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def room(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed amount of free space, so the checkpoint-space line does not depend on this machine's disk."""
    monkeypatch.setattr(storage, "free_bytes", lambda path: 10**12)


@pytest.fixture
def tree(tmp_path: Path) -> World:
    """Only what the settings name: an assets root with its log folder and an openpi checkout with its trainer (no
    machine, no assets: the functions under test read nothing else)."""
    w = World(tmp_path)
    (w.assets / "logs").mkdir(parents=True)
    (w.openpi / "scripts").mkdir(parents=True)
    (w.openpi / "scripts" / "train_pytorch.py").write_text("")
    w.env = {
        "PATH": f"{FAKE_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "VLA_ASSETS_ROOT": str(w.assets),
        "VLA_OPENPI_DIR": str(w.openpi),
        "VLA_BAKED_JOB_FILE": str(tmp_path / "no-baked-job.yaml"),
    }
    return w


def host_of(world: World, env: Mapping[str, str] | None = None, drop: tuple[str, ...] = ()) -> Host:
    full = {**world.env, **(env or {})}
    for name in drop:
        full.pop(name, None)
    return Host(env=full, root=world.host)


def plan_of(
    world: World,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    drop: tuple[str, ...] = (),
    **kwargs: object,
) -> P.Plan:
    """`build_plan` on the world's machine with `env` added, at `CLOCK`."""
    return P.build_plan(host_of(world, env, drop), flags, clock=lambda: CLOCK, **kwargs)  # type: ignore[arg-type]


def shown(world: World, data: object) -> object:
    """`data` as JSON with the world's folder written `<root>` and the stand-in torchrun's folder `<bin>`."""
    text = json.dumps(data, ensure_ascii=False).replace(str(FAKE_BIN), "<bin>").replace(str(world.root), "<root>")
    return json.loads(text)


def settings_of(world: World, **env: str) -> Settings:
    return load_settings({**world.env, **env})


def facts(finding: Finding) -> tuple[object, ...]:
    """Every field of a finding a user sees, plus the exit code it implies."""
    hint = (finding.hint.en, finding.hint.zh) if finding.hint else None
    return (finding.id, finding.status, finding.message.en, finding.message.zh, hint, finding.where, finding.exit_code)


def ids(plan: P.Plan) -> list[tuple[str, str]]:
    return [(f.id, f.status.value) for f in plan.findings]


def log_stem(world: World, rank: int = 0, stamp: str = STAMP) -> str:
    return f"{world.assets}/logs/{EXP}-node{rank}-{stamp}"


# ---- NodeFiles ----


def test_node_files_name_every_file_after_the_log() -> None:
    files = P.NodeFiles("s", Path("/l/e-node0-s.log"))
    assert (files.record, files.error_file, files.nccl_dir, files.stacks, files.attempts) == (
        Path("/l/e-node0-s.json"),
        Path("/l/e-node0-s.error.json"),
        Path("/l/e-node0-s.nccl"),
        Path("/l/e-node0-s.stacks.txt"),
        Path("/l/e-node0-s.attempts"),
    )
    assert files.to_json() == {
        "stamp": "s",
        "log": "/l/e-node0-s.log",
        "record": "/l/e-node0-s.json",
        "nccl_log_dir": "/l/e-node0-s.nccl",
        "stacks": "/l/e-node0-s.stacks.txt",
        "attempts": "/l/e-node0-s.attempts",
        "log_problem": None,
        "log_problem_zh": None,
    }


def test_node_files_without_a_log_name_nothing_and_say_why() -> None:
    files = P.NodeFiles("s", None, Text("why", "为何"))
    assert (files.record, files.error_file, files.nccl_dir, files.stacks, files.attempts) == (None,) * 5
    assert files.to_json() == {
        "stamp": "s",
        "log": None,
        "record": None,
        "nccl_log_dir": None,
        "stacks": None,
        "attempts": None,
        "log_problem": "why",
        "log_problem_zh": "为何",
    }


# ---- Launch ----


def launch(**changes: object) -> P.Launch:
    files = P.NodeFiles("s", Path("/l/e-node1-s.log"))
    base: dict[str, object] = {
        "command": ["torchrun"],
        "cwd": "/openpi",
        "files": files,
        "error_file": files.error_file,
        "memlock": P.MemlockIntent.RAISE,
        "preflight": PreflightMode.OFF,
        "nccl_debug": {"NCCL_DEBUG": "INFO"},
        "nccl_reason": Text("routed", "已路由"),
        "wait_for_master": None,
    }
    return P.Launch(**{**base, **changes})  # type: ignore[arg-type]


def test_launch_shows_every_decision() -> None:
    wait = MasterWait("MASTER_ADDR", "10.0.0.1", 23457, 300, 90)
    prefetch = Prefetch(((Path("/w/model.safetensors"), 64),), None)
    shown_launch = launch(
        wait_for_master=wait,
        max_restarts=2,
        events_dir=Path("/tb/e/node1-s"),
        report=Path("/l/e-report.html"),
        metrics_interval=7,
        prefetch=prefetch,
        preflight=PreflightMode.WARN,
    ).to_json()
    assert shown_launch == {
        "stamp": "s",
        "log": "/l/e-node1-s.log",
        "record": "/l/e-node1-s.json",
        "nccl_log_dir": "/l/e-node1-s.nccl",
        "stacks": "/l/e-node1-s.stacks.txt",
        "attempts": "/l/e-node1-s.attempts",
        "log_problem": None,
        "log_problem_zh": None,
        "error_file": "/l/e-node1-s.error.json",
        "memlock": "raise",
        "memlock_reason": "the soft locked-memory limit is raised to the hard limit before torchrun starts "
        "(training inherits it)",
        "memlock_reason_zh": "启动 torchrun 前把锁定内存软限制提升到硬限制(训练进程继承该限制)",
        "preflight": "warn",
        "preflight_reason": "a bandwidth preflight runs before training and only reports (VLA_PREFLIGHT=warn)",
        "preflight_reason_zh": "训练前进行带宽预检,仅报告结果(VLA_PREFLIGHT=warn)",
        "nccl_debug": {"NCCL_DEBUG": "INFO"},
        "nccl_debug_reason": "routed",
        "nccl_debug_reason_zh": "已路由",
        "wait_for_master": {
            "variable": "MASTER_ADDR",
            "addr": "10.0.0.1",
            "port": 23457,
            "timeout_s": 300,
            "resolve_timeout_s": 90,
        },
        "max_restarts": 2,
        "rendezvous": "static",
        "events_dir": "/tb/e/node1-s",
        "report": "/l/e-report.html",
        "metrics_interval_s": 7,
        "prefetch": prefetch.to_json(),
    }


def test_a_launch_by_default_restarts_nothing_and_writes_no_extras() -> None:
    shown_launch = launch(error_file=None).to_json()
    picked = {k: shown_launch[k] for k in ("error_file", "wait_for_master", "max_restarts", "events_dir", "report")}
    assert picked == {
        "error_file": None,
        "wait_for_master": None,
        "max_restarts": 0,
        "events_dir": None,
        "report": None,
    }
    assert (shown_launch["metrics_interval_s"], shown_launch["prefetch"]) == (0, None)


@pytest.mark.parametrize(
    "intent, en, zh",
    [
        (
            P.MemlockIntent.RAISE,
            "the soft locked-memory limit is raised to the hard limit before torchrun starts (training inherits it)",
            "启动 torchrun 前把锁定内存软限制提升到硬限制(训练进程继承该限制)",
        ),
        (
            P.MemlockIntent.KEEP,
            "the locked-memory limit is left as it is (soft equals hard)",
            "锁定内存限制保持不变(软限制等于硬限制)",
        ),
    ],
)
def test_the_memlock_reason_follows_the_intent(intent: P.MemlockIntent, en: str, zh: str) -> None:
    assert launch(memlock=intent).memlock_reason == Text(en, zh)


@pytest.mark.parametrize(
    "mode, en, zh",
    [
        (PreflightMode.OFF, "no bandwidth preflight (VLA_PREFLIGHT=off)", "不进行带宽预检(VLA_PREFLIGHT=off)"),
        (
            PreflightMode.WARN,
            "a bandwidth preflight runs before training and only reports (VLA_PREFLIGHT=warn)",
            "训练前进行带宽预检,仅报告结果(VLA_PREFLIGHT=warn)",
        ),
        (
            PreflightMode.FAIL,
            "a bandwidth preflight runs before training; a hang or low bandwidth ends the job with exit 3 "
            "(VLA_PREFLIGHT=fail)",
            "训练前进行带宽预检;卡住或带宽过低时任务以退出码 3 结束(VLA_PREFLIGHT=fail)",
        ),
    ],
)
def test_the_preflight_reason_follows_the_mode(mode: PreflightMode, en: str, zh: str) -> None:
    assert launch(preflight=mode).preflight_reason == Text(en, zh)


def test_the_node_file_variables_include_the_error_file_only_when_it_is_this_nodes() -> None:
    nccl = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/l/x.nccl/nccl.%h.%p.log"}
    assert launch(nccl_debug=nccl).node_file_variables == ("NCCL_DEBUG", "NCCL_DEBUG_FILE", "TORCHELASTIC_ERROR_FILE")
    assert launch(nccl_debug=nccl, error_file=Path("/mine.json")).node_file_variables == (
        "NCCL_DEBUG",
        "NCCL_DEBUG_FILE",
    )
    assert launch(nccl_debug={}, error_file=None).node_file_variables == ()
    no_log = P.NodeFiles("s", None, Text("x", "x"))
    assert launch(nccl_debug={}, files=no_log, error_file=None).node_file_variables == ()


# ---- memlock_intent ----


@pytest.mark.parametrize(
    "soft, hard, intent",
    [
        (None, None, P.MemlockIntent.RAISE),
        (65536, None, P.MemlockIntent.RAISE),
        (None, 65536, P.MemlockIntent.RAISE),
        (65536, 131072, P.MemlockIntent.RAISE),
        (65536, math.inf, P.MemlockIntent.RAISE),
        (65536, 65536, P.MemlockIntent.KEEP),
        (math.inf, math.inf, P.MemlockIntent.KEEP),
        (0, 0, P.MemlockIntent.KEEP),
    ],
)
def test_memlock_is_kept_only_when_soft_equals_a_known_hard(soft: float, hard: float, intent: object) -> None:
    assert P.memlock_intent(Memlock(soft, hard, None)) is intent


# ---- torchrun_command ----


def topology(nnodes: int = 2, rank: int = 1, per_node: int = 4) -> Topology:
    return Topology(nnodes, rank, per_node, "10.0.0.1", 23456, TopologySource.TIONE, Device.GPU)


SHAPE = ["--nnodes", "2", "--nproc_per_node", "4", "--node_rank", "1", "--master_addr", "10.0.0.1"]
SHAPE += ["--master_port", "23456"]


def test_the_preflight_torchrun_spells_out_the_shape_and_the_bare_timeout(tmp_path: Path) -> None:
    command = P.torchrun_command(topology(), ["-m", "worker"], {"PATH": str(FAKE_BIN)}, 600)
    assert command == [str(FAKE_BIN / "torchrun"), *SHAPE, "--rdzv_conf", "timeout=600", "-m", "worker"]


def test_torchrun_is_named_bare_when_the_path_holds_none(tmp_path: Path) -> None:
    assert P.torchrun_command(topology(), [], {"PATH": str(tmp_path)}, 5)[0] == "torchrun"


def test_training_torchrun_restarts_through_the_attempt_shim_and_waits_30_s_longer(tmp_path: Path) -> None:
    env = {"PATH": str(FAKE_BIN)}
    facts_dir = tmp_path / "x.attempts"
    command = P.torchrun_command(topology(), ["train.py"], env, 600, 0, facts_dir, "passive")
    assert command[1:] == [
        *SHAPE,
        "--rdzv_conf",
        "timeout=630",
        "--max_restarts",
        "0",
        "-m",
        "entrypoint.launch.attempt",
        "--facts",
        str(facts_dir),
        "--health",
        "passive",
        "train.py",
    ]
    no_gate = P.torchrun_command(topology(), ["train.py"], env, 10, 3, facts_dir, None)
    restarts = ["--rdzv_conf", "timeout=40", "--max_restarts", "3", "-m", ATTEMPT]
    assert no_gate[1:] == [*SHAPE, *restarts, "--facts", str(facts_dir), "train.py"]
    no_facts = P.torchrun_command(topology(), ["train.py"], env, 10, 3, None, "passive")
    assert no_facts[1:] == [*SHAPE, *restarts, "train.py"]


ATTEMPT = "entrypoint.launch.attempt"


# ---- node_files ----


def test_node_files_are_named_after_the_experiment_rank_and_stamp(tree: World) -> None:
    files = P.node_files(settings_of(tree), 3, STAMP)
    assert files == P.NodeFiles(STAMP, tree.assets / "logs" / f"{EXP}-node3-{STAMP}.log")


@pytest.mark.parametrize(
    "existing, chosen",
    [
        ([".log"], "-2"),
        ([".json"], "-2"),
        ([".error.json", ".nccl", ".stacks.txt"], ""),
        ([".log", "-2.json"], "-3"),
        ([".log", "-3.log"], "-2"),
    ],
    ids=["log", "record", "other-files", "two-runs", "a-gap"],
)
def test_a_run_in_the_same_second_keeps_the_earlier_files(tree: World, existing: list[str], chosen: str) -> None:
    logs = tree.assets / "logs"
    for suffix in existing:
        (logs / f"{EXP}-node0-{STAMP}{suffix}").write_text("")
    files = P.node_files(settings_of(tree), 0, STAMP)
    assert (files.stamp, files.log) == (STAMP + chosen, logs / f"{EXP}-node0-{STAMP}{chosen}.log")


def test_a_dangling_link_takes_the_name_too(tree: World) -> None:
    logs = tree.assets / "logs"
    (logs / f"{EXP}-node0-{STAMP}.log").symlink_to(logs / "gone")
    assert P.node_files(settings_of(tree), 0, STAMP).stamp == f"{STAMP}-2"


def test_the_search_for_a_free_name_ends_at_99(tree: World) -> None:
    logs = tree.assets / "logs"
    (logs / f"{EXP}-node0-{STAMP}.log").write_text("")
    for n in range(2, 100):
        (logs / f"{EXP}-node0-{STAMP}-{n}.log").write_text("")
    assert P.node_files(settings_of(tree), 0, STAMP).stamp == f"{STAMP}-99"
    (logs / f"{EXP}-node0-{STAMP}-99.log").unlink()
    (logs / f"{EXP}-node0-{STAMP}-98.log").unlink()
    assert P.node_files(settings_of(tree), 0, STAMP).stamp == f"{STAMP}-98"


def test_a_log_folder_that_cannot_be_written_gives_no_files_and_the_reason(tree: World) -> None:
    blocker = tree.root / "not-a-folder"
    blocker.write_text("")
    files = P.node_files(settings_of(tree, VLA_LOG_DIR=str(blocker / "logs")), 0, STAMP)
    assert files == P.NodeFiles(
        STAMP, None, Text(f"{blocker} exists but is not a folder", f"{blocker} 已存在,但不是文件夹")
    )


# ---- events_dir and prefetch_files ----


def unmounted(root: Path) -> RootStorage:
    verdict = Finding(ROOT_MOUNT, Status.FAIL, Text("not mounted", "未挂载"))
    return RootStorage(Location(root, True, root, None), None, True, (verdict,))


def mounted(root: Path) -> RootStorage:
    return RootStorage(Location(root, True, root, None), None, False, ())


def test_events_go_to_one_folder_per_node_and_run(tree: World) -> None:
    files = P.NodeFiles(STAMP, tree.assets / "logs" / "x.log")
    settings = settings_of(tree)
    assert P.events_dir(settings, 2, files, mounted(tree.assets)) == (
        tree.assets / "logs" / "tensorboard" / EXP / f"node2-{STAMP}"
    )
    assert P.events_dir(settings_of(tree, VLA_TENSORBOARD_DIR="none"), 2, files, mounted(tree.assets)) is None
    assert P.events_dir(settings, 2, P.NodeFiles(STAMP, None), mounted(tree.assets)) is None
    assert P.events_dir(settings, 2, files, unmounted(tree.assets)) is None
    assert P.events_dir(settings, 2, files, unmounted(tree.root / "elsewhere")) is not None


def resume_of(world: World, action: ResumeAction, step: int | None) -> ResumeDecision:
    return ResumeDecision(action, step, world.experiment)


def test_prefetch_reads_the_weights_and_the_checkpoint_resumed_from(tree: World) -> None:
    weights = tree.root / "w"
    write_safetensors(weights / "model.safetensors", 4096)
    make_checkpoint(tree.experiment, 25)
    settings = settings_of(tree, VLA_WEIGHTS=str(weights))
    size = (weights / "model.safetensors").stat().st_size
    step = tree.experiment / "25"
    resumed = P.prefetch_files(settings, resume_of(tree, ResumeAction.RESUME, 25), mounted(tree.assets))
    assert resumed is not None and resumed.step == 25 and resumed.weights
    assert [path for path, _ in resumed.files] == [
        weights / "model.safetensors",
        step / "model.safetensors",
        step / "optimizer.pt",
        step / "metadata.pt",
    ]
    finished = P.prefetch_files(settings, resume_of(tree, ResumeAction.FINISHED, 25), mounted(tree.assets))
    assert finished == Prefetch(((weights / "model.safetensors", size),), None)
    fresh = P.prefetch_files(settings, resume_of(tree, ResumeAction.FRESH, None), mounted(tree.assets))
    assert fresh == finished


def test_no_prefetch_when_turned_off_or_under_an_unmounted_root(tree: World) -> None:
    weights = tree.root / "w"
    write_safetensors(weights / "model.safetensors", 4096)
    on, off = settings_of(tree, VLA_WEIGHTS=str(weights)), settings_of(tree, VLA_WEIGHTS=str(weights), VLA_PREFETCH="0")
    fresh = resume_of(tree, ResumeAction.FRESH, None)
    assert P.prefetch_files(off, fresh, mounted(tree.assets)) is None
    assert P.prefetch_files(on, fresh, unmounted(tree.assets)) is None
    assert P.prefetch_files(on, fresh, unmounted(tree.root / "elsewhere")) is not None


# ---- NCCL's debug routing and the error file ----


def fabric(**kept: str) -> FabricPlan:
    return FabricPlan(Transport.LOCAL, (), None, Gdr.NONE, None, None, (), (), env_kept=dict(kept))


LOGGED = P.NodeFiles("s", Path("/l/e-node0-s.log"))
ROUTED = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": "/l/e-node0-s.nccl/nccl.%h.%p.log"}


def test_nccl_debug_and_the_error_file_go_to_this_nodes_files() -> None:
    env = EnvPlan(set={"A": "1"})
    routed, reason = P._route_node_files(env, {"PATH": "/bin"}, fabric(), LOGGED)
    assert routed == ROUTED
    assert env.set == {"A": "1", "TORCHELASTIC_ERROR_FILE": "/l/e-node0-s.error.json", **ROUTED} and env.kept == {}
    assert reason == Text(
        "NCCL INFO lines for INIT and NET go to /l/e-node0-s.nccl, read after training as proof of the transport",
        "NCCL 的 INIT 与 NET 信息日志写入 /l/e-node0-s.nccl,训练结束后据此确认实际使用的传输方式",
    )


def test_the_users_error_file_is_kept_and_the_job_files_stays_exported() -> None:
    inherited = EnvPlan()
    P._route_node_files(inherited, {"TORCHELASTIC_ERROR_FILE": "/mine.json"}, fabric(), LOGGED)
    assert inherited.kept == {"TORCHELASTIC_ERROR_FILE": "/mine.json"}
    assert "TORCHELASTIC_ERROR_FILE" not in inherited.set
    from_job = EnvPlan(set={"TORCHELASTIC_ERROR_FILE": "/job.json"})
    P._route_node_files(from_job, {"TORCHELASTIC_ERROR_FILE": "/mine.json"}, fabric(), LOGGED)
    assert from_job.set["TORCHELASTIC_ERROR_FILE"] == "/job.json" and from_job.kept == {}


@pytest.mark.parametrize(
    "inherited, exported, kept, named",
    [
        ({"NCCL_DEBUG": "WARN"}, {}, {}, "NCCL_DEBUG"),
        ({}, {"NCCL_DEBUG_FILE": "/x"}, {}, "NCCL_DEBUG_FILE"),
        ({}, {}, {"NCCL_DEBUG_SUBSYS": "COLL"}, "NCCL_DEBUG_SUBSYS"),
        ({"NCCL_DEBUG_SUBSYS": ""}, {}, {"NCCL_DEBUG": "WARN"}, "NCCL_DEBUG, NCCL_DEBUG_SUBSYS"),
    ],
    ids=["inherited", "job-file", "nccl-conf", "two"],
)
def test_nccl_debug_set_anywhere_by_the_user_stays_theirs(
    inherited: dict[str, str], exported: dict[str, str], kept: dict[str, str], named: str
) -> None:
    env = EnvPlan(set=dict(exported))
    routed, reason = P._route_node_files(env, inherited, fabric(**kept), LOGGED)
    assert routed == {}
    assert {k: v for k, v in env.set.items() if k.startswith("NCCL")} == exported
    assert reason == Text(
        f"NCCL's debug output is left as set ({named}); the transport is read from the node log instead",
        f"NCCL 调试输出保持原设置({named});改从节点日志读取实际传输方式",
    )


def test_without_a_log_folder_nothing_is_routed() -> None:
    env = EnvPlan()
    routed, reason = P._route_node_files(env, {}, fabric(), P.NodeFiles("s", None, Text("x", "x")))
    assert (routed, env.set, env.kept) == ({}, {}, {})
    assert reason == Text(
        "no node log folder: NCCL's debug output is not routed", "没有节点日志目录:不重定向 NCCL 调试输出"
    )


# ---- the trainer script and torchrun ----


def executable(path: Path, content: bytes, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(mode)
    return path


def test_a_missing_trainer_and_a_missing_torchrun_are_both_named(tree: World, tmp_path: Path) -> None:
    settings = settings_of(tree, VLA_OPENPI_DIR=str(tmp_path / "no-openpi"))
    script = f"{tmp_path}/no-openpi/scripts/train_pytorch.py"
    found = P._check_trainer(settings, ["torchrun", "x"], str(tmp_path))
    assert [facts(f) for f in found] == [
        (
            "trainer.script",
            Status.FAIL,
            f"openpi's trainer {script} does not exist",
            f"openpi 训练脚本 {script} 不存在",
            (
                "Use the VLA base image (openpi in /workspace/openpi), or set VLA_OPENPI_DIR to your openpi checkout.",
                "请使用 VLA 基础镜像(openpi 位于 /workspace/openpi),或把 VLA_OPENPI_DIR 设为 openpi 代码目录。",
            ),
            script,
            ExitCode.PREFLIGHT_FAILED,
        ),
        (
            "trainer.torchrun",
            Status.FAIL,
            "torchrun is not on PATH",
            "PATH 中找不到 torchrun",
            (
                "Use an image with PyTorch installed (the VLA base has it), or fix PATH.",
                "请使用已安装 PyTorch 的镜像(VLA 基础镜像已包含),或修正 PATH。",
            ),
            "PATH",
            ExitCode.PREFLIGHT_FAILED,
        ),
    ]


def test_a_working_trainer_and_torchrun_pass(tree: World) -> None:
    assert P._check_trainer(settings_of(tree), [str(FAKE_BIN / "torchrun")], tree.env["PATH"]) == []


def test_a_torchrun_passed_over_on_path_is_named_with_the_reason(tree: World, tmp_path: Path) -> None:
    torchrun = executable(tmp_path / "bin" / "torchrun", b"#!/bin/sh\n", 0o644)
    found = P._check_trainer(settings_of(tree), ["torchrun"], f"{tmp_path / 'empty'}:{tmp_path / 'bin'}")
    assert [facts(f) for f in found] == [
        (
            "trainer.torchrun",
            Status.FAIL,
            f"{torchrun} is on PATH but cannot run: it may not be executed (no execute permission, or its file "
            "system is mounted noexec)",
            f"{torchrun} 位于 PATH 中,但无法运行:它不允许执行(缺少执行权限,或所在文件系统以 noexec 挂载)",
            (
                "Reinstall PyTorch in the image (pip install --force-reinstall torch), or fix PATH so that a working "
                "torchrun comes first.",
                "请在镜像中重新安装 PyTorch(pip install --force-reinstall torch),"
                "或修正 PATH,让可用的 torchrun 排在前面。",
            ),
            str(torchrun),
            ExitCode.PREFLIGHT_FAILED,
        )
    ]


def test_an_absolute_torchrun_is_judged_itself(tree: World, tmp_path: Path) -> None:
    folder = tmp_path / "torchrun"
    folder.mkdir()
    (found,) = P._check_trainer(settings_of(tree), [str(folder)], str(FAKE_BIN))
    assert (found.message.en, found.where) == (f"{folder} is on PATH but cannot run: it is a folder", str(folder))


def test_the_first_torchrun_on_path_is_the_one_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    (second / "torchrun").mkdir(parents=True)
    executable(first / "torchrun", b"")
    assert P._unusable_on_path("torchrun", f"{tmp_path / 'none'}:{first}:{second}") == first / "torchrun"
    assert P._unusable_on_path("torchrun", f"{tmp_path / 'none'}:{second}") == second / "torchrun"
    assert P._unusable_on_path("torchrun", str(tmp_path / "none")) is None
    monkeypatch.chdir(first)  # an empty PATH entry (or no PATH at all) is the current folder
    assert P._unusable_on_path("torchrun", f"{tmp_path / 'none'}:") == Path("torchrun")
    assert P._unusable_on_path("torchrun", None) == Path("torchrun")
    monkeypatch.chdir(tmp_path)
    assert P._unusable_on_path("torchrun", None) is None


def why(path: Path, search_path: str | None = "/usr/bin:/bin") -> tuple[str, str] | None:
    reason = P._why_not_executable(path, search_path)
    return (reason.en, reason.zh) if reason else None


FORMAT = (
    "it is neither a script starting with #! nor a compiled program",
    "它既不是以 #! 开头的脚本,也不是编译好的程序",
)


def interpreter(name: str) -> tuple[str, str]:
    return (
        f"its first line names the interpreter '{name}', which is missing or cannot run",
        f"其首行指定的解释器 '{name}' 缺失或无法运行",
    )


def test_what_is_not_a_runnable_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    os.mkfifo(tmp_path / "fifo", 0o755)
    executable(tmp_path / "plain", b"#!/bin/sh\n", 0o644)
    assert why(tmp_path / "folder") == ("it is a folder", "它是文件夹")
    assert why(tmp_path / "dangling") == ("it is a symbolic link to a missing file", "它是指向缺失文件的符号链接")
    assert why(tmp_path / "fifo") == ("it is not a regular file", "它不是普通文件")
    assert why(tmp_path / "plain") == (
        "it may not be executed (no execute permission, or its file system is mounted noexec)",
        "它不允许执行(缺少执行权限,或所在文件系统以 noexec 挂载)",
    )


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"\x7fELF\x02\x01\x01", None),
        (b"#!/bin/sh\nexit 0\n", None),
        (b"#! /bin/sh -e\n", None),
        (b"#!/usr/bin/env FOO=1 -S sh -x\n", None),
        (b"#!/usr/bin/env\n", None),
        (b"#!/bin/sh script-not-on-path\n", None),
        (b"", FORMAT),
        (b"ELF\x7f", FORMAT),
        (b"echo torchrun\n", FORMAT),
        (b"#!\n/bin/sh\n", FORMAT),
        (b"#!   \t\n", FORMAT),
        (b"#!sh\n", interpreter("sh")),
        (b"#!/nonexistent/python\n", interpreter("/nonexistent/python")),
        (b"#!/nonexistent/\xff\n", interpreter("/nonexistent/\ufffd")),
        (b"#!/usr/bin/env no-such-python -u\n", interpreter("/usr/bin/env no-such-python")),
        (b"#!/" + b"/" * 300 + b"bin/sh\n", interpreter("/" * 254)),
    ],
    ids=[
        "elf",
        "sh",
        "space-and-flag",
        "env-assignments-and-flags",
        "env-alone",
        "sh-with-argument",
        "empty",
        "elf-misplaced",
        "prose",
        "bare-hashbang",
        "blank-hashbang",
        "relative",
        "missing",
        "undecodable",
        "env-program-missing",
        "cut-at-256-bytes",
    ],
)
def test_a_file_runs_when_the_kernel_can_start_it(tmp_path: Path, content: bytes, reason: object) -> None:
    assert why(executable(tmp_path / "torchrun", content)) == reason


def test_the_env_program_is_looked_for_on_the_given_path(tmp_path: Path) -> None:
    torchrun = executable(tmp_path / "torchrun", b"#!/usr/bin/env mypython\n")
    executable(tmp_path / "bin" / "mypython", b"#!/bin/sh\n")
    assert why(torchrun, str(tmp_path / "bin")) is None
    assert why(torchrun, str(tmp_path)) == interpreter("/usr/bin/env mypython")
    wrapped = executable(tmp_path / "wrapped", f"#!{tmp_path / 'torchrun'}\n".encode())
    assert why(wrapped, str(tmp_path / "bin")) is None
    assert why(wrapped, str(tmp_path)) == interpreter(str(tmp_path / "torchrun"))


def test_a_file_that_cannot_be_opened_or_read_gets_the_benefit_of_the_doubt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torchrun = executable(tmp_path / "torchrun", b"not a program")
    assert why(torchrun) == FORMAT

    def refused(*args: object) -> int:
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patched:
        patched.setattr(os, "open", refused)
        assert why(torchrun) is None
    with monkeypatch.context() as patched:
        patched.setattr(os, "read", refused)
        assert why(torchrun) is None


def test_an_interpreter_that_is_a_folder_or_not_executable_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    executable(tmp_path / "noexec", b"#!/bin/sh\n", 0o644)
    assert why(executable(tmp_path / "a", f"#!{tmp_path / 'dir'}\n".encode())) == interpreter(str(tmp_path / "dir"))
    assert why(executable(tmp_path / "b", f"#!{tmp_path / 'noexec'}\n".encode())) == interpreter(
        str(tmp_path / "noexec")
    )


def chain(folder: Path, wrappers: int, last: str) -> Path:
    """torchrun -> w1 -> ... -> w<wrappers> -> `last`: each a script whose #! names the next."""
    target = last
    for n in range(wrappers, 0, -1):
        target = str(executable(folder / f"w{n}", f"#!{target}\n".encode()))
    return executable(folder / "torchrun", f"#!{target}\n".encode())


def test_nested_interpreters_are_followed_four_deep(tmp_path: Path) -> None:
    assert why(chain(tmp_path / "ok", 4, "/bin/sh")) is None
    assert why(chain(tmp_path / "four", 4, "/nonexistent/sh")) == interpreter(str(tmp_path / "four" / "w1"))
    assert why(chain(tmp_path / "five", 5, "/nonexistent/sh")) is None  # past the kernel's depth: not followed


def test_the_fourth_interpreter_must_itself_be_executable(tmp_path: Path) -> None:
    noexec = executable(tmp_path / "noexec", b"#!/bin/sh\n", 0o644)  # a file, but it may not be executed
    assert why(chain(tmp_path / "four", 4, str(noexec))) == interpreter(str(tmp_path / "four" / "w1"))


# ---- names too long for the file system ----


def test_node_file_names_fit_in_255_bytes_exactly(tree: World) -> None:
    settings = settings_of(tree)
    name = "n" * (255 - len(".error.json"))  # the longest of this node's names, with `.stacks.txt`
    files = P.NodeFiles("s", Path(f"/l/{name}.log"))
    assert P._fit_names(settings, files) == (files, [])
    no_log = P.NodeFiles("s", None, Text("x", "x"))
    assert P._fit_names(settings, no_log) == (no_log, [])


def test_a_name_one_byte_too_long_withdraws_the_files_and_names_the_experiment(tree: World) -> None:
    settings = settings_of(tree)
    name = "日" + "n" * (255 - len(".error.json") - 2)  # 256 bytes in 254 characters
    long = f"{name}.error.json"
    files, found = P._fit_names(settings, P.NodeFiles("s", Path(f"/l/{name}.log")))
    shown_name = f"{long[:32]}…{long[-32:]}"
    what = Text(
        f"VLA_EXP_NAME: this node's file name {shown_name} would be 256 bytes; a file name may be at most 255 bytes",
        f"VLA_EXP_NAME:本节点的文件名 {shown_name} 将长达 256 字节;文件名最多 255 字节",
    )
    assert files == P.NodeFiles("s", None, what)
    assert [facts(f) for f in found] == [
        (
            "settings.name-too-long",
            Status.FAIL,
            what.en,
            what.zh,
            (
                "Shorten the experiment name (VLA_EXP_NAME) by at least 1 bytes.",
                "请把实验名(VLA_EXP_NAME)至少缩短 1 字节。",
            ),
            "VLA_EXP_NAME",
            ExitCode.JOB_MISSPECIFIED,
        )
    ]


def test_undecodable_bytes_in_a_name_count_one_byte_each(tree: World) -> None:
    name = "\udcff" * 30 + "n" * (255 - len(".error.json") - 30)
    files = P.NodeFiles("s", Path(f"/l/{name}.log"))
    assert P._fit_names(settings_of(tree), files) == (files, [])
    files, (found,) = P._fit_names(settings_of(tree), P.NodeFiles("s", Path(f"/l/{name}x.log")))
    assert "would be 256 bytes" in found.message.en and files.log is None


# ---- flags in extra args ----


LAUNCHER_FLAGS = {
    "--exp-name",
    "--pytorch-weight-path",
    "--pytorch-training-precision",
    "--batch-size",
    "--num-train-steps",
    "--log-interval",
    "--save-interval",
    "--wandb-enabled",
    "--no-wandb-enabled",
    "--assets-base-dir",
    "--checkpoint-base-dir",
    "--num-workers",
    "--resume",
    "--no-resume",
    "--overwrite",
    "--no-overwrite",
}


def test_the_launcher_owns_exactly_the_flags_it_builds() -> None:
    assert P.launcher_flags() == LAUNCHER_FLAGS


def owned(flag: str, where: str, instead: tuple[str, str]) -> tuple[object, ...]:
    return (
        "settings.extra-args",
        Status.FAIL,
        f"{where} passes {flag} to the trainer, but the launcher sets that flag itself",
        f"{where} 向训练脚本传入了 {flag},但该参数由启动器自行设置",
        (f"Remove {flag} from {where}; {instead[0]}", f"请从 {where} 中删除 {flag};{instead[1]}"),
        where,
        ExitCode.JOB_MISSPECIFIED,
    )


RESUME = (
    "the launcher resumes from the latest complete checkpoint by itself; set VLA_OVERWRITE=1 to start fresh instead.",
    "启动器会自动从最新的完整检查点续训;如需从头开始,请设置 VLA_OVERWRITE=1。",
)
OVERWRITE = (
    "set VLA_OVERWRITE=1 instead: the old experiment is moved aside, never deleted (openpi's --overwrite deletes it "
    "on every rank at once).",
    "请改为设置 VLA_OVERWRITE=1:旧实验目录会被移到一旁,不会删除(openpi 的 --overwrite 会在每个 rank 上同时删除它)。",
)


def test_each_owned_flag_in_extra_args_fails_with_what_to_set_instead(tree: World) -> None:
    extra = "--seed 1 --resume=true --no-overwrite --batch_size=4 exp-name __exp_name -h --wandb-enabled --Overwrite"
    found = P._owned_flag_findings(settings_of(tree, VLA_EXTRA_ARGS=extra))
    where = "VLA_EXTRA_ARGS"
    assert [facts(f) for f in found] == [
        owned("--resume", where, RESUME),
        owned("--no-overwrite", where, OVERWRITE),
        owned(
            "--batch-size",
            where,
            (
                "set VLA_BATCH_SIZE instead (or batch_size in the job file).",
                "请改为设置 VLA_BATCH_SIZE(或任务文件中的 batch_size)。",
            ),
        ),
        owned(
            "--wandb-enabled",
            where,
            ("set VLA_WANDB instead (or wandb in the job file).", "请改为设置 VLA_WANDB(或任务文件中的 wandb)。"),
        ),
    ]


def test_an_owned_flag_without_a_setting_points_at_the_settings_table(
    tree: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(P.OWNED_FLAG_SETTINGS, "--num-workers")
    (found,) = P._owned_flag_findings(settings_of(tree, VLA_EXTRA_ARGS="--num-workers=2 --no-resume"))[:1]
    generic = (
        "its value comes from the settings (see the README's Settings table).",
        "其取值来自设置(参见 README 的设置表)。",
    )
    assert facts(found) == owned("--num-workers", "VLA_EXTRA_ARGS", generic)


def test_an_owned_flag_is_found_when_its_value_holds_an_equals_sign(tree: World) -> None:
    found = P._owned_flag_findings(settings_of(tree, VLA_EXTRA_ARGS="--checkpoint_base_dir=/data/run=2"))
    instead = (
        "set VLA_CHECKPOINT_BASE_DIR instead (or checkpoint_base_dir in the job file).",
        "请改为设置 VLA_CHECKPOINT_BASE_DIR(或任务文件中的 checkpoint_base_dir)。",
    )
    assert [facts(f) for f in found] == [owned("--checkpoint-base-dir", "VLA_EXTRA_ARGS", instead)]


def test_an_owned_flag_from_the_command_line_names_the_flag(tree: World) -> None:
    settings = load_settings(tree.env, {"extra_args": ["--overwrite"]})
    assert [facts(f) for f in P._owned_flag_findings(settings)] == [owned("--overwrite", "--extra-args", OVERWRITE)]


def no_training(flag: str, where: str = "VLA_EXTRA_ARGS") -> tuple[object, ...]:
    return (
        "settings.extra-args",
        Status.FAIL,
        f"{where} passes {flag} to the trainer: openpi's trainer would print its help (or a shell completion script) "
        "and exit 0 without training, so the job would end as a success that trained nothing",
        f"{where} 向训练脚本传入了 {flag}:openpi 训练脚本会打印帮助(或 shell 补全脚本)后以 0 退出而不训练,"
        "任务会以“成功”结束却什么也没训练",
        (
            f"Remove {flag} from {where}. To see the trainer's flags, run `python scripts/train_pytorch.py <config> "
            "--help` in the image yourself.",
            f"请从 {where} 中删除 {flag}。如需查看训练脚本的参数,请在镜像中自行运行 "
            "`python scripts/train_pytorch.py <配置名> --help`。",
        ),
        where,
        ExitCode.JOB_MISSPECIFIED,
    )


def test_flags_that_print_and_exit_0_fail(tree: World) -> None:
    extra = "-h --helpful -hx --help=1 --tyro --tyro-write-completion bash --x=--help --help"
    found = P._no_training_findings(settings_of(tree, VLA_EXTRA_ARGS=extra))
    assert [facts(f) for f in found] == [
        no_training("-h"),
        no_training("--help"),
        no_training("--tyro-write-completion"),
        no_training("--help"),
    ]
    assert P._no_training_findings(settings_of(tree, VLA_EXTRA_ARGS="--seed 1")) == []


def test_a_flag_that_prints_and_exits_0_is_named_without_its_value(tree: World) -> None:
    extra = "--help=a=b --tyro-write-completion=bash=out"
    found = P._no_training_findings(settings_of(tree, VLA_EXTRA_ARGS=extra))
    assert [facts(f) for f in found] == [no_training("--help"), no_training("--tyro-write-completion")]


# ---- what execve accepts ----


ARG_MAX = os.sysconf("SC_ARG_MAX")


def test_an_argument_of_128_kib_with_its_nul_fits(tree: World) -> None:
    settings = settings_of(tree)
    assert P._exec_size_findings(settings, ["a" * (P.MAX_ARG_BYTES - 1)], {"K": "\udcff"}) == []


def test_an_argument_one_byte_longer_fails_naming_where_it_was_set(tree: World) -> None:
    item = "日" + "a" * (P.MAX_ARG_BYTES - 3)  # 131072 bytes, and its NUL
    found = P._exec_size_findings(settings_of(tree), ["torchrun", item, "b" * P.MAX_ARG_BYTES], {})
    start = item[:24]
    assert [facts(f) for f in found] == [
        (
            "settings.argument-too-long",
            Status.FAIL,
            f"VLA_EXTRA_ARGS: an argument of 131073 bytes ({start}…) is more than the 131072 bytes Linux passes to a "
            "program",
            f"VLA_EXTRA_ARGS:有一个参数长 131073 字节({start}…),超出 Linux 可传给程序的 131072 字节",
            ("Shorten it, or pass the value in a file instead.", "请缩短该参数,或改为通过文件传递其值。"),
            "VLA_EXTRA_ARGS",
            ExitCode.JOB_MISSPECIFIED,
        )
    ]


def test_a_variable_too_long_is_named_by_its_name(tree: World) -> None:
    (found,) = P._exec_size_findings(settings_of(tree), ["torchrun"], {"SHORT": "1", "BIG": "b" * P.MAX_ARG_BYTES})
    assert (found.where, found.message.en) == (
        "env BIG",
        f"env BIG: an argument of 131077 bytes (BIG={'b' * 20}…) is more than the 131072 bytes Linux "
        "passes to a program",
    )


def filling(total: int) -> list[str]:
    """Arguments whose `execve` cost (bytes, NUL and pointer each) is exactly `total`."""
    piece = 100_000
    items = ["a" * piece] * (total // (piece + 9))
    rest = total - len(items) * (piece + 9)
    if rest < 9:
        items[-1] = "a" * (piece - 9 + rest)
        rest = 9
    return [*items, "c" * (rest - 9)]


def test_the_whole_command_line_may_take_arg_max_and_no_more(tree: World) -> None:
    settings = settings_of(tree)
    fits = filling(ARG_MAX - len("K=v") - 9)
    assert P._exec_size_findings(settings, fits, {"K": "v"}) == []
    assert [facts(f) for f in P._exec_size_findings(settings, fits, {"K": "vv"})] == [
        (
            "settings.argument-too-long",
            Status.FAIL,
            f"torchrun's command line and environment come to {ARG_MAX + 1} bytes, more than this system's limit of "
            f"{ARG_MAX}",
            f"torchrun 的命令行与环境变量共 {ARG_MAX + 1} 字节,超出本系统上限 {ARG_MAX} 字节",
            ("Shorten VLA_EXTRA_ARGS or the environment.", "请缩短 VLA_EXTRA_ARGS 或环境变量。"),
            "VLA_EXTRA_ARGS",
            ExitCode.JOB_MISSPECIFIED,
        )
    ]


# ---- the transformers patch, unknown variables, the storage this job touches ----


@pytest.mark.parametrize(
    "status, folder, finding",
    [
        (
            PatchStatus.PRESENT,
            Path("/site/transformers"),
            ("transformers-patch", Status.PASS, "transformers patch already present", "transformers 补丁已存在", None,
             "/site/transformers", ExitCode.PREFLIGHT_FAILED),
        ),
        (
            PatchStatus.APPLY,
            Path("/site/transformers"),
            ("transformers-patch", Status.PASS, "transformers patch missing: /o/fix.sh runs before training",
             "transformers 补丁缺失:训练前将执行 /o/fix.sh", None, "/o/fix.sh", ExitCode.PREFLIGHT_FAILED),
        ),
        (
            PatchStatus.NO_TRANSFORMERS,
            None,
            ("transformers-patch", Status.PASS, "transformers is not installed for this interpreter: no patch needed",
             "当前解释器未安装 transformers:无需补丁", None, None, ExitCode.PREFLIGHT_FAILED),
        ),
        (
            PatchStatus.UNAVAILABLE,
            Path("/site/transformers"),
            ("transformers-patch", Status.WARN, "the transformers patch is missing and /o/fix.sh does not exist",
             "transformers 补丁缺失,且 /o/fix.sh 不存在",
             ("Use the VLA base image, which ships the patch script, or apply openpi's transformers_replace yourself.",
              "请使用自带补丁脚本的 VLA 基础镜像,或自行应用 openpi 的 transformers_replace。"),
             "/o/fix.sh", ExitCode.PREFLIGHT_FAILED),
        ),
    ],
    ids=["present", "apply", "no-transformers", "unavailable"],
)  # fmt: skip
def test_the_patch_line_follows_the_patch_state(status: PatchStatus, folder: Path | None, finding: tuple) -> None:
    assert facts(P._patch_finding(PatchState(status, folder, Path("/o/fix.sh")))) == finding


def test_unknown_vla_variables_warn_with_the_closest_name(tree: World) -> None:
    settings = settings_of(tree, VLA_BATCH_SIZ="8", VLA_QQQQQQQQQQ="1")
    assert [facts(f) for f in P._unknown_variable_findings(settings)] == [
        ("settings.unknown-variable", Status.WARN, "VLA_BATCH_SIZ is not a known setting and is ignored",
         "VLA_BATCH_SIZ 不是已知设置,已忽略", ("Did you mean VLA_BATCH_SIZE?", "是否应为 VLA_BATCH_SIZE?"),
         "VLA_BATCH_SIZ", ExitCode.PREFLIGHT_FAILED),
        ("settings.unknown-variable", Status.WARN, "VLA_QQQQQQQQQQ is not a known setting and is ignored",
         "VLA_QQQQQQQQQQ 不是已知设置,已忽略", ("See the README's Settings table.", "请参阅 README 的设置表。"),
         "VLA_QQQQQQQQQQ", ExitCode.PREFLIGHT_FAILED),
    ]  # fmt: skip


def test_the_storage_paths_are_every_path_setting_the_experiment_and_the_weights(tree: World) -> None:
    a = tree.assets
    paths = [a, tree.openpi, a / "assets", a / "checkpoints", a / "datasets", a / "logs", tree.experiment]
    assert P.storage_paths(settings_of(tree)) == [*paths, a / "checkpoints" / "pi05_base_pytorch"]
    assert P.storage_paths(settings_of(tree, VLA_WEIGHTS="none")) == paths


# ---- build_plan: the whole launch of one node ----


NODE_CHECKS = [
    ("batch", "pass"),
    ("settings.train-config", "pass"),
    ("assets.norm-stats", "pass"),
    ("assets.weights", "pass"),
    ("assets.weights-signature", "pass"),
    ("assets.dataset", "pass"),
    ("assets.tokenizer", "pass"),
    ("resume", "pass"),
    ("storage.checkpoint-writable", "pass"),
    ("storage.checkpoint-space", "pass"),
    ("storage.datasets-cache", "pass"),
]
TAIL_CHECKS = [("taco.wheel", "pass"), ("transformers-patch", "pass")]
TRAINER = [
    "scripts/train_pytorch.py",
    "pi05_libero",
    "--exp-name",
    EXP,
    "--pytorch-weight-path",
    "<root>/assets/checkpoints/pi05_base_pytorch",
    "--pytorch-training-precision",
    "bfloat16",
    "--batch-size",
    "256",
    "--num-train-steps",
    "50",
    "--log-interval",
    "10",
    "--save-interval",
    "25",
    "--no-wandb-enabled",
    "--assets-base-dir",
    "<root>/assets/assets",
    "--checkpoint-base-dir",
    "<root>/assets/checkpoints",
]


def stem(rank: int = 0) -> str:
    return f"<root>/assets/logs/{EXP}-node{rank}-{STAMP}"


def node_launch(rank: int = 0, **changes: object) -> dict[str, object]:
    base = stem(rank)
    return {
        "stamp": STAMP,
        "log": f"{base}.log",
        "record": f"{base}.json",
        "nccl_log_dir": f"{base}.nccl",
        "stacks": f"{base}.stacks.txt",
        "attempts": f"{base}.attempts",
        "log_problem": None,
        "log_problem_zh": None,
        "error_file": f"{base}.error.json",
        "memlock": "keep",
        "memlock_reason": "the locked-memory limit is left as it is (soft equals hard)",
        "memlock_reason_zh": "锁定内存限制保持不变(软限制等于硬限制)",
        "preflight": "off",
        "preflight_reason": "no bandwidth preflight (VLA_PREFLIGHT=off)",
        "preflight_reason_zh": "不进行带宽预检(VLA_PREFLIGHT=off)",
        "nccl_debug": {
            "NCCL_DEBUG": "INFO",
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "NCCL_DEBUG_FILE": f"{base}.nccl/nccl.%h.%p.log",
        },
        "nccl_debug_reason": f"NCCL INFO lines for INIT and NET go to {base}.nccl, read after training as proof of "
        "the transport",
        "nccl_debug_reason_zh": f"NCCL 的 INIT 与 NET 信息日志写入 {base}.nccl,训练结束后据此确认实际使用的传输方式",
        "wait_for_master": None,
        "max_restarts": 3,
        "rendezvous": "static",
        "events_dir": f"<root>/assets/logs/tensorboard/{EXP}/node{rank}-{STAMP}",
        "report": f"<root>/assets/logs/{EXP}-report.html",
        "metrics_interval_s": 10,
        "prefetch": None,
        **changes,
    }


def node_env(rank: int = 0) -> dict[str, str]:
    base = stem(rank)
    return {
        "HF_HUB_OFFLINE": "1",
        "HF_LEROBOT_HOME": "<root>/assets/datasets",
        "JAX_PLATFORMS": "cpu",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_FILE": f"{base}.nccl/nccl.%h.%p.log",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "OMP_NUM_THREADS": "1",
        "OPENPI_DATA_HOME": "<root>/assets/cache/openpi",
        "PYTHONFAULTHANDLER": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TORCHELASTIC_ERROR_FILE": f"{base}.error.json",
        "TORCH_FR_BUFFER_SIZE": "20000",
        "TORCH_FR_DUMP_TEMP_FILE": f"{base}.fr/rank_",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"/tmp/vla-entrypoint-fr-node{rank}-{STAMP}-pipe_",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{base}.fr/rank_",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "20000",
        "TRANSFORMERS_OFFLINE": "1",
    }


def shape(nnodes: int, rank: int, per_node: int, addr: str, port: int, timeout: int) -> list[str]:
    return [
        "<bin>/torchrun",
        "--nnodes",
        str(nnodes),
        "--nproc_per_node",
        str(per_node),
        "--node_rank",
        str(rank),
        "--master_addr",
        addr,
        "--master_port",
        str(port),
        "--rdzv_conf",
        f"timeout={timeout}",
        "--max_restarts",
        "3",
        "-m",
        ATTEMPT,
        "--facts",
        f"{stem(rank)}.attempts",
    ]


def test_a_single_node_plan_is_the_whole_launch(world: World) -> None:
    plan = plan_of(world)
    data = shown(world, plan.to_json())
    assert isinstance(data, dict)
    assert list(data) == [
        "ok",
        "exit_code",
        "topology",
        "fabric",
        "env",
        "checks",
        "resume",
        "transformers_patch",
        "taco",
        "settings",
        "dataset_seal",
        "storage",
        "health",
        "command",
        "cwd",
        "launch",
    ]
    assert (data["ok"], data["exit_code"], plan.exit_code, plan.scope) == (True, 0, 0, Scope.NODE)
    assert data["topology"] == plan.topology.to_json() and plan.topology.nproc_per_node == 8
    assert data["launch"] == node_launch()
    assert data["command"] == [*shape(1, 0, 8, "127.0.0.1", 29500, 630), *TRAINER, "--no-resume", "--no-overwrite"]
    assert data["cwd"] == "<root>/openpi"
    assert data["env"] == {"set": node_env(), "kept": {"HF_DATASETS_CACHE": "<root>/hf-datasets"}, "removed": []}
    assert ids(plan) == [*NODE_CHECKS, ("fabric.transport", "pass"), *TAIL_CHECKS]
    (space,) = [f for f in plan.findings if f.id == "storage.checkpoint-space"]
    assert space.message.en == (
        "1000.0 GB free for 3 save(s) of about 22.4 GB, together with the datasets cache "
        f"{world.root}/hf-datasets on the same file system (about 0.0 GB still to build before the first save)"
    )
    assert data["resume"] == shown(world, plan.resume.to_json()) and plan.resume.action is ResumeAction.FRESH
    assert data["transformers_patch"] == shown(world, plan.patch.to_json())
    assert data["taco"] == plan.taco.to_json() and data["taco"]["status"] == "off"
    assert data["settings"] == shown(world, plan.settings.to_json())
    assert data["dataset_seal"] == {"role": "none", "path": None, "trusted": False, "reason": None}
    assert data["storage"] == {"probed": [], "watched": []}
    assert plan.health is not None and data["health"] == plan.health.to_json()
    assert data["health"]["mode"] == "off"
    fabric_json = plan.fabric.to_json()
    assert data["fabric"] == {k: v for k, v in fabric_json.items() if k not in ("findings", "env_set", "env_kept")}
    assert list(data["fabric"]) == ["transport", "devices", "socket_ifname", "gdr", "nccl_version", "net_plugin",
                                    "memlock", "decisions"]  # fmt: skip


def test_the_environment_is_the_inherited_one_less_what_is_removed_plus_what_is_set(world: World) -> None:
    plan = plan_of(world, world.tione(nodes=2, per_node=8, rank=0))
    environment = plan.environment()
    assert plan.inherited == {**world.env, **world.tione(nodes=2, per_node=8, rank=0)}
    assert environment == {
        **{k: v for k, v in plan.inherited.items() if k not in ("RANK", "WORLD_SIZE")},
        **plan.env.set,
    }
    assert sorted(plan.env.removed) == ["RANK", "WORLD_SIZE"] and plan.command is plan.launch.command


def test_check_shows_no_command(world: World) -> None:
    data = plan_of(world).to_json(with_command=False)
    assert "command" not in data and "cwd" not in data and "launch" not in data and "health" in data


def test_flags_and_the_clock_reach_the_plan(world: World) -> None:
    plan = P.build_plan(host_of(world), {"batch_size": 64, "exp_name": "short"}, clock=lambda: 0.0)
    assert plan.launch.files.stamp == "19700101-000000"
    assert plan.launch.files.log == world.assets / "logs" / "short-node0-19700101-000000.log"
    command = plan.command
    assert command[command.index("--batch-size") + 1] == "64" and command[command.index("--exp-name") + 1] == "short"
    assert plan.findings[0].message.en == "global batch 64 = 8 per process x 8 processes (1 node(s) x 8)"


def test_a_worker_node_waits_for_node_0_and_reads_its_seal(world: World) -> None:
    env = {**world.tione(nodes=2, per_node=8, rank=1), "VLA_PREFLIGHT": "warn", "VLA_MASTER_WAIT_TIMEOUT": "40"}
    plan = plan_of(world, env)
    data = shown(world, plan.to_json())
    assert isinstance(data, dict)
    wait = {"variable": "MASTER_ADDR", "addr": "10.0.0.1", "port": 23457, "timeout_s": 40, "resolve_timeout_s": 40}
    preflight = {
        "preflight": "warn",
        "preflight_reason": "a bandwidth preflight runs before training and only reports (VLA_PREFLIGHT=warn)",
        "preflight_reason_zh": "训练前进行带宽预检,仅报告结果(VLA_PREFLIGHT=warn)",
    }
    assert data["launch"] == node_launch(1, wait_for_master=wait, **preflight)
    assert data["command"] == [*shape(2, 1, 8, "10.0.0.1", 23456, 630), *TRAINER, "--no-resume", "--no-overwrite"]
    assert data["env"]["removed"] == ["RANK", "WORLD_SIZE"]
    assert ids(plan) == [*NODE_CHECKS, ("fabric.socket-fallback", "warn"), *TAIL_CHECKS]
    dataset = world.assets / "datasets" / "physical-intelligence" / "libero"
    key = job_key(plan.inherited, dataset)
    assert key is not None and plan.seal.key == key
    assert data["dataset_seal"] == {
        "role": "read",
        "path": f"<root>/assets/logs/.seals/{key}.json",
        "trusted": False,
        "reason": "no seal from node 0",
    }


def test_node_0_of_a_job_seals_its_verdict_and_waits_for_nobody(world: World) -> None:
    plan = plan_of(world, {**world.tione(nodes=2, per_node=8, rank=0), "VLA_PREFLIGHT": "fail"})
    assert (plan.seal.role, plan.seal.path) == (
        SealRole.WRITE,
        world.assets / "logs" / ".seals" / f"{plan.seal.key}.json",
    )
    assert plan.seal.payload is not None and plan.seal.payload["verdict"] == "pass"
    assert plan.launch.wait_for_master is None and plan.launch.preflight is PreflightMode.FAIL


def test_without_a_dataset_there_is_no_seal_and_no_datasets_cache(world: World) -> None:
    env = {
        **world.tione(nodes=2, per_node=8, rank=0),
        "VLA_DATASET_REPO_ID": "none",
        "VLA_TRAIN_CONFIG": "debug_pi05",
        "VLA_ASSET_ID": "none",
    }
    plan = plan_of(world, env)
    assert plan.seal.role is SealRole.NONE
    assert "storage.datasets-cache" not in [f.id for f in plan.findings]
    (space,) = [f for f in plan.findings if f.id == "storage.checkpoint-space"]
    assert space.message.en == "1000.0 GB free for 3 save(s) of about 22.4 GB"
    assert "HF_LEROBOT_HOME" not in plan.env.set


def test_a_seal_from_node_0_written_after_this_node_started_is_trusted(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    node0 = plan_of(world, world.tione(nodes=2, per_node=8, rank=0))
    assert node0.seal.path is not None and node0.seal.payload is not None
    node0.seal.path.parent.mkdir(parents=True)
    node0.seal.path.write_text(json.dumps({**node0.seal.payload, "written_at": time.time() - 500}))
    env = world.tione(nodes=2, per_node=8, rank=1)
    monkeypatch.setattr(P, "process_age_s", lambda: 1000.0)  # this node started before node 0 wrote
    assert plan_of(world, env).seal.trusted
    monkeypatch.setattr(P, "process_age_s", lambda: None)  # unknown: taken as started now, after the seal
    late = plan_of(world, env).seal
    assert (late.trusted, late.reason) == (False, "the seal is older than this node's start")


def test_a_node_of_unknown_age_trusts_a_seal_written_up_to_the_clock_skew_before_now(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    node0 = plan_of(world, world.tione(nodes=2, per_node=8, rank=0))
    assert node0.seal.path is not None and node0.seal.payload is not None
    node0.seal.path.parent.mkdir(parents=True)
    now = time.time()
    monkeypatch.setattr(P, "time", SimpleNamespace(time=lambda: now, strftime=time.strftime, localtime=time.localtime))
    monkeypatch.setattr(P, "process_age_s", lambda: None)  # unknown: taken as started `now`
    env = world.tione(nodes=2, per_node=8, rank=1)
    reasons = []
    for age in (CLOCK_SKEW_S, CLOCK_SKEW_S + 0.5):
        node0.seal.path.write_text(json.dumps({**node0.seal.payload, "written_at": now - age}))
        seal = plan_of(world, env).seal
        reasons.append((seal.trusted, seal.reason))
    assert reasons == [(True, None), (False, "the seal is older than this node's start")]


def test_only_a_node_that_waits_for_the_seal_waits_and_at_most_the_shorter_bound(world: World) -> None:
    env = {**world.tione(nodes=2, per_node=8, rank=1), "VLA_MASTER_WAIT_TIMEOUT": "0"}
    assert plan_of(world, env, wait_for_seal=True).seal.reason == "no seal from node 0"  # min(15, 0): no wait


def test_the_storage_timeout_bounds_the_wait_for_a_seal(world: World) -> None:
    env = {**world.tione(nodes=2, per_node=8, rank=1), "VLA_STORAGE_TIMEOUT": "1", "VLA_MASTER_WAIT_TIMEOUT": "900"}
    assert plan_of(world, env, wait_for_seal=True).seal.reason == "no seal from node 0 within 1 s"


# ---- build_plan: the dev machine's `check --assets` ----


def test_the_dev_machine_checks_the_stated_shape_and_skips_what_only_a_node_can_check(world: World) -> None:
    env = {
        **world.tione(nodes=2, per_node=8, rank=1),
        "VLA_EXTRA_ARGS": "--wandb-key=wk-secret-1",
        "VLA_HEALTH": "warn",
    }
    plan = plan_of(world, env, scope=Scope.ASSETS, nodes=3, gpus_per_node=4)
    assert plan.scope is Scope.ASSETS and plan.stated is not None
    assert (plan.stated.nnodes, plan.stated.per_node) == (3, 4)
    assert (plan.topology.nnodes, plan.topology.nproc_per_node, plan.topology.node_rank) == (3, 4, 0)
    assert plan.topology.device is Device.GPU
    assert plan.seal.role is SealRole.NONE and plan.launch.wait_for_master is None
    assert plan.health is not None and (plan.health.runs, plan.health.reason.en) == (
        False,
        "node health gate: run by each node when the job starts, not here",
    )
    assert "--health" not in plan.command
    assert ids(plan) == [
        ("settings.job-file", "pass"),
        ("batch", "fail"),
        *NODE_CHECKS[1:10],
        ("taco.wheel", "pass"),
        ("topology.gpus", "skip"),
        ("fabric", "skip"),
        ("health", "skip"),
        ("storage.datasets-cache", "skip"),
        ("transformers-patch", "skip"),
        ("trainer.script", "skip"),
        ("trainer.torchrun", "skip"),
    ]
    data = plan.to_json()
    assert list(data) == ["ok", "exit_code", "scope", "topology", "checks", "resume", "settings"]
    assert (data["ok"], data["exit_code"], data["scope"]) == (False, 2, "assets")
    assert data["topology"] == {"nnodes": 3, "nproc_per_node": 4, "world_size": 12, "source": "flags"}
    assert data["checks"] == [f.to_json() for f in plan.findings]
    assert data["resume"] == plan.resume.to_json()
    assert data["settings"]["values"]["extra_args"] == ["--wandb-key=***"]  # type: ignore[index]
    assert plan.settings.extra_args == ("--wandb-key=wk-secret-1",)


def test_the_dev_machine_states_a_good_shape_as_ok(world: World) -> None:
    data = plan_of(world, scope=Scope.ASSETS).to_json()
    assert (data["ok"], data["exit_code"], data["topology"]) == (
        True,
        0,
        {"nnodes": 1, "nproc_per_node": 8, "world_size": 8, "source": "default"},
    )


def test_only_a_training_node_asks_whether_the_tokenizer_can_be_downloaded(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from entrypoint.inspect import tokenizer_fetch

    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: False)  # decided here, never over the network
    (world.assets / "cache" / "openpi" / "big_vision" / "paligemma_tokenizer.model").unlink()
    node = [i for i, _ in ids(plan_of(world)) if i.startswith("assets.tokenizer")]
    dev = [i for i, _ in ids(plan_of(world, scope=Scope.ASSETS)) if i.startswith("assets.tokenizer")]
    assert (node, dev) == (["assets.tokenizer", "assets.tokenizer-download"], ["assets.tokenizer"])


# ---- build_plan: the assets root, the shared storage ----


def mount_table(world: World, *lines: str) -> None:
    table = world.host / "proc" / "self" / "mountinfo"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(OVERLAY + "".join(lines))


def nfs(n: int, point: Path) -> str:
    return f"{n} 1 0:{60 + n} / {point} rw,relatime - nfs4 cfs-{n}:/share rw,vers=4.0\n"


def test_under_an_unmounted_root_a_tione_node_writes_nothing_there(world: World) -> None:
    mount_table(world)
    plan = plan_of(world, world.tione(nodes=2, per_node=8, rank=1))
    data = shown(world, plan.to_json())
    assert isinstance(data, dict)
    withheld = {
        "log_problem": "<root>/assets/logs is under the assets root <root>/assets, which is not mounted: nothing is "
        "written there",
        "log_problem_zh": "<root>/assets/logs 位于未挂载的资源根目录 <root>/assets 下:不会在此写入任何内容",
    }
    nothing = dict.fromkeys(["log", "record", "nccl_log_dir", "stacks", "attempts", "error_file", "events_dir"])
    wait = {"variable": "MASTER_ADDR", "addr": "10.0.0.1", "port": 23456, "timeout_s": 300, "resolve_timeout_s": 90}
    assert data["launch"] == node_launch(
        1,
        **nothing,
        **withheld,
        report=None,
        wait_for_master=wait,
        nccl_debug={},
        nccl_debug_reason="no node log folder: NCCL's debug output is not routed",
        nccl_debug_reason_zh="没有节点日志目录:不重定向 NCCL 调试输出",
    )
    assert data["command"] == [*shape(2, 1, 8, "10.0.0.1", 23456, 630)[:-2], *TRAINER, "--no-resume", "--no-overwrite"]
    assert ids(plan) == [
        ("batch", "pass"),
        ("settings.train-config", "pass"),
        ("storage.assets-mount", "fail"),
        ("storage.not-checked", "warn"),
        ("storage.datasets-cache", "pass"),
        ("fabric.socket-fallback", "warn"),
        *TAIL_CHECKS,
    ]
    assert plan.exit_code == 3 and data["ok"] is False
    assert "TORCHELASTIC_ERROR_FILE" not in plan.env.set and "TORCH_FR_DUMP_TEMP_FILE" not in plan.env.set


def test_under_an_unmounted_root_the_default_datasets_cache_is_not_checked(world: World) -> None:
    mount_table(world)
    plan = plan_of(world, world.tione(nodes=2, per_node=8, rank=0), drop=("HF_DATASETS_CACHE",))
    assert "storage.datasets-cache" not in [f.id for f in plan.findings]


def test_a_datasets_cache_under_an_unmounted_root_takes_no_room_from_checkpoints_elsewhere(world: World) -> None:
    checkpoints = world.root / "ckpt"
    checkpoints.mkdir()
    mount_table(world, f"5 1 8:1 / {checkpoints} rw - ext4 /dev/sdb1 rw\n")
    env = {**world.tione(nodes=2, per_node=8, rank=0), "VLA_CHECKPOINT_BASE_DIR": str(checkpoints)}
    plan = plan_of(world, env, drop=("HF_DATASETS_CACHE",))
    (space,) = [f for f in plan.findings if f.id == "storage.checkpoint-space"]
    assert space.message.en == "1000.0 GB free for 3 save(s) of about 22.4 GB"


def test_a_root_on_the_containers_disk_only_warns_outside_tione(world: World) -> None:
    mount_table(world)
    plan = plan_of(world)
    (verdict,) = [f for f in plan.findings if f.id == "storage.assets-mount"]
    assert verdict.status is Status.WARN and plan.launch.files.log is not None


def test_a_multi_node_job_is_warned_of_a_root_on_a_local_disk(world: World) -> None:
    mount_table(world, f"5 1 8:1 / {world.assets} rw - ext4 /dev/sdb1 rw\n")
    single = [f.status for f in plan_of(world).findings if f.id == "storage.assets-mount"]
    multi = [
        f.status
        for f in plan_of(world, world.tione(nodes=2, per_node=8, rank=0)).findings
        if f.id == "storage.assets-mount"
    ]
    assert (single, multi) == ([Status.PASS], [Status.WARN])


def test_a_datasets_cache_under_the_root_is_counted_for_every_node(world: World) -> None:
    plan = plan_of(world, world.tione(nodes=2, per_node=8, rank=1), drop=("HF_DATASETS_CACHE",))
    folder = world.assets / "cache" / "datasets" / "node1"
    (cache,) = [f for f in plan.findings if f.id == "storage.datasets-cache"]
    assert facts(cache) == (
        "storage.datasets-cache",
        Status.PASS,
        f"datasets cache in this node's folder under the assets root: {folder} (a new container reuses it; it takes "
        "about the dataset's 0.0 GB once built)",
        f"datasets 缓存位于资源根目录下本节点的目录:{folder}(新容器可直接复用;建成后约占数据集大小 0.0 GB)",
        None,
        str(folder),
        ExitCode.PREFLIGHT_FAILED,
    )
    assert plan.env.set["HF_DATASETS_CACHE"] == str(folder)
    (space,) = [f for f in plan.findings if f.id == "storage.checkpoint-space"]
    assert space.message.en == (
        "1000.0 GB free for 3 save(s) of about 22.4 GB, together with the datasets caches of all 2 node ranks "
        f"({folder} and 1 more) on the same file system (about 0.0 GB still to build before the first save)"
    )


def test_the_shared_storage_is_probed_before_it_is_touched_and_watched(world: World) -> None:
    mount_table(world, nfs(5, world.assets))
    plan = plan_of(world, {"VLA_BATCH_SIZ": "8"})
    assert ids(plan)[:3] == [("settings.unknown-variable", "warn"), ("storage.responsive", "pass"), ("batch", "pass")]
    assert plan.findings[1].where == str(world.assets)
    (probed,) = plan.to_json()["storage"]["probed"]  # type: ignore[index]
    assert {k: probed[k] for k in ("point", "fs_type", "source", "stage", "error")} == {
        "point": str(world.assets),
        "fs_type": "nfs4",
        "source": "cfs-5:/share",
        "stage": "list",
        "error": None,
    }
    assert plan.to_json()["storage"]["watched"] == [str(world.assets)]  # type: ignore[index]


def test_the_watched_mounts_are_those_of_the_checkpoints_and_the_logs(world: World) -> None:
    plan = plan_of(world)
    checkpoints = Mount(str(world.assets / "checkpoints"), "nfs4", "a:/c")
    logs = Mount(str(world.assets / "logs"), "nfs4", "a:/l")
    others = [Mount(str(world.assets), "ext4", "/dev/sdb"), Mount(str(world.root / "data"), "nfs4", "a:/d")]
    watched = replace(plan, storage=StorageProbe([logs, *others, checkpoints], 0))
    assert watched.watched_mounts == [checkpoints, logs]
    assert watched.to_json()["storage"] == {"probed": [], "watched": [checkpoints.point, logs.point]}


def missing_mount(world: World, name: str) -> Path:
    """An NFS mount at `<root>/<name>` that answers with an error (its point does not exist)."""
    point = world.root / name
    mount_table(world, nfs(7, point))
    return point


def test_a_job_file_on_storage_that_does_not_answer_stops_the_plan_before_it_is_read(world: World) -> None:
    point = missing_mount(world, "jobs")
    with pytest.raises(StorageNotAnswering) as raised:
        plan_of(world, {"VLA_JOB_FILE": str(point / "job.yaml"), "VLA_STORAGE_TIMEOUT": "7"})
    assert (raised.value.id, raised.value.where) == ("storage.not-answering", str(point))
    assert "(now 7 s)" in raised.value.fix.en and "(当前 7 秒)" in raised.value.fix.zh


def test_a_log_folder_on_storage_that_does_not_answer_stops_the_plan(world: World) -> None:
    point = missing_mount(world, "logs")
    with pytest.raises(StorageNotAnswering) as raised:
        plan_of(world, {"VLA_LOG_DIR": str(point / "logs"), "VLA_STORAGE_TIMEOUT": "6"})
    assert raised.value.where == str(point) and "(now 6 s)" in raised.value.fix.en


# ---- build_plan: what the settings decide ----


def test_a_complete_checkpoint_is_resumed_and_read_ahead(world: World) -> None:
    make_checkpoint(world.experiment, 25)
    plan = plan_of(world)
    assert plan.resume.action is ResumeAction.RESUME and plan.command[-2:] == ["--resume", "--no-overwrite"]
    (space,) = [f for f in plan.findings if f.id == "storage.checkpoint-space"]
    assert space.message.en.startswith("1000.0 GB free for 2 save(s) of about 22.4 GB, together with")
    step = world.experiment / "25"
    assert plan.launch.prefetch is not None and plan.launch.prefetch.step == 25
    assert [p for p, _ in plan.launch.prefetch.files] == [
        step / "model.safetensors",
        step / "optimizer.pt",
        step / "metadata.pt",
    ]


def test_a_finished_job_is_shown_with_resume(world: World) -> None:
    for step in (25, 49, 50):
        make_checkpoint(world.experiment, step)
    plan = plan_of(world)
    assert plan.resume.action is ResumeAction.FINISHED and "--resume" in plan.command
    assert plan.launch.prefetch is None  # the base weights are sparse: nothing worth reading


def test_the_health_gate_is_told_to_the_attempt_shim(world: World) -> None:
    gpu = plan_of(world, {"VLA_HEALTH": "warn"})
    assert gpu.health is not None and gpu.health.runs
    facts_at = gpu.command.index("--facts")
    assert gpu.command[facts_at + 2 : facts_at + 4] == ["--health", "warn"]
    cpu = plan_of(world, {"VLA_HEALTH": "warn", "VLA_DEVICE": "cpu"})
    assert "--health" not in cpu.command and cpu.topology.nproc_per_node == 1


def test_an_unknown_train_config_looks_up_nothing_by_its_name(world: World) -> None:
    plan = plan_of(world, {"VLA_TRAIN_CONFIG": "pi05_librero"})
    assert ("settings.train-config", "fail") in ids(plan)
    assert not [i for i, _ in ids(plan) if i in ("assets.norm-stats", "assets.weights-signature")]
    assert plan.exit_code == 2


def test_every_setting_the_launch_takes_is_in_the_plan(world: World) -> None:
    env = {
        "VLA_MAX_RESTARTS": "0",
        "VLA_RENDEZVOUS_TIMEOUT": "100",
        "VLA_METRICS_INTERVAL": "5",
        "VLA_TENSORBOARD_DIR": "none",
        "VLA_EXP_NAME": "other",
        "VLA_OPENPI_DIR": str(world.openpi),
    }
    plan = plan_of(world, env)
    assert plan.command[11:17] == ["--rdzv_conf", "timeout=130", "--max_restarts", "0", "-m", ATTEMPT]
    launch_json = plan.launch.to_json()
    assert (launch_json["max_restarts"], launch_json["metrics_interval_s"], launch_json["events_dir"]) == (0, 5, None)
    assert launch_json["report"] == str(world.assets / "logs" / "other-report.html")
    assert plan.launch.cwd == str(world.openpi)


def test_the_users_error_file_is_where_a_failed_worker_is_looked_for(world: World) -> None:
    mine = world.root / "mine.error.json"
    plan = plan_of(world, {"TORCHELASTIC_ERROR_FILE": str(mine)})
    assert plan.launch.error_file == mine and plan.env.kept["TORCHELASTIC_ERROR_FILE"] == str(mine)
    assert plan.launch.node_file_variables == ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")


def test_locked_memory_below_the_hard_limit_is_raised(world: World) -> None:
    limits = world.host / "proc" / "self" / "limits"
    text = limits.read_text()
    assert "65536                65536" in text
    limits.write_text(text.replace("65536                65536", "65536                131072"))
    assert plan_of(world).launch.memlock is P.MemlockIntent.RAISE


def test_an_experiment_name_too_long_for_this_nodes_files_fails_and_writes_none(world: World) -> None:
    plan = plan_of(world, {"VLA_EXP_NAME": "e" * 223})
    assert plan.launch.files.log is None and plan.launch.error_file is None and plan.launch.report is None
    problem = plan.launch.files.problem
    assert problem is not None and problem.en.startswith("VLA_EXP_NAME: this node's file name ")
    (found,) = [f for f in plan.findings if f.id == "settings.name-too-long"]
    assert found.message == problem and plan.exit_code == 2


def test_the_trainer_and_argument_checks_come_last_in_order(world: World) -> None:
    (world.assets / "code" / "job.yaml").write_text(
        f"extra_args: [--overwrite, --help]\nenv: {{BIG: {'b' * P.MAX_ARG_BYTES}}}\n"
    )
    plan = plan_of(world, {"VLA_OPENPI_DIR": str(world.root / "no-openpi")})
    assert ids(plan)[-5:] == [
        ("transformers-patch", "pass"),
        ("trainer.script", "fail"),
        ("settings.extra-args", "fail"),
        ("settings.extra-args", "fail"),
        ("settings.argument-too-long", "fail"),
    ]
    assert [f.where for f in plan.findings[-4:]] == [
        str(world.root / "no-openpi" / "scripts" / "train_pytorch.py"),
        f"{world.assets / 'code' / 'job.yaml'}: extra_args",
        f"{world.assets / 'code' / 'job.yaml'}: extra_args",
        "env BIG",
    ]


def test_secrets_are_masked_in_the_plan_while_the_command_keeps_them(world: World) -> None:
    (world.assets / "code" / "job.yaml").write_text("env: {HF_TOKEN: hf-secret-123}\n")
    plan = plan_of(world, {"VLA_EXTRA_ARGS": "--wandb-key=wk-secret-1"})
    data = plan.to_json()
    assert data["command"][-1] == "--wandb-key=***" and plan.command[-1] == "--wandb-key=wk-secret-1"  # type: ignore[index]
    assert data["env"]["set"]["HF_TOKEN"] == "***" and plan.environment()["HF_TOKEN"] == "hf-secret-123"  # type: ignore[index]


def test_the_trainer_flags_follow_the_settings(world: World) -> None:
    env = {"VLA_NUM_WORKERS": "2", "VLA_WANDB": "1", "VLA_PRECISION": "float32", "VLA_WEIGHTS": "none"}
    env |= {"VLA_EXTRA_ARGS": "--seed 7", "VLA_TRAIN_CONFIG": "debug_pi05", "VLA_DATASET_REPO_ID": "none"}
    env |= {"VLA_ASSET_ID": "none"}
    command = shown(world, plan_of(world, env).command)
    assert isinstance(command, list)
    assert command[command.index("scripts/train_pytorch.py") :] == [
        "scripts/train_pytorch.py",
        "debug_pi05",
        "--exp-name",
        EXP,
        "--pytorch-weight-path",
        "None",
        "--pytorch-training-precision",
        "float32",
        "--batch-size",
        "256",
        "--num-train-steps",
        "50",
        "--log-interval",
        "10",
        "--save-interval",
        "25",
        "--wandb-enabled",
        "--assets-base-dir",
        "<root>/assets/assets",
        "--checkpoint-base-dir",
        "<root>/assets/checkpoints",
        "--num-workers",
        "2",
        "--no-resume",
        "--no-overwrite",
        "--seed",
        "7",
    ]


def test_a_multi_node_gpu_job_gates_its_health_with_an_allreduce(world: World) -> None:
    plan = plan_of(world, {**world.tione(nodes=2, per_node=4, rank=0), "VLA_HEALTH": "fail"})
    assert plan.health is not None
    assert (plan.health.runs, plan.health.allreduce, plan.health.gpus) == (True, True, 4)
    assert plan.to_json()["health"] == plan.health.to_json()


def test_the_transformers_patch_is_judged_where_transformers_lives(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site" / "transformers"
    site.mkdir(parents=True)
    monkeypatch.setattr(P, "transformers_dir", lambda: site)
    plan = plan_of(world)
    assert plan.patch == PatchState(PatchStatus.UNAVAILABLE, site, world.openpi / "install_transformers_replace.sh")
    assert ("transformers-patch", "warn") in ids(plan)


def test_the_torchrun_check_looks_on_the_jobs_path(world: World) -> None:
    folder = world.root / "job-bin"
    executable(folder / "torchrun", b"#!/usr/bin/env job-python\n")
    executable(folder / "job-python", b"#!/bin/sh\n")
    plan = plan_of(world, {"PATH": f"{folder}:{world.env['PATH']}"})
    assert plan.command[0] == str(folder / "torchrun") and "trainer.torchrun" not in [f.id for f in plan.findings]


def test_the_fabrics_variables_and_its_kept_values_reach_the_environment(world: World) -> None:
    plan = plan_of(world, {**world.tione(nodes=2, per_node=8, rank=1), "NCCL_IB_DISABLE": "1"})
    data = shown(world, plan.to_json())
    assert isinstance(data, dict)
    fabric_set = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "=eth0", "TP_SOCKET_IFNAME": "eth0"}
    assert data["env"]["set"] == {**node_env(1), **fabric_set}
    assert data["env"]["kept"] == {"HF_DATASETS_CACHE": "<root>/hf-datasets", **plan.fabric.env_kept}
    assert plan.fabric.env_kept == {"NCCL_IB_DISABLE": "1"}


@pytest.fixture(scope="module")
def baked_taco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TACO stand-in wheel baked as the image build does (`/opt/taco-train`)."""
    from entrypoint.taco.bake import bake
    from tests.support.taco_wheel import build_wheel

    root = tmp_path_factory.mktemp("taco")
    wheel = build_wheel(root / "wheel")
    prefix = root / "opt" / "taco-train"
    bake(wheel.parent, prefix)
    return prefix


def test_a_baked_taco_on_this_hosts_opt_is_exported(world: World, baked_taco: Path) -> None:
    (world.host / "opt").mkdir(parents=True, exist_ok=True)
    (world.host / "opt" / "taco-train").symlink_to(baked_taco, target_is_directory=True)
    plan = plan_of(world, {"VLA_TACO": "on", "PYTHONPATH": "/old/path"})
    assert plan.taco.status.value == "baked"
    assert plan.env.set["PYTHONPATH"].endswith(":/old/path") and plan.taco.env.set.items() <= plan.env.set.items()
