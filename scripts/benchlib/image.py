"""The image: bytes each stand-in target adds over its base, and build times of our layers.

Builds run on a snapshot of the build context (every file .dockerignore admits, plus Dockerfile, docker-bake.hcl
and .dockerignore) copied into a temp folder, so a one-line change can be made without touching the
working tree, through `docker buildx bake openpi-standin` with the tag overridden (`…:bench*`), so the
stand-in image the tests use is never replaced. Per repetition, alternating:
  cold      `--no-cache`: every layer of ours rebuilt over the (present) stand-in base
  no-change the same build again, nothing changed (this also primes the cache for the next build)
  one-line  a comment line appended to entrypoint/__init__.py (a new one each time), then a cached build
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scripts.benchlib.machine import REPO
from scripts.benchlib.stats import Summary, summarize

TAG = "vla-entrypoint/openpi-standin"
STANDIN_BASE = "vla-entrypoint/standin-base:latest"
ROOTFS_REPO = "vla-entrypoint/standin-rootfs"
CONTEXT_FILES = ("Dockerfile", "docker-bake.hcl", ".dockerignore")  # read by bake itself, whatever .dockerignore says


class BuildError(RuntimeError):
    pass


@dataclass
class Build:
    seconds: float
    steps: int  # our Dockerfile steps (openpi stage, FROM excluded)
    executed: int  # of which not CACHED
    step_seconds: dict[str, float] = field(default_factory=dict)  # executed step -> its DONE time
    image_id: str = ""
    export_seconds: float = 0.0  # "exporting layers N s done"


@dataclass
class Layer:
    size: int
    created_by: str
    full: str = field(default="", repr=False)


@dataclass
class Result:
    added: list[dict]  # per target: {target, base, bytes, layers: [Layer]}
    builds: dict[str, list[Build]]
    package_last: tuple[bool, str]

    def summary(self, kind: str) -> Summary:
        return summarize(b.seconds for b in self.builds[kind])

    def to_json(self) -> dict:
        return {
            "added": [
                {**a, "layers": [{"size": x.size, "created_by": x.created_by} for x in a["layers"]]} for a in self.added
            ],
            "package_last": list(self.package_last),
            "builds": {k: [vars(b) for b in v] for k, v in self.builds.items()},
        }


def _dockerignore_rules(path: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore lines as (negated, regex); `**` spans folders, `*` and `?` stay within one."""
    rules = []
    for raw in path.read_text().splitlines() if path.exists() else []:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((negate, re.compile(regex + r"\Z")))
    return rules


def _in_context(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last matching line wins; a line matches a path or any folder above it."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for negate, regex in rules:
        if any(regex.match(p) for p in prefixes):
            excluded = not negate
    return not excluded


def snapshot_context(dest: Path) -> Path:
    """Copy the build context (every file .dockerignore lets in) plus the build files to `dest`."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    rules = _dockerignore_rules(REPO / ".dockerignore")
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(REPO).as_posix()
            if rel in CONTEXT_FILES or _in_context(rel, rules):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest / rel)
    return dest


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", ref], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def bake(context: Path, tag: str, no_cache: bool = False) -> Build:
    cmd = [
        "docker",
        "buildx",
        "bake",
        "--progress=plain",
        "-f",
        "docker-bake.hcl",
        "--set",
        f"openpi-standin.tags={tag}",
    ]
    if no_cache:
        cmd.append("--no-cache")
    cmd.append("openpi-standin")
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=context, capture_output=True, text=True, errors="replace", timeout=1800)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise BuildError(f"docker buildx bake failed ({' '.join(cmd)}):\n" + "\n".join(proc.stderr.splitlines()[-30:]))
    build = parse_progress(proc.stderr + proc.stdout)
    build.seconds = seconds
    build.image_id = image_id(tag) or ""
    return build


def parse_progress(text: str) -> Build:
    """Count our stage's steps and which were cached, from `--progress=plain` output."""
    names: dict[str, str] = {}
    cached: set[str] = set()
    done: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"#(\d+) \[openpi\s+(\d+)/(\d+)\] (.*)", line)
        if m and not m.group(4).startswith("FROM"):
            names.setdefault(m.group(1), f"{m.group(2)}/{m.group(3)} {m.group(4)}")
            continue
        m = re.match(r"#(\d+) CACHED", line)
        if m:
            cached.add(m.group(1))
            continue
        m = re.match(r"#(\d+) DONE ([\d.]+)s", line)
        if m:
            done[m.group(1)] = float(m.group(2))
    executed = [n for n in names if n not in cached]
    exports = [float(x) for x in re.findall(r"exporting layers ([\d.]+)s done", text)]
    return Build(
        0.0, len(names), len(executed), {names[n][:90]: done.get(n, 0.0) for n in executed}, export_seconds=sum(exports)
    )


def history(ref: str) -> list[Layer]:
    proc = subprocess.run(
        ["docker", "history", "--no-trunc", "--human=false", "--format", "{{.Size}}\t{{.CreatedBy}}", ref],
        capture_output=True,
        text=True,
        check=True,
    )
    layers = []
    for line in proc.stdout.splitlines():
        size, _, created = line.partition("\t")
        layers.append(Layer(int(size or 0), created))
    return layers  # newest first


def _short(created_by: str) -> str:
    text = re.sub(r"^RUN \|\d+ (\S+=\S+ )*", "RUN ", created_by)
    text = text.replace("/bin/sh -c ", "").replace(" # buildkit", "")
    text = re.sub(r"\s+", " ", text)
    return text[:110] + ("…" if len(text) > 110 else "")


def added(target: str, ref: str, base_label: str, base_ref: str) -> dict:
    mine, base = history(ref), history(base_ref)
    ours = mine[: len(mine) - len(base)]
    size = int(
        subprocess.run(
            ["docker", "image", "inspect", "-f", "{{.Size}}", ref], capture_output=True, text=True, check=True
        ).stdout
    )
    base_size = int(
        subprocess.run(
            ["docker", "image", "inspect", "-f", "{{.Size}}", base_ref], capture_output=True, text=True, check=True
        ).stdout
    )
    return {
        "target": target,
        "base": base_label,
        "bytes": size - base_size,
        "image_bytes": size,
        "layers": [Layer(layer.size, _short(layer.created_by), layer.created_by) for layer in reversed(ours)],
    }


def package_layer_last(layers: list[Layer]) -> tuple[bool, str]:
    """The last layer that changes files must be the launcher's pip install, and small (< 5 MB)."""
    fs = [layer for layer in layers if layer.size > 0 or re.match(r"(RUN|COPY|ADD)\b", layer.created_by)]
    if not fs:
        return False, "no file-system layers found"
    last = fs[-1]
    ok = "pip install" in (last.full or last.created_by) and last.size < 5_000_000
    return ok, f"`{last.created_by[:60]}…` ({last.size} bytes)"


def rootfs_ref() -> str | None:
    proc = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", ROOTFS_REPO], capture_output=True, text=True
    )
    refs = proc.stdout.split()
    return refs[0] if refs else None


def compare(context: Path, reps: int, log: Callable[[str], None], created: list[str]) -> Result:
    """`created` collects the tags and image IDs this makes (for clean-up, even after a failure)."""
    created += [f"{TAG}:bench-cold", f"{TAG}:bench-edit"]
    builds: dict[str, list[Build]] = {"cold": [], "one-line": [], "no-change": []}
    init = context / "entrypoint" / "__init__.py"
    original = init.read_text()
    try:
        for rep in range(reps):
            init.write_text(original)
            b = bake(context, f"{TAG}:bench-cold", no_cache=True)
            builds["cold"].append(b)
            created.append(b.image_id)
            b = bake(context, f"{TAG}:bench-cold")  # the same context again: primes the cache the edit build uses
            builds["no-change"].append(b)
            init.write_text(original + f"# scripts/bench rebuild probe {uuid.uuid4().hex}\n")
            b = bake(context, f"{TAG}:bench-edit")
            builds["one-line"].append(b)
            created.append(b.image_id)
            log(
                f"image rep {rep + 1}/{reps}: "
                + ", ".join(
                    f"{kind} {builds[kind][-1].seconds:.1f} s "
                    f"({builds[kind][-1].executed}/{builds[kind][-1].steps} steps run)"
                    for kind in ("cold", "no-change", "one-line")
                )
            )
    finally:
        init.write_text(original)
    ref = f"{TAG}:bench-edit"
    rows = [added("openpi-standin (the Dockerfile's `openpi` stage)", ref, STANDIN_BASE, STANDIN_BASE)]
    root = rootfs_ref()
    if root:
        rows.append(added("standin-base (tests/standin/Dockerfile)", STANDIN_BASE, root, root))
    return Result(rows, builds, package_layer_last(rows[0]["layers"]))


def remove_images(refs: list[str], keep: set[str]) -> None:
    """Untag our own `…:bench*` tags (forced: a container of someone else's may run the same image, which then
    only loses this tag), then remove the image IDs we built, unforced (an ID in use stays)."""
    for ref in refs:
        if not ref or ref in keep:
            continue
        if ref.startswith(f"{TAG}:bench"):
            subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True)
        elif ref.startswith("sha256:"):
            subprocess.run(["docker", "image", "rm", ref], capture_output=True)
