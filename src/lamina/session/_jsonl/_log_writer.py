"""The writer's hold on a session's log: its lock, its end, its canonical record, the first failure (I/O).

Every byte a `JsonlSession` writes into its folder goes through its `LogWriter`, which checks first
that the lock and the log are still the files at the session's paths.
"""

from __future__ import annotations

import contextlib
import errno
import os
import zlib
from collections.abc import Container
from pathlib import Path

from lamina._atomic import atomic_write
from lamina.errors import SessionCorruptError, SessionIOError, UsageError
from lamina.session._entries import LogEntry, encode_entry
from lamina.session._jsonl._file_layer import LINK_REFUSED, FileLayer, is_link_refusal, is_same_file, write_new_file
from lamina.session._jsonl._jsonl_open import LOG_NAME, LoadedLog
from lamina.session._jsonl._session_meta import SessionMeta, write_meta
from lamina.session._jsonl._writer_lock import WriterLock
from lamina.session._scan import Canonical, TornTail, is_canonical_line
from lamina.session._session_files import NOFOLLOW, open_for_reading


class LogWriter:
    """Writes a session folder's log and metadata for the holder of its lock (a reader's has no lock)."""

    def __init__(
        self, folder: Path, session_id: str, lock: WriterLock | None, files: FileLayer, canonical: Canonical
    ) -> None:
        self.folder = folder
        self.path = folder / LOG_NAME
        self._session_id = session_id
        self.lock = lock
        """The write lock, taken by the store before the metadata is read; None when read-only or closed."""
        self.files = files
        """The layer every write goes through."""
        self.fd: int | None = None
        """The log open for appending, from the first write on."""
        self.failed: SessionIOError | None = None
        """The write error that ended this session's appends; reopen the session to continue."""
        self.unsynced = False
        """Lines were written since the last fsync."""
        self.size = 0
        """End of the last complete line: where the next append goes."""
        self.known_end = 0
        """End of the bytes read or written so far (a full load reads up to here)."""
        self.canonical = canonical
        """The log's prefix of lines known canonical (see `Canonical`), grown by each append that follows it."""
        self.torn: TornTail | None = None
        """The torn last line the latest load found, repaired before the first append."""

    def loaded(self, loaded: LoadedLog) -> None:
        """Take what a load found: the log's end, its canonical record, a torn last line."""
        self.torn, self.size, self.known_end = loaded.scan.torn, loaded.scan.end, loaded.known_end
        self.canonical = loaded.canonical

    @property
    def writing(self) -> bool:
        """The session was opened to write and is not closed (it has its lock object)."""
        return self.lock is not None

    def check_writable(self) -> None:
        """Raise unless this session may write: opened to write, its lock still its own, no write failed."""
        if self.lock is None:
            raise UsageError(f"session {self._session_id} was opened read-only")
        if self.failed is None and not self.lock.held:  # a forked child of the writer: never a writer
            try:
                self.lock.verify()
            except SessionIOError as exc:
                raise self.fail(exc.action, exc.error, None, path=exc.path) from None
        if self.failed is not None:
            failed = self.failed
            raise SessionIOError(
                failed.path,
                f"{failed.action} (an earlier write failed; reopen the session)",
                failed.error,
                offset=failed.offset,
            )

    def fail(self, action: str, exc: OSError, offset: int | None, *, path: Path | None = None) -> SessionIOError:
        """Record a failed write: this session takes no more appends (the next open repairs the tail)."""
        self.failed = SessionIOError(path or self.path, action, exc, offset=offset)
        return self.failed

    def verify(self, fd: int | None) -> None:
        """Check that the lock held and the log open as `fd` are still the files at the session's paths.

        Run before anything is acknowledged: a folder removed, moved or restored from a copy under
        this writer fails here (and the session takes no more appends), so no flush acknowledges
        entries written into files nobody will read, and a second writer in the restored folder is
        the only one. Raises `SessionIOError`.
        """
        assert self.lock is not None
        try:
            self.lock.verify()
        except SessionIOError as exc:
            raise self.fail(exc.action, exc.error, None, path=exc.path) from None
        if fd is not None and not is_same_file(fd, self.path):
            reason = "the log was removed or replaced while the session was open (folder deleted or restored?)"
            raise self.fail("make the log durable", OSError(errno.ESTALE, reason), self.size)

    def open_for_append(self) -> int:
        """The log opened to append (not yet kept as `fd`), checked to be the file at its path."""
        try:
            fd = self.files.open(self.path, os.O_WRONLY | os.O_APPEND | NOFOLLOW)
        except OSError as exc:
            if is_link_refusal(exc):
                raise SessionCorruptError(self.path, LINK_REFUSED) from None
            raise SessionIOError(self.path, "open the log for appending", exc) from None
        try:
            self.verify(fd)  # opened after the check of the lock: a log of a folder put in its place fails it
        except SessionIOError:
            self.files.close(fd)
            raise
        return fd

    def repair_torn_tail(self, fd: int, *, last_offset: int) -> TornTail:
        """Make the log end with a complete line before the first append after a crash.

        A complete entry that lost only its newline (the last entry loaded, at `last_offset`) gets
        it; anything else is copied to a new `log.jsonl.torn-<offset>` file (never over an older
        one), made durable with its folder, and only then cut from the log. Returns the torn line
        with where its bytes are kept; a failure closes `fd` and ends the appends.
        """
        torn, files = self.torn, self.files
        assert torn is not None
        try:
            with open_for_reading(self.path) as f:
                f.seek(torn.offset)
                tail = f.read()
            if self.canonical.size > torn.offset:  # never: the record covers whole lines only
                self.canonical = Canonical()
            saved = None
            if tail and last_offset == torn.offset:
                files.write(fd, b"\n")
                files.fsync(fd)
                self.size = torn.offset + len(tail) + 1
            else:
                saved = self._save_torn_bytes(torn.offset, tail)
                files.fsync_dir(self.folder)  # the copy is durable before the log loses the bytes
                files.ftruncate(fd, torn.offset)
                files.fsync(fd)
                self.size = torn.offset
        except OSError as exc:
            files.close(fd)
            raise self.fail("repair the torn last line", exc, torn.offset) from None
        self.known_end = self.size
        self.torn = None
        return TornTail(torn.offset, torn.length, saved)

    def _save_torn_bytes(self, offset: int, tail: bytes) -> Path:
        for attempt in range(1_000):
            suffix = "" if attempt == 0 else f".{attempt}"
            saved = self.folder / f"{LOG_NAME}.torn-{offset}{suffix}"
            try:
                write_new_file(self.files, saved, tail)
            except FileExistsError:
                continue
            return saved
        raise FileExistsError(f"too many torn files at byte {offset} in {self.folder}")

    def append(self, fd: int, entry: LogEntry, *, leaf: str | None, ids: Container[str] | None) -> int:
        """Write `entry`'s line at the log's end; returns its offset. A failed write is cut back and ends the appends.

        `leaf` is the entry the log's leaf was before it, `ids` every id of the log when all are
        loaded (else None): with them the canonical record follows the append.
        """
        line = encode_entry(entry) + b"\n"
        offset = self.size
        try:
            self.files.write(fd, line)
        except OSError as exc:
            # cut the partial line a failed write may have left, so no later line lands on it (on failure
            # the session is closed to appends anyway, and the next open reports the torn tail)
            with contextlib.suppress(OSError):
                self.files.ftruncate(fd, offset)
            raise self.fail("append to the log", exc, offset) from None
        self.size += len(line)
        self.known_end = self.size
        canonical = self.canonical
        if canonical.size == offset and is_canonical_line(line[:-1]):
            self.canonical = self._record_after(entry, offset, zlib.crc32(line, canonical.crc32), leaf, ids)
        return offset

    def _record_after(
        self, entry: LogEntry, offset: int, crc32: int, leaf: str | None, ids: Container[str] | None
    ) -> Canonical:
        """The canonical record once the canonical line of `entry` (at `offset`) is written after it."""
        canonical = self.canonical
        linked, distinct, max_id = canonical.linked, canonical.distinct, canonical.max_id
        if linked == offset and entry.parent_id in (None, leaf):  # the leaf is an entry of the log
            linked = self.size
        if distinct == offset and (entry.id > max_id or (ids is not None and entry.id not in ids)):
            distinct, max_id = self.size, max(max_id, entry.id)
        return Canonical(self.size, crc32, linked, distinct, max_id)

    def sync(self, fd: int) -> None:
        """Make the log durable, and check it is still the session's."""
        try:
            self.files.fsync(fd)
        except OSError as exc:
            # after a failed fsync the kernel may have dropped the dirty pages: nothing written since
            # the last good fsync can be trusted, so this session stops here
            raise self.fail("make the log durable", exc, self.size) from None
        self.verify(fd)
        self.unsynced = False

    def make_durable(self) -> None:
        """Fsync the log as it is (what an open found must be durable before anything is built on it)."""
        try:
            fd = self.files.open(self.path, os.O_RDONLY | NOFOLLOW)
            try:
                self.files.fsync(fd)
            finally:
                self.files.close(fd)
        except OSError as exc:
            raise SessionIOError(self.path, "make the log durable", exc) from None

    def write_meta(self, meta: SessionMeta) -> None:
        """Replace `meta.json`, never in a folder put in place of this session's. Raises `SessionIOError`."""
        if self.lock is not None:
            self.lock.verify()
        write_meta(self.folder, meta, self.files)

    def replace_log(self, data: bytes, blank: SessionMeta) -> Path:
        """Swap in `data` as the log, atomically, keeping the current log as `log.jsonl.damaged-<n>`.

        At every instant `log.jsonl` is the old log or the new one, and the old one is never deleted
        (it is hard-linked to its new name before the swap). `blank` is written as the metadata
        first: a crash before the new one is written must not make the shorter new log look cut.
        Returns where the old log is kept.
        """
        self.check_writable()
        files = self.files
        if self.fd is not None:
            files.close(self.fd)
            self.fd = None
        try:
            kept = self._keep_original()
            self.write_meta(blank)
            files.fsync_dir(self.folder)
            atomic_write(self.path, data, steps=files)
        except OSError as exc:
            raise SessionIOError(self.path, "replace the log with its repaired copy", exc) from None
        return kept

    def _keep_original(self) -> Path:
        for n in range(1, 10_000):
            kept = self.folder / f"{LOG_NAME}.damaged-{n}"
            if kept.exists():
                continue
            try:
                self.files.link(self.path, kept)
            except FileExistsError:
                continue
            except OSError:  # no hard links here: a durable copy instead
                with open_for_reading(self.path) as f:
                    write_new_file(self.files, kept, f.read())
            return kept
        raise FileExistsError(f"too many kept logs in {self.folder}")

    def release(self) -> None:
        """Let go of the descriptor and the lock without writing anything."""
        if self.fd is not None:
            with contextlib.suppress(OSError):  # nothing left to save through it
                self.files.close(self.fd)
            self.fd = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
