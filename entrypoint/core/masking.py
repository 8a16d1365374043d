"""Secrets never reach output: one place that knows what a secret looks like, used by every printer and writer.

What is masked (shown as `***`):
- the values of secret-looking names (`*TOKEN*`, `*PASSWORD*`, `*SECRET*`, `*KEY*`, `*CREDENTIAL*`, and the words
  `pass`, `pwd`, `auth`, `sig`, `sign`, `signature`, `ak`, `sk`, `cookie`): variables, trainer flags in both the
  `--flag=value` and `--flag value` forms, query parameters, `name=value` and `name: value` in free text;
- a URL's user info (`https://user:PASS@host/` -> `https://***@host/`) and signed query parameters
  (`X-Amz-Signature`, `X-Amz-Credential`, `sig`, `token`, `q-signature`, `q-ak`, `Signature`, ...);
- `Authorization`/`Cookie` header values, and what `http.client` quotes of a URL's user info
  (`nonnumeric port: 'PASS@host'`);
- every value `remember`ed this process (the secrets a run hands to torchrun), wherever it appears, so training
  output and exception text from libraries cannot echo them either.

`mask_argv`, `masked` (a mapping of variables) and `mask_text` are for display only: what is launched keeps the
real values. `StreamMask` masks remembered values in a byte stream that arrives in arbitrary chunks.
"""

from __future__ import annotations

import io
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TextIO

MASK = "***"
MIN_LITERAL = 6  # shorter values are not masked as free text: that would garble ordinary output

SECRET_NAME = re.compile(r"TOKEN(?!IZ)|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL", re.IGNORECASE)
_SECRET_WORD = re.compile(r"(?:^|[-_.])(?:pass|pwd|auth|sig|sign|signature|ak|sk|cookie)(?:$|[-_.])", re.IGNORECASE)
# Names that contain a secret word but count things: openpi's `--model.max-token-len`, `max_tokens`.
_NOT_SECRET = re.compile(r"tokens?[-_.]?(?:len|length|count|limit|num|per)|(?:max|min|num)[-_.]?tokens?", re.IGNORECASE)

_LONGEST = 1024  # characters of a value a pattern looks at (a secret value longer than this is still hidden whole)
_VALUE = rf"""'[^'\n]{{0,{_LONGEST}}}'|"[^"\n]{{0,{_LONGEST}}}"|[^\s&#'"]{{1,{_LONGEST}}}"""
_ASSIGNMENT = re.compile(rf"""(?P<name>(?<![\w.-])-{{0,2}}[A-Za-z_][\w.-]*)(?P<sep>=|:[ \t]+)(?P<value>{_VALUE})""")
_FLAG_VALUE = re.compile(rf"""(?P<name>(?<![\w-])--?[A-Za-z][\w.-]*)(?P<sep>[ \t]+)(?P<value>(?!-){_VALUE})""")
_QUOTED_PAIR = re.compile(r"""(?P<q>['"])(?P<name>[\w.-]+)(?P=q)(?P<sep>\s*:\s*)(?P<value>'[^']*'|"[^"]*")""")
_QUOTED_FLAG = re.compile(r"""(?P<name>(?P<q>['"])--?[A-Za-z][\w.-]*(?P=q))(?P<sep>,\s*)(?P<value>'[^']*'|"[^"]*")""")
# `scheme:/` too: a URL that went through `Path` lost a slash (`https:/user:PASS@host/...`).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*:/{1,3})(?P<info>[^/?#\s'\"<>]*)@")
_HEADER = re.compile(
    r"(?P<name>\b(?:Proxy-)?Authorization|\bCookie|\bSet-Cookie)(?P<sep>\s*[:=]\s*)(?P<value>[^\r\n]+)", re.I
)
_BEARER = re.compile(r"(?P<name>\b(?:Bearer|Basic|Token))(?P<sep> +)(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_STRONG = re.compile(r"TOKEN(?!IZ)|PASSWORD|PASSWD|SECRET|CREDENTIAL|[-_.]KEY|KEY[-_.]", re.IGNORECASE)
_PORT_USERINFO = re.compile(r"(?P<name>nonnumeric port: )(?P<sep>')(?P<value>[^'@]*)@")

_remembered: set[str] = set()


def secret_name(name: str) -> bool:
    """Whether a variable, flag or parameter name names a credential (`HF_TOKEN`, `--wandb-key`, `sig`)."""
    bare = _NOT_SECRET.sub("", name.strip("'\"").lstrip("-"))
    return bool(SECRET_NAME.search(bare) or _SECRET_WORD.search(bare))


def remember(values: Iterable[str]) -> None:
    """From now on, mask these literal values wherever this process prints or writes them (values `literal`
    refuses are ignored)."""
    _remembered.update(v for v in values if literal(v))


def literal(value: str) -> bool:
    """Whether a secret value is worth masking as a literal everywhere: not shorter than `MIN_LITERAL`, not a path
    (`*_KEY_FILE=/etc/...`), not an ordinary word (`*_KEY_MODE=default`, a password of `welcome`) that output
    would lose everywhere; a real credential has digits or punctuation, or is long."""
    if len(value) < MIN_LITERAL or value == MASK or value.startswith(("/", "./", "../", "~")):
        return False
    return len(value) >= 16 or not value.isalpha()


def forget() -> None:
    """Drop every remembered value (tests)."""
    _remembered.clear()


def mask_text(text: str, known: Iterable[str] = ()) -> str:
    """`text` with every secret it carries masked: remembered and `known` literal values, URL user info, secret
    query parameters and `name=value` pairs, secret flags followed by a value, authorization headers."""
    return _mask_text(text, known, None)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A command line for display: `--secret-flag=value` and `--secret-flag value` lose the value, and each item is
    masked as text (a URL's password, a signed query)."""
    return _mask_argv(argv, None)


def masked(values: Mapping[str, str]) -> dict[str, str]:
    """A sorted copy of variables for display: secret-looking names lose their value, other values are masked as
    text (a URL's user info or signature)."""
    return _masked(values, None)


def mask_data(value: object) -> object:
    """JSON-like data for a log or record: strings masked as text, lists of strings as command lines, the values
    of secret-looking keys hidden."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, Mapping):
        return {
            k: (MASK if isinstance(v, str) and v and secret_name(str(k)) else mask_data(v)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(item, str) for item in value):
            return mask_argv([str(item) for item in value])
        return [mask_data(item) for item in value]
    return value


def mask_json(data: Mapping[str, object]) -> dict[str, object]:
    """`mask_data` for a JSON object (a plan, a record)."""
    return {k: MASK if isinstance(v, str) and v and secret_name(k) else mask_data(v) for k, v in data.items()}


def secrets_in(argv: Sequence[str] = (), env: Mapping[str, str] | None = None) -> set[str]:
    """The secret values a command line and an environment carry (what `mask_argv` and `masked` hide) that are worth
    masking wherever they appear (`literal`)."""
    found: list[str] = []
    _mask_argv(argv, found)
    _masked(env or {}, found)
    return {value for value in found if literal(value)}


class StreamMask:
    """Masks remembered (and given) values in a byte stream that arrives in chunks of any size: a chunk's tail that
    could begin a secret is held back until the next chunk shows whether it does (`flush` gives it up at the end)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        values = {v for v in (*_remembered, *extra) if literal(v)}
        self.secrets = sorted((v.encode("utf-8") for v in values), key=len, reverse=True)
        self.held = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self.secrets:
            return chunk
        data = self.held + chunk
        for secret in self.secrets:
            data = data.replace(secret, MASK.encode())
        keep = self._partial(data)
        self.held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        rest, self.held = self.held, b""
        return rest

    def _partial(self, data: bytes) -> int:
        """The length of the longest tail of `data` that is a proper prefix of a secret."""
        longest = 0
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(data)), longest, -1):
                if data.endswith(secret[:size]):
                    longest = size
                    break
        return longest


class MaskedStream(io.TextIOBase, TextIO):  # TextIO: anything that prints may be given it
    """A text stream that masks what is written (`mask_text` with `known` values) before passing it on."""

    def __init__(self, out: TextIO, known: Iterable[str] = ()) -> None:
        self.out, self.known = out, tuple(known)

    def write(self, text: str) -> int:
        self.out.write(mask_text(text, self.known))
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()


def _hide(found: list[str] | None, value: str) -> str:
    if found is not None:
        found.append(value.strip("'\""))
    return MASK


def _pairs(pattern: re.Pattern[str], text: str, found: list[str] | None, check: bool = True) -> str:
    """`text` with the `value` of each `name sep value` match hidden (only for a secret name when `check`; with a
    colon the name must say more than a bare `key`, as in prose like "write 'key: value' lines"). A value that is
    kept is scanned again, since it may hold pairs of its own (`--url=https://h/?sig=…`): iteratively, and each
    value is bounded (`_LONGEST`), so the work stays linear in practice and no input can exhaust the stack."""
    parts, pos = [], 0
    while (match := pattern.search(text, pos)) is not None:
        name, sep, value, start = match["name"], match["sep"], match["value"], match.start("value")
        parts.append(text[pos:start])
        pos = start
        if value.strip("'\"").startswith(MASK):
            continue
        if check and (not secret_name(name) or (sep.strip().startswith(":") and not _STRONG.search(name))):
            continue
        end = match.end()
        quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] and len(value) > 1 else ""
        if not quote:  # a value as long as the pattern allows may go on: hide all of it
            while end < len(text) and not text[end].isspace() and text[end] not in "&#'\"":
                end += 1
        parts.append(f"{quote}{_hide(found, text[start:end])}{quote}")
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _userinfo(found: list[str] | None) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        info = match["info"]
        if info == MASK:
            return match[0]
        user, _, password = info.partition(":")
        secret = password or user
        for value in {secret, urllib.parse.unquote(secret)}:
            _hide(found, value)
        return f"{match['scheme']}{MASK}@"

    return replace


def _mask_text(text: str, known: Iterable[str], found: list[str] | None) -> str:
    for value in sorted({*_remembered, *(k for k in known if literal(k))}, key=len, reverse=True):
        text = text.replace(value, MASK)
    text = _USERINFO.sub(_userinfo(found), text)
    text = _PORT_USERINFO.sub(lambda m: f"{m['name']}{m['sep']}{_hide(found, m['value'])}@", text)
    text = _pairs(_HEADER, text, found, check=False)
    text = _pairs(_BEARER, text, found, check=False)
    for pattern in (_QUOTED_PAIR, _QUOTED_FLAG, _ASSIGNMENT):
        text = _pairs(pattern, text, found)
    return _pairs(_FLAG_VALUE, text, found)


def _mask_argv(argv: Sequence[str], found: list[str] | None) -> list[str]:
    shown: list[str] = []
    hide_next = False
    for item in argv:
        if hide_next and not item.startswith("-"):
            shown.append(_hide(found, item))
            hide_next = False
            continue
        hide_next = False
        name, eq, value = item.partition("=")
        if item.startswith("-") and secret_name(name):
            if eq:
                shown.append(f"{name}={_hide(found, value)}" if value else item)
            else:
                shown.append(item)
                hide_next = True
            continue
        shown.append(_mask_text(item, (), found))
    return shown


def _masked(values: Mapping[str, str], found: list[str] | None) -> dict[str, str]:
    return {
        k: (_hide(found, v) if secret_name(k) and v else _mask_text(v, (), found)) for k, v in sorted(values.items())
    }


def safe_url(source: str) -> str:
    """`source` safe for logs: a URL loses its user info and query (signed URLs carry credentials there). Never
    raises: a URL with a malformed host or port (`https://[::1/x`, `https://h:99999/x`) is cut as text."""
    try:
        parts = urllib.parse.urlsplit(source)
        port = parts.port
    except ValueError:
        scheme, separator, rest = source.partition("://")
        authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
        path, query_mark, _ = rest[len(authority) :].split("#", 1)[0].partition("?")
        shown = f"{scheme}://{authority.rpartition('@')[2]}{path}" if separator else path
        return shown + ("?…" if query_mark else "")
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path (or a Windows drive letter)
        return source
    host = parts.hostname or ""
    if port is not None:
        host += f":{port}"
    query = "?…" if parts.query else ""
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")) + query
