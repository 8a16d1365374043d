"""The `assets.norm-stats` finding, word for word: openpi's norm_stats.json judged on its own (readable, strict JSON,
the openpi layout) and against the dataset it will normalise (each key's length against the feature's last dimension
in meta/info.json, for the train configs whose data mapping is known).

Every case runs the asset check (`inspect_assets`) on an otherwise sound world and compares the whole finding: its
id, status, English and Chinese message, English and Chinese fix, and the path it names. Covered: files anyone may
have put there (missing, a folder, a dangling link, a link loop, a FIFO, a socket, a device, a git-lfs pointer, one
past the 32 MiB JSON bound), bytes that are not strict JSON (not UTF-8, a UTF-8 BOM, syntax errors, NaN/Infinity,
nesting past the recursion limit, an integer past Python's digit limit), the real openpi LIBERO file and a real
look-alike, and stats shorter than the data (a failure), of a single value (a warning) or longer (padded: fine).
The refusal wording for problems this machine cannot make as root (permission denied, a name too long, a file too
big, a system error) is checked on `refused_text` itself. The command line's exit code closes the loop.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from entrypoint.core.files import FileRefused, Problem
from entrypoint.core.findings import Finding, Status
from entrypoint.core.messages import Text
from entrypoint.core.settings import load_settings
from entrypoint.inspect.assets import inspect_assets, refused_text
from tests.support.synthetic import norm_stats
from tests.unit.conftest import World

REAL = Path(__file__).resolve().parents[1] / "support" / "real"
REAL_LIBERO = REAL / "norm_stats" / "pi05-lora-finetune-libero_norm_stats.json"
LOOK_ALIKE = REAL / "norm_stats" / "beta-vla_norm_stats.json"
NORM_STATS = "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
INFO = "datasets/physical-intelligence/libero/meta/info.json"
ID = "assets.norm-stats"


def norm_finding(world: World, **env: str) -> Finding:
    """The one norm-stats finding of the asset check with the world's settings plus `env`."""
    report = inspect_assets(load_settings({**world.env, **env}), world.env)
    (finding,) = [f for f in report.findings if f.id == ID]
    return finding


def download_fix(path: Path) -> Text:
    return Text(
        f"Download the dataset's norm_stats.json to {path} (it ships with the dataset; see the README).",
        f"请把数据集附带的 norm_stats.json 下载到 {path}(参见 README)。",
    )


def refusal(path: Path, en: str, zh: str, fix: Text | None = None) -> Finding:
    """The failure naming `path` with the problem `en`/`zh`, and the download fix unless another is given."""
    return Finding(ID, Status.FAIL, Text(f"{path}: {en}", f"{path}:{zh}"), fix or download_fix(path), str(path))


def recompute_fix(path: Path, config: str = "pi05_libero") -> Text:
    return Text(
        f"Recompute the norm stats from this dataset with openpi's scripts/compute_norm_stats.py --config-name "
        f"{config} and copy the norm_stats.json it writes to {path}.",
        f"请用 openpi 的 scripts/compute_norm_stats.py --config-name {config} 基于该数据集重新计算归一化统计量,"
        f"再把生成的 norm_stats.json 复制到 {path}。",
    )


def valid(path: Path) -> Finding:
    return Finding(ID, Status.PASS, Text(f"norm stats valid: {path}", f"归一化统计量有效:{path}"), None, str(path))


def write_stats(world: World, state: int, actions: int, relative: str = NORM_STATS) -> Path:
    path = world.assets / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(norm_stats(state, actions)))
    return path


# ---- sound files ----


def test_sound_norm_stats_pass_naming_the_file(world: World) -> None:
    assert norm_finding(world) == valid(world.assets / NORM_STATS)


def test_the_real_openpi_libero_file_passes_and_its_look_alike_is_refused(world: World) -> None:
    path = world.assets / NORM_STATS
    shutil.copyfile(REAL_LIBERO, path)
    assert norm_finding(world) == valid(path)
    shutil.copyfile(LOOK_ALIKE, path)  # the same numbers without the `norm_stats` wrapper, key `action`
    assert norm_finding(world) == refusal(path, "no top-level 'norm_stats' object", "缺少顶层 'norm_stats' 对象")


# ---- what is there instead of a file ----


def make_socket(path: Path) -> None:
    """A socket at `path`, bound in a short folder (a socket's path is at most 107 bytes) and moved there."""
    with tempfile.TemporaryDirectory(dir="/tmp") as short, socket.socket(socket.AF_UNIX) as server:
        server.bind(f"{short}/s")
        os.rename(f"{short}/s", path)


NOT_A_FILE = [
    pytest.param(Path.unlink, "the file is missing", "文件不存在", id="missing"),
    pytest.param(
        lambda p: (p.unlink(), p.mkdir()), "a folder is where a file should be", "此处应为文件而不是文件夹", id="folder"
    ),
    pytest.param(
        lambda p: (p.unlink(), p.symlink_to("gone.json")),
        "the file is a symbolic link to gone.json, which does not exist",
        "该文件是指向 gone.json 的符号链接,但链接目标不存在",
        id="dangling-link",
    ),
    pytest.param(
        lambda p: (p.unlink(), p.symlink_to(p.name)),
        "the file is a loop of symbolic links",
        "该文件是循环的符号链接",
        id="link-loop",
    ),
    pytest.param(
        lambda p: (p.unlink(), os.mkfifo(p)),
        "a FIFO (named pipe) is where a file should be; it is never read, because reading it would block forever",
        "此处应为文件,实际是 FIFO(命名管道);不会读取它,因为读取会永远阻塞",
        id="fifo",
    ),
    pytest.param(
        lambda p: (p.unlink(), p.symlink_to("/dev/zero")),
        "a device or socket is where a file should be; it is never opened",
        "此处应为文件,实际是设备或套接字;不会打开它",
        id="device",
    ),
    pytest.param(
        lambda p: (p.unlink(), make_socket(p)),
        "a device or socket is where a file should be; it is never opened",
        "此处应为文件,实际是设备或套接字;不会打开它",
        id="socket",
    ),
]


@pytest.mark.parametrize("plant, en, zh", NOT_A_FILE)
def test_what_is_not_a_regular_file_is_refused_in_words(world: World, plant, en: str, zh: str) -> None:
    path = world.assets / NORM_STATS
    plant(path)
    assert norm_finding(world) == refusal(path, en, zh)


@pytest.mark.parametrize(
    "refused, en, zh",
    [
        pytest.param(
            FileRefused("f", Problem.PERMISSION_DENIED),
            "the file is not readable (permission denied)",
            "文件不可读(权限不足)",
            id="permission-denied",
        ),
        pytest.param(
            FileRefused("f", Problem.NAME_TOO_LONG),
            "the path is too long for the file system (a name over 255 bytes)",
            "路径超出文件系统的长度限制(单个名称超过 255 字节)",
            id="name-too-long",
        ),
        pytest.param(
            FileRefused("f", Problem.TOO_BIG, size=200_000_001, limit=100_000_000),
            "the file is 200000001 bytes; a file like this is at most 100000000 bytes, so it is not read",
            "文件大小为 200000001 字节;此类文件最多 100000000 字节,因此不会读取",
            id="too-big",
        ),
        pytest.param(
            FileRefused("f", Problem.OS_ERROR, os.strerror(errno.EIO), errno=errno.EIO),
            "the file cannot be read: Input/output error",
            "文件无法读取:输入/输出错误",
            id="io-error",
        ),
        pytest.param(
            FileRefused("f", Problem.DANGLING_LINK, "gone\n.json"),
            "the file is a symbolic link to gone\\n.json, which does not exist",
            "该文件是指向 gone\\n.json 的符号链接,但链接目标不存在",
            id="link-target-escaped",
        ),
    ],
)
def test_refusals_root_cannot_make_here_are_worded(refused: FileRefused, en: str, zh: str) -> None:
    """Permission denied, a name too long (the settings refuse one in VLA_ASSET_ID), a file too big for a reader
    without its own wording, a system error, and a link target with a newline (shown escaped)."""
    assert refused_text(refused) == Text(en, zh)


# ---- what is in the file ----


def lfs_pointer() -> bytes:
    """The real pointer a clone without git-lfs left (QianHuixun/New-Test)."""
    pointers = json.loads((REAL / "lerobot" / "new_test_lfs" / "lfs_pointers.json").read_text())["pointer_files"]
    return pointers["data/chunk-000/episode_000000.parquet"].encode()


def test_a_git_lfs_pointer_is_named_and_fixed_with_git_lfs_pull(world: World) -> None:
    path = world.assets / NORM_STATS
    path.write_bytes(lfs_pointer())
    fix = Text(
        f"Run `git lfs install && git lfs pull` in {path.parent}, or download the real files instead of cloning "
        "without git-lfs.",
        f"请在 {path.parent} 中运行 `git lfs install && git lfs pull`,或直接下载真实文件,不要在未启用 git-lfs 时克隆。",
    )
    en = "the file is a git-lfs pointer (about 130 bytes of text), not the real content: it was cloned without git-lfs"
    zh = "该文件是 git-lfs 指针(约 130 字节的文本),不是实际内容:克隆时没有启用 git-lfs"
    assert norm_finding(world) == refusal(path, en, zh, fix)


def test_a_file_past_the_json_bound_is_not_read_and_its_size_is_told(world: World) -> None:
    path = world.assets / NORM_STATS
    with open(path, "wb") as handle:
        handle.truncate(40_000_000)  # a hole: 38.15 MiB that take no room
    en = (
        "the file is 40000000 bytes (38.1 MiB); the launcher reads a JSON asset (info.json, norm stats, config.json) "
        "of at most 32 MiB, so it is not read"
    )
    zh = (
        "文件大小为 40000000 字节(38.1 MiB);启动器读取的 JSON 资源文件(info.json、归一化统计量、config.json)"
        "最多 32 MiB,因此不会读取"
    )
    fix = Text(
        f"These files are kilobytes in every openpi and LeRobot release: put the release's own file at {path}. "
        "The 32 MiB cap is listed in the README (Settings, 'Values at the edges').",
        f"在 openpi 与 LeRobot 的各个发布版本中,这些文件都只有几 KB:请把发布版本自带的文件放到 {path}。"
        "32 MiB 的上限见 README 的 Settings 一节。",
    )
    assert norm_finding(world) == refusal(path, en, zh, fix)


NOT_JSON = [
    pytest.param(
        b'{"norm_stats": {"state": "\xff"}}',
        "the file is not UTF-8 text: byte 26 cannot be decoded",
        "文件不是 UTF-8 文本:第 26 字节无法解码",
        id="not-utf8",
    ),
    pytest.param(
        b'{\n  "norm_stats": ]\n}',
        "the file is not valid JSON: a value was expected (line 2, column 17)",
        "文件不是合法的 JSON(第 2 行,第 17 列):此处应为一个值",
        id="expecting-value",
    ),
    pytest.param(
        b'{"norm_stats": {}}\n{}',
        "the file is not valid JSON: more follows after the JSON value (line 2, column 1)",
        "文件不是合法的 JSON(第 2 行,第 1 列):JSON 值之后还有多余内容",
        id="extra-data",
    ),
    pytest.param(
        json.dumps(norm_stats()).replace("1.0", "-Infinity", 1).encode(),
        "the file is not valid JSON: it holds the non-finite number -Infinity",
        "文件不是合法的 JSON:其中含有非有限数 -Infinity",
        id="minus-infinity",
    ),
    pytest.param(
        json.dumps(norm_stats()).replace("0.0", "NaN", 1).encode(),
        "the file is not valid JSON: it holds the non-finite number NaN",
        "文件不是合法的 JSON:其中含有非有限数 NaN",
        id="nan",
    ),
    pytest.param(
        b"[" * 100_000 + b"]" * 100_000,
        "the JSON is nested too deeply to read",
        "JSON 嵌套层数过深,无法读取",
        id="nested-100k",
    ),
    pytest.param(
        b'{"norm_stats": ' + b"9" * 5000 + b"}",
        "the JSON holds an integer of more than 4300 digits",
        "JSON 中有超过 4300 位的整数",
        id="5000-digit-integer",
    ),
]


@pytest.mark.parametrize("data, en, zh", NOT_JSON)
def test_what_is_not_strict_json_is_refused_in_words(world: World, data: bytes, en: str, zh: str) -> None:
    path = world.assets / NORM_STATS
    path.write_bytes(data)
    assert norm_finding(world) == refusal(path, en, zh)


def test_a_decoder_complaint_without_words_of_ours_is_passed_on(world: World) -> None:
    """A UTF-8 byte-order mark (what some Windows editors write first): the decoder's own English, where it is."""
    path = world.assets / NORM_STATS
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(norm_stats()).encode())
    finding = norm_finding(world)
    assert (finding.id, finding.status, finding.hint, finding.where) == (ID, Status.FAIL, download_fix(path), str(path))
    assert finding.message.en.startswith(f"{path}: the file is not valid JSON: ")
    assert finding.message.en.endswith(": Unexpected UTF-8 BOM (decode using utf-8-sig) (line 1, column 1)")
    assert finding.message.zh.startswith(f"{path}:文件不是合法的 JSON(第 1 行,第 1 列):")
    assert finding.message.zh.endswith("(JSON 语法错误:Unexpected UTF-8 BOM (decode using utf-8-sig))")


def test_a_decoder_error_of_another_kind_is_worded_and_cut(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """No input reaches it on this Python (every `ValueError` json.loads raises from text is a `JSONDecodeError`, a
    non-finite constant or the integer digit limit): a future decoder's new complaint is still a finding, cut at 80
    characters, never a traceback."""
    said = "a complaint no decoder makes today, " + "long enough to be cut at eighty characters " * 2

    def decoder(*_args: object, **_kwargs: object) -> object:
        raise ValueError(said)

    monkeypatch.setattr(json, "loads", decoder)
    path = world.assets / NORM_STATS
    cut = said[:80] + "…"
    en, zh = f"the file is not valid JSON: {cut}", f"文件不是合法的 JSON(JSON 语法错误:{cut})"
    assert norm_finding(world) == refusal(path, en, zh)


# ---- the stats against the dataset ----


def dims_failure(path: Path, world: World, short: str, short_zh: str) -> Finding:
    info = world.assets / INFO
    en = (
        f"{path}: {short} ({info}): openpi's normalisation cannot broadcast stats shorter than the data, so the "
        "trainer fails before its first step"
    )
    zh = f"{path}:{short_zh}({info}):openpi 归一化时无法把短于数据的统计量广播到数据上,训练脚本会在第一步之前失败"
    return Finding(ID, Status.FAIL, Text(en, zh), recompute_fix(path), str(path))


def test_actions_shorter_than_the_data_fail_after_sound_state(world: World) -> None:
    path = write_stats(world, state=8, actions=3)
    short = "'norm_stats.actions' has 3 values, the dataset's 'actions' 7"
    short_zh = "'norm_stats.actions' 只有 3 个值,数据集的 'actions' 有 7 维"
    assert norm_finding(world) == dims_failure(path, world, short, short_zh)


def test_every_short_key_is_listed(world: World) -> None:
    path = write_stats(world, state=2, actions=1)  # a single action value: a warning, outweighed by the short state
    short = "'norm_stats.state' has 2 values, the dataset's 'state' 8"
    short_zh = "'norm_stats.state' 只有 2 个值,数据集的 'state' 有 8 维"
    assert norm_finding(world) == dims_failure(path, world, short, short_zh)
    path = write_stats(world, state=7, actions=6)
    short = (
        "'norm_stats.state' has 7 values, the dataset's 'state' 8; "
        "'norm_stats.actions' has 6 values, the dataset's 'actions' 7"
    )
    short_zh = (
        "'norm_stats.state' 只有 7 个值,数据集的 'state' 有 8 维; "
        "'norm_stats.actions' 只有 6 个值,数据集的 'actions' 有 7 维"
    )
    assert norm_finding(world) == dims_failure(path, world, short, short_zh)


def test_a_single_value_is_a_warning(world: World) -> None:
    path = write_stats(world, state=1, actions=1)
    info = world.assets / INFO
    en = (
        f"{path}: 'norm_stats.state' has 1 values, the dataset's 'state' 8; 'norm_stats.actions' has 1 values, the "
        f"dataset's 'actions' 7 ({info}): openpi broadcasts a single value to every dimension, so training starts but "
        "normalises all of them with that one value, unlike norm stats computed from this dataset"
    )
    zh = (
        f"{path}:'norm_stats.state' 只有 1 个值,数据集的 'state' 有 8 维; 'norm_stats.actions' 只有 1 个值,数据集的 "
        f"'actions' 有 7 维({info}):openpi 会把单个值广播到每一维,训练可以启动,但所有维度都用这一个值归一化,"
        "与基于该数据集计算的统计量不同"
    )
    assert norm_finding(world) == Finding(ID, Status.WARN, Text(en, zh), recompute_fix(path), str(path))


def test_stats_padded_past_the_data_pass(world: World) -> None:
    path = write_stats(world, state=32, actions=32)  # openpi pads to the model's action dimension
    assert norm_finding(world) == valid(path)


def test_without_a_dataset_or_a_known_mapping_the_lengths_are_not_judged(world: World) -> None:
    """Short stats pass when there is no dataset to compare with, and for a config whose data mapping is not known
    (pi05_droid reads DROID's features, not the LIBERO ones)."""
    path = write_stats(world, state=2, actions=3)
    env = {"VLA_DATASET_REPO_ID": "none", "VLA_ASSET_ID": "physical-intelligence/libero"}
    assert norm_finding(world, **env) == valid(path)
    droid = write_stats(world, 2, 3, relative="assets/pi05_droid/physical-intelligence/libero/norm_stats.json")
    assert norm_finding(world, VLA_TRAIN_CONFIG="pi05_droid") == valid(droid)


# ---- the command line ----


@pytest.mark.parametrize(
    "state, actions, code, status", [(8, 3, 3, "FAIL"), (1, 1, 0, "WARN")], ids=["short-fails", "single-warns"]
)
def test_check_exits_by_the_dims(world: World, state: int, actions: int, code: int, status: str) -> None:
    write_stats(world, state, actions)
    result = world.cli("check")
    assert result.code == code, result.text[-2000:]
    assert re.search(rf"^\s*{status}\s+assets\.norm-stats\s", result.out, re.MULTILINE), result.out[-2000:]
