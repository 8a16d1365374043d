"""How `check` reads a LeRobot v2.x dataset's layout, in process and word for word: info.json's path templates
(what a `data_path`/`video_path` may hold and the exact refusal, English and Chinese, for each thing it may not),
its counts (`total_episodes`, `chunks_size` and its default of 1000, numbers past int64), the paths the templates
make (any field order, literal `%` and braces, episode numbers past a float's precision), how each episode file is
judged from its name's extension and a few bytes at each end (parquet footers and magic, mp4 `ftyp`, files of any
other kind, entries that change kind between the listing and the read), the dataset's feature dimensions that the
norm stats are compared with, and the safetensors header's tensor layout (gaps, overlaps, offsets, sizes).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from entrypoint.core.files import Problem
from entrypoint.core.settings import load_settings
from entrypoint.inspect import assets
from entrypoint.inspect.assets import InvalidAsset, check_dataset_folder, check_safetensors, inspect_assets
from tests.support.synthetic import (
    ACTION_DIM,
    STATE_DIM,
    edit_info,
    make_dataset,
    mp4_box,
    mp4_bytes,
    norm_stats,
    parquet_bytes,
)
from tests.unit.conftest import World

REAL = Path(__file__).resolve().parents[1] / "support" / "real"
LFS_POINTER = json.loads((REAL / "lerobot" / "new_test_lfs" / "lfs_pointers.json").read_text())["pointer_files"][
    "data/chunk-000/episode_000000.parquet"
]
INT64_MAX = 2**63 - 1
VIDEO_KEY = "observation.images.top"
FIX_EN = "Download and unpack the dataset so that {root} is complete (see the README's asset steps)."
FIX_ZH = "请下载并解压数据集,使 {root} 完整(参见 README 的资源准备步骤)。"


# ---- helpers ----


def dataset(tmp_path: Path, episodes: int = 3, video: bool = False, **changes: object) -> Path:
    """A valid dataset whose meta/info.json has some keys changed (a value of None removes the key)."""
    root = make_dataset(tmp_path / "ds", episodes, video_keys=(VIDEO_KEY,) if video else ())
    edit_info(root, **changes)
    return root


def relaid(root: Path, data_path: str, contents: dict[int, bytes], chunk_size: int = 1000) -> None:
    """Move the dataset's episodes to where `data_path` puts them (Python's own formatting), with these contents."""
    for old in sorted((root / "data").rglob("*"), reverse=True):
        old.rmdir() if old.is_dir() else old.unlink()
    edit_info(root, data_path=data_path, total_episodes=len(contents), chunks_size=chunk_size)
    for episode, data in contents.items():
        path = root / data_path.format(episode_chunk=episode // chunk_size, episode_index=episode)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def refusal(root: Path) -> tuple[str, str]:
    """The one finding of a dataset whose info.json is refused: checked whole but for its text, returned."""
    findings, complete, size = check_dataset_folder(root)
    (finding,) = findings
    info = root / "meta" / "info.json"
    assert (finding.id, finding.status.value, finding.where) == ("assets.dataset", "fail", str(info))
    assert (complete, size) == (False, 0)
    assert (finding.hint.en, finding.hint.zh) == (FIX_EN.format(root=root), FIX_ZH.format(root=root))
    assert finding.message.en.startswith(f"{info}: ") and finding.message.zh.startswith(f"{info}:")
    return finding.message.en[len(f"{info}: ") :], finding.message.zh[len(f"{info}:") :]


def texts(findings: list) -> dict[str, tuple[str, str, str]]:
    return {f.id: (f.status.value, f.message.en, f.message.zh) for f in findings}


def passes(root: Path) -> int:
    findings, complete, size = check_dataset_folder(root)
    assert complete and [(f.id, f.status.value) for f in findings] == [("assets.dataset", "pass")], texts(findings)
    return size


# ---- path templates: what is refused, in both languages ----

CHUNK = "data/chunk-{episode_chunk:03d}"
V2 = "episode_chunk, episode_index"


@pytest.mark.parametrize(
    "data_path, en, zh",
    [
        (
            "data/{video_key}/episode_{episode_index:06d}.parquet",
            f"it names the field {{video_key}}; only {V2} are known",
            f"它使用了字段 {{video_key}};只支持 {V2}",
        ),
        (
            "data/episode_{episode:06d}.parquet",
            f"it names the field {{episode}}; only {V2} are known",
            f"它使用了字段 {{episode}};只支持 {V2}",
        ),
        (
            "data/{episode_index.__class__}/episode_{episode_index:06d}.parquet",
            "{episode_index.__class__} reaches into a field (attribute or index access)",
            "{episode_index.__class__} 访问了字段的属性或下标",
        ),
        (
            "data/{episode_index[0]}.parquet",
            "{episode_index[0]} reaches into a field (attribute or index access)",
            "{episode_index[0]} 访问了字段的属性或下标",
        ),
        (
            "data/{episode_index!r}.parquet",
            "{episode_index!r} converts the value",
            "{episode_index!r} 对值做了转换",
        ),
        (
            "data/{episode_index.parquet",
            "its braces do not pair up (expected '}' before end of string)",
            "花括号不成对(expected '}' before end of string)",
        ),
        (
            "data/episode_{episode_index:x}.parquet",
            "{episode_index:x} is not a simple integer format such as 03d",
            "{episode_index:x} 不是简单的整数格式(例如 03d)",
        ),
        (
            "data/chunk-{episode_chunk:0999999999d}/episode_{episode_index:06d}.parquet",
            "{episode_chunk:0999999999d} is not a simple integer format such as 03d",
            "{episode_chunk:0999999999d} 不是简单的整数格式(例如 03d)",
        ),
        (
            f"{CHUNK}/all.parquet",
            "it does not contain {episode_index}",
            "其中没有 {episode_index}",
        ),
        (
            "/etc/episode_{episode_index:06d}.parquet",
            "it is not a relative path inside the dataset",
            "它不是数据集内的相对路径",
        ),
        (
            "./data/episode_{episode_index:06d}.parquet",
            "it is not a relative path inside the dataset",
            "它不是数据集内的相对路径",
        ),
        (
            "../episode_{episode_index:06d}.parquet",
            "it is not a relative path inside the dataset",
            "它不是数据集内的相对路径",
        ),
        (
            "data//episode_{episode_index:06d}.parquet",
            "it is not a relative path inside the dataset",
            "它不是数据集内的相对路径",
        ),
    ],
    ids=[
        "video-key-in-data-path",
        "unknown-field",
        "attribute",
        "index",
        "conversion",
        "unbalanced",
        "hex-format",
        "billion-wide",
        "no-index",
        "absolute",
        "dot",
        "dot-dot",
        "empty-part",
    ],
)
def test_a_data_path_template_is_refused_saying_why(tmp_path: Path, data_path: str, en: str, zh: str) -> None:
    root = dataset(tmp_path, data_path=data_path)
    assert refusal(root) == (
        f"data_path {data_path} is not a LeRobot v2 path template: {en}",
        f"data_path {data_path} 不是 LeRobot v2 路径模板:{zh}",
    )


VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"


@pytest.mark.parametrize(
    "video_path, en, zh",
    [
        (
            "videos/{video_key}/{episode}.mp4",
            f"it names the field {{episode}}; only {V2}, video_key are known",
            f"它使用了字段 {{episode}};只支持 {V2}, video_key",
        ),
        (
            "videos/{video_key:3}/episode_{episode_index:06d}.mp4",
            "{video_key:3} is not a simple integer format such as 03d",
            "{video_key:3} 不是简单的整数格式(例如 03d)",
        ),
        (
            "videos/{video_key:>40}/episode_{episode_index:06d}.mp4",
            "{video_key:>40} is not a simple integer format such as 03d",
            "{video_key:>40} 不是简单的整数格式(例如 03d)",
        ),
    ],
    ids=["unknown-field", "video-key-width", "video-key-aligned"],
)
def test_a_video_path_template_is_refused_saying_why(tmp_path: Path, video_path: str, en: str, zh: str) -> None:
    root = dataset(tmp_path, video=True, video_path=video_path)
    assert refusal(root) == (
        f"video_path {video_path} is not a LeRobot v2 path template: {en}",
        f"video_path {video_path} 不是 LeRobot v2 路径模板:{zh}",
    )


# ---- info.json's counts and keys ----


@pytest.mark.parametrize(
    "changes, en, zh",
    [
        ({"chunks_size": 0}, "'chunks_size' is not a positive integer", "'chunks_size' 不是正整数"),
        ({"chunks_size": "1000"}, "'chunks_size' is not a positive integer", "'chunks_size' 不是正整数"),
        (
            {"chunks_size": 2**63},
            f"'chunks_size' is {2**63}, past any dataset's count (at most {INT64_MAX})",
            f"'chunks_size' 为 {2**63},超出任何数据集的数量范围(最大 {INT64_MAX})",
        ),
        (
            {"total_episodes": 10**29},  # 30 digits: still shown
            f"'total_episodes' is {10**29}, past any dataset's count (at most {INT64_MAX})",
            f"'total_episodes' 为 {10**29},超出任何数据集的数量范围(最大 {INT64_MAX})",
        ),
        (
            {"total_episodes": 10**30},  # 31 digits: counted instead
            f"'total_episodes' is a number of 31 digits, past any dataset's count (at most {INT64_MAX})",
            f"'total_episodes' 为 一个 31 位的数,超出任何数据集的数量范围(最大 {INT64_MAX})",
        ),
        ({"total_episodes": -1}, "'total_episodes' is missing or not a count", "'total_episodes' 缺失或不是计数"),
        ({"data_path": None}, "'data_path' or 'features' is missing", "缺少 'data_path' 或 'features'"),
        ({"features": ["state", "actions"]}, "'data_path' or 'features' is missing", "缺少 'data_path' 或 'features'"),
    ],
    ids=[
        "chunks-zero",
        "chunks-string",
        "chunks-past-int64",
        "30-digits",
        "31-digits",
        "negative",
        "no-data-path",
        "features-list",
    ],
)
def test_info_json_counts_and_keys_are_refused_saying_why(tmp_path: Path, changes: dict, en: str, zh: str) -> None:
    assert refusal(dataset(tmp_path, **changes)) == (en, zh)


def test_video_features_without_a_video_path_are_refused(tmp_path: Path) -> None:
    root = dataset(tmp_path, video=True, video_path=None)
    assert refusal(root) == (
        "video features are declared but 'video_path' is missing",
        "声明了视频特征但缺少 'video_path'",
    )


def test_without_features_there_is_only_the_data_path(tmp_path: Path) -> None:
    """`features` may be left out (no videos then): the dataset is its parquet files."""
    root = dataset(tmp_path, features=None)
    assert passes(root) == 3 * len(parquet_bytes())


def test_an_empty_dataset_is_a_count_of_zero_not_a_missing_count(tmp_path: Path) -> None:
    root = dataset(tmp_path, total_episodes=0)
    findings, complete, size = check_dataset_folder(root)
    assert [(f.id, f.status.value, f.message.en) for f in findings] == [
        ("assets.dataset", "pass", f"dataset complete: 0 episodes, 0 files, 0.00 GB in {root}")
    ]
    assert (complete, size) == (True, 0)


def test_chunks_of_1000_when_info_json_does_not_say(tmp_path: Path) -> None:
    """LeRobot's default chunk size: episode 1000 is the first of chunk-001."""
    root = dataset(tmp_path, total_episodes=1001, chunks_size=None)
    (root / "data/chunk-001").mkdir()
    (root / "data/chunk-001/episode_001000.parquet").write_bytes(parquet_bytes())
    findings, complete, _ = check_dataset_folder(root)
    (finding,) = findings
    shown = ", ".join(f"data/chunk-000/episode_{e:06d}.parquet" for e in range(3, 8))
    info = root / "meta" / "info.json"
    assert (finding.id, finding.status.value, complete) == ("assets.dataset-files", "fail", False)
    assert finding.message.en == (
        f"997 of the 1001 episode files under {root} are missing or empty: {shown} (the count is {info}'s "
        "total_episodes, 1001)"
    )
    assert finding.message.zh == (
        f"{root} 下 1001 个剧集文件中有 997 个缺失或为空:{shown}(该数量来自 {info} 中的 total_episodes,1001)"
    )
    assert finding.where == str(root / "data/chunk-000/episode_000003.parquet")


# ---- the paths the templates make ----


@pytest.mark.parametrize(
    "data_path",
    [
        "data/episode_{episode_index:06d}.parquet",
        "data/episode_{episode_index:06d}/chunk-{episode_chunk:03d}.parquet",
        "data/{episode_index}-{episode_chunk}-{episode_index:03d}.parquet",
        "data/100%/episode_{episode_index:06d}.parquet",
        "data/{{raw}}/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "data/%d {{%s}}/episode_{episode_index}.parquet",
    ],
    ids=["index-only", "index-then-chunk", "index-twice", "percent", "literal-braces", "printf-look-alike"],
)
def test_every_field_order_and_literal_text_makes_the_paths_python_makes(tmp_path: Path, data_path: str) -> None:
    root = dataset(tmp_path)
    relaid(root, data_path, {e: parquet_bytes() for e in range(7)}, chunk_size=3)
    assert passes(root) == 7 * len(parquet_bytes())


def test_a_video_template_may_leave_the_index_unformatted(tmp_path: Path) -> None:
    root = dataset(tmp_path, video=True, video_path="videos/{video_key}/episode_{episode_index}.mp4")
    for episode in range(3):
        path = root / f"videos/{VIDEO_KEY}/episode_{episode}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(mp4_bytes())
    assert passes(root) == 3 * (len(parquet_bytes()) + len(mp4_bytes()))


def test_episode_numbers_past_a_floats_precision_are_placed_exactly(tmp_path: Path) -> None:
    """2**53 + 1 has no float: its chunk (chunks of 1) is computed in integers, so the file is found there."""
    far = 2**53 + 1
    root = dataset(tmp_path, episodes=1, total_episodes=INT64_MAX, chunks_size=1)
    path = root / f"data/chunk-{far:03d}/episode_{far:06d}.parquet"
    path.parent.mkdir()
    path.write_bytes(parquet_bytes())
    findings, _, size = check_dataset_folder(root)
    (finding,) = findings
    assert finding.id == "assets.dataset-files" and size == 2 * len(parquet_bytes())
    assert finding.message.en.startswith(f"{INT64_MAX - 2} of the {INT64_MAX} episode files under {root} are missing")


# ---- each episode file judged by its name's extension ----


def test_the_kind_is_the_extension_after_the_last_dot(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    template = f"{CHUNK}/episode_{{episode_index:06d}}.v2.parquet"
    relaid(root, template, {0: parquet_bytes(), 1: b"<html>404</html>" * 8, 2: parquet_bytes()})
    findings, complete, _ = check_dataset_folder(root)
    assert not complete and texts(findings) == {
        "assets.dataset-content": (
            "fail",
            f"1 of 3 episode files under {root} are not what their names claim: data/chunk-000/episode_000001.v2."
            "parquet (no PAR1 magic at both ends: not a whole parquet file)",
            f"{root} 下 3 个剧集文件中有 1 个内容与文件名不符:data/chunk-000/episode_000001.v2.parquet"
            "(两端没有 PAR1 标记:不是完整的 parquet 文件)",
        )
    }


@pytest.mark.parametrize(
    "data_path",
    [f"{CHUNK}/episode_{{episode_index:06d}}", f"{CHUNK}/episode_{{episode_index:06d}}parquet"],
    ids=["no-extension", "no-dot"],
)
def test_a_file_of_no_known_kind_must_be_there_with_data(tmp_path: Path, data_path: str) -> None:
    """Without a `.parquet` or `.mp4` extension nothing is said about the content, but an empty file is missing and
    a git-lfs pointer is not data."""
    root = dataset(tmp_path)
    relaid(root, data_path, {0: b"not parquet at all", 1: b"", 2: LFS_POINTER.encode(), 3: b"x"})
    findings, complete, size = check_dataset_folder(root)
    name = data_path.format(episode_chunk=0, episode_index=1)
    lfs = data_path.format(episode_chunk=0, episode_index=2)
    info = root / "meta" / "info.json"
    assert not complete and size == len(b"not parquet at all") + len(LFS_POINTER) + 1
    assert texts(findings) == {
        "assets.dataset-lfs": (
            "fail",
            f"1 files under {root} are git-lfs pointers, not data (cloned without git-lfs): {lfs}",
            f"{root} 下有 1 个文件是 git-lfs 指针而不是数据(克隆时没有启用 git-lfs):{lfs}",
        ),
        "assets.dataset-files": (
            "fail",
            f"1 of the 4 episode files under {root} are missing or empty: {name} (the count is {info}'s "
            "total_episodes, 4)",
            f"{root} 下 4 个剧集文件中有 1 个缺失或为空:{name}(该数量来自 {info} 中的 total_episodes,4)",
        ),
    }


def footer_length(data: bytes, length: int) -> bytes:
    return data[:-8] + length.to_bytes(4, "little") + data[-4:]


def test_parquet_footers_are_read_little_endian_and_both_magics_must_be_par1(tmp_path: Path) -> None:
    frame = parquet_bytes()
    size = len(frame)
    root = dataset(tmp_path)
    chunk = root / "data/chunk-000"
    (chunk / "episode_000000.parquet").write_bytes(footer_length(frame, 2**24))  # big-endian, it would read 1
    (chunk / "episode_000001.parquet").write_bytes(footer_length(frame, 2**24 + 8))  # its low 3 bytes say 8
    (chunk / "episode_000002.parquet").write_bytes(b"XXXX" + frame[4:-4] + b"XXXX")  # the same magic, not PAR1
    findings, complete, total = check_dataset_folder(root)
    (finding,) = findings
    assert (finding.id, finding.status.value, finding.where, complete, total) == (
        "assets.dataset-content", "fail", str(root), False, 3 * size,
    )  # fmt: skip
    assert finding.message.en == (
        f"3 of 3 episode files under {root} are not what their names claim: "
        f"data/chunk-000/episode_000000.parquet (its footer length {2**24} does not fit a {size}-byte file "
        f"(truncated or corrupt)), data/chunk-000/episode_000001.parquet (its footer length {2**24 + 8} does not fit "
        f"a {size}-byte file (truncated or corrupt)), data/chunk-000/episode_000002.parquet (no PAR1 magic at both "
        "ends: not a whole parquet file)"
    )
    assert finding.message.zh.startswith(
        f"{root} 下 3 个剧集文件中有 3 个内容与文件名不符:data/chunk-000/episode_000000.parquet(其 footer 长度 "
        f"{2**24} 与 {size} 字节的文件不符(被截断或损坏))"
    )


def test_an_mp4_whose_ftyp_box_is_too_short_is_not_an_mp4(tmp_path: Path) -> None:
    """An 8-byte `ftyp` box (no brand) is not an mp4's start, however well the boxes after it add up."""
    root = dataset(tmp_path, video=True)
    video = root / f"videos/chunk-000/{VIDEO_KEY}/episode_000001.mp4"
    video.write_bytes(b"\x00\x00\x00\x08ftyp" + mp4_box(b"mdat", bytes(2200)) + mp4_box(b"moov", bytes(8)))
    findings, complete, _ = check_dataset_folder(root)
    assert not complete and texts(findings) == {
        "assets.dataset-content": (
            "fail",
            f"1 of 6 episode files under {root} are not what their names claim: videos/chunk-000/{VIDEO_KEY}/"
            "episode_000001.mp4 (no ftyp box at the start: not an mp4 file)",
            f"{root} 下 6 个剧集文件中有 1 个内容与文件名不符:videos/chunk-000/{VIDEO_KEY}/episode_000001.mp4"
            "(开头没有 ftyp box:不是 mp4 文件)",
        )
    }


# ---- entries that are not regular files, or change kind between the listing and the read ----

FOLDER_EN = "a folder is where a file should be"
FOLDER_ZH = "此处应为文件而不是文件夹"


def folder_finding(root: Path) -> dict[str, tuple[str, str, str]]:
    episode = "data/chunk-000/episode_000001.parquet"
    return {
        "assets.dataset-content": (
            "fail",
            f"1 of 3 episode files under {root} are not what their names claim: {episode} ({FOLDER_EN})",
            f"{root} 下 3 个剧集文件中有 1 个内容与文件名不符:{episode}({FOLDER_ZH})",
        )
    }


def test_a_folder_where_an_episode_file_belongs_is_named(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    episode = root / "data/chunk-000/episode_000001.parquet"
    episode.unlink()
    episode.mkdir()
    findings, complete, size = check_dataset_folder(root)
    assert not complete and size == 2 * len(parquet_bytes()) and texts(findings) == folder_finding(root)


def listing_says(monkeypatch: pytest.MonkeyPatch, kinds: dict[str, Problem | None]) -> None:
    """The folder listing reports these names as these kinds, whatever they are on disk (what it saw an instant
    before something else took their place)."""
    real = assets.entries

    def entries(folder: str) -> dict[str, Problem | None]:
        return {name: kinds.get(name, kind) for name, kind in real(folder).items()}

    monkeypatch.setattr(assets, "entries", entries)


def test_a_folder_listed_as_a_file_is_still_named_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = dataset(tmp_path)
    episode = root / "data/chunk-000/episode_000001.parquet"
    episode.unlink()
    episode.mkdir()
    listing_says(monkeypatch, {"episode_000001.parquet": None})
    findings, complete, size = check_dataset_folder(root)
    assert not complete and size == 2 * len(parquet_bytes()) and texts(findings) == folder_finding(root)


def test_files_listed_as_something_else_are_judged_by_what_they_are_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed as FIFOs, regular files by the time they are read: each is read like any episode file, its size
    counted, its content judged (a video's boxes past its first 64 bytes included)."""
    root = dataset(tmp_path, video=True)
    video = mp4_bytes(body=bytes(100))  # its moov box starts past the first 64 bytes
    (root / f"videos/chunk-000/{VIDEO_KEY}/episode_000001.mp4").write_bytes(video)
    (root / "data/chunk-000/episode_000002.parquet").write_bytes(b"PK\x03\x04" + bytes(60))
    listing_says(monkeypatch, dict.fromkeys(["episode_000001.parquet", "episode_000002.parquet",
                                             "episode_000001.mp4"], Problem.FIFO))  # fmt: skip
    findings, complete, size = check_dataset_folder(root)
    assert size == 2 * len(parquet_bytes()) + 64 + 2 * len(mp4_bytes()) + len(video)
    episode = "data/chunk-000/episode_000002.parquet"
    assert not complete and texts(findings) == {
        "assets.dataset-content": (
            "fail",
            f"1 of 6 episode files under {root} are not what their names claim: {episode} (no PAR1 magic at both "
            "ends: not a whole parquet file)",
            f"{root} 下 6 个剧集文件中有 1 个内容与文件名不符:{episode}(两端没有 PAR1 标记:不是完整的 parquet 文件)",
        )
    }


def test_an_empty_file_listed_as_something_else_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = dataset(tmp_path)
    (root / "data/chunk-000/episode_000001.parquet").write_bytes(b"")
    listing_says(monkeypatch, {"episode_000001.parquet": Problem.SOCKET})
    findings, complete, _ = check_dataset_folder(root)
    (finding,) = findings
    assert (finding.id, complete) == ("assets.dataset-files", False)
    assert finding.message.en.startswith(f"1 of the 3 episode files under {root} are missing or empty: data/chunk-000/"
                                         "episode_000001.parquet (the count is")  # fmt: skip


# ---- feature dimensions: what the norm stats are compared with ----


def short_stats_finding(world: World, **features: object) -> tuple[str, str, str, str]:
    info = world.assets / "datasets/physical-intelligence/libero/meta/info.json"
    data = json.loads(info.read_text())
    data["features"].update(features)
    info.write_text(json.dumps(data))
    stats = world.assets / "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
    stats.write_text(json.dumps(norm_stats(STATE_DIM - 2, ACTION_DIM - 2)))
    report = inspect_assets(load_settings(world.env), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.norm-stats"]
    assert finding.where == str(stats)
    return finding.status.value, finding.message.en, finding.message.zh, str(info)


@pytest.mark.parametrize(
    "features",
    [{}, {"odd": "not an object", "no_shape": {"dtype": "int64"}, "scalar": {"dtype": "int64", "shape": []}}],
    ids=["plain", "odd-features-beside"],
)
def test_norm_stats_shorter_than_the_features_fail_naming_both(world: World, features: dict) -> None:
    status, en, zh, info = short_stats_finding(world, **features)
    stats = world.assets / "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
    s, a = STATE_DIM, ACTION_DIM
    assert status == "fail"
    assert en == (
        f"{stats}: 'norm_stats.state' has {s - 2} values, the dataset's 'state' {s}; 'norm_stats.actions' has "
        f"{a - 2} values, the dataset's 'actions' {a} ({info}): openpi's normalisation cannot broadcast stats "
        "shorter than the data, so the trainer fails before its first step"
    )
    assert zh == (
        f"{stats}:'norm_stats.state' 只有 {s - 2} 个值,数据集的 'state' 有 {s} 维; 'norm_stats.actions' 只有 "
        f"{a - 2} 个值,数据集的 'actions' 有 {a} 维({info}):openpi 归一化时无法把短于数据的统计量广播到数据上,"
        "训练脚本会在第一步之前失败"
    )


@pytest.mark.parametrize(
    "info_text",
    ["[1, 2]", '{"features": [1, 2]}', '{"features": {"state": {"shape": ["8"]}, "actions": {"shape": 7}}}'],
    ids=["info-a-list", "features-a-list", "dims-not-integers"],
)
def test_norm_stats_are_not_compared_with_dimensions_info_json_does_not_give(world: World, info_text: str) -> None:
    info = world.assets / "datasets/physical-intelligence/libero/meta/info.json"
    info.write_text(info_text)
    stats = world.assets / "assets/pi05_libero/physical-intelligence/libero/norm_stats.json"
    stats.write_text(json.dumps(norm_stats(STATE_DIM - 2, ACTION_DIM - 2)))
    report = inspect_assets(load_settings(world.env), world.env)
    (finding,) = [f for f in report.findings if f.id == "assets.norm-stats"]
    assert (finding.status.value, finding.message.en) == ("pass", f"norm stats valid: {stats}")


# ---- the safetensors header: where the tensors end ----


def safetensors(path: Path, header: object, body: bytes) -> Path:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return path


def u8(start: int, stop: int, dtype: str = "U8", shape: list[int] | None = None) -> dict[str, object]:
    return {"dtype": dtype, "shape": [stop - start] if shape is None else shape, "data_offsets": [start, stop]}


@pytest.mark.parametrize(
    "header, body, en, zh",
    [
        (
            [{"a": 1}],
            b"",
            "the safetensors header is not an object (corrupt file)",
            "safetensors 头不是对象(文件损坏)",
        ),
        (
            {"a": u8(0, 4), "b": u8(8, 12)},
            bytes(12),
            "tensor 'b' starts at data byte 8 but the tensor before it ends at 4: a gap, which the safetensors loader "
            "refuses",
            "张量 'b' 从数据第 8 字节开始,但前一个张量在第 4 字节结束:中间有空隙,safetensors 加载器会拒绝",
        ),
        (
            {"a": u8(0, 8), "b": u8(6, 10)},
            bytes(10),
            "tensor 'b' starts at data byte 6, inside the tensor before it (which ends at 8): overlapping tensors, "
            "which the safetensors loader refuses",
            "张量 'b' 从数据第 6 字节开始,与前一个张量(在第 8 字节结束)重叠,safetensors 加载器会拒绝",
        ),
        (
            {"a": u8(0, 4), "b": u8(4, 2, shape=[2])},
            bytes(4),
            "tensor 'b' has no valid data_offsets (corrupt header)",
            "张量 'b' 的 data_offsets 无效(头损坏)",
        ),
        (
            {"a": u8(0, 4), "b": u8(4, 20, dtype="F32", shape=[3])},
            bytes(20),
            "tensor 'b' is F32 of shape [3], 12 bytes, but its data_offsets span 16 bytes",
            "张量 'b' 为 F32、shape 为 [3],应占 12 字节,但其 data_offsets 跨度为 16 字节",
        ),
        (
            {"a": u8(0, 4), "b": u8(4, 6, dtype="F4", shape=[3])},
            bytes(6),
            "tensor 'b' is F4 of shape [3], 1.5 bytes, but its data_offsets span 2 bytes",
            "张量 'b' 为 F4、shape 为 [3],应占 1.5 字节,但其 data_offsets 跨度为 2 字节",
        ),
    ],
    ids=["not-an-object", "gap", "overlap", "offsets-backwards", "size-mismatch", "sub-byte-mismatch"],
)
def test_a_safetensors_header_whose_tensors_do_not_add_up_is_refused_saying_where(
    tmp_path: Path, header: object, body: bytes, en: str, zh: str
) -> None:
    path = safetensors(tmp_path / "model.safetensors", header, body)
    with pytest.raises(InvalidAsset) as caught:
        check_safetensors(path)
    assert (caught.value.text.en, caught.value.text.zh) == (en, zh)


def test_a_tensor_past_a_floats_precision_is_measured_in_integers(tmp_path: Path) -> None:
    """2**53 + 1 bytes of U8 fill offsets 0 to 2**53 + 1 exactly: the header is sound, the file is short."""
    far = 2**53 + 1
    path = safetensors(tmp_path / "model.safetensors", {"w": u8(0, far)}, bytes(8))
    size = path.stat().st_size
    with pytest.raises(InvalidAsset) as caught:
        check_safetensors(path)
    needed = size - 8 + far
    assert caught.value.text.en == f"the file is truncated: {size} bytes but its header needs {needed}"
