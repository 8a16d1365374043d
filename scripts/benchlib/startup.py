"""Start-up overhead: container start (or process start) to the moment the trainer process is up, three ways.

(a) ours   the image's default command (`vla-entrypoint run`, everything baked) with one mount
(b) seed   the seed's flow: `bash run.sh` through the base's NGC entrypoint with the seed's four mounts: the
           transformers patch script, the existence checks, `pip install --target` of a wheel served by
           `python3 -m http.server` on this machine, then train_pytorch.sh's exports and torchrun
(c) floor  the same container (same mounts and environment) running `python3 -c <write the time>`

The clock starts on the host just before `docker run` (or the process is spawned) and stops at the trainer
stand-in's first statement (see fixtures). Ways alternate within each repetition (a, b, b+marks, c, ...), after
one discarded warm-up of each. `b+marks` is the seed's flow with a timestamp after each step; it only feeds the
timeline, the table's (b) is the unmodified scripts.

Segments of (a) come from the launcher's start-up record (`phases_s`, `launch_after_s`), a stamp taken by a
hook the NGC entrypoint sources just before it execs the launcher, and a separately measured spawn-to-Python-up
time of the trainer; "Python start and imports" is what is left (derived).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scripts.benchlib import fixtures as fx
from scripts.benchlib.machine import REPO
from scripts.benchlib.stats import Summary, summarize

WAYS = {
    "a": "(a) ours: default command, everything baked",
    "b": "(b) seed: run.sh + train_pytorch.sh",
    "c": "(c) floor: `python3 -c`",
}
TIONE = {
    "GPU_NUM_PER_NODE": "2",
    "WORLD_SIZE": "1",
    "RANK": "0",
    "INDEX": "0",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "23456",
    "GPU_NUM": "2",
    "NODE_LIST": "127.0.0.1:2",
}
# (b+marks): mark name -> the segment that ends there, in order; the trainer's stamp ends the last one.
SEED_SEGMENTS = (
    ("run.sh", "shell starts run.sh"),
    ("patched", "transformers patch script"),
    ("checked", "existence checks"),
    ("wheel-installed", "pip install of the wheel"),
    ("train_pytorch.sh", "shell starts train_pytorch.sh"),
    ("exported", "exports"),
)
TRAINER_SEGMENT = "torchrun | tee, trainer Python up"

GAP_CODE = r"""
import json, os, shutil, subprocess, sys, time
stamp, n = sys.argv[1], int(sys.argv[2])
env = dict(os.environ, BENCH_TRAINER_STAMP=stamp)
torchrun = shutil.which("torchrun")
found = {"gap": [], "python": [], "imports": []}
for _ in range(n):
    t = time.time()
    p = subprocess.Popen([torchrun, "--nnodes", "1", "scripts/train_pytorch.py", "pi05_libero"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    p.stdout.read()
    p.wait()
    with open(stamp) as f:
        found["gap"].append(json.load(f)["t"] - t)
    for key, code in (("python", "pass"), ("imports", "import entrypoint.cli, entrypoint.launch.run")):
        t = time.perf_counter()
        if subprocess.run([sys.executable, "-c", code]).returncode == 0:
            found[key].append(time.perf_counter() - t)
print(json.dumps(found))
"""


class BenchError(RuntimeError):
    pass


@dataclass
class Sample:
    total: float
    segments: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0  # until the command returned (the container removed)


@dataclass
class Result:
    mode: str  # docker | host
    samples: dict[str, list[Sample]]  # way -> samples; ways: a, b, b+marks, c
    probes: dict[
        str, list[float]
    ]  # gap: spawn to trainer up; python: `python3 -c pass`; imports: the launcher's modules

    def total(self, way: str) -> Summary:
        return summarize(s.total for s in self.samples[way])

    def segments(self, way: str) -> list[tuple[str, Summary]]:
        """Per-segment summaries, in the order the segments occur."""
        names: list[str] = []
        for s in self.samples.get(way, []):
            for name in s.segments:
                if name not in names:
                    names.append(name)
        return [(n, summarize(s.segments[n] for s in self.samples[way] if n in s.segments)) for n in names]

    def records(self) -> list[dict]:
        return [s.segments for s in self.samples.get("a", [])]

    def to_json(self) -> dict:
        return {
            "mode": self.mode,
            "probes": self.probes,
            "samples": {
                w: [{"total": s.total, "wall": s.wall, "segments": s.segments} for s in v]
                for w, v in self.samples.items()
            },
        }


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _record_segments(record: dict | None, before: float, gap: float) -> dict[str, float]:
    """(a)'s segments after the launcher's process is up: start-up record phases, the rest, and the spawn gap.
    `before` is the time from the reference point (hook or process start) to the trainer stamp."""
    if not record or "launch_after_s" not in record:
        raise BenchError(
            f"(a) wrote no start-up record with launch_after_s: {json.dumps(record)[:500] if record else 'none'}"
        )
    launch = float(record["launch_after_s"])
    phases = {k: float(v) for k, v in record.get("phases_s", {}).items() if k != "training"}
    segments = {"Python start, imports (derived)": max(before - launch - gap, 0.0)}
    for name, value in phases.items():
        segments[f"phase: {name}"] = value
    segments["launcher, other (log, health summary, record)"] = max(launch - sum(phases.values()), 0.0)
    segments["spawn torchrun, trainer Python up"] = gap
    return segments


def _seed_segments(start: float, marks: dict[str, float], trainer: float) -> dict[str, float]:
    segments: dict[str, float] = {}
    last = start
    for mark, label in SEED_SEGMENTS:
        if mark not in marks:
            raise BenchError(f"(b+marks) recorded no '{mark}' mark: {marks}")
        segments[label] = marks[mark] - last
        last = marks[mark]
    segments[TRAINER_SEGMENT] = trainer - last
    return segments


class Runner:
    """Runs the ways in one mode; subclasses build the commands."""

    mode = ""

    def __init__(self, work: Path, tree: Path, wheel_url: str) -> None:
        self.work, self.tree, self.wheel_url = work, tree, wheel_url
        self.count = 0
        self.gap = 0.0

    def outdir(self, way: str) -> Path:
        self.count += 1
        path = self.work / "runs" / f"{self.mode}-{self.count:03d}-{way.replace('+', '-')}"
        path.mkdir(parents=True)
        path.chmod(0o777)
        return path

    def run(self, way: str) -> Sample:
        out = self.outdir(way)
        cmd, env = self.command(way, out)
        t0 = time.time()
        proc = subprocess.run(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", timeout=300
        )
        wall = time.time() - t0
        stamp = fx.read_json(out / "trainer.json")
        if proc.returncode != 0 or stamp is None:
            raise BenchError(
                f"{self.mode} {way} failed (exit {proc.returncode}, trainer stamp {'found' if stamp else 'missing'}):\n"
                f"$ {' '.join(cmd)}\n{_tail(proc.stdout)}"
            )
        if way in ("a", "b", "b+marks") and not any(a.endswith("train_pytorch.py") for a in stamp.get("argv", [])):
            raise BenchError(f"{self.mode} {way}: the trainer stand-in was not started as training: {stamp}")
        sample = Sample(total=stamp["t"] - t0, wall=wall)
        sample.segments = self.segments(way, out, t0, stamp["t"])
        shutil.rmtree(out, ignore_errors=True)
        return sample

    def command(self, way: str, out: Path) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def segments(self, way: str, out: Path, t0: float, trainer: float) -> dict[str, float]:
        raise NotImplementedError

    def measure_gap(self, n: int) -> dict[str, list[float]]:
        raise NotImplementedError


class DockerRunner(Runner):
    mode = "docker"

    def __init__(self, work: Path, tree: Path, wheel_url: str, image: str) -> None:
        super().__init__(work, tree, wheel_url)
        self.image = image
        self.bin = work / "bin-docker"
        fx.write_shim(self.bin, host=False)
        self.hook = work / "hook.sh"
        self.hook.write_text(fx.HOOK)
        self.code = {
            marks: fx.stage_seed(work / ("code-docker-marks" if marks else "code-docker"), wheel_url, marks)
            for marks in (False, True)
        }
        config = json.loads(
            subprocess.run(
                ["docker", "image", "inspect", "-f", "{{json .Config.Env}}", image],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        path = next(
            (e.split("=", 1)[1] for e in config or [] if e.startswith("PATH=")),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        self.path = f"/bench/bin:{path}"

    def _base(self, out: Path) -> list[str]:
        args = [
            "docker",
            "run",
            "--rm",
            "--network",
            "bridge",
            "-v",
            f"{out}:/bench/out",
            "-v",
            f"{self.bin}:/bench/bin:ro",
            "-v",
            f"{self.hook}:/opt/nvidia/entrypoint.d/00-bench-stamp.sh:ro",
            "-v",
            f"{self.tree}:{fx.CFS}",
            "-e",
            f"PATH={self.path}",
        ]
        for name, value in TIONE.items():
            args += ["-e", f"{name}={value}"]
        return args

    def command(self, way: str, out: Path) -> tuple[list[str], dict[str, str]]:
        args = self._base(out)
        if way == "a":
            args += ["-e", "VLA_DEVICE=cpu", "-e", "VLA_LOG_DIR=/bench/out/logs", self.image]
        elif way in ("b", "b+marks"):
            code = self.code[way == "b+marks"]
            # The seed's other three mount rows; code/ is the staged variant (also seen under the assets root).
            args += [
                "-v",
                f"{self.tree / 'checkpoints'}:{fx.OPENPI}/checkpoints",
                "-v",
                f"{self.tree / 'assets'}:{fx.OPENPI}/assets",
                "-v",
                f"{code}:{fx.OPENPI}/code",
                "-v",
                f"{code}:{fx.CFS}/code",
                "-e",
                "PYTHONPATH=",
                "-e",
                "PIP_DISABLE_PIP_VERSION_CHECK=1",
                "--entrypoint",
                "/opt/nvidia/nvidia_entrypoint.sh",
                self.image,
                "bash",
                f"{fx.CFS}/code/run.sh",
            ]
        elif way == "c":
            args += ["--entrypoint", "python3", self.image, "-c", fx.FLOOR_CODE]
        else:
            raise ValueError(way)
        return args, dict(os.environ)

    def segments(self, way: str, out: Path, t0: float, trainer: float) -> dict[str, float]:
        if way == "c":
            return {"container start, python3 up": trainer - t0}
        hook = fx.read_float(out / "hook")
        if hook is None:
            raise BenchError(f"docker {way}: the entrypoint hook wrote no stamp")
        first = {"container start to entrypoint shell": hook - t0}
        if way == "a":
            return first | _record_segments(fx.startup_record(out / "logs"), trainer - hook, self.gap)
        if way == "b+marks":
            return first | _seed_segments(hook, fx.read_marks(out / "marks"), trainer)
        return first

    def measure_gap(self, n: int) -> dict[str, list[float]]:
        out = self.outdir("gap")
        cmd = [
            "docker",
            "run",
            "--rm",
            "-v",
            f"{out}:/bench/out",
            "-v",
            f"{self.bin}:/bench/bin:ro",
            "-e",
            f"PATH={self.path}",
            "--entrypoint",
            "python3",
            self.image,
            "-c",
            GAP_CODE,
            "/bench/out/gap.json",
            str(n),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise BenchError(f"docker: measuring the spawn gap failed:\n{_tail(proc.stdout + proc.stderr)}")
        gaps = json.loads(proc.stdout.strip().splitlines()[-1])
        shutil.rmtree(out, ignore_errors=True)
        return gaps

    def launcher_knows(self, flag: str) -> bool:
        text = subprocess.run(
            ["docker", "run", "--rm", self.image, "run", "--help"], capture_output=True, text=True
        ).stdout
        return flag in text


class HostRunner(Runner):
    """The same three ways as processes on this machine (no container): process start to trainer up."""

    mode = "host"

    def __init__(self, work: Path, tree: Path, wheel_url: str) -> None:
        super().__init__(work, tree, wheel_url)
        self.bin = work / "bin-host"
        fx.write_shim(self.bin, host=True)
        code_plain = work / "code-host"
        self.openpi, self.python = fx.host_openpi(work, tree, code_plain)
        self.taco = work / "taco_train"
        self.home = work / "home"
        self.home.mkdir(exist_ok=True)
        self.code = {}
        for marks in (False, True):
            code = code_plain if not marks else work / "code-host-marks"
            replace = {
                f"{fx.OPENPI}/code": str(code),
                fx.CFS: str(tree),
                fx.OPENPI: str(self.openpi),
                "/tmp/taco_train": str(self.taco),
            }
            self.code[marks] = fx.stage_seed(code, wheel_url, marks, replace)
        launcher = Path(sys.executable).parent / "vla-entrypoint"
        self.launcher = [str(launcher)] if launcher.exists() else [sys.executable, "-m", "entrypoint"]
        self.path = os.pathsep.join(
            [str(self.bin), str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        )

    def _env(self, out: Path) -> dict[str, str]:
        env = {
            "PATH": self.path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(self.python),
            "BENCH_TRAINER_STAMP": str(out / "trainer.json"),
            "BENCH_MARKS": str(out / "marks"),
        }
        env.update(TIONE)
        if self.launcher[0] == sys.executable:
            env["PYTHONPATH"] += os.pathsep + str(REPO)
        return env

    def command(self, way: str, out: Path) -> tuple[list[str], dict[str, str]]:
        env = self._env(out)
        if way == "a":
            env.update(
                {
                    "VLA_DEVICE": "cpu",
                    "VLA_ASSETS_ROOT": str(self.tree),
                    "VLA_OPENPI_DIR": str(self.openpi),
                    "VLA_LOG_DIR": str(out / "logs"),
                    "VLA_BAKED_JOB_FILE": str(self.work / "no-baked-job.yaml"),
                    "HF_DATASETS_CACHE": str(self.work / "hf-datasets"),
                }
            )
            return [*self.launcher, "run"], env
        if way in ("b", "b+marks"):
            fx.clear(self.taco)  # a fresh container has an empty /tmp
            env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
            return ["bash", str(self.code[way == "b+marks"] / "run.sh")], env
        if way == "c":
            return ["python3", "-c", fx.FLOOR_CODE], env
        raise ValueError(way)

    def segments(self, way: str, out: Path, t0: float, trainer: float) -> dict[str, float]:
        if way == "a":
            return _record_segments(fx.startup_record(out / "logs"), trainer - t0, self.gap)
        if way == "b+marks":
            return _seed_segments(t0, fx.read_marks(out / "marks"), trainer)
        if way == "c":
            return {"python3 up": trainer - t0}
        return {}

    def measure_gap(self, n: int) -> dict[str, list[float]]:
        out = self.outdir("gap")
        proc = subprocess.run(
            ["python3", "-c", GAP_CODE, str(out / "gap.json"), str(n)],
            env=self._env(out),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise BenchError(f"host: measuring the spawn gap failed:\n{_tail(proc.stdout + proc.stderr)}")
        shutil.rmtree(out, ignore_errors=True)
        return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(
    runner: Runner,
    reps: int,
    log: Callable[[str], None],
    ways: tuple[str, ...] = ("a", "b", "b+marks", "c"),
    probes: int = 15,
) -> Result:
    found = runner.measure_gap(probes)
    runner.gap = summarize(found["gap"]).median
    log(f"{runner.mode}: spawn-to-trainer-up gap {runner.gap * 1000:.1f} ms (median of {len(found['gap'])})")
    for way in ways:  # warm-up, discarded
        runner.run(way)
    samples: dict[str, list[Sample]] = {w: [] for w in ways}
    for rep in range(reps):
        line = []
        for way in ways:
            s = runner.run(way)
            samples[way].append(s)
            line.append(f"{way} {s.total * 1000:.0f} ms")
        log(f"{runner.mode} rep {rep + 1}/{reps}: " + ", ".join(line))
    return Result(runner.mode, samples, found)
