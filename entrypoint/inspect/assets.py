"""Asset verification before any GPU time is spent: norm stats, base weights, the LeRobot dataset, tokenizer.

"Verified" means the trainer can read it. Every check reads as little as possible and never trusts what it reads:
files are read through `core.files` (regular files only, never blocking, bounded); JSON metadata is parsed; the
14 GB weights file is checked from its safetensors header and its length as strictly as the safetensors loader;
each episode file is listed once per folder and a few bytes at each end are read (parquet magic and footer, mp4
`ftyp`); a git-lfs pointer where data belongs is named as such. Work is bounded by what is on disk, never by a
number a file claims. Problems carry the path and the fix; nothing here writes.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import string
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.core.files import (
    Ends,
    FileRefused,
    Opened,
    Problem,
    entries,
    overlapped,
    problem_at,
    read_all,
    read_ends,
    read_ends_of,
)
from entrypoint.core.findings import Finding, Status, failed, passed, warned
from entrypoint.core.messages import Text
from entrypoint.core.numbers import INT64_MAX, whole_number
from entrypoint.core.oserror import os_error_text
from entrypoint.core.settings import Settings
from entrypoint.inspect.messages import MESSAGES as M
from entrypoint.inspect.messages import joined, shown, verbatim
from entrypoint.inspect.openpi import (
    NO_WEIGHTS,
    NORM_STATS_FEATURES,
    NORM_STATS_FILE,
    TOKENIZER_RELATIVE,
    TOKENIZER_URL,
)
from entrypoint.inspect.seal import Seal, SealRole, fingerprint, sealed_payload, trusted_verdict
from entrypoint.inspect.tokenizer_fetch import PROBE_TIMEOUT_S, Fetch, probe
from entrypoint.inspect.weights import check_model_weights, orbax_checkpoint

NORM_STATS_KEYS = ("state", "actions")
NORM_STATS_FIELDS = ("mean", "std", "q01", "q99")
JSON_LIMIT = 32 << 20  # norm stats, info.json and config.json are kilobytes; this bounds what a wrong file costs
SAFETENSORS_HEADER_LIMIT = 100_000_000  # the safetensors library's own bound
HEAD_BYTES = 64  # a git-lfs pointer's first line and every magic number looked at here
MP4_MAX_BOXES = 64  # top-level boxes of one mp4 walked (a LeRobot video has 3 or 4)
LFS_POINTER = (b"version https://git-lfs.github.com/spec/", b"version https://hawser.github.com/spec/")
PARQUET_MAGIC = b"PAR1"
# Bits per element of every dtype the safetensors library knows (0.8).
DTYPE_BITS = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "C64": 64,
}
_U64 = 2**64 - 1  # what the safetensors library's offsets and sizes hold
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
    """A file's content is wrong; `text` says how, in both languages; `fix`, when given, replaces the asset's usual
    fix (a git-lfs pointer is fixed by `git lfs pull`, not by copying the file again)."""

    def __init__(self, text: Text, fix: Text | None = None) -> None:
        super().__init__(text.en)
        self.text, self.fix = text, fix


def refused_text(refused: FileRefused) -> Text:
    """Why a file was not read, in words."""
    match refused.problem:
        case Problem.MISSING:
            return M("file-missing")
        case Problem.FOLDER:
            return M("file-is-folder")
        case Problem.PERMISSION_DENIED:
            return M("file-permission-denied")
        case Problem.DANGLING_LINK:
            return M("file-dangling-link", target=shown(refused.detail))
        case Problem.LINK_LOOP:
            return M("file-link-loop")
        case Problem.FIFO:
            return M("file-fifo")
        case Problem.DEVICE | Problem.SOCKET:
            return M("file-special")
        case Problem.NAME_TOO_LONG:
            return M("file-name-too-long")
        case Problem.TOO_BIG:
            return M("file-too-big", size=refused.size, limit=refused.limit)
        case _:
            return M("file-unreadable", error=os_error_text(refused.errno, refused.detail))


def is_lfs_pointer(head: bytes) -> bool:
    """Whether a file starting with `head` is a git-lfs pointer (what a clone without git-lfs leaves)."""
    return head.startswith(LFS_POINTER)


def _lfs_pointer(folder: Path) -> InvalidAsset:
    return InvalidAsset(M("lfs-pointer"), M("lfs-pointer-fix", folder=folder))


class _NonFinite(ValueError):
    """NaN or Infinity in JSON, which strict JSON does not have."""


# What Python's JSON decoder says, in words of both languages (its `msg`, without the position it appends).
_JSON_PROBLEMS = {
    "Expecting value": "json-expecting-value",
    "Expecting ',' delimiter": "json-expecting-comma",
    "Expecting ':' delimiter": "json-expecting-colon",
    "Expecting property name enclosed in double quotes": "json-expecting-name",
    "Extra data": "json-extra-data",
    "Unterminated string starting at": "json-unterminated-string",
    "Invalid control character at": "json-control-character",
    "Invalid \\escape": "json-bad-escape",
}


def _parse_json(data: bytes) -> object:
    """Strict JSON (NaN/Infinity rejected); raise InvalidAsset with a reason in both languages."""

    def reject_constant(name: str) -> object:
        raise _NonFinite(name)

    try:
        return json.loads(data.decode("utf-8"), parse_constant=reject_constant)
    except RecursionError:
        raise InvalidAsset(M("json-too-deep")) from None
    except UnicodeDecodeError as exc:
        raise InvalidAsset(M("file-not-utf8", position=exc.start)) from None
    except _NonFinite as exc:
        raise InvalidAsset(M("json-non-finite", name=str(exc))) from None
    except json.JSONDecodeError as exc:
        known = _JSON_PROBLEMS.get(exc.msg)
        problem = M(known) if known else M("json-syntax", error=exc.msg)
        raise InvalidAsset(M("file-not-json", error=problem, line=exc.lineno, column=exc.colno)) from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise InvalidAsset(M("json-integer-too-long", limit=sys.get_int_max_str_digits())) from None
        raise InvalidAsset(M("json-syntax", error=shown(str(exc), 80))) from None


def _load_json(path: Path) -> object:
    """Read (bounded, never blocking) and parse a JSON file; raise InvalidAsset with a reason."""
    try:
        data = read_all(path, JSON_LIMIT)
    except FileRefused as refused:
        if refused.problem is Problem.TOO_BIG:
            mib = JSON_LIMIT >> 20
            what = M("json-too-big", size=refused.size, mib=round((refused.size or 0) / (1 << 20), 1), limit=mib)
            raise InvalidAsset(what, M("json-too-big-fix", path=path, limit=mib)) from None
        raise InvalidAsset(refused_text(refused)) from None
    if is_lfs_pointer(data):
        raise _lfs_pointer(path.parent)
    return _parse_json(data)


def _finite(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a float's range
        return False


def check_norm_stats(path: Path) -> dict[str, int]:
    """Raise InvalidAsset unless `path` holds openpi norm stats: state/actions x mean/std/q01/q99, lists of equal
    length, finite numbers. Returns each key's length (its dimension)."""
    data = _load_json(path)
    stats = data.get("norm_stats") if isinstance(data, dict) else None
    if not isinstance(stats, dict):
        raise InvalidAsset(M("norm-stats-no-root"))
    dims = {}
    for key in NORM_STATS_KEYS:
        entry = stats.get(key)
        if not isinstance(entry, dict):
            raise InvalidAsset(M("norm-stats-key-missing", key=key))
        lengths = {}
        for name in NORM_STATS_FIELDS:
            values = entry.get(name)
            if not isinstance(values, list) or not values:
                raise InvalidAsset(M("norm-stats-field-missing", key=key, field=name))
            if not all(_finite(v) for v in values):
                raise InvalidAsset(M("norm-stats-not-finite", key=key, field=name))
            lengths[name] = len(values)
        if len(set(lengths.values())) != 1:
            listed = ", ".join(f"{n}={v}" for n, v in lengths.items())
            raise InvalidAsset(M("norm-stats-lengths", key=key, lengths=listed))
        dims[key] = lengths["mean"]
    return dims


def _is_u64(value: object) -> bool:
    return type(value) is int and 0 <= value <= _U64


def _tensor_bits(name: str, info: object) -> tuple[int, int, int]:
    """(start, end, size in bits) of one header entry, as the safetensors library reads it."""
    if not isinstance(info, dict):
        raise InvalidAsset(M("safetensors-bad-offsets", name=shown(name)))
    dtype = info.get("dtype")
    bits = DTYPE_BITS.get(dtype) if isinstance(dtype, str) else None
    if bits is None:
        raise InvalidAsset(M("safetensors-bad-dtype", name=shown(name), dtype=shown(str(dtype))))
    shape = info.get("shape")
    if not isinstance(shape, list) or not all(_is_u64(n) for n in shape):
        raise InvalidAsset(M("safetensors-bad-shape", name=shown(name)))
    count = 1
    for length in shape:  # overflow as the library's checked multiplication sees it, step by step
        count *= length
        if count > _U64:
            raise InvalidAsset(M("safetensors-bad-shape", name=shown(name)))
    offsets = info.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_u64(o) for o in offsets)):
        raise InvalidAsset(M("safetensors-bad-offsets", name=shown(name)))
    if count * bits > _U64:
        raise InvalidAsset(M("safetensors-bad-shape", name=shown(name)))
    return offsets[0], offsets[1], count * bits


def _data_end(header: object) -> int:
    """Where the tensors of a parsed safetensors header end, checked as the library checks them: every entry
    well-formed, the tensors back to back from byte 0 (no gap, no overlap), each exactly shape x dtype long."""
    if not isinstance(header, dict):
        raise InvalidAsset(M("safetensors-header-not-object"))
    metadata = header.get("__metadata__")
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise InvalidAsset(M("safetensors-bad-metadata"))
    spans = sorted((*_tensor_bits(name, info), name) for name, info in header.items() if name != "__metadata__")
    if not spans:
        raise InvalidAsset(M("safetensors-no-tensors"))
    end = 0
    for start, stop, bits, name in spans:
        if start > end:
            raise InvalidAsset(M("safetensors-gap", name=shown(name), start=start, end=end))
        if start < end:
            raise InvalidAsset(M("safetensors-overlap", name=shown(name), start=start, end=end))
        if stop < start:
            raise InvalidAsset(M("safetensors-bad-offsets", name=shown(name)))
        if bits % 8 or stop - start != bits // 8:
            info = header[name]
            raise InvalidAsset(
                M(
                    "safetensors-size-mismatch",
                    name=shown(name),
                    dtype=info["dtype"],
                    shape=shown(str(info["shape"])),
                    expected=f"{bits / 8:g}",
                    actual=stop - start,
                )
            )
        end = stop
    return end


def check_safetensors(path: Path) -> int:
    """Validate a safetensors file from its header and length alone, as strictly as the safetensors loader; return
    its size. Refuses a truncated copy, bytes after the last tensor, gaps or overlaps between tensors, and a
    tensor whose shape x dtype does not fill its byte range."""
    return read_safetensors(path)[0]


def read_safetensors(path: Path) -> tuple[int, dict[str, object]]:
    """`check_safetensors`, also returning the parsed header (every entry a well-formed tensor)."""
    try:
        with Opened(path) as opened:
            size = opened.size
            head = opened.read(0, HEAD_BYTES)
            if is_lfs_pointer(head):
                raise _lfs_pointer(path.parent)
            if len(head) < 8:
                raise InvalidAsset(M("safetensors-too-short", size=size))
            (header_len,) = struct.unpack_from("<Q", head)
            if header_len == 0 or header_len > SAFETENSORS_HEADER_LIMIT or 8 + header_len > size:
                raise InvalidAsset(M("safetensors-header-length", length=header_len, size=size))
            raw = opened.read(8, header_len)
    except FileRefused as refused:
        raise InvalidAsset(refused_text(refused)) from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise InvalidAsset(M("json-too-deep")) from None
    except ValueError:  # UnicodeDecodeError included
        raise InvalidAsset(M("safetensors-header-not-json")) from None
    needed = 8 + header_len + _data_end(header)
    if size < needed:
        raise InvalidAsset(M("safetensors-truncated", size=size, needed=needed))
    if size > needed:
        raise InvalidAsset(M("safetensors-trailing", extra=size - needed, size=size, needed=needed))
    return size, header


def _problem(path: Path, exc: InvalidAsset) -> Text:
    return M("file-problem", path=path, problem=exc.text)


def check_weights(
    weights: Path, train_config: str | None = None, extra_args: Sequence[str] = ()
) -> tuple[list[Finding], int | None]:
    """Check a base weights folder: model.safetensors is whole and, given the job's train config, holds the tensors
    of the model it builds (not a JAX checkpoint); also return its size. config.json, which the trainer does not
    read, is only warned about."""
    fix = M("weights-fix", weights=weights)
    if not weights.is_dir():
        missing = problem_at(weights) in (Problem.MISSING, Problem.DANGLING_LINK)
        what = M("weights-missing" if missing else "weights-not-folder", weights=weights)
        return [failed("assets.weights", what, fix, str(weights))], None
    if (jax := orbax_checkpoint(weights, train_config)) is not None:
        return [jax], None
    findings: list[Finding] = []
    config = weights / "config.json"
    try:  # openpi's trainer never reads it: a problem is worth a warning, not a refusal
        if not isinstance(_load_json(config), dict):
            raise InvalidAsset(M("file-not-json-object"))
    except InvalidAsset as exc:
        what = M("weights-config-unused", path=config, problem=exc.text)
        findings.append(
            warned("assets.weights-config", what, exc.fix or M("weights-config-fix", weights=weights), str(config))
        )
    model = weights / "model.safetensors"
    try:
        size, header = read_safetensors(model)
    except InvalidAsset as exc:
        findings.append(failed("assets.weights-model", _problem(model, exc), exc.fix or fix, str(model)))
        return findings, None
    if train_config is not None:
        findings.append(check_model_weights(header, model, train_config, extra_args))
    if any(f.status is Status.FAIL for f in findings):
        return findings, size
    complete = M("weights-complete", gigabytes=size / 1e9, weights=weights)
    return [passed("assets.weights", complete, str(weights)), *findings], size


def _check_norm_stats(settings: Settings, asset_id: str) -> list[Finding]:
    path = settings.path("assets_base_dir") / settings.train_config / asset_id / NORM_STATS_FILE
    try:
        dims = check_norm_stats(path)
    except InvalidAsset as exc:
        fix = exc.fix or M("norm-stats-fix", path=path)
        return [failed("assets.norm-stats", _problem(path, exc), fix, str(path))]
    short, single = _short_dims(settings, dims)
    fix = M("norm-stats-dims-fix", config=settings.train_config, path=path)
    if short:
        return [failed("assets.norm-stats", M("file-problem", path=path, problem=short), fix, str(path))]
    if single:
        return [warned("assets.norm-stats", M("file-problem", path=path, problem=single), fix, str(path))]
    return [passed("assets.norm-stats", M("norm-stats-valid", path=path), str(path))]


def _feature_dims(info_path: Path) -> dict[str, int]:
    """The last dimension of each feature meta/info.json declares with a shape; empty when it cannot be read (the
    dataset check says why)."""
    try:
        info = _load_json(info_path)
    except InvalidAsset:
        return {}
    features = info.get("features") if isinstance(info, dict) else None
    if not isinstance(features, dict):
        return {}
    dims = {}
    for name, feature in features.items():
        shape = feature.get("shape") if isinstance(feature, dict) else None
        if isinstance(shape, list) and shape and type(shape[-1]) is int:
            dims[name] = shape[-1]
    return dims


def _short_dims(settings: Settings, dims: Mapping[str, int]) -> tuple[Text | None, Text | None]:
    """(why the norm stats are too short to train with, why a single value will stand for every dimension), each
    None when it does not apply. openpi's `Normalize` slices the stats to the data's last dimension and lets numpy
    broadcast: longer stats (padded to the model's 32) work; one value is broadcast to every dimension, so training
    starts but normalises them all alike (a warning); anything between 1 and the data's dimension cannot be
    broadcast and the trainer fails (a failure). Both None when the config's data mapping or the dataset's
    dimensions are not known."""
    sources = NORM_STATS_FEATURES.get(settings.train_config)
    if sources is None or settings.dataset_repo_id is None:
        return None, None
    info = settings.path("lerobot_home") / settings.dataset_repo_id / "meta" / "info.json"
    data = _feature_dims(info)
    short: list[Text] = []
    single: list[Text] = []
    for key, feature in sources.items():
        stats, wanted = dims.get(key), data.get(feature)
        if stats is None or wanted is None or stats >= wanted:
            continue
        entry = M("norm-stats-dims-short", key=key, stats=stats, feature=feature, data=wanted)
        (single if stats == 1 else short).append(entry)
    return (
        M("norm-stats-dims", short=joined(short, "; "), info=info) if short else None,
        M("norm-stats-dims-single", short=joined(single, "; "), info=info) if single else None,
    )


# --- LeRobot v2.x datasets -------------------------------------------------------------------------------------

_CHUNK, _INDEX, _VIDEO_KEY = "episode_chunk", "episode_index", "video_key"
_V3_FIELDS = ("chunk_index", "file_index")
_SPEC = re.compile(r"0?[0-9]{0,2}d?")  # `03d`, `06d`, `d`, `3`: an integer, padded to at most 99 characters
_ABSENT = Problem.MISSING


@dataclass(frozen=True)
class _PathTemplate:
    """One of info.json's path templates, validated: `printf` makes a file's path from its `fields` (in order);
    `components` are the path's parts, literal names or patterns (for listing only folders that can hold episode
    files); `pattern` reads the fields back from a path."""

    printf: str
    fields: tuple[str, ...]
    components: tuple[str | re.Pattern[str], ...]
    pattern: re.Pattern[str]
    index_group: int
    suffix: str

    def path(self, episode: int, chunk_size: int) -> str:
        return self.printf % tuple(episode // chunk_size if f == _CHUNK else episode for f in self.fields)

    def paths(self, count: int, chunk_size: int) -> list[str]:
        """The paths of episodes 0 to count - 1 (the usual field orders formatted without a call per path)."""
        form = self.printf
        if self.fields == (_CHUNK, _INDEX):
            return [form % (e // chunk_size, e) for e in range(count)]
        if self.fields == (_INDEX,):
            return [form % (e,) for e in range(count)]
        return [self.path(e, chunk_size) for e in range(count)]


def _component(part: list[str | tuple[str, str]], digits: str) -> str | re.Pattern[str]:
    """One part of a path template: its name when it is all literal, else a pattern matching the names it makes."""
    literal = [p for p in part if isinstance(p, str)]
    if len(literal) == len(part):
        return "".join(literal)
    return re.compile("".join(re.escape(p) if isinstance(p, str) else digits for p in part))


def _template(key: str, template: str, video_key: str | None = None) -> _PathTemplate:
    """Validate `template` (info.json's `key`; `video_key` fills `{video_key}` of a video template) and compile it;
    raise InvalidAsset saying what is wrong. Only the v2 fields, with a simple integer format, in a relative path."""
    allowed = (_CHUNK, _INDEX) if video_key is None else (_CHUNK, _INDEX, _VIDEO_KEY)

    def bad(reason: Text) -> InvalidAsset:
        return InvalidAsset(M("dataset-template-invalid", key=key, template=shown(template), reason=reason))

    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise bad(M("template-malformed", error=exc)) from None
    pieces: list[str | tuple[str, str] | None] = []  # literal text, a field and its format, None between parts
    for literal, name, spec, conversion in parsed:
        for i, part in enumerate(literal.split("/")):
            pieces += [None] if i else []
            pieces += [part] if part else []
        if name is None:
            continue
        if name not in allowed:
            reason = "template-field-access" if re.split(r"[.\[]", name)[0] in allowed else "template-unknown-field"
            raise bad(M(reason, field=shown(name), allowed=", ".join(allowed)))
        if conversion:
            raise bad(M("template-conversion", field=name, conversion=shown(conversion)))
        if name == _VIDEO_KEY and not spec and video_key is not None:
            pieces.append(video_key)
        elif name != _VIDEO_KEY and _SPEC.fullmatch(spec or ""):
            pieces.append((name, (spec or "").removesuffix("d")))
        else:
            raise bad(M("template-format-spec", field=name, spec=shown(spec or "")))
    parts: list[list[str | tuple[str, str]]] = [[]]
    for piece in pieces:
        if piece is None:
            parts.append([])
        else:
            parts[-1].append(piece)
    components = tuple(_component(part, " *[0-9]+") for part in parts)
    if any(c in ("", ".", "..") for c in components if isinstance(c, str)):
        raise bad(M("template-not-relative"))
    fields = [piece[0] for part in parts for piece in part if isinstance(piece, tuple)]
    if _INDEX not in fields:
        raise bad(M("template-no-index"))
    digits = " *([0-9]+)"
    printf = "/".join(
        "".join(p.replace("%", "%%") if isinstance(p, str) else f"%{p[1]}d" for p in part) for part in parts
    )
    regex = "/".join("".join(re.escape(p) if isinstance(p, str) else digits for p in part) for part in parts)
    last = parts[-1][-1]
    suffix = last.rpartition(".")[2].lower() if isinstance(last, str) and "." in last else ""
    return _PathTemplate(printf, tuple(fields), components, re.compile(regex), fields.index(_INDEX) + 1, suffix)


@dataclass(frozen=True)
class _Layout:
    """What meta/info.json says the dataset holds: its episode count and one template per file of an episode."""

    episodes: int
    chunk_size: int
    templates: tuple[_PathTemplate, ...]


def _v3_version(info: dict[str, object]) -> str | None:
    """The version when info.json describes a LeRobot v3.x (or later) dataset; None for v2.x."""
    version = info.get("codebase_version")
    paths = [info.get(key) for key in ("data_path", "video_path")]
    fields = {f for p in paths if isinstance(p, str) for f in _V3_FIELDS if "{" + f in p}
    if isinstance(version, str) and re.match(r"v?([3-9]|[1-9][0-9]+)(\.|$)", version):
        return version
    return (version if isinstance(version, str) else "?") if fields else None


def _layout(info: object) -> _Layout:
    """Validate info.json's counts and templates; raise InvalidAsset."""
    if not isinstance(info, dict):
        raise InvalidAsset(M("file-not-json-object"))
    episodes = info.get("total_episodes")
    chunk_size = info.get("chunks_size", 1000)
    data_path = info.get("data_path")
    video_path = info.get("video_path")
    features = info.get("features", {})
    if type(episodes) is not int or episodes < 0:
        raise InvalidAsset(M("dataset-episodes-count"))
    if type(chunk_size) is not int or chunk_size < 1:
        raise InvalidAsset(M("dataset-chunk-size"))
    for key, count in (("total_episodes", episodes), ("chunks_size", chunk_size)):
        if count > INT64_MAX:  # json.loads already refused more than 4300 digits
            digits = len(str(count))
            value = str(count) if digits <= 30 else M("number-of-digits", digits=digits)
            raise InvalidAsset(M("dataset-count-range", key=key, value=value, limit=INT64_MAX))
    if not isinstance(data_path, str) or not isinstance(features, dict):
        raise InvalidAsset(M("dataset-templates-missing"))
    templates = [_template("data_path", data_path)]
    video_keys = [k for k, v in features.items() if isinstance(v, dict) and v.get("dtype") == "video"]
    if video_keys:
        if not isinstance(video_path, str):
            raise InvalidAsset(M("dataset-video-path-missing"))
        templates += [_template("video_path", video_path, key) for key in video_keys]
    return _Layout(episodes, chunk_size, tuple(templates))


class _Tree:
    """The dataset folder as listed: each folder once, nothing opened."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self._listings: dict[str, dict[str, Problem | None]] = {}

    def listing(self, folder: str) -> dict[str, Problem | None]:
        """`folder` (relative, '' or ending in '/') listed; empty when it cannot be listed."""
        found = self._listings.get(folder)
        if found is None:
            try:
                found = entries(f"{self.root}/{folder}")
            except FileRefused:
                found = {}
            self._listings[folder] = found
        return found

    def candidates(self, template: _PathTemplate) -> dict[str, Problem | None]:
        """Every entry where `template` can put an episode file (relative path -> None for a regular file, else
        what it is instead), listing only the folders the template's parts can name."""
        folders = [""]
        for component in template.components[:-1]:
            deeper: list[str] = []
            for folder in folders:
                if isinstance(component, str):
                    deeper.append(f"{folder}{component}/")
                    continue
                for name, problem in self.listing(folder).items():
                    if problem is Problem.FOLDER and component.fullmatch(name):
                        deeper.append(f"{folder}{name}/")
            folders = deeper
        return {folder + name: problem for folder in folders for name, problem in self.listing(folder).items()}


@dataclass
class _Census:
    """Episode files found by `_census`: those to read, the missing (how many, the first few), the odd ones."""

    found: list[str] = field(default_factory=list)
    missing: int = 0
    first_missing: list[tuple[int, str]] = field(default_factory=list)
    odd: list[tuple[str, Problem]] = field(default_factory=list)


def _census(tree: _Tree, template: _PathTemplate, layout: _Layout) -> _Census:
    """Match the template's `layout.episodes` paths with what is on disk, in time bounded by the entries on disk
    (never by the episode count written in info.json): paths are made for the first (entries + a few) episodes;
    when info.json claims more, the remaining entries are read back through the template's pattern."""
    present = tree.candidates(template)
    census = _Census()
    made = min(layout.episodes, len(present) + _SHOWN)
    paths = template.paths(made, layout.chunk_size)
    regular = {path for path, problem in present.items() if problem is None}
    census.found = [path for path in paths if path in regular]
    if len(census.found) < made:
        for episode, path in enumerate(paths):
            problem = present.get(path, _ABSENT)
            if problem is _ABSENT:
                census.missing += 1
                if len(census.first_missing) < _SHOWN:
                    census.first_missing.append((episode, path))
            elif problem is not None:
                census.odd.append((path, problem))
    if made < layout.episodes:
        census.missing += layout.episodes - made
        matched = {*census.found, *(path for path, _ in census.odd)}
        for path, problem in present.items():
            match = template.pattern.fullmatch(path) if path not in matched else None
            number = whole_number(match.group(template.index_group)) if match else None
            episode = -1 if number is None else number
            if made <= episode < layout.episodes and template.path(episode, layout.chunk_size) == path:
                census.missing -= 1
                if problem is None:
                    census.found.append(path)
                else:
                    census.odd.append((path, problem))
    return census


def _content_problem(suffix: str, ends: Ends, path: str) -> Text | None:
    """Why the non-empty episode file `path` is not what its name claims, from its first and last bytes (an mp4's
    top-level boxes: `mp4_problem`); None when it is. Raises `FileRefused`."""
    if suffix == "parquet":
        if ends.size < 12 or not ends.head.startswith(PARQUET_MAGIC) or not ends.tail.endswith(PARQUET_MAGIC):
            return M("parquet-no-magic")
        footer = int.from_bytes(ends.tail[-8:-4], "little")
        if footer == 0 or footer + 12 > ends.size:
            return M("parquet-bad-footer", footer=footer, size=ends.size)
    elif suffix == "mp4":
        box = int.from_bytes(ends.head[:4], "big")
        if ends.head[4:8] != b"ftyp" or not 16 <= box <= ends.size:
            return M("mp4-no-ftyp")
        return mp4_problem(path, ends.size, ends.head)
    return None


def mp4_problem(path: str, size: int, head: bytes) -> Text | None:
    """Why an mp4 file that starts with a sound `ftyp` box is not whole, from its top-level boxes: one is cut short,
    runs past the end or is garbled, or they end without the `moov` (the movie's index) and `mdat` (its frames)
    boxes every video has; None when they add up to `size` with both (a box of size 0 runs to the end, as the
    format allows), or when `MP4_MAX_BOXES` boxes came first (a fragmented file: nothing said against it). A box
    header inside `head` costs nothing; those further cost an open and a 16-byte read each (a file written by
    ffmpeg, `ftyp free mdat moov`, needs one; `overlapped` shares these among threads on slow storage). Raises
    `FileRefused`."""
    offset, seen = 0, set()
    with contextlib.ExitStack() as stack:
        opened: Opened | None = None
        for _ in range(MP4_MAX_BOXES):
            if offset == size:
                break
            if offset + 16 <= len(head) or len(head) >= size:
                header = head[offset : offset + 16]
            else:
                opened = opened or stack.enter_context(Opened(path))
                header = opened.read(offset, 16)
            box = int.from_bytes(header[:4], "big")
            if box == 1 and len(header) == 16:  # a 64-bit size follows the type
                box = int.from_bytes(header[8:16], "big")
            elif box == 0 and len(header) >= 8:  # the last box, to the end of the file
                box = size - offset
            if len(header) < 8 or box < 8 or offset + box > size:
                return M("mp4-cut", offset=offset, size=size)
            seen.add(header[4:8])
            offset += box
        else:
            return None
    missing = [kind for kind in (b"moov", b"mdat") if kind not in seen]
    return M("mp4-incomplete", missing=" + ".join(k.decode() for k in missing), size=size) if missing else None


def _mp4_sound(path: str, size: int, head: bytes) -> bool:
    """The fast path's question: whether the boxes add up (a refusal goes to `_judge`, which says why)."""
    try:
        return mp4_problem(path, size, head) is None
    except FileRefused:
        return False


@dataclass
class _Inspection:
    """What reading the episode files found."""

    total: int = 0
    empty: list[str] = field(default_factory=list)
    lfs: list[str] = field(default_factory=list)
    broken: list[Text] = field(default_factory=list)


def _judge(root: str, path: str, ends: Ends | FileRefused, suffix: str, seen: _Inspection) -> None:
    if isinstance(ends, FileRefused):
        seen.broken.append(M("named-problem", path=shown(path), problem=refused_text(ends)))
        return
    seen.total += ends.size
    if not ends.size:
        seen.empty.append(path)
    elif ends.head.startswith(LFS_POINTER):
        seen.lfs.append(path)
    else:
        try:
            problem = _content_problem(suffix, ends, f"{root}/{path}")
        except FileRefused as refused:
            problem = refused_text(refused)
        if problem is not None:
            seen.broken.append(M("named-problem", path=shown(path), problem=problem))


def _read_episode_files(root: str, suffix: str, census: _Census, seen: _Inspection) -> None:
    """Read a few bytes at each end of every episode file found: one open and one or two reads each, no stat for
    the regular files the listing showed; entries that are something else are stat-ed once, to say what. A file
    that passes is judged inline (the common case, thousands of times); anything else goes to `_judge`."""
    tail = 8 if suffix == "parquet" else 0
    results = read_ends_of([f"{root}/{path}" for path in census.found], HEAD_BYTES, tail)
    total = 0
    videos: list[tuple[str, Ends]] = []
    for path, ends in zip(census.found, results, strict=True):
        if type(ends) is Ends:  # the fast path; a refusal and the rest go to _judge
            size, head, last = ends
            if suffix == "parquet":
                footer = int.from_bytes(last[-8:-4], "little")
                good = head[:4] == last[-4:] == PARQUET_MAGIC and size >= 12 and 0 < footer <= size - 12
            elif suffix == "mp4":  # the ftyp box here; the boxes after it below, all files at once
                good = head[4:8] == b"ftyp" and 16 <= int.from_bytes(head[:4], "big") <= size
                if good:
                    videos.append((path, ends))
                    continue
            else:
                good = size > 0 and not head.startswith(LFS_POINTER)
            if good:
                total += size
                continue
        _judge(root, path, ends, suffix, seen)
    walked = overlapped(videos, lambda part: [_mp4_sound(f"{root}/{p}", e.size, e.head) for p, e in part])
    for (path, ends), sound in zip(videos, walked, strict=True):
        if sound:
            total += ends.size
        else:
            _judge(root, path, ends, suffix, seen)
    seen.total += total
    for path, _ in census.odd:
        try:
            _judge(root, path, read_ends(f"{root}/{path}", HEAD_BYTES, tail), suffix, seen)
        except FileRefused as refused:
            _judge(root, path, refused, suffix, seen)


_META_FILES = ("tasks.jsonl", "episodes.jsonl")
_STATS_FILES = ("episodes_stats.jsonl", "stats.json")


def _check_meta(root: Path) -> tuple[list[str], list[Text], list[str]]:
    """The meta files LeRobot reads besides info.json: (missing or empty, broken with why, git-lfs pointers)."""
    meta = root / "meta"
    stats = next((n for n in _STATS_FILES if problem_at(meta / n) is not Problem.MISSING), None)
    missing, broken, lfs = [], [], []
    if stats is None:
        missing.append("|".join(_STATS_FILES))
    for name in (*_META_FILES, *([stats] if stats else [])):
        try:
            ends = read_ends(meta / name, HEAD_BYTES)
        except FileRefused as refused:
            if refused.problem is Problem.MISSING:
                missing.append(name)
            else:
                broken.append(M("named-problem", path=name, problem=refused_text(refused)))
            continue
        if not ends.size:
            missing.append(name)
        elif is_lfs_pointer(ends.head):
            lfs.append(f"meta/{name}")
        elif not ends.head.lstrip().startswith(b"{"):
            broken.append(M("named-problem", path=name, problem=M("meta-not-json-lines")))
    return missing, broken, lfs


def _listed(items: list[str]) -> str:
    return ", ".join(shown(i) for i in items[:_SHOWN]) + (" …" if len(items) > _SHOWN else "")


def check_dataset_folder(root: Path) -> tuple[list[Finding], bool, int]:
    """Check a LeRobot v2.x dataset: meta files parse, every episode file named by the templates exists and is what
    its name claims (a few bytes read at each end), nothing is a git-lfs pointer. Time and memory are bounded by
    what is on disk, whatever info.json claims. Returns the findings, whether the dataset is complete, and the
    episode files' total size."""
    fix = M("dataset-fix", root=root)
    info_path = root / "meta" / "info.json"
    try:
        info = _load_json(info_path)
        if isinstance(info, dict) and (version := _v3_version(info)) is not None:
            v3 = M("dataset-v3", root=root, version=shown(version), data_path=shown(str(info.get("data_path"))))
            v3_fix = M("dataset-v3-fix", repo=f"{root.parent.name}/{root.name}", root=root)
            return [failed("assets.dataset", v3, v3_fix, str(info_path))], False, 0
        layout = _layout(info)
    except InvalidAsset as exc:
        return [failed("assets.dataset", _problem(info_path, exc), exc.fix or fix, str(info_path))], False, 0

    findings: list[Finding] = []
    missing_meta, broken_meta, lfs = _check_meta(root)
    meta_texts = []
    if missing_meta:
        meta_texts.append(M("dataset-meta-missing", folder=root / "meta", names=", ".join(missing_meta)))
    if broken_meta:
        meta_texts.append(M("dataset-meta-broken", folder=root / "meta", problems=joined(broken_meta)))
    if meta_texts:
        findings.append(failed("assets.dataset-meta", joined(meta_texts, "; "), fix, str(root / "meta")))

    tree = _Tree(root)
    seen = _Inspection()
    missing = 0
    first_missing: list[tuple[int, str]] = []
    for template in layout.templates:
        census = _census(tree, template, layout)
        missing += census.missing
        first_missing += census.first_missing
        _read_episode_files(tree.root, template.suffix, census, seen)
    expected = layout.episodes * len(layout.templates)
    lfs += seen.lfs
    if lfs:
        what = M("dataset-lfs", count=len(lfs), root=root, shown=_listed(lfs))
        findings.append(failed("assets.dataset-lfs", what, M("lfs-pointer-fix", folder=root), str(root)))
    gone = [path for _, path in sorted(first_missing)] + seen.empty
    if gone:
        lost = missing + len(seen.empty)
        count = {"info": info_path, "episodes": layout.episodes, "expected": expected}
        what = M("dataset-files-missing", missing=lost, root=root, shown=_listed(gone), **count)
        suspect = lost > expected - lost  # most of what info.json promises is absent: the count itself may be wrong
        what_fix = M("dataset-count-fix", fix=fix, present=expected - lost, **count) if suspect else fix
        findings.append(failed("assets.dataset-files", what, what_fix, str(root / gone[0])))
    if seen.broken:
        listed = joined(seen.broken[:_SHOWN] + ([verbatim("…")] if len(seen.broken) > _SHOWN else []))
        what = M("dataset-files-broken", count=len(seen.broken), expected=expected, root=root, shown=listed)
        findings.append(failed("assets.dataset-content", what, fix, str(root)))
    if not findings:
        complete = M(
            "dataset-complete", episodes=layout.episodes, files=expected, gigabytes=seen.total / 1e9, root=root
        )
        findings.append(passed("assets.dataset", complete, str(root)))
    return findings, all(f.status is Status.PASS for f in findings), seen.total


# --- the tokenizer -----------------------------------------------------------------------------------------------


def _tokenizer_problem(path: Path) -> Text | None:
    """None when `path` can be the tokenizer openpi loads; else why not (missing included)."""
    try:
        ends = read_ends(path, HEAD_BYTES)
    except FileRefused as refused:
        return refused_text(refused)
    if not ends.size:
        return M("file-empty")
    if is_lfs_pointer(ends.head):
        return M("lfs-pointer")
    return None


def find_tokenizer(settings: Settings, env: Mapping[str, str]) -> tuple[Path | None, list[Path]]:
    """Where openpi will find the PaliGemma tokenizer: (the OPENPI_DATA_HOME to use, the places looked at)."""
    candidates: list[Path] = []
    if env.get("OPENPI_DATA_HOME"):
        candidates.append(Path(env["OPENPI_DATA_HOME"]))
    else:
        candidates.append(Path(env.get("HOME", "/root")) / ".cache" / "openpi")
        candidates.append(Path(settings.assets_root) / "cache" / "openpi")
    for home in candidates:
        if _tokenizer_problem(home / TOKENIZER_RELATIVE) is None:
            return home, candidates
    return None, candidates


def _check_tokenizer(settings: Settings, env: Mapping[str, str], download: bool) -> tuple[list[Finding], Path | None]:
    """Staged: pass. Missing everywhere: warn and, with `download`, say whether openpi can download it. A broken
    file where openpi itself looks (the first place): fail, since openpi would load it and crash; a broken staged
    copy elsewhere: warn."""
    home, looked = find_tokenizer(settings, env)
    if home is not None:
        return [passed("assets.tokenizer", M("tokenizer-staged", home=home), str(home / TOKENIZER_RELATIVE))], home
    for index, place in enumerate(looked):
        path = place / TOKENIZER_RELATIVE
        problem = None if problem_at(path) is Problem.MISSING else _tokenizer_problem(path)
        if problem is None:
            continue
        what = M("file-problem", path=path, problem=problem)
        hint = M("tokenizer-broken-fix", path=path)
        report = failed if index == 0 else warned
        return [report("assets.tokenizer", what, hint, str(path))], None
    places = ", ".join(str(p / TOKENIZER_RELATIVE) for p in looked)
    target = looked[-1] / TOKENIZER_RELATIVE
    return [
        warned(
            "assets.tokenizer",
            M("tokenizer-missing", places=places),
            M("tokenizer-missing-fix", target=target),
            str(target),
        ),
        *([_download_finding(env, target)] if download else []),
    ], None


def _download_finding(env: Mapping[str, str], target: Path) -> Finding:
    """Whether openpi can fetch the tokenizer that is not staged (`assets.tokenizer-download`, a node's check): fail
    when this Python lacks gcsfs or the storage endpoint is unreachable (the trainer would fail), warn when the
    endpoint does not answer in time, pass when a download can start."""
    verdict = probe(env)
    fix = M("tokenizer-stage-fix", target=target)
    where = str(target)
    match verdict.state:
        case Fetch.NO_GCSFS:
            what = M("tokenizer-no-gcsfs", url=TOKENIZER_URL, python=sys.executable or "python3")
            return failed("assets.tokenizer-download", what, fix, where)
        case Fetch.UNREACHABLE:
            what = M("tokenizer-unreachable", endpoint=verdict.endpoint, url=TOKENIZER_URL, reason=verdict.reason or "")
            return failed("assets.tokenizer-download", what, fix, where)
        case Fetch.UNKNOWN:
            what = M("tokenizer-unknown", endpoint=verdict.endpoint, seconds=PROBE_TIMEOUT_S)
            return warned("assets.tokenizer-download", what, fix, where)
    return passed("assets.tokenizer-download", M("tokenizer-reachable", endpoint=verdict.endpoint), where)


def _no_weights(settings: Settings) -> list[Finding]:
    """`weights: none`: nothing to check; the trainer starts from random initialisation (`--pytorch-weight-path
    None` replaces the config's own path, a placeholder for pi05_libero)."""
    where = settings.where("weights")
    what = M("weights-none", where=where, config=settings.train_config, flag=f"--pytorch-weight-path {NO_WEIGHTS}")
    return [passed("assets.weights", what, where)]


def inspect_assets(
    settings: Settings,
    env: Mapping[str, str],
    download: bool = False,
    config_known: bool = True,
    seal: Seal | None = None,
    seal_wait_s: float = 0.0,
    started_at: float = 0.0,
) -> AssetReport:
    """Run every asset check the job's settings call for. `download` (a training node's check): when the tokenizer
    is not staged, also whether openpi can download it from this machine (`assets.tokenizer-download`). Without
    `config_known` (openpi has no config of that name: refused elsewhere) nothing is looked up under the config's
    name: no norm stats, no model for the weights. With a `seal` (`inspect.seal`), another node of a multi-node job
    takes node 0's dataset verdict when its seal is valid (waiting up to `seal_wait_s`), and node 0 prepares the
    seal from its own verification."""
    findings: list[Finding] = []
    weights_bytes = None
    if settings.asset_id is not None and config_known:
        findings += _check_norm_stats(settings, settings.asset_id)
    weights = settings.path("weights")
    if weights is not None:
        config = settings.train_config if config_known else None
        found, weights_bytes = check_weights(weights, config, settings.extra_args)
        findings += found
    else:
        findings += _no_weights(settings)
    complete, total, tokenizer_home = False, 0, None
    if settings.dataset_repo_id is not None:
        dataset = settings.path("lerobot_home") / settings.dataset_repo_id
        sealed = trusted_verdict(seal, dataset, seal_wait_s, started_at) if seal is not None else None
        if sealed is not None:
            found, complete, total = [sealed[0]], True, sealed[1]
        else:
            before = fingerprint(dataset) if seal is not None and seal.role is SealRole.WRITE else None
            found, complete, total = check_dataset_folder(dataset)
            if seal is not None:
                sealed_payload(seal, dataset, before, found, total)
        findings += found
        found, tokenizer_home = _check_tokenizer(settings, env, download)
        findings += found
    return AssetReport(tuple(findings), complete, total, weights_bytes, tokenizer_home)
