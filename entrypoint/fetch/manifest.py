"""The `fetch-assets` manifest: which files to fetch, from where, and where each lands in the openpi-assets tree.

The built-in manifest (`data/assets-manifest.yaml`) is the seed's step 2 for pi05_libero. `--manifest FILE` replaces
it with a file of the same shape; `--base-url` replaces its `base_url`. Anything malformed is a mis-specified
request: `UserError` with exit code 2, naming the file, the entry and the key.
"""

from __future__ import annotations

import difflib
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from entrypoint.core.errors import JobMisspecified, UserError
from entrypoint.core.files import FileRefused, Problem, describe, read_text
from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text
from entrypoint.core.yamlfile import YamlProblem, parse
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.fetch.unpack import FORMATS, ArchiveFormat, archive_format
from entrypoint.net.source import DownloadError, check_scheme, local_path, source_name, split_url

BUILTIN = Path(__file__).resolve().parent.parent / "data" / "assets-manifest.yaml"
ENTRY_KEYS = ("name", "about", "url", "into", "to", "provides", "check", "size", "sha256", "optional", "format")
TOP_KEYS = ("base_url", "entries")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_MAX_SIZE = 2**63 - 1


class AssetCheck(StrEnum):
    """How a copy found in place is recognised as complete (the checks of `vla-entrypoint check`)."""

    LEROBOT_DATASET = "lerobot-dataset"
    LEROBOT_DATASETS = "lerobot-datasets"  # a folder of datasets
    NORM_STATS = "norm-stats"
    WEIGHTS = "weights"
    FILE = "file"  # a non-empty file
    NONE = "none"  # never adopted: always fetched


@dataclass(frozen=True)
class Entry:
    """One file to fetch. `url` is resolved (absolute URL or path); archives have `into` and a `format`, single
    files `to`."""

    name: str
    url: str
    into: str | None
    to: str | None
    provides: tuple[str, ...]
    check: AssetCheck
    size: int | None
    sha256: str | None
    optional: bool
    about: str
    format: ArchiveFormat | None

    @property
    def archive(self) -> bool:
        return self.into is not None

    @property
    def file_name(self) -> str:
        return source_name(self.url)

    @property
    def target(self) -> str:
        """Where the entry lands, relative to the assets root: the folder an archive unpacks into, or the file."""
        target = self.into if self.into is not None else self.to
        assert target is not None  # exactly one of them: checked when the manifest is read
        return target


@dataclass(frozen=True)
class Manifest:
    source: str  # "built-in" or the file's path
    base_url: str | None
    entries: tuple[Entry, ...]


def _bad(where: str, what: Text, fix: Text) -> UserError:
    return JobMisspecified("fetch.manifest", where, what, fix)


def _read(path: Path, label: str, given: bool) -> Any:
    """The manifest's YAML (read bounded, only from a regular file; strict YAML: see `core.yamlfile`)."""
    try:
        text = read_text(path)
    except FileRefused as refused:
        if refused.problem is Problem.MISSING and given:
            raise _bad("--manifest", M("manifest-missing", path=path), M("manifest-missing-fix")) from None
        where = "--manifest" if given else label
        what = M("manifest-unreadable", path=path, error=describe(refused))
        raise _bad(where, what, M("manifest-unreadable-fix")) from None
    try:
        return parse(text)
    except YamlProblem as exc:
        at = M("yaml-position", line=exc.line, column=exc.column) if exc.line is not None else ""
        where = f"{label}{at.en if isinstance(at, Text) else ''}"
        what = M("manifest-yaml", label=label, at=at, problem=exc.problem)
        raise _bad(where, what, M("manifest-yaml-fix")) from None


def _unknown(keys: Iterable[object], known: Sequence[str], where: str) -> None:
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = M("did-you-mean", name=close[0]) if close else M("known-keys", keys=", ".join(known))
            raise _bad(f"{where}.{key}", M("unknown-key", key=key, where=where), hint)


def _relative(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(where, M("path-empty", where=where), M("path-empty-fix"))
    path = PurePosixPath(value.strip())
    if path.is_absolute() or ".." in path.parts or "\0" in value:
        raise _bad(where, M("path-leaves-root", where=where, value=repr(value)), M("path-leaves-root-fix"))
    return str(path)


def _scheme(text: str) -> str:
    """The URL scheme of `text`, lower-cased ('' for a path), read without parsing the rest (a malformed host or
    port is `check_source`'s to report)."""
    match = _SCHEME.match(text)
    return match[1].lower() if match else ""


def resolve_url(base_url: str | None, url: str, where: str) -> str:
    """An entry's URL: as is when absolute (scheme or '/'), else joined to `base_url`."""
    if len(_scheme(url)) > 1 or url.startswith("/"):
        return url
    if not base_url:
        raise _bad(where, M("relative-without-base", where=where, url=repr(url)), M("relative-without-base-fix"))
    if _scheme(base_url) in ("http", "https", "file"):
        return base_url.rstrip("/") + "/" + url.lstrip("/")
    return str(Path(base_url) / url)


def check_source(url: str, where: str, allow_http: bool) -> None:
    """Exit 2 for a source the download policy refuses (scheme, plain http without --allow-http, no file name)."""
    try:
        check_scheme(url, allow_http)
    except DownloadError as error:
        raise JobMisspecified("fetch.url", where, error.what, M("url-refused-fix", fix=error.fix)) from None
    if local_path(url) is None:
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname or any(c.isspace() or ord(c) < 32 for c in url):
            raise JobMisspecified("fetch.url", where, M("url-invalid", url=repr(safe_url(url))), M("url-invalid-fix"))
        if not source_name(url):
            raise JobMisspecified("fetch.url", where, M("url-no-file", url=safe_url(url)), M("url-no-file-fix"))


def load_manifest(path: str | None = None, base_url: str | None = None) -> Manifest:
    """Read and validate the manifest (built in, or `path`), with `base_url` overriding the file's."""
    file = Path(path) if path else BUILTIN
    label = str(file) if path else "built-in manifest"
    data = _read(file, label, bool(path))
    if not isinstance(data, dict):
        raise _bad(label, M("manifest-not-mapping", label=label), M("manifest-not-mapping-fix"))
    _unknown(data, TOP_KEYS, label)
    base = base_url if base_url is not None else data.get("base_url")
    base_where = "--base-url" if base_url is not None else f"{label}: base_url"
    if base is not None and (not isinstance(base, str) or not base.strip()):
        raise _bad(base_where, M("base-url-invalid"), M("base-url-invalid-fix"))
    if isinstance(base, str) and _scheme(base) in ("http", "https"):
        try:
            split_url(base)
        except DownloadError as error:
            raise _bad(base_where, error.what, M("base-url-malformed-fix", where=base_where)) from None
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list) or not raw_entries:
        raise _bad(f"{label}: entries", M("no-entries", label=label), M("no-entries-fix"))
    entries = [_entry(raw, f"{label}: entries[{index}]", base) for index, raw in enumerate(raw_entries)]
    names = [e.name for e in entries]
    for name in names:
        if names.count(name) > 1:
            raise _bad(f"{label}: entries", M("duplicate-name", name=name), M("duplicate-name-fix"))
    return Manifest(label, base, tuple(entries))


def _entry(raw: object, where: str, base: str | None) -> Entry:
    if not isinstance(raw, dict):
        raise _bad(where, M("entry-not-mapping", where=where), M("entry-not-mapping-fix"))
    _unknown(raw, ENTRY_KEYS, where)
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _bad(f"{where}.name", M("bad-name", where=where, name=repr(name)), M("bad-name-fix"))
    where = f"{where} ({name})"
    url = raw.get("url")
    if not isinstance(url, str) or not url.strip():
        raise _bad(f"{where}.url", M("no-url", where=where), M("no-url-fix"))
    url = resolve_url(base, url.strip(), f"{where}.url")
    if ("into" in raw) == ("to" in raw):
        raise _bad(where, M("into-or-to", where=where), M("into-or-to-fix"))
    into = _relative(raw["into"], f"{where}.into") if "into" in raw else None
    to = _relative(raw["to"], f"{where}.to") if "to" in raw else None
    given = raw.get("format")
    kind: ArchiveFormat | None = None
    if into is not None:
        kind = FORMATS.get("." + str(given).lstrip(".")) if given is not None else archive_format(source_name(url))
        if kind is None:
            formats = ", ".join(FORMATS)
            raise _bad(
                f"{where}.url",
                M("unknown-format", where=where, name=repr(source_name(url))),
                M("unknown-format-fix", formats=formats),
            )
    elif given is not None:
        raise _bad(f"{where}.format", M("format-not-archive", where=where), M("format-not-archive-fix"))
    provides_raw = raw.get("provides", to if to is not None else [])
    provides_list = [provides_raw] if isinstance(provides_raw, str) else provides_raw
    if not isinstance(provides_list, list):
        raise _bad(f"{where}.provides", M("provides-invalid", where=where), M("provides-invalid-fix"))
    provides = tuple(_relative(p, f"{where}.provides") for p in provides_list)
    check = _check(raw.get("check", AssetCheck.FILE if to is not None else AssetCheck.NONE), where)
    if check is not AssetCheck.NONE and not provides:
        raise _bad(
            f"{where}.provides", M("check-needs-provides", where=where, check=check), M("check-needs-provides-fix")
        )
    size = raw.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= _MAX_SIZE):
        raise _bad(f"{where}.size", M("size-invalid", where=where, size=repr(size)), M("size-invalid-fix"))
    sha = raw.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not _SHA256.match(sha)):
        raise _bad(f"{where}.sha256", M("sha256-invalid", where=where), M("sha256-invalid-fix"))
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise _bad(f"{where}.optional", M("optional-invalid", where=where), M("optional-invalid-fix"))
    about = raw.get("about", "")
    return Entry(name, url, into, to, provides, check, size, sha.lower() if sha else None, optional, str(about), kind)


def _check(value: object, where: str) -> AssetCheck:
    if isinstance(value, str) and value in AssetCheck.__members__.values():
        return AssetCheck(value)
    checks = ", ".join(AssetCheck)
    raise _bad(
        f"{where}.check",
        M("check-unknown", where=where, check=repr(value), checks=checks),
        M("check-unknown-fix", checks=checks),
    )


def select(manifest: Manifest, only: Sequence[str], skip: Sequence[str]) -> list[Entry]:
    """The entries `--only`/`--skip` leave (names may be comma-separated); unknown names exit 2 with a suggestion."""
    names = [e.name for e in manifest.entries]

    def split(values: Sequence[str]) -> list[str]:
        return [n.strip() for v in values for n in v.split(",") if n.strip()]

    wanted, unwanted = split(only), split(skip)
    for flag, values in (("--only", wanted), ("--skip", unwanted)):
        for name in values:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                listed = ", ".join(names)
                fix = (
                    M("unknown-entry-fix-close", close=close[0], names=listed)
                    if close
                    else M("unknown-entry-fix", names=listed)
                )
                raise JobMisspecified("fetch.entry", flag, M("unknown-entry", flag=flag, name=name), fix)
    return [e for e in manifest.entries if (not wanted or e.name in wanted) and e.name not in unwanted]
