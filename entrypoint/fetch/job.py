"""One manifest entry from its source into the assets tree: probe, download (unpacking as it arrives), verify,
move into place, record.

`probe_sources` asks every source first (one byte each), so a bad URL, a 404 or a size that differs from the
manifest ends the run before anything is downloaded. `EntryJob` then fetches one entry into its staging folder,
saving a resumable state every few seconds (`workspace.SavedState`): an interrupted entry continues from its last
checkpoint, and an entry that was verified but not yet moved continues with the move. Nothing unverified reaches
the tree: a mismatch moves the staged copy aside and exits 3.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, NoReturn

from entrypoint.core.errors import JobMisspecified, PreflightFailed, UserError
from entrypoint.core.masking import safe_url
from entrypoint.core.messages import Text, joined
from entrypoint.fetch.manifest import Entry
from entrypoint.fetch.messages import MESSAGES as M
from entrypoint.fetch.progress import Progress
from entrypoint.fetch.unpack import (
    ArchiveError,
    ArchiveFormat,
    ArchiveReader,
    Checkpoint,
    Extractor,
    ExtractState,
    Journal,
    MemberKind,
    libz,
    make_decoder,
    read_journal,
)
from entrypoint.fetch.workspace import (
    STATE_VERSION,
    DoneRecord,
    Phase,
    SavedState,
    Workspace,
    aside,
    io_problem,
    merge_tree,
    now,
    stamp,
    write_json,
)
from entrypoint.net.download import OrderedStream, Remote, ResumableSha256, probe
from entrypoint.net.source import DownloadError, DownloadOptions, FailureKind


@dataclass(frozen=True)
class FetchOptions:
    """How one run downloads and unpacks (from the command line)."""

    download: DownloadOptions
    segments: int  # parallel range requests per file
    segment_bytes: int
    keep_tarballs: bool
    persist_every_s: float  # how often the resumable state is saved
    span: int  # decoded bytes between checkpoints
    resumable: bool  # False: decode with the standard library (no checkpoints)


@dataclass
class Outcome:
    """What fetching one entry did: bytes downloaded in this run and how long it took, the checks it passed, the
    files it put in place, the existing paths it moved aside, and notes for the user."""

    entry: Entry
    bytes_in: int = 0
    seconds: float = 0.0
    sha256: str | None = None
    verified: Text | None = None
    files: int = 0
    aside: list[Path] = field(default_factory=list)
    notes: list[Text] = field(default_factory=list)


def download_failure(error: DownloadError, what: Text, fix: Text) -> UserError:
    """The command-ending error for a failed download: exit 2 when the request itself was mis-specified (kind
    `scheme`: a malformed URL or proxy variable, named by `error.where`), else exit 3."""
    kind = JobMisspecified if error.kind is FailureKind.SCHEME else PreflightFailed
    return kind(f"fetch.{error.kind}", error.where, what, fix)


def probe_sources(
    entries: list[Entry], workspace: Workspace, options: DownloadOptions, progress: Progress
) -> dict[str, Remote]:
    """Every entry's source, asked before anything is downloaded (a kept tarball stands in for its URL); an
    optional entry that is not there is left out. Exit 3 for a source that fails or differs from the manifest."""
    remotes: dict[str, Remote] = {}
    for entry in entries:
        kept = workspace.tarball(entry)
        if entry.archive and kept.is_file() and (entry.size is None or kept.stat().st_size == entry.size):
            remotes[entry.name] = Remote(str(kept), kept.stat().st_size, True, None, kept)
            progress.say(M("kept-tarball", name=entry.name, path=kept))
            continue
        try:
            remote = probe(entry.url, options, log=progress.writer(entry.name), lang=progress.lang)
        except DownloadError as error:
            if entry.optional and error.kind in (FailureKind.HTTP, FailureKind.MISSING):
                progress.say(M("optional-missing", name=entry.name, what=error.what))
                continue
            what, fix = M("probe-failed", name=entry.name, what=error.what), M("probe-failed-fix", fix=error.fix)
            raise download_failure(error, what, fix) from None
        if entry.size is not None and remote.size is not None and remote.size != entry.size:
            raise PreflightFailed(
                "fetch.size",
                safe_url(entry.url),
                M("size-differs", name=entry.name, remote=remote.size, pinned=entry.size),
                M("size-differs-fix"),
            )
        if not remote.ranges:
            progress.say(M("no-ranges", name=entry.name))
        remotes[entry.name] = remote
    return remotes


def space_needed(entries: list[Entry], remotes: dict[str, Remote], workspace: Workspace, keep_tarballs: bool) -> int:
    """The bytes the entries left will write: what remains of each source, twice for a tarball also kept."""
    needed = 0
    for entry in entries:
        remote = remotes[entry.name]
        left = (remote.size or 0) - workspace.resume_offset(entry)
        twice = keep_tarballs and entry.archive and remote.local is None
        needed += left * (2 if twice else 1)
    return needed


class EntryJob:
    """Fetch one entry into staging, verify it, move it into place and record it."""

    def __init__(
        self,
        root: Path,
        workspace: Workspace,
        entry: Entry,
        remote: Remote,
        options: FetchOptions,
        progress: Progress,
        label: str | None = None,
    ) -> None:
        self.root, self.workspace, self.entry, self.remote = root, workspace, entry, remote
        self.options, self.progress = options, progress
        self.label = label or entry.name
        self.folder = workspace.entry_dir(entry)
        self.staging = workspace.staging(entry)
        self.state_file = workspace.state_file(entry)
        self.journal_file = workspace.journal_file(entry)
        self.outcome = Outcome(entry)
        self.stamp = stamp()

    # -- the saved state
    def save(self, state: SavedState) -> None:
        base = SavedState(
            version=STATE_VERSION,
            name=self.entry.name,
            file=self.entry.file_name,
            url=safe_url(self.entry.url),
            size=self.remote.size,
            validator=self.remote.validator,
        )
        with contextlib.suppress(OSError):  # the previous state stays valid: a later run resumes from it
            write_json(self.state_file, {**base, **state})

    def load(self) -> SavedState | None:
        """The saved state when it belongs to this source; a state for another version of it is dropped."""
        state = self.workspace.state(self.entry)
        if state is None or state.get("version") != STATE_VERSION:
            return None
        local = self.remote.local is not None
        validator = state.get("validator")
        if state.get("size") != self.remote.size or (
            not local and validator and self.remote.validator and validator != self.remote.validator
        ):
            moved = aside(self.staging, "stale", self.stamp) if self.staging.exists() else None
            self.outcome.notes.append(
                M("server-changed-kept", path=moved) if moved is not None else M("server-changed")
            )
            self._forget()
            return None
        return state

    def _forget(self) -> None:
        self.state_file.unlink(missing_ok=True)
        self.journal_file.unlink(missing_ok=True)

    # -- the steps
    def run(self) -> Outcome:
        self.folder.mkdir(parents=True, exist_ok=True)
        state = self.load()
        if state is None and self.staging.exists():  # staging without a state: not ours to trust, not ours to delete
            moved = aside(self.staging, "stale", self.stamp)
            self.outcome.notes.append(M("stale-staging", path=moved))
        started = time.monotonic()
        if state is None or state.get("phase") != Phase.PLACE:
            digest = self._fetch_archive(state) if self.entry.archive else self._fetch_file(state)
            self._verify(digest)
            if self._tee_path().exists():  # a kept tarball only once it verified
                os.replace(self._tee_path(), self.workspace.tarball(self.entry))
            self.save(SavedState(phase=Phase.PLACE, sha256=digest))
        else:
            digest = state.get("sha256")
            self.progress.begin(self.label, self.remote.size, self.remote.size or 0)
        self.outcome.seconds = time.monotonic() - started
        self.outcome.sha256 = digest
        self._place(digest)
        return self.outcome

    def _fetch_archive(self, state: SavedState | None) -> str | None:
        entry, options = self.entry, self.options
        saved = state.get("extract") if state else None
        extract = ExtractState.from_json(saved) if saved else None
        checkpoint = extract.checkpoint if extract else None
        if checkpoint is not None and checkpoint.raw and (not options.resumable or libz() is None):
            checkpoint = None  # this Python cannot continue a raw deflate stream: start over, skipping finished members
        if checkpoint is not None and extract is not None and extract.partial is not None:
            staged = self.staging / extract.partial.path
            need = checkpoint.out_offset - extract.partial.data_offset
            if not staged.is_file() or staged.stat().st_size < need:
                checkpoint = None
        hasher = self._hasher(checkpoint)
        start = checkpoint.in_offset if checkpoint else 0
        members = extract.members if extract else 0
        journal = Journal(self.journal_file, keep=members)
        if checkpoint is None and members:
            self.outcome.notes.append(M("rereads-archive", members=members))
        tee = self._open_tee(start)
        decoder = make_decoder(entry.format or ArchiveFormat.GZIP, options.span, checkpoint, options.resumable)
        self.progress.begin(self.label, self.remote.size, start)
        stream = self._stream(start)
        partial = extract.partial if checkpoint is not None and extract is not None else None
        skip = (
            extract.resume_at - checkpoint.out_offset
            if checkpoint is not None and extract is not None and partial is None
            else 0
        )
        reader = ArchiveReader(
            stream,
            decoder,
            in_offset=start,
            out_offset=checkpoint.out_offset if checkpoint else 0,
            hasher=hasher,
            tee=tee,
            on_input=self.progress.add,
            skip=skip,
        )
        extractor = Extractor(
            reader,
            self.staging,
            journal,
            members=members if checkpoint else 0,
            skip_members=0 if checkpoint else members,
            partial=partial,
            persist=lambda s: self.save(SavedState(phase=Phase.FETCH, extract=s.to_json(), tee=tee is not None)),
            persist_every_s=options.persist_every_s,
        )
        self.staging.mkdir(parents=True, exist_ok=True)
        try:
            extractor.run()
        except ArchiveError as error:
            self._reject(M("archive-damaged", error=error.text), tee)
        except BaseException as error:
            with contextlib.suppress(OSError, ValueError):
                self.save(SavedState(phase=Phase.FETCH, extract=extractor.state().to_json(), tee=tee is not None))
            raise self._translate(error) from None
        finally:
            stream.close()
            journal.close()
            if tee is not None:
                tee.close()
        if self.remote.size is not None and reader.in_offset != self.remote.size:
            self._reject(M("archive-short", got=reader.in_offset, size=self.remote.size), None)
        self.outcome.bytes_in = reader.in_offset - start
        if extractor.skipped_types:
            self.outcome.notes.append(M("special-members", count=len(extractor.skipped_types)))
        return hasher.hexdigest() if hasher is not None else None

    def _stream(self, start: int) -> OrderedStream:
        return OrderedStream(
            self.remote,
            start,
            options=self.options.download,
            segments=self.options.segments,
            segment_bytes=self.options.segment_bytes,
            log=self.progress.writer(self.entry.name),
            lang=self.progress.lang,
        )

    def _hasher(self, checkpoint: Checkpoint | None) -> ResumableSha256 | None:
        if checkpoint is None:
            return ResumableSha256()
        if checkpoint.sha_state is not None:
            try:
                return ResumableSha256(checkpoint.sha_state)
            except ValueError:
                pass
        self.outcome.notes.append(M("no-sha-state"))
        return None

    def _tee_path(self) -> Path:
        return self.workspace.tarball(self.entry).with_name(self.entry.file_name + ".part")

    def _open_tee(self, start: int) -> BinaryIO | None:
        """The kept tarball being written (`--keep-tarballs`), positioned at `start`; None when none is kept."""
        if not self.options.keep_tarballs or self.remote.local is not None:
            return None
        path = self._tee_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if start == 0:
            return path.open("wb")
        if path.is_file() and path.stat().st_size >= start:
            handle = path.open("r+b")
            handle.truncate(start)
            handle.seek(start)
            return handle
        self.outcome.notes.append(M("tarball-not-kept"))
        return None

    def _fetch_file(self, state: SavedState | None) -> str:
        entry = self.entry
        staged = self.staging / Path(entry.to or entry.file_name).name
        self.staging.mkdir(parents=True, exist_ok=True)
        hasher = ResumableSha256()
        start = 0
        if state is not None and staged.is_file():  # a partial file from an interrupted run: hash it and continue
            with staged.open("rb") as handle:
                while block := handle.read(1 << 20):
                    hasher.update(block)
                    start += len(block)
            if self.remote.size is not None and start > self.remote.size:
                hasher, start = ResumableSha256(), 0
        self.progress.begin(self.label, self.remote.size, start)
        stream = self._stream(start)
        self.save(SavedState(phase=Phase.FETCH, have=start))
        written = start
        try:
            with staged.open("r+b" if start else "wb") as handle:
                handle.truncate(start)
                handle.seek(start)
                for block in stream:
                    handle.write(block)
                    hasher.update(block)
                    written += len(block)
                    self.progress.add(len(block))
        except BaseException as error:
            self.save(SavedState(phase=Phase.FETCH, have=written))
            raise self._translate(error) from None
        finally:
            stream.close()
        if self.remote.size is not None and written != self.remote.size:
            self._reject(M("download-short", got=written, size=self.remote.size), None)
        self.outcome.bytes_in = written - start
        return hasher.hexdigest()

    def _verify(self, digest: str | None) -> None:
        checks = [M("verified-size")] if self.remote.size is not None else []
        if self.entry.archive and self.entry.format is ArchiveFormat.GZIP:
            checks.append(M("verified-crc"))
        expected = self.entry.sha256
        if expected is not None and digest is not None:
            if digest != expected:
                self._reject(M("sha-mismatch", digest=digest, expected=expected), None)
            checks.append(M("verified-sha256"))
        elif expected is not None:
            checks.append(M("verified-sha256-skipped"))
        self.outcome.verified = joined(checks, " + ") if checks else M("verified-stream")

    def _reject(self, what: Text, tee: BinaryIO | None) -> NoReturn:
        """A verification failure: keep what was fetched aside, clear the state, exit 3."""
        if tee is not None:
            tee.close()
        moved = []
        if self.staging.exists():
            moved.append(aside(self.staging, "bad", self.stamp))
        for tarball in (self._tee_path(), self.remote.local):  # a kept tarball that does not verify is not used again
            if tarball is not None and tarball.exists() and self.workspace.dir in tarball.parents:
                moved.append(aside(tarball, "bad", self.stamp))
        self._forget()
        name, root = self.entry.name, self.root
        raise PreflightFailed(
            "fetch.verify",
            safe_url(self.entry.url),
            M("verify-failed", name=name, what=what, root=root, kept=", ".join(str(m) for m in moved))
            if moved
            else M("verify-failed-nothing-kept", name=name, what=what, root=root),
            M("verify-failed-fix"),
        )

    def _translate(self, error: BaseException) -> BaseException:
        """The error to raise for a failure while fetching (the state is saved already)."""
        if isinstance(error, DownloadError):
            return download_failure(error, error.what, M("download-fix-resume", fix=error.fix))
        if isinstance(error, OSError):
            return io_problem(error, self.root)
        return error  # KeyboardInterrupt and the like: the caller reports it

    def _place(self, digest: str | None) -> None:
        entry = self.entry
        dest = self.root / entry.target if entry.archive else (self.root / entry.target).parent
        try:
            self.outcome.aside = merge_tree(self.staging, dest, self.stamp) if self.staging.exists() else []
            files: list[tuple[str, int, str]]
            if entry.archive:
                kept = (MemberKind.FILE, MemberKind.HARDLINK, MemberKind.SYMLINK)
                files = [
                    (f"{entry.into}/{e['p']}", e["s"], e["t"])
                    for e in read_journal(self.journal_file)
                    if e["t"] in kept
                ]
            else:
                size = self.remote.size if self.remote.size is not None else (self.root / entry.target).stat().st_size
                files = [(entry.target, size, MemberKind.FILE)]
            self.outcome.files = len(files)
            self.workspace.record(
                entry,
                DoneRecord(
                    name=entry.name,
                    url=safe_url(entry.url),
                    size=self.remote.size,
                    sha256=digest,
                    validator=self.remote.validator,
                    finished=now(),
                    files=files,
                ),
            )
            self._forget()
            with contextlib.suppress(OSError):
                self.staging.rmdir()
        except OSError as error:
            raise io_problem(error, self.root) from None
