"""TACO: the plan (tags, sources, checksums, exports), activation with real pip and stand-in wheels, the image-build
step, and the end-of-job verdict."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging import tags

from entrypoint.core.findings import exit_code_of
from entrypoint.core.messages import Text
from entrypoint.core.settings import TACO_WHEEL_URL, TacoMode, load_settings
from entrypoint.inspect.environment import EnvPlan
from entrypoint.net.source import sha256_of
from entrypoint.taco.activate import ActivationStatus, TacoActivation, Verdict, activate_taco
from entrypoint.taco.bake import BakeError, bake
from entrypoint.taco.bake import main as bake_main
from entrypoint.taco.plan import PROFILE_FEATURES, TacoPlan, TacoStatus, plan_taco
from entrypoint.taco.summary import parse_summary
from tests.support.files import small_text
from tests.support.httpserver import serve_directory
from tests.support.taco_wheel import CP312, build_wheel, interpreter_tag

PLATFORMS = [f"manylinux_2_{glibc}_x86_64" for glibc in range(41, 16, -1)] + ["linux_x86_64"]  # like glibc 2.41
CP312_WHEEL = "taco_train-0.1.0+nv-cp312-cp312-linux_x86_64.whl"
OPENPI = PROFILE_FEATURES["openpi"]
WAN = "wan_disable_addmm,wan_compile,wan_vae_chunk,wan_fused_padcat,wan_rope_f32,wan_rmsnorm"
WRONG_TAG = CP312 if sys.version_info[:2] != (3, 12) else "cp313-cp313-linux_x86_64"
EMPTY_SHA = hashlib.sha256(b"").hexdigest()  # the plan tests' wheels are empty files


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def python(minor: int) -> list[tags.Tag]:
    """The tags of CPython 3.<minor> on x86-64 Linux."""
    return list(tags.cpython_tags((3, minor), platforms=PLATFORMS)) + list(
        tags.compatible_tags((3, minor), platforms=PLATFORMS)
    )


def settings(tmp_path: Path, **variables: str):
    env = {
        "VLA_BAKED_JOB_FILE": str(tmp_path / "no-baked.yaml"),
        "VLA_ASSETS_ROOT": str(tmp_path / "assets"),
        **variables,
    }
    return load_settings(env)


def statuses(plan: TacoPlan) -> dict[str, str]:
    return {f.id: f.status.value for f in plan.findings}


@pytest.fixture
def baked_dir(tmp_path: Path) -> Path:
    """What the image build leaves: a prefix with the prelude and WHEEL.json (for a cp312 wheel)."""
    prefix = tmp_path / "opt-taco-train"
    (prefix / "taco_train" / "prelude").mkdir(parents=True)
    (prefix / "taco_train" / "prelude" / "sitecustomize.py").write_text("")
    (prefix / "WHEEL.json").write_text(json.dumps({"file": CP312_WHEEL, "sha256": "b" * 64}))
    return prefix


# ---- planning: pure, over Python 3.12 (the VLA base) unless a case says otherwise ----


@pytest.mark.parametrize(
    "wheel, minor, status, reason",
    [
        (CP312_WHEEL, 11, "skipped", "built for cp312-cp312-linux_x86_64, which this interpreter, CPython 3.11"),
        (CP312_WHEEL, 13, "skipped", "built for cp312-cp312-linux_x86_64, which this interpreter, CPython 3.13"),
        (CP312_WHEEL, 12, "install", "is installed at start"),
        ("taco_train-0.1.0-cp313-cp313-manylinux_2_28_x86_64.whl", 13, "install", "is installed at start"),
        ("taco_train-0.1.0-py3-none-any.whl", 13, "install", "is installed at start"),
    ],
    ids=["cp312-on-3.11", "cp312-on-3.13", "cp312-on-3.12", "manylinux-cp313-on-3.13", "pure-python"],
)
def test_the_wheel_tag_decides(tmp_path, wheel, minor, status, reason):
    (tmp_path / wheel).touch()
    plan = plan_taco(settings(tmp_path, VLA_TACO_WHEEL=str(tmp_path / wheel)), {}, python(minor), tmp_path / "none")
    assert plan.status == status and reason in plan.reason.en and plan.reason.zh
    assert statuses(plan)["taco.wheel"] == ("warn" if status == "skipped" else "pass")
    assert bool(plan.env.set) == (status == "install")


BAKED_SHA = "b" * 64
PLAN_CASES = [
    # id, variables ({wheels} = a folder holding CP312_WHEEL), baked folder, status, findings, exit code
    ("off", {"VLA_TACO": "off"}, "ok", "off", {"taco.wheel": "pass"}, 0),
    ("baked", {}, "ok", "baked", {"taco.wheel": "pass"}, 0),
    (
        "baked-wins-over-an-explicit-wheel",
        {"VLA_TACO_WHEEL": "{wheels}/" + CP312_WHEEL},
        "ok",
        "baked",
        {"taco.wheel": "pass", "taco.wheel-ignored": "warn"},
        0,
    ),
    ("baked-pinned", {"VLA_TACO_WHEEL_SHA256": BAKED_SHA.upper()}, "ok", "baked", {"taco.wheel": "pass"}, 0),
    (
        "baked-pin-mismatch-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL_SHA256": "0" * 64},
        "ok",
        "skipped",
        {"taco.wheel": "fail"},
        3,
    ),
    ("baked-folder-broken", {}, "broken", "skipped", {"taco.wheel": "warn"}, 0),
    ("baked-for-another-python", {}, "cp313", "skipped", {"taco.wheel": "warn"}, 0),
    ("default-url-unpinned", {}, None, "install", {"taco.wheel": "pass", "taco.checksum": "warn"}, 0),
    ("default-url-pinned", {"VLA_TACO_WHEEL_SHA256": "a" * 64}, None, "install", {"taco.wheel": "pass"}, 0),
    (
        "local-file",
        {"VLA_TACO_WHEEL": "{wheels}/" + CP312_WHEEL},
        None,
        "install",
        {"taco.wheel": "pass", "taco.checksum": "warn"},
        0,
    ),
    (
        "file-url",
        {"VLA_TACO_WHEEL": "file://{wheels}/" + CP312_WHEEL},
        None,
        "install",
        {"taco.wheel": "pass", "taco.checksum": "warn"},
        0,
    ),
    (
        "relative-to-assets-root",
        {"VLA_TACO_WHEEL": "code/" + CP312_WHEEL},
        None,
        "install",
        {"taco.wheel": "pass", "taco.checksum": "warn"},
        0,
    ),
    (
        "local-file-pinned",
        {"VLA_TACO_WHEEL": "{wheels}/" + CP312_WHEEL, "VLA_TACO_WHEEL_SHA256": EMPTY_SHA},
        None,
        "install",
        {"taco.wheel": "pass"},
        0,
    ),
    (
        "local-pin-mismatch-auto",
        {"VLA_TACO_WHEEL": "{wheels}/" + CP312_WHEEL, "VLA_TACO_WHEEL_SHA256": "0" * 64},
        None,
        "skipped",
        {"taco.wheel": "warn"},
        0,
    ),
    (
        "local-pin-mismatch-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL": "{wheels}/" + CP312_WHEEL, "VLA_TACO_WHEEL_SHA256": "0" * 64},
        None,
        "skipped",
        {"taco.wheel": "fail"},
        3,
    ),
    (
        "file-url-pin-mismatch-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL": "file://{wheels}/" + CP312_WHEEL, "VLA_TACO_WHEEL_SHA256": "0" * 64},
        None,
        "skipped",
        {"taco.wheel": "fail"},
        3,
    ),
    (
        "relative-pin-mismatch-auto",
        {"VLA_TACO_WHEEL": "code/" + CP312_WHEEL, "VLA_TACO_WHEEL_SHA256": "1" * 64},
        None,
        "skipped",
        {"taco.wheel": "warn"},
        0,
    ),
    (
        "missing-file-auto",
        {"VLA_TACO_WHEEL": "{wheels}/taco_train-9-cp312-cp312-linux_x86_64.whl"},
        None,
        "skipped",
        {"taco.wheel": "warn"},
        0,
    ),
    (
        "missing-file-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL": "{wheels}/taco_train-9-cp312-cp312-linux_x86_64.whl"},
        None,
        "skipped",
        {"taco.wheel": "fail"},
        3,
    ),
    ("no-wheel-auto", {"VLA_TACO_WHEEL": "none"}, None, "skipped", {"taco.wheel": "warn"}, 0),
    ("no-wheel-on", {"VLA_TACO": "on", "VLA_TACO_WHEEL": "none"}, None, "skipped", {"taco.wheel": "fail"}, 3),
    (
        "http-refused-auto",
        {"VLA_TACO_WHEEL": "http://mirror.example/" + CP312_WHEEL},
        None,
        "skipped",
        {"taco.wheel": "warn"},
        0,
    ),
    (
        "http-refused-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL": "http://mirror.example/" + CP312_WHEEL},
        None,
        "skipped",
        {"taco.wheel": "fail"},
        2,
    ),
    (
        "http-allowed",
        {"VLA_TACO_WHEEL": "http://mirror.example/" + CP312_WHEEL, "VLA_TACO_ALLOW_HTTP": "1"},
        None,
        "install",
        {"taco.wheel": "pass", "taco.checksum": "warn"},
        0,
    ),
    (
        "ftp-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL": "ftp://mirror.example/" + CP312_WHEEL},
        None,
        "skipped",
        {"taco.wheel": "fail"},
        2,
    ),
    (
        "malformed-sha256-on",
        {"VLA_TACO": "on", "VLA_TACO_WHEEL_SHA256": "abc"},
        None,
        "skipped",
        {"taco.wheel": "fail"},
        2,
    ),
    ("not-a-wheel", {"VLA_TACO_WHEEL": "https://cos.example/taco.tar.gz"}, None, "skipped", {"taco.wheel": "warn"}, 0),
    (
        "another-package",
        {"VLA_TACO_WHEEL": "https://cos.example/torch-2.6-cp312-cp312-linux_x86_64.whl"},
        None,
        "skipped",
        {"taco.wheel": "warn"},
        0,
    ),
    (
        "unknown-feature",
        {"VLA_TACO_FEATURES": "tf32,tf23"},
        "ok",
        "baked",
        {"taco.wheel": "pass", "taco.features": "warn"},
        0,
    ),
]


@pytest.mark.parametrize(
    "variables, baked, status, findings, code", [c[1:] for c in PLAN_CASES], ids=[c[0] for c in PLAN_CASES]
)
def test_plan(tmp_path, baked_dir, variables, baked, status, findings, code):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / CP312_WHEEL).touch()
    (tmp_path / "assets" / "code").mkdir(parents=True)
    (tmp_path / "assets" / "code" / CP312_WHEEL).touch()
    if baked == "broken":
        (baked_dir / "WHEEL.json").write_text("{not json")
    elif baked == "cp313":
        (baked_dir / "WHEEL.json").write_text(
            json.dumps({"file": "taco_train-1-cp313-cp313-linux_x86_64.whl", "sha256": BAKED_SHA})
        )
    values = {k: v.replace("{wheels}", str(wheels)) for k, v in variables.items()}
    plan = plan_taco(
        settings(tmp_path, **values), {}, python(12), baked_dir if baked else tmp_path / "none", tmp_path / "prefix"
    )
    assert (plan.status, statuses(plan), exit_code_of(list(plan.findings))) == (status, findings, code)
    for finding in plan.findings:
        assert (
            finding.message.en
            and finding.message.zh
            and (finding.status.value == "pass" or (finding.hint and finding.hint.zh))
        )
    data = plan.to_json()
    assert {"status", "reason", "wheel", "features"} <= set(data) and data["status"] == status
    if status in ("baked", "install"):
        assert set(plan.env.set) == {"PYTHONPATH", "TACO_TRAIN_FEATURES", "TACO_TRAIN_REPORT"}
        assert data["wheel"].endswith(".whl") and data["features"]
    else:
        assert not plan.env.set and data["features"] is None


@pytest.mark.parametrize("mode, status, code", [("auto", "warn", 0), ("on", "fail", 3)], ids=["auto-warns", "on-fails"])
@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_a_local_wheel_that_does_not_match_its_pin_is_skipped_by_the_plan(tmp_path, mode, status, code, as_url):
    wheel = tmp_path / CP312_WHEEL
    wheel.write_bytes(b"not the pinned wheel")
    actual = hashlib.sha256(b"not the pinned wheel").hexdigest()
    variables = {
        "VLA_TACO": mode,
        "VLA_TACO_WHEEL": wheel.as_uri() if as_url else str(wheel),
        "VLA_TACO_WHEEL_SHA256": "A" * 64,
    }
    plan = plan_taco(settings(tmp_path, **variables), {}, python(12), tmp_path / "none", tmp_path / "prefix")
    assert plan.status is TacoStatus.SKIPPED and plan.to_json()["status"] == "skipped"
    (finding,) = plan.findings
    assert (finding.id, finding.status.value, exit_code_of([finding])) == ("taco.wheel", status, code)
    for text in (finding.message.en, finding.message.zh, plan.reason.en, plan.reason.zh):
        assert str(wheel) in text and actual in text and "a" * 64 in text
    assert f"sha256sum {wheel}" in finding.hint.en and f"sha256sum {wheel}" in finding.hint.zh
    assert "VLA_TACO_WHEEL" in finding.hint.en and not plan.env.set
    activation = activate_taco(plan, plan.env.apply({"PYTHONPATH": "/old"}), io.StringIO())
    assert activation.status is ActivationStatus.SKIPPED and activation.env == {"PYTHONPATH": "/old"}
    assert not (tmp_path / "prefix").exists()


def test_plan_json_hides_a_signed_urls_query(tmp_path):
    url = TACO_WHEEL_URL + "?q-sign-algorithm=sha1&q-signature=secret"
    plan = plan_taco(settings(tmp_path, VLA_TACO_WHEEL=url), {}, python(12), tmp_path / "none")
    data = plan.to_json()
    assert data["wheel"] == CP312_WHEEL and data["source"].endswith(".whl?…")
    assert "secret" not in json.dumps([data] + [f.to_json() for f in plan.findings])


@pytest.mark.parametrize(
    "old, expected",
    [
        (None, "{p}:{p}/taco_train/prelude"),
        ("", "{p}:{p}/taco_train/prelude"),
        ("/workspace/openpi/src:/extra", "{p}:{p}/taco_train/prelude:/workspace/openpi/src:/extra"),
    ],
    ids=["unset", "empty", "kept"],
)
def test_pythonpath_keeps_the_old_value(tmp_path, baked_dir, old, expected):
    env = {} if old is None else {"PYTHONPATH": old}
    plan = plan_taco(settings(tmp_path), env, python(12), baked_dir)
    assert plan.env.set["PYTHONPATH"] == expected.replace("{p}", str(baked_dir))


@pytest.mark.parametrize(
    "config, override, inherited, features, kept",
    [
        ("pi05_libero", None, {}, OPENPI, {}),
        ("pi0_aloha_sim", None, {}, OPENPI, {}),
        ("debug_pi05", None, {}, OPENPI, {}),
        ("wan2.2_t2v", None, {}, WAN, {}),
        ("fastwam_base", None, {}, "auto", {}),
        ("pi05_libero", "tf32,cudnn_benchmark", {}, "tf32,cudnn_benchmark", {}),
        (
            "pi05_libero",
            "tf32",
            {"TACO_TRAIN_FEATURES": "memory", "TACO_TRAIN_REPORT": "0"},
            "memory",
            {"TACO_TRAIN_FEATURES": "memory", "TACO_TRAIN_REPORT": "0"},
        ),
    ],
    ids=["pi05", "pi0", "debug", "wan2.2", "other-is-auto", "override", "user-set-wins"],
)
def test_features_follow_the_model_profile(tmp_path, baked_dir, config, override, inherited, features, kept):
    variables = {"VLA_TRAIN_CONFIG": config, **({"VLA_TACO_FEATURES": override} if override else {})}
    plan = plan_taco(settings(tmp_path, **variables), inherited, python(12), baked_dir)
    assert plan.features == features and plan.env.kept == kept
    assert plan.env.set.get("TACO_TRAIN_FEATURES") == (None if kept else features)
    assert plan.env.set.get("TACO_TRAIN_REPORT") == (None if kept else "1")


# ---- activation: real pip, stand-in wheels tagged for this interpreter ----


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wheels")
    return {
        "native": build_wheel(root / "native"),
        "wrong": build_wheel(root / "wrong", WRONG_TAG),
        "broken": build_wheel(root / "broken", sitecustomize="raise RuntimeError('prelude exploded')\n"),
    }


def activate(
    tmp_path: Path, source: str, mode: str = "auto", inherited: dict[str, str] | None = None, **variables: str
):
    """Plan and activate like launch does; returns (plan, activation, console output)."""
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/old/path", **(inherited or {})}
    plan = plan_taco(
        settings(tmp_path, VLA_TACO=mode, VLA_TACO_WHEEL=source, VLA_TACO_FEATURES="tf32,dataloader", **variables),
        base,
        None,
        tmp_path / "no-baked",
        tmp_path / "tmp" / "site-packages",
    )
    out = io.StringIO()
    env = plan.env.apply(base)
    return plan, activate_taco(plan, env, out, lang="en"), out.getvalue()


def run_rank0(env: dict[str, str], marks: Path) -> str:
    """A process like a training rank: the prelude runs at start-up and reports at exit."""
    result = subprocess.run(
        [sys.executable, "-c", "print('training')"],
        env={**env, "RANK": "0", "TACO_STANDIN_MARKS": str(marks)},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_install_from_a_local_file_then_ranks_apply_and_report(tmp_path, wheels):
    _, activation, out = activate(tmp_path, str(wheels["native"]))
    assert activation.status == "active", out
    prefix = tmp_path / "tmp" / "site-packages"
    assert json.loads(small_text(prefix / "WHEEL.json"))["sha256"] == sha256_of(wheels["native"]) == activation.sha256
    assert activation.env["PYTHONPATH"] == f"{prefix}:{prefix}/taco_train/prelude:/old/path"
    assert "is unpinned" in out and "TACO active" in out and activation.version == "0.1.0+standin"
    assert set(activation.seconds) == {"fetch", "install", "verify", "total"}
    stdout = run_rank0(activation.env, tmp_path / "marks.jsonl")
    marks = [json.loads(line) for line in small_text(tmp_path / "marks.jsonl").splitlines()]
    assert [(m["rank"], m["applied"]) for m in marks] == [("0", ["tf32", "dataloader"])]
    outcome = activation.outcome(parse_summary(stdout), node_rank=0)
    assert (
        outcome.verdict == "applied"
        and "2 of 2 requested feature(s) applied: tf32 applied ×1, dataloader applied ×1" in outcome.message.en
    )
    assert json.loads(json.dumps(activation.to_json()))["status"] == "active"


@pytest.mark.parametrize("source", ["local", "http", "baked"])
def test_a_successful_activation_exports_exactly_what_the_plan_shows(tmp_path, wheels, source):
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/old/path", "TACO_TRAIN_REPORT": "0"}
    variables = {"VLA_TACO": "on", "VLA_TACO_FEATURES": "tf32"}
    baked = tmp_path / "no-baked"
    if source == "baked":
        baked = tmp_path / "opt" / "taco-train"
        bake(wheels["native"].parent, baked)
    elif source == "local":
        variables["VLA_TACO_WHEEL"] = str(wheels["native"])
        variables["VLA_TACO_WHEEL_SHA256"] = sha256_of(wheels["native"])
    with serve_directory(wheels["native"].parent) as url:
        if source == "http":
            variables |= {"VLA_TACO_WHEEL": f"{url}/{wheels['native'].name}", "VLA_TACO_ALLOW_HTTP": "1"}
        plan = plan_taco(settings(tmp_path, **variables), base, None, baked, tmp_path / "tmp" / "site-packages")
        planned = plan.env.apply(base)
        activation = activate_taco(plan, planned, io.StringIO(), lang="en")
    assert activation.status is ActivationStatus.ACTIVE
    assert activation.env == planned == plan.env.apply(planned)
    assert set(plan.env.set) == {"PYTHONPATH", "TACO_TRAIN_FEATURES"} and plan.env.kept == {"TACO_TRAIN_REPORT": "0"}


def test_install_from_a_local_http_server_with_a_pinned_checksum(tmp_path, wheels):
    with serve_directory(wheels["native"].parent) as base:
        url = f"{base}/{wheels['native'].name.replace('+', '%2B')}"
        _, activation, out = activate(
            tmp_path, url, VLA_TACO_ALLOW_HTTP="1", VLA_TACO_WHEEL_SHA256=sha256_of(wheels["native"])
        )
    assert activation.status == "active", out
    assert f"download {wheels['native'].name}: done" in out and "unpinned" not in out
    assert not (tmp_path / "tmp" / "download" / wheels["native"].name).exists()  # the download is not kept


@pytest.mark.parametrize("mode, status, code", [("auto", "warn", 3), ("on", "fail", 3)], ids=["auto-warns", "on-fails"])
def test_a_downloaded_checksum_mismatch_is_refused_and_never_installed(tmp_path, wheels, mode, status, code):
    with serve_directory(wheels["native"].parent) as base:
        url = f"{base}/{wheels['native'].name}"
        plan, activation, out = activate(tmp_path, url, mode, VLA_TACO_WHEEL_SHA256="0" * 64, VLA_TACO_ALLOW_HTTP="1")
    assert plan.status is TacoStatus.INSTALL  # a remote wheel is verified when it is downloaded
    assert activation.status == "failed" and activation.finding.status.value == status
    assert activation.finding.exit_code == code and activation.finding.id == "taco.activate"
    assert "not the expected" in activation.finding.message.en and "taco.activate" in out
    assert not (tmp_path / "tmp" / "site-packages").exists()
    assert not (tmp_path / "tmp" / "download" / wheels["native"].name).exists()  # the refused file is gone
    assert activation.env["PYTHONPATH"] == "/old/path" and "TACO_TRAIN_FEATURES" not in activation.env
    assert activation.outcome(None, 0).verdict == "not-used"


@pytest.mark.parametrize(
    "kind, text",
    [
        ("404", "HTTP 404"),
        ("broken-prelude", "prelude exploded"),
    ],
    ids=["download-fails", "prelude-fails-to-import"],
)
def test_activation_failures_are_warnings_in_auto_mode(tmp_path, wheels, kind, text):
    wheel = wheels["broken" if kind == "broken-prelude" else "native"]
    with serve_directory(tmp_path if kind == "404" else wheel.parent) as base:
        _, activation, out = activate(tmp_path, f"{base}/{wheel.name}", VLA_TACO_ALLOW_HTTP="1")
    assert activation.status == "failed" and activation.finding.status.value == "warn"
    assert "WARN [taco.activate]" in out and text in out
    assert text in activation.finding.message.en, activation.finding.message.en
    assert "TACO_TRAIN_FEATURES" not in activation.env and activation.env["PYTHONPATH"] == "/old/path"


@pytest.mark.parametrize(
    "mode, status, code", [("auto", "warn", 3), ("on", "fail", 2)], ids=["auto-warns", "on-exits-2"]
)
def test_a_malformed_proxy_variable_is_a_misspecified_job_not_a_network_error(
    tmp_path, wheels, monkeypatch, mode, status, code
):
    for name in ("http_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", "http://proxy.example:abc")
    started = time.monotonic()
    _, activation, out = activate(tmp_path, f"https://objects.example/taco/{wheels['native'].name}", mode)
    assert time.monotonic() - started < 5  # never retried (the start-up download waits 2 + 4 + 8 s between tries)
    finding = activation.finding
    assert activation.status == "failed" and (finding.status.value, finding.exit_code) == (status, code)
    assert finding.where == "https_proxy" and "nonnumeric port" in finding.message.en
    assert "Write https_proxy as http://host:port" in out


def test_an_unusable_temp_folder_is_a_finding_not_a_traceback(tmp_path, wheels):
    (tmp_path / "tmp").write_text("a file where the temp folder should be")
    with serve_directory(wheels["native"].parent) as base:
        _, activation, out = activate(tmp_path, f"{base}/{wheels['native'].name}", "on", VLA_TACO_ALLOW_HTTP="1")
    assert activation.status == "failed" and activation.finding.exit_code == 3 and "FAIL [taco.activate]" in out
    assert "cannot prepare TACO in" in activation.finding.message.en and "TMPDIR" in activation.finding.hint.en


def test_a_baked_prefix_is_used_without_installing(tmp_path, wheels):
    baked = tmp_path / "opt" / "taco-train"
    line = bake(wheels["native"].parent, baked)
    assert f"TACO baked: {wheels['native'].name} (sha256 {sha256_of(wheels['native'])})" in line.en
    assert "bytes" in line.en and sha256_of(wheels["native"]) in line.zh
    plan = plan_taco(settings(tmp_path, VLA_TACO="on"), {"PATH": "/usr/bin:/bin"}, None, baked)
    assert plan.status == "baked" and plan.sha256 == sha256_of(wheels["native"])
    activation = activate_taco(plan, plan.env.apply({"PATH": "/usr/bin:/bin"}), io.StringIO())
    assert activation.status == "active" and set(activation.seconds) == {"verify", "total"}


# ---- build time: python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX ----


@pytest.mark.parametrize(
    "content, text",
    [
        ([], "must hold exactly one taco_train-*.whl; it holds nothing"),
        (["native", "wrong"], "must hold exactly one taco_train-*.whl; it holds taco_train-"),
        (
            ["wrong"],
            f"is tagged {WRONG_TAG}, but this image's python3 is CPython {sys.version_info[0]}.{sys.version_info[1]}",
        ),
    ],
    ids=["no-wheel", "two-wheels", "wrong-tag"],
)
def test_bake_refuses_with_a_clear_message(tmp_path, wheels, capsys, content, text):
    folder = tmp_path / "context"
    folder.mkdir()
    for name in content:
        (folder / wheels[name].name).write_bytes(wheels[name].read_bytes())
    with pytest.raises(BakeError) as caught:
        bake(folder, tmp_path / "prefix")
    assert text in caught.value.what.en and caught.value.fix.en
    assert bake_main([str(folder), str(tmp_path / "prefix")]) == 1
    err = capsys.readouterr().err
    assert text in err and "错误" in err and "Traceback" not in err
    assert not (tmp_path / "prefix").exists()


# ---- the end-of-job verdict ----


def _activation(
    status: str, features: str | None = "openpi_compile,tf32", env: dict[str, str] | None = None
) -> TacoActivation:
    plan_status = TacoStatus.BAKED if status == "active" else TacoStatus.SKIPPED
    plan = TacoPlan(TacoMode.AUTO, plan_status, Text("why", "原因"), "openpi", (), EnvPlan(), features)
    full = {"TACO_TRAIN_FEATURES": features, **(env or {})} if features and status == "active" else dict(env or {})
    return TacoActivation(ActivationStatus(status), full, plan)


@pytest.mark.parametrize(
    "status, features, env, summary, node, verdict, text",
    [
        ("off", None, None, None, 0, "off", "TACO: off"),
        ("skipped", None, None, None, 0, "not-used", "NOT USED — training ran without acceleration (why)"),
        ("active", "openpi_compile,tf32", None, None, 0, "unconfirmed", "UNCONFIRMED — rank 0 printed no"),
        ("active", "openpi_compile,tf32", None, None, 1, "on-node-0", "summary is in node 0's log"),
        (
            "active",
            "openpi_compile,tf32",
            None,
            {"openpi_compile": "applied ×3", "tf32": "applied ×1", "memory": "off"},
            0,
            "applied",
            "APPLIED — 2 of 2 requested feature(s) applied: openpi_compile applied ×3, tf32 applied ×1",
        ),
        (
            "active",
            "openpi_compile,tf32",
            None,
            {"openpi_compile": "n/a (openpi not installed)", "tf32": "applied ×1"},
            0,
            "partial",
            "PARTIAL — 1 of 2 requested feature(s) applied: tf32 applied ×1; "
            "not applied: openpi_compile n/a (openpi not installed)",
        ),
        (
            "active",
            "openpi_compile,tf32",
            None,
            {"memory": "off"},
            0,
            "not-applied",
            "NOT APPLIED — 0 of 2 requested feature(s) applied: none; "
            "not applied: openpi_compile (not in the summary), tf32 (not in the summary)",
        ),
        (
            "active",
            "auto",
            None,
            {"tf32": "applied ×1", "memory": "off"},
            0,
            "applied",
            "APPLIED — 1 feature(s) applied: tf32 applied ×1",
        ),
        (
            "active",
            "tf32",
            {"TACO_TRAIN_ALL": "1"},
            {"tf32": "off"},
            0,
            "not-applied",
            "NOT APPLIED — 0 feature(s) applied",
        ),
    ],
    ids=["off", "not-used", "unconfirmed", "other-node", "applied", "partial", "none-applied", "auto", "all-forced"],
)
def test_outcome_is_visible_at_a_glance(status, features, env, summary, node, verdict, text):
    outcome = _activation(status, features, env).outcome(summary, node)
    assert outcome.verdict == verdict and text in outcome.message.en and outcome.message.zh
    assert not any(word in outcome.message.zh for word in ("none", "not in the summary", "feature(s)"))
    data = json.loads(json.dumps(outcome.to_json()))
    assert data["verdict"] == verdict and data["features"] == summary and data["message_zh"] == outcome.message.zh


def test_states_keep_their_json_strings():
    assert [m.value for m in TacoMode] == ["off", "auto", "on"]
    assert [s.value for s in TacoStatus] == ["baked", "install", "skipped", "off"]
    assert [s.value for s in ActivationStatus] == ["active", "failed", "skipped", "off"]
    assert [v.value for v in Verdict] == [
        "applied",
        "partial",
        "not-applied",
        "unconfirmed",
        "on-node-0",
        "not-used",
        "off",
    ]


def test_activation_speaks_the_chosen_language(tmp_path, wheels):
    base = {"PATH": "/usr/bin:/bin"}
    plan = plan_taco(
        settings(tmp_path, VLA_TACO_WHEEL=str(wheels["native"])), base, None, tmp_path / "none", tmp_path / "prefix"
    )
    out = io.StringIO()
    activation = activate_taco(plan, plan.env.apply(base), out, lang="zh")
    assert activation.status is ActivationStatus.ACTIVE
    text = out.getvalue()
    assert "未固定校验和" in text and "已把" in text and "TACO 已启用" in text
    assert not any(word in text for word in ("unpinned", "installed", "active", "features"))


def test_stand_in_wheel_tag_defaults_to_this_interpreter(tmp_path):
    wheel = build_wheel(tmp_path)
    assert wheel.name == f"taco_train-0.1.0+standin-{interpreter_tag()}.whl"
    assert tags.Tag(*interpreter_tag().split("-")) in set(tags.sys_tags())


def test_a_malformed_proxy_ends_a_taco_on_run_as_a_misspecified_job(world):
    wheel = "https://objects.example/taco/taco_train-0.1.0-py3-none-any.whl"
    env = {"VLA_TACO": "on", "VLA_TACO_WHEEL": wheel, "https_proxy": "http://proxy.example:abc", "VLA_LANG": "en"}
    result = world.cli("run", env=env)
    assert result.code == 2 and "FAIL  taco.activate" in result.out and "Traceback" not in result.text, result.text
    assert "Write https_proxy as http://host:port" in result.out and "start command:" not in result.out
    (record,) = [p for p in (world.assets / "logs").glob("*-node0-*.json") if ".error" not in p.name]
    assert json.loads(record.read_text())["outcome"] == {"exit_code": 2, "class": "job-misspecified"}
