"""Writing a JSONL session: appends, group commit, branches, metadata, rewrites of the log (I/O)."""

from __future__ import annotations

import contextlib
import errno
import os
import time
import zlib
from pathlib import Path
from typing import Final, TypeVar, overload

import msgspec

from lamina.errors import MissingEntryError, SessionCorruptError, SessionIOError, UsageError
from lamina.session._entries import CRITICAL_ENTRY_TYPES, CompactionBoundary, Entry, LogEntry, UserMessage, encode_entry
from lamina.session._jsonl._file_layer import LINK_REFUSED, is_link_refusal, is_same_file, write_new_file
from lamina.session._jsonl._jsonl_open import LOG_NAME, JsonlLog
from lamina.session._jsonl._session_meta import SessionMeta, write_meta
from lamina.session._protocol import LoadReport
from lamina.session._scan import Canonical, TornTail, is_canonical_line
from lamina.session._session_files import NOFOLLOW, open_for_reading
from lamina.session._stamp import _storable, _title_from
from lamina.session._tree import view_start_id

META_REFRESH_SECONDS: Final = 5.0
"""Longest time a flush leaves `meta.json` behind the log (branches and compactions are written at once)."""

E = TypeVar("E", bound=Entry)


class JsonlSession(JsonlLog):
    """A session backed by a folder on the local disk. Create it through `LocalSessionStore`."""

    def _after_open(self, *, rebuild: bool) -> None:
        """Bring the metadata up to date with what the open found on disk."""
        if rebuild:
            self.load_all()
            users = (e for e in map(self._entries.__getitem__, self._order) if isinstance(e, UserMessage))
            first_user = next(users, None)
            title = _title_from(first_user.text) if first_user is not None else ""
            self.meta = msgspec.structs.replace(self.meta, title=title)
            self._count = len(self._entry_list)
        else:
            self._count = self._count_entries()
        if self._lock is None:
            return
        # what this open shows must be durable before anything is built on it (a killed writer's
        # last appends may still sit in the page cache only)
        self._fsync_log()
        meta = self.meta
        stale = (
            meta.log_size != self._size
            or meta.leaf_id != self._leaf
            or meta.leaf_offset != self._size
            or meta.entry_count != self._count
            or meta.resume_offset != self._resume_offset()
        )
        if rebuild or stale:
            self._dirty_meta = True
            self._write_meta()

    def _fsync_log(self) -> None:
        try:
            fd = self._files.open(self.log_path, os.O_RDONLY | NOFOLLOW)
            try:
                self._files.fsync(fd)
            finally:
                self._files.close(fd)
        except OSError as exc:
            raise SessionIOError(self.log_path, "make the log durable", exc) from None

    # -- writing -----------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._lock is None:
            raise UsageError(f"session {self.id} was opened read-only")
        if self._failed is None and not self._lock.held:  # a forked child of the writer: never a writer
            try:
                self._lock.verify()
            except SessionIOError as exc:
                raise self._fail(exc.action, exc.error, None, path=exc.path) from None
        if self._failed is not None:
            failed = self._failed
            raise SessionIOError(
                failed.path,
                f"{failed.action} (an earlier write failed; reopen the session)",
                failed.error,
                offset=failed.offset,
            )

    def _writable_fd(self) -> int:
        self._check_writable()
        if self._fd is None:
            try:
                fd = self._files.open(self.log_path, os.O_WRONLY | os.O_APPEND | NOFOLLOW)
            except OSError as exc:
                if is_link_refusal(exc):
                    raise SessionCorruptError(self.log_path, LINK_REFUSED) from None
                raise SessionIOError(self.log_path, "open the log for appending", exc) from None
            try:
                self._verify(fd)  # opened after the check of the lock: a log of a folder put in its place fails it
            except SessionIOError:
                self._files.close(fd)
                raise
            if self._torn is not None:
                try:
                    self._repair_torn_tail(fd, self._torn)
                except OSError as exc:
                    self._files.close(fd)
                    raise self._fail("repair the torn last line", exc, self._torn.offset) from None
            self._fd = fd
        return self._fd

    def _fail(self, action: str, exc: OSError, offset: int | None, *, path: Path | None = None) -> SessionIOError:
        """Record a failed write: this session takes no more appends (the next open repairs the tail)."""
        self._failed = SessionIOError(path or self.log_path, action, exc, offset=offset)
        return self._failed

    def _verify(self, fd: int | None) -> None:
        """Check that the lock held and the log open as `fd` are still the files at the session's paths.

        Run before anything is acknowledged: a folder removed, moved or restored from a copy under
        this writer fails here (and the session takes no more appends), so no flush acknowledges
        entries written into files nobody will read, and a second writer in the restored folder is
        the only one. Raises `SessionIOError`.
        """
        assert self._lock is not None
        try:
            self._lock.verify()
        except SessionIOError as exc:
            raise self._fail(exc.action, exc.error, None, path=exc.path) from None
        if fd is not None and not is_same_file(fd, self.log_path):
            reason = "the log was removed or replaced while the session was open (folder deleted or restored?)"
            raise self._fail("make the log durable", OSError(errno.ESTALE, reason), self._size)

    def _repair_torn_tail(self, fd: int, torn: TornTail) -> None:
        """Make the log end with a complete line before the first append after a crash.

        A complete entry that lost only its newline gets it; anything else is copied to a new
        `log.jsonl.torn-<offset>` file (never over an older one), made durable with its folder, and
        only then cut from the log.
        """
        with open_for_reading(self.log_path) as f:
            f.seek(torn.offset)
            tail = f.read()
        files = self._files
        if self._canonical.size > torn.offset:  # never: the record covers whole lines only
            self._canonical = Canonical()
        last = self._offset_list[-1] if self._offset_list else -1
        if tail and last == torn.offset:
            files.write(fd, b"\n")
            files.fsync(fd)
            saved = None
            self._size = torn.offset + len(tail) + 1
        else:
            saved = self._save_torn_bytes(torn.offset, tail)
            files.fsync_dir(self.folder)  # the copy is durable before the log loses the bytes
            files.ftruncate(fd, torn.offset)
            files.fsync(fd)
            self._size = torn.offset
        self._known_end = self._size
        self.report.torn_tail = TornTail(torn.offset, torn.length, saved)
        self._torn = None
        self._meta_urgent = self._dirty_meta = True

    def _save_torn_bytes(self, offset: int, tail: bytes) -> Path:
        for attempt in range(1_000):
            suffix = "" if attempt == 0 else f".{attempt}"
            saved = self.folder / f"{LOG_NAME}.torn-{offset}{suffix}"
            try:
                write_new_file(self._files, saved, tail)
            except FileExistsError:
                continue
            return saved
        raise FileExistsError(f"too many torn files at byte {offset} in {self.folder}")

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf; it becomes the new leaf.

        The id, parent and timestamp are stamped here. The line reaches the kernel at once; it is
        fsynced now when `durable` is true (default: only for critical entries), else at `flush`.
        Raises `SessionIOError` when the disk refuses; the session then takes no more appends.
        """
        self._check_writable()
        stamped = _storable(msgspec.structs.replace(entry, id=self._new_id(), parent_id=self._leaf, ts=self._clock()))
        must_sync = isinstance(stamped, CRITICAL_ENTRY_TYPES) if durable is None else durable
        self._write(stamped, sync=must_sync)
        return stamped

    def _write(self, entry: LogEntry, *, sync: bool) -> None:
        fd = self._writable_fd()
        line = encode_entry(entry) + b"\n"
        offset = self._size
        try:
            self._files.write(fd, line)
        except OSError as exc:
            self._roll_back(fd, offset)
            raise self._fail("append to the log", exc, offset) from None
        self._size += len(line)
        self._known_end = self._size
        canonical = self._canonical
        if canonical.size == offset and is_canonical_line(line[:-1]):
            self._canonical = self._record_after(canonical, entry, offset, zlib.crc32(line, canonical.crc32))
        self._remember(entry)
        self._offset_list.append(offset)
        if isinstance(entry, CompactionBoundary):
            self._view_start, self._view_start_known = entry.first_kept_id or entry.id, True
            self._meta_urgent = True
        elif self._leaf is None:
            self._view_start, self._view_start_known = entry.id, True
        self._leaf = entry.id
        self._count += 1
        self._dirty_meta = True
        if self.meta.title == "" and isinstance(entry, UserMessage):
            self.meta = msgspec.structs.replace(self.meta, title=_title_from(entry.text))
            self._meta_urgent = True
        if sync:
            self._sync(fd)
            if isinstance(entry, CompactionBoundary):
                self._write_meta()
        else:
            self._unsynced = True

    def _record_after(self, canonical: Canonical, entry: LogEntry, offset: int, crc32: int) -> Canonical:
        """The canonical record once the canonical line of `entry` (at `offset`) is written after it."""
        linked, distinct, max_id = canonical.linked, canonical.distinct, canonical.max_id
        if linked == offset and entry.parent_id in (None, self._leaf):  # the leaf is an entry of the log
            linked = self._size
        if distinct == offset:
            whole = self._by_id if self._loaded_from == 0 else None  # every id of the log, when loaded
            if entry.id > max_id or (whole is not None and entry.id not in whole):
                distinct, max_id = self._size, max(max_id, entry.id)
        return Canonical(self._size, crc32, linked, distinct, max_id)

    def _roll_back(self, fd: int, offset: int) -> None:
        """Cut the partial line a failed write may have left, so no later line lands on it."""
        # on failure the session is closed to appends anyway, and the next open reports the torn tail
        with contextlib.suppress(OSError):
            self._files.ftruncate(fd, offset)

    def _sync(self, fd: int) -> None:
        try:
            self._files.fsync(fd)
        except OSError as exc:
            # after a failed fsync the kernel may have dropped the dirty pages: nothing written since
            # the last good fsync can be trusted, so this session stops here
            raise self._fail("make the log durable", exc, self._size) from None
        self._verify(fd)
        self._unsynced = False

    def flush(self) -> None:
        """The turn boundary: fsync what was appended; refresh the metadata when it matters.

        The metadata is rewritten at once after a branch, a compaction or a new title, and
        otherwise at most every `META_REFRESH_SECONDS` (and on close): a stale `meta.json` only
        makes the next open read a little more, because the open reconciles it with the log.
        """
        if self._lock is None:
            return
        self._check_writable()
        if self._fd is not None and self._unsynced:
            self._sync(self._fd)
        else:
            self._verify(self._fd)  # nothing new, but the caller takes what it appended as durable
        if self._dirty_meta:
            due = time.monotonic() - self._meta_written_at >= META_REFRESH_SECONDS
            if self._meta_urgent or due:
                self._write_meta()

    def _resume_offset(self) -> int:
        """Byte offset of the first entry the current leaf's provider view needs."""
        if not self._view_start_known:
            try:
                self._view_start = view_start_id(self._entries, self._leaf, self._links)
            except MissingEntryError:
                return 0
            self._view_start_known = True
        start = self._view_start
        if start is None:
            return 0
        offset = self._offset_of(start)
        return offset if offset is not None else 0

    def _write_meta(self) -> None:
        """Replace `meta.json`; a failure is reported (the next open reconciles), never raised."""
        self.meta = msgspec.structs.replace(
            self.meta,
            resume_offset=self._resume_offset(),
            updated_at=self._clock(),
            leaf_id=self._leaf,
            leaf_offset=self._size,
            log_size=self._size,
            entry_count=self._count,
            canonical_size=self._canonical.size,
            canonical_crc32=self._canonical.crc32,
            canonical_linked=self._canonical.linked,
            canonical_distinct=self._canonical.distinct,
            canonical_max_id=self._canonical.max_id,
        )
        try:
            if self._lock is not None:
                self._lock.verify()  # never into a folder put in place of this session's
            write_meta(self.folder, self.meta, self._files)
        except SessionIOError as exc:
            self.report.meta_problem = f"metadata could not be written: {exc}"
            return
        self._dirty_meta = False
        self._meta_urgent = False
        self._meta_written_at = time.monotonic()

    @overload
    def branch(self, entry_id: str, *, first: None = None) -> None: ...
    @overload
    def branch(self, entry_id: str, *, first: E) -> E: ...
    def branch(self, entry_id: str, *, first: E | None = None) -> E | None:
        """Move the leaf to `entry_id`: the next append starts a new branch from there.

        With `first`, the branch's first entry is appended as a child of `entry_id` in the same
        step, as one fsynced line: a crash leaves the old leaf or the branch with its first entry,
        never the branch without it. Returns the stamped `first`.
        """
        self.get(entry_id)
        stamped: E | None = None
        previous = self._leaf
        self._leaf = entry_id
        if first is not None:
            try:
                stamped = self.append(first, durable=True)
            except BaseException:
                self._leaf = previous
                raise
        self._view_start_known = False
        self._dirty_meta = True
        self._meta_urgent = True
        if self._lock is not None:
            self._writable_fd()
            self.flush()
        return stamped

    def _rewrite_log(self, data: bytes) -> Path:
        """Swap in `data` as the log, atomically, keeping the current log as `log.jsonl.damaged-<n>`.

        At every instant `log.jsonl` is the old log or the new one, and the old one is never deleted
        (it is hard-linked to its new name before the swap). Reloads the session from the new log.
        """
        self._check_writable()
        files = self._files
        if self._fd is not None:
            files.close(self._fd)
            self._fd = None
        tmp = self.folder / f".{LOG_NAME}.repair.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()  # an interrupted earlier repair: only ever a copy
            write_new_file(files, tmp, data)
            kept = self._keep_original()
            # a metadata file that records nothing of the old log: a crash before the new one is
            # written must not make the shorter new log look cut
            assert self._lock is not None  # checked writable above
            self._lock.verify()
            write_meta(self.folder, _unrecorded(self.meta), files)
            files.fsync_dir(self.folder)
            files.replace(tmp, self.log_path)
            files.fsync_dir(self.folder)
        except OSError as exc:
            raise SessionIOError(self.log_path, "replace the log with its repaired copy", exc) from None
        leaf = self._leaf
        self.report = LoadReport()
        self._load(0)
        self._leaf = leaf if leaf in self._entries else self._last_id()
        self._count = len(self._entry_list)
        self._dirty_meta = self._meta_urgent = True
        self._write_meta()
        return kept

    def _keep_original(self) -> Path:
        for n in range(1, 10_000):
            kept = self.folder / f"{LOG_NAME}.damaged-{n}"
            if kept.exists():
                continue
            try:
                self._files.link(self.log_path, kept)
            except FileExistsError:
                continue
            except OSError:  # no hard links here: a durable copy instead
                with open_for_reading(self.log_path) as f:
                    write_new_file(self._files, kept, f.read())
            return kept
        raise FileExistsError(f"too many kept logs in {self.folder}")

    def close(self) -> None:
        """Flush, write the metadata and release the write lock. Safe to call twice.

        The lock is released even when the flush fails (its error is raised after).
        """
        if self._lock is None:
            return
        if not self._lock.held:  # a forked child of the writer: it held nothing, it has nothing to write
            self._abandon()
            return
        try:
            if self._failed is None:
                self.flush()
                if self._dirty_meta:
                    self._write_meta()
        finally:
            self._abandon()

    def _abandon(self) -> None:
        """Let go of the descriptor and the lock without writing anything."""
        if self._fd is not None:
            with contextlib.suppress(OSError):  # nothing left to save through it
                self._files.close(self._fd)
            self._fd = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> JsonlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unrecorded(meta: SessionMeta) -> SessionMeta:
    """`meta` with no record of the log (size, count, leaf, canonical prefix): the next open counts afresh."""
    return msgspec.structs.replace(
        meta,
        leaf_id=None,
        leaf_offset=0,
        resume_offset=0,
        log_size=0,
        entry_count=0,
        canonical_size=0,
        canonical_crc32=0,
        canonical_linked=0,
        canonical_distinct=0,
        canonical_max_id="",
    )
