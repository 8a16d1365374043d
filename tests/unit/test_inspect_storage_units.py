"""The dataset seal, the storage probe, the read-ahead plan and openpi's config names, one function at a time: the
job key and each reason a seal is not trusted, each stage a stalled mount is named at, which mounts a path
touches, what is worth reading ahead, and which `TrainConfig` names and imports are read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from entrypoint.core.findings import Finding, Status, failed, passed
from entrypoint.core.messages import Text
from entrypoint.inspect import seal as seal_module
from entrypoint.inspect import train_configs
from entrypoint.inspect.mounts import Mount
from entrypoint.inspect.prefetch import MEMORY_SHARE, Prefetch, memory_budget, plan_prefetch
from entrypoint.inspect.seal import (
    CLOCK_SKEW_S,
    SEAL_LIMIT,
    Seal,
    SealRole,
    fingerprint,
    job_key,
    plan_seal,
    sealed_payload,
    trusted_verdict,
)
from entrypoint.inspect.storage_probe import (
    Answer,
    StorageNotAnswering,
    StorageProbe,
    mounts_touched,
    probe,
)
from entrypoint.inspect.train_configs import Unread, closest, config_names, module_path

JOB = {
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "23456",
    "WORLD_SIZE": "2",
    "NODE_LIST": "10.0.0.1:8,10.0.0.2:8",
    "GPU_NUM": "16",
    "GPU_NUM_PER_NODE": "8",
}
KEY = "0123456789abcdef0123456789abcdef"

# -- the job key and each node's role -------------------------------------------------------------------------------


def test_a_job_key_is_a_32_digit_digest_of_the_job_and_its_dataset():
    key = job_key(JOB, Path("/data/libero"))
    assert key is not None and len(key) == 32 and int(key, 16) >= 0
    assert job_key(dict(JOB), Path("/data/libero")) == key
    for name in ("MASTER_ADDR", "MASTER_PORT", "NODE_LIST", "GPU_NUM", "GPU_NUM_PER_NODE"):
        assert job_key(JOB | {name: JOB[name] + "0"}, Path("/data/libero")) != key, name
    assert job_key(JOB | {"WORLD_SIZE": "3"}, Path("/data/libero")) != key
    assert job_key(JOB, Path("/data/other")) != key
    assert job_key(JOB | {"OTHER": "x"}, Path("/data/libero")) == key


@pytest.mark.parametrize(
    "env",
    [
        JOB | {"WORLD_SIZE": "1"},
        JOB | {"WORLD_SIZE": "0"},
        JOB | {"WORLD_SIZE": "two"},
        JOB | {"MASTER_ADDR": ""},
        {k: v for k, v in JOB.items() if k != "MASTER_ADDR"},
        {k: v for k, v in JOB.items() if k != "WORLD_SIZE"},
    ],
    ids=["one-node", "zero", "not-a-number", "no-master", "master-unset", "world-unset"],
)
def test_no_job_key_outside_a_multi_node_job(env):
    assert job_key(env, Path("/data")) is None


def test_a_huge_world_size_or_variable_still_makes_a_key():
    assert job_key(JOB | {"WORLD_SIZE": "9" * 5000}, Path("/d")) is not None  # only its first digits are read
    long = job_key(JOB | {"NODE_LIST": "x" * 4096}, Path("/d"))
    assert long == job_key(JOB | {"NODE_LIST": "x" * 4096 + "tail"}, Path("/d"))


def test_node_0_writes_the_others_read_and_one_node_does_neither(tmp_path):
    key = job_key(JOB, tmp_path / "data")
    assert plan_seal(JOB, tmp_path / "data", tmp_path / "logs", 0) == Seal(
        SealRole.WRITE, tmp_path / "logs" / ".seals" / f"{key}.json", key
    )
    assert plan_seal(JOB, tmp_path / "data", tmp_path / "logs", 1).role is SealRole.READ
    assert plan_seal(JOB, None, tmp_path / "logs", 0) == Seal(SealRole.NONE)
    assert plan_seal(JOB, tmp_path / "data", None, 1) == Seal(SealRole.NONE)
    assert plan_seal(JOB | {"WORLD_SIZE": "1"}, tmp_path / "data", tmp_path / "logs", 0) == Seal(SealRole.NONE)
    assert Seal(SealRole.READ, tmp_path / "s.json", KEY, reason="why").to_json() == {
        "role": "read",
        "path": str(tmp_path / "s.json"),
        "trusted": False,
        "reason": "why",
    }
    assert Seal(SealRole.NONE).to_json() == {"role": "none", "path": None, "trusted": False, "reason": None}


# -- the fingerprint and what node 0 seals --------------------------------------------------------------------------


def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "meta").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "meta" / "info.json").write_text("{}")
    return root


def test_the_fingerprint_is_the_stat_of_four_paths(tmp_path):
    root = dataset(tmp_path)
    found = fingerprint(root)
    assert found is not None and list(found) == [".", "meta", "meta/info.json", "data"]
    info = os.stat(root / "meta" / "info.json")
    assert found["meta/info.json"] == [info.st_size, info.st_mtime_ns, info.st_ino]
    (root / "meta" / "info.json").write_text('{"changed": 1}')
    assert fingerprint(root) != found
    (root / "data").rmdir()
    assert fingerprint(root) is None
    assert fingerprint(Path("/nul\0")) is None


PASSED = passed("assets.dataset", Text("dataset complete", "数据集完整"), "/data")


def test_node_0_seals_only_a_single_passing_verdict(tmp_path):
    before = {".": [1, 2, 3]}
    writer = Seal(SealRole.WRITE, tmp_path / "s.json", KEY)
    sealed_payload(writer, Path("/data"), before, [PASSED], 1234)
    assert writer.payload is not None
    assert {k: v for k, v in writer.payload.items() if k != "host"} == {
        "version": 1,
        "key": KEY,
        "dataset": "/data",
        "fingerprint": before,
        "verdict": "pass",
        "message": {"en": "dataset complete", "zh": "数据集完整"},
        "total_bytes": 1234,
    }
    assert isinstance(writer.payload["host"], str) and writer.payload["host"]
    failing = failed("assets.dataset", Text("broken", "坏"), Text("fix", "修"), "/data")
    other = passed("assets.other", Text("x", "x"))
    for role, fingerprinted, findings in [
        (SealRole.READ, before, [PASSED]),
        (SealRole.NONE, before, [PASSED]),
        (SealRole.WRITE, None, [PASSED]),
        (SealRole.WRITE, before, [failing]),
        (SealRole.WRITE, before, [PASSED, other]),
        (SealRole.WRITE, before, [other]),
        (SealRole.WRITE, before, []),
    ]:
        unsealed = Seal(role, tmp_path / "s.json", KEY)
        sealed_payload(unsealed, Path("/data"), fingerprinted, findings, 1)
        assert unsealed.payload is None, (role, fingerprinted, findings)


# -- another node and node 0's seal --------------------------------------------------------------------------------


class Clock:
    """A wall clock standing still at `now`, and a sleep that only counts its calls."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def written_seal(tmp_path: Path, root: Path, **changes: object) -> Seal:
    path = tmp_path / "logs" / ".seals" / f"{KEY}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "version": 1,
        "key": KEY,
        "dataset": str(root),
        "host": "node0",
        "fingerprint": fingerprint(root),
        "verdict": "pass",
        "message": {"en": "dataset complete", "zh": "数据集完整"},
        "total_bytes": 1234,
        "written_at": 1000.0,
    } | changes
    path.write_text(json.dumps(data))
    return Seal(SealRole.READ, path, KEY)


def test_a_valid_seal_gives_node_0s_verdict_its_age_and_size(tmp_path):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root)
    clock = Clock(1042.4)
    got = trusted_verdict(reader, root, 0.0, started_at=1000.0, clock=clock, sleep=clock.sleep)
    assert got is not None
    finding, total = got
    assert total == 1234 and reader.trusted and reader.reason is None and clock.sleeps == []
    assert finding == Finding(
        "assets.dataset",
        Status.PASS,
        Text(
            f"dataset complete (verified by node 0 42 s ago; this node trusted its seal {reader.path})",
            f"数据集完整(由 0 号节点于 42 秒前校验;本节点采信其校验记录 {reader.path})",
        ),
        None,
        str(root),
    )


def test_a_seal_from_a_clock_ahead_shows_no_negative_age(tmp_path):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root, written_at=1100.0)
    clock = Clock(1000.0)
    got = trusted_verdict(reader, root, 0.0, started_at=1000.0, clock=clock, sleep=clock.sleep)
    assert got is not None and "verified by node 0 0 s ago" in got[0].message.en


def test_a_seal_with_a_message_missing_a_language_shows_it_empty(tmp_path):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root, message={"en": "complete"})
    got = trusted_verdict(reader, root, 0.0, 1000.0, Clock(1000.0), Clock(0).sleep)
    assert got is not None and got[0].message.zh.startswith("(由 0 号节点")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"version": 2}, "the seal is for another job or dataset"),
        ({"key": "f" * 32}, "the seal is for another job or dataset"),
        ({"dataset": "/elsewhere"}, "the seal is for another job or dataset"),
        ({"written_at": "1000"}, "the seal is malformed"),
        ({"written_at": True}, "the seal is malformed"),
        ({"total_bytes": False}, "the seal is malformed"),
        ({"total_bytes": None}, "the seal is malformed"),
        ({"total_bytes": 1.5}, "the seal is malformed"),
        ({"total_bytes": -1}, "the seal is malformed"),
        ({"total_bytes": 1 << 62}, "the seal is malformed"),
        ({"message": "complete"}, "the seal is malformed"),
        ({"written_at": 1000.0 - CLOCK_SKEW_S - 0.5}, "the seal is older than this node's start"),
        ({"written_at": 1000.0 + CLOCK_SKEW_S + 0.5}, "the seal is older than this node's start"),
        ({"verdict": "fail"}, "node 0's verdict was not a pass"),
        ({"fingerprint": {".": [0, 0, 0]}}, "the dataset changed since node 0 verified it"),
    ],
    ids=[
        "version",
        "key",
        "dataset",
        "written-text",
        "written-bool",
        "total-bool",
        "total-none",
        "total-float",
        "total-negative",
        "total-huge",
        "message-text",
        "too-old",
        "from-the-future",
        "failed",
        "changed",
    ],
)
def test_a_seal_is_refused_saying_why(tmp_path, changes, reason):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root, **changes)
    assert trusted_verdict(reader, root, 0.0, 1000.0, Clock(1000.0), Clock(0).sleep) is None
    assert (reader.reason, reader.trusted) == (reason, False)


@pytest.mark.parametrize(
    ("written_at", "now", "trusted"),
    [
        (1000.0 - CLOCK_SKEW_S, 1000.0, True),  # exactly the skew before this node started
        (1000.0 + CLOCK_SKEW_S, 1000.0, True),  # exactly the skew after now
        (0, 1000.0, False),
        (1 << 62 - 1, 1000.0, False),
    ],
    ids=["skew-before", "skew-after", "zero", "far-future"],
)
def test_the_clock_skew_bound_is_inclusive(tmp_path, written_at, now, trusted):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root, written_at=written_at)
    got = trusted_verdict(reader, root, 0.0, started_at=1000.0, clock=Clock(now), sleep=Clock(0).sleep)
    assert (got is not None) is trusted and total_of(got) in (1234, None)


def total_of(got: tuple[Finding, int] | None) -> int | None:
    return got[1] if got is not None else None


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[1, 2]", b"[" * 100_000, b" " * (SEAL_LIMIT + 1)],
    ids=["empty", "garbage", "a-list", "deep", "too-big"],
)
def test_an_unreadable_seal_is_not_trusted(tmp_path, content):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root)
    assert reader.path is not None
    reader.path.write_bytes(content)
    assert trusted_verdict(reader, root, 0.0, 1000.0, Clock(1000.0), Clock(0).sleep) is None
    assert reader.reason == "the seal cannot be read"


def test_a_folder_where_the_seal_belongs_is_not_trusted(tmp_path):
    root = dataset(tmp_path)
    path = tmp_path / "logs" / ".seals" / f"{KEY}.json"
    path.mkdir(parents=True)
    reader = Seal(SealRole.READ, path, KEY)
    assert trusted_verdict(reader, root, 0.0, 1000.0, Clock(1000.0), Clock(0).sleep) is None
    assert reader.reason == "the seal cannot be read"


def test_no_seal_within_the_wait_is_said_with_the_wait(tmp_path, monkeypatch):
    root = dataset(tmp_path)
    reader = Seal(SealRole.READ, tmp_path / "absent.json", KEY)
    clock = Clock(1000.0)
    assert trusted_verdict(reader, root, 0.0, 1000.0, clock, clock.sleep) is None
    assert reader.reason == "no seal from node 0" and clock.sleeps == []
    ticks = iter([0.0, 0.1, 0.2, 5.0])
    monkeypatch.setattr(seal_module.time, "monotonic", lambda: next(ticks))
    waiting = Seal(SealRole.READ, tmp_path / "absent.json", KEY)
    assert trusted_verdict(waiting, root, 4.6, 1000.0, clock, clock.sleep) is None
    assert waiting.reason == "no seal from node 0 within 5 s"
    assert clock.sleeps == [0.25, 0.25]


def test_a_seal_that_appears_while_waiting_is_read(tmp_path):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root)
    assert reader.path is not None
    content = reader.path.read_bytes()
    reader.path.unlink()
    clock = Clock(1000.0)

    def appear(seconds: float) -> None:
        clock.sleeps.append(seconds)
        assert reader.path is not None
        reader.path.write_bytes(content)

    got = trusted_verdict(reader, root, 60.0, 1000.0, clock, appear)
    assert got is not None and clock.sleeps == [0.25] and reader.trusted


def test_only_a_reading_node_with_a_seal_path_waits(tmp_path):
    root = dataset(tmp_path)
    for seal in (Seal(SealRole.WRITE, tmp_path / "s.json", KEY), Seal(SealRole.NONE), Seal(SealRole.READ)):
        assert trusted_verdict(seal, root, 60.0, 1000.0, Clock(1000.0), Clock(0).sleep) is None
        assert seal.reason is None


# -- which mounts a path touches, and the probe ---------------------------------------------------------------------

ROOT = Mount("/", "overlay", "overlay")
CFS = Mount("/mnt/cfs", "nfs4", "10.0.0.9:/vol", "rw,hard")
INNER = Mount("/mnt/cfs/assets/datasets", "fuse.cfs", "cfs-fuse")
LOCAL = Mount("/mnt/cfs/assets/tmp", "tmpfs", "tmpfs")
OTHER = Mount("/mnt/cfs2", "nfs", "10.0.0.9:/other")


def test_a_path_touches_its_holding_network_mount_and_those_below_it():
    mounts = [ROOT, CFS, INNER, LOCAL, OTHER]
    assert mounts_touched([Path("/mnt/cfs/assets")], mounts) == [CFS, INNER]
    assert mounts_touched([Path("/mnt/cfs/assets/")], mounts) == [CFS, INNER]
    assert mounts_touched([Path("/mnt/cfs/assets/datasets/libero")], mounts) == [INNER]
    assert mounts_touched([Path("/mnt/cfs/assets/tmp/x")], mounts) == []
    assert mounts_touched([Path("/mnt")], mounts) == [CFS, INNER, OTHER]
    assert mounts_touched([Path("/mnt/cfs/../cfs2/x")], mounts) == [OTHER]
    assert mounts_touched([Path("/home")], mounts) == []
    assert mounts_touched([Path("/mnt/cfs/a"), Path("/mnt/cfs/b")], mounts) == [CFS]


def test_the_mount_mounted_last_on_a_point_is_the_one_probed():
    again = Mount("/mnt/cfs", "fuse.cfs", "second")
    assert mounts_touched([Path("/mnt/cfs/x")], [ROOT, CFS, again]) == [again]
    assert mounts_touched([Path("/mnt")], [ROOT, CFS, again])[0].source == "second"


def fake_python(tmp_path: Path, body: str) -> str:
    """A stand-in interpreter for the probe's child: a shell script that ignores the code it is given."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def test_a_mount_that_answers_passes_with_its_time(tmp_path):
    mount = Mount(str(tmp_path), "nfs4", "srv:/x")
    (answer,) = probe([mount], 10.0)
    assert (answer.mount, answer.stage, answer.error, answer.answered) == (mount, "list", None, True)
    assert 0 < answer.seconds < 10
    finding = answer.finding()
    assert (finding.id, finding.status, finding.where) == ("storage.responsive", Status.PASS, str(tmp_path))
    assert finding.message.en == f"nfs4 at {tmp_path} answered in {answer.seconds * 1000:.0f} ms"


def test_a_mount_point_that_is_gone_answers_with_its_os_error(tmp_path):
    mount = Mount(str(tmp_path / "gone"), "nfs4", "srv:/x")
    (answer,) = probe([mount], 10.0)
    assert answer.stage == "" and not answer.answered
    assert answer.error == f"[Errno 2] No such file or directory: '{tmp_path / 'gone'}'"


@pytest.mark.parametrize(
    ("body", "stage", "named"),
    [
        ("exec sleep 30", "", "looking up the mount point"),
        ("echo stat; exec sleep 30", "stat", "listing the mount point"),
    ],
    ids=["stalled-at-stat", "stalled-at-list"],
)
def test_a_stalled_mount_is_named_at_the_stage_it_stopped(tmp_path, body, stage, named):
    mount = Mount("/mnt/cfs", "nfs4", "10.0.0.9:/vol", "rw,hard")
    prober = StorageProbe([ROOT, mount], 0.5, python=fake_python(tmp_path, body))
    with pytest.raises(StorageNotAnswering) as raised:
        prober.require([Path("/mnt/cfs/assets")])
    answer = raised.value.answer
    assert (answer.stage, answer.error, answer.mount) == (stage, None, mount)
    assert 0.5 <= answer.seconds < 5
    assert raised.value.exit_code == 3
    assert (raised.value.id, raised.value.where) == ("storage.not-answering", "/mnt/cfs")
    text = raised.value.what.en
    assert (
        f"the shared storage is not answering: nfs4 at /mnt/cfs (from 10.0.0.9:/vol; options rw,hard) gave no answer "
        f"within {answer.seconds:.1f} s ({named}); nothing under it was touched"
    ) == text
    assert prober.to_json() == [
        {
            "point": "/mnt/cfs",
            "fs_type": "nfs4",
            "source": "10.0.0.9:/vol",
            "seconds": round(answer.seconds, 4),
            "stage": stage,
            "error": None,
        }
    ]
    assert prober.findings() == []


def test_a_dead_fuse_daemon_is_named_with_its_error(tmp_path):
    body = (
        "echo 'Traceback (most recent call last):' >&2; "
        "echo \"OSError: [Errno 107] Transport endpoint is not connected: '/mnt/cfs'\" >&2; exit 1"
    )
    mount = Mount("/mnt/cfs", "fuse.cfs", "")
    prober = StorageProbe([mount], 5.0, python=fake_python(tmp_path, body))
    with pytest.raises(StorageNotAnswering) as raised:
        prober.require([Path("/mnt/cfs")])
    answer = raised.value.answer
    assert answer.error == "[Errno 107] Transport endpoint is not connected: '/mnt/cfs'"
    assert (
        "the shared storage fails: fuse.cfs at /mnt/cfs (from ?) answered '[Errno 107] Transport endpoint is not "
        "connected: '/mnt/cfs'' after" in raised.value.what.en
    )


def test_a_child_that_dies_silently_or_prints_a_long_error(tmp_path):
    (silent,) = probe([Mount("/x", "nfs", "s")], 5.0, fake_python(tmp_path, "exit 1"))
    assert (silent.stage, silent.error) == ("", "?")
    (long,) = probe([Mount("/x", "nfs", "s")], 5.0, fake_python(tmp_path, f"echo 'E: {'y' * 300}' >&2; exit 1"))
    assert long.error == "y" * 200
    (listed,) = probe([Mount("/x", "nfs", "s")], 5.0, fake_python(tmp_path, "echo stat; echo list"))
    assert listed.answered


def test_each_mount_is_probed_once_and_a_local_path_never(tmp_path):
    counter = tmp_path / "count"
    python = fake_python(tmp_path, f"echo x >> {counter}; echo stat; echo list")
    mount = Mount("/mnt/cfs", "nfs4", "srv:/x")
    prober = StorageProbe([ROOT, mount], 5.0, python=python)
    prober.require([Path("/mnt/cfs/a")])
    prober.require([Path("/mnt/cfs/b"), Path("/home")])
    prober.require([Path("/home")])
    assert counter.read_text() == "x\n"
    assert [f.status for f in prober.findings()] == [Status.PASS]
    StorageProbe(None, 5.0, python=python).require([Path("/mnt/cfs")])
    assert counter.read_text() == "x\n"


def test_a_slow_answer_warns_with_the_figure():
    slow = Answer(CFS, 1.25, "list")
    finding = slow.finding()
    assert (finding.status, finding.where) == (Status.WARN, "/mnt/cfs")
    assert finding.message == Text(
        "nfs4 at /mnt/cfs answered only after 1.2 s: every file operation there is as slow, so checks and checkpoint "
        "saves will take longer",
        "挂载在 /mnt/cfs 的 nfs4 在 1.2 秒后才应答:其上每次文件操作都同样慢,检查与保存检查点会更久",
    )
    assert finding.hint == Text(
        "Check the CFS instance's load and throughput tier in the TI-ONE console.",
        "请在 TI-ONE 控制台检查 CFS 实例的负载与性能规格。",
    )
    assert Answer(CFS, 1.0, "list").finding().status is Status.PASS
    assert not Answer(CFS, 0.1, "stat").answered and not Answer(CFS, 0.1, "list", "err").answered


def test_the_fix_names_the_timeout_variable_and_its_value():
    error = StorageNotAnswering(Answer(CFS, 30.0, ""), 30.0)
    assert error.fix == Text(
        "Check the CFS instance and the job's storage row in the TI-ONE console (the instance's state, the network "
        "between this node and it), then submit the job again. VLA_STORAGE_TIMEOUT (now 30 s) sets how long to wait.",
        "请在 TI-ONE 控制台检查 CFS 实例与任务的存储挂载(实例状态、本节点与它之间的网络),然后重新提交任务。"
        "VLA_STORAGE_TIMEOUT(当前 30 秒)决定等待多久。",
    )
    assert StorageNotAnswering(Answer(Mount("/m", "nfs", ""), 2.5, ""), 2.5).what.en.startswith(
        "the shared storage is not answering: nfs at /m (from ?; options ?) gave no answer within 2.5 s"
    )


# -- what is worth reading ahead ------------------------------------------------------------------------------------


def real_file(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\1" * size)
    return path


def test_the_weights_come_first_then_the_checkpoints_files(tmp_path):
    weights = real_file(tmp_path / "w" / "model.safetensors", 4096)
    saved = tmp_path / "exp" / "7"
    model = real_file(saved / "model.safetensors", 3000)
    optimizer = real_file(saved / "optimizer.pt", 2000)
    plan = plan_prefetch(weights.parent, tmp_path / "exp", 7)
    assert plan is not None
    assert [path for path, _ in plan.files][:1] == [weights] and model in [p for p, _ in plan.files]
    assert (plan.step, plan.weights) == (7, True)
    assert plan.bytes == sum(size for _, size in plan.files) and plan.bytes >= 4096 + 3000 + 2000
    assert plan.what() == Text("base weights and the checkpoint of step 7", "基座权重与第 7 步的检查点")
    assert plan.to_json()["files"][0] == {"path": str(weights), "bytes": 4096}  # type: ignore[index]
    assert plan.to_json()["checkpoint_step"] == 7 and plan.to_json()["memory_share"] == MEMORY_SHARE
    assert optimizer.exists()


def test_only_weights_or_only_a_checkpoint_is_said_so(tmp_path):
    weights = real_file(tmp_path / "w" / "model.safetensors", 10)
    only_weights = plan_prefetch(weights.parent, tmp_path / "exp", None)
    assert only_weights == Prefetch(((weights, 10),), None, True)
    assert only_weights.what() == Text("base weights", "基座权重")
    checkpoint = real_file(tmp_path / "exp" / "3" / "model.safetensors", 10)
    only_checkpoint = plan_prefetch(None, tmp_path / "exp", 3)
    assert only_checkpoint == Prefetch(((checkpoint, 10),), 3, False)
    assert only_checkpoint.what() == Text("checkpoint of step 3", "第 3 步的检查点")
    no_checkpoint = plan_prefetch(weights.parent, tmp_path / "exp", 9)
    assert no_checkpoint == Prefetch(((weights, 10),), None, True)
    assert plan_prefetch(tmp_path / "none", tmp_path / "exp", 9) is None
    assert plan_prefetch(None, tmp_path / "exp", None) is None


def test_empty_sparse_and_non_files_are_not_read_ahead(tmp_path):
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"")
    assert plan_prefetch(weights, tmp_path, None) is None
    with (weights / "model.safetensors").open("wb") as handle:
        handle.truncate(1 << 24)
    assert plan_prefetch(weights, tmp_path, None) is None
    (weights / "model.safetensors").unlink()
    (weights / "model.safetensors").mkdir()
    assert plan_prefetch(weights, tmp_path, None) is None


def test_half_of_the_available_memory_is_the_budget():
    class Meminfo:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def read(self, path: str) -> str | None:
            assert path == "/proc/meminfo"
            return self.text

    assert memory_budget(Meminfo("MemTotal: 8 kB\nMemAvailable:   1000 kB\n")) == 512_000  # type: ignore[arg-type]
    assert memory_budget(Meminfo("MemAvailable: 1001 kB")) == 512_512  # type: ignore[arg-type]
    for text in (None, "", "MemAvailable:", "MemAvailable: lots kB", "MemFree: 10 kB"):
        assert memory_budget(Meminfo(text)) is None  # type: ignore[arg-type]


# -- openpi's train config names ------------------------------------------------------------------------------------


def openpi(tmp_path: Path, modules: dict[str, str]) -> Path:
    for module, text in modules.items():
        path = module_path(tmp_path, module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_names_come_from_literal_trainconfig_calls_only(tmp_path):
    root = openpi(
        tmp_path,
        {
            "openpi.training.config": (
                "import openpi.training.misc.a\n"
                "TrainConfig(name='plain')\n"
                "_config.TrainConfig(name='attribute')\n"
                "Other(name='other')\n"
                "TrainConfig(name=f'{x}')\n"
                "TrainConfig(name=3)\n"
                "TrainConfig('positional')\n"
                "TrainConfig(label='x', name='second-keyword')\n"
                "factory()(name='called')\n"
            ),
            "openpi.training.misc.a": "TrainConfig(name='from-a')\n",
        },
    )
    assert config_names(root) == frozenset({"plain", "attribute", "second-keyword", "from-a"})


def test_imports_of_openpi_training_are_followed_once_and_others_not(tmp_path):
    root = openpi(
        tmp_path,
        {
            "openpi.training.config": (
                "from openpi.training.misc import b, c\n"
                "from openpi.training import config\n"
                "from . import relative\n"
                "import openpi.models.x\n"
                "def f():\n    import openpi.training.d\n"
            ),
            "openpi.training.misc.b": "import openpi.training.misc.c\nTrainConfig(name='b')\n",
            "openpi.training.misc.c": "TrainConfig(name='c')\n",
            "openpi.training.d": "TrainConfig(name='d')\n",
            "openpi.models.x": "TrainConfig(name='not-training')\n",
            "relative": "TrainConfig(name='relative')\n",
        },
    )
    assert config_names(root) == frozenset({"b", "c", "d"})


def test_at_most_sixteen_modules_are_read(tmp_path):
    modules = {"openpi.training.config": "".join(f"import openpi.training.m{i}\n" for i in range(20))}
    modules |= {f"openpi.training.m{i}": f"TrainConfig(name='m{i}')\n" for i in range(20)}
    found = config_names(openpi(tmp_path, modules))
    assert found == frozenset(f"m{i}" for i in range(15))


def test_an_unreadable_imported_module_is_skipped_and_config_py_must_be_read(tmp_path):
    imports = "import openpi.training.broken\nimport openpi.training.gone\n"
    root = openpi(
        tmp_path,
        {"openpi.training.config": imports + "TrainConfig(name='x')\n", "openpi.training.broken": "def (:\n"},
    )
    assert config_names(root) == frozenset({"x"})
    config = module_path(root, "openpi.training.config")
    config.write_text("def (:\n")
    assert config_names(root) == Unread(
        config,
        Text("it is not valid Python (line 1: invalid syntax)", "它不是合法的 Python 代码(第 1 行:invalid syntax)"),
    )
    config.write_text("x = 1\n")
    assert config_names(root) == Unread(
        config, Text("it holds no TrainConfig(name=...) entry", "其中没有 TrainConfig(name=...) 条目")
    )


@pytest.mark.parametrize(
    "source",
    ["x = " + "+".join(["1"] * 200_000) + "\n", "x = " + "-" * 200_000 + "1\n"],
    ids=["recursion", "memory"],
)
def test_a_config_module_too_complex_to_parse_is_unread(tmp_path, source):
    root = openpi(tmp_path, {"openpi.training.config": source})
    assert config_names(root) == Unread(
        module_path(root, "openpi.training.config"), Text("it cannot be parsed as Python", "无法按 Python 代码解析")
    )


def test_the_closest_names_are_at_most_three_best_first():
    names = frozenset({"pi05_libero", "pi0_libero", "pi05_droid", "pi05_aloha", "debug"})
    assert closest("pi05_librero", names) == ["pi05_libero", "pi0_libero", "pi05_droid"]
    assert closest("zzzz", names) == []
    assert len(train_configs.RELEASED) == 31 and "pi05_libero" in train_configs.RELEASED


# -- boundaries and hostile bytes the functions above must hold -----------------------------------------------------


def test_a_missing_job_variable_counts_as_empty_and_odd_bytes_still_make_a_key():
    without = {k: v for k, v in JOB.items() if k != "NODE_LIST"}
    assert job_key(without, Path("/d")) == job_key(JOB | {"NODE_LIST": ""}, Path("/d")) is not None
    undecodable = job_key(JOB | {"NODE_LIST": "10.0.0.1:8,\udcff"}, Path("/data/\udcfe"))
    assert undecodable is not None and undecodable != job_key(JOB, Path("/data"))


def test_the_wait_for_a_seal_ends_exactly_at_its_bound(tmp_path, monkeypatch):
    ticks = iter([0.0, 0.5, 1.0])
    monkeypatch.setattr(seal_module.time, "monotonic", lambda: next(ticks))
    reader = Seal(SealRole.READ, tmp_path / "absent.json", KEY)
    clock = Clock(1000.0)
    assert trusted_verdict(reader, dataset(tmp_path), 1.0, 1000.0, clock, clock.sleep) is None
    assert clock.sleeps == [0.25] and reader.reason == "no seal from node 0 within 1 s"


def test_a_seal_without_an_english_message_shows_it_empty_and_zero_bytes_are_trusted(tmp_path):
    root = dataset(tmp_path)
    reader = written_seal(tmp_path, root, message={"zh": "完整"}, total_bytes=0)
    got = trusted_verdict(reader, root, 0.0, 1000.0, Clock(1000.0), Clock(0).sleep)
    assert got is not None and got[1] == 0
    assert got[0].message.en.startswith(" (verified by node 0 0 s ago")
    assert got[0].message.zh.startswith("完整(由 0 号节点")


def recording_python(tmp_path: Path) -> tuple[str, Path]:
    """A stand-in interpreter that records its arguments, its session, its stdin, then answers per mount point:
    `/stall` never answers, `/stat-only` stops after its lookup, `/odd` prints bytes that are not ASCII."""
    record = tmp_path / "record"
    python = fake_python(
        tmp_path,
        f'printf "%s\\0" "$@" > {record}.args; cut -d" " -f6 /proc/$$/stat > {record}.sid; '
        f"readlink /proc/$$/fd/0 > {record}.stdin\n"
        'case "$5" in /stall) exec sleep 30 ;; /stat-only) echo stat; exit 0 ;; '
        "/odd) printf 'stat \\377\\n'; exec sleep 30 ;; esac\n"
        "printf 'stat \\377 list\\n'",
    )
    return python, record


def test_the_probe_child_runs_isolated_in_its_own_session_reading_nothing(tmp_path):
    python, record = recording_python(tmp_path)
    (answer,) = probe([Mount("/ok", "nfs", "s")], 5.0, python)
    assert answer.answered and answer.stage == "list"
    args = record.with_suffix(".args").read_text().split("\0")
    assert args[:3] == ["-I", "-S", "-c"] and args[4] == "/ok" and "os.scandir(p)" in args[3]
    assert int(record.with_suffix(".sid").read_text()) != os.getsid(0)
    assert record.with_suffix(".stdin").read_text().strip() == "/dev/null"


def test_every_mount_is_answered_for_when_one_stalls(tmp_path):
    python, _ = recording_python(tmp_path)
    mounts = [Mount("/stall", "nfs", "s"), Mount("/stat-only", "nfs", "s"), Mount("/odd", "nfs", "s")]
    answers = probe(mounts, 0.5, python)
    assert [(a.mount.point, a.stage, a.error, a.answered) for a in answers] == [
        ("/stall", "", None, False),
        ("/stat-only", "stat", None, False),
        ("/odd", "\ufffd", None, False),
    ]


def test_an_error_line_is_read_after_its_first_colon_and_odd_bytes_are_replaced(tmp_path):
    body = "printf 'Some Error: [Errno 5] I/O error \\377' >&2; exit 1"
    (answer,) = probe([Mount("/x", "nfs", "s")], 5.0, fake_python(tmp_path, body))
    assert answer.error == "[Errno 5] I/O error \ufffd"


def test_an_answer_is_shown_in_whole_milliseconds_and_a_slow_one_has_its_id():
    assert Answer(CFS, 0.9, "list").finding().message.en == "nfs4 at /mnt/cfs answered in 900 ms"
    assert Answer(CFS, 2.0, "list").finding().id == "storage.responsive"


def test_the_root_path_touches_every_network_mount():
    assert mounts_touched([Path("/")], [ROOT, CFS, INNER, LOCAL, OTHER]) == [CFS, INNER, OTHER]


def test_the_read_ahead_plan_as_json(tmp_path):
    weights = real_file(tmp_path / "w" / "model.safetensors", 10)
    plan = plan_prefetch(weights.parent, tmp_path / "exp", None)
    assert plan is not None and plan.to_json() == {
        "files": [{"path": str(weights), "bytes": 10}],
        "bytes": 10,
        "checkpoint_step": None,
        "memory_share": 0.5,
    }
    real_file(tmp_path / "exp" / "None" / "model.safetensors", 10)  # a folder named so is no checkpoint
    assert plan_prefetch(weights.parent, tmp_path / "exp", None) == plan


@pytest.mark.parametrize(
    ("size_in_blocks_of_data", "read"),
    [(2.0, True), (2.0 + 1 / 4096, True), (2.0 + 8 / 4096, False), (3.0, False)],
    ids=["exactly-half-held", "odd-size-half-held", "just-under-half", "a-third"],
)
def test_a_file_is_read_ahead_when_at_least_half_of_it_is_held_on_disk(tmp_path, size_in_blocks_of_data, read):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\1" * 4096)
    held = os.stat(path).st_blocks * 512
    with path.open("r+b") as handle:
        handle.truncate(int(held * size_in_blocks_of_data))
    assert os.stat(path).st_blocks * 512 == held
    planned = plan_prefetch(tmp_path, tmp_path / "exp", None)
    assert (planned is not None) is read


def test_a_module_imported_twice_is_read_once(tmp_path):
    modules = {
        "openpi.training.config": "import openpi.training.m0\nimport openpi.training.m0\n"
        + "".join(f"import openpi.training.m{i}\n" for i in range(1, 15))
    }
    modules |= {f"openpi.training.m{i}": f"TrainConfig(name='m{i}')\n" for i in range(15)}
    assert config_names(openpi(tmp_path, modules)) == frozenset(f"m{i}" for i in range(15))


def test_a_config_module_that_is_a_folder_is_unread_at_its_path(tmp_path):
    config = module_path(tmp_path, "openpi.training.config")
    config.mkdir(parents=True)
    unread = config_names(tmp_path)
    assert isinstance(unread, Unread) and unread.path == config


class StatedConfig:
    """The two settings `check_train_config` reads, and where the user set the name."""

    def __init__(self, name: str, openpi_dir: Path) -> None:
        self.train_config, self.openpi_dir = name, str(openpi_dir)

    def where(self, key: str) -> str:
        assert key == "train_config"
        return "VLA_TRAIN_CONFIG"


def checked(name: str, openpi_dir: Path) -> Finding:
    return train_configs.check_train_config(StatedConfig(name, openpi_dir))  # type: ignore[arg-type]


def three_configs(tmp_path: Path) -> Path:
    names = "".join(f"TrainConfig(name='{n}')\n" for n in ("pi05_libero", "pi0_libero", "debug"))
    return openpi(tmp_path, {"openpi.training.config": names})


def test_a_config_openpi_defines_passes_naming_the_source(tmp_path):
    source = module_path(three_configs(tmp_path), "openpi.training.config")
    assert checked("pi05_libero", tmp_path) == Finding(
        "settings.train-config",
        Status.PASS,
        Text(
            f"train config pi05_libero is one of the 3 configs openpi's {source} defines",
            f"训练配置 pi05_libero 是 openpi 的 {source} 定义的 3 个配置之一",
        ),
        None,
        "VLA_TRAIN_CONFIG",
    )


def test_a_misspelt_config_fails_with_exit_2_and_the_closest_names(tmp_path):
    source = module_path(three_configs(tmp_path), "openpi.training.config")
    got = checked("pi05_librero", tmp_path)
    assert (got.id, got.status, got.where, int(got.exit_code)) == (
        "settings.train-config",
        Status.FAIL,
        "VLA_TRAIN_CONFIG",
        2,
    )
    assert got.message.en == (
        f"train config 'pi05_librero' (VLA_TRAIN_CONFIG) is not one of the 3 configs openpi's {source} defines: the "
        'trainer would stop at once with "Config not found", and the norm stats and weights are looked up under that '
        "name"
    )
    assert got.hint is not None and got.hint.en == (
        "Set VLA_TRAIN_CONFIG to a config openpi defines, e.g. pi05_libero. Closest names: pi05_libero, pi0_libero. "
        "The norm stats and the weights' model are checked once the name is known."
    )


def test_a_name_close_to_nothing_gets_an_example_and_a_long_name_is_cut(tmp_path):
    three_configs(tmp_path)
    got = checked("z" * 100, tmp_path)
    assert got.message.en.startswith(f"train config '{'z' * 80}…' (VLA_TRAIN_CONFIG) is not one of the 3 configs")
    assert got.hint is not None and got.hint.en.startswith(
        "Set VLA_TRAIN_CONFIG to a config openpi defines, e.g. debug. No config name is close to it. The norm stats"
    )
    assert got.hint.zh.startswith("请把 VLA_TRAIN_CONFIG 设为 openpi 定义的配置名,例如 debug。没有与之接近的配置名。")


def test_without_openpi_a_released_name_passes_unchecked_and_another_warns(tmp_path):
    config = module_path(tmp_path, "openpi.training.config")
    released = checked("pi05_libero", tmp_path)
    assert (released.status, released.where, released.hint) == (Status.PASS, "VLA_TRAIN_CONFIG", None)
    unread = config_names(tmp_path)
    assert isinstance(unread, Unread)
    assert released.message.en == (
        f"train config pi05_libero is one of openpi's released configs; not checked against this machine's openpi: "
        f"{config}: {unread.reason.en} (each node checks it in the image)"
    )
    near = checked("pi05_librero", tmp_path)
    assert (near.status, near.where) == (Status.WARN, None)
    assert near.message.en == (
        f"train config 'pi05_librero' (VLA_TRAIN_CONFIG) could not be checked: {config}: {unread.reason.en}; it is "
        "not one of openpi's released configs"
    )
    assert near.hint is not None and near.hint.en == (
        "If it is a config of your own openpi, nothing to do (each node checks it in the image); otherwise fix "
        "VLA_TRAIN_CONFIG. Closest names: pi05_libero, pi0_libero, pi0_fast_libero."
    )
    far = checked("zzzzzz", tmp_path)
    assert far.hint is not None and far.hint.en.endswith(
        "otherwise fix VLA_TRAIN_CONFIG. No config name is close to it."
    )


def test_a_path_ending_in_x_touches_only_mounts_below_it():
    assert mounts_touched([Path("/mnt/X")], [ROOT, CFS]) == []


def test_a_network_mount_covered_by_a_later_mount_is_probed_as_the_later_one():
    over = Mount("/mnt/cfs", "tmpfs", "tmpfs")
    assert mounts_touched([Path("/mnt")], [ROOT, CFS, over]) == [over]


def test_the_probe_child_reads_nothing_of_the_launchers_stdin(tmp_path):
    python, record = recording_python(tmp_path)
    saved = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)  # the launcher's stdin is a pipe here: the child must not inherit it
    try:
        (answer,) = probe([Mount("/ok", "nfs", "s")], 5.0, python)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert answer.answered
    assert record.with_suffix(".stdin").read_text().strip() == "/dev/null"
