"""Streaming archive extraction that a later process can resume mid-archive (for `fetch-assets`).

An archive is decoded as its bytes arrive and its members are written one by one, so the archive itself never
sits on disk. What makes that resumable is a *checkpoint*: a point in the compressed input where decoding can start
again without the bytes before it. For gzip that is a deflate block boundary plus the 32 KiB window that came
before it and the few bits of the boundary byte (zlib's `inflatePrime`/`inflateSetDictionary`, the technique of
zlib's `examples/zran.c`), reached through ctypes because Python's `zlib` module does not expose block boundaries.
Each checkpoint also carries the running CRC-32 of the gzip member (so the trailer is still verified) and the saved
state of the archive's sha256 (`download.ResumableSha256`), so a resumed download is verified as a whole too.
A plain `.tar` can restart at any byte. Without libz through ctypes, and for `.tar.bz2`/`.tar.xz`, the standard
library decodes without checkpoints: a later run then reads the archive from its start again but skips the members
already written.

`Extractor` walks the tar stream (Python's `tarfile` in stream mode, every member passed through
`tarfile.data_filter`), writes into a staging folder, appends each finished member to a journal, and every few
seconds hands `persist` an `ExtractState`: the newest checkpoint at or before what is safely on disk, the number of
finished members, and — inside a large member such as a 14 GB weights file — how far that member's file got, so
even an interruption in the middle of one huge file resumes close to where it stopped.
"""

from __future__ import annotations

import base64
import bz2
import ctypes
import ctypes.util
import json
import lzma
import os
import tarfile
import time
import weakref
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO, TypedDict

from entrypoint.core.messages import Text
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.net.download import ResumableSha256


class ArchiveFormat(StrEnum):
    """How an archive is compressed (the manifest's `format`)."""

    GZIP = "gzip"
    TAR = "tar"  # not compressed
    BZ2 = "bz2"
    XZ = "xz"


class MemberKind(StrEnum):
    """A journaled member's type (`t` in `members.jsonl`, the third field of `done.json`'s files)."""

    FILE = "f"
    HARDLINK = "h"
    SYMLINK = "l"
    DIRECTORY = "d"
    SKIPPED = "-"  # a device or pipe: not unpacked, not journaled


FORMATS = {
    ".tar.gz": ArchiveFormat.GZIP,
    ".tgz": ArchiveFormat.GZIP,
    ".tar": ArchiveFormat.TAR,
    ".tar.bz2": ArchiveFormat.BZ2,
    ".tbz2": ArchiveFormat.BZ2,
    ".tar.xz": ArchiveFormat.XZ,
    ".txz": ArchiveFormat.XZ,
}
_OUT = 1 << 18  # decoded bytes per step
_IN = 1 << 18  # compressed bytes per step for the standard-library decoders
_BLOCK = 512
_TAR_BUFFER = 128 << 10  # how far tarfile reads ahead of the member it parses
_COPY = 256 << 10  # bytes per write of a member's file: what is on disk lags what was decoded by about this much
_MAGIC = {ArchiveFormat.GZIP: 0x1F, ArchiveFormat.BZ2: ord("B"), ArchiveFormat.XZ: 0xFD}  # a stream's first byte


def archive_format(name: str) -> ArchiveFormat | None:
    """The format a file name's suffix says; None for anything else."""
    lower = name.lower()
    for suffix, kind in sorted(FORMATS.items(), key=lambda item: -len(item[0])):
        if lower.endswith(suffix):
            return kind
    return None


class ArchiveError(Exception):
    """The archive's bytes are wrong: corrupt or truncated compressed data, an unsafe member, a bad tar header."""

    def __init__(self, text: Text) -> None:
        super().__init__(text.en)
        self.text = text


def _refused(at: int, detail: str) -> ArchiveError:
    """The error for data a decoder refused; zlib's failed gzip trailer checks are named as such."""
    if "incorrect data check" in detail:
        return ArchiveError(M("gzip-crc", at=at))
    if "incorrect length check" in detail:
        return ArchiveError(M("gzip-length", at=at))
    return ArchiveError(M("corrupt-data", at=at, detail=detail))


@dataclass
class Checkpoint:
    """Where decoding can start again: compressed offset (`in_offset`), decoded offset (`out_offset`), and for raw
    deflate the unused `bits` of the byte before, that byte (`prime`), the window, and the gzip member's CRC/length."""

    in_offset: int
    out_offset: int
    raw: bool = False
    bits: int = 0
    prime: int = 0
    window: bytes = b""
    crc: int = 0
    member_out: int = 0
    sha_state: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["window"] = base64.b64encode(self.window).decode()
        data["sha_state"] = base64.b64encode(self.sha_state).decode() if self.sha_state is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        values = dict(data)
        values["window"] = base64.b64decode(values.get("window") or "")
        values["sha_state"] = base64.b64decode(values["sha_state"]) if values.get("sha_state") else None
        return cls(**values)


class Decoder(Protocol):
    resumable: bool
    captured: Checkpoint | None

    def step(self, buf: bytes, pos: int) -> tuple[bytes, int]: ...

    def finish(self) -> None: ...


# ---------------------------------------------------------------- gzip through libz (resumable)


class _ZStream(ctypes.Structure):
    _fields_ = [
        ("next_in", ctypes.c_void_p),
        ("avail_in", ctypes.c_uint),
        ("total_in", ctypes.c_ulong),
        ("next_out", ctypes.c_void_p),
        ("avail_out", ctypes.c_uint),
        ("total_out", ctypes.c_ulong),
        ("msg", ctypes.c_char_p),
        ("state", ctypes.c_void_p),
        ("zalloc", ctypes.c_void_p),
        ("zfree", ctypes.c_void_p),
        ("opaque", ctypes.c_void_p),
        ("data_type", ctypes.c_int),
        ("adler", ctypes.c_ulong),
        ("reserved", ctypes.c_ulong),
    ]


_Z_OK, _Z_STREAM_END, _Z_BUF_ERROR, _Z_NO_FLUSH, _Z_BLOCK = 0, 1, -5, 0, 5
_LIBZ: ctypes.CDLL | bool | None = False  # False: not looked for yet


def libz() -> ctypes.CDLL | None:
    """libz through ctypes with the functions checkpoints need, or None."""
    global _LIBZ
    if _LIBZ is False:
        _LIBZ = None
        try:
            name = ctypes.util.find_library("z")
            lib = ctypes.CDLL(name) if name else None
            if lib is not None:
                lib.zlibVersion.restype = ctypes.c_char_p
                for function in (
                    "inflateInit2_",
                    "inflate",
                    "inflateEnd",
                    "inflateReset2",
                    "inflatePrime",
                    "inflateSetDictionary",
                    "inflateGetDictionary",
                ):
                    getattr(lib, function).restype = ctypes.c_int
                _LIBZ = lib
        except (OSError, AttributeError):
            _LIBZ = None
    return _LIBZ if isinstance(_LIBZ, ctypes.CDLL) else None


class _Mode(StrEnum):
    GZIP = "gzip"  # inside a gzip member, header and trailer handled by zlib
    RAW = "raw"  # raw deflate resumed from a checkpoint: the trailer is checked here
    TRAILER = "trailer"  # reading that trailer
    END = "end"  # after a member: padding, another member, or the end


class GzipDecoder:
    """gzip (one or more members) through libz, capturing a checkpoint at the first block boundary after every `span`
    decoded bytes; started from a checkpoint it continues in raw-deflate mode and checks the member's trailer itself."""

    resumable = True

    def __init__(self, lib: ctypes.CDLL, span: int, resume: Checkpoint | None = None) -> None:
        self.lib, self.span = lib, span
        self.stream = _ZStream()
        self.out = ctypes.create_string_buffer(_OUT)
        self.captured: Checkpoint | None = None
        self.total_in = resume.in_offset if resume else 0
        self.total_out = resume.out_offset if resume else 0
        self.crc = resume.crc if resume else 0
        self.member_out = resume.member_out if resume else 0
        self.last_checkpoint = self.total_out
        self.want = False
        self.last_byte = 0
        self.trailer = bytearray()
        self.mode = _Mode.RAW if resume else _Mode.GZIP
        self._check(
            lib.inflateInit2_(
                ctypes.byref(self.stream), -15 if resume else 31, lib.zlibVersion(), ctypes.sizeof(self.stream)
            ),
            "zlib-initialise",
        )
        weakref.finalize(self, lib.inflateEnd, ctypes.byref(self.stream))
        if resume:
            if resume.bits:
                self._check(
                    lib.inflatePrime(ctypes.byref(self.stream), resume.bits, resume.prime >> (8 - resume.bits)),
                    "zlib-prime",
                )
            if resume.window:
                self._check(
                    lib.inflateSetDictionary(ctypes.byref(self.stream), resume.window, len(resume.window)),
                    "zlib-window",
                )

    def _check(self, code: int, step: str) -> None:
        if code != _Z_OK:
            raise ArchiveError(M("zlib-failed", step=M(step), code=code))

    def step(self, buf: bytes, pos: int) -> tuple[bytes, int]:
        self.captured = None
        if self.mode is _Mode.TRAILER:
            take = min(8 - len(self.trailer), len(buf) - pos)
            self.trailer += buf[pos : pos + take]
            self.total_in += take
            if len(self.trailer) == 8:
                crc, size = int.from_bytes(self.trailer[:4], "little"), int.from_bytes(self.trailer[4:], "little")
                if crc != self.crc:
                    raise ArchiveError(M("gzip-crc", at=self.total_in))
                if size != self.member_out & 0xFFFFFFFF:
                    raise ArchiveError(M("gzip-length", at=self.total_in))
                self.mode, self.trailer = _Mode.END, bytearray()
            return b"", take
        if self.mode is _Mode.END:
            if buf[pos] == 0:  # zero padding after the last member, as some tools write
                zeros = len(buf) - pos - len(buf[pos:].lstrip(b"\0"))
                self.total_in += zeros
                return b"", zeros
            if buf[pos] != 0x1F:
                raise ArchiveError(M("trailing-bytes", at=self.total_in))
            self._check(self.lib.inflateReset2(ctypes.byref(self.stream), 31), "zlib-reset")
            self.mode, self.crc, self.member_out = _Mode.GZIP, 0, 0
        stream = self.stream
        avail = min(len(buf) - pos, 1 << 30)
        address = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value  # no copy: `buf` stays alive meanwhile
        assert address is not None
        stream.next_in = address + pos
        stream.avail_in = avail
        room = min(_OUT, max(1 << 14, self.span))  # a small span (tests) needs small steps to find its boundaries
        stream.next_out = ctypes.addressof(self.out)
        stream.avail_out = room
        code = self.lib.inflate(ctypes.byref(stream), _Z_BLOCK if self.want else _Z_NO_FLUSH)
        used, produced = avail - stream.avail_in, room - stream.avail_out
        data = ctypes.string_at(self.out, produced) if produced else b""
        if used:
            self.last_byte = buf[pos + used - 1]
        self.total_in += used
        self.total_out += produced
        self.member_out += produced
        if produced:
            self.crc = zlib.crc32(data, self.crc)
        if code == _Z_STREAM_END:
            self.mode = _Mode.END if self.mode is _Mode.GZIP else _Mode.TRAILER  # zlib checked a gzip-mode trailer
            if pos + used < len(buf):  # go on with what follows (trailer, padding, next member) in the same step
                more, more_used = self.step(buf, pos + used)
                return data + more, used + more_used
            return data, used
        if code not in (_Z_OK, _Z_BUF_ERROR):
            raise _refused(self.total_in, (stream.msg or b"").decode(errors="replace") or f"code {code}")
        if not self.want and self.total_out - self.last_checkpoint >= self.span:
            self.want = True
        if self.want and stream.data_type & 128 and not stream.data_type & 64 and self.member_out:
            window = ctypes.create_string_buffer(32768)
            length = ctypes.c_uint(0)
            if self.lib.inflateGetDictionary(ctypes.byref(stream), window, ctypes.byref(length)) == _Z_OK:
                self.captured = Checkpoint(
                    self.total_in,
                    self.total_out,
                    True,
                    stream.data_type & 7,
                    self.last_byte,
                    window.raw[: length.value],
                    self.crc,
                    self.member_out,
                )
            self.want, self.last_checkpoint = False, self.total_out
        return data, used

    def finish(self) -> None:
        if self.mode is not _Mode.END:
            raise ArchiveError(M("ends-early", at=self.total_in))


class PlainDecoder:
    """An uncompressed tar: any byte is a checkpoint."""

    resumable = True

    def __init__(self, span: int, resume: Checkpoint | None = None) -> None:
        self.span = span
        self.total = resume.in_offset if resume else 0
        self.last_checkpoint = self.total
        self.captured: Checkpoint | None = None

    def step(self, buf: bytes, pos: int) -> tuple[bytes, int]:
        take = min(len(buf) - pos, _OUT * 4)
        self.total += take
        self.captured = None
        if self.total - self.last_checkpoint >= self.span:
            self.captured, self.last_checkpoint = Checkpoint(self.total, self.total), self.total
        return buf[pos : pos + take] if pos or take < len(buf) else buf, take

    def finish(self) -> None:
        pass


class StdlibDecoder:
    """gzip, bz2 or xz through the standard library (several concatenated streams too); no checkpoints.

    bz2 and xz take in every byte they are given; when a stream ends inside bytes taken earlier, those come back as
    `carry` and start the next stream (they were counted, hashed and kept when first given).
    """

    resumable = False

    def __init__(self, kind: ArchiveFormat) -> None:
        self.kind = kind
        self.captured: Checkpoint | None = None
        self.total_in = 0
        self.carry = b""
        self._new()

    def _new(self) -> None:
        self.decoder: Any = {  # zlib's, bz2's or lzma's decompressor: their interfaces differ a little
            ArchiveFormat.GZIP: lambda: zlib.decompressobj(31),
            ArchiveFormat.BZ2: bz2.BZ2Decompressor,
            ArchiveFormat.XZ: lzma.LZMADecompressor,
        }[self.kind]()
        self.ended = False

    @property
    def pending(self) -> bool:
        """Whether the next step needs no new input: handed-back bytes, or decoded bytes still inside bz2/xz."""
        return bool(self.carry) or (
            not self.ended
            and self.kind is not ArchiveFormat.GZIP
            and not self.decoder.eof
            and not self.decoder.needs_input
        )

    def step(self, buf: bytes, pos: int) -> tuple[bytes, int]:
        if self.ended:  # what follows a finished stream: zero padding, or another stream
            if self.carry:
                if self.carry[0] == 0:
                    self.carry = self.carry.lstrip(b"\0")
                    return b"", 0
                first, at = self.carry[0], self.total_in - len(self.carry)
            elif buf[pos] == 0:
                zeros = len(buf) - pos - len(buf[pos:].lstrip(b"\0"))
                self.total_in += zeros
                return b"", zeros
            else:
                first, at = buf[pos], self.total_in
            if first != _MAGIC[self.kind]:
                raise ArchiveError(M("trailing-bytes", at=at))
            self._new()
        decoder = self.decoder
        if self.carry:
            data, self.carry, counted = self.carry, b"", 0
        elif self.kind is not ArchiveFormat.GZIP and not decoder.needs_input:
            data, counted = b"", 0
        else:
            data = buf[pos : pos + _IN]
            counted = len(data)
        try:
            out = decoder.decompress(data, _OUT)
        except (zlib.error, OSError, lzma.LZMAError, EOFError) as error:
            raise _refused(self.total_in, str(error)) from None
        if decoder.eof:  # bz2/xz report the end only once every decoded byte is out
            self.ended = True
            left = decoder.unused_data
            if len(left) > counted:  # part of it was taken in an earlier step
                self.carry, used = left[: len(left) - counted], 0
            else:
                used = counted - len(left)
        elif self.kind is ArchiveFormat.GZIP:
            used = counted - len(decoder.unconsumed_tail)
        else:
            used = counted
        self.total_in += used
        return out, used

    def finish(self) -> None:
        if not self.ended:
            raise ArchiveError(M("ends-early", at=self.total_in))


def make_decoder(kind: ArchiveFormat, span: int, resume: Checkpoint | None = None, resumable: bool = True) -> Decoder:
    """The decoder for an archive format; `resumable=False` forces the standard library (no checkpoints)."""
    if kind is ArchiveFormat.TAR:
        return PlainDecoder(span, resume)
    lib = libz() if kind is ArchiveFormat.GZIP and resumable else None
    if lib is not None:
        return GzipDecoder(lib, span, resume)
    if resume is not None:
        raise ValueError("this decoder cannot start from a checkpoint")
    return StdlibDecoder(kind)


# ---------------------------------------------------------------- the decoded stream


class ArchiveReader:
    """A file-like view of the decoded archive for `tarfile`, fed by compressed blocks in order.

    Every consumed compressed byte is hashed (`hasher`), copied to `tee` (a kept tarball) and counted (`on_input`);
    checkpoints the decoder captures get the hash state of that exact point. `skip` decoded bytes are dropped first
    (from a checkpoint to the first byte that is not on disk yet).
    """

    def __init__(
        self,
        blocks: Iterable[bytes],
        decoder: Decoder,
        *,
        in_offset: int = 0,
        out_offset: int = 0,
        hasher: ResumableSha256 | None = None,
        tee: BinaryIO | None = None,
        on_input: Callable[[int], None] | None = None,
        skip: int = 0,
    ) -> None:
        self._blocks = iter(blocks)
        self.decoder, self.hasher, self.tee, self.on_input = decoder, hasher, tee, on_input
        self.in_offset = in_offset
        self.position = out_offset + skip  # decoded offset of the next byte `read` returns
        self._skip = skip
        self._buf, self._pos = b"", 0
        self._out = bytearray()
        self._ended = False
        self._stuck = 0
        self.checkpoints: list[Checkpoint] = []

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        """One decoding step; False once the input has ended (and the decoder confirmed a complete stream)."""
        if self._pos >= len(self._buf) and not getattr(self.decoder, "pending", False):
            if self._ended:
                return False
            block = next(self._blocks, None)
            if block is None:
                self._ended = True
                self.decoder.finish()
                return False
            self._buf, self._pos = block, 0
            return True
        out, used = self.decoder.step(self._buf, self._pos)
        if used:
            if self.hasher is not None:
                self.hasher.update(self._buf, self._pos, used)
            if self.tee is not None:
                self.tee.write(memoryview(self._buf)[self._pos : self._pos + used])
            if self.on_input is not None:
                self.on_input(used)
            self._pos += used
            self.in_offset += used
        captured = self.decoder.captured
        if captured is not None:
            captured.sha_state = self.hasher.state() if self.hasher is not None else None
            self.checkpoints.append(captured)
        if out and self._skip:
            dropped = min(self._skip, len(out))
            out, self._skip = out[dropped:], self._skip - dropped
        if out:
            self._out += out
        if used or out or captured is not None:
            self._stuck = 0
        else:
            self._stuck += 1
            if self._stuck > 2:
                raise ArchiveError(M("decoder-stuck", at=self.in_offset))
        return True

    def read(self, size: int = -1) -> bytes:
        while (size < 0 or len(self._out) < size) and self._fill():
            pass
        take = len(self._out) if size < 0 else min(size, len(self._out))
        data = bytes(self._out[:take])
        del self._out[:take]
        self.position += take
        return data

    def drain(self) -> int:
        """Decode to the end of the input (the tar's trailing blocks); returns the decoded bytes dropped."""
        dropped = len(self._out)
        self._out.clear()
        while self._fill():
            dropped += len(self._out)
            self._out.clear()
        self.position += dropped
        return dropped

    def latest(self, limit: int) -> Checkpoint | None:
        """The newest checkpoint whose decoded offset is at most `limit`."""
        found = None
        for checkpoint in self.checkpoints:
            if checkpoint.out_offset <= limit:
                found = checkpoint
        return found

    def prune(self, limit: int) -> None:
        """Forget checkpoints made useless by progress: all before the newest one at or below `limit`."""
        keep = self.latest(limit)
        if keep is not None:
            self.checkpoints = [c for c in self.checkpoints if c.out_offset >= keep.out_offset]


# ---------------------------------------------------------------- members


@dataclass
class Partial:
    """A regular-file member whose file was being written: its staging path, size, data offset, mode and mtime."""

    path: str
    size: int
    data_offset: int
    mode: int
    mtime: float


@dataclass
class ExtractState:
    """What a later run needs: the checkpoint to decode from, members finished, where the next member starts
    (`resume_at`, decoded offset) or the member being written (`partial`)."""

    checkpoint: Checkpoint | None
    members: int
    resume_at: int
    partial: Partial | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint.to_json() if self.checkpoint else None,
            "members": self.members,
            "resume_at": self.resume_at,
            "partial": asdict(self.partial) if self.partial else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExtractState:
        checkpoint = Checkpoint.from_json(data["checkpoint"]) if data.get("checkpoint") else None
        partial = Partial(**data["partial"]) if data.get("partial") else None
        return cls(checkpoint, int(data["members"]), int(data["resume_at"]), partial)


class JournalEntry(TypedDict):
    """One finished member: its path under the staging folder, its size (files and hard links) and its kind."""

    p: str
    s: int
    t: MemberKind


def read_journal(path: Path) -> list[JournalEntry]:
    """The members a journal lists (none when it does not exist), up to a line cut short by a crash."""
    entries: list[JournalEntry] = []
    if path.exists():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                break  # a line cut short by a crash or a full disk
    return entries


class Journal:
    """Finished members, one JSON line each (`p` path, `s` size, `t` type), in archive order."""

    def __init__(self, path: Path, keep: int | None = None) -> None:
        self.path = path
        self.entries = read_journal(path)
        if keep is not None:
            self.entries = self.entries[:keep]
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:  # rewritten to exactly the entries kept
            handle.writelines(json.dumps(e) + "\n" for e in self.entries)
        self._handle: TextIO = path.open("a", encoding="utf-8")

    def append(self, path: str, size: int, kind: MemberKind) -> None:
        entry = JournalEntry(p=path, s=size, t=kind)
        self._handle.write(json.dumps(entry) + "\n")
        self.entries.append(entry)

    def truncate(self, count: int) -> None:
        """Keep only the first `count` entries (members after them will be written and journaled again)."""
        if count >= len(self.entries):
            return
        self._handle.close()
        self.entries = self.entries[:count]
        with self.path.open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(e) + "\n" for e in self.entries)
        self._handle = self.path.open("a", encoding="utf-8")

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def _padded(size: int) -> int:
    return (size + _BLOCK - 1) // _BLOCK * _BLOCK


_FILTER = getattr(tarfile, "data_filter", None)


def _safe_member(member: tarfile.TarInfo, root: Path) -> tarfile.TarInfo:
    """The member as it may be written under `root`; ArchiveError for an absolute path, '..', a link leaving
    `root`, a device."""
    if _FILTER is not None:
        try:
            return _FILTER(member, str(root))
        except tarfile.FilterError as error:
            raise ArchiveError(M("unsafe-member", reason=error)) from None
    name = member.name
    parts = Path(name).parts
    if name.startswith("/") or ".." in parts:
        raise ArchiveError(M("unsafe-member-escapes", name=repr(name)))
    if member.issym() or member.islnk():
        base = (root / name).parent if member.issym() else root
        if member.linkname.startswith("/") or not os.path.realpath(base / member.linkname).startswith(
            os.path.realpath(root)
        ):
            raise ArchiveError(M("unsafe-member-link", name=repr(name)))
    if member.ischr() or member.isblk() or member.isfifo():
        raise ArchiveError(M("unsafe-member-device", name=repr(name)))
    return member


class Extractor:
    """Writes a tar stream's members under `root`, journals them, and hands `persist` a resumable state now and then.

    `base` is the decoded offset where `reader` starts the tar (a checkpoint's resume point); `skip_members` members
    already journaled are passed over without being written again (a run that had to start from the beginning);
    `partial` is a member to finish first (its file is cut back to where the checkpoint resumes it).
    """

    def __init__(
        self,
        reader: ArchiveReader,
        root: Path,
        journal: Journal,
        *,
        members: int = 0,
        skip_members: int = 0,
        partial: Partial | None = None,
        persist: Callable[[ExtractState], None] | None = None,
        persist_every_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader, self.root, self.journal = reader, root, journal
        self.members, self.skip_members, self.partial = members, skip_members, partial
        self.persist_fn, self.persist_every_s, self.clock = persist, persist_every_s, clock
        self.resume_at = reader.position
        self.current: tuple[Partial, BinaryIO] | None = None  # member being written and its open file
        self.written = 0
        self.last_persist = clock()
        self.skipped_types: list[str] = []

    # -- state
    def state(self) -> ExtractState:
        """The resumable state for what is on disk now (files flushed first)."""
        self.journal.flush()
        if self.reader.tee is not None:
            self.reader.tee.flush()
        if self.current is not None:
            partial, handle = self.current
            if not handle.closed:  # a file closed by an error was flushed when it closed
                handle.flush()
            limit = partial.data_offset + self.written
            checkpoint = self.reader.latest(limit)
            if checkpoint is not None and checkpoint.out_offset >= partial.data_offset:
                return ExtractState(checkpoint, self.members, self.resume_at, partial)
        return ExtractState(self.reader.latest(self.resume_at), self.members, self.resume_at)

    def _maybe_persist(self) -> None:
        if self.persist_fn is None or self.clock() - self.last_persist < self.persist_every_s:
            return
        self.persist_fn(self.state())
        self.last_persist = self.clock()

    # -- members
    def run(self) -> None:
        if self.partial is not None:
            self._finish_partial(self.partial)
        base = self.reader.position
        try:
            # closed by the `with` below, once the stream is known to be a tar; tarfile reads only `read` of it
            archive = tarfile.open(  # type: ignore[call-overload]  # noqa: SIM115
                fileobj=self.reader, mode="r|", bufsize=_TAR_BUFFER
            )
        except tarfile.ReadError as error:
            if self.reader.position - base <= 2 * _BLOCK and "empty" in str(error):
                self.reader.drain()  # resumed exactly at the end-of-archive blocks
                return
            raise ArchiveError(M("not-tar", at=base, error=error)) from None
        index = 0
        with archive:
            try:
                for member in archive:
                    index += 1
                    if index <= self.skip_members and self._already_written(member):
                        self.members += 1
                        self._advance(member, base)
                        continue
                    if self.skip_members:  # from the first member not on disk, write everything
                        self.skip_members = 0
                        self.journal.truncate(self.members)
                    self._extract(archive, member, base)
            except tarfile.TarError as error:
                raise ArchiveError(M("tar-damaged", error=error)) from None
        self.reader.drain()

    def _already_written(self, member: tarfile.TarInfo) -> bool:
        """A member the journal lists at this position, still on disk as it was written."""
        entry = self.journal.entries[self.members] if self.members < len(self.journal.entries) else None
        if entry is None or entry["p"] != member.name:
            return False
        return not member.isreg() or _has_size(self.root / member.name, member.size)

    def _advance(self, member: tarfile.TarInfo, base: int) -> None:
        if not member.issparse():
            self.resume_at = base + member.offset_data + (_padded(member.size) if member.isreg() else 0)
        self.reader.prune(self.resume_at)

    def _extract(self, archive: tarfile.TarFile, member: tarfile.TarInfo, base: int) -> None:
        safe = _safe_member(member, self.root)
        target = self.root / safe.name
        data_offset = base + member.offset_data
        if safe.isdir():
            target.mkdir(parents=True, exist_ok=True)
            kind = MemberKind.DIRECTORY
        elif safe.isreg():
            target.parent.mkdir(parents=True, exist_ok=True)
            _remove_if_link_or_dir(target, files_too=True)  # a fresh inode: never write through an old hard link
            partial = Partial(
                safe.name, safe.size, data_offset, safe.mode if safe.mode is not None else 0o644, safe.mtime or 0
            )
            source = archive.extractfile(member)
            assert source is not None
            with open(target, "wb") as handle:
                self._copy(partial, handle, lambda n: source.read(n))
            kind = MemberKind.FILE
        elif safe.issym():
            target.parent.mkdir(parents=True, exist_ok=True)
            _remove_if_link_or_dir(target, files_too=True)
            os.symlink(safe.linkname, target)
            kind = MemberKind.SYMLINK
        elif safe.islnk():
            target.parent.mkdir(parents=True, exist_ok=True)
            _remove_if_link_or_dir(target, files_too=True)
            os.link(self.root / safe.linkname, target)
            kind = MemberKind.HARDLINK
        else:
            self.skipped_types.append(member.name)
            kind = MemberKind.SKIPPED
        if kind is not MemberKind.SKIPPED:
            self.journal.append(safe.name, safe.size if kind in (MemberKind.FILE, MemberKind.HARDLINK) else 0, kind)
        self.members += 1
        self._advance(member, base)
        self._maybe_persist()

    def _copy(self, partial: Partial, handle: BinaryIO, read: Callable[[int], bytes], done: int = 0) -> None:
        """Copy the member's remaining bytes into the open file, offering resumable states while it goes."""
        self.current, self.written = (partial, handle), done
        try:
            while self.written < partial.size:
                block = read(min(_COPY, partial.size - self.written))
                if not block:
                    raise ArchiveError(M("member-truncated", path=partial.path))
                handle.write(block)
                self.written += len(block)
                if len(self.reader.checkpoints) > 16:
                    self.reader.prune(partial.data_offset + self.written)
                self._maybe_persist()
        finally:
            if self.written >= partial.size:
                self.current = None
        handle.flush()
        os.chmod(handle.fileno(), partial.mode & 0o7777 | 0o600)
        os.utime(handle.fileno(), (partial.mtime, partial.mtime))

    def _finish_partial(self, partial: Partial) -> None:
        """Continue the member a checkpoint resumed inside: cut its file back and write the rest, then its padding."""
        done = self.reader.position - partial.data_offset
        target = self.root / partial.path
        with open(target, "r+b") as handle:
            handle.truncate(done)
            handle.seek(done)
            self._copy(partial, handle, self.reader.read, done)
        self.reader.read(_padded(partial.size) - partial.size)
        self.journal.append(partial.path, partial.size, MemberKind.FILE)
        self.members += 1
        self.resume_at = partial.data_offset + _padded(partial.size)
        self._maybe_persist()


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and path.stat().st_size == size
    except OSError:
        return False


def _remove_if_link_or_dir(target: Path, files_too: bool = False) -> None:
    """Clear the staging path for a new member (staging is ours: a stale entry from an earlier attempt)."""
    if target.is_symlink() or (files_too and target.is_file()):
        target.unlink()
    elif target.is_dir():
        os.rmdir(target)  # only an empty folder; a full one is a conflict the archive itself has
