"""Activation's check in a child interpreter and its record, word for word, with a stand-in interpreter
(`probe_python`) that answers the probe as told: no pip, no real wheel."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from entrypoint.core.settings import load_settings
from entrypoint.taco import activate as activate_module
from entrypoint.taco.activate import activate_taco
from entrypoint.taco.plan import plan_taco
from tests.unit.test_taco import CP312_WHEEL
from tests.unit.test_taco import python as python_tags

FAKE = """\
#!{python}
import json, os, pathlib, sys, time
mode = os.environ.get("FAKE_PROBE", "ok")
pathlib.Path(os.environ["FAKE_PROBE_RECORD"]).write_text(json.dumps(dict(os.environ)))
prefix = os.environ["PYTHONPATH"].split(":")[0]
if mode == "hang":
    time.sleep(60)
sys.stderr.write("".join(f"error line {{n}}\\n" for n in range(1, 9)) if mode in ("crash", "no-site-errors") else "")
if mode == "crash":
    sys.exit(7)
site = {{"shadowed": "/usr/lib/python3/sitecustomize.py"}}.get(mode, prefix + "/taco_train/prelude/sitecustomize.py")
elsewhere = "/usr/lib/python3/taco_train/__init__.py"
origin = {{"elsewhere": elsewhere, "missing": None}}.get(mode, prefix + "/taco_train/x.py")
print(json.dumps({{
    "sitecustomize": None if mode.startswith("no-site") else site,
    "taco_train": origin,
    "version": {{"no-version": 3}}.get(mode, "1.2.3"),
}}))
"""


@pytest.fixture
def probe_python(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "python3"
    path.parent.mkdir()
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def baked_activation(tmp_path: Path, python: str, mode: str = "ok", taco: str = "on"):
    """Plan a baked TACO and activate it with the stand-in; returns (activation, console output, probe's env)."""
    baked = tmp_path / "opt-taco-train"
    (baked / "taco_train" / "prelude").mkdir(parents=True)
    (baked / "taco_train" / "prelude" / "sitecustomize.py").write_text("")
    (baked / "WHEEL.json").write_text(json.dumps({"file": CP312_WHEEL, "sha256": "b" * 64}))
    env = {"VLA_BAKED_JOB_FILE": str(tmp_path / "none.yaml"), "VLA_TACO": taco, "VLA_TACO_FEATURES": "tf32"}
    base = {"PYTHONPATH": "/old", "FAKE_PROBE": mode, "FAKE_PROBE_RECORD": str(tmp_path / "probe.json")}
    plan = plan_taco(load_settings(env), base, python_tags(12), baked)
    ticks = iter([10.0, 10.5, 11.75, 12.0])
    out = io.StringIO()
    activation = activate_taco(plan, plan.env.apply(base), out, lang="en", python=python, clock=lambda: next(ticks))
    return activation, out.getvalue(), baked


def test_an_active_baked_taco_says_so_and_records_it(tmp_path, probe_python):
    activation, out, baked = baked_activation(tmp_path, probe_python)
    assert out == f"vla-entrypoint: TACO active: {CP312_WHEEL} 1.2.3 from {baked}, features tf32; ready in 2.00s\n"
    seen = json.loads((tmp_path / "probe.json").read_text())
    assert seen["TACO_TRAIN_REPORT"] == "0" and seen["TACO_TRAIN_FEATURES"] == "tf32"
    assert activation.to_json() == {
        "status": "active",
        "plan_status": "baked",
        "wheel": CP312_WHEEL,
        "sha256": "b" * 64,
        "pinned": True,
        "prefix": str(baked),
        "version": "1.2.3",
        "features": "tf32",
        "seconds": {"verify": 1.25, "total": 2.0},
        "finding": None,
    }


def test_a_version_that_is_no_text_is_not_shown(tmp_path, probe_python):
    activation, out, baked = baked_activation(tmp_path, probe_python, "no-version")
    assert activation.version is None and f"{CP312_WHEEL} from {baked}" in out


ERRORS = "\n".join(f"error line {n}" for n in range(3, 9))
FAILURES = [
    ("crash", f"the TACO check in a child interpreter failed (exit 7): {ERRORS}"),
    (
        "shadowed",
        "training processes would not run the TACO prelude {prelude}/sitecustomize.py "
        "(it imported /usr/lib/python3/sitecustomize.py)",
    ),
    (
        "no-site",
        "training processes would not run the TACO prelude {prelude}/sitecustomize.py (the prelude did not load)",
    ),
    (
        "no-site-errors",
        "training processes would not run the TACO prelude {prelude}/sitecustomize.py "
        f"(the prelude did not load: {ERRORS})",
    ),
    ("elsewhere", "taco_train is not importable from {baked} (found: /usr/lib/python3/taco_train/__init__.py)"),
    ("missing", "taco_train is not importable from {baked} (found: None)"),
]


@pytest.mark.parametrize("taco", ["on", "auto"])
@pytest.mark.parametrize("mode, what", FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failed_check_withdraws_taco_and_says_why(tmp_path, probe_python, taco, mode, what):
    activation, out, baked = baked_activation(tmp_path, probe_python, mode, taco)
    prelude = baked / "taco_train" / "prelude"
    what = what.format(prelude=prelude, baked=baked)
    finding = activation.finding
    fix = "Check that nothing earlier on PYTHONPATH shadows the prelude, and that the wheel matches this Python."
    assert (activation.status.value, activation.reason.en, finding.where) == ("failed", what, str(prelude))
    assert activation.env["PYTHONPATH"] == "/old" and "TACO_TRAIN_FEATURES" not in activation.env
    if taco == "on":
        message = f"TACO is required (VLA_TACO=on) but cannot be used: {what}"
        assert out == f"vla-entrypoint: FAIL [taco.activate] {message}\n    -> {fix}\n"
    else:
        message = f"TACO skipped, training starts without it: {what}"
        hint = fix + " (VLA_TACO=off silences this.)"
        assert out == f"vla-entrypoint: WARN [taco.activate] {message}\n    -> {hint}\n"
    data = activation.to_json()
    assert (data["status"], data["features"], data["version"], data["finding"]) == (
        "failed",
        None,
        None,
        finding.to_json(),
    )
    assert data["seconds"] == {"total": 1.75} and finding.message.en == message


def test_a_check_that_never_answers(tmp_path, probe_python, monkeypatch):
    monkeypatch.setattr(activate_module, "VERIFY_TIMEOUT_S", 0.5)
    activation, _, _ = baked_activation(tmp_path, probe_python, "hang")
    assert activation.reason.en == "the TACO check in a child interpreter did not finish: no answer within 0.5 s"


def test_an_interpreter_that_cannot_start(tmp_path):
    activation, _, _ = baked_activation(tmp_path, str(tmp_path / "no-python"))
    assert activation.reason.en.startswith("the TACO check in a child interpreter did not finish: ")
    assert activation.finding.hint.en.startswith("Check that nothing earlier on PYTHONPATH shadows the prelude")
