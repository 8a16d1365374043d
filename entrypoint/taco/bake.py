"""Build time: bake the TACO wheel into the image (the Dockerfile's `openpi-taco` stage).

`python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX`: WHEEL_DIR (the bake context `taco`) must hold exactly one
`taco_train-*.whl` whose tags this python3 accepts. It is installed with `pip install --no-deps --no-cache-dir
--target PREFIX`, `PREFIX/WHEEL.json` records its file name and sha256, and the installed size is printed.
Anything else prints what is wrong and the fix (English and Chinese) and exits 1, failing the build.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.tags import Tag

from entrypoint.core.messages import Lang, Text, language, render
from entrypoint.net.source import sha256_of
from entrypoint.taco.messages import MESSAGES as M
from entrypoint.taco.plan import DIST_NAME, prelude_dir
from entrypoint.taco.wheel import (
    describe_interpreter,
    fits,
    install,
    interpreter_tags,
    parse_wheel_name,
    tree_size,
    write_record,
)

PIP_OUTPUT_CHARS = 4000  # of a failed pip's output, in the build log


class BakeError(Exception):
    def __init__(self, what: Text, fix: Text) -> None:
        super().__init__(what.en)
        self.what, self.fix = what, fix


def bake(wheel_dir: Path, prefix: Path, tags: list[Tag] | None = None, python: str = sys.executable) -> Text:
    """Install the one wheel in `wheel_dir` into `prefix`; returns the line to print. Raises `BakeError`."""
    tags = interpreter_tags() if tags is None else tags
    wheels = sorted(p for p in wheel_dir.glob("*.whl") if p.is_file())
    if len(wheels) != 1:
        found = ", ".join(p.name for p in wheels) if wheels else M("bake-nothing")
        raise BakeError(M("bake-count", found=found), M("bake-count-fix"))
    wheel_path = wheels[0]
    try:
        wheel = parse_wheel_name(wheel_path.name)
    except ValueError as error:
        raise BakeError(M("bake-bad-name", file=wheel_path.name, error=error), M("bake-bad-name-fix")) from None
    if wheel.name != DIST_NAME:
        raise BakeError(M("another-package", file=wheel.file, name=wheel.name), M("bake-another-package-fix"))
    if not fits(wheel, tags):
        interpreter = describe_interpreter(tags)
        raise BakeError(
            M("bake-wrong-python", file=wheel.file, wheel_tags=wheel.tag_text, interpreter=interpreter),
            M("bake-wrong-python-fix"),
        )
    why = install(wheel_path, prefix, dict(os.environ), python, output_chars=PIP_OUTPUT_CHARS)
    if why is not None:
        raise BakeError(M("bake-pip-failed", file=wheel.file, why=why), M("bake-pip-failed-fix"))
    if not (prelude_dir(prefix) / "sitecustomize.py").is_file():
        raise BakeError(M("bake-no-prelude", file=wheel.file), M("bake-no-prelude-fix"))
    digest = sha256_of(wheel_path)
    write_record(prefix, wheel.file, digest)
    size = tree_size(prefix)
    return M("baked", file=wheel.file, sha256=digest, prefix=prefix, size=size, mib=size / 2**20)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    lang = language()
    if len(args) != 2:
        print(render(M("bake-usage"), lang), file=sys.stderr)
        return 2
    try:
        print(render(bake(Path(args[0]), Path(args[1])), lang))
    except BakeError as error:
        print(render(M("bake-error", what=error.what, fix=error.fix), Lang.BOTH, indent=""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
