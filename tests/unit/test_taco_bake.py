"""The image-build step (`python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX`) and the wheel helpers under it, word
for word: every refusal, the line a successful bake prints, pip's command line and its failures. pip is a stand-in
(`fake_python`) that installs a fixed tree, so no test here runs the real pip."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from packaging import tags

from entrypoint.net.source import sha256_of
from entrypoint.taco import bake as bake_module
from entrypoint.taco.bake import BakeError, bake, main
from entrypoint.taco.wheel import describe_interpreter, install
from tests.support.taco_wheel import pip_install_argv

OTHER_MINOR = 12 if sys.version_info[:2] != (3, 12) else 13  # a CPython that is not this interpreter
OTHER_TAG = f"cp3{OTHER_MINOR}-cp3{OTHER_MINOR}-linux_x86_64"
WHEEL = f"taco_train-0.1.0-{OTHER_TAG}.whl"
PAYLOAD = 3 * 2**19  # 1.5 MiB

FAKE_PIP = """\
#!{python}
import json, os, pathlib, sys, time
args = sys.argv[1:]
if os.environ.get("FAKE_PIP_RECORD"):
    pathlib.Path(os.environ["FAKE_PIP_RECORD"]).write_text(json.dumps({{"argv": args, "env": dict(os.environ)}}))
if os.environ.get("FAKE_PIP_HANG"):
    time.sleep(60)
sys.stderr.write(os.environ.get("FAKE_PIP_OUTPUT", ""))
if os.environ.get("FAKE_PIP_EXIT"):
    sys.exit(int(os.environ["FAKE_PIP_EXIT"]))
target = pathlib.Path(args[args.index("--target") + 1])
prelude = target / "taco_train" / "prelude"
prelude.mkdir(parents=True)
if not os.environ.get("FAKE_PIP_NO_PRELUDE"):
    (prelude / "sitecustomize.py").write_text("")
with open(target / "taco_train" / "payload.bin", "wb") as payload:
    payload.truncate({payload})
os.symlink(target / "taco_train" / "payload.bin", target / "payload-link.bin")
"""


def python_tags(minor: int) -> list[tags.Tag]:
    return list(tags.cpython_tags((3, minor), platforms=["linux_x86_64"])) + list(
        tags.compatible_tags((3, minor), platforms=["linux_x86_64"])
    )


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    """An interpreter whose `-m pip install --target T W` writes the prelude and a 1.5 MiB payload (plus a link to
    it) into T; FAKE_PIP_* variables make it record its call, hang, print, fail or leave the prelude out."""
    path = tmp_path / "bin" / "python3"
    path.parent.mkdir()
    path.write_text(FAKE_PIP.format(python=sys.executable, payload=PAYLOAD))
    path.chmod(0o755)
    return str(path)


def context(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "context"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"wheel bytes of " + name.encode())
    return folder


def refusal(folder: Path, prefix: Path, python: str = sys.executable) -> BakeError:
    with pytest.raises(BakeError) as caught:
        bake(folder, prefix, python_tags(OTHER_MINOR), python)
    assert str(caught.value) == caught.value.what.en
    return caught.value


def test_a_bake_prints_the_wheel_its_checksum_and_the_layers_size(tmp_path, fake_python):
    folder = context(tmp_path, WHEEL)
    prefix = tmp_path / "opt" / "taco-train"
    line = bake(folder, prefix, python_tags(OTHER_MINOR), fake_python)
    digest = sha256_of(folder / WHEEL)
    assert json.loads((prefix / "WHEEL.json").read_text()) == {"file": WHEEL, "sha256": digest}
    size = PAYLOAD + (prefix / "WHEEL.json").stat().st_size  # regular files only: no folder, no link
    assert line.en == f"TACO baked: {WHEEL} (sha256 {digest}) into {prefix}: {size} bytes (1.5 MiB) in this layer"
    assert line.zh == f"TACO 已内置:{WHEEL}(sha256 {digest})安装到 {prefix}:本层 {size} 字节(1.5 MiB)"


def test_pip_is_run_offline_without_dependencies_into_a_staging_folder(tmp_path, fake_python, monkeypatch):
    folder = context(tmp_path, WHEEL)
    monkeypatch.setenv("FAKE_PIP_RECORD", str(tmp_path / "pip.json"))
    monkeypatch.setenv("PIP_TARGET", "/somewhere/else")
    prefix = tmp_path / "prefix"
    bake(folder, prefix, python_tags(OTHER_MINOR), fake_python)
    seen = json.loads((tmp_path / "pip.json").read_text())
    staging = str(tmp_path / f".prefix.staging-{os.getpid()}")
    assert seen["argv"] == pip_install_argv(staging, str(folder / WHEEL))
    assert seen["env"]["PIP_ROOT_USER_ACTION"] == "ignore" and seen["env"]["PIP_NO_INPUT"] == "1"
    assert "PIP_TARGET" not in seen["env"]
    assert not Path(staging).exists() and (prefix / "taco_train" / "prelude" / "sitecustomize.py").is_file()


def test_a_new_install_replaces_the_old_prefix_whole(tmp_path, fake_python):
    prefix = tmp_path / "prefix"
    (prefix / "stale").mkdir(parents=True)
    install(context(tmp_path, WHEEL) / WHEEL, prefix, {}, fake_python)
    assert sorted(p.name for p in prefix.iterdir()) == ["payload-link.bin", "taco_train"]


@pytest.mark.parametrize(
    "names, found",
    [([], "nothing"), (["taco_train-1-py3-none-any.whl", WHEEL], f"{WHEEL}, taco_train-1-py3-none-any.whl")],
    ids=["none", "two"],
)
def test_the_context_must_hold_exactly_one_wheel(tmp_path, names, found):
    error = refusal(context(tmp_path, *names), tmp_path / "prefix")
    assert error.what.en == f"the build context 'taco' must hold exactly one taco_train-*.whl; it holds {found}"
    assert error.fix.en.startswith("Put the wheel alone in the folder that the bake variable TACO_WHEEL_DIR names")


def test_a_file_name_that_is_no_wheel_name(tmp_path):
    error = refusal(context(tmp_path, "taco_train.whl"), tmp_path / "prefix")
    assert error.what.en.startswith("taco_train.whl is not a valid wheel file name: ")
    assert len(error.what.en) > len("taco_train.whl is not a valid wheel file name: ") + 10  # packaging's reason
    assert error.what.zh.startswith("taco_train.whl 不是合法的 wheel 文件名:")
    assert (error.fix.en, error.fix.zh) == ("Keep the wheel's original file name.", "请保留 wheel 的原始文件名。")


def test_another_packages_wheel(tmp_path):
    name = f"torch-2.6.0-{OTHER_TAG}.whl"
    error = refusal(context(tmp_path, name), tmp_path / "prefix")
    assert (error.what.en, error.what.zh) == (
        f"{name} is a torch wheel, not taco_train",
        f"{name} 是 torch 的 wheel,而不是 taco_train",
    )
    assert error.fix.en == "Put the taco_train wheel in TACO_WHEEL_DIR." and error.fix.zh


def test_a_wheel_for_another_python_names_both(tmp_path):
    name = "taco_train-0.1.0-cp310-cp310-linux_x86_64.whl"
    error = refusal(context(tmp_path, name), tmp_path / "prefix")
    assert error.what.en == (
        f"{name} is tagged cp310-cp310-linux_x86_64, but this image's python3 is "
        f"CPython 3.{OTHER_MINOR} ({OTHER_TAG}, …): it cannot load it"
    )
    assert error.fix.en.startswith("Use a taco_train wheel built for this image's Python")


def test_pip_failing_is_quoted_with_the_end_of_its_output(tmp_path, fake_python, monkeypatch):
    monkeypatch.setenv("FAKE_PIP_EXIT", "1")
    monkeypatch.setenv("FAKE_PIP_OUTPUT", "x" * 5000 + "ERROR: wheel is corrupt")
    error = refusal(context(tmp_path, WHEEL), tmp_path / "prefix", fake_python)
    output = ("x" * 5000 + "ERROR: wheel is corrupt")[-4000:]
    assert error.what.en == f"pip could not install {WHEEL}: pip exited with 1: {output}"
    assert error.what.zh == f"pip 无法安装 {WHEEL}:pip 退出码为 1:{output}"
    assert error.fix.en == "Check that the wheel file is intact (compare its sha256 with the published one)."
    assert not (tmp_path / "prefix").exists()


def test_a_wheel_without_the_prelude(tmp_path, fake_python, monkeypatch):
    monkeypatch.setenv("FAKE_PIP_NO_PRELUDE", "1")
    error = refusal(context(tmp_path, WHEEL), tmp_path / "prefix", fake_python)
    assert (error.what.en, error.what.zh) == (
        f"{WHEEL} has no taco_train/prelude/sitecustomize.py",
        f"{WHEEL} 中没有 taco_train/prelude/sitecustomize.py",
    )
    assert error.fix.en == "Use the taco_train wheel: its prelude is what activates the features."


@pytest.mark.parametrize(
    "env, output, timeout, expected",
    [
        ({"FAKE_PIP_EXIT": "3"}, "", 60, "pip exited with 3"),
        ({"FAKE_PIP_EXIT": "1", "FAKE_PIP_OUTPUT": "  " + "y" * 900 + "\n"}, "", 60, "pip exited with 1: " + "y" * 800),
        ({"FAKE_PIP_HANG": "1"}, "", 0.5, "pip did not finish within 0.5 s"),
    ],
    ids=["exit-without-output", "output-cut-at-800", "timeout"],
)
def test_install_failures_keep_the_old_prefix(tmp_path, fake_python, env, output, timeout, expected):
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "old").write_text("kept")
    why = install(context(tmp_path, WHEEL) / WHEEL, prefix, env, fake_python, timeout_s=timeout)
    assert why is not None and why.en == expected
    assert [p.name for p in tmp_path.iterdir() if "staging" in p.name] == []
    assert (prefix / "old").read_text() == "kept"


def test_an_interpreter_that_cannot_run(tmp_path):
    why = install(context(tmp_path, WHEEL) / WHEEL, tmp_path / "prefix", {}, str(tmp_path / "no-python"))
    assert why is not None and why.en.startswith(f"cannot run {tmp_path / 'no-python'}: ")


@pytest.mark.parametrize(
    "tag_list, expected",
    [
        ([], "an interpreter with no known tags"),
        (python_tags(12), "CPython 3.12 (cp312-cp312-linux_x86_64, …)"),
        ([tags.Tag("pp310", "pypy310_pp73", "linux_x86_64")], "PyPy 3.10 (pp310-pypy310_pp73-linux_x86_64, …)"),
        ([tags.Tag("py3", "none", "any")], "py3 (py3-none-any, …)"),
        ([tags.Tag("cpx3", "none", "any")], "cpx3 (cpx3-none-any, …)"),
    ],
    ids=["none", "cpython", "pypy", "generic", "not-a-version"],
)
def test_describe_interpreter(tag_list, expected):
    assert describe_interpreter(tag_list).en == expected


# ---- the command ----


def test_usage_with_a_wrong_number_of_arguments(capsys, monkeypatch):
    monkeypatch.setenv("VLA_LANG", "en")
    assert main(["only-one"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "usage: python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX\n" and captured.out == ""


def test_the_command_reads_its_arguments(tmp_path, capsys, monkeypatch):
    """`sys.argv[1:]` are WHEEL_DIR and PREFIX: with two, an empty folder is refused (exit 1), not a usage error."""
    monkeypatch.setattr(sys, "argv", ["bake", str(context(tmp_path)), str(tmp_path / "prefix")])
    assert main() == 1
    assert "it holds nothing" in capsys.readouterr().err


def test_a_refusal_prints_what_and_the_fix_in_both_languages(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VLA_LANG", "en")  # errors are printed in both languages whatever the setting
    assert main([str(context(tmp_path)), str(tmp_path / "prefix")]) == 1
    fix = "Put the wheel alone in the folder that the bake variable TACO_WHEEL_DIR names (default ./taco-wheel)."
    assert capsys.readouterr().err == (
        "error: the build context 'taco' must hold exactly one taco_train-*.whl; it holds nothing\n"
        f"  fix: {fix}\n"
        "错误:构建上下文 'taco' 中必须恰好有一个 taco_train-*.whl;实际为 无\n"
        "解决:请把该 wheel 单独放在 bake 变量 TACO_WHEEL_DIR 指定的目录中(默认 ./taco-wheel)。\n"
    )


def test_a_successful_bake_prints_its_line_and_exits_0(tmp_path, capsys, monkeypatch, fake_python):
    monkeypatch.setenv("VLA_LANG", "en")
    seen = []

    def installed(wheel, target, env, python, output_chars):
        seen.append(target)
        return install(wheel, target, env, fake_python, output_chars=output_chars)

    monkeypatch.setattr(bake_module, "install", installed)
    monkeypatch.setattr(bake_module, "interpreter_tags", lambda: python_tags(OTHER_MINOR))
    prefix = tmp_path / "prefix"
    assert main([str(context(tmp_path, WHEEL)), str(prefix)]) == 0
    out = capsys.readouterr().out
    assert seen == [prefix] and out.startswith(f"TACO baked: {WHEEL} (sha256 ") and "本层" not in out
