"""scripts/build-image: the documented build command labels the image with the commit it was built from."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "build-image"


def _fake_docker(folder: Path) -> dict[str, str]:
    """A `docker` on PATH that prints the bake variables and arguments it was given."""
    folder.mkdir()
    docker = folder / "docker"
    docker.write_text(
        '#!/bin/sh\necho "REVISION=$REVISION"\necho "CREATED=$CREATED"\necho "TAG=$TAG"\necho "ARGS=$*"\n'
    )
    docker.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("REVISION", "CREATED", "TAG")}
    return {**env, "PATH": f"{folder}:{env['PATH']}"}


def _run(script: Path, env: dict[str, str], *args: str) -> tuple[dict[str, str], str]:
    done = subprocess.run([str(script), *args], env=env, capture_output=True, text=True, timeout=60, check=True)
    return dict(line.split("=", 1) for line in done.stdout.splitlines()), done.stderr


def test_labels_come_from_git_and_arguments_go_to_bake(tmp_path: Path) -> None:
    seen, _ = _run(SCRIPT, _fake_docker(tmp_path / "bin"), "--print", "openpi-taco")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    assert seen["REVISION"].removesuffix("-dirty") == head.stdout.strip()
    assert datetime.datetime.fromisoformat(seen["CREATED"]).utcoffset() == datetime.timedelta(0)
    assert seen["TAG"] and seen["TAG"] != "dev"
    assert seen["ARGS"] == "buildx bake --print openpi-taco"


def test_variables_the_user_set_win(tmp_path: Path) -> None:
    env = {**_fake_docker(tmp_path / "bin"), "TAG": "v1", "REVISION": "r", "CREATED": "c"}
    seen, _ = _run(SCRIPT, env)
    assert (seen["TAG"], seen["REVISION"], seen["CREATED"]) == ("v1", "r", "c")


def test_outside_a_checkout_it_says_the_labels_stay_unknown(tmp_path: Path) -> None:
    copy = tmp_path / "export" / "scripts" / "build-image"
    copy.parent.mkdir(parents=True)
    shutil.copy2(SCRIPT, copy)
    env = {**_fake_docker(tmp_path / "bin"), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    seen, stderr = _run(copy, env)
    assert seen["REVISION"] == "" and "not a git checkout" in stderr
