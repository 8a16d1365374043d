"""What `fetch-assets --dry-run` says about each source's size: one HEAD request per source, all at once, answered
within `HEAD_TIMEOUT_S` (or `--timeout` when shorter); a source that cannot tell says why (offline, an HTTP error,
no Content-Length). Nothing is downloaded or written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from entrypoint.core.messages import Text
from entrypoint.core.numbers import human_bytes
from entrypoint.fetch.manifest import Entry
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.net.download import HeadAnswer, SizeUnknown, head_sizes

HEAD_TIMEOUT_S = 5.0  # a dry run answers in seconds even offline


@dataclass(frozen=True)
class Sizes:
    """Each entry's size line (by name); of the entries with work to do, the total size of the `counted` ones whose
    size is known, and how many are `unknown`."""

    lines: dict[str, Text]
    total: int
    counted: int
    unknown: int

    def summary(self) -> Text:
        amount = human_bytes(self.total)
        if not self.counted:
            return M("dry-run-total-unknown", unknown=self.unknown)
        if self.unknown:
            return M("dry-run-total-partial", amount=amount, count=self.counted, unknown=self.unknown)
        return M("dry-run-total", amount=amount, count=self.counted)


def _line(answer: HeadAnswer, timeout_s: float) -> Text:
    if answer.size is not None:
        return M("size-known", size=human_bytes(answer.size))
    match answer.unknown:
        case SizeUnknown.HTTP:
            return M("size-http", status=answer.status)
        case SizeUnknown.NO_LENGTH:
            return M("size-no-length")
        case SizeUnknown.NOT_A_FILE:
            return M("size-not-a-file")
        case SizeUnknown.UNREACHABLE:
            return M("size-unreachable", reason=answer.reason)
        case _:
            return M("size-no-answer", seconds=timeout_s)


def entry_sizes(entries: Sequence[Entry], work: set[str], timeout_s: float, allow_http: bool) -> Sizes:
    """Ask every entry's source for its size at once; total the entries in `work` (names)."""
    timeout = min(timeout_s, HEAD_TIMEOUT_S)
    answers = head_sizes([e.url for e in entries], timeout, allow_http)
    lines = {e.name: _line(answers[e.url], timeout) for e in entries}
    todo = [answers[e.url].size for e in entries if e.name in work]
    known = [size for size in todo if size is not None]
    return Sizes(lines, sum(known), len(known), len(todo) - len(known))
