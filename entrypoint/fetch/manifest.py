"""The `fetch-assets` manifest: which files to fetch, from where, and where each lands in the openpi-assets tree.

The built-in manifest (`data/assets-manifest.yaml`) is the seed's step 2 for pi05_libero. `--manifest FILE` replaces
it with a file of the same shape; `--base-url` replaces its `base_url`. Anything malformed is a mis-specified
request: `UserError` with exit code 2, naming the file, the entry and the key.
"""

from __future__ import annotations

import difflib
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from entrypoint.core.errors import JobMisspecified, UserError
from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text
from entrypoint.fetch.unpack import FORMATS, archive_format
from entrypoint.net.download import DownloadError, check_scheme, local_path, source_name

BUILTIN = Path(__file__).resolve().parent.parent / "data" / "assets-manifest.yaml"
ENTRY_KEYS = ("name", "about", "url", "into", "to", "provides", "check", "size", "sha256", "optional", "format")
TOP_KEYS = ("base_url", "entries")
CHECKS = ("lerobot-dataset", "lerobot-datasets", "norm-stats", "weights", "file", "none")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass(frozen=True)
class Entry:
    """One file to fetch. `url` is resolved (absolute URL or path); archives have `into`, single files `to`."""

    name: str
    url: str
    into: str | None
    to: str | None
    provides: tuple[str, ...]
    check: str
    size: int | None
    sha256: str | None
    optional: bool
    about: str
    format: str | None  # gzip | tar | bz2 | xz for archives

    @property
    def archive(self) -> bool:
        return self.into is not None

    @property
    def file_name(self) -> str:
        return source_name(self.url)

    @property
    def target(self) -> str:
        """Where the entry lands, relative to the assets root: the folder an archive unpacks into, or the file."""
        return self.into if self.into is not None else self.to  # type: ignore[return-value]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": safe_url(self.url),
            "into": self.into,
            "to": self.to,
            "provides": list(self.provides),
            "check": self.check,
            "size": self.size,
            "sha256": self.sha256,
            "optional": self.optional,
            "about": self.about,
        }


@dataclass(frozen=True)
class Manifest:
    source: str  # "built-in" or the file's path
    base_url: str | None
    entries: tuple[Entry, ...]


def _bad(where: str, en: str, zh: str, fix_en: str, fix_zh: str) -> UserError:
    return JobMisspecified("fetch.manifest", where, Text(en, zh), Text(fix_en, fix_zh))


def _read(path: Path, label: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(
            label,
            f"cannot read the manifest {path}: {exc}",
            f"无法读取清单 {path}:{exc}",
            "Give a readable UTF-8 YAML file to --manifest.",
            "请为 --manifest 提供可读的 UTF-8 YAML 文件。",
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise _bad(
            f"{label}{at}",
            f"the manifest {label} is not valid YAML{at}: {getattr(exc, 'problem', exc)}",
            f"清单 {label} 不是合法的 YAML{at}:{getattr(exc, 'problem', exc)}",
            "Fix the syntax at that line (check indentation and quotes).",
            "请修正该行语法(检查缩进与引号)。",
        ) from None


def _unknown(keys: Any, known: Sequence[str], where: str) -> None:
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = (
                (f"Did you mean '{close[0]}'?", f"是否应为 '{close[0]}'?")
                if close
                else (f"Known keys: {', '.join(known)}.", f"可用的键:{', '.join(known)}。")
            )
            raise _bad(f"{where}.{key}", f"unknown key '{key}' in {where}", f"{where} 中有未知的键 '{key}'", *hint)


def _relative(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(
            where,
            f"{where} must be a non-empty relative path",
            f"{where} 必须是非空的相对路径",
            "Give a path relative to the assets root, such as datasets.",
            "请填写相对于资源根目录的路径,例如 datasets。",
        )
    path = PurePosixPath(value.strip())
    if path.is_absolute() or ".." in path.parts or "\0" in value:
        raise _bad(
            where,
            f"{where}={value!r} leaves the assets root",
            f"{where}={value!r} 指向资源根目录之外",
            "Use a path inside the assets root (no leading '/', no '..').",
            "请使用资源根目录内的路径(不以 '/' 开头,不含 '..')。",
        )
    return str(path)


def resolve_url(base_url: str | None, url: str, where: str) -> str:
    """An entry's URL: as is when absolute (scheme or '/'), else joined to `base_url`."""
    parts = urllib.parse.urlsplit(url)
    if (parts.scheme and len(parts.scheme) > 1) or url.startswith("/"):
        return url
    if not base_url:
        raise _bad(
            where,
            f"{where}={url!r} is relative but the manifest has no base_url",
            f"{where}={url!r} 是相对地址,但清单没有 base_url",
            "Add base_url to the manifest or pass --base-url.",
            "请在清单中添加 base_url,或使用 --base-url。",
        )
    base_parts = urllib.parse.urlsplit(base_url)
    if base_parts.scheme in ("http", "https", "file"):
        return base_url.rstrip("/") + "/" + url.lstrip("/")
    return str(Path(base_url) / url)


def check_source(url: str, where: str, allow_http: bool) -> None:
    """Exit 2 for a source the download policy refuses (scheme, plain http without --allow-http, no file name)."""
    try:
        check_scheme(url, allow_http)
    except DownloadError as error:
        raise JobMisspecified(
            "fetch.url",
            where,
            error.what,
            Text(error.fix.en + " (plain http needs --allow-http)", error.fix.zh + "(明文 http 需要 --allow-http)"),
        ) from None
    if local_path(url) is None:
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname or any(c.isspace() or ord(c) < 32 for c in url):
            raise JobMisspecified(
                "fetch.url",
                where,
                Text(f"{safe_url(url)!r} is not a valid URL", f"{safe_url(url)!r} 不是合法的地址"),
                Text(
                    "Give a URL such as https://host/path/file.tar.gz (spaces must be written %20).",
                    "请填写形如 https://host/path/file.tar.gz 的地址(空格须写作 %20)。",
                ),
            )
        if not source_name(url):
            raise JobMisspecified(
                "fetch.url",
                where,
                Text(f"{safe_url(url)} names no file", f"{safe_url(url)} 未指明文件名"),
                Text("Give the URL of the file itself.", "请提供文件本身的地址。"),
            )


def load_manifest(path: str | None = None, base_url: str | None = None) -> Manifest:
    """Read and validate the manifest (built in, or `path`), with `base_url` overriding the file's."""
    file = Path(path) if path else BUILTIN
    label = str(file) if path else "built-in manifest"
    if path and not file.is_file():
        raise _bad(
            "--manifest",
            f"the manifest {file} does not exist",
            f"清单 {file} 不存在",
            "Check the path given to --manifest.",
            "请检查 --manifest 的路径。",
        )
    data = _read(file, label)
    if not isinstance(data, dict):
        raise _bad(
            label,
            f"the manifest {label} must be a mapping with 'entries'",
            f"清单 {label} 必须是含 'entries' 的映射",
            "Start from the built-in manifest (see the README).",
            "请参照内置清单编写(见 README)。",
        )
    _unknown(data, TOP_KEYS, label)
    base = base_url if base_url is not None else data.get("base_url")
    if base is not None and (not isinstance(base, str) or not base.strip()):
        raise _bad(
            f"{label}: base_url",
            "base_url must be a URL or a folder path",
            "base_url 必须是地址或目录路径",
            "Give the URL the files are under.",
            "请填写文件所在的地址。",
        )
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list) or not raw_entries:
        raise _bad(
            f"{label}: entries",
            f"the manifest {label} lists no entries",
            f"清单 {label} 没有任何条目",
            "Add a list under 'entries:'.",
            "请在 'entries:' 下添加列表。",
        )
    entries: list[Entry] = []
    for index, raw in enumerate(raw_entries):
        entries.append(_entry(raw, f"{label}: entries[{index}]", base))
    names = [e.name for e in entries]
    for name in names:
        if names.count(name) > 1:
            raise _bad(
                f"{label}: entries",
                f"two entries are named '{name}'",
                f"有两个条目都叫 '{name}'",
                "Give every entry its own name.",
                "请为每个条目取不同的名称。",
            )
    return Manifest(label, base, tuple(entries))


def _entry(raw: Any, where: str, base: str | None) -> Entry:
    if not isinstance(raw, dict):
        raise _bad(
            where,
            f"{where} must be a mapping (name, url, into or to, …)",
            f"{where} 必须是映射(name、url、into 或 to …)",
            "Write each entry as 'key: value' lines under '- name: …'.",
            "请以 '- name: …' 开头、逐行写 'key: value'。",
        )
    _unknown(raw, ENTRY_KEYS, where)
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _bad(
            f"{where}.name",
            f"{where}.name={name!r} is not a plain name",
            f"{where}.name={name!r} 不是合法名称",
            "Use letters, digits, '.', '_', '-'.",
            "请只用字母、数字、'.'、'_'、'-'。",
        )
    where = f"{where} ({name})"
    url = raw.get("url")
    if not isinstance(url, str) or not url.strip():
        raise _bad(
            f"{where}.url",
            f"{where} has no url",
            f"{where} 缺少 url",
            "Add the file's URL (or a path relative to base_url).",
            "请填写文件地址(或相对 base_url 的路径)。",
        )
    url = resolve_url(base, url.strip(), f"{where}.url")
    if ("into" in raw) == ("to" in raw):
        raise _bad(
            where,
            f"{where} needs exactly one of 'into' (an archive) or 'to' (a single file)",
            f"{where} 必须且只能有 'into'(归档)或 'to'(单个文件)之一",
            "Archives unpack 'into' a folder; single files are saved 'to' a path.",
            "归档用 'into' 指定解压目录;单个文件用 'to' 指定路径。",
        )
    into = _relative(raw["into"], f"{where}.into") if "into" in raw else None
    to = _relative(raw["to"], f"{where}.to") if "to" in raw else None
    kind = raw.get("format")
    if into is not None:
        kind = FORMATS.get("." + str(kind).lstrip(".")) if kind is not None else archive_format(source_name(url))
        if kind is None:
            raise _bad(
                f"{where}.url",
                f"{where}: cannot tell the archive type of {source_name(url)!r}",
                f"{where}:无法判断 {source_name(url)!r} 的归档类型",
                f"Use one of {', '.join(FORMATS)} or set format.",
                f"请使用 {', '.join(FORMATS)} 之一,或设置 format。",
            )
    elif kind is not None:
        raise _bad(
            f"{where}.format",
            f"{where}: 'format' applies to archives ('into') only",
            f"{where}:'format' 只适用于归档('into')",
            "Remove format, or unpack the file with into.",
            "请删除 format,或改用 into 解压。",
        )
    provides_raw = raw.get("provides", to if to is not None else [])
    provides_list = [provides_raw] if isinstance(provides_raw, str) else provides_raw
    if not isinstance(provides_list, list):
        raise _bad(
            f"{where}.provides",
            f"{where}.provides must be a path or a list of paths",
            f"{where}.provides 必须是路径或路径列表",
            "List what the entry puts in place, relative to the assets root.",
            "请列出该条目放置的内容(相对资源根目录)。",
        )
    provides = tuple(_relative(p, f"{where}.provides") for p in provides_list)
    check = raw.get("check", "file" if to is not None else "none")
    if check not in CHECKS:
        raise _bad(
            f"{where}.check",
            f"{where}.check={check!r} is not one of {', '.join(CHECKS)}",
            f"{where}.check={check!r} 不是 {', '.join(CHECKS)} 之一",
            f"Use one of {', '.join(CHECKS)}.",
            f"请使用 {', '.join(CHECKS)} 之一。",
        )
    if check not in ("none",) and not provides:
        raise _bad(
            f"{where}.provides",
            f"{where}: check '{check}' needs 'provides'",
            f"{where}:check '{check}' 需要 'provides'",
            "Say which path the check looks at.",
            "请说明检查哪个路径。",
        )
    size = raw.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise _bad(
            f"{where}.size",
            f"{where}.size={size!r} is not a byte count",
            f"{where}.size={size!r} 不是字节数",
            "Give the size in bytes, or leave it out.",
            "请填写字节数,或省略。",
        )
    sha = raw.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not _SHA256.match(sha)):
        raise _bad(
            f"{where}.sha256",
            f"{where}.sha256 is not 64 hexadecimal digits",
            f"{where}.sha256 不是 64 位十六进制数",
            "Paste the output of sha256sum, or leave it out.",
            "请粘贴 sha256sum 的输出,或省略。",
        )
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise _bad(
            f"{where}.optional",
            f"{where}.optional must be true or false",
            f"{where}.optional 必须是 true 或 false",
            "Write optional: true or leave it out.",
            "请写 optional: true 或省略。",
        )
    about = raw.get("about", "")
    return Entry(name, url, into, to, provides, check, size, sha.lower() if sha else None, optional, str(about), kind)


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
                raise JobMisspecified(
                    "fetch.entry",
                    flag,
                    Text(
                        f"{flag} names '{name}', which the manifest does not have", f"{flag} 指定的 '{name}' 不在清单中"
                    ),
                    Text(
                        (f"Did you mean '{close[0]}'? " if close else "") + f"Entries: {', '.join(names)}.",
                        (f"是否应为 '{close[0]}'?" if close else "") + f"条目:{', '.join(names)}。",
                    ),
                )
    return [e for e in manifest.entries if (not wanted or e.name in wanted) and e.name not in unwanted]
