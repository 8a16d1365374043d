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

from entrypoint.core.messages import Text
from entrypoint.net.download import sha256_of
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


class BakeError(Exception):
    def __init__(self, what: Text, fix: Text) -> None:
        super().__init__(what.en)
        self.what, self.fix = what, fix


def bake(wheel_dir: Path, prefix: Path, tags: list[Tag] | None = None, python: str = sys.executable) -> str:
    """Install the one wheel in `wheel_dir` into `prefix`; returns the line to print. Raises `BakeError`."""
    tags = interpreter_tags() if tags is None else tags
    wheels = sorted(p for p in wheel_dir.glob("*.whl") if p.is_file())
    if len(wheels) != 1:
        found = ", ".join(p.name for p in wheels) or "nothing"
        raise BakeError(
            Text(
                f"the build context 'taco' must hold exactly one taco_train-*.whl; it holds {found}",
                f"构建上下文 'taco' 中必须恰好有一个 taco_train-*.whl;实际为 {found}",
            ),
            Text(
                "Put the wheel alone in the folder that the bake variable TACO_WHEEL_DIR names (default ./taco-wheel).",
                "请把该 wheel 单独放在 bake 变量 TACO_WHEEL_DIR 指定的目录中(默认 ./taco-wheel)。",
            ),
        )
    wheel_path = wheels[0]
    try:
        wheel = parse_wheel_name(wheel_path.name)
    except ValueError as error:
        raise BakeError(
            Text(
                f"{wheel_path.name} is not a valid wheel file name: {error}",
                f"{wheel_path.name} 不是合法的 wheel 文件名:{error}",
            ),
            Text("Keep the wheel's original file name.", "请保留 wheel 的原始文件名。"),
        ) from None
    if wheel.name != DIST_NAME:
        raise BakeError(
            Text(
                f"{wheel.file} is a {wheel.name} wheel, not taco_train",
                f"{wheel.file} 是 {wheel.name} 的 wheel,而不是 taco_train",
            ),
            Text("Put the taco_train wheel in TACO_WHEEL_DIR.", "请把 taco_train wheel 放入 TACO_WHEEL_DIR。"),
        )
    if not fits(wheel, tags):
        raise BakeError(
            Text(
                f"{wheel.file} is tagged {wheel.tag_text}, but this image's python3 is {describe_interpreter(tags)}: it cannot load it",
                f"{wheel.file} 的标签为 {wheel.tag_text},而本镜像的 python3 为 {describe_interpreter(tags)}:无法加载",
            ),
            Text(
                "Use a taco_train wheel built for this image's Python (cp312 for the VLA base), or build the openpi target without TACO.",
                "请使用为本镜像 Python 构建的 taco_train wheel(VLA 基础镜像为 cp312),或构建不含 TACO 的 openpi 目标。",
            ),
        )
    ok, output = install(wheel_path, prefix, dict(os.environ), python)
    if not ok:
        raise BakeError(
            Text(f"pip could not install {wheel.file}: {output}", f"pip 无法安装 {wheel.file}:{output}"),
            Text(
                "Check that the wheel file is intact (compare its sha256 with the published one).",
                "请确认 wheel 文件完好(与发布的 sha256 比对)。",
            ),
        )
    if not (prelude_dir(prefix) / "sitecustomize.py").is_file():
        raise BakeError(
            Text(
                f"{wheel.file} has no taco_train/prelude/sitecustomize.py",
                f"{wheel.file} 中没有 taco_train/prelude/sitecustomize.py",
            ),
            Text(
                "Use the taco_train wheel: its prelude is what activates the features.",
                "请使用 taco_train wheel:其 prelude 负责启用各项特性。",
            ),
        )
    digest = sha256_of(wheel_path)
    write_record(prefix, wheel.file, digest)
    size = tree_size(prefix)
    return (
        f"TACO baked: {wheel.file} (sha256 {digest}) into {prefix}: {size} bytes ({size / 2**20:.1f} MiB) in this layer"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python3 -m entrypoint.taco.bake WHEEL_DIR PREFIX", file=sys.stderr)
        return 2
    try:
        print(bake(Path(args[0]), Path(args[1])))
    except BakeError as error:
        print(
            f"error: {error.what.en}\n  fix: {error.fix.en}\n错误:{error.what.zh}\n解决:{error.fix.zh}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
