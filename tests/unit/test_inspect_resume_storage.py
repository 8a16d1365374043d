"""Resume, scope, storage and tokenizer-download checks, called in-process and pinned field by field.

Guards what a user reads and what the launcher does on disk: the resume decision (action, step, the steps and
leftovers listed, the folders set aside and their new names) and its findings; the dev machine's stated job shape
and the SKIP lines that replace a node's checks; the verdict on the assets root's mount and the folding under it;
the checkpoint folder's writability and room (each bound, `<` against `<=`); the datasets cache; and whether
openpi can download the tokenizer (gcsfs, name lookup, one connection).
"""

from __future__ import annotations

import dataclasses
import errno
import importlib.util
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from entrypoint.core.errors import ExitCode, JobMisspecified
from entrypoint.core.findings import Finding, Status, failed, passed, skipped, warned
from entrypoint.core.host import Host
from entrypoint.core.messages import Text, joined
from entrypoint.core.oserror import os_error_text
from entrypoint.core.settings import Device, HealthMode, Settings, TacoMode
from entrypoint.inspect import resume, storage, tokenizer_fetch
from entrypoint.inspect.assets import InvalidAsset, check_safetensors
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.mounts import Mount, locate
from entrypoint.inspect.resume import ResumeAction, ResumeDecision, aside_name, decide_resume, set_aside
from entrypoint.inspect.scope import ShapeSource, StatedShape, assets_findings, job_file_finding, stated_shape
from entrypoint.inspect.storage import (
    CacheDemand,
    RootStorage,
    cache_demand,
    check_assets_root,
    check_checkpoint_storage,
    check_datasets_cache,
    datasets_cache_dir,
    free_bytes,
    held_bytes,
    inside,
    unwritable_reason,
)
from entrypoint.inspect.tokenizer_fetch import Fetch, FetchVerdict, endpoint, gcsfs_present, probe
from entrypoint.inspect.topology import Topology, TopologySource
from tests.support.synthetic import make_checkpoint

GB = 10**9
OVERLAY = Mount("/", "overlay", "overlay")
MACHINE_DISK = Mount("/", "ext4", "/dev/vda")
LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n"


def settings_at(root: Path, **fields: Any) -> Settings:
    """Default settings with the assets root (and openpi, outside it) in a temp folder."""
    return dataclasses.replace(Settings(), assets_root=str(root), openpi_dir="/workspace/openpi", **fields)


def en(text: Text | None) -> str:
    assert text is not None
    return text.en


# ------------------------------------------------------------------------------------------------ resume


def test_overwrite_of_an_existing_experiment_sets_the_whole_folder_aside(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, overwrite=True)
    exp = settings.experiment_dir
    make_checkpoint(exp, 25)
    decision = decide_resume(settings)
    assert decision == ResumeDecision(ResumeAction.OVERWRITE, None, exp, (), (), (exp,))
    assert decision.findings == (
        Finding(
            "resume",
            Status.PASS,
            Text(
                f"VLA_OVERWRITE=1: node 0 moves {exp} aside (kept, not deleted) and training starts fresh",
                f"VLA_OVERWRITE=1:0 号节点会把 {exp} 移到一旁(保留,不删除)并重新开始训练",
            ),
            None,
            str(exp),
        ),
    )


def test_overwrite_without_an_experiment_is_a_fresh_start(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, overwrite=True)
    exp = settings.experiment_dir
    decision = decide_resume(settings)
    assert decision == ResumeDecision(ResumeAction.FRESH, None, exp)
    assert decision.findings == (
        passed(
            "resume",
            Text(f"VLA_OVERWRITE=1 but {exp} does not exist: fresh start", f"VLA_OVERWRITE=1,但 {exp} 不存在:全新开始"),
            str(exp),
        ),
    )


def test_no_experiment_folder_is_a_first_run(tmp_path: Path) -> None:
    settings = settings_at(tmp_path)
    exp = settings.experiment_dir
    decision = decide_resume(settings)
    assert decision == ResumeDecision(ResumeAction.FRESH, None, exp)
    assert decision.findings == (
        passed("resume", Text(f"no earlier run in {exp}: fresh start", f"{exp} 中没有历史训练:全新开始"), str(exp)),
    )


def test_an_experiment_path_that_cannot_be_listed_warns_and_starts_fresh(tmp_path: Path) -> None:
    settings = settings_at(tmp_path)
    exp = settings.experiment_dir
    exp.parent.mkdir(parents=True)
    exp.write_bytes(b"not a folder")
    decision = decide_resume(settings)
    assert decision == ResumeDecision(ResumeAction.FRESH, None, exp)
    assert decision.findings == (
        warned(
            "resume",
            Text(
                f"cannot list {exp} (Not a directory): fresh start", f"无法读取 {exp}(路径中的某一级不是目录):全新开始"
            ),
            Text(f"Check the permissions of {exp}.", f"请检查 {exp} 的权限。"),
            str(exp),
        ),
    )


NOT_A_STEP = "not a step folder as openpi names it: openpi reads it as step {n} and would load the folder {n}"


def test_a_mixed_experiment_resumes_from_the_newest_complete_step(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, num_train_steps=100)
    exp = settings.experiment_dir
    make_checkpoint(exp, 25)
    make_checkpoint(exp, 50)
    seventy_five = make_checkpoint(exp, 75)
    (seventy_five / "model.safetensors").unlink()
    (seventy_five / "optimizer.pt").unlink()
    ten = make_checkpoint(exp, 10)  # incomplete, below the choice: listed, left in place
    (ten / "metadata.pt").write_bytes(b"")
    make_checkpoint(exp, 60, complete=False)  # tmp_60
    make_checkpoint(exp, "0100")  # openpi reads 100, above the choice: set aside
    make_checkpoint(exp, "040")  # openpi reads 40, below the choice: left
    (exp / "30").write_bytes(b"a file, not a step folder")  # openpi lists folders only
    (exp / "notes").mkdir()
    decision = decide_resume(settings)
    leftovers = (
        "tmp_60",
        "75 (missing model.safetensors, optimizer.pt)",
        "10 (metadata.pt (the file is empty))",
        "0100 (" + NOT_A_STEP.format(n=100) + ")",
        "040 (" + NOT_A_STEP.format(n=40) + ")",
    )
    assert decision == ResumeDecision(ResumeAction.RESUME, 50, exp, (25, 50), leftovers, (exp / "75", exp / "0100"))
    assert decision.to_json() == {
        "action": "resume",
        "step": 50,
        "experiment_dir": str(exp),
        "complete_steps": [25, 50],
        "leftovers": list(leftovers),
        "set_aside": [str(exp / "75"), str(exp / "0100")],
    }
    (listed, chosen) = decision.findings
    assert listed == warned(
        "resume.leftovers",
        Text(f"ignored incomplete checkpoints in {exp}: " + ", ".join(leftovers), listed.message.zh),
        Text(M("resume-leftovers-fix").en + " " + M("resume-misnamed-fix").en, listed.hint.zh if listed.hint else ""),
        str(exp),
    )
    assert listed.message.zh == (
        f"已忽略 {exp} 中不完整的检查点:tmp_60, 75(缺少 model.safetensors, optimizer.pt), 10(metadata.pt(文件为空)), "
        f"0100({M('resume-name-not-a-step', number=100).zh}), 040({M('resume-name-not-a-step', number=40).zh})"
    )
    assert listed.hint == joined([M("resume-leftovers-fix"), M("resume-misnamed-fix")], " ")
    assert chosen == passed(
        "resume", Text(f"resuming from step 50 in {exp}", f"将从 {exp} 的第 50 步恢复训练"), str(exp / "50")
    )


def test_leftovers_without_a_misnamed_folder_get_the_plain_fix(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, num_train_steps=100)
    exp = settings.experiment_dir
    make_checkpoint(exp, 25)
    make_checkpoint(exp, 50, complete=False)
    (listed, _) = decide_resume(settings).findings
    assert (listed.id, listed.status, listed.hint) == ("resume.leftovers", Status.WARN, M("resume-leftovers-fix"))


def test_a_clean_experiment_has_one_finding(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, num_train_steps=100)
    exp = settings.experiment_dir
    make_checkpoint(exp, 0)  # "0" is openpi's name for step 0
    decision = decide_resume(settings)
    assert decision == ResumeDecision(ResumeAction.RESUME, 0, exp, (0,), (), ())
    assert decision.findings == (passed("resume", M("resume-from", step=0, folder=exp), str(exp / "0")),)


def test_without_a_complete_step_every_candidate_openpi_could_pick_is_set_aside(tmp_path: Path) -> None:
    settings = settings_at(tmp_path)
    exp = settings.experiment_dir
    make_checkpoint(exp, 5, missing="metadata.pt")
    make_checkpoint(exp, "07")  # complete but misnamed: no choice, so openpi could pick it
    make_checkpoint(exp, "²")  # int() refuses it
    decision = decide_resume(settings)
    leftovers = (
        "5 (missing metadata.pt)",
        "07 (" + NOT_A_STEP.format(n=7) + ")",
        "² (digits to Python's isdigit() but no number to int(): openpi's --resume would crash on it)",
    )
    assert decision == ResumeDecision(ResumeAction.FRESH, None, exp, (), leftovers, (exp / "5", exp / "07", exp / "²"))
    (listed, fresh) = decision.findings
    assert listed.id == "resume.leftovers" and listed.message.en.endswith(": " + ", ".join(leftovers))
    assert fresh == passed(
        "resume",
        Text(f"no complete checkpoint in {exp}: fresh start", f"{exp} 中没有完整检查点:全新开始"),
        str(exp),
    )


def test_a_misnamed_folder_naming_the_chosen_step_stays(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, num_train_steps=100)
    exp = settings.experiment_dir
    make_checkpoint(exp, 25)
    make_checkpoint(exp, "025")  # openpi reads 25 and loads 25/: the step chosen anyway
    make_checkpoint(exp, "026")
    make_checkpoint(exp, "①")  # int() refuses it: set aside whatever the choice
    decision = decide_resume(settings)
    assert (decision.step, decision.set_aside) == (25, (exp / "026", exp / "①"))


def test_a_finished_experiment_names_its_last_save_and_moves_nothing(tmp_path: Path) -> None:
    settings = settings_at(tmp_path)  # 50 steps, a save every 25
    exp = settings.experiment_dir
    make_checkpoint(exp, 25)
    make_checkpoint(exp, 50)
    make_checkpoint(exp, 75, missing="optimizer.pt")
    decision = decide_resume(settings)
    assert decision == ResumeDecision(ResumeAction.FINISHED, 50, exp, (25, 50), ("75 (missing optimizer.pt)",), ())
    assert decision.to_json()["action"] == "finished"
    assert decision.findings[1] == warned(
        "resume",
        M("resume-finished", step=50, steps=50, interval=25),
        M("resume-finished-fix"),
        str(exp / "50"),
    )
    assert decision.findings[1].message.en.startswith(
        "already trained to step 50: with num_train_steps=50 and save_interval=25 openpi saves no later checkpoint"
    )


def test_one_step_before_the_last_save_still_resumes(tmp_path: Path) -> None:
    settings = settings_at(tmp_path, num_train_steps=51, save_interval=25)  # saves 25, 50
    make_checkpoint(settings.experiment_dir, 49)
    assert decide_resume(settings).action is ResumeAction.RESUME


def replace_file(folder: Path, name: str, content: bytes | None) -> None:
    """`content` None: a folder where the file should be."""
    (folder / name).unlink()
    if content is None:
        (folder / name).mkdir()
    else:
        (folder / name).write_bytes(content)


def incomplete_reason_of(tmp_path: Path, change: Callable[[Path], None]) -> str:
    """The reason listed for step 50 (changed by `change`) beside a complete step 25."""
    settings = settings_at(tmp_path, num_train_steps=100)
    make_checkpoint(settings.experiment_dir, 25)
    folder = make_checkpoint(settings.experiment_dir, 50)
    change(folder)
    decision = decide_resume(settings)
    assert decision.step == 25 and decision.set_aside == (folder,)
    (listed,) = decision.leftovers
    assert listed.startswith("50 (") and listed.endswith(")")
    return listed[4:-1]


def test_a_missing_file_is_named_before_any_other_problem(tmp_path: Path) -> None:
    def change(folder: Path) -> None:
        replace_file(folder, "model.safetensors", b"")
        (folder / "metadata.pt").unlink()

    assert incomplete_reason_of(tmp_path, change) == "missing metadata.pt"


def test_each_unloadable_file_is_named_with_its_problem(tmp_path: Path) -> None:
    def change(folder: Path) -> None:
        replace_file(folder, "optimizer.pt", None)
        replace_file(folder, "metadata.pt", LFS)

    assert incomplete_reason_of(tmp_path, change) == (
        f"optimizer.pt ({M('file-is-folder').en}), metadata.pt ({M('lfs-pointer').en})"
    )


def test_an_lfs_pointer_for_the_model_is_named_as_one(tmp_path: Path) -> None:
    def change(folder: Path) -> None:
        replace_file(folder, "model.safetensors", LFS)

    assert incomplete_reason_of(tmp_path, change) == f"model.safetensors ({M('lfs-pointer').en})"


def test_a_model_the_loader_refuses_is_named_with_the_loaders_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")  # header shorter than it says
    with pytest.raises(InvalidAsset) as refused:
        check_safetensors(bad)

    def change(folder: Path) -> None:
        replace_file(folder, "model.safetensors", bad.read_bytes())

    assert incomplete_reason_of(tmp_path / "t", change) == f"model.safetensors: {refused.value.text.en}"


@pytest.mark.parametrize(
    "name, step",
    [("0", True), ("7", True), ("10", True), ("00", False), ("010", False), ("", False), ("²", False),
     ("١٠", False), ("1a", False), ("-1", False)],
)  # fmt: skip
def test_a_step_name_is_ascii_digits_without_leading_zeros(name: str, step: bool) -> None:
    assert resume._is_step_name(name) is step


@pytest.mark.parametrize("name, number", [("00010", 10), ("١٠", 10), ("²", None), ("①", None)])
def test_openpi_reads_a_number_where_int_does(name: str, number: int | None) -> None:
    assert resume._openpi_number(name) == number


FIXED = time.struct_time((2024, 1, 2, 3, 4, 5, 1, 2, 0))


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """UTC now is 2024-01-02 03:04:05 for `aside_name`."""
    monkeypatch.setattr(resume, "time", SimpleNamespace(strftime=time.strftime, gmtime=lambda: FIXED))


def test_an_aside_name_carries_the_label_and_the_utc_time(tmp_path: Path, fixed_clock: None) -> None:
    assert aside_name(tmp_path / "50", "incomplete") == tmp_path / "50.incomplete-20240102-030405"


def test_an_aside_name_already_taken_gets_the_next_free_number(tmp_path: Path, fixed_clock: None) -> None:
    (tmp_path / "50.old-20240102-030405").mkdir()
    assert aside_name(tmp_path / "50", "old") == tmp_path / "50.old-20240102-030405-2"
    (tmp_path / "50.old-20240102-030405-2").symlink_to(tmp_path / "gone")  # a dangling link takes the name too
    assert aside_name(tmp_path / "50", "old") == tmp_path / "50.old-20240102-030405-3"


@pytest.mark.parametrize(
    "action, label",
    [(ResumeAction.OVERWRITE, "old"), (ResumeAction.RESUME, "incomplete"), (ResumeAction.FRESH, "incomplete")],
)
def test_set_aside_renames_each_folder_and_skips_one_already_gone(
    tmp_path: Path, fixed_clock: None, action: ResumeAction, label: str
) -> None:
    first, gone, last = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    first.mkdir()
    last.mkdir()
    (last / "kept").write_bytes(b"x")
    decision = ResumeDecision(action, None, tmp_path, set_aside=(first, gone, last))
    moved = set_aside(decision)
    stamp = "20240102-030405"
    assert moved == [
        (first, tmp_path / f"a.{label}-{stamp}"),
        (last, tmp_path / f"c.{label}-{stamp}"),
    ]
    assert (tmp_path / f"c.{label}-{stamp}" / "kept").read_bytes() == b"x"
    assert not first.exists() and not last.exists()


# ------------------------------------------------------------------------------------------------ scope

TIONE_2X4 = {
    "GPU_NUM_PER_NODE": "4",
    "WORLD_SIZE": "2",
    "RANK": "0",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "23456",
}


@pytest.mark.parametrize(
    "env, device, nodes, gpus, shape",
    [
        ({}, Device.GPU, None, None, StatedShape(1, 8, ShapeSource.DEFAULT)),
        ({}, Device.CPU, None, None, StatedShape(1, 1, ShapeSource.DEFAULT)),
        ({}, Device.GPU, 3, None, StatedShape(3, 8, ShapeSource.FLAGS)),
        ({}, Device.CPU, None, 4, StatedShape(1, 4, ShapeSource.FLAGS)),
        ({}, Device.GPU, 1, 65536, StatedShape(1, 65536, ShapeSource.FLAGS)),
        (TIONE_2X4, Device.GPU, None, None, StatedShape(2, 4, ShapeSource.TIONE)),
        (TIONE_2X4, Device.GPU, 5, None, StatedShape(5, 4, ShapeSource.FLAGS)),
        (TIONE_2X4, Device.GPU, None, 2, StatedShape(2, 2, ShapeSource.FLAGS)),
        (TIONE_2X4, Device.CPU, 65536, 1, StatedShape(65536, 1, ShapeSource.FLAGS)),
    ],
)
def test_the_stated_shape_comes_from_flags_then_tione_then_one_node(
    tmp_path: Path, env: dict[str, str], device: Device, nodes: int | None, gpus: int | None, shape: StatedShape
) -> None:
    host = Host(env=env, root=tmp_path)  # no /dev/nvidia*: TI-ONE's variables are read without looking for GPUs
    assert stated_shape(host, device, nodes, gpus) == shape


def test_a_malformed_tione_variable_is_a_misspecification(tmp_path: Path) -> None:
    host = Host(env={**TIONE_2X4, "WORLD_SIZE": "two"}, root=tmp_path)
    with pytest.raises(JobMisspecified):
        stated_shape(host, Device.GPU, None, None)


@pytest.mark.parametrize(
    "nodes, gpus, flag, value, what, example",
    [
        (0, None, "--nodes", 0, "number of nodes", 2),
        (65537, None, "--nodes", 65537, "number of nodes", 2),
        (None, 0, "--gpus-per-node", 0, "GPUs per node", 8),
        (2, -1, "--gpus-per-node", -1, "GPUs per node", 8),
        (None, 65537, "--gpus-per-node", 65537, "GPUs per node", 8),
    ],
)
def test_a_shape_flag_out_of_range_names_the_flag_and_an_example(
    nodes: int | None, gpus: int | None, flag: str, value: int, what: str, example: int
) -> None:
    with pytest.raises(JobMisspecified) as raised:
        stated_shape(Host(), Device.GPU, nodes, gpus)
    error = raised.value
    assert (error.id, error.where, error.exit_code) == ("check.shape", flag, ExitCode.JOB_MISSPECIFIED)
    assert error.what.en == f"{flag} {value} is out of range: expected a whole number from 1 to 65536"
    assert error.what.zh == f"{flag} {value} 超出范围:应为 1 到 65536 之间的整数"
    assert error.fix.en == f"Give {flag} the job's {what} as you will create it on TI-ONE, e.g. {flag} {example}."


def test_a_stated_shape_is_node_0_of_that_shape() -> None:
    shape = StatedShape(3, 4, ShapeSource.FLAGS)
    topology = shape.topology(Device.CPU)
    assert topology == Topology(3, 0, 4, "127.0.0.1", 29500, TopologySource.SINGLE, Device.CPU)
    assert shape.to_json() == {"nnodes": 3, "nproc_per_node": 4, "world_size": 12, "source": "flags"}


def node_finding(id: str, status: Status = Status.PASS, code: ExitCode = ExitCode.PREFLIGHT_FAILED) -> Finding:
    return Finding(id, status, Text(f"{id} en", f"{id} zh"), None, None, code)


NODE_FINDINGS = [
    node_finding("topology.gpus"),
    node_finding("topology.bad-value", Status.FAIL, ExitCode.JOB_MISSPECIFIED),
    node_finding("fabric.rdma", Status.FAIL),
    node_finding("fabric.memlock", Status.WARN, ExitCode.JOB_MISSPECIFIED),  # a warning is no misspecification
    node_finding("assets.weights", Status.WARN),
    node_finding("health.gpu0"),
    node_finding("storage.datasets-cache"),
    node_finding("storage.checkpoint-space"),
    node_finding("taco.wheel"),
    node_finding("transformers-patch"),
    node_finding("trainer.script"),
    node_finding("trainer.config"),
    node_finding("trainer.torchrun", Status.FAIL),
]


def skip(id: str, what: Text) -> Finding:
    return skipped(id, M("scope-skip", what=what))


def test_every_node_check_becomes_one_skip_and_misspecifications_stay(tmp_path: Path) -> None:
    settings = settings_at(tmp_path)  # health warn, TACO auto, a dataset, openpi outside the assets root
    found = assets_findings(NODE_FINDINGS, settings, {"VLA_BAKED_JOB_FILE": str(tmp_path / "baked.yaml")})
    assert found == [
        job_file_finding(settings, str(tmp_path / "baked.yaml")),
        node_finding("topology.bad-value", Status.FAIL, ExitCode.JOB_MISSPECIFIED),
        node_finding("assets.weights", Status.WARN),
        node_finding("storage.checkpoint-space"),
        node_finding("trainer.config"),
        skip("topology.gpus", M("scope-skip-gpus")),
        skip("fabric", M("scope-skip-fabric")),
        skip("health", M("scope-skip-health")),
        skip("storage.datasets-cache", M("scope-skip-datasets-cache")),
        skip("taco.wheel", M("scope-skip-taco")),
        skip("transformers-patch", M("scope-skip-patch")),
        skip("trainer.script", M("scope-skip-trainer", script="/workspace/openpi/scripts/train_pytorch.py")),
        skip("trainer.torchrun", M("scope-skip-torchrun")),
    ]
    assert found[5].message == Text(
        "each node's GPUs: checked by each node when the job starts, not here",
        "每个节点的 GPU:由每个节点在任务启动时检查,此处不检查",
    )
    assert found[11].message.en == (
        "openpi's trainer /workspace/openpi/scripts/train_pytorch.py (in the image): checked by each node when the "
        "job starts, not here"
    )


def test_settings_that_turn_node_checks_off_keep_their_findings(tmp_path: Path) -> None:
    settings = dataclasses.replace(
        settings_at(tmp_path),
        health=HealthMode.OFF,
        dataset_repo_id=None,
        taco=TacoMode.OFF,
        openpi_dir=str(tmp_path / "code" / "openpi"),  # on the CFS: checked like the assets
    )
    found = assets_findings(NODE_FINDINGS, settings, {})
    assert [f.id for f in found] == [
        "settings.job-file",
        "topology.bad-value",
        "assets.weights",
        "health.gpu0",
        "storage.datasets-cache",
        "storage.checkpoint-space",
        "taco.wheel",
        "trainer.script",
        "trainer.config",
        "topology.gpus",
        "fabric",
        "transformers-patch",
        "trainer.torchrun",
    ]
    assert [f.status for f in found[-4:]] == [Status.SKIP] * 4


def test_the_images_job_file_is_not_reported_as_the_users(tmp_path: Path) -> None:
    settings = dataclasses.replace(settings_at(tmp_path), files=(str(tmp_path / "etc" / "job.yaml"),))
    env = {"VLA_BAKED_JOB_FILE": f"{tmp_path}/etc//job.yaml"}  # named as load_settings names it: normalised
    default = f"{tmp_path}/code/job.yaml"
    expected = passed(
        "settings.job-file",
        Text(
            f"no job file at {default}: the defaults and VLA_* variables apply",
            f"{default} 处没有任务文件:使用默认值与 VLA_* 变量",
        ),
        default,
    )
    assert assets_findings([], settings, env)[0] == expected
    image = dataclasses.replace(settings_at(tmp_path), files=("/etc/vla-entrypoint/job.yaml",))
    assert assets_findings([], image, {})[0] == expected  # the default image file, without the variable


def test_the_last_user_job_file_is_named_with_the_keys_taken_from_it(tmp_path: Path) -> None:
    first, last = str(tmp_path / "one.yaml"), str(tmp_path / "two.yaml")
    sources = {"save_interval": last, "batch_size": last, "exp_name": first, "num_train_steps": "environment"}
    settings = dataclasses.replace(settings_at(tmp_path), files=("/baked.yaml", first, last), sources=sources)
    assert job_file_finding(settings, "/baked.yaml") == passed(
        "settings.job-file",
        Text(
            f"job file valid: {last} (batch_size, save_interval taken from it)",
            f"任务文件有效:{last}(从中读取 batch_size, save_interval)",
        ),
        last,
    )


def test_a_job_file_that_set_nothing_says_so(tmp_path: Path) -> None:
    path = str(tmp_path / "job.yaml")
    settings = dataclasses.replace(settings_at(tmp_path), files=(path,), sources={"exp_name": "environment"})
    assert job_file_finding(settings, "/baked.yaml") == passed(
        "settings.job-file", M("scope-job-file-unused", path=path), path
    )
    assert en(job_file_finding(settings, "/baked.yaml").message) == (
        f"job file valid: {path} (nothing taken from it: VLA_* variables or flags set the same keys)"
    )


# ------------------------------------------------------------------------------------------------ storage


@pytest.mark.parametrize(
    "where, folder, result",
    [
        (None, "/a/b", False),
        ("a/b", "/a/b", False),  # relative: never inside
        ("/a/b", "/a/b", True),
        ("/a/b/c", "/a/b", True),
        ("/a/b/c", "/a/b/", True),
        ("/a/bc", "/a/b", False),  # whole components
        ("/a", "/a/b", False),
        ("/a/x/../b/c", "/a/b", True),
        ("/a/bX/c", "/a/bX", True),
        ("/anything", "/", True),
    ],
)
def test_inside_compares_whole_absolute_components(where: str | None, folder: str, result: bool) -> None:
    assert inside(where, Path(folder)) is result


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path.resolve() / "assets"
    folder.mkdir()
    return folder


def under(root: Path, id: str, name: str) -> Finding:
    return warned(id, Text(f"{id} en", f"{id} zh"), Text("fix", "修复"), str(root / name))


def root_finding(storage_: RootStorage) -> Finding:
    return storage_.findings[0]


def test_a_missing_root_on_the_containers_disk_fails_with_the_storage_row_fix(root: Path) -> None:
    missing = root / "cfs" / "openpi-assets"
    settings = settings_at(missing)
    result = check_assets_root(settings, [OVERLAY], True, [])
    where = Text("the container's own disk (overlay mounted at /)", "容器自身的磁盘(挂载于 / 的 overlay)")
    assert result == RootStorage(
        locate(missing, [OVERLAY]),
        (OVERLAY,),
        True,
        (
            failed(
                "storage.assets-mount",
                M("root-missing", root=missing, existing=root, where=where),
                M("root-mount-fix", root=missing),
                str(missing),
            ),
            warned(
                "storage.not-checked",
                M("root-folded", count=1, names="storage.checkpoint"),  # the wording of "1 checks" is not pinned
                M("root-folded-fix"),
                str(missing),
            ),
        ),
    )
    assert result.unmounted and result.covers(missing / "checkpoints") and not result.covers(root)
    assert en(root_finding(result).message).startswith(
        f"the assets root {missing} does not exist: no CFS is mounted there. Its nearest existing folder {root} "
        "is on the container's own disk (overlay mounted at /)"
    )


def test_a_missing_root_below_a_mount_points_at_that_mount(root: Path) -> None:
    missing = root / "openpi-assets"
    nfs = Mount(str(root), "nfs4", "10.0.0.9:/")
    result = check_assets_root(settings_at(missing), [OVERLAY, nfs], True, [])
    verdict = root_finding(result)
    assert (verdict.id, verdict.status) == ("storage.assets-mount", Status.FAIL)
    assert verdict.hint == M("root-missing-under-mount-fix", point=str(root), root=missing)
    assert en(verdict.hint).startswith(f"{root} is mounted but holds no {missing}: check the CFS path")


def test_a_missing_root_without_a_mount_table_fails_with_the_storage_row_fix(root: Path) -> None:
    missing = root / "openpi-assets"
    result = check_assets_root(settings_at(missing), None, False, [])
    verdict = root_finding(result)
    assert (verdict.status, verdict.hint, result.mounts) == (Status.FAIL, M("root-mount-fix", root=missing), None)
    assert "is on an unknown file system (the mount table could not be read)" in en(verdict.message)


def test_a_tione_root_on_the_containers_disk_folds_every_check_under_it(root: Path) -> None:
    settings = settings_at(root)
    asset = under(root, "assets.weights", "checkpoints/pi05_base_pytorch")
    at_root = under(root, "assets.tree", "")
    elsewhere = warned("trainer.script", Text("t", "t"), Text("f", "f"), "/workspace/openpi/x.py")
    nowhere = passed("topology", Text("n", "n"))
    result = check_assets_root(settings, [OVERLAY], True, [asset, elsewhere, at_root, nowhere])
    folded = warned(
        "storage.not-checked",
        M("root-folded", count=3, names="assets.weights, assets.tree, storage.checkpoint"),
        M("root-folded-fix"),
        str(root),
    )
    verdict = failed(
        "storage.assets-mount",
        M("root-not-mounted", root=root, where=M("mount-container-disk", fs="overlay")),
        M("root-mount-fix", root=root),
        str(root),
    )
    assert result.findings == (verdict, folded, elsewhere, nowhere)
    assert en(folded.message) == (
        "3 checks wait for the assets root to be mounted and are not counted: assets.weights, assets.tree, "
        "storage.checkpoint"
    )
    assert en(folded.hint) == "Fix storage.assets-mount above; they run on the next start."
    assert result.withheld(root / "logs") == Text(
        f"{root / 'logs'} is under the assets root {root}, which is not mounted: nothing is written there",
        M("root-withheld", path=root / "logs", root=root).zh,
    )
    assert result.withheld(Path("/elsewhere")) is None


def test_a_failing_root_with_nothing_under_it_adds_no_folded_line(root: Path, tmp_path: Path) -> None:
    settings = settings_at(root, checkpoint_base_dir=str(tmp_path / "outside"))
    other = warned("trainer.script", Text("t", "t"), Text("f", "f"), "/workspace/x.py")
    result = check_assets_root(settings, [OVERLAY], True, [other])
    assert [f.id for f in result.findings] == ["storage.assets-mount", "trainer.script"]


@pytest.mark.parametrize(
    "mount, required",
    [(OVERLAY, False), (MACHINE_DISK, True), (MACHINE_DISK, False)],
    ids=["container-trial", "machine-tione", "machine-trial"],
)
def test_a_root_on_an_own_disk_that_need_not_be_mounted_warns(root: Path, mount: Mount, required: bool) -> None:
    asset = under(root, "assets.weights", "w")
    result = check_assets_root(settings_at(root), [mount], required, [asset])
    where = locate(root, [mount]).described()
    assert result.findings == (
        warned(
            "storage.assets-mount",
            M("root-own-disk", root=root, where=where),
            M("root-own-disk-fix", root=root),
            str(root),
        ),
        asset,
    )
    assert not result.unmounted and not result.covers(root / "w") and result.withheld(root / "w") is None
    assert en(result.findings[0].message).endswith("fine for a trial on this machine, but a TI-ONE job sees none of it")


@pytest.mark.parametrize(
    "fs, nodes, status",
    [("ext4", 2, Status.WARN), ("ext4", 1, Status.PASS), ("nfs4", 2, Status.PASS), ("nfs4", 1, Status.PASS)],
)
def test_a_mounted_root_passes_unless_many_nodes_share_a_local_file_system(
    root: Path, fs: str, nodes: int, status: Status
) -> None:
    mount = Mount(str(root), fs, "10.0.0.9:/cfs")
    asset = under(root, "assets.weights", "w")
    if nodes == 1:  # one node unless told
        result = check_assets_root(settings_at(root), [OVERLAY, mount], True, [asset])
    else:
        result = check_assets_root(settings_at(root), [OVERLAY, mount], True, [asset], nnodes=nodes)
    where = locate(root, [OVERLAY, mount]).described()
    if status is Status.WARN:
        verdict = warned(
            "storage.assets-mount",
            M("root-local-multinode", root=root, where=where, nodes=nodes),
            M("root-local-multinode-fix", root=root),
            str(root),
        )
    else:
        verdict = passed("storage.assets-mount", M("root-mounted", root=root, where=where), str(root))
    assert result == RootStorage(locate(root, [OVERLAY, mount]), (OVERLAY, mount), True, (verdict, asset))


def test_a_mounted_root_is_named_with_its_file_system(root: Path) -> None:
    mount = Mount(str(root), "nfs4", "10.0.0.9:/cfs")
    verdict = root_finding(check_assets_root(settings_at(root), [mount], True, []))
    assert verdict.message == Text(
        f"assets root {root} is on the network file system nfs4 mounted at {root} (from 10.0.0.9:/cfs)",
        f"资源根目录 {root} 位于挂载于 {root} 的网络文件系统 nfs4(来源 10.0.0.9:/cfs)",
    )


def test_without_a_mount_table_an_existing_root_gets_no_verdict(root: Path) -> None:
    asset = under(root, "assets.weights", "w")
    result = check_assets_root(settings_at(root), None, True, [asset])
    assert result == RootStorage(locate(root, None), None, True, (asset,))
    assert not result.unmounted and not result.covers(root)


def test_only_a_failing_mount_verdict_means_unmounted(root: Path) -> None:
    location = locate(root, None)
    other = failed("storage.other", Text("x", "x"), Text("f", "f"), str(root))
    mount_warning = warned("storage.assets-mount", Text("x", "x"), Text("f", "f"), str(root))
    assert not RootStorage(location, None, True, (other, mount_warning)).unmounted
    fails = failed("storage.assets-mount", Text("x", "x"), Text("f", "f"), str(root))
    assert RootStorage(location, None, True, (other, fails)).unmounted


def test_a_file_in_the_way_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    assert unwritable_reason(tmp_path / "file" / "below") == Text(
        f"{tmp_path / 'file'} exists but is not a folder", f"{tmp_path / 'file'} 已存在,但不是文件夹"
    )


def test_a_writable_folder_or_one_to_be_created_in_it_has_no_reason(tmp_path: Path) -> None:
    assert unwritable_reason(tmp_path) is None
    assert unwritable_reason(tmp_path / "new" / "deeper") is None


@pytest.fixture
def fake_statvfs(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], list[Any]]:
    """Replace `os.statvfs` by one answering `answer` (a result, or an exception to raise); returns the paths
    asked about."""

    def install(answer: Any) -> list[Any]:
        asked: list[Any] = []

        def statvfs(path: Any) -> Any:
            asked.append(path)
            if isinstance(answer, BaseException):
                raise answer
            return answer

        monkeypatch.setattr(os, "statvfs", statvfs)
        return asked

    return install


def test_a_read_only_file_system_is_named(tmp_path: Path, fake_statvfs: Callable[[Any], list[Any]]) -> None:
    asked = fake_statvfs(SimpleNamespace(f_flag=os.ST_RDONLY | os.ST_NOSUID))
    assert unwritable_reason(tmp_path / "new") == Text(
        f"{tmp_path} is on a read-only file system", f"{tmp_path} 位于只读文件系统上"
    )
    assert asked == [tmp_path]


def test_other_mount_flags_are_not_read_only(tmp_path: Path, fake_statvfs: Callable[[Any], list[Any]]) -> None:
    fake_statvfs(SimpleNamespace(f_flag=os.ST_NOSUID | os.ST_NOEXEC))
    assert unwritable_reason(tmp_path) is None


def test_a_folder_whose_file_system_does_not_answer_is_unusable(
    tmp_path: Path, fake_statvfs: Callable[[Any], list[Any]]
) -> None:
    error = OSError(errno.EIO, "Input/output error")
    fake_statvfs(error)
    assert unwritable_reason(tmp_path) == M("folder-unusable", target=tmp_path, error=os_error_text(error))
    assert en(unwritable_reason(tmp_path)) == f"{tmp_path}: Input/output error"


def test_a_folder_this_user_cannot_write_names_the_uid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[Any, int]] = []

    def access(path: Any, mode: int) -> bool:
        asked.append((path, mode))
        return False

    monkeypatch.setattr(os, "access", access)
    assert unwritable_reason(tmp_path) == Text(
        f"{tmp_path} is not writable by uid {os.getuid()}", f"uid {os.getuid()} 无权写入 {tmp_path}"
    )
    assert asked == [(tmp_path, os.W_OK | os.X_OK)]


def test_free_bytes_are_the_available_blocks_of_the_nearest_folder(
    tmp_path: Path, fake_statvfs: Callable[[Any], list[Any]]
) -> None:
    asked = fake_statvfs(SimpleNamespace(f_bavail=7, f_frsize=4096))
    assert free_bytes(tmp_path / "not" / "yet") == 7 * 4096
    assert asked == [tmp_path]


def test_free_bytes_of_an_unanswering_file_system_are_unknown(
    tmp_path: Path, fake_statvfs: Callable[[Any], list[Any]]
) -> None:
    fake_statvfs(OSError(errno.EIO, "Input/output error"))
    assert free_bytes(tmp_path) is None


@pytest.fixture
def cache_tree(tmp_path: Path) -> Path:
    """A cache folder of 5 entries holding 30 bytes, plus links to a big file and a folder outside it."""
    folder = tmp_path / "cache"
    (folder / "sub").mkdir(parents=True)
    (folder / "one").write_bytes(b"x" * 10)
    (folder / "sub" / "two").write_bytes(b"y" * 20)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "big").write_bytes(b"z" * 1000)
    (folder / "file-link").symlink_to(tmp_path / "outside" / "big")
    (folder / "folder-link").symlink_to(tmp_path / "outside")
    return folder


def test_held_bytes_count_files_below_without_following_links(cache_tree: Path, tmp_path: Path) -> None:
    assert held_bytes(cache_tree) == 30
    assert held_bytes(tmp_path / "no-such-cache") == 0


def test_a_folder_with_more_entries_than_the_limit_is_taken_as_built(cache_tree: Path) -> None:
    assert held_bytes(cache_tree, limit=5) == 30
    assert held_bytes(cache_tree, limit=4) is None


class FakeEntry:
    """A directory entry: a folder, a file of `size` bytes, or one whose every question fails."""

    def __init__(self, path: str, kind: str, size: int = 0) -> None:
        self.path, self.kind, self.size = path, kind, size
        self.asked: list[tuple[str, bool]] = []

    def is_dir(self, *, follow_symlinks: bool = True) -> bool:
        self.asked.append(("is_dir", follow_symlinks))
        if self.kind == "broken":
            raise OSError(errno.EIO, "Input/output error")
        return self.kind == "dir"

    def is_file(self, *, follow_symlinks: bool = True) -> bool:
        self.asked.append(("is_file", follow_symlinks))
        return self.kind in ("file", "vanished")

    def stat(self, *, follow_symlinks: bool = True) -> Any:
        self.asked.append(("stat", follow_symlinks))
        if self.kind == "vanished":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory")
        return SimpleNamespace(st_size=self.size)


class FakeListing(list[FakeEntry]):
    def __enter__(self) -> FakeListing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_entries_and_folders_that_fail_midway_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = {
        "/c": [
            FakeEntry("/c/good", "dir"),
            FakeEntry("/c/bad", "dir"),  # listed last, scanned first: its failure must not end the scan
            FakeEntry("/c/gone", "vanished"),
            FakeEntry("/c/odd", "broken"),
            FakeEntry("/c/f", "file", 1),
        ],
        "/c/good": [FakeEntry("/c/good/g", "file", 10)],
    }

    def scandir(path: Any) -> FakeListing:
        if str(path) not in entries:
            raise PermissionError(errno.EACCES, "Permission denied")
        return FakeListing(entries[str(path)])

    monkeypatch.setattr(os, "scandir", scandir)
    assert held_bytes(Path("/c")) == 11
    assert entries["/c"][4].asked == [("is_dir", False), ("is_file", False), ("stat", False)]


class Clock:
    """A `time.monotonic` that reads `readings` in turn, then stays at the last one."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


def use_clock(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
    monkeypatch.setattr(storage, "time", SimpleNamespace(monotonic=clock))


def test_a_listing_at_its_deadline_still_counts(cache_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_clock(monkeypatch, Clock(100.0))
    assert held_bytes(cache_tree, deadline=100.0) == 30
    assert held_bytes(cache_tree, deadline=99.5) is None


def test_a_listing_past_its_deadline_midway_is_taken_as_built(
    cache_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_clock(monkeypatch, Clock(100.0, 101.0))  # the first folder starts in time; its first entry comes late
    assert held_bytes(cache_tree, deadline=100.5) is None


def test_the_default_deadline_is_five_seconds_from_the_start(cache_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_clock(monkeypatch, Clock(10.0, 15.0))
    assert held_bytes(cache_tree) == 30
    use_clock(monkeypatch, Clock(10.0, 15.5))
    assert held_bytes(cache_tree) is None


def test_cache_demand_scans_each_folder_against_one_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folders = [tmp_path / "node0", tmp_path / "node1", tmp_path / "node2"]
    held = {folders[0]: None, folders[1]: 300, folders[2]: 5000}
    asked: list[tuple[Path, float | None]] = []

    def fake_held(folder: Path, limit: int = 0, deadline: float | None = None) -> int | None:
        asked.append((folder, deadline))
        return held[folder]

    monkeypatch.setattr(storage, "held_bytes", fake_held)
    use_clock(monkeypatch, Clock(1000.0))
    env = {"HF_DATASETS_CACHE": f"{tmp_path}/x/../node2/"}  # the default folder, written another way
    demand = cache_demand(env, 1000, folders, node_rank=2)
    # node2 holds more than the dataset (0 more), node0 is taken as built (0), node1 needs the rest (700)
    assert demand == CacheDemand((folders[2], folders[0], folders[1]), 700)
    assert asked == [(folders[2], 1005.0), (folders[0], 1005.0), (folders[1], 1005.0)]


def test_cache_demand_adds_up_what_each_node_folder_still_needs(tmp_path: Path) -> None:
    folders = [tmp_path / "node0", tmp_path / "node1"]
    folders[1].mkdir()
    (folders[1] / "part").write_bytes(b"p" * 300)
    demand = cache_demand({"HF_DATASETS_CACHE": str(folders[0])}, 1000, folders, node_rank=0)
    assert demand == CacheDemand((folders[0], folders[1]), 1000 + 700)  # node0 not begun, node1 partly built


def test_cache_demand_of_a_cache_elsewhere_is_that_one_folder(tmp_path: Path) -> None:
    folders = [tmp_path / "node0"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "part").write_bytes(b"p" * 100)
    demand = cache_demand({"HF_DATASETS_CACHE": str(tmp_path / "mine")}, 1000, folders, node_rank=0)
    assert demand == CacheDemand((tmp_path / "mine",), 900)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"HF_DATASETS_CACHE": "/c", "HF_HOME": "/h", "HOME": "/u"}, "/c"),
        ({"HF_DATASETS_CACHE": "", "HF_HOME": "/h", "HOME": "/u"}, "/h/datasets"),
        ({"HF_HOME": "", "HOME": "/u"}, "/u/.cache/huggingface/datasets"),
        ({}, "/root/.cache/huggingface/datasets"),
    ],
)
def test_the_datasets_cache_is_where_datasets_builds_it(env: dict[str, str], expected: str) -> None:
    assert datasets_cache_dir(env) == Path(expected)


def test_two_paths_compare_file_systems_and_an_unreadable_one_is_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert storage._same_file_system(tmp_path / "a" / "b", tmp_path)
    assert not storage._same_file_system(tmp_path, Path("/proc/vla-no-such"))
    monkeypatch.setattr(storage, "nearest_existing", lambda path: path)  # a path gone by the time it is looked at
    assert not storage._same_file_system(tmp_path / "gone", tmp_path)


@pytest.fixture
def free(monkeypatch: pytest.MonkeyPatch) -> Callable[[int | None], list[Path]]:
    """Set what `free_bytes` reports for every path; returns the paths asked about."""

    def set_free(value: int | None) -> list[Path]:
        asked: list[Path] = []

        def free_bytes(path: Path) -> int | None:
            asked.append(path)
            return value

        monkeypatch.setattr(storage, "free_bytes", free_bytes)
        return asked

    return set_free


def checkpoint_settings(tmp_path: Path, steps: int = 100, interval: int = 25) -> Settings:
    return settings_at(tmp_path, num_train_steps=steps, save_interval=interval)


def writable(settings: Settings) -> Finding:
    folder = settings.experiment_dir
    return passed(
        "storage.checkpoint-writable",
        Text(f"checkpoint folder writable: {folder}", f"检查点目录可写:{folder}"),
        str(folder),
    )


def space(tmp_path: Path, settings: Settings, resume_step: int | None, weights: int | None) -> Finding:
    (finding,) = [
        f for f in check_checkpoint_storage(settings, resume_step, weights) if f.id == "storage.checkpoint-space"
    ]
    return finding


def test_room_for_every_save_passes(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    settings = checkpoint_settings(tmp_path)  # saves 25, 50, 75, 99, 100
    asked = free(15 * GB)  # exactly five saves of 3 GB
    found = check_checkpoint_storage(settings, None, GB)
    assert asked == [settings.experiment_dir]
    assert found == [
        writable(settings),
        passed(
            "storage.checkpoint-space",
            Text("15.0 GB free for 5 save(s) of about 3.0 GB", "剩余 15.0 GB,可容纳 5 次约 3.0 GB 的保存"),
            str(settings.experiment_dir),
        ),
    ]


def test_room_short_of_every_save_warns(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    settings = checkpoint_settings(tmp_path)
    free(15 * GB - 1)
    finding = space(tmp_path, settings, None, GB)
    assert finding == warned(
        "storage.checkpoint-space",
        M(
            "checkpoint-short-of-room",
            free=(15 * GB - 1) / GB,
            target=tmp_path,
            per_save=3.0,
            saves=5,
            needed=15.0,
            also="",
        ),
        M("checkpoint-short-of-room-fix"),
        str(settings.experiment_dir),
    )
    assert en(finding.message) == (
        f"15.0 GB free under {tmp_path} but this run saves 5 checkpoint(s) of about 3.0 GB (15.0 GB in all); "
        "openpi keeps every one"
    )


def test_room_for_exactly_one_save_only_warns(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    free(3 * GB)
    assert space(tmp_path, checkpoint_settings(tmp_path), None, GB).status is Status.WARN


def test_no_room_for_one_save_fails(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    settings = checkpoint_settings(tmp_path)
    free(3 * GB - 10**7)
    assert space(tmp_path, settings, None, GB) == failed(
        "storage.checkpoint-space",
        Text(
            f"only 2.99 GB free under {tmp_path}: not even one checkpoint of about 3.0 GB fits",
            f"{tmp_path} 仅剩 2.99 GB:连一个约 3.0 GB 的检查点都放不下",
        ),
        M("checkpoint-no-room-fix"),
        str(settings.experiment_dir),
    )


def test_the_saves_counted_start_after_the_resumed_step(
    tmp_path: Path, free: Callable[[int | None], list[Path]]
) -> None:
    free(6 * GB)  # from 75: saves 99 and 100
    finding = space(tmp_path, checkpoint_settings(tmp_path), 75, GB)
    assert (finding.status, en(finding.message)) == (Status.PASS, "6.0 GB free for 2 save(s) of about 3.0 GB")


def test_a_fresh_run_counts_a_save_at_step_one(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    free(100 * GB)  # a save every step: 1, 2, 3, 4
    finding = space(tmp_path, checkpoint_settings(tmp_path, steps=4, interval=1), None, GB)
    assert en(finding.message) == "100.0 GB free for 4 save(s) of about 3.0 GB"


def test_nothing_left_to_save_needs_no_room(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    free(0)
    finding = space(tmp_path, checkpoint_settings(tmp_path), 100, GB)
    assert (finding.status, en(finding.message)) == (Status.PASS, "0.0 GB free for 0 save(s) of about 3.0 GB")


@pytest.mark.parametrize("weights", [None, 0])
def test_without_weights_a_save_is_pi05_sized(
    tmp_path: Path, free: Callable[[int | None], list[Path]], weights: int | None
) -> None:
    free(21 * GB)
    finding = space(tmp_path, checkpoint_settings(tmp_path, steps=25), None, weights)  # saves 24, 25
    assert (finding.status, en(finding.message)) == (
        Status.WARN,
        f"21.0 GB free under {tmp_path} but this run saves 2 checkpoint(s) of about 21.0 GB (42.0 GB in all); "
        "openpi keeps every one",
    )


def test_unknown_free_space_reports_no_room_finding(tmp_path: Path, free: Callable[[int | None], list[Path]]) -> None:
    settings = checkpoint_settings(tmp_path)
    free(None)
    assert check_checkpoint_storage(settings, None, GB) == [writable(settings)]


def test_a_final_step_openpi_will_not_save_is_warned_with_a_multiple(
    tmp_path: Path, free: Callable[[int | None], list[Path]]
) -> None:
    free(None)
    settings = checkpoint_settings(tmp_path, steps=30, interval=25)
    assert check_checkpoint_storage(settings, None, GB) == [
        writable(settings),
        warned(
            "storage.final-step",
            Text(
                "the weights after the last step (30) will not be saved: openpi saves at multiples of 25 "
                "and at step 29",
                "最后一步(30)的权重不会被保存:openpi 只在 25 的倍数步和第 29 步保存",
            ),
            Text(
                "Make VLA_NUM_TRAIN_STEPS a multiple of VLA_SAVE_INTERVAL (e.g. 50).",
                "请把 VLA_NUM_TRAIN_STEPS 设为 VLA_SAVE_INTERVAL 的整数倍(例如 50)。",
            ),
            "VLA_NUM_TRAIN_STEPS",
        ),
    ]


def test_a_cache_on_the_same_file_system_counts_against_the_first_save(
    tmp_path: Path, free: Callable[[int | None], list[Path]]
) -> None:
    settings = checkpoint_settings(tmp_path)
    cache = CacheDemand((tmp_path / "cache",), 2 * GB)
    free(5 * GB - 10**7)  # one save of 3 GB fits, not with the 2 GB cache
    (finding,) = [f for f in check_checkpoint_storage(settings, None, GB, cache=cache) if f.id.endswith("-space")]
    also = M("checkpoint-and-cache", cache=tmp_path / "cache", count=1, others=0, size=2.0)
    assert finding == failed(
        "storage.checkpoint-space",
        M("checkpoint-no-room", free=(5 * GB - 10**7) / GB, target=tmp_path, per_save=3.0, also=also),
        joined([M("checkpoint-no-room-fix"), M("checkpoint-cache-fix")], " ", ""),
        str(settings.experiment_dir),
    )
    assert en(finding.message) == (
        f"only 4.99 GB free under {tmp_path}: not even one checkpoint of about 3.0 GB fits, together with the "
        f"datasets cache {tmp_path / 'cache'} on the same file system (about 2.0 GB still to build before the first "
        "save)"
    )
    assert finding.hint == Text(
        "Free space on the CFS (or move old experiments away) before starting the job. Or set HF_DATASETS_CACHE to "
        "a folder on another file system with room for the dataset.",
        "请在启动任务前清理 CFS 空间(或移走旧实验)。"
        "或把 HF_DATASETS_CACHE 设为另一个文件系统上、空间足够容纳数据集的目录。",
    )
    free(5 * GB)  # exactly one save and the cache: short of every save only
    (finding,) = [f for f in check_checkpoint_storage(settings, None, GB, cache=cache) if f.id.endswith("-space")]
    assert finding.status is Status.WARN and en(finding.message).endswith(" (17.0 GB in all); openpi keeps every one")
    assert finding.hint == joined([M("checkpoint-short-of-room-fix"), M("checkpoint-cache-fix")], " ", "")


def test_caches_of_several_node_ranks_are_counted_together(
    tmp_path: Path, free: Callable[[int | None], list[Path]]
) -> None:
    settings = checkpoint_settings(tmp_path)
    cache = CacheDemand((tmp_path / "n0", tmp_path / "n1", tmp_path / "n2"), 3 * GB)
    free(18 * GB)
    (finding,) = [f for f in check_checkpoint_storage(settings, None, GB, cache=cache) if f.id.endswith("-space")]
    also = M("checkpoint-and-caches", cache=tmp_path / "n0", count=3, others=2, size=3.0)
    assert finding == passed(
        "storage.checkpoint-space",
        M("checkpoint-room", free=18.0, target=tmp_path, per_save=3.0, saves=5, also=also),
        str(settings.experiment_dir),
    )
    assert en(finding.message) == (
        f"18.0 GB free for 5 save(s) of about 3.0 GB, together with the datasets caches of all 3 node ranks "
        f"({tmp_path / 'n0'} and 2 more) on the same file system (about 3.0 GB still to build before the first save)"
    )


@pytest.mark.parametrize(
    "cache",
    [CacheDemand((Path("/tmp"),), 0), CacheDemand((Path("/proc/vla-no-such-cache"),), 2 * GB)],
    ids=["built", "other-file-system"],
)
def test_a_cache_built_or_elsewhere_is_not_counted(
    tmp_path: Path, free: Callable[[int | None], list[Path]], cache: CacheDemand
) -> None:
    settings = checkpoint_settings(tmp_path)
    free(15 * GB)
    (finding,) = [f for f in check_checkpoint_storage(settings, None, GB, cache=cache) if f.id.endswith("-space")]
    assert (finding.status, en(finding.message)) == (Status.PASS, "15.0 GB free for 5 save(s) of about 3.0 GB")


def test_an_unwritable_checkpoint_folder_fails_naming_the_base(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.write_bytes(b"a file")
    settings = settings_at(tmp_path, checkpoint_base_dir="base")
    assert check_checkpoint_storage(settings, None, GB) == [
        failed(
            "storage.checkpoint-writable",
            Text(
                f"checkpoints cannot be written: {base} exists but is not a folder",
                f"无法写入检查点:{base} 已存在,但不是文件夹",
            ),
            Text(
                f"Mount the CFS path of {base} read-write with free space, or set VLA_CHECKPOINT_BASE_DIR.",
                f"请以读写方式挂载 {base} 对应的 CFS 路径并确保有空间,或设置 VLA_CHECKPOINT_BASE_DIR。",
            ),
            str(settings.experiment_dir),
        )
    ]


def failing_root(root: Path) -> RootStorage:
    verdict = failed("storage.assets-mount", Text("x", "x"), Text("f", "f"), str(root))
    return RootStorage(locate(root, [OVERLAY]), (OVERLAY,), True, (verdict,))


def test_checkpoints_under_an_unmounted_root_are_not_checked(root: Path) -> None:
    assert check_checkpoint_storage(settings_at(root), None, GB, failing_root(root)) == []


def test_tione_checkpoints_on_the_containers_disk_fail(
    root: Path, tmp_path: Path, free: Callable[[int | None], list[Path]]
) -> None:
    free(100 * GB)
    local = tmp_path / "local"
    settings = settings_at(root, checkpoint_base_dir=str(local))
    mounted = RootStorage(locate(root, [OVERLAY]), (OVERLAY,), True, ())
    folder = settings.experiment_dir
    assert check_checkpoint_storage(settings, None, GB, mounted) == [
        failed(
            "storage.checkpoint-mount",
            Text(
                f"the checkpoint folder {folder} is on the container's own disk (overlay mounted at /): checkpoints "
                "would fill the container's disk and vanish with the container",
                M("checkpoint-own-disk", folder=folder, where=M("mount-container-disk", fs="overlay")).zh,
            ),
            Text(
                f"Mount CFS at {local} with a storage row of the TI-ONE job, or point VLA_CHECKPOINT_BASE_DIR into "
                "the mounted assets root (its default, checkpoints, is inside it).",
                M("checkpoint-own-disk-fix", base=local, variable="VLA_CHECKPOINT_BASE_DIR").zh,
            ),
            str(folder),
        )
    ]
    trial = RootStorage(locate(root, [OVERLAY]), (OVERLAY,), False, ())  # not a TI-ONE job: the disk is fine
    assert [f.id for f in check_checkpoint_storage(settings, None, GB, trial)] == [
        "storage.checkpoint-writable",
        "storage.checkpoint-space",
    ]
    nfs = Mount(str(tmp_path.resolve()), "nfs4", "10.0.0.9:/cfs")
    on_cfs = RootStorage(locate(root, [OVERLAY, nfs]), (OVERLAY, nfs), True, ())
    assert [f.id for f in check_checkpoint_storage(settings, None, GB, on_cfs)] == [
        "storage.checkpoint-writable",
        "storage.checkpoint-space",
    ]


def test_a_datasets_cache_under_an_unmounted_root_is_not_checked(root: Path) -> None:
    env = {"HF_DATASETS_CACHE": str(root / "cache")}
    assert check_datasets_cache(env, GB, root / "cache", failing_root(root)) == []


def test_a_datasets_cache_outside_an_unmounted_root_is_checked(root: Path, tmp_path: Path) -> None:
    env = {"HF_DATASETS_CACHE": str(tmp_path / "cache")}
    (finding,) = check_datasets_cache(env, 0, root / "node0", failing_root(root))
    assert finding == passed(
        "storage.datasets-cache",
        Text(f"datasets cache writable: {tmp_path / 'cache'}", f"datasets 缓存可写:{tmp_path / 'cache'}"),
        str(tmp_path / "cache"),
    )


def test_an_unwritable_datasets_cache_warns(tmp_path: Path) -> None:
    (tmp_path / "cache").write_bytes(b"a file")
    cache = tmp_path / "cache"
    assert check_datasets_cache({"HF_DATASETS_CACHE": str(cache)}, GB, tmp_path / "node0") == [
        warned(
            "storage.datasets-cache",
            Text(
                f"the datasets cache is not writable: {cache} exists but is not a folder",
                f"datasets 缓存目录不可写:{cache} 已存在,但不是文件夹",
            ),
            M("datasets-cache-fix"),
            str(cache),
        )
    ]


def test_a_datasets_cache_without_room_for_the_dataset_warns(
    tmp_path: Path, free: Callable[[int | None], list[Path]]
) -> None:
    cache = tmp_path / "cache"
    asked = free(int(1.5 * GB))
    assert check_datasets_cache({"HF_DATASETS_CACHE": str(cache)}, 2 * GB, tmp_path / "node0") == [
        warned(
            "storage.datasets-cache",
            Text(
                f"1.5 GB free for the datasets cache {cache}, the dataset is 2.0 GB (the cache is about as large)",
                f"datasets 缓存 {cache} 仅剩 1.5 GB,数据集为 2.0 GB(缓存约同样大)",
            ),
            Text(
                "Free space there, or set HF_DATASETS_CACHE (job file env: or the task's variables) to another "
                "writable folder with room for about the dataset's size.",
                M("datasets-cache-fix").zh,
            ),
            str(cache),
        )
    ]
    assert asked == [cache]


@pytest.mark.parametrize("room", [2 * GB, None])
def test_a_datasets_cache_in_the_node_folder_says_a_new_container_reuses_it(
    tmp_path: Path, free: Callable[[int | None], list[Path]], room: int | None
) -> None:
    cache = tmp_path / "node0"
    free(room)  # exactly the dataset's size, or unknown: no warning
    assert check_datasets_cache({"HF_DATASETS_CACHE": f"{cache}/"}, 2 * GB, cache) == [
        passed(
            "storage.datasets-cache",
            Text(
                f"datasets cache in this node's folder under the assets root: {cache} (a new container reuses it; it "
                "takes about the dataset's 2.0 GB once built)",
                M("datasets-cache-node-folder", cache=cache, size=2.0).zh,
            ),
            str(cache),
        )
    ]


# ------------------------------------------------------------------------------------------------ tokenizer


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, ("storage.googleapis.com", 443)),
        ("", ("storage.googleapis.com", 443)),
        ("localhost:9023", ("localhost", 9023)),
        ("localhost", ("localhost", 80)),
        ("http://gcs.local", ("gcs.local", 80)),
        ("https://gcs.local", ("gcs.local", 443)),
        ("https://gcs.local:8443/x", ("gcs.local", 8443)),
        ("https://gcs.local:port", ("gcs.local", 443)),  # a port urlsplit refuses: the scheme's
        ("http://:9", ("", 9)),
    ],
)
def test_the_endpoint_is_the_emulator_or_googles(value: str | None, expected: tuple[str, int]) -> None:
    env = {} if value is None else {"STORAGE_EMULATOR_HOST": value}
    assert endpoint(env) == expected


@pytest.mark.parametrize(
    "answer, present",
    [(None, False), (object(), True), (ValueError("gcsfs.__spec__ is None"), False), (ImportError("x"), False)],
)
def test_gcsfs_is_found_without_importing_it(monkeypatch: pytest.MonkeyPatch, answer: Any, present: bool) -> None:
    asked: list[str] = []

    def find_spec(name: str) -> Any:
        asked.append(name)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert gcsfs_present() is present
    assert asked == ["gcsfs"]


@pytest.fixture
def with_gcsfs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: True)


def test_without_gcsfs_nothing_is_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: False)
    monkeypatch.setattr(tokenizer_fetch, "_lookup", lambda host, port: pytest.fail("looked up"))
    assert probe({}) == FetchVerdict(Fetch.NO_GCSFS, "storage.googleapis.com:443")


def test_an_emulator_without_a_host_is_unreachable(with_gcsfs: None) -> None:
    assert probe({"STORAGE_EMULATOR_HOST": "http://:9"}) == FetchVerdict(
        Fetch.UNREACHABLE, ":9", Text("STORAGE_EMULATOR_HOST names no host", "STORAGE_EMULATOR_HOST 中没有主机名")
    )


NO_SUCH_NAME = Text("no such name", "无此名称")
NO_ADDRESS = Text("the name resolves to no address", "该名称没有解析到任何地址")


@pytest.mark.parametrize(
    "found, verdict",
    [
        (None, FetchVerdict(Fetch.UNKNOWN, "gcs.local:80")),
        (NO_SUCH_NAME, FetchVerdict(Fetch.UNREACHABLE, "gcs.local:80", NO_SUCH_NAME)),
        ([], FetchVerdict(Fetch.UNREACHABLE, "gcs.local:80", NO_ADDRESS)),
    ],
    ids=["no-answer", "no-such-name", "no-address"],
)  # fmt: skip
def test_a_lookup_without_an_address_decides_before_any_connection(
    monkeypatch: pytest.MonkeyPatch, with_gcsfs: None, found: Any, verdict: FetchVerdict
) -> None:
    asked: list[tuple[str, int]] = []

    def lookup(host: str, port: int) -> Any:
        asked.append((host, port))
        return found

    monkeypatch.setattr(tokenizer_fetch, "_lookup", lookup)
    assert probe({"STORAGE_EMULATOR_HOST": "gcs.local"}) == verdict
    assert asked == [("gcs.local", 80)]


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    with server:
        yield server


def test_an_endpoint_accepting_connections_is_reachable(with_gcsfs: None, listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    assert probe({"STORAGE_EMULATOR_HOST": f"127.0.0.1:{port}"}) == FetchVerdict(Fetch.REACHABLE, f"127.0.0.1:{port}")


def test_an_endpoint_refusing_connections_is_unreachable_saying_why(with_gcsfs: None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as bound:  # bound, not listening: refuses
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        verdict = probe({"STORAGE_EMULATOR_HOST": f"127.0.0.1:{port}"})
    assert verdict == FetchVerdict(Fetch.UNREACHABLE, f"127.0.0.1:{port}", os_error_text(errno.ECONNREFUSED))


class FakeSocket:
    """A socket whose `connect` raises `error`; records how it was made and used."""

    made: ClassVar[list[tuple[Any, ...]]] = []
    error: ClassVar[BaseException] = TimeoutError()

    def __init__(self, *args: Any) -> None:
        FakeSocket.made.append(("socket", *args))

    def __enter__(self) -> FakeSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        FakeSocket.made.append(("closed",))

    def settimeout(self, seconds: float) -> None:
        FakeSocket.made.append(("timeout", seconds))

    def connect(self, address: tuple[str, int]) -> None:
        FakeSocket.made.append(("connect", address))
        raise FakeSocket.error


@pytest.mark.parametrize(
    "error, verdict",
    [
        (TimeoutError(), FetchVerdict(Fetch.UNKNOWN, "gcs.local:443")),
        (
            OSError(errno.ENETUNREACH, "Network is unreachable"),
            FetchVerdict(Fetch.UNREACHABLE, "gcs.local:443", os_error_text(errno.ENETUNREACH)),
        ),
    ],
    ids=["no-answer-in-time", "no-route"],
)
def test_one_bounded_connection_to_the_first_address_decides(
    monkeypatch: pytest.MonkeyPatch, with_gcsfs: None, error: BaseException, verdict: FetchVerdict
) -> None:
    addresses = [(socket.AF_INET6, ("fd00::1", 443)), (socket.AF_INET, ("10.1.2.3", 443))]
    monkeypatch.setattr(tokenizer_fetch, "_lookup", lambda host, port: addresses)
    monkeypatch.setattr(FakeSocket, "made", [])
    monkeypatch.setattr(FakeSocket, "error", error)
    monkeypatch.setattr(socket, "socket", FakeSocket)
    assert probe({"STORAGE_EMULATOR_HOST": "https://gcs.local"}) == verdict
    assert FakeSocket.made == [
        ("socket", socket.AF_INET6, socket.SOCK_STREAM),
        ("timeout", 2.0),
        ("connect", ("fd00::1", 443)),
        ("closed",),
    ]


def test_a_lookup_gives_each_stream_address_once() -> None:
    assert tokenizer_fetch._lookup("127.0.0.1", 8080) == [(socket.AF_INET, ("127.0.0.1", 8080))]


@pytest.mark.parametrize(
    "error",
    [socket.gaierror(socket.EAI_NONAME, "Name or service not known"), UnicodeError("label too long")],
    ids=["no-such-name", "unencodable-name"],
)
def test_a_failed_lookup_is_the_systems_words(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    assert tokenizer_fetch._lookup("gcs.local", 443) == os_error_text(error)


def test_a_lookup_without_an_answer_in_time_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    asked: list[tuple[Any, ...]] = []
    daemon: list[bool] = []

    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        asked.append((*args, kwargs))
        daemon.append(threading.current_thread().daemon)
        release.wait(10)
        raise socket.gaierror(socket.EAI_AGAIN, "late")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(tokenizer_fetch, "PROBE_TIMEOUT_S", 0.05)
    try:
        assert tokenizer_fetch._lookup("gcs.local", 443) is None
    finally:
        release.set()
    assert asked == [("gcs.local", 443, {"type": socket.SOCK_STREAM})]
    assert daemon == [True]  # a lookup that never answers cannot keep the launcher from exiting
