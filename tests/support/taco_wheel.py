"""Stand-in taco_train wheels (tests only): a real `.whl` zip with the documented layout.

`taco_train/__init__.py`, `taco_train/prelude/sitecustomize.py` (see `taco_prelude.py`) and a dist-info with
METADATA, WHEEL (the caller's tag) and RECORD, so pip installs it like the real one.

    python3 -m tests.support.taco_wheel OUTDIR [--tag TAG] [--version VERSION]   # prints the wheel's path
    python3 -m tests.support.taco_wheel --print-tag                               # this interpreter's tag
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import platform
import sys
import zipfile
from pathlib import Path

from packaging.tags import parse_tag, sys_tags

PRELUDE = Path(__file__).with_name("taco_prelude.py")
VERSION = "0.1.0+standin"
CP312 = "cp312-cp312-linux_x86_64"  # the real wheel's tag


def interpreter_tag() -> str:
    """This interpreter's tag in the real wheel's style (`cp313-cp313-linux_x86_64`), else its most specific tag."""
    tags = list(sys_tags())
    plain = f"linux_{platform.machine()}"
    return str(next((t for t in tags if t.platform == plain), tags[0]))


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(
    outdir: Path,
    tag: str | None = None,
    version: str = VERSION,
    sitecustomize: str | None = None,
    payload_bytes: int = 0,
) -> Path:
    """Write `taco_train-<version>-<tag>.whl` into `outdir` and return its path. `sitecustomize` replaces the prelude;
    `payload_bytes` adds `taco_train/_payload.bin` of random bytes, to give the wheel a realistic size (benchmarks)."""
    tag = tag or interpreter_tag()
    dist_info = f"taco_train-{version}.dist-info"
    files = {
        "taco_train/__init__.py": f'"""STAND-IN taco_train (tests only)."""\n__version__ = "{version}"\n',
        "taco_train/prelude/sitecustomize.py": sitecustomize
        if sitecustomize is not None
        else PRELUDE.read_text(encoding="utf-8"),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: taco_train\nVersion: {version}\nSummary: stand-in (tests only)\n"
        ),
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests.support.taco_wheel\nRoot-Is-Purelib: false\n"
        + "".join(f"Tag: {t}\n" for t in sorted(str(t) for t in parse_tag(tag))),
    }
    blobs = {name: text.encode("utf-8") for name, text in files.items()}
    if payload_bytes:
        blobs["taco_train/_payload.bin"] = os.urandom(payload_bytes)
    record = (
        "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in blobs.items())
        + f"{dist_info}/RECORD,,\n"
    )
    blobs[f"{dist_info}/RECORD"] = record.encode("utf-8")
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"taco_train-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in blobs.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.support.taco_wheel", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", nargs="?", type=Path, help="folder to write the wheel into")
    parser.add_argument(
        "--tag", help=f"wheel tag (default: this interpreter's, e.g. {interpreter_tag()}; the real one is {CP312})"
    )
    parser.add_argument("--version", default=VERSION)
    parser.add_argument("--print-tag", action="store_true", help="print this interpreter's tag and exit")
    args = parser.parse_args(argv)
    if args.print_tag:
        print(interpreter_tag())
        return 0
    if args.outdir is None:
        parser.error("OUTDIR is required")
    print(build_wheel(args.outdir, args.tag, args.version))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def pip_install_argv(staging: str, wheel: str) -> list[str]:
    """What the launcher runs after its interpreter to install the TACO wheel into `staging`, offline and quiet."""
    return [
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-cache-dir",
        "--no-index",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
        "--target",
        staging,
        wheel,
    ]
