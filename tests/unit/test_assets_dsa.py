"""The LeRobot dataset folder check, word for word: what `check` says about a dataset and where it points.

Guards `check_dataset_folder` and its helpers in `entrypoint/inspect/assets.py`: meta/info.json left as a git-lfs
pointer or missing, LeRobot v3 datasets (by version or by the v3 path fields, in data_path or video_path), the other
meta files (missing, empty, not JSON lines, not a file), episode files that are git-lfs pointers, missing, not what
their names claim or not readable, the episode count read back from files far beyond the first episodes, folder
names made of literal text and the video key, and the size and wording of a complete dataset. Each finding is
compared whole, in English and in Chinese, with its fix and the path it names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from entrypoint.core.files import FileRefused, Problem
from entrypoint.core.findings import Finding, Status
from entrypoint.inspect import assets
from entrypoint.inspect.assets import check_dataset_folder
from tests.support.synthetic import edit_info, make_dataset, mp4_bytes, parquet_bytes

REAL = Path(__file__).resolve().parents[1] / "support" / "real"
LFS_POINTERS = json.loads((REAL / "lerobot" / "new_test_lfs" / "lfs_pointers.json").read_text())["pointer_files"]
TOP = "observation.images.top"
V3_DATA = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V3_VIDEO = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
V2_DATA = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
NOT_PARQUET = b"<html>404 Not Found</html>\n" * 4
NO_MAGIC = ("no PAR1 magic at both ends: not a whole parquet file", "两端没有 PAR1 标记:不是完整的 parquet 文件")
FOLDER = ("a folder is where a file should be", "此处应为文件而不是文件夹")
DEVICE = (
    "a device or socket is where a file should be; it is never opened",
    "此处应为文件,实际是设备或套接字;不会打开它",
)


def dataset(tmp_path: Path, episodes: int = 3, **kwargs: object) -> Path:
    return make_dataset(tmp_path / "physical-intelligence" / "libero", episodes, **kwargs)  # type: ignore[arg-type]


def episode(index: int) -> str:
    return f"data/chunk-000/episode_{index:06d}.parquet"


def only(findings: list[Finding]) -> Finding:
    (finding,) = findings
    return finding


def dataset_fix(root: Path) -> tuple[str, str]:
    return (
        f"Download and unpack the dataset so that {root} is complete (see the README's asset steps).",
        f"请下载并解压数据集,使 {root} 完整(参见 README 的资源准备步骤)。",
    )


def lfs_fix(folder: Path) -> tuple[str, str]:
    return (
        f"Run `git lfs install && git lfs pull` in {folder}, or download the real files instead of cloning without "
        "git-lfs.",
        f"请在 {folder} 中运行 `git lfs install && git lfs pull`,或直接下载真实文件,不要在未启用 git-lfs 时克隆。",
    )


def said(finding: Finding) -> tuple[str, str, str | None, str | None, str, str | None]:
    """(status, English, Chinese, English fix, Chinese fix, where): everything a user reads of one finding."""
    hint = finding.hint
    return (
        finding.status.value,
        finding.message.en,
        finding.message.zh,
        hint.en if hint else None,
        hint.zh if hint else "",
        finding.where,
    )


# ---- meta/info.json ----


def test_an_info_json_left_as_a_git_lfs_pointer_asks_for_git_lfs_pull_in_the_meta_folder(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    info = root / "meta" / "info.json"
    info.write_text(LFS_POINTERS["meta/tasks.jsonl"])
    findings, complete, size = check_dataset_folder(root)
    assert (complete, size) == (False, 0)
    finding = only(findings)
    assert finding.id == "assets.dataset"
    assert said(finding) == (
        "fail",
        f"{info}: the file is a git-lfs pointer (about 130 bytes of text), not the real content: it was cloned "
        "without git-lfs",
        f"{info}:该文件是 git-lfs 指针(约 130 字节的文本),不是实际内容:克隆时没有启用 git-lfs",
        *lfs_fix(root / "meta"),
        str(info),
    )


def test_a_missing_info_json_gets_the_dataset_fix(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    info = root / "meta" / "info.json"
    info.unlink()
    findings, complete, size = check_dataset_folder(root)
    finding = only(findings)
    assert (finding.id, complete, size) == ("assets.dataset", False, 0)
    missing = (f"{info}: the file is missing", f"{info}:文件不存在")
    assert said(finding) == ("fail", *missing, *dataset_fix(root), str(info))


# ---- LeRobot v3 ----


@pytest.mark.parametrize(
    "changes, version, data_path",
    [
        ({"codebase_version": "v3.0", "data_path": V3_DATA, "video_path": V3_VIDEO}, "v3.0", V3_DATA),
        ({"codebase_version": "v3.0"}, "v3.0", V2_DATA),
        ({"codebase_version": "v2.1", "data_path": V3_DATA}, "v2.1", V3_DATA),
        ({"codebase_version": "v2.1", "video_path": V3_VIDEO}, "v2.1", V2_DATA),
        ({"codebase_version": None, "data_path": V3_DATA}, "?", V3_DATA),
        ({"codebase_version": 3, "data_path": V3_DATA}, "?", V3_DATA),
    ],
    ids=["v3-layout", "v3-version-v2-paths", "v3-data-path-under-v2.1", "v3-video-path-only", "no-version", "int"],
)
def test_a_lerobot_v3_dataset_is_named_with_its_version_and_how_to_get_v2(
    tmp_path: Path, changes: dict[str, object], version: str, data_path: str
) -> None:
    root = dataset(tmp_path)
    edit_info(root, **changes)
    info = root / "meta" / "info.json"
    findings, complete, size = check_dataset_folder(root)
    assert (complete, size) == (False, 0)
    finding = only(findings)
    assert finding.id == "assets.dataset"
    assert said(finding) == (
        "fail",
        f"{root} is a LeRobot v3.0 dataset (codebase_version {version}, episodes packed into {data_path}); "
        "openpi's pinned LeRobot reads only v2.x datasets, one file per episode",
        f"{root} 是 LeRobot v3.0 数据集(codebase_version {version},多个剧集合并存放于 {data_path});"
        "openpi 固定版本的 LeRobot 只能读取每个剧集一个文件的 v2.x 数据集",
        "Get a v2.1 copy: download the dataset's v2.1 revision from the Hugging Face Hub (`huggingface-cli "
        f"download physical-intelligence/libero --repo-type dataset --revision v2.1 --local-dir {root}`, where the "
        "hub copy has that tag), or convert this copy back with a v3.0-to-v2.1 converter (LeRobot's own "
        "convert_dataset_v21_to_v30.py only goes forward).",
        "请获取 v2.1 版本:从 Hugging Face Hub 下载该数据集的 v2.1 修订版(`huggingface-cli download "
        f"physical-intelligence/libero --repo-type dataset --revision v2.1 --local-dir {root}`,前提是 Hub 上有该标签),"
        "或用 v3.0 转 v2.1 的转换脚本把本地副本转换回去(LeRobot 自带的 convert_dataset_v21_to_v30.py 只能向前转换)。",
        str(info),
    )


def test_check_exits_3_on_a_v3_dataset(world) -> None:
    root = world.assets / "datasets" / "physical-intelligence" / "libero"
    edit_info(root, codebase_version="v3.0", data_path=V3_DATA)
    result = world.cli("check", "--json")
    assert result.code == 3, result.text
    (check,) = [c for c in json.loads(result.out)["checks"] if c["id"] == "assets.dataset"]
    assert check["status"] == "fail" and check["where"] == str(root / "meta" / "info.json")
    assert check["message"].startswith(f"{root} is a LeRobot v3.0 dataset (codebase_version v3.0")


# ---- the other meta files ----


def test_missing_and_empty_meta_files_are_named_all_together(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    meta = root / "meta"
    (meta / "episodes_stats.jsonl").unlink()
    (meta / "tasks.jsonl").unlink()
    (meta / "episodes.jsonl").write_bytes(b"")
    findings, complete, _ = check_dataset_folder(root)
    assert not complete
    finding = only(findings)
    assert finding.id == "assets.dataset-meta"
    assert said(finding) == (
        "fail",
        f"{meta} lacks episodes_stats.jsonl|stats.json, tasks.jsonl, episodes.jsonl",
        f"{meta} 缺少 episodes_stats.jsonl|stats.json, tasks.jsonl, episodes.jsonl",
        *dataset_fix(root),
        str(meta),
    )


def test_stats_json_stands_for_episodes_stats_and_each_meta_file_is_looked_at(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    meta = root / "meta"
    (meta / "episodes_stats.jsonl").rename(meta / "stats.json")
    (meta / "tasks.jsonl").unlink()  # missing: the files after it are still looked at
    (meta / "stats.json").write_bytes(b"")
    finding = only(check_dataset_folder(root)[0])
    assert (finding.id, finding.message.en) == ("assets.dataset-meta", f"{meta} lacks tasks.jsonl, stats.json")


def test_meta_files_that_are_not_json_lines_are_named_with_why(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    meta = root / "meta"
    (meta / "episodes_stats.jsonl").unlink()
    (meta / "tasks.jsonl").unlink()
    (meta / "tasks.jsonl").mkdir()  # refused: the files after it are still looked at
    (meta / "episodes.jsonl").write_bytes(b"PK\x03\x04zip")
    findings, complete, _ = check_dataset_folder(root)
    assert not complete
    finding = only(findings)
    assert finding.id == "assets.dataset-meta"
    assert said(finding) == (
        "fail",
        f"{meta} lacks episodes_stats.jsonl|stats.json; {meta}: tasks.jsonl (a folder is where a file should be), "
        "episodes.jsonl (it does not start with a JSON object)",
        f"{meta} 缺少 episodes_stats.jsonl|stats.json; {meta}:tasks.jsonl(此处应为文件而不是文件夹), "
        "episodes.jsonl(开头不是 JSON 对象)",
        *dataset_fix(root),
        str(meta),
    )


def test_json_lines_after_leading_blanks_pass(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    episodes = root / "meta" / "episodes.jsonl"
    episodes.write_text("\n  " + episodes.read_text())
    findings, complete, _ = check_dataset_folder(root)
    assert complete and [f.id for f in findings] == ["assets.dataset"]


# ---- episode files ----


@pytest.mark.parametrize("pointers", [5, 6])
def test_episodes_left_as_git_lfs_pointers_are_listed_five_at_most(tmp_path: Path, pointers: int) -> None:
    root = dataset(tmp_path, episodes=7)
    for index in range(pointers):
        (root / episode(index)).write_text(LFS_POINTERS[episode(index)])
    findings, complete, _ = check_dataset_folder(root)
    assert not complete
    finding = only(findings)
    listed = ", ".join(episode(i) for i in range(5)) + (" …" if pointers > 5 else "")
    assert finding.id == "assets.dataset-lfs"
    assert said(finding) == (
        "fail",
        f"{pointers} files under {root} are git-lfs pointers, not data (cloned without git-lfs): {listed}",
        f"{root} 下有 {pointers} 个文件是 git-lfs 指针而不是数据(克隆时没有启用 git-lfs):{listed}",
        *lfs_fix(root),
        str(root),
    )


def missing_text(root: Path, missing: int, expected: int, episodes: int, shown: str) -> tuple[str, str]:
    info = root / "meta" / "info.json"
    return (
        f"{missing} of the {expected} episode files under {root} are missing or empty: {shown} (the count is {info}'s"
        f" total_episodes, {episodes})",
        f"{root} 下 {expected} 个剧集文件中有 {missing} 个缺失或为空:{shown}(该数量来自 {info} 中的 total_episodes,"
        f"{episodes})",
    )


def count_fix(root: Path, episodes: int, expected: int, present: int) -> tuple[str, str]:
    info = root / "meta" / "info.json"
    en, zh = dataset_fix(root)
    return (
        f"{en} If the dataset on disk is whole, {info} is wrong instead: it says total_episodes is {episodes}, and "
        f"only {present} of the {expected} files it implies are there; use the info.json that came with the dataset.",
        f"{zh}如果磁盘上的数据集本身完整,那么错的是 {info}:其中 total_episodes 为 {episodes},而按此应有的 {expected} "
        f"个文件只有 {present} 个存在;请使用数据集自带的 info.json。",
    )


@pytest.mark.parametrize(
    "episodes, gone, suspect",
    [(3, (1,), False), (4, (1, 2), False), (3, (0, 2), True)],
    ids=["one-of-three", "half", "most"],
)
def test_missing_episodes_are_listed_and_a_count_mostly_absent_is_questioned(
    tmp_path: Path, episodes: int, gone: tuple[int, ...], suspect: bool
) -> None:
    root = dataset(tmp_path, episodes=episodes)
    for index in gone:
        (root / episode(index)).unlink()
    findings, complete, _ = check_dataset_folder(root)
    assert not complete
    finding = only(findings)
    fix = count_fix(root, episodes, episodes, episodes - len(gone)) if suspect else dataset_fix(root)
    assert finding.id == "assets.dataset-files"
    assert said(finding) == (
        "fail",
        *missing_text(root, len(gone), episodes, episodes, ", ".join(episode(i) for i in gone)),
        *fix,
        str(root / episode(gone[0])),
    )


def test_a_missing_episode_file_of_the_first_template_still_counts_when_the_videos_are_whole(tmp_path: Path) -> None:
    root = dataset(tmp_path, episodes=3, video_keys=(TOP,))
    (root / episode(1)).unlink()
    finding = only(check_dataset_folder(root)[0])
    assert (finding.id, finding.message.en) == ("assets.dataset-files", missing_text(root, 1, 6, 3, episode(1))[0])


def test_a_dataset_without_its_data_folder_misses_every_episode(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    for index in range(3):
        (root / episode(index)).unlink()
    (root / "data" / "chunk-000").rmdir()
    (root / "data").rmdir()
    finding = only(check_dataset_folder(root)[0])
    shown = ", ".join(episode(i) for i in range(3))
    assert said(finding) == (
        "fail",
        *missing_text(root, 3, 3, 3, shown),
        *count_fix(root, 3, 3, 0),
        str(root / episode(0)),
    )


@pytest.mark.parametrize("broken", [5, 6])
def test_episodes_that_are_not_parquet_are_listed_five_at_most_and_still_counted(tmp_path: Path, broken: int) -> None:
    root = dataset(tmp_path, episodes=7)
    for index in range(broken):
        (root / episode(index)).write_bytes(NOT_PARQUET)
    findings, complete, size = check_dataset_folder(root)
    assert not complete
    assert size == broken * len(NOT_PARQUET) + (7 - broken) * len(parquet_bytes())
    finding = only(findings)
    more = broken > 5
    en = ", ".join(f"{episode(i)} ({NO_MAGIC[0]})" for i in range(5)) + (", …" if more else "")
    zh = ", ".join(f"{episode(i)}({NO_MAGIC[1]})" for i in range(5)) + (", …" if more else "")
    assert finding.id == "assets.dataset-content"
    assert said(finding) == (
        "fail",
        f"{broken} of 7 episode files under {root} are not what their names claim: {en}",
        f"{root} 下 7 个剧集文件中有 {broken} 个内容与文件名不符:{zh}",
        *dataset_fix(root),
        str(root),
    )


def test_a_folder_where_an_episode_file_belongs_is_named_as_such(tmp_path: Path) -> None:
    root = dataset(tmp_path)
    (root / episode(1)).unlink()
    (root / episode(1)).mkdir()
    finding = only(check_dataset_folder(root)[0])
    assert finding.id == "assets.dataset-content"
    assert said(finding) == (
        "fail",
        f"1 of 3 episode files under {root} are not what their names claim: {episode(1)} ({FOLDER[0]})",
        f"{root} 下 3 个剧集文件中有 1 个内容与文件名不符:{episode(1)}({FOLDER[1]})",
        *dataset_fix(root),
        str(root),
    )


def test_a_video_that_cannot_be_opened_for_its_box_walk_is_named_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first bytes were read; by the walk of its boxes past them it cannot be opened (permissions changed)."""
    root = dataset(tmp_path, video_keys=(TOP,))
    video = f"videos/chunk-000/{TOP}/episode_000001.mp4"
    for index in range(3):  # moov's header lies past the first 64 bytes: the walk opens each file
        (root / video.replace("000001", f"{index:06d}")).write_bytes(mp4_bytes(body=bytes(100)))
    real = assets.Opened

    def opened(path: str | Path) -> assets.Opened:
        if str(path).endswith(video):
            raise FileRefused(path, Problem.PERMISSION_DENIED)
        return real(path)

    monkeypatch.setattr(assets, "Opened", opened)
    finding = only(check_dataset_folder(root)[0])
    assert (finding.id, finding.message.en, finding.message.zh) == (
        "assets.dataset-content",
        f"1 of 6 episode files under {root} are not what their names claim: {video} (the file is not readable "
        "(permission denied))",
        f"{root} 下 6 个剧集文件中有 1 个内容与文件名不符:{video}(文件不可读(权限不足))",
    )


# ---- files far beyond the first episodes ----


def assert_far_missing(root: Path, finding: Finding) -> None:
    """46 of info.json's 50 episode files missing, the first five named (whether an ellipsis follows them is left
    open: the list is cut at five while the count says 46)."""
    info = root / "meta" / "info.json"
    names = ", ".join(episode(i) for i in range(3, 8))
    assert finding.id == "assets.dataset-files" and finding.status is Status.FAIL
    assert finding.message.en.startswith(f"46 of the 50 episode files under {root} are missing or empty: {names}")
    assert finding.message.en.endswith(f" (the count is {info}'s total_episodes, 50)")
    assert finding.message.zh.startswith(f"{root} 下 50 个剧集文件中有 46 个缺失或为空:{names}")


def test_a_file_at_the_first_episode_past_those_made_counts_and_one_past_the_count_does_not(tmp_path: Path) -> None:
    """info.json claims 50 episodes; 0-2 are on disk, with 10 (the first episode whose path is not made from the
    template: the entries on disk plus five) and 50 (past the last)."""
    root = dataset(tmp_path)
    edit_info(root, total_episodes=50)
    for index in (10, 50):
        (root / episode(index)).write_bytes(parquet_bytes())
    findings, complete, size = check_dataset_folder(root)
    finding = only(findings)
    assert not complete and size == 4 * len(parquet_bytes())
    assert_far_missing(root, finding)
    assert (finding.hint.en, finding.hint.zh) == count_fix(root, 50, 50, 4)
    assert finding.where == str(root / episode(3))


@pytest.mark.parametrize("kind", ["folder", "device"])
def test_something_else_far_beyond_the_first_episodes_is_named_as_such(tmp_path: Path, kind: str) -> None:
    root = dataset(tmp_path)
    edit_info(root, total_episodes=50)
    far = root / episode(30)
    if kind == "folder":
        far.mkdir()
    else:
        far.symlink_to("/dev/zero")
    findings, complete, _ = check_dataset_folder(root)
    assert not complete
    assert [f.id for f in findings] == ["assets.dataset-files", "assets.dataset-content"]
    en, zh = FOLDER if kind == "folder" else DEVICE
    assert_far_missing(root, findings[0])
    assert (findings[1].message.en, findings[1].message.zh) == (
        f"1 of 50 episode files under {root} are not what their names claim: {episode(30)} ({en})",
        f"{root} 下 50 个剧集文件中有 1 个内容与文件名不符:{episode(30)}({zh})",
    )


# ---- folder names and a complete dataset ----


def test_a_video_folder_named_by_text_and_the_video_key_is_found(tmp_path: Path) -> None:
    root = dataset(tmp_path, video_keys=(TOP,))
    edit_info(root, video_path="videos/cam-{video_key}/episode_{episode_index:06d}.mp4")
    (root / "videos" / f"cam-{TOP}").mkdir()
    for index in range(3):
        (root / f"videos/chunk-000/{TOP}/episode_{index:06d}.mp4").rename(
            root / f"videos/cam-{TOP}/episode_{index:06d}.mp4"
        )
    findings, complete, _ = check_dataset_folder(root)
    assert complete and [f.message.en for f in findings] == [
        f"dataset complete: 3 episodes, 6 files, 0.00 GB in {root}"
    ]


def test_a_complete_dataset_says_its_episodes_files_and_size(tmp_path: Path) -> None:
    root = dataset(tmp_path, episodes=2)
    findings, complete, size = check_dataset_folder(root)
    assert complete and size == 2 * len(parquet_bytes())
    finding = only(findings)
    assert (finding.id, finding.status) == ("assets.dataset", Status.PASS)
    assert said(finding) == (
        "pass",
        f"dataset complete: 2 episodes, 2 files, 0.00 GB in {root}",
        f"数据集完整:2 个剧集,2 个文件,0.00 GB:{root}",
        None,
        "",
        str(root),
    )


def test_the_size_of_a_complete_dataset_is_in_decimal_gigabytes(tmp_path: Path) -> None:
    """5,000,000 bytes are 0.005 GB, shown rounded up as 0.01 (a sparse parquet file: a hole between its ends)."""
    root = dataset(tmp_path, episodes=1)
    path = root / episode(0)
    with open(path, "wb") as handle:
        handle.write(b"PAR1")
        handle.seek(5_000_000 - 12)
        handle.write((8).to_bytes(4, "little") * 2 + b"PAR1")
    assert os.path.getsize(path) == 5_000_000
    findings, complete, size = check_dataset_folder(root)
    assert complete and size == 5_000_000
    assert only(findings).message.en == f"dataset complete: 1 episodes, 1 files, 0.01 GB in {root}"
