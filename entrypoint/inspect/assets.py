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
from entrypoint.inspect.messages import MESSAGES as M
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

    def __init__(self, text: Text) -> None:
        super().__init__(text.en)
        self.text = text


def _unreadable(exc: OSError) -> InvalidAsset:
    """Why a file could not be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return InvalidAsset(M("file-missing"))
    if isinstance(exc, IsADirectoryError):
        return InvalidAsset(M("file-is-folder"))
    if isinstance(exc, PermissionError):
        return InvalidAsset(M("file-permission-denied"))
    return InvalidAsset(M("file-unreadable", error=exc.strerror or exc))


def _load_json(path: Path) -> Any:
    """Parse strict JSON (NaN/Infinity rejected); raise InvalidAsset with a reason."""

    def reject_constant(name: str) -> Any:
        raise ValueError(f"non-finite number {name}")

    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"), parse_constant=reject_constant)
    except OSError as exc:
        raise _unreadable(exc) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidAsset(M("file-not-json", error=exc)) from None


def check_norm_stats(path: Path) -> None:
    """Raise InvalidAsset unless `path` holds openpi norm stats: state/actions x mean/std/q01/q99, lists of equal
    length, finite numbers."""
    data = _load_json(path)
    stats = data.get("norm_stats") if isinstance(data, dict) else None
    if not isinstance(stats, dict):
        raise InvalidAsset(M("norm-stats-no-root"))
    for key in NORM_STATS_KEYS:
        entry = stats.get(key)
        if not isinstance(entry, dict):
            raise InvalidAsset(M("norm-stats-key-missing", key=key))
        lengths = {}
        for name in NORM_STATS_FIELDS:
            values = entry.get(name)
            if not isinstance(values, list) or not values:
                raise InvalidAsset(M("norm-stats-field-missing", key=key, field=name))
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
                raise InvalidAsset(M("norm-stats-not-finite", key=key, field=name))
            lengths[name] = len(values)
        if len(set(lengths.values())) != 1:
            shown = ", ".join(f"{n}={v}" for n, v in lengths.items())
            raise InvalidAsset(M("norm-stats-lengths", key=key, lengths=shown))


def check_safetensors(path: Path) -> int:
    """Validate a safetensors file by header and length without reading the tensors; return its size.

    Catches a truncated copy: the file must be at least 8 + header + the largest data offset bytes long.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise InvalidAsset(M("safetensors-too-short", size=size))
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len == 0 or header_len > _MAX_HEADER or 8 + header_len > size:
                raise InvalidAsset(M("safetensors-header-length", length=header_len, size=size))
            header = json.loads(handle.read(header_len).decode("utf-8"))
    except OSError as exc:
        raise _unreadable(exc) from None
    except (UnicodeDecodeError, ValueError):
        raise InvalidAsset(M("safetensors-header-not-json")) from None
    if not isinstance(header, dict):
        raise InvalidAsset(M("safetensors-header-not-object"))
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
            raise InvalidAsset(M("safetensors-bad-offsets", name=name))
        end = max(end, offsets[1])
    if not end:
        raise InvalidAsset(M("safetensors-no-tensors"))
    needed = 8 + header_len + end
    if size < needed:
        raise InvalidAsset(M("safetensors-truncated", size=size, needed=needed))
    return size


def _problem(path: Path, exc: InvalidAsset) -> Text:
    return M("file-problem", path=path, problem=exc.text)


def check_weights(weights: Path) -> tuple[list[Finding], int | None]:
    """Check a base weights folder: config.json parses, model.safetensors is whole; also return its size."""
    fix = M("weights-fix", weights=weights)
    if not weights.is_dir():
        return [failed("assets.weights", M("weights-missing", weights=weights), fix, str(weights))], None
    findings: list[Finding] = []
    config = weights / "config.json"
    try:
        if not isinstance(_load_json(config), dict):
            raise InvalidAsset(M("file-not-json-object"))
    except InvalidAsset as exc:
        findings.append(failed("assets.weights-config", _problem(config, exc), fix, str(config)))
    model = weights / "model.safetensors"
    try:
        size = check_safetensors(model)
    except InvalidAsset as exc:
        findings.append(failed("assets.weights-model", _problem(model, exc), fix, str(model)))
        return findings, None
    if findings:
        return findings, size
    complete = M("weights-complete", gigabytes=size / 1e9, weights=weights)
    return [passed("assets.weights", complete, str(weights))], size


def _check_norm_stats(settings: Settings, asset_id: str) -> list[Finding]:
    path = settings.path("assets_base_dir") / settings.train_config / asset_id / NORM_STATS_FILE
    try:
        check_norm_stats(path)
    except InvalidAsset as exc:
        return [failed("assets.norm-stats", _problem(path, exc), M("norm-stats-fix", path=path), str(path))]
    return [passed("assets.norm-stats", M("norm-stats-valid", path=path), str(path))]


def _expected_files(info_path: Path) -> tuple[int, list[str]]:
    """The episode count and every episode file `meta/info.json` names; raises InvalidAsset, or KeyError,
    IndexError or ValueError for a path template with an unknown field."""
    info = _load_json(info_path)
    if not isinstance(info, dict):
        raise InvalidAsset(M("file-not-json-object"))
    episodes = info.get("total_episodes")
    chunk_size = info.get("chunks_size", 1000)
    data_path = info.get("data_path")
    video_path = info.get("video_path")
    features = info.get("features", {})
    if not isinstance(episodes, int) or isinstance(episodes, bool) or episodes < 0:
        raise InvalidAsset(M("dataset-episodes-count"))
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise InvalidAsset(M("dataset-chunk-size"))
    if not isinstance(data_path, str) or not isinstance(features, dict):
        raise InvalidAsset(M("dataset-templates-missing"))
    video_keys = [k for k, v in features.items() if isinstance(v, dict) and v.get("dtype") == "video"]
    templates = [data_path]
    if video_keys:
        if not isinstance(video_path, str):
            raise InvalidAsset(M("dataset-video-path-missing"))
        templates += [video_path.replace("{video_key}", key) for key in video_keys]
    return episodes, [
        t.format(episode_chunk=ep // chunk_size, episode_index=ep) for ep in range(episodes) for t in templates
    ]


def check_dataset_folder(root: Path) -> tuple[list[Finding], bool, int]:
    """Check a LeRobot v2.x dataset: meta files parse and every episode file named by the templates exists.
    Returns the findings, whether the dataset is complete, and the episode files' total size."""
    fix = M("dataset-fix", root=root)
    info_path = root / "meta" / "info.json"
    try:
        episodes, expected = _expected_files(info_path)
    except InvalidAsset as exc:
        return [failed("assets.dataset", _problem(info_path, exc), fix, str(info_path))], False, 0
    except (KeyError, IndexError, ValueError) as exc:
        what = M("dataset-template-field", path=info_path, error=exc)
        return [failed("assets.dataset", what, fix, str(info_path))], False, 0

    findings: list[Finding] = []
    meta_missing = [name for name in ("tasks.jsonl", "episodes.jsonl") if not _non_empty(root / "meta" / name)]
    if not (_non_empty(root / "meta" / "episodes_stats.jsonl") or _non_empty(root / "meta" / "stats.json")):
        meta_missing.append("episodes_stats.jsonl|stats.json")
    if meta_missing:
        what = M("dataset-meta-missing", folder=root / "meta", names=", ".join(meta_missing))
        findings.append(failed("assets.dataset-meta", what, fix, str(root / "meta")))
    sizes = _file_sizes(root, _folders(expected))
    missing = [p for p in expected if sizes.get(p, 0) <= 0]
    total = sum(sizes.get(p, 0) for p in expected)
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (" …" if len(missing) > _SHOWN else "")
        what = M("dataset-files-missing", missing=len(missing), expected=len(expected), root=root, shown=shown)
        findings.append(failed("assets.dataset-files", what, fix, str(root / missing[0])))
    if not findings:
        complete = M("dataset-complete", episodes=episodes, files=len(expected), gigabytes=total / 1e9, root=root)
        findings.append(passed("assets.dataset", complete, str(root)))
    return findings, all(f.status is Status.PASS for f in findings), total


def _non_empty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _folders(paths: list[str]) -> set[str]:
    """`str(Path(p).parent)` of every path, worked out once per folder: thousands of episode files share a few.
    Only a last part pathlib drops ('' or '.') makes the folder depend on more than the text before the last '/'."""
    folders: set[str] = set()
    seen: set[str] = set()
    for path in paths:
        head, slash, name = path.rpartition("/")
        if name in ("", "."):
            folders.add(str(Path(path).parent))
        elif head + slash not in seen:
            seen.add(head + slash)
            folders.add(str(Path(path).parent))
    return folders


def _file_sizes(root: Path, folders: set[str]) -> dict[str, int]:
    """Sizes of regular files in the given folders (relative to root), one directory listing per folder."""
    sizes: dict[str, int] = {}
    for folder in folders:
        prefix = f"{folder}/" if folder != "." else ""
        try:
            with os.scandir(root / folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_file():
                            sizes[prefix + entry.name] = entry.stat().st_size
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
        return [passed("assets.tokenizer", M("tokenizer-staged", home=home), str(home / TOKENIZER_RELATIVE))], home
    places = ", ".join(str(p / TOKENIZER_RELATIVE) for p in looked)
    target = looked[-1] / TOKENIZER_RELATIVE
    return [
        warned(
            "assets.tokenizer",
            M("tokenizer-missing", places=places),
            M("tokenizer-missing-fix", target=target),
            str(target),
        )
    ], None


def inspect_assets(settings: Settings, env: Mapping[str, str]) -> AssetReport:
    """Run every asset check the job's settings call for."""
    findings: list[Finding] = []
    weights_bytes = None
    if settings.asset_id is not None:
        findings += _check_norm_stats(settings, settings.asset_id)
    weights = settings.path("weights")
    if weights is not None:
        found, weights_bytes = check_weights(weights)
        findings += found
    complete, total, tokenizer_home = False, 0, None
    if settings.dataset_repo_id is not None:
        found, complete, total = check_dataset_folder(settings.path("lerobot_home") / settings.dataset_repo_id)
        findings += found
        found, tokenizer_home = _check_tokenizer(settings, env)
        findings += found
    return AssetReport(tuple(findings), complete, total, weights_bytes, tokenizer_home)
