"""Asset verification before any GPU time is spent: norm stats, base weights, the LeRobot dataset, tokenizer.

Every check reads as little as possible: JSON metadata is parsed, the 14 GB weights file is checked by its
safetensors header and its length, and the dataset's episode files are listed once per chunk folder.
Problems carry the path and the fix; nothing here writes.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.core.findings import Finding, Status, failed, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.settings import Settings
from entrypoint.inspect.openpi import NORM_STATS_FILE, TOKENIZER_RELATIVE

NORM_STATS_KEYS = ("state", "actions")
NORM_STATS_FIELDS = ("mean", "std", "q01", "q99")
_MAX_HEADER = 100 * 1024 * 1024
_SHOWN = 5


@dataclass(frozen=True)
class AssetReport:
    """Findings plus facts later steps use: dataset completeness and sizes, where the tokenizer was found."""

    findings: tuple[Finding, ...]
    dataset_complete: bool
    dataset_bytes: int
    weights_bytes: int | None
    tokenizer_home: Path | None


class InvalidAsset(Exception):
    """A file's content is wrong; `text` says how, in both languages."""

    def __init__(self, en: str, zh: str) -> None:
        super().__init__(en)
        self.text = Text(en, zh)


def _load_json(path: Path) -> Any:
    """Parse strict JSON (NaN/Infinity rejected); raise InvalidAsset with a reason."""

    def reject_constant(name: str) -> Any:
        raise ValueError(f"non-finite number {name}")

    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"), parse_constant=reject_constant)
    except FileNotFoundError:
        raise InvalidAsset("the file is missing", "文件不存在") from None
    except IsADirectoryError:
        raise InvalidAsset("a folder is where a file should be", "此处应为文件而不是文件夹") from None
    except PermissionError:
        raise InvalidAsset("the file is not readable (permission denied)", "文件不可读(权限不足)") from None
    except OSError as exc:
        raise InvalidAsset(
            f"the file cannot be read: {exc.strerror or exc}", f"文件无法读取:{exc.strerror or exc}"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidAsset(f"the file is not valid JSON: {exc}", f"文件不是合法的 JSON:{exc}") from None


def check_norm_stats(path: Path) -> None:
    """Raise InvalidAsset unless `path` holds openpi norm stats: state/actions x mean/std/q01/q99, equal lengths, finite."""
    data = _load_json(path)
    stats = data.get("norm_stats") if isinstance(data, dict) else None
    if not isinstance(stats, dict):
        raise InvalidAsset("no top-level 'norm_stats' object", "缺少顶层 'norm_stats' 对象")
    for key in NORM_STATS_KEYS:
        entry = stats.get(key)
        if not isinstance(entry, dict):
            raise InvalidAsset(f"'norm_stats.{key}' is missing", f"缺少 'norm_stats.{key}'")
        lengths = {}
        for name in NORM_STATS_FIELDS:
            values = entry.get(name)
            if not isinstance(values, list) or not values:
                raise InvalidAsset(
                    f"'norm_stats.{key}.{name}' is missing or empty (pi05 needs quantiles q01/q99)",
                    f"'norm_stats.{key}.{name}' 缺失或为空(pi05 需要分位数 q01/q99)",
                )
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
                raise InvalidAsset(
                    f"'norm_stats.{key}.{name}' holds a non-numeric or non-finite value",
                    f"'norm_stats.{key}.{name}' 含非数值或非有限值",
                )
            lengths[name] = len(values)
        if len(set(lengths.values())) != 1:
            shown = ", ".join(f"{n}={v}" for n, v in lengths.items())
            raise InvalidAsset(
                f"'norm_stats.{key}' lists have different lengths ({shown})",
                f"'norm_stats.{key}' 各列表长度不一致({shown})",
            )


def check_safetensors(path: Path) -> int:
    """Validate a safetensors file by header and length without reading the tensors; return its size.

    Catches a truncated copy: the file must be at least 8 + header + the largest data offset bytes long.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise InvalidAsset(
                    f"the file is {size} bytes, too short for a safetensors header",
                    f"文件只有 {size} 字节,不足以容纳 safetensors 头",
                )
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len == 0 or header_len > _MAX_HEADER or 8 + header_len > size:
                raise InvalidAsset(
                    f"the header length {header_len} does not fit a {size}-byte file (truncated or not safetensors)",
                    f"头长度 {header_len} 与 {size} 字节的文件不符(文件被截断或不是 safetensors)",
                )
            header = json.loads(handle.read(header_len).decode("utf-8"))
    except FileNotFoundError:
        raise InvalidAsset("the file is missing", "文件不存在") from None
    except PermissionError:
        raise InvalidAsset("the file is not readable (permission denied)", "文件不可读(权限不足)") from None
    except IsADirectoryError:
        raise InvalidAsset("a folder is where a file should be", "此处应为文件而不是文件夹") from None
    except OSError as exc:
        raise InvalidAsset(
            f"the file cannot be read: {exc.strerror or exc}", f"文件无法读取:{exc.strerror or exc}"
        ) from None
    except (UnicodeDecodeError, ValueError):
        raise InvalidAsset(
            "the safetensors header is not valid JSON (corrupt file)", "safetensors 头不是合法 JSON(文件损坏)"
        ) from None
    if not isinstance(header, dict):
        raise InvalidAsset("the safetensors header is not an object (corrupt file)", "safetensors 头不是对象(文件损坏)")
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            raise InvalidAsset(
                f"tensor '{name}' has no valid data_offsets (corrupt header)",
                f"张量 '{name}' 的 data_offsets 无效(头损坏)",
            )
        end = max(end, offsets[1])
    if not end:
        raise InvalidAsset("the file holds no tensors", "文件中没有任何张量")
    needed = 8 + header_len + end
    if size < needed:
        raise InvalidAsset(
            f"the file is truncated: {size} bytes but its header needs {needed}",
            f"文件被截断:实际 {size} 字节,头部声明需要 {needed} 字节",
        )
    return size


def check_weights(weights: Path) -> tuple[list[Finding], int | None]:
    fix = Text(
        f"Copy the converted PyTorch weights (config.json, model.safetensors) to {weights} again, or set VLA_WEIGHTS.",
        f"请重新把转换后的 PyTorch 权重(config.json、model.safetensors)复制到 {weights},或设置 VLA_WEIGHTS。",
    )
    if not weights.is_dir():
        return [
            failed(
                "assets.weights",
                Text(f"the base weights folder {weights} does not exist", f"基座权重目录 {weights} 不存在"),
                fix,
                str(weights),
            )
        ], None
    findings: list[Finding] = []
    config = weights / "config.json"
    try:
        if not isinstance(_load_json(config), dict):
            raise InvalidAsset("it is not a JSON object", "不是 JSON 对象")
    except InvalidAsset as exc:
        findings.append(
            failed(
                "assets.weights-config", Text(f"{config}: {exc.text.en}", f"{config}:{exc.text.zh}"), fix, str(config)
            )
        )
    model = weights / "model.safetensors"
    size = None
    try:
        size = check_safetensors(model)
    except InvalidAsset as exc:
        findings.append(
            failed("assets.weights-model", Text(f"{model}: {exc.text.en}", f"{model}:{exc.text.zh}"), fix, str(model))
        )
    if not findings:
        findings.append(
            passed(
                "assets.weights",
                Text(
                    f"base weights complete ({size / 1e9:.2f} GB) in {weights}",
                    f"基座权重完整({size / 1e9:.2f} GB):{weights}",
                ),
                str(weights),
            )
        )
    return findings, size


def _check_norm_stats(settings: Settings) -> list[Finding]:
    path = settings.path("assets_base_dir") / settings.train_config / settings.asset_id / NORM_STATS_FILE
    try:
        check_norm_stats(path)
    except InvalidAsset as exc:
        return [
            failed(
                "assets.norm-stats",
                Text(f"{path}: {exc.text.en}", f"{path}:{exc.text.zh}"),
                Text(
                    f"Download the dataset's norm_stats.json to {path} (it ships with the dataset; see the README).",
                    f"请把数据集附带的 norm_stats.json 下载到 {path}(参见 README)。",
                ),
                str(path),
            )
        ]
    return [passed("assets.norm-stats", Text(f"norm stats valid: {path}", f"归一化统计量有效:{path}"), str(path))]


def check_dataset(settings: Settings) -> tuple[list[Finding], bool, int]:
    """Check a LeRobot v2.x dataset: meta files parse and every episode file named by the templates exists."""
    root = settings.path("lerobot_home") / settings.dataset_repo_id
    fix = Text(
        f"Download and unpack the dataset so that {root} is complete (see the README's asset steps).",
        f"请下载并解压数据集,使 {root} 完整(参见 README 的资源准备步骤)。",
    )
    info_path = root / "meta" / "info.json"
    try:
        info = _load_json(info_path)
        if not isinstance(info, dict):
            raise InvalidAsset("it is not a JSON object", "不是 JSON 对象")
        episodes = info.get("total_episodes")
        chunk_size = info.get("chunks_size", 1000)
        data_path = info.get("data_path")
        video_path = info.get("video_path")
        features = info.get("features", {})
        if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 0:
            raise InvalidAsset("'total_episodes' is missing or not a count", "'total_episodes' 缺失或不是计数")
        if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
            raise InvalidAsset("'chunks_size' is not a positive integer", "'chunks_size' 不是正整数")
        if not isinstance(data_path, str) or not isinstance(features, dict):
            raise InvalidAsset("'data_path' or 'features' is missing", "缺少 'data_path' 或 'features'")
        video_keys = [k for k, v in features.items() if isinstance(v, dict) and v.get("dtype") == "video"]
        if video_keys and not isinstance(video_path, str):
            raise InvalidAsset(
                "video features are declared but 'video_path' is missing", "声明了视频特征但缺少 'video_path'"
            )
        templates = [data_path] + [video_path.replace("{video_key}", key) for key in video_keys]
        expected = [
            t.format(episode_chunk=ep // chunk_size, episode_index=ep) for ep in range(episodes) for t in templates
        ]
    except InvalidAsset as exc:
        return (
            [
                failed(
                    "assets.dataset",
                    Text(f"{info_path}: {exc.text.en}", f"{info_path}:{exc.text.zh}"),
                    fix,
                    str(info_path),
                )
            ],
            False,
            0,
        )
    except (KeyError, IndexError, ValueError) as exc:
        return (
            [
                failed(
                    "assets.dataset",
                    Text(
                        f"{info_path}: a path template names an unknown field ({exc})",
                        f"{info_path}:路径模板含未知字段({exc})",
                    ),
                    fix,
                    str(info_path),
                )
            ],
            False,
            0,
        )

    findings: list[Finding] = []
    meta_missing = [name for name in ("tasks.jsonl", "episodes.jsonl") if not _non_empty(root / "meta" / name)]
    if not (_non_empty(root / "meta" / "episodes_stats.jsonl") or _non_empty(root / "meta" / "stats.json")):
        meta_missing.append("episodes_stats.jsonl|stats.json")
    if meta_missing:
        findings.append(
            failed(
                "assets.dataset-meta",
                Text(
                    f"{root / 'meta'} lacks {', '.join(meta_missing)}",
                    f"{root / 'meta'} 缺少 {', '.join(meta_missing)}",
                ),
                fix,
                str(root / "meta"),
            )
        )
    sizes = _file_sizes(root, {str(Path(p).parent) for p in expected})
    missing = [p for p in expected if sizes.get(p, 0) <= 0]
    total = sum(sizes.get(p, 0) for p in expected)
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (" …" if len(missing) > _SHOWN else "")
        findings.append(
            failed(
                "assets.dataset-files",
                Text(
                    f"{len(missing)} of {len(expected)} episode files under {root} are missing or empty: {shown}",
                    f"{root} 下 {len(expected)} 个剧集文件中有 {len(missing)} 个缺失或为空:{shown}",
                ),
                fix,
                str(root / missing[0]),
            )
        )
    if not findings:
        findings.append(
            passed(
                "assets.dataset",
                Text(
                    f"dataset complete: {episodes} episodes, {len(expected)} files, {total / 1e9:.2f} GB in {root}",
                    f"数据集完整:{episodes} 个剧集,{len(expected)} 个文件,{total / 1e9:.2f} GB:{root}",
                ),
                str(root),
            )
        )
    return findings, all(f.status is Status.PASS for f in findings), total


def _non_empty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _file_sizes(root: Path, folders: set[str]) -> dict[str, int]:
    """Sizes of regular files in the given folders (relative to root), one directory listing per folder."""
    sizes: dict[str, int] = {}
    for folder in folders:
        try:
            with os.scandir(root / folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_file():
                            sizes[f"{folder}/{entry.name}" if folder != "." else entry.name] = entry.stat().st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return sizes


def find_tokenizer(settings: Settings, env: Mapping[str, str]) -> tuple[Path | None, list[Path]]:
    """Where openpi will find the PaliGemma tokenizer: (the OPENPI_DATA_HOME to use, the places looked at)."""
    candidates: list[Path] = []
    if env.get("OPENPI_DATA_HOME"):
        candidates.append(Path(env["OPENPI_DATA_HOME"]))
    else:
        candidates.append(Path(env.get("HOME", "/root")) / ".cache" / "openpi")
        candidates.append(Path(settings.assets_root) / "cache" / "openpi")
    for home in candidates:
        if _non_empty(home / TOKENIZER_RELATIVE):
            return home, candidates
    return None, candidates


def _check_tokenizer(settings: Settings, env: Mapping[str, str]) -> tuple[list[Finding], Path | None]:
    home, looked = find_tokenizer(settings, env)
    if home is not None:
        return [
            passed(
                "assets.tokenizer",
                Text(f"PaliGemma tokenizer staged in {home}", f"PaliGemma 分词器已就位:{home}"),
                str(home / TOKENIZER_RELATIVE),
            )
        ], home
    places = ", ".join(str(p / TOKENIZER_RELATIVE) for p in looked)
    target = looked[-1] / TOKENIZER_RELATIVE
    return [
        warned(
            "assets.tokenizer",
            Text(
                f"the PaliGemma tokenizer is not staged (looked at {places}); openpi will try to download it",
                f"PaliGemma 分词器未就位(已查找 {places});openpi 将尝试联网下载",
            ),
            Text(
                f"Copy paligemma_tokenizer.model to {target} so offline jobs do not hang.",
                f"请把 paligemma_tokenizer.model 复制到 {target},避免离线任务卡住。",
            ),
            str(target),
        )
    ], None


def inspect_assets(settings: Settings, env: Mapping[str, str]) -> AssetReport:
    """Run every asset check the job's settings call for."""
    findings: list[Finding] = []
    weights_bytes = None
    if settings.asset_id is not None:
        findings += _check_norm_stats(settings)
    weights = settings.path("weights")
    if weights is not None:
        found, weights_bytes = check_weights(weights)
        findings += found
    complete, total, tokenizer_home = False, 0, None
    if settings.dataset_repo_id is not None:
        found, complete, total = check_dataset(settings)
        findings += found
        found, tokenizer_home = _check_tokenizer(settings, env)
        findings += found
    return AssetReport(tuple(findings), complete, total, weights_bytes, tokenizer_home)
