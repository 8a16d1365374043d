"""What the TACO plan tells the user, word for word: each reason TACO cannot be used (its words, where it was set,
the fix, and the exit code with VLA_TACO=on), the findings of a usable plan, and the plan's record."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from entrypoint.core.findings import exit_code_of
from entrypoint.core.settings import load_settings
from entrypoint.taco.plan import KNOWN_FEATURES, TacoPlan, plan_taco
from tests.unit.test_taco import CP312_WHEEL, python

BAKED_SHA = "b" * 64
EMPTY_SHA = hashlib.sha256(b"").hexdigest()
SUFFIX = " (VLA_TACO=off silences this.)"


def packaging_reason(name: str) -> str:
    """Why `packaging` refuses a wheel file name (its words differ between versions)."""
    try:
        parse_wheel_filename(name)
    except InvalidWheelFilename as error:
        return str(error)
    raise AssertionError(f"{name} is a valid wheel file name")


def make_plan(tmp_path: Path, flags: dict[str, str] | None = None, baked: bool = False, **variables: str) -> TacoPlan:
    """The plan for CPython 3.12, `VLA_TACO_WHEEL` given as the flag `--taco-wheel` (so `where` names the flag)."""
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "no-baked.yaml"), "VLA_ASSETS_ROOT": str(tmp_path / "assets")}
    settings = load_settings({**env, **variables}, flags)
    baked_dir = tmp_path / "opt-taco-train" if baked else tmp_path / "none"
    return plan_taco(settings, {}, python(12), baked_dir, tmp_path / "prefix")


def bake_folder(tmp_path: Path, record: object, prelude: bool = True) -> None:
    folder = tmp_path / "opt-taco-train"
    (folder / "taco_train" / "prelude").mkdir(parents=True)
    if prelude:
        (folder / "taco_train" / "prelude" / "sitecustomize.py").write_text("")
    (folder / "WHEEL.json").write_text(record if isinstance(record, str) else json.dumps(record))


WHEEL_PATH = "{tmp}/" + CP312_WHEEL
SKIPS = [
    # id, flags, variables, baked record, what, fix, where ({tmp} = the test's folder), misspecified
    (
        "no-wheel",
        {"taco_wheel": "none"},
        {},
        None,
        "the image has no baked TACO wheel and VLA_TACO_WHEEL is none",
        "Set VLA_TACO_WHEEL to the wheel's path or https URL, or use the openpi-taco image.",
        "--taco-wheel",
        False,
    ),
    (
        "plain-http",
        {"taco_wheel": "http://mirror.example/" + CP312_WHEEL},
        {},
        None,
        f"--taco-wheel: http://mirror.example/{CP312_WHEEL} is plain http: downloads are https-only",
        "--taco-wheel: Use an https URL, or explicitly allow http for a trusted network. "
        "(Plain http needs VLA_TACO_ALLOW_HTTP=1.)",
        "--taco-wheel",
        True,
    ),
    (
        "not-a-wheel",
        {"taco_wheel": "https://cos.example/taco.tar.gz?sign=secret"},
        {},
        None,
        "--taco-wheel: https://cos.example/taco.tar.gz?… is not a wheel file name: a wheel is named "
        "<name>-<version>(-<build>)-<python tag>-<abi tag>-<platform tag>.whl",
        "Point --taco-wheel at a taco_train-<version>-<tags>.whl file.",
        "--taco-wheel",
        True,
    ),
    (
        "another-package",
        {"taco_wheel": "https://cos.example/torch-2.6-cp312-cp312-linux_x86_64.whl"},
        {},
        None,
        "--taco-wheel: torch-2.6-cp312-cp312-linux_x86_64.whl is a torch wheel, not taco_train",
        "Point --taco-wheel at the taco_train wheel.",
        "--taco-wheel",
        True,
    ),
    (
        "another-python",
        {"taco_wheel": "https://cos.example/taco_train-1-cp311-cp311-linux_x86_64.whl"},
        {},
        None,
        "taco_train-1-cp311-cp311-linux_x86_64.whl is built for cp311-cp311-linux_x86_64, which this interpreter, "
        "CPython 3.12 (cp312-cp312-manylinux_2_41_x86_64, …), cannot load",
        "Use the VLA base image (CPython 3.12), or a taco_train wheel built for this Python.",
        "--taco-wheel",
        False,
    ),
    (
        "missing-file",
        {"taco_wheel": "{tmp}/gone/" + CP312_WHEEL},
        {},
        None,
        "--taco-wheel: the TACO wheel {tmp}/gone/" + CP312_WHEEL + " does not exist",
        "Check the path (relative paths are under the assets root) and that the storage is mounted.",
        "--taco-wheel",
        False,
    ),
    (
        "pin-mismatch",
        {"taco_wheel": WHEEL_PATH},
        {"VLA_TACO_WHEEL_SHA256": "a" * 64},
        None,
        f"the TACO wheel {WHEEL_PATH} has sha256 {EMPTY_SHA}, not the pinned {'a' * 64}",
        f"Pin the wheel you mean to use (VLA_TACO_WHEEL_SHA256 = the output of `sha256sum {WHEEL_PATH}`), "
        "or point VLA_TACO_WHEEL at the wheel you pinned.",
        "VLA_TACO_WHEEL_SHA256",
        False,
    ),
    (
        "malformed-pin",
        {"taco_wheel": WHEEL_PATH},
        {"VLA_TACO_WHEEL_SHA256": "ABC"},
        None,
        "VLA_TACO_WHEEL_SHA256='ABC' is not a sha256 (64 hex digits)",
        "Set it to the output of `sha256sum <wheel>`, or unset it.",
        "VLA_TACO_WHEEL_SHA256",
        True,
    ),
    (
        "baked-record-unreadable",
        {},
        {},
        "{not json",
        "the image's {tmp}/opt-taco-train has no valid WHEEL.json or no taco_train/prelude/sitecustomize.py",
        "Rebuild the image with the openpi-taco bake target.",
        "{tmp}/opt-taco-train",
        False,
    ),
    (
        "baked-record-file-not-text",
        {},
        {},
        {"file": 1, "sha256": BAKED_SHA},
        "the image's {tmp}/opt-taco-train has no valid WHEEL.json or no taco_train/prelude/sitecustomize.py",
        "Rebuild the image with the openpi-taco bake target.",
        "{tmp}/opt-taco-train",
        False,
    ),
    (
        "baked-record-without-sha256",
        {},
        {},
        {"file": CP312_WHEEL},
        "the image's {tmp}/opt-taco-train has no valid WHEEL.json or no taco_train/prelude/sitecustomize.py",
        "Rebuild the image with the openpi-taco bake target.",
        "{tmp}/opt-taco-train",
        False,
    ),
    (
        "baked-record-a-list",
        {},
        {},
        [CP312_WHEEL, BAKED_SHA],
        "the image's {tmp}/opt-taco-train has no valid WHEEL.json or no taco_train/prelude/sitecustomize.py",
        "Rebuild the image with the openpi-taco bake target.",
        "{tmp}/opt-taco-train",
        False,
    ),
    (
        "baked-no-wheel-name",
        {},
        {},
        {"file": "taco_train.whl", "sha256": BAKED_SHA},
        "the image's WHEEL.json names no wheel: " + packaging_reason("taco_train.whl"),
        "Rebuild the image with the openpi-taco bake target.",
        "{tmp}/opt-taco-train",
        False,
    ),
    (
        "baked-for-another-python",
        {},
        {},
        {"file": "taco_train-1-cp313-cp313-linux_x86_64.whl", "sha256": BAKED_SHA},
        "taco_train-1-cp313-cp313-linux_x86_64.whl is built for cp313-cp313-linux_x86_64, which this interpreter, "
        "CPython 3.12 (cp312-cp312-manylinux_2_41_x86_64, …), cannot load",
        "Use the VLA base image (CPython 3.12), or a taco_train wheel built for this Python.",
        "{tmp}/opt-taco-train",
        False,
    ),
    (
        "baked-pin-mismatch",
        {},
        {"VLA_TACO_WHEEL_SHA256": "C" * 64},
        {"file": CP312_WHEEL, "sha256": BAKED_SHA},
        f"the baked wheel {CP312_WHEEL} has sha256 {BAKED_SHA}, not the pinned {'c' * 64}",
        "Pin the baked wheel's checksum, or rebuild the image with the wheel you pinned.",
        "VLA_TACO_WHEEL_SHA256",
        False,
    ),
]


@pytest.mark.parametrize("mode", ["auto", "on"])
@pytest.mark.parametrize(
    "flags, variables, record, what, fix, where, misspecified", [c[1:] for c in SKIPS], ids=[c[0] for c in SKIPS]
)
def test_why_taco_is_skipped(tmp_path, mode, flags, variables, record, what, fix, where, misspecified):
    (tmp_path / CP312_WHEEL).write_bytes(b"")
    if record is not None:
        bake_folder(tmp_path, record)
    filled = {k: v.replace("{tmp}", str(tmp_path)) for k, v in flags.items()}
    what, fix, where = (text.replace("{tmp}", str(tmp_path)) for text in (what, fix, where))
    plan = make_plan(tmp_path, filled, record is not None, VLA_TACO=mode, **variables)
    (finding,) = plan.findings
    assert (plan.status.value, plan.reason.en, finding.id, finding.where) == ("skipped", what, "taco.wheel", where)
    assert "secret" not in json.dumps([plan.to_json(), finding.to_json()])
    if mode == "on":
        assert finding.message.en == f"TACO is required (VLA_TACO=on) but cannot be used: {what}"
        assert finding.hint.en == fix and finding.status.value == "fail"
        assert exit_code_of([finding]) == (2 if misspecified else 3)
    else:
        assert finding.message.en == f"TACO skipped, training starts without it: {what}"
        assert finding.hint.en == fix + SUFFIX and finding.status.value == "warn" and exit_code_of([finding]) == 0
    assert plan.to_json() == {
        "status": "skipped",
        "mode": mode,
        "reason": what,
        "reason_zh": plan.reason.zh,
        "wheel": None,
        "source": None,
        "sha256": None,
        "pinned": None,
        "prefix": None,
        "profile": "openpi",
        "features": None,
    }


def test_a_wheel_that_cannot_be_read_is_named_with_the_error(tmp_path, monkeypatch):
    import entrypoint.net.source

    def unreadable(path):
        raise OSError(5, "Input/output error", str(path))

    monkeypatch.setattr(entrypoint.net.source, "sha256_of", unreadable)
    wheel = tmp_path / CP312_WHEEL
    wheel.write_bytes(b"")
    plan = make_plan(tmp_path, {"taco_wheel": str(wheel)}, VLA_TACO="on", VLA_TACO_WHEEL_SHA256=EMPTY_SHA)
    (finding,) = plan.findings
    assert finding.message.en.startswith(
        f"TACO is required (VLA_TACO=on) but cannot be used: cannot read the TACO wheel {wheel}: "
    )
    assert finding.message.en.endswith(": Input/output error") and finding.message.zh.endswith(":输入/输出错误")
    assert finding.hint.en == "Check that the file is readable and that the storage is mounted."
    assert (finding.where, exit_code_of([finding])) == ("--taco-wheel", 3)


def test_a_baked_wheel_ready_and_an_ignored_setting(tmp_path):
    bake_folder(tmp_path, {"file": CP312_WHEEL, "sha256": BAKED_SHA})
    plan = make_plan(tmp_path, {"taco_wheel": "https://cos.example/" + CP312_WHEEL}, True, VLA_TACO_FEATURES="tf32")
    ready, ignored = plan.findings
    baked = tmp_path / "opt-taco-train"
    assert (ready.id, ready.status.value, ready.where) == ("taco.wheel", "pass", str(baked))
    assert ready.message.en == f"TACO: {CP312_WHEEL} baked into the image at {baked}; features tf32 (profile openpi)"
    assert ready.message.zh == f"TACO:{CP312_WHEEL} 已内置于镜像 {baked};特性 tf32(模型类型 openpi)"
    assert (ignored.id, ignored.status.value, ignored.where) == ("taco.wheel-ignored", "warn", "VLA_TACO_WHEEL")
    assert ignored.message.en == f"VLA_TACO_WHEEL is ignored: the image has {CP312_WHEEL} baked in"
    assert ignored.hint.en == "Use the openpi image (without TACO baked in) to install another wheel at start."
    assert plan.reason.en == f"the image has {CP312_WHEEL} baked in"
    assert plan.to_json() == {
        "status": "baked",
        "mode": "auto",
        "reason": plan.reason.en,
        "reason_zh": f"镜像已内置 {CP312_WHEEL}",
        "wheel": CP312_WHEEL,
        "source": str(baked),
        "sha256": BAKED_SHA,
        "pinned": None,
        "prefix": str(baked),
        "profile": "openpi",
        "features": "tf32",
    }


def test_a_baked_wheel_set_nowhere_else_raises_no_warning(tmp_path):
    bake_folder(tmp_path, {"file": CP312_WHEEL, "sha256": BAKED_SHA})
    plan = make_plan(tmp_path, baked=True, VLA_TACO_WHEEL_SHA256=BAKED_SHA)
    assert [f.id for f in plan.findings] == ["taco.wheel"] and plan.sha256 == BAKED_SHA


def test_a_baked_folder_without_the_prelude_is_broken(tmp_path):
    bake_folder(tmp_path, {"file": CP312_WHEEL, "sha256": BAKED_SHA}, prelude=False)
    plan = make_plan(tmp_path, baked=True)
    assert plan.status.value == "skipped" and "has no valid WHEEL.json or no taco_train/prelude" in plan.reason.en


def test_an_unpinned_wheel_installed_at_start(tmp_path):
    url = f"https://cos.example/{CP312_WHEEL}?sign=secret"
    plan = make_plan(tmp_path, {"taco_wheel": url}, VLA_TRAIN_CONFIG="wan2.2_t2v")
    ready, unpinned = plan.findings
    shown = f"https://cos.example/{CP312_WHEEL}?…"
    prefix = tmp_path / "prefix"
    assert (ready.id, ready.status.value, ready.where) == ("taco.wheel", "pass", shown)
    features = "wan_disable_addmm,wan_compile,wan_vae_chunk,wan_fused_padcat,wan_rope_f32,wan_rmsnorm"
    assert ready.message.en == (
        f"TACO: {CP312_WHEEL} installed at start from {shown} into {prefix}; features {features} (profile wan2.2)"
    )
    assert (unpinned.id, unpinned.status.value, unpinned.where) == ("taco.checksum", "warn", "VLA_TACO_WHEEL_SHA256")
    assert unpinned.message.en == f"the TACO wheel {shown} is not pinned: it is installed unverified"
    assert unpinned.hint.en == (
        "Set VLA_TACO_WHEEL_SHA256 to the wheel's sha256 so a changed or corrupted file is refused."
    )
    assert plan.reason.en == f"no wheel baked into the image; {CP312_WHEEL} is installed at start"
    data = plan.to_json()
    assert (data["status"], data["source"], data["sha256"], data["pinned"], data["prefix"]) == (
        "install",
        shown,
        None,
        False,
        str(prefix),
    )
    assert (data["mode"], data["profile"], data["features"]) == ("auto", "wan2.2", features)


def test_a_pinned_wheel_installed_at_start(tmp_path):
    plan = make_plan(tmp_path, {"taco_wheel": "https://cos.example/" + CP312_WHEEL}, VLA_TACO_WHEEL_SHA256="A" * 64)
    assert [f.id for f in plan.findings] == ["taco.wheel"]
    data = plan.to_json()
    assert (data["sha256"], data["pinned"]) == ("a" * 64, True)


def test_the_start_time_install_goes_under_the_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"), "VLA_TACO_WHEEL": "https://cos.example/" + CP312_WHEEL}
    plan = plan_taco(load_settings(env), {}, python(12), tmp_path / "none")
    assert plan.prefix == tmp_path / "tmp" / "vla-taco-train" / "site-packages"


@pytest.mark.parametrize(
    "variables, inherited, where",
    [
        ({"VLA_TACO_FEATURES": "tf32,tf23,auto, gc_tunning "}, {}, "VLA_TACO_FEATURES"),
        ({}, {"TACO_TRAIN_FEATURES": "tf23,gc_tunning"}, "TACO_TRAIN_FEATURES"),
    ],
    ids=["setting", "inherited-variable"],
)
def test_unknown_features_are_named_with_where_they_were_set(tmp_path, variables, inherited, where):
    bake_folder(tmp_path, {"file": CP312_WHEEL, "sha256": BAKED_SHA})
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"), **variables}
    plan = plan_taco(load_settings(env), inherited, python(12), tmp_path / "opt-taco-train")
    _, unknown = plan.findings
    assert (unknown.id, unknown.status.value, unknown.where) == ("taco.features", "warn", where)
    assert unknown.message.en == "TACO feature(s) tf23, gc_tunning are not documented; the wheel may ignore them"
    assert unknown.hint.en == f"Check the spelling; documented: {', '.join(sorted(KNOWN_FEATURES))}, or auto."
    assert "cudnn_benchmark, dataloader" in unknown.hint.en


def test_off_is_a_passed_check(tmp_path):
    plan = make_plan(tmp_path, VLA_TACO="off")
    (finding,) = plan.findings
    assert (finding.id, finding.status.value, finding.where) == ("taco.wheel", "pass", "VLA_TACO")
    assert finding.message.en == "TACO acceleration is off (VLA_TACO=off)" and plan.reason.en == "VLA_TACO=off"
    assert plan.to_json()["reason_zh"] == "已关闭(VLA_TACO=off)"
