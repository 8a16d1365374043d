"""What the weights, video and tokenizer checks say, word for word: the base weights folder (missing, a JAX
checkpoint, config.json only warned about, model.safetensors refused with the reason and the right fix, the
model's signature with the job's config and `--model` flags), each way a safetensors header is refused as the
safetensors library refuses it (dtype, shape, data_offsets, header length and its bound, nesting, truncation,
trailing bytes), an mp4's top-level box walk (64-bit sizes, garbled sizes, a missing `moov`, a video gone during
the walk), where the PaliGemma tokenizer is looked for and what is said when it is staged, missing, broken, or
downloadable (gcsfs importable, storage endpoint reachable), and what `inspect_assets` reports and seals.

Messages are compared whole, in English and Chinese: one assertion pins the id, the status, the wording, the path
named and the fix.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from safetensors import SafetensorError, safe_open

from entrypoint.core.findings import Finding
from entrypoint.core.messages import Text
from entrypoint.core.settings import load_settings
from entrypoint.inspect import assets, tokenizer_fetch
from entrypoint.inspect.assets import (
    InvalidAsset,
    check_dataset_folder,
    check_safetensors,
    check_weights,
    find_tokenizer,
    inspect_assets,
)
from entrypoint.inspect.seal import Seal, SealRole, fingerprint
from tests.support.synthetic import MP4_FTYP, make_dataset, mp4_box, mp4_bytes, write_safetensors
from tests.unit.conftest import World

WEIGHTS = "checkpoints/pi05_base_pytorch"
TOKENIZER = "big_vision/paligemma_tokenizer.model"
LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7e8e6f1c2b3a4958677685746352413f2e1d0c9b8a79685746352413f2e1d0\n"
    "size 4264023\n"
)
PI05 = "pi05 (gemma_2b + gemma_300m, 32-dim actions)"
PI05_ZH = "pi05(gemma_2b + gemma_300m,32 维动作)"


def settings_for(world: World, **env: str):
    return load_settings({**world.env, **env})


def shape(finding: Finding) -> tuple[str, str, Text, Text | None, str | None]:
    return finding.id, finding.status.value, finding.message, finding.hint, finding.where


def weights_fix(weights: Path) -> Text:
    return Text(
        f"Copy the converted PyTorch weights (config.json, model.safetensors) to {weights} again, or set VLA_WEIGHTS.",
        f"请重新把转换后的 PyTorch 权重(config.json、model.safetensors)复制到 {weights},或设置 VLA_WEIGHTS。",
    )


def lfs_fix(folder: Path) -> Text:
    return Text(
        f"Run `git lfs install && git lfs pull` in {folder}, or download the real files instead of cloning without "
        "git-lfs.",
        f"请在 {folder} 中运行 `git lfs install && git lfs pull`,或直接下载真实文件,不要在未启用 git-lfs 时克隆。",
    )


LFS_TEXT = Text(
    "the file is a git-lfs pointer (about 130 bytes of text), not the real content: it was cloned without git-lfs",
    "该文件是 git-lfs 指针(约 130 字节的文本),不是实际内容:克隆时没有启用 git-lfs",
)


def problem(path: Path, text: Text) -> Text:
    return Text(f"{path}: {text.en}", f"{path}:{text.zh}")


def complete(weights: Path, gigabytes: str) -> tuple[str, str, Text, None, str]:
    text = Text(f"base weights complete ({gigabytes} GB) in {weights}", f"基座权重完整({gigabytes} GB):{weights}")
    return "assets.weights", "pass", text, None, str(weights)


# ---- the base weights folder ----


def test_a_missing_weights_folder_fails_naming_it_and_the_fix(tmp_path: Path) -> None:
    weights = tmp_path / "pi05_base_pytorch"
    findings, size = check_weights(weights)
    what = Text(f"the base weights folder {weights} does not exist", f"基座权重目录 {weights} 不存在")
    assert [shape(f) for f in findings] == [("assets.weights", "fail", what, weights_fix(weights), str(weights))]
    assert size is None


def test_a_jax_checkpoint_is_told_to_convert_with_the_jobs_config(tmp_path: Path) -> None:
    weights = tmp_path / "pi05_base"
    (weights / "params").mkdir(parents=True)
    (weights / "_CHECKPOINT_METADATA").write_text("{}")
    (finding,), size = check_weights(weights, "pi05_libero")
    assert finding.id == "assets.weights" and finding.status.value == "fail" and size is None
    assert f"--checkpoint_dir {weights} --config_name pi05_libero --output_path {tmp_path}/pi05_base_pytorch" in (
        finding.hint.en
    )


def test_a_whole_file_passes_with_its_size_in_gigabytes(tmp_path: Path) -> None:
    """1.005000001 GB is shown as 1.01 GB: the size is divided by exactly 10**9."""
    weights = tmp_path / "weights"
    model = weights / "model.safetensors"
    write_safetensors(model, 1_005_000_001, sparse=True)
    write_safetensors(model, 1_005_000_001 - (model.stat().st_size - 1_005_000_001), sparse=True)
    assert model.stat().st_size == 1_005_000_001
    (weights / "config.json").write_text("{}")
    findings, size = check_weights(weights)
    assert [shape(f) for f in findings] == [complete(weights, "1.01")] and size == 1_005_000_001


@pytest.mark.parametrize("how", ["not-an-object", "lfs-pointer"])
def test_a_config_json_problem_is_a_warning_beside_the_pass(tmp_path: Path, how: str) -> None:
    weights = tmp_path / "weights"
    write_safetensors(weights / "model.safetensors", 64)
    config = weights / "config.json"
    if how == "lfs-pointer":
        config.write_text(LFS_POINTER)
        why, fix = LFS_TEXT, lfs_fix(weights)
    else:
        config.write_text("[1, 2]")
        why = Text("it is not a JSON object", "不是 JSON 对象")
        fix = Text(
            f"To keep the weights folder whole, copy config.json from the converted checkpoint to {weights} again.",
            f"如需保持权重目录完整,请把转换所得检查点中的 config.json 重新复制到 {weights}。",
        )
    what = Text(
        f"{config}: {why.en}; openpi's trainer reads only model.safetensors, so training is not affected",
        f"{config}:{why.zh};openpi 训练脚本只读取 model.safetensors,训练不受影响",
    )
    findings, size = check_weights(weights)
    assert [shape(f) for f in findings] == [
        complete(weights, "0.00"),
        ("assets.weights-config", "warn", what, fix, str(config)),
    ]
    assert size == (weights / "model.safetensors").stat().st_size


@pytest.mark.parametrize("how", ["missing", "lfs-pointer", "empty"])
def test_a_refused_model_fails_with_the_reason_and_the_fix_that_applies(tmp_path: Path, how: str) -> None:
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    model = weights / "model.safetensors"
    why, fix = Text("the file is missing", "文件不存在"), weights_fix(weights)
    if how == "lfs-pointer":
        model.write_text(LFS_POINTER)
        why, fix = LFS_TEXT, lfs_fix(weights)
    elif how == "empty":
        model.write_bytes(b"")
        why = Text(
            "the file is 0 bytes, too short for a safetensors header", "文件只有 0 字节,不足以容纳 safetensors 头"
        )
    findings, size = check_weights(weights)
    assert [shape(f) for f in findings] == [("assets.weights-model", "fail", problem(model, why), fix, str(model))]
    assert size is None


def test_the_model_is_compared_with_the_jobs_config_and_model_flags(world: World) -> None:
    weights = world.assets / WEIGHTS
    model = weights / "model.safetensors"
    findings, size = check_weights(weights)  # no config: nothing to compare
    assert [shape(f) for f in findings] == [complete(weights, "7.47")] and size == model.stat().st_size
    findings, _ = check_weights(weights, "pi05_libero")
    assert [shape(f)[:2] for f in findings] == [("assets.weights", "pass"), ("assets.weights-signature", "pass")]
    assert findings[1].where == str(model) and findings[1].message.en.startswith(f"{model} fits {PI05}: its ")
    assert findings[1].message.zh.startswith(f"{model} 与 {PI05_ZH} 相符:")
    findings, _ = check_weights(weights, "pi05_libero", ("--model.action-dim=8",))
    eight = "pi05 (gemma_2b + gemma_300m, 8-dim actions)"
    assert findings[1].message == Text(
        f"tensor names and shapes in {model} not compared: no signature of {eight} ships with the launcher",
        f"未比对 {model} 中的张量名称和形状:启动器没有随附 pi05(gemma_2b + gemma_300m,8 维动作) 的签名",
    )


def test_weights_none_says_where_it_was_set_and_what_the_trainer_gets(world: World) -> None:
    report = inspect_assets(settings_for(world, VLA_WEIGHTS="none"), world.env)
    assert [f.id for f in report.findings] == [
        "assets.norm-stats",
        "assets.weights",
        "assets.dataset",
        "assets.tokenizer",
    ]
    what = Text(
        "no base weights: weights is 'none' (VLA_WEIGHTS), so pi05_libero starts from random initialisation (the "
        "trainer gets --pytorch-weight-path None, which also replaces the config's own weight path)",
        "不使用基座权重:weights 为 'none'(VLA_WEIGHTS),因此 pi05_libero 从随机初始化开始训练(训练脚本收到 "
        "--pytorch-weight-path None,它也会替换该配置自带的权重路径)",
    )
    assert shape(report.findings[1]) == ("assets.weights", "pass", what, None, "VLA_WEIGHTS")
    assert report.weights_bytes is None


# ---- safetensors headers, refused as the library refuses them ----


def header_file(path: Path, header: dict[str, object], body: bytes) -> Path:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return path


def refusal(path: Path) -> Text:
    with pytest.raises(InvalidAsset) as caught:
        check_safetensors(path)
    return caught.value.text


def library_accepts(path: Path) -> bool:
    try:
        with safe_open(str(path), "np") as opened:
            return bool(list(opened.keys()))
    except SafetensorError:
        return False


def u8(offsets: object = (0, 4), shape: object = (4,), dtype: object = "U8") -> dict[str, object]:
    return {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape, "data_offsets": offsets}


def offsets_text(name: str) -> Text:
    return Text(
        f"tensor '{name}' has no valid data_offsets (corrupt header)", f"张量 '{name}' 的 data_offsets 无效(头损坏)"
    )


def shape_text(name: str) -> Text:
    return Text(
        f"tensor '{name}' has no valid shape (a list of sizes whose product fits 64 bits)",
        f"张量 '{name}' 的 shape 无效(应为乘积不超过 64 位的尺寸列表)",
    )


def dtype_text(name: str, dtype: str) -> Text:
    return Text(
        f"tensor '{name}' has the dtype {dtype}, which the safetensors loader does not know",
        f"张量 '{name}' 的 dtype {dtype} 不是 safetensors 加载器认识的类型",
    )


@pytest.mark.parametrize(
    "entry, said",
    [
        (5, offsets_text("w")),
        (u8(dtype="F17"), dtype_text("w", "F17")),
        (u8(dtype=["U8"]), dtype_text("w", "['U8']")),
        (u8(shape=[-1]), shape_text("w")),
        (u8(shape=[4.0]), shape_text("w")),
        (u8(shape="4"), shape_text("w")),
        (u8(shape=[2**40, 2**40, 0], offsets=[0, 0]), shape_text("w")),
        (u8(dtype="F32", shape=[2**62], offsets=[0, 4]), shape_text("w")),
        ({"dtype": "U8", "shape": [4]}, offsets_text("w")),
        (u8(offsets=[0, 4, 8]), offsets_text("w")),
        (u8(offsets=[0, 4.0]), offsets_text("w")),
    ],
    ids=[
        "entry-not-object",
        "unknown-dtype",
        "dtype-not-a-string",
        "negative-size",
        "float-size",
        "shape-not-a-list",
        "shape-overflows-on-the-way",
        "bytes-overflow-64-bits",
        "no-offsets",
        "three-offsets",
        "float-offset",
    ],
)
def test_a_header_entry_the_library_refuses_is_named_with_why(tmp_path: Path, entry: object, said: Text) -> None:
    path = header_file(tmp_path / "model.safetensors", {"w": entry}, bytes(4))
    assert not library_accepts(path)
    assert refusal(path) == said


def test_a_size_of_2_to_the_64_minus_1_times_0_is_an_empty_tensor(tmp_path: Path) -> None:
    """The library multiplies the sizes one by one, each product checked against 64 bits: 2**64 - 1 fits, then 0."""
    header = {"e": u8(shape=[2**64 - 1, 0], offsets=[0, 0]), "w": u8()}
    path = header_file(tmp_path / "model.safetensors", header, bytes(4))
    assert library_accepts(path)
    assert check_safetensors(path) == path.stat().st_size


@pytest.mark.parametrize(
    "data, said",
    [
        (struct.pack("<Q", 2), (2, 8)),
        (struct.pack("<Q", 0) + b"{}", (0, 10)),
        (struct.pack("<Q", 100) + b'{"a": 1}', (100, 16)),
    ],
    ids=["8-bytes", "zero-length", "past-the-end"],
)
def test_a_header_length_that_does_not_fit_is_said_with_both_numbers(
    tmp_path: Path, data: bytes, said: tuple[int, int]
) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    length, size = said
    assert refusal(path) == Text(
        f"the header length {length} does not fit a {size}-byte file (truncated or not safetensors)",
        f"头长度 {length} 与 {size} 字节的文件不符(文件被截断或不是 safetensors)",
    )


def test_the_header_bound_is_inclusive_as_the_librarys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = header_file(tmp_path / "model.safetensors", {"w": u8()}, bytes(4))
    length = struct.unpack_from("<Q", path.read_bytes())[0]
    monkeypatch.setattr(assets, "SAFETENSORS_HEADER_LIMIT", length)
    assert check_safetensors(path) == path.stat().st_size
    monkeypatch.setattr(assets, "SAFETENSORS_HEADER_LIMIT", length - 1)
    assert refusal(path).en.startswith(f"the header length {length} does not fit")


def test_a_header_nested_too_deeply_is_said_so(tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(deep)) + deep)
    assert refusal(path) == Text("the JSON is nested too deeply to read", "JSON 嵌套层数过深,无法读取")


def test_truncated_and_trailing_bytes_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, 64)
    needed = path.stat().st_size
    os.truncate(path, needed - 3)
    assert refusal(path) == Text(
        f"the file is truncated: {needed - 3} bytes but its header needs {needed}",
        f"文件被截断:实际 {needed - 3} 字节,头部声明需要 {needed} 字节",
    )
    os.truncate(path, needed + 16)
    assert refusal(path) == Text(
        f"the file has 16 bytes after its last tensor ({needed + 16} bytes, its header accounts for {needed}): the "
        "safetensors loader refuses it",
        f"文件在最后一个张量之后多出 16 字节(实际 {needed + 16} 字节,头部只说明了 {needed} 字节):"
        "safetensors 加载器会拒绝",
    )


# ---- mp4 box walk ----

TOP = "observation.images.top"


def one_video(tmp_path: Path, data: bytes) -> tuple[Path, str]:
    """A 3-episode dataset with one video key whose episode 2 video holds `data`; (root, that video's path)."""
    root = make_dataset(tmp_path / "ds", episodes=3, video_keys=(TOP,))
    relative = f"videos/chunk-000/{TOP}/episode_000002.mp4"
    (root / relative).write_bytes(data)
    return root, relative


def broken(root: Path, relative: str, why: Text) -> tuple[str, str, Text, Text, str]:
    what = Text(
        f"1 of 6 episode files under {root} are not what their names claim: {relative} ({why.en})",
        f"{root} 下 6 个剧集文件中有 1 个内容与文件名不符:{relative}({why.zh})",
    )
    fix = Text(
        f"Download and unpack the dataset so that {root} is complete (see the README's asset steps).",
        f"请下载并解压数据集,使 {root} 完整(参见 README 的资源准备步骤)。",
    )
    return "assets.dataset-content", "fail", what, fix, str(root)


def cut(offset: int, size: int) -> Text:
    return Text(
        f"cut short: its boxes stop adding up at byte {offset} of {size} (an interrupted download or copy)",
        f"文件不完整:其 box 结构在共 {size} 字节中的第 {offset} 字节处对不上(下载或复制被中断)",
    )


def test_a_64_bit_box_size_is_read_in_the_first_bytes(tmp_path: Path) -> None:
    video = MP4_FTYP + mp4_box(b"mdat", bytes(16), large=True) + mp4_box(b"moov", bytes(8))
    root, _ = one_video(tmp_path, video)
    for path in (root / "videos").rglob("*.mp4"):
        path.write_bytes(video)
    findings, whole, _ = check_dataset_folder(root)
    assert whole and [shape(f)[:2] for f in findings] == [("assets.dataset", "pass")]


def test_a_64_bit_box_size_is_read_to_its_first_byte(tmp_path: Path) -> None:
    """A size of 2**56 + 40 runs past the end of the file; its low 7 bytes alone would say 40, and fit."""
    large = (1).to_bytes(4, "big") + b"mdat" + (2**56 + 40).to_bytes(8, "big") + bytes(24)
    video = MP4_FTYP + large + mp4_box(b"moov", bytes(8))
    root, relative = one_video(tmp_path, video)
    findings, whole, _ = check_dataset_folder(root)
    assert not whole and [shape(f) for f in findings] == [broken(root, relative, cut(24, len(video)))]


def test_a_box_smaller_than_its_own_header_is_where_the_boxes_stop_adding_up(tmp_path: Path) -> None:
    """A box of 4 bytes cannot hold its 8-byte header: the walk stops there, even if boxes 4 bytes on would fit."""
    video = MP4_FTYP + (4).to_bytes(4, "big") + mp4_box(b"mdat", bytes(16)) + mp4_box(b"moov", bytes(8))
    root, relative = one_video(tmp_path, video)
    findings, whole, _ = check_dataset_folder(root)
    assert not whole and [shape(f) for f in findings] == [broken(root, relative, cut(24, len(video)))]


def test_a_video_without_its_moov_box_says_which_box_and_its_size(tmp_path: Path) -> None:
    video = MP4_FTYP + mp4_box(b"mdat", bytes(16))
    root, relative = one_video(tmp_path, video)
    why = Text(
        "cut short: its 48 bytes end without the moov box every video has (an interrupted download or copy)",
        "文件不完整:全部 48 字节中没有视频必有的 moov box(下载或复制被中断)",
    )
    findings, whole, _ = check_dataset_folder(root)
    assert not whole and [shape(f) for f in findings] == [broken(root, relative, why)]


def test_a_video_gone_before_its_boxes_are_walked_is_named_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first 64 bytes were read; the boxes past them need the file again, and it was removed in between."""
    video = mp4_bytes(body=bytes(100))  # moov's header lies past the first 64 bytes
    root, relative = one_video(tmp_path, video)
    real = assets.read_ends_of

    def then_removed(paths, head, tail=0):
        ends = real(paths, head, tail)
        if f"{root}/{relative}" in paths:
            (root / relative).unlink()
        return ends

    monkeypatch.setattr(assets, "read_ends_of", then_removed)
    findings, whole, _ = check_dataset_folder(root)
    assert not whole and [shape(f) for f in findings] == [
        broken(root, relative, Text("the file is missing", "文件不存在"))
    ]


# ---- the tokenizer ----


def staged(world: World) -> Path:
    return world.assets / "cache/openpi" / TOKENIZER


def in_home(world: World) -> Path:
    return Path(world.env["HOME"]) / ".cache/openpi" / TOKENIZER


def tokenizer_findings(report) -> list[tuple[str, str, Text, Text | None, str | None]]:
    return [shape(f) for f in report.findings if f.id.startswith("assets.tokenizer")]


def test_a_staged_tokenizer_passes_naming_its_home(world: World) -> None:
    report = inspect_assets(settings_for(world), world.env)
    home = world.assets / "cache/openpi"
    what = Text(f"PaliGemma tokenizer staged in {home}", f"PaliGemma 分词器已就位:{home}")
    assert tokenizer_findings(report) == [("assets.tokenizer", "pass", what, None, str(staged(world)))]
    assert report.tokenizer_home == home


def missing_warning(places: list[Path]) -> tuple[str, str, Text, Text, str]:
    listed = ", ".join(str(p) for p in places)
    target = places[-1]
    what = Text(
        f"the PaliGemma tokenizer is not staged (looked at {listed}); openpi will try to download it",
        f"PaliGemma 分词器未就位(已查找 {listed});openpi 将尝试联网下载",
    )
    fix = Text(
        f"Copy paligemma_tokenizer.model to {target} so offline jobs do not hang.",
        f"请把 paligemma_tokenizer.model 复制到 {target},避免离线任务卡住。",
    )
    return "assets.tokenizer", "warn", what, fix, str(target)


def test_a_tokenizer_missing_everywhere_is_a_warning_listing_each_place(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: False)  # were it asked, no network: no gcsfs
    staged(world).unlink()
    report = inspect_assets(settings_for(world), world.env)  # `check --assets`: no download verdict by default
    assert tokenizer_findings(report) == [missing_warning([in_home(world), staged(world)])]
    assert report.tokenizer_home is None


def test_openpi_data_home_is_the_only_place_looked_at(world: World, tmp_path: Path) -> None:
    data_home = tmp_path / "data-home"
    data_home.mkdir()
    env = {**world.env, "OPENPI_DATA_HOME": str(data_home)}
    report = inspect_assets(settings_for(world), env)  # the staged copy under the assets root is not where it looks
    assert tokenizer_findings(report) == [missing_warning([data_home / TOKENIZER])]
    (data_home / TOKENIZER).parent.mkdir(parents=True)
    (data_home / TOKENIZER).write_bytes(b"\x0a\x05stand-in tokenizer")
    report = inspect_assets(settings_for(world), env)
    assert report.tokenizer_home == data_home and report.findings[-1].where == str(data_home / TOKENIZER)


def test_without_home_openpi_looks_under_root(world: World) -> None:
    env = {k: v for k, v in world.env.items() if k != "HOME"}
    _, looked = find_tokenizer(load_settings(env), env)
    assert looked == [Path("/root/.cache/openpi"), world.assets / "cache/openpi"]


def broken_tokenizer(path: Path, status: str, why: Text) -> tuple[str, str, Text, Text, str]:
    fix = Text(
        f"Replace {path} with the real paligemma_tokenizer.model, or remove it so that openpi downloads it.",
        f"请用真实的 paligemma_tokenizer.model 替换 {path},或删除它以便 openpi 自行下载。",
    )
    return "assets.tokenizer", status, problem(path, why), fix, str(path)


def test_a_broken_copy_where_openpi_looks_fails(world: World) -> None:
    staged(world).unlink()
    in_home(world).parent.mkdir(parents=True)
    in_home(world).write_text(LFS_POINTER)
    report = inspect_assets(settings_for(world), world.env)
    assert tokenizer_findings(report) == [broken_tokenizer(in_home(world), "fail", LFS_TEXT)]
    assert report.tokenizer_home is None


def test_a_broken_staged_copy_openpi_would_not_read_is_a_warning(world: World) -> None:
    staged(world).write_bytes(b"")
    report = inspect_assets(settings_for(world), world.env)
    empty = Text("the file is empty", "文件为空")
    assert tokenizer_findings(report) == [broken_tokenizer(staged(world), "warn", empty)]


# ---- can openpi download it? ----


@pytest.fixture
def listening() -> Iterator[str]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


def stage_fix(target: Path) -> Text:
    return Text(
        f'Copy paligemma_tokenizer.model to {target}; the launcher then points openpi there (README, "Preparing the '
        'assets").',
        f"请把 paligemma_tokenizer.model 复制到 {target},启动器会让 openpi 从那里读取(见 README 准备资源一节)。",
    )


def download_verdict(world: World, env: dict[str, str], download: bool = True) -> list[tuple]:
    staged(world).unlink()
    report = inspect_assets(settings_for(world), {**world.env, **env}, download=download)
    found = tokenizer_findings(report)
    assert found[0] == missing_warning([in_home(world), staged(world)])
    return found[1:]


URL = "gs://big_vision/paligemma_tokenizer.model"


@pytest.mark.parametrize("python", [sys.executable, ""], ids=["its-path", "unknown"])
def test_without_gcsfs_the_download_fails_naming_this_python(
    world: World, monkeypatch: pytest.MonkeyPatch, python: str
) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: False)
    monkeypatch.setattr(sys, "executable", python)
    shown = python or "python3"
    what = Text(
        f"the PaliGemma tokenizer is not staged and openpi cannot download it: fetching {URL} needs the gcsfs "
        f"package, which this Python ({shown}) lacks; the trainer fails before its first step",
        f"PaliGemma 分词器未就位,openpi 也无法下载:获取 {URL} 需要 gcsfs 包,而当前 Python({shown})未安装;"
        "训练脚本会在第一步之前失败",
    )
    target = staged(world)
    assert download_verdict(world, {}) == [("assets.tokenizer-download", "fail", what, stage_fix(target), str(target))]


def test_an_endpoint_without_a_host_is_unreachable_saying_why(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: True)
    what = Text(
        f"the PaliGemma tokenizer is not staged and openpi cannot download it: :9, where {URL} comes from, is "
        "unreachable from this machine (STORAGE_EMULATOR_HOST names no host)",
        f"PaliGemma 分词器未就位,openpi 也无法下载:本机连不上 {URL} 所在的 :9(STORAGE_EMULATOR_HOST 中没有主机名)",
    )
    target = staged(world)
    assert download_verdict(world, {"STORAGE_EMULATOR_HOST": "http://:9"}) == [
        ("assets.tokenizer-download", "fail", what, stage_fix(target), str(target))
    ]


def test_an_endpoint_that_does_not_answer_in_time_is_a_warning(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: True)
    monkeypatch.setattr(tokenizer_fetch, "_lookup", lambda host, port: None)  # the name lookup timed out
    what = Text(
        "the PaliGemma tokenizer is not staged, and whether openpi can download it is unclear: storage.example:443 "
        "did not answer within 2 s",
        "PaliGemma 分词器未就位,openpi 能否下载尚不确定:storage.example:443 在 2 秒内没有应答",
    )
    target = staged(world)
    assert download_verdict(world, {"STORAGE_EMULATOR_HOST": "https://storage.example"}) == [
        ("assets.tokenizer-download", "warn", what, stage_fix(target), str(target))
    ]


def test_a_reachable_endpoint_with_gcsfs_passes(world: World, monkeypatch: pytest.MonkeyPatch, listening: str) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: True)
    what = Text(
        f"openpi can download the PaliGemma tokenizer from here: gcsfs is installed and {listening} accepts "
        "connections",
        f"openpi 可以在本机下载 PaliGemma 分词器:已安装 gcsfs,{listening} 可以连接",
    )
    target = staged(world)
    env = {"STORAGE_EMULATOR_HOST": listening}
    assert download_verdict(world, env) == [("assets.tokenizer-download", "pass", what, None, str(target))]


def test_no_download_verdict_unless_asked(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizer_fetch, "gcsfs_present", lambda: False)
    assert download_verdict(world, {}, download=False) == []


# ---- inspect_assets: what it reports, with and without a seal ----


def test_every_check_of_a_complete_tree_reports_and_sizes(world: World) -> None:
    report = inspect_assets(settings_for(world), world.env)
    assert [shape(f)[:2] for f in report.findings] == [
        ("assets.norm-stats", "pass"),
        ("assets.weights", "pass"),
        ("assets.weights-signature", "pass"),
        ("assets.dataset", "pass"),
        ("assets.tokenizer", "pass"),
    ]
    assert report.weights_bytes == (world.assets / WEIGHTS / "model.safetensors").stat().st_size
    episodes = (world.assets / "datasets/physical-intelligence/libero/data").rglob("*.parquet")
    assert report.dataset_complete and report.dataset_bytes == sum(p.stat().st_size for p in episodes)


def test_an_unknown_config_looks_nothing_up_by_its_name(world: World) -> None:
    report = inspect_assets(settings_for(world), world.env, config_known=False)
    assert [f.id for f in report.findings] == ["assets.weights", "assets.dataset", "assets.tokenizer"]


def test_the_model_flags_of_the_job_reach_the_weights_check(world: World) -> None:
    report = inspect_assets(settings_for(world, VLA_EXTRA_ARGS="--model.action-dim=8"), world.env)
    (signature,) = [f for f in report.findings if f.id == "assets.weights-signature"]
    assert "8-dim actions" in signature.message.en and "not compared" in signature.message.en


def test_without_a_dataset_nothing_is_complete(world: World) -> None:
    settings = settings_for(world, VLA_TRAIN_CONFIG="debug_pi05", VLA_DATASET_REPO_ID="none", VLA_ASSET_ID="none")
    report = inspect_assets(settings, world.env)
    assert (report.dataset_complete, report.dataset_bytes, report.tokenizer_home) == (False, 0, None)


def test_node_0s_verdict_is_sealed_and_another_node_trusts_it(world: World, tmp_path: Path) -> None:
    settings = settings_for(world)
    dataset = world.assets / "datasets/physical-intelligence/libero"
    path, key = tmp_path / "seals" / "job.json", "0123456789abcdef0123456789abcdef"
    writer = Seal(SealRole.WRITE, path, key)
    node0 = inspect_assets(settings, world.env, seal=writer)
    (verdict,) = [f for f in node0.findings if f.id == "assets.dataset"]
    payload = writer.payload
    assert payload is not None and payload["fingerprint"] == fingerprint(dataset) is not None
    assert (payload["key"], payload["dataset"], payload["total_bytes"]) == (key, str(dataset), node0.dataset_bytes)
    assert payload["message"] == verdict.message.to_json()
    path.parent.mkdir()
    path.write_text(json.dumps({**payload, "written_at": time.time()}))

    reader = Seal(SealRole.READ, path, key)
    node1 = inspect_assets(settings, world.env, seal=reader, seal_wait_s=0.0, started_at=time.time())
    assert reader.trusted and node1.dataset_complete and node1.dataset_bytes == node0.dataset_bytes
    (trusted,) = [f for f in node1.findings if f.id == "assets.dataset"]
    assert trusted.status.value == "pass" and trusted.where == str(dataset)
    assert trusted.message.en.startswith(f"{verdict.message.en} (verified by node 0 ")
    assert f"this node trusted its seal {path})" in trusted.message.en


def test_without_a_seal_another_node_verifies_at_once(world: World, tmp_path: Path) -> None:
    reader = Seal(SealRole.READ, tmp_path / "seals" / "job.json", "0123456789abcdef0123456789abcdef")
    report = inspect_assets(settings_for(world), world.env, seal=reader)  # no wait unless asked
    assert reader.reason == "no seal from node 0" and not reader.trusted and report.dataset_complete
