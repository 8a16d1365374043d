"""The suite's bounded file looks (tests/support/files.py): a secret across a chunk border is still found, only
what a command wrote is scanned, and a file too big to read whole fails the test instead of being read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.files import file_states, holding, small_bytes, small_text, written_since

SECRET = b"tk-0123456789"


@pytest.mark.parametrize("chunk", [1, 2, 5, 13, 64, 1 << 20], ids=lambda c: f"chunk-{c}")
@pytest.mark.parametrize("at", [0, 1, 60, 63, 64, 65, 120], ids=lambda a: f"at-{a}")
def test_a_needle_is_found_wherever_the_chunks_cut_it(tmp_path: Path, chunk: int, at: int) -> None:
    data = bytearray(b"." * 200)
    data[at : at + len(SECRET)] = SECRET
    path = tmp_path / "f"
    path.write_bytes(bytes(data[:200]))
    assert holding(path, [SECRET, b"never-there"], chunk=chunk) == {SECRET}


@pytest.mark.parametrize(
    "content, needles, found",
    [
        (b"", [SECRET], set()),
        (SECRET[:-1], [SECRET], set()),
        (b"a" + SECRET + b"b" + b"short", [SECRET, b"short"], {SECRET, b"short"}),
        (b"anything", [], set()),
        (b"anything", [b""], set()),
    ],
    ids=["empty-file", "all-but-the-last-byte", "two-needles", "no-needles", "empty-needle"],
)
def test_holding_reports_exactly_the_needles_present(tmp_path: Path, content: bytes, needles, found) -> None:
    path = tmp_path / "f"
    path.write_bytes(content)
    assert holding(path, needles, chunk=4) == found


def test_a_sparse_file_past_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    with open(path, "wb") as handle:
        handle.truncate(8 << 30)  # holes: 8 GiB that would fill memory if read whole
    with pytest.raises(AssertionError, match="more than the"):
        small_bytes(path)
    path.write_bytes("записано\n".encode())
    assert small_text(path) == "записано\n" and small_bytes(path, limit=17) == "записано\n".encode()


def test_only_files_the_command_created_or_changed_are_written(tmp_path: Path) -> None:
    kept, changed, replaced = tmp_path / "kept", tmp_path / "a" / "changed", tmp_path / "replaced"
    changed.parent.mkdir()
    for path in (kept, changed, replaced):
        path.write_bytes(b"before")
    (tmp_path / "link").symlink_to(kept)
    os.utime(changed, ns=(0, 0))  # written long ago: the rewrite below cannot share its time stamp
    before = file_states(tmp_path)
    changed.write_bytes(b"after!")  # the same size
    (tmp_path / "new").write_bytes(b"")
    (tmp_path / "staged").write_bytes(b"before")
    (tmp_path / "staged").replace(replaced)
    (tmp_path / "new-link").symlink_to(kept)
    assert written_since(before, tmp_path) == [changed, tmp_path / "new", replaced]
