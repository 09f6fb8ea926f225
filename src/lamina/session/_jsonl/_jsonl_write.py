"""An open JSONL session: its log loaded (from the latest boundary), appends, group commit, branches (I/O).

`JsonlSession` holds the index of `SessionCore`, loaded by reading and scanning the log
(`_jsonl_open`); it owns a `LogWriter` (its lock and every byte it writes) and a `FolderFiles` (its
files). The folder's layout and durability are described in `lamina.session._jsonl._jsonl_store`.
"""

from __future__ import annotations

import bisect
import time
import zlib
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import BinaryIO, Final, TypeVar, overload

import msgspec

from lamina.errors import LaminaError, MissingEntryError, SessionCorruptError, SessionIOError
from lamina.session._entries import (
    CRITICAL_ENTRY_TYPES,
    CompactionBoundary,
    Entry,
    LogEntry,
    UserMessage,
    encode_entry,
)
from lamina.session._jsonl._file_layer import OS_FILES, FileLayer
from lamina.session._jsonl._jsonl_open import (
    LOG_NAME,
    canonical_of,
    load_log,
    starts_line,
)
from lamina.session._jsonl._log_writer import LogWriter
from lamina.session._jsonl._session_meta import SessionMeta
from lamina.session._jsonl._writer_lock import WriterLock
from lamina.session._protocol import FileInfo, FileSource, LoadReport, LogCut, SessionSummary
from lamina.session._scan import Canonical, Offsets, TornTail, is_canonical_line
from lamina.session._session_core import SessionCore
from lamina.session._session_files import FolderFiles
from lamina.session._stamp import _new_entry_id, _storable, _title_from
from lamina.session._tree import view_start_id

_ENTRY_ID: Final = attrgetter("id")
META_REFRESH_SECONDS: Final = 5.0
"""Longest time a flush leaves `meta.json` behind the log (branches and compactions are written at once)."""

E = TypeVar("E", bound=Entry)


class JsonlSession(SessionCore):
    """A session backed by a folder on the local disk. Create it through `LocalSessionStore`."""

    def __init__(
        self,
        folder: Path,
        meta: SessionMeta,
        *,
        lock: WriterLock | None,
        report: LoadReport,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = _new_entry_id,
        files: FileLayer = OS_FILES,
    ) -> None:
        super().__init__()
        self.folder = folder
        self.meta = meta
        self.report = report
        self._clock = clock
        self._new_id = new_id
        self._log = LogWriter(folder, meta.id, lock, files)
        """The lock, and every write into the folder."""
        self._folder_files = FolderFiles(folder, self._log.check_writable)
        """The session's files (a read-only session takes none)."""
        self._offset_list = Offsets()
        """Byte offset of each entry of `_order` (worked out when first needed)."""
        self._offset_memo: tuple[str, int] | None = None
        """The last offset looked up by id (the provider view's start, asked for at every metadata write)."""
        self._loaded_from = 0
        """Byte offset from which the log is loaded (0: the whole log)."""
        self._known_end = 0
        """End of the bytes read or written so far (a full load reads up to here)."""
        self._size = 0
        """End of the last complete line: where the next append goes."""
        self._count = meta.entry_count
        self._canonical = canonical_of(meta)
        """The log's prefix of lines known canonical (see `Canonical`), grown by each append that follows it."""
        self._dirty_meta = False
        self._torn: TornTail | None = None
        # where the leaf's provider view starts, kept up to date so a flush never walks the tree
        self._view_start: str | None = None
        self._view_start_known = False
        self._meta_urgent = False
        self._meta_written_at = time.monotonic()

    # -- loading -----------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.folder / LOG_NAME

    def _load(self, start: int, end: int | None = None) -> bool:
        """Replace what is in memory with the log from byte `start` (to `end`); False: only a whole load mends it.

        A tail that holds damage only the whole log can mend (a corrupt line, a duplicate id, a
        parent later in the file) returns False; a whole log is always mended here.
        """
        writer = self._log.writing
        loaded = load_log(self.log_path, start, end, canonical=self._canonical, writer=writer, report=self.report)
        self._by_id, self._order_list, self._entry_list = loaded.by_id, loaded.ids, loaded.entries
        self._offset_list, self._offset_memo, self._links = loaded.offsets, None, loaded.links
        self._view_start_known = False
        self._torn, self._size, self._known_end = loaded.scan.torn, loaded.scan.end, loaded.known_end
        self._loaded_from = start
        self._canonical = loaded.canonical
        if loaded.learned:
            self._dirty_meta = True
        return loaded.complete

    def _open_for_resume(self) -> None:
        start = self.meta.resume_offset
        if start > 0 and not starts_line(self.log_path, start):
            start = 0
        if not self._load(start):
            self._load(0, self._known_end)
        self._leaf = self._pick_leaf()
        if self._loaded_from > 0:
            try:
                view_start_id(self._entries, self._leaf, self._links)
            except MissingEntryError:
                self.load_all()

    def _find_cut(self) -> LogCut | None:
        """The log's loss when it is shorter than the metadata's record of it and lines are missing.

        The metadata only ever lags the log (it is written after the log is made durable), so a log
        shorter than its record, with fewer lines than the entries it records, was cut or emptied
        from outside. Lines that are there but damaged (corrupt, duplicate, a torn last line) are
        reported as such, not as a cut.
        """
        meta = self.meta
        if meta.log_size <= self._known_end:
            return None
        self.load_all()
        report = self.report
        found = len(self._entry_list)
        lines = found + len(report.corrupt_lines) + len(report.duplicate_ids) + (report.torn_tail is not None)
        if lines >= meta.entry_count:
            return None
        return LogCut(self._known_end, meta.log_size, meta.entry_count, found)

    def _pick_leaf(self) -> str | None:
        """The leaf the metadata names when no append came after it, else the last entry of the log."""
        meta = self.meta
        if meta.leaf_id is not None and meta.leaf_offset == self._size:
            if meta.leaf_id not in self._entries and self._loaded_from > 0:
                self.load_all()
            if meta.leaf_id in self._entries:
                return meta.leaf_id
        return self._last_id()

    def _count_entries(self) -> int:
        """Entries in the log: the metadata's count plus what came after it, or a full count."""
        meta = self.meta
        if meta.log_size == self._size:
            return meta.entry_count
        if self._loaded_from <= meta.log_size <= self._size:
            offsets = self._offset_list.resolved()
            after = bisect.bisect_left(offsets, meta.log_size)
            if meta.log_size == self._size or (after < len(offsets) and offsets[after] == meta.log_size):
                return meta.entry_count + len(offsets) - after
        self.load_all()
        return len(self._entry_list)

    def load_all(self) -> None:
        """Load the whole log (needed for full history, paths into old branches, forks)."""
        if self._loaded_from == 0:
            return
        leaf = self._leaf
        self._load(0, self._known_end)
        # the tail's copy of the leaf was a duplicate (looked up only when the leaf is not the last entry)
        if leaf is not None and self._last_id() != leaf and leaf not in self._entries:
            self._leaf = self._last_id()

    # -- reading -----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.meta.id

    def _header(self) -> SessionSummary:
        m = self.meta
        return SessionSummary(m.id, m.title, m.created_at, m.updated_at, m.entry_count, m.cwd, m.forked_from)

    @property
    def _files_root(self) -> Path:
        return self.folder

    def _unreachable(self, exc: MissingEntryError) -> LaminaError:
        return SessionCorruptError(self.log_path, f"entry {exc.entry_id!r} is referenced but missing")

    def _offset_of(self, entry_id: str) -> int | None:
        if self._offset_memo is not None and self._offset_memo[0] == entry_id:
            return self._offset_memo[1]
        if entry_id not in self._entries:
            return None
        order = self._order
        index = len(order) - 1 - order[::-1].index(entry_id)  # looked for from the end, where it usually is
        offset = self._offset_list[index]
        self._offset_memo = (entry_id, offset)
        return offset

    # -- the files (kept in the folder) --------------------------------------------------------

    def put_file(self, name: str, source: FileSource) -> FileInfo:
        return self._folder_files.put_file(name, source)

    def open_file(self, name: str) -> BinaryIO:
        return self._folder_files.open_file(name)

    def stat_file(self, name: str) -> FileInfo | None:
        return self._folder_files.stat_file(name)

    def list_files(self, prefix: str = "") -> list[FileInfo]:
        return self._folder_files.list_files(prefix)

    def local_file(self, name: str) -> Path:
        return self._folder_files.local_file(name)

    def shown_path(self, name: str = "") -> str:
        return self._folder_files.shown_path(name)

    def file_name(self, shown: str) -> str | None:
        return self._folder_files.file_name(shown)

    # -- writing -----------------------------------------------------------------------------

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
        if not self._log.writing:
            return
        # what this open shows must be durable before anything is built on it (a killed writer's
        # last appends may still sit in the page cache only)
        self._log.make_durable()
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

    def _writable_fd(self) -> int:
        log = self._log
        log.check_writable()
        if log.fd is None:
            fd = log.open_for_append(self._size)
            if self._torn is not None:
                self._repair_torn_tail(fd, self._torn)
            log.fd = fd
        return log.fd

    def _repair_torn_tail(self, fd: int, torn: TornTail) -> None:
        """Make the log end with a complete line before the first append after a crash (see `LogWriter`)."""
        if self._canonical.size > torn.offset:  # never: the record covers whole lines only
            self._canonical = Canonical()
        ends_entry = bool(self._offset_list) and self._offset_list[-1] == torn.offset
        self._size, saved = self._log.repair_torn_tail(fd, torn, ends_entry=ends_entry)
        self._known_end = self._size
        self.report.torn_tail = TornTail(torn.offset, torn.length, saved)
        self._torn = None
        self._meta_urgent = self._dirty_meta = True

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf; it becomes the new leaf.

        The id, parent and timestamp are stamped here. The line reaches the kernel at once; it is
        fsynced now when `durable` is true (default: only for critical entries), else at `flush`.
        Raises `SessionIOError` when the disk refuses; the session then takes no more appends.
        """
        self._log.check_writable()
        stamped = _storable(msgspec.structs.replace(entry, id=self._new_id(), parent_id=self._leaf, ts=self._clock()))
        must_sync = isinstance(stamped, CRITICAL_ENTRY_TYPES) if durable is None else durable
        self._write(stamped, sync=must_sync)
        return stamped

    def _write(self, entry: LogEntry, *, sync: bool) -> None:
        fd = self._writable_fd()
        line = encode_entry(entry) + b"\n"
        offset = self._size
        self._log.append(fd, line, offset)
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
            self._log.sync(fd, self._size)
            if isinstance(entry, CompactionBoundary):
                self._write_meta()
        else:
            self._log.unsynced = True

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

    def flush(self) -> None:
        """The turn boundary: fsync what was appended; refresh the metadata when it matters.

        The metadata is rewritten at once after a branch, a compaction or a new title, and
        otherwise at most every `META_REFRESH_SECONDS` (and on close): a stale `meta.json` only
        makes the next open read a little more, because the open reconciles it with the log.
        """
        log = self._log
        if not log.writing:
            return
        log.check_writable()
        if log.fd is not None and log.unsynced:
            log.sync(log.fd, self._size)
        else:
            log.verify(log.fd, self._size)  # nothing new, but the caller takes what it appended as durable
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
            self._log.write_meta(self.meta)
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
        if self._log.writing:
            self._writable_fd()
            self.flush()
        return stamped

    def _rewrite_log(self, data: bytes) -> Path:
        """Swap in `data` as the log, atomically, keeping the current log as `log.jsonl.damaged-<n>`.

        At every instant `log.jsonl` is the old log or the new one, and the old one is never deleted
        (it is hard-linked to its new name before the swap). Reloads the session from the new log.
        """
        kept = self._log.replace_log(data, _unrecorded(self.meta))
        leaf = self._leaf
        self.report = LoadReport()
        self._load(0)
        self._leaf = leaf if leaf in self._entries else self._last_id()
        self._count = len(self._entry_list)
        self._dirty_meta = self._meta_urgent = True
        self._write_meta()
        return kept

    def close(self) -> None:
        """Flush, write the metadata and release the write lock. Safe to call twice.

        The lock is released even when the flush fails (its error is raised after).
        """
        lock = self._log.lock
        if lock is None:
            return
        if not lock.held:  # a forked child of the writer: it held nothing, it has nothing to write
            self._abandon()
            return
        try:
            if self._log.failed is None:
                self.flush()
                if self._dirty_meta:
                    self._write_meta()
        finally:
            self._abandon()

    def _abandon(self) -> None:
        """Let go of the descriptor and the lock without writing anything."""
        self._log.release()

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
