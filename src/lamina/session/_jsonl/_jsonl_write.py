"""An open JSONL session: its log loaded (from the latest boundary), appends, group commit, branches (I/O).

`JsonlSession` keeps the index of `SessionCore`, filled by `load_log` (`_jsonl_open`), and owns its
parts: a `LogWriter` (the lock, the log's end, every byte written), a `MetaKeeper` (`meta.json`) and
a `FolderFiles` (the session's files). The folder's layout and durability are described in
`lamina.session._jsonl._jsonl_store`.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar, overload

import msgspec

from lamina.errors import LaminaError, MissingEntryError, SessionCorruptError
from lamina.session._entries import CRITICAL_ENTRY_TYPES, CompactionBoundary, Entry, LogEntry, UserMessage
from lamina.session._jsonl._file_layer import OS_FILES, FileLayer
from lamina.session._jsonl._jsonl_open import LOG_NAME, load_log, starts_line
from lamina.session._jsonl._log_writer import LogWriter
from lamina.session._jsonl._session_meta import LogFacts, MetaKeeper, SessionMeta, canonical_of, unrecorded
from lamina.session._jsonl._writer_lock import WriterLock
from lamina.session._protocol import FileInfo, FileSource, LoadReport, LogCut, SessionSummary
from lamina.session._scan import Offsets
from lamina.session._session_core import SessionCore
from lamina.session._session_files import FolderFiles
from lamina.session._stamp import _new_entry_id, _storable, _title_from
from lamina.session._tree import view_start_id

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
        self.report = report
        self._clock = clock
        self._new_id = new_id
        self._log = LogWriter(folder, meta.id, lock, files, canonical_of(meta))
        """The lock, the log's end and canonical record, and every write into the folder."""
        self._meta = MetaKeeper(meta, write=self._log.write_meta, clock=clock)
        """The metadata, and when it is replaced."""
        self._folder_files = FolderFiles(folder, self._log.check_writable)
        """The session's files (a read-only session takes none)."""
        self._offset_list = Offsets()
        """Byte offset of each entry of `_order` (worked out when first needed)."""
        self._offset_memo: tuple[str, int] | None = None
        """The last offset looked up by id (the provider view's start, asked for at every metadata write)."""
        self._loaded_from = 0
        """Byte offset from which the log is loaded (0: the whole log)."""
        self._count = meta.entry_count
        # where the leaf's provider view starts, kept up to date so a flush never walks the tree
        self._view_start: str | None = None
        self._view_start_known = False

    @property
    def meta(self) -> SessionMeta:
        """The session's metadata, as last written or about to be."""
        return self._meta.meta

    @property
    def _size(self) -> int:
        """End of the last complete line: where the next append goes."""
        return self._log.size

    # -- loading -----------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.folder / LOG_NAME

    def _load(self, start: int, end: int | None = None) -> bool:
        """Replace what is in memory with the log from byte `start` (to `end`); False: only a whole load mends it.

        A tail that holds damage only the whole log can mend (a corrupt line, a duplicate id, a
        parent later in the file) returns False; a whole log is always mended here.
        """
        log = self._log
        loaded = load_log(self.log_path, start, end, canonical=log.canonical, writer=log.writing, report=self.report)
        log.loaded(loaded)
        self._by_id, self._order_list, self._entry_list = loaded.by_id, loaded.ids, loaded.entries
        self._offset_list, self._offset_memo, self._links = loaded.offsets, None, loaded.links
        self._view_start_known = False
        self._loaded_from = start
        if loaded.learned:
            self._meta.dirty = True
        return loaded.complete

    def _open_for_resume(self) -> None:
        start = self.meta.resume_offset
        if start > 0 and not starts_line(self.log_path, start):
            start = 0
        if not self._load(start):
            self._load(0, self._log.known_end)
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
        meta, known_end = self.meta, self._log.known_end
        if meta.log_size <= known_end:
            return None
        self.load_all()
        report = self.report
        found = len(self._entry_list)
        lines = found + len(report.corrupt_lines) + len(report.duplicate_ids) + (report.torn_tail is not None)
        if lines >= meta.entry_count:
            return None
        return LogCut(known_end, meta.log_size, meta.entry_count, found)

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
        self._load(0, self._log.known_end)
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
            self._meta.meta = msgspec.structs.replace(self.meta, title=title)
            self._count = len(self._entry_list)
        else:
            self._count = self._count_entries()
        if not self._log.writing:
            return
        # what this open shows must be durable before anything is built on it (a killed writer's
        # last appends may still sit in the page cache only)
        self._log.make_durable()
        if self._meta.differs(self._facts()) or rebuild:
            self._meta.dirty = True
            self._write_meta()

    def _writable_fd(self) -> int:
        log = self._log
        log.check_writable()
        if log.fd is None:
            fd = log.open_for_append()
            if log.torn is not None:
                last = self._offset_list[-1] if self._offset_list else -1
                self.report.torn_tail = log.repair_torn_tail(fd, last_offset=last)
                self._meta.urgent = self._meta.dirty = True
            log.fd = fd
        return log.fd

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
        whole = self._by_id if self._loaded_from == 0 else None  # every id of the log, when loaded
        self._offset_list.append(self._log.append(fd, entry, leaf=self._leaf, ids=whole))
        self._remember(entry)
        meta = self._meta
        if isinstance(entry, CompactionBoundary):
            self._view_start, self._view_start_known = entry.first_kept_id or entry.id, True
            meta.urgent = True
        elif self._leaf is None:
            self._view_start, self._view_start_known = entry.id, True
        self._leaf = entry.id
        self._count += 1
        meta.dirty = True
        if meta.meta.title == "" and isinstance(entry, UserMessage):
            meta.meta = msgspec.structs.replace(meta.meta, title=_title_from(entry.text))
            meta.urgent = True
        if sync:
            self._log.sync(fd)
            if isinstance(entry, CompactionBoundary):
                self._write_meta()
        else:
            self._log.unsynced = True

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
            log.sync(log.fd)
        else:
            log.verify(log.fd)  # nothing new, but the caller takes what it appended as durable
        if self._meta.due():
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

    def _facts(self) -> LogFacts:
        log = self._log
        return LogFacts(self._leaf, log.size, self._count, log.canonical, self._resume_offset())

    def _write_meta(self) -> None:
        """Replace `meta.json`; a failure is reported (the next open reconciles), never raised."""
        problem = self._meta.save(self._facts())
        if problem is not None:
            self.report.meta_problem = problem

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
        self._meta.dirty = self._meta.urgent = True
        if self._log.writing:
            self._writable_fd()
            self.flush()
        return stamped

    def _rewrite_log(self, data: bytes) -> Path:
        """Swap in `data` as the log, atomically, keeping the current log as `log.jsonl.damaged-<n>`.

        At every instant `log.jsonl` is the old log or the new one, and the old one is never deleted
        (it is hard-linked to its new name before the swap). Reloads the session from the new log.
        """
        kept = self._log.replace_log(data, unrecorded(self.meta))
        leaf = self._leaf
        self.report = LoadReport()
        self._load(0)
        self._leaf = leaf if leaf in self._entries else self._last_id()
        self._count = len(self._entry_list)
        self._meta.dirty = self._meta.urgent = True
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
                if self._meta.dirty:
                    self._write_meta()
        finally:
            self._abandon()

    def _abandon(self) -> None:
        """Let go of the descriptor and the lock without writing anything."""
        self._log.release()
