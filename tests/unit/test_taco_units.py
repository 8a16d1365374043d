"""TACO's start-time install word for word, in-process: `fetch` replaced by a stand-in and pip by a stand-in
interpreter (`stand_in`) that also answers activation's check; the wheel's record, the off plan, the masking of a
signed URL's secrets in activation's failures, and the verdict's Chinese list of missing features."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from entrypoint.core.messages import Text
from entrypoint.core.settings import TacoMode
from entrypoint.net import download as download_module
from entrypoint.net.download import Downloaded
from entrypoint.net.source import DownloadError, DownloadOptions, FailureKind
from entrypoint.taco.activate import ActivationStatus, activate_taco
from entrypoint.taco.plan import TacoStatus, plan_taco
from entrypoint.taco.wheel import install, write_record
from tests.support.taco_wheel import pip_install_argv
from tests.unit.test_taco import _activation, python, settings
from tests.unit.test_taco_verify import baked_activation

WHEEL = "taco_train-0.1.0-py3-none-any.whl"
SECRET_PASSWORD = "Pa55w0rdXYZ"
SECRET_SIGNATURE = "deadbeefcafe1234"
SIGNED = f"https://bob:{SECRET_PASSWORD}@objects.example/taco/{WHEEL}?X-Amz-Signature={SECRET_SIGNATURE}&x=1"
SHOWN = f"https://***@objects.example/taco/{WHEEL}?X-Amz-Signature=***&x=1"
SHA = "c" * 64

STAND_IN = """\
#!{python}
import json, os, pathlib, sys
if sys.argv[1:3] == ["-m", "pip"]:
    seen = {{"argv": sys.argv[1:], "env": dict(os.environ)}}
    pathlib.Path(os.environ["STAND_IN_PIP_RECORD"]).write_text(json.dumps(seen))
    target = pathlib.Path(sys.argv[sys.argv.index("--target") + 1])
    if os.environ.get("STAND_IN_PIP", "").startswith("fail"):
        if os.environ["STAND_IN_PIP"] == "fail-half-way":
            (target / "taco_train").mkdir(parents=True)
        sys.stdout.write("Processing the wheel\\n")
        sys.stderr.write("ERROR: no space left\\n")
        sys.exit(3)
    (target / "taco_train" / "prelude").mkdir(parents=True, exist_ok=True)
    (target / "taco_train" / "prelude" / "sitecustomize.py").write_text("")
    (target / "taco_train" / "__init__.py").write_text("")
    sys.exit(0)
prefix = os.environ["PYTHONPATH"].split(":")[0]
print(json.dumps({{
    "sitecustomize": prefix + "/taco_train/prelude/sitecustomize.py",
    "taco_train": prefix + "/taco_train/__init__.py",
    "version": "1.2.3",
}}))
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "python3"
    path.parent.mkdir()
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


class FakeFetch:
    """Stands in for `entrypoint.net.download.fetch`: records its call, writes a progress line quoting the source,
    and returns (or raises) what it is told."""

    def __init__(self, size: int = 1234, attempts: int = 2, downloaded: bool = True, error: Exception | None = None):
        self.size, self.attempts, self.downloaded, self.error = size, attempts, downloaded, error
        self.calls: list[dict[str, object]] = []
        self.path: Path | None = None

    def __call__(self, source, folder, **kwargs):
        self.calls.append({"source": source, "folder": folder, **kwargs})
        kwargs["progress"].write(f"download {source}: done\n")
        if self.error is not None:
            raise self.error
        if self.downloaded:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / WHEEL
            self.path.write_bytes(b"x" * self.size)
        else:
            self.path = Path(source)
        return Downloaded(self.path, self.size, SHA, 0.0, self.attempts, self.downloaded)


def install_plan(tmp_path: Path, source: str, mode: str = "on", **variables: str):
    base = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": "/old/path",
        "PIP_TARGET": "/somewhere/else",
        "STAND_IN_PIP_RECORD": str(tmp_path / "pip.json"),
        **variables.pop("inherited", {}),
    }
    plan = plan_taco(
        settings(tmp_path, VLA_TACO=mode, VLA_TACO_WHEEL=source, VLA_TACO_FEATURES="tf32", **variables),
        base,
        python(12),
        tmp_path / "no-baked",
        tmp_path / "tmp" / "site-packages",
    )
    assert plan.status is TacoStatus.INSTALL
    return plan, base


def run_install(tmp_path, monkeypatch, python_path, fetch, *, source=SIGNED, mode="on", lang="en", **variables):
    monkeypatch.setattr(download_module, "fetch", fetch)
    plan, base = install_plan(tmp_path, source, mode, **variables)
    ticks = iter([100.0, 100.0, 101.5, 101.5, 103.75, 103.75, 104.25, 105.0])
    clock = lambda: next(ticks)  # noqa: E731
    out = io.StringIO()
    activation = activate_taco(plan, plan.env.apply(base), out, lang=lang, python=python_path, clock=clock)
    return plan, activation, out.getvalue(), clock


def pip_call(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "pip.json").read_text())


def test_a_downloaded_pinned_wheel_is_installed_and_each_step_is_logged(tmp_path, monkeypatch, stand_in):
    fetch = FakeFetch()
    _, activation, out, clock = run_install(tmp_path, monkeypatch, stand_in, fetch, VLA_TACO_WHEEL_SHA256=SHA)
    prefix = tmp_path / "tmp" / "site-packages"
    assert out == (
        f"download {SHOWN}: done\n"
        f"vla-entrypoint: TACO: downloaded {WHEEL} (1234 bytes, 2 attempt(s)) in 1.5s\n"
        f"vla-entrypoint: TACO: installed {WHEEL} into {prefix} in 2.2s\n"
        f"vla-entrypoint: TACO active: {WHEEL} 1.2.3 from {prefix}, features tf32; ready in 5.00s\n"
    )
    assert fetch.calls == [
        {
            "source": SIGNED,
            "folder": tmp_path / "tmp" / "download",
            "sha256": SHA,
            "options": DownloadOptions(timeout_s=30, attempts=4, backoff_s=2, deadline_s=600, allow_http=False),
            "progress": fetch.calls[0]["progress"],
            "lang": "en",
            "clock": clock,
        }
    ]
    assert fetch.calls[0]["progress"] is not None and not fetch.path.exists()  # the download is not kept
    assert activation.seconds == {"fetch": 1.5, "install": 2.25, "verify": 0.5, "total": 5.0}
    assert (activation.status, activation.sha256, activation.version) == (ActivationStatus.ACTIVE, SHA, "1.2.3")
    assert (prefix / "WHEEL.json").read_text() == f'{{\n  "file": "{WHEEL}",\n  "sha256": "{SHA}"\n}}\n'
    files = sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if "__pycache__" not in p.parts)
    assert files == [
        "WHEEL.json",
        "taco_train",
        "taco_train/__init__.py",
        "taco_train/prelude",
        "taco_train/prelude/sitecustomize.py",
    ]
    pip = pip_call(tmp_path)
    staging = prefix.with_name(f".site-packages.staging-{os.getpid()}")
    assert pip["argv"] == pip_install_argv(str(staging), str(fetch.path))
    env = pip["env"]
    assert (env["PYTHONPATH"], env["PIP_ROOT_USER_ACTION"], env["PIP_NO_INPUT"]) == ("/old/path", "ignore", "1")
    assert "PIP_TARGET" not in env and "TACO_TRAIN_FEATURES" not in env and not staging.exists()


def test_an_unpinned_local_wheel_says_so_in_both_languages_and_is_kept(tmp_path, monkeypatch, stand_in):
    wheel = tmp_path / "wheels" / WHEEL
    wheel.parent.mkdir()
    wheel.write_bytes(b"")
    fetch = FakeFetch(downloaded=False)
    _, activation, out, _ = run_install(tmp_path, monkeypatch, stand_in, fetch, source=str(wheel), lang="both")
    prefix = tmp_path / "tmp" / "site-packages"
    lead = " " * len("vla-entrypoint: ")
    assert out == (
        f"download {wheel}: done\n"
        f"vla-entrypoint: TACO: {WHEEL} is unpinned (sha256 {SHA}); set VLA_TACO_WHEEL_SHA256 to enforce it\n"
        f"{lead}TACO:{WHEEL} 未固定校验和(sha256 {SHA});设置 VLA_TACO_WHEEL_SHA256 即可强制校验\n"
        f"vla-entrypoint: TACO: installed {WHEEL} into {prefix} in 2.2s\n"
        f"{lead}TACO:已把 {WHEEL} 安装到 {prefix},用时 2.2 秒\n"
        f"vla-entrypoint: TACO active: {WHEEL} 1.2.3 from {prefix}, features tf32; ready in 5.00s\n"
        f"{lead}TACO 已启用:{WHEEL} 1.2.3,来自 {prefix},特性 tf32;准备用时 5.00 秒\n"
    )
    assert fetch.calls[0]["sha256"] is None and fetch.calls[0]["lang"] == "both"
    assert wheel.exists() and activation.sha256 == SHA  # a local wheel is never removed
    assert json.loads((prefix / "WHEEL.json").read_text()) == {"file": WHEEL, "sha256": SHA}


def test_http_allowed_by_the_plan_reaches_the_download(tmp_path, monkeypatch, stand_in):
    fetch = FakeFetch()
    url = f"http://127.0.0.1:9/{WHEEL}"
    run_install(tmp_path, monkeypatch, stand_in, fetch, source=url, VLA_TACO_ALLOW_HTTP="1")
    assert fetch.calls[0]["options"] == DownloadOptions(
        timeout_s=30, attempts=4, backoff_s=2, deadline_s=600, allow_http=True
    )


@pytest.mark.parametrize("mode, pip", [("on", "fail-half-way"), ("auto", "fail")], ids=["on-half-way", "auto"])
def test_pip_failing_at_start_withdraws_taco_and_says_why(tmp_path, monkeypatch, stand_in, mode, pip):
    fetch = FakeFetch()
    _, activation, out, _ = run_install(
        tmp_path, monkeypatch, stand_in, fetch, mode=mode, inherited={"STAND_IN_PIP": pip}
    )
    prefix = tmp_path / "tmp" / "site-packages"
    what = f"pip could not install {WHEEL} into {prefix}: pip exited with 3: Processing the wheel\nERROR: no space left"
    fix = "Check that the wheel is intact and that the temp folder is writable with free space."
    if mode == "on":
        tail = f"FAIL [taco.activate] TACO is required (VLA_TACO=on) but cannot be used: {what}\n    -> {fix}\n"
    else:
        tail = (
            f"WARN [taco.activate] TACO skipped, training starts without it: {what}\n"
            f"    -> {fix} (VLA_TACO=off silences this.)\n"
        )
    assert out == (
        f"download {SHOWN}: done\n"
        f"vla-entrypoint: TACO: downloaded {WHEEL} (1234 bytes, 2 attempt(s)) in 1.5s\n"
        f"vla-entrypoint: TACO: {WHEEL} is unpinned (sha256 {SHA}); set VLA_TACO_WHEEL_SHA256 to enforce it\n"
        f"vla-entrypoint: {tail}"
    )
    assert (activation.status, activation.reason.en, activation.finding.where) == ("failed", what, str(prefix))
    assert activation.reason.zh == (
        f"pip 无法把 {WHEEL} 安装到 {prefix}:pip 退出码为 3:Processing the wheel\nERROR: no space left"
    )
    assert (activation.finding.exit_code, activation.finding.status.value) == (3, "fail" if mode == "on" else "warn")
    assert activation.seconds == {"fetch": 1.5, "total": 3.75}
    staging = prefix.with_name(f".site-packages.staging-{os.getpid()}")
    assert not prefix.exists() and not staging.exists()  # nothing installed, the half-done install removed
    assert not fetch.path.exists()  # the download is not kept
    assert activation.env["PYTHONPATH"] == "/old/path" and "TACO_TRAIN_FEATURES" not in activation.env


def test_a_temp_folder_that_cannot_be_used_is_named_with_the_fix(tmp_path, monkeypatch, stand_in):
    fetch = FakeFetch(error=PermissionError(13, "Permission denied", str(tmp_path / "tmp" / "download")))
    _, activation, out, _ = run_install(tmp_path, monkeypatch, stand_in, fetch, lang="both")
    prefix = tmp_path / "tmp" / "site-packages"
    finding = activation.finding
    assert activation.reason == Text(
        f"cannot prepare TACO in {prefix}: Permission denied", f"无法在 {prefix} 准备 TACO:权限不足"
    )
    assert finding.hint == Text(
        "Make the temp folder (TMPDIR) writable with free space.", "请确保临时目录(TMPDIR)可写且有剩余空间。"
    )
    assert (finding.where, finding.exit_code, activation.status) == (str(prefix), 3, "failed")
    assert "FAIL [taco.activate] TACO is required (VLA_TACO=on) but cannot be used: cannot prepare" in out


def test_a_signed_urls_secrets_are_masked_in_activations_failure(tmp_path, monkeypatch, stand_in):
    quoted = f"{SIGNED} refused signature {SECRET_SIGNATURE} for bob/{SECRET_PASSWORD}"
    error = DownloadError(
        FailureKind.NETWORK,
        Text(f"cannot download {quoted}", f"无法下载 {quoted}"),
        f"{SIGNED} {SECRET_PASSWORD}",
        Text(f"Check {SECRET_SIGNATURE}", f"请检查 {SECRET_SIGNATURE}"),
    )
    _, activation, out, _ = run_install(tmp_path, monkeypatch, stand_in, FakeFetch(error=error), lang="both")
    shown = f"{SHOWN} refused signature *** for bob/***"
    what = Text(f"cannot download {shown}", f"无法下载 {shown}")
    finding = activation.finding
    assert activation.reason == what and finding.where == f"{SHOWN} ***"
    assert finding.hint == Text("Check ***", "请检查 ***")
    assert finding.message == Text(
        f"TACO is required (VLA_TACO=on) but cannot be used: {what.en}",
        f"要求使用 TACO(VLA_TACO=on),但无法使用:{what.zh}",
    )
    lead = " " * len("vla-entrypoint: FAIL [taco.activate] ")
    assert out == (
        f"download {SHOWN}: done\n"
        f"vla-entrypoint: FAIL [taco.activate] {finding.message.en}\n{lead}{finding.message.zh}\n"
        "    -> Check ***\n       请检查 ***\n"
    )
    assert finding.exit_code == 3


# ---- the wheel's install folder and record ----


def test_write_record_layout(tmp_path):
    write_record(tmp_path, WHEEL, SHA)
    assert (tmp_path / "WHEEL.json").read_bytes() == (
        b'{\n  "file": "' + WHEEL.encode() + b'",\n  "sha256": "' + SHA.encode() + b'"\n}\n'
    )


def test_install_clears_a_stale_staging_folder(tmp_path, stand_in):
    target = tmp_path / "prefix"
    staging = tmp_path / f".prefix.staging-{os.getpid()}"
    (staging / "left-over").mkdir(parents=True)
    (target / "old").mkdir(parents=True)
    env = {"STAND_IN_PIP_RECORD": str(tmp_path / "pip.json")}
    assert install(tmp_path / WHEEL, target, env, stand_in) is None
    assert sorted(p.name for p in target.iterdir()) == ["taco_train"] and not staging.exists()


# ---- the off plan and its activation ----


def test_the_off_plan_keeps_its_mode_and_profile(tmp_path):
    plan = plan_taco(settings(tmp_path, VLA_TACO="off", VLA_TRAIN_CONFIG="pi05_libero"), {}, python(12))
    assert (plan.mode, plan.profile) == (TacoMode.OFF, "openpi")
    assert plan.to_json() == {
        "status": "off",
        "mode": "off",
        "reason": "VLA_TACO=off",
        "reason_zh": "已关闭(VLA_TACO=off)",
        "wheel": None,
        "source": None,
        "sha256": None,
        "pinned": None,
        "prefix": None,
        "profile": "openpi",
        "features": None,
    }
    out = io.StringIO()
    activation = activate_taco(plan, {"PYTHONPATH": "/old"}, out)
    assert activation.plan is plan and out.getvalue() == ""
    assert (activation.status, activation.env, activation.finding) == (
        ActivationStatus.OFF,
        {"PYTHONPATH": "/old"},
        None,
    )
    assert activation.to_json()["plan_status"] == "off"


# ---- activation's check: an interpreter that cannot start ----


def test_an_interpreter_that_cannot_start_is_named_in_both_languages(tmp_path):
    activation, _, _ = baked_activation(tmp_path, str(tmp_path / "no-python"))
    assert activation.reason == Text(
        "the TACO check in a child interpreter did not finish: No such file or directory",
        "子解释器中的 TACO 检查未完成:没有该文件或目录",
    )


# ---- the verdict's Chinese list of what was not applied ----


def test_the_chinese_verdict_lists_what_was_not_applied():
    partial = _activation("active").outcome({"openpi_compile": "n/a (openpi not installed)", "tf32": "applied ×1"}, 0)
    assert partial.message == Text(
        "TACO: PARTIAL — 1 of 2 requested feature(s) applied: tf32 applied ×1; "
        "not applied: openpi_compile n/a (openpi not installed)",
        "TACO:部分生效 — 请求的 2 项特性中 1 项已应用:tf32 applied ×1;未应用:openpi_compile n/a (openpi not installed)",
    )
    none = _activation("active").outcome({"memory": "off"}, 0)
    assert none.message == Text(
        "TACO: NOT APPLIED — 0 of 2 requested feature(s) applied: none; "
        "not applied: openpi_compile (not in the summary), tf32 (not in the summary)",
        "TACO:未生效 — 请求的 2 项特性中 0 项已应用:无;未应用:openpi_compile (汇总中未出现), tf32 (汇总中未出现)",
    )
