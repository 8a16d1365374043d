"""The plan is the launch: what `plan --json` shows is exactly what `run` starts torchrun with.

Each case runs `plan --json` and then `run` on the same inputs; the stand-in torchrun records its argv, cwd and
whole environment. Paths that carry the run's timestamp are compared with the timestamp templated out. Also: `check`,
`plan` and `run` import nothing of `fetch-assets` or the HTTP stack.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from entrypoint.core.masking import mask_argv
from entrypoint.taco.bake import bake
from tests.support.files import small_text
from tests.support.taco_wheel import build_wheel
from tests.unit.conftest import FAKE_BIN, World

STAMP = "<stamp>"
REPO = Path(__file__).resolve().parents[2]


def templated(value: object, stamp: str) -> object:
    """`value` with every occurrence of `stamp` in its strings replaced by `STAMP`."""
    if isinstance(value, str):
        return value.replace(stamp, STAMP)
    if isinstance(value, list):
        return [templated(v, stamp) for v in value]
    if isinstance(value, dict):
        return {k: templated(v, stamp) for k, v in value.items()}
    return value


def plan_then_run(world: World, tmp_path: Path, env: dict[str, str]) -> tuple[dict, dict, dict[str, str]]:
    """(`plan --json`, what torchrun saw, the launcher's environment), both commands given the same environment;
    the first two with their own timestamps templated."""
    # the stand-in's `python3` is this interpreter, not a version manager's shim that edits the environment
    path = os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent), world.env["PATH"]])
    env = {"PATH": path, **env, "FAKE_TORCHRUN_RECORD": str(tmp_path / "torchrun-saw.json")}
    planned = world.cli("plan", "--json", env=env)
    assert planned.code == 0, planned.text
    plan = json.loads(planned.out)
    ran = world.cli("run", env=env)
    assert ran.code == 0, ran.text
    seen = json.loads(small_text(tmp_path / "torchrun-saw.json"))
    (record,) = (world.assets / "logs").glob(f"*-node{plan['topology']['node_rank']}-*.json")
    run_stamp = json.loads(small_text(record))["plan"]["launch"]["stamp"]
    return templated(plan, plan["launch"]["stamp"]), templated(seen, run_stamp), {**world.env, **env}


def assert_plan_is_what_ran(plan: dict, seen: dict, inherited: dict[str, str]) -> None:
    """argv, cwd and the whole environment; the environment by the plan's rule: the launcher's own, minus what
    the plan removes, plus what it exports."""
    assert [seen["executable"], *seen["argv"]] == plan["command"]
    assert seen["cwd"] == plan["cwd"]
    assert seen["env"] == {k: v for k, v in inherited.items() if k not in plan["env"]["removed"]} | plan["env"]["set"]


@pytest.fixture(scope="module")
def baked_taco(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TACO stand-in wheel baked as the image build does (`/opt/taco-train`)."""
    root = tmp_path_factory.mktemp("taco")
    wheel = build_wheel(root / "wheel")
    prefix = root / "opt" / "taco-train"
    bake(wheel.parent, prefix)
    return prefix


Setup = Callable[[World, Path], dict[str, str]]


def single_node_cpu(world: World, baked: Path) -> dict[str, str]:
    return {"VLA_DEVICE": "cpu", "VLA_BATCH_SIZE": "8"}


def tione_worker(world: World, baked: Path) -> dict[str, str]:
    no_node_0 = {"VLA_MASTER_WAIT_TIMEOUT": "0"}  # no node 0 runs here (test_master_wait.py covers the wait)
    visible = {"PET_NNODES": "2", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    return world.tione(nodes=2, per_node=8, rank=1) | visible | no_node_0


def preflight_first(world: World, baked: Path) -> dict[str, str]:
    """The preflight's own torchrun runs (and fails: the stand-in writes no result) before training's."""
    return world.tione(nodes=2, per_node=8, rank=0) | {"VLA_PREFLIGHT": "warn"}


def taco_baked(world: World, baked: Path) -> dict[str, str]:
    (world.host / "opt").mkdir(parents=True, exist_ok=True)
    (world.host / "opt" / "taco-train").symlink_to(baked, target_is_directory=True)
    return {"VLA_TACO": "on", "PYTHONPATH": "/old/path"}


def error_file_users(world: World, baked: Path) -> dict[str, str]:
    return {"TORCHELASTIC_ERROR_FILE": str(world.root / "mine.error.json")}


def nccl_debug_users(world: World, baked: Path) -> dict[str, str]:
    return world.tione(nodes=2, per_node=8, rank=0) | {"NCCL_DEBUG": "WARN"}


def nccl_debug_in_job_file(world: World, baked: Path) -> dict[str, str]:
    (world.assets / "code" / "job.yaml").write_text("env: {NCCL_DEBUG_SUBSYS: COLL}\n")
    return {}


CASES: dict[str, Setup] = {
    "single-node-cpu": single_node_cpu,
    "tione-2-node-worker": tione_worker,
    "tione-node-0-after-a-preflight": preflight_first,
    "taco-baked": taco_baked,
    "error-file-set-by-the-user": error_file_users,
    "nccl-debug-set-by-the-user": nccl_debug_users,
    "nccl-debug-set-in-the-job-file": nccl_debug_in_job_file,
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_run_starts_torchrun_exactly_as_planned(world, tmp_path, baked_taco, case):
    env = CASES[case](world, baked_taco)
    plan, seen, inherited = plan_then_run(world, tmp_path, env)
    assert_plan_is_what_ran(plan, seen, inherited)
    launch, exported = plan["launch"], plan["env"]["set"]
    assert launch["log"].endswith(f"-node{plan['topology']['node_rank']}-{STAMP}.log")
    if case == "error-file-set-by-the-user":  # kept, and it is where a failed worker's error is looked for
        assert (
            plan["env"]["kept"]["TORCHELASTIC_ERROR_FILE"]
            == launch["error_file"]
            == inherited["TORCHELASTIC_ERROR_FILE"]
        )
    else:
        assert exported["TORCHELASTIC_ERROR_FILE"] == launch["error_file"] == launch["log"][:-4] + ".error.json"
    routed = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": f"{launch['nccl_log_dir']}/nccl.%h.%p.log",
    }
    if case.startswith("nccl-debug-set"):  # the user's debug output stays theirs
        assert launch["nccl_debug"] == {} and "NCCL_DEBUG_FILE" not in exported and "NCCL_DEBUG" not in exported
        assert exported.get("NCCL_DEBUG_SUBSYS") == ("COLL" if case.endswith("job-file") else None)
    else:
        assert launch["nccl_debug"] == routed and routed.items() <= exported.items()
    if case == "tione-node-0-after-a-preflight":
        assert launch["preflight"] == "warn"
    if case == "taco-baked":
        assert plan["taco"]["status"] == "baked"
        assert exported["PYTHONPATH"].endswith(":/old/path") and "TACO_TRAIN_FEATURES" in exported
    if case == "tione-2-node-worker":
        assert {"WORLD_SIZE", "RANK", "PET_NNODES"} <= set(plan["env"]["removed"])
        assert "NCCL_SOCKET_IFNAME" in exported and "CUDA_VISIBLE_DEVICES" not in exported


@pytest.mark.parametrize(
    "variables",
    [
        {"VLA_EXTRA_ARGS": "--wandb-key=wk-real-1 --token tk-real-2"},
        {"VLA_EXTRA_ARGS": "--data-url=https://ann:pw-real-3@data.example/x?X-Amz-Signature=sg-real-4"},
    ],
    ids=["secret-flags", "url-credentials"],
)
def test_secrets_are_masked_in_the_plan_while_torchrun_gets_them(world, tmp_path, variables):
    """The one difference between `plan --json` and the launch: secret values show as `***`."""
    plan, seen, inherited = plan_then_run(world, tmp_path, variables)
    launched = [seen["executable"], *seen["argv"]]
    assert plan["command"] == mask_argv(launched) != launched
    assert launched[len(launched) - len(plan["settings"]["values"]["extra_args"]) :] == shlex.split(
        variables["VLA_EXTRA_ARGS"]
    )
    shown = json.dumps(plan)
    assert not [s for s in ("wk-real-1", "tk-real-2", "pw-real-3", "sg-real-4") if s in shown]
    assert seen["env"] == {k: v for k, v in inherited.items() if k not in plan["env"]["removed"]} | plan["env"]["set"]


def test_plan_shows_the_launch_decisions(world):
    plan = json.loads(world.cli("plan", "--json").out)
    launch = plan["launch"]
    assert launch["memlock"] == "keep" and launch["memlock_reason"] and launch["memlock_reason_zh"]
    assert launch["preflight"] == "off" and launch["nccl_debug_reason_zh"]
    stem = launch["log"][: -len(".log")]
    assert stem.endswith(launch["stamp"]) and launch["record"] == stem + ".json"
    assert launch["nccl_log_dir"] == stem + ".nccl" and launch["stacks"] == stem + ".stacks.txt"
    text = world.cli("plan").out
    assert "TORCHELASTIC_ERROR_FILE=" in text and f"node log: {launch['log'][: -len(launch['stamp']) - 4]}" in text


def test_an_unusable_log_folder_is_decided_in_the_plan(world, tmp_path):
    (world.root / "not-a-folder").write_text("")
    env = {"VLA_LOG_DIR": str(world.root / "not-a-folder" / "logs"), "FAKE_TORCHRUN_RECORD": str(tmp_path / "saw.json")}
    plan = json.loads(world.cli("plan", "--json", env=env).out)
    launch = plan["launch"]
    assert launch["log"] is None and launch["error_file"] is None and launch["nccl_debug"] == {}
    assert "not a folder" in launch["log_problem"] and "TORCHELASTIC_ERROR_FILE" not in plan["env"]["set"]
    ran = world.cli("run", env=env)
    assert ran.code == 0 and "cannot write the node log" in ran.out
    saw = json.loads(small_text(tmp_path / "saw.json"))["env"]
    assert "TORCHELASTIC_ERROR_FILE" not in saw and "NCCL_DEBUG" not in saw


# ---- start-up cost: the launch path imports only what it uses ----

IMPORTS = """
import sys
at_start = set(sys.modules)
import contextlib, io, json
from entrypoint.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[2:])
with open(sys.argv[1], "w") as handle:
    json.dump({"code": code, "modules": sorted(sys.modules), "new": sorted(set(sys.modules) - at_start)}, handle)
"""
NOT_ON_THE_LAUNCH_PATH = ("http.client", "email", "ssl", "urllib.request", "tarfile")
# What `check` must not import when nothing calls for it: PyYAML without a job file, packaging's tags with TACO off,
# subprocess ever (inspection starts no process).
NOT_FOR_CHECK = ("yaml", "packaging.tags", "subprocess")


def imported(world: World, tmp_path: Path, command: list[str]) -> dict:
    """`command` run in a fresh interpreter with the world's environment: exit code, every module loaded, and
    `new`: those the interpreter's own start had not loaded."""
    out = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", IMPORTS, str(out), *command],
        env={**world.env, "PYTHONPATH": str(REPO)},
        check=True,
    )
    return json.loads(small_text(out))


@pytest.mark.parametrize("command", [["check", "--json"], ["plan", "--json"], ["check"], ["run"]], ids=" ".join)
def test_the_launch_path_imports_no_fetch_and_no_http(world, tmp_path, command):
    result = imported(world, tmp_path, command)
    assert result["code"] == 0
    ours = [m for m in result["modules"] if m.startswith(("entrypoint.fetch", "entrypoint.net.download"))]
    assert not ours
    assert not [m for m in result["modules"] if m.split(".")[0] in NOT_ON_THE_LAUNCH_PATH]


@pytest.mark.parametrize("command", [["check", "--json"], ["check"], ["plan", "--json"]], ids=" ".join)
def test_check_imports_only_what_it_uses(world, tmp_path, command):
    assert not (world.assets / "code" / "job.yaml").exists() and world.env["VLA_TACO"] == "off"
    result = imported(world, tmp_path, command)
    assert result["code"] == 0
    assert not [m for m in result["new"] if m in NOT_FOR_CHECK]


def test_a_job_file_or_taco_brings_its_imports_in(world, tmp_path):
    """The guard above sees these modules when the path does use them."""
    (world.assets / "code" / "job.yaml").write_text("num_train_steps: 7\n")
    world.env["VLA_TACO"] = "auto"
    result = imported(world, tmp_path, ["check", "--json"])
    assert {"yaml", "packaging.tags"} <= set(result["new"])


def test_fetch_assets_flags_are_still_there(world):
    result = world.cli("fetch-assets", "--help")
    assert result.code == 0 and "--assets-root" in result.out
