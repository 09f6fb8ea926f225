"""Opening a JSONL session: reading and scanning its log, mending it in memory, the reads (I/O).

`JsonlLog` loads a session folder's log (all of it, or from the latest compaction boundary) into
the index of `SessionCore`; `JsonlSession` (in `_jsonl_write`) adds the writes. The folder's layout
and durability are described in `lamina.session._jsonl._jsonl_store`.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import gc
import mmap
import os
import time
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import Final

from lamina.errors import LaminaError, MissingEntryError, SessionCorruptError, SessionIOError, SessionNotFoundError
from lamina.session._entries import LogEntry, UnknownEntry
from lamina.session._jsonl._file_layer import LINK_REFUSED, OS_FILES, FileLayer, is_link_refusal
from lamina.session._jsonl._session_meta import SessionMeta
from lamina.session._jsonl._writer_lock import WriterLock
from lamina.session._protocol import LoadReport, LogCut, SessionSummary
from lamina.session._scan import Canonical, DuplicateId, Log, LogScan, Offsets, TornTail, scan_log
from lamina.session._session_core import SessionCore
from lamina.session._session_files import FolderFiles, open_for_reading
from lamina.session._stamp import _new_entry_id
from lamina.session._tree import LostLine, find_broken_links, mend_links, view_start_id

LOG_NAME: Final = "log.jsonl"
_ENTRY_ID: Final = attrgetter("id")
MAP_MIN_BYTES: Final = 1 << 20
"""A writer maps a log range at least this long instead of reading it (no copy); readers always read."""
_MAP_POPULATE: Final[int | None] = getattr(mmap, "MAP_POPULATE", None)


class JsonlLog(FolderFiles, SessionCore):
    """An open JSONL session's log as loaded: scanning, mending, resuming from the tail, the reads."""

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
        self._files = files
        self._offset_list = Offsets()
        """Byte offset of each entry of `_order` (worked out when first needed)."""
        self._offset_memo: tuple[str, int] | None = None
        """The last offset looked up by id (the provider view's start, asked for at every metadata write)."""
        self._loaded_from = 0
        """Byte offset from which the log is loaded (0: the whole log)."""
        self._known_end = 0
        """End of the bytes read or written so far (a full load reads up to here)."""
        self._lock = lock
        """The write lock, taken by the store before the metadata is read; None when read-only."""
        self._fd: int | None = None
        self._size = 0
        """End of the last complete line: where the next append goes."""
        self._count = meta.entry_count
        self._canonical = _canonical_of(meta)
        """The log's prefix of lines known canonical (see `Canonical`), grown by each append that follows it."""
        self._unsynced = False
        self._dirty_meta = False
        self._torn: TornTail | None = None
        self._failed: SessionIOError | None = None
        """The write error that ended this session's appends; reopen the session to continue."""
        # where the leaf's provider view starts, kept up to date so a flush never walks the tree
        self._view_start: str | None = None
        self._view_start_known = False
        self._meta_urgent = False
        self._meta_written_at = time.monotonic()

    # -- loading -----------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.folder / LOG_NAME

    def _read(self, start: int, end: int | None) -> LogScan:
        try:
            with open_for_reading(self.log_path) as f:
                if start == 0 and self._lock is not None and _MAP_POPULATE is not None:
                    size = os.fstat(f.fileno()).st_size
                    stop = size if end is None else min(end, size)
                    if stop >= MAP_MIN_BYTES:
                        scan = self._scan_mapped(f.fileno(), stop)
                        if scan is not None:
                            return scan
                f.seek(start)
                data = f.read() if end is None else f.read(end - start)
        except OSError as exc:
            raise self._read_error(exc, start) from None
        return self._scan(data, start)

    def _read_error(self, exc: OSError, offset: int) -> LaminaError:
        """The store's error for a failed read of the log: gone with its folder, missing, a link, or refused."""
        if isinstance(exc, FileNotFoundError):
            if not self.folder.is_dir():  # deleted while it was read
                return SessionNotFoundError(self.folder.name, self.folder.parent)
            return SessionCorruptError(self.log_path, "session log is missing")
        if is_link_refusal(exc):
            return SessionCorruptError(self.log_path, LINK_REFUSED)
        return SessionIOError(self.log_path, "read the log", exc, offset=offset)

    def _scan_mapped(self, fd: int, stop: int) -> LogScan | None:
        """Scan the log's first `stop` bytes mapped in place, not copied (None: the file cannot be mapped).

        Only a writer maps: a mapped file that shrinks under its reader kills the reader (SIGBUS), and
        only the lock holder ever shrinks the log (cutting a torn tail).
        """
        assert _MAP_POPULATE is not None
        try:
            mapped = mmap.mmap(fd, stop, flags=mmap.MAP_SHARED | _MAP_POPULATE, prot=mmap.PROT_READ)
        except (OSError, ValueError):  # a file system without mappings: read it instead
            return None
        with mapped:
            return self._scan(mapped, 0)

    def _scan(self, data: Log, start: int) -> LogScan:
        self._known_end = start + len(data)
        return scan_log(data, base_offset=start, first_line=1 if start == 0 else None, canonical=self._canonical)

    def _load(self, start: int, end: int | None = None) -> bool:
        """Replace what is in memory with the log from byte `start` (to `end`).

        Returns False when a tail holds damage that only the whole log can mend (a corrupt line, a
        duplicate id, a parent later in the file); a whole log is always mended here.
        """
        with _collector_paused():
            return self._load_unpaused(start, end)

    def _load_unpaused(self, start: int, end: int | None) -> bool:
        scan = self._read(start, end)
        entries = scan.entries
        # the ids and the id index are built when first needed: listing the entries needs neither
        distinct = start == 0 and scan.canonical is not None and scan.canonical.distinct == scan.end
        ids = None if distinct else list(map(_ENTRY_ID, entries))
        by_id: dict[str, LogEntry] | None = None
        offsets = scan.offsets
        duplicates: list[DuplicateId] = []
        if ids is not None and len(set(ids)) != len(ids):
            by_id, ids, kept, duplicates = _drop_duplicates(scan, whole=start == 0)
            offsets = Offsets(kept)
            entries = [by_id[i] for i in ids]
        self._by_id, self._order_list, self._entry_list = by_id, ids, entries
        self._offset_list, self._offset_memo = offsets, None
        self._links = {}
        self._view_start_known = False
        self._torn = scan.torn
        self._size = scan.end
        self._loaded_from = start
        if scan.canonical is not None:
            self._canonical = scan.canonical
        report = self.report
        if scan.torn is not None or report.torn_tail is None or report.torn_tail.saved_to is None:
            report.torn_tail = scan.torn
        report.bom = scan.bom
        report.corrupt_lines = list(scan.corrupt)
        report.duplicate_ids = duplicates
        report.unknown_entries = 0 if scan.lines is None else sum(isinstance(e, UnknownEntry) for e in entries)
        if start == 0:
            self._mend_whole(scan, entries, offsets, clean=not duplicates and not scan.corrupt)
            return True
        if scan.corrupt or duplicates:
            return False
        return all(entries[i].parent_id not in self._entries for i in find_broken_links(entries, self._order))

    def _mend_whole(self, scan: LogScan, entries: list[LogEntry], offsets: Offsets, *, clean: bool) -> None:
        """Re-link the entries of a whole log whose parent is lost, missing, later or in a cycle.

        Skipped when the canonical record proves every entry names no parent or an earlier entry
        (and no id is used twice: the record proves it or the load has just checked); else the record
        learns it when it holds, and that the ids are distinct when a writer checked them all.
        """
        canonical = self._canonical
        report = self.report
        if clean and canonical.linked == scan.end:
            report.relinks = []
        else:
            flat = offsets.resolved() if scan.corrupt else []
            lost = [LostLine(bisect.bisect_left(flat, c.offset), c.lost_id, c.lost_parent) for c in scan.corrupt]
            report.relinks = mend_links(entries, lost, ids=self._order)
            self._links = {r.entry_id: r.new_parent for r in report.relinks}
            if clean and not report.relinks:
                canonical = dataclasses.replace(canonical, linked=canonical.size)
        # every id was checked; only a writer keeps the record, so only a writer works out the greatest id
        learn = clean and self._lock is not None and canonical.size == scan.end
        if learn and canonical.distinct != canonical.size:
            canonical = dataclasses.replace(canonical, distinct=canonical.size, max_id=max(self._order, default=""))
        if self._lock is not None and canonical != self._canonical:  # kept at the next metadata write
            self._dirty_meta = True
        self._canonical = canonical

    def _open_for_resume(self) -> None:
        start = self.meta.resume_offset
        if start > 0 and not self._starts_line(start):
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

    def _starts_line(self, offset: int) -> bool:
        try:
            with open_for_reading(self.log_path) as f:
                if offset > os.fstat(f.fileno()).st_size:
                    return False
                f.seek(offset - 1)
                return f.read(1) == b"\n"
        except OSError as exc:
            raise self._read_error(exc, offset) from None

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


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a log is decoded.

    The entries cannot form cycles, and creating a hundred thousand of them would otherwise set off
    full collections over and over.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _drop_duplicates(
    scan: LogScan, *, whole: bool
) -> tuple[dict[str, LogEntry], list[str], list[int], list[DuplicateId]]:
    """Keep the first entry of each id; report the others with their line and byte offset."""
    by_id: dict[str, LogEntry] = {}
    first: dict[str, int] = {}
    ids: list[str] = []
    offsets: list[int] = []
    duplicates: list[DuplicateId] = []
    for index, (entry, offset) in enumerate(zip(scan.entries, scan.offsets, strict=True)):
        if entry.id in by_id:
            line = scan.lines[index] if scan.lines is not None else (index + 1 if whole else None)
            duplicates.append(DuplicateId(entry.id, offset, line, first[entry.id]))
            continue
        by_id[entry.id] = entry
        first[entry.id] = offset
        ids.append(entry.id)
        offsets.append(offset)
    return by_id, ids, offsets, duplicates


def _canonical_of(meta: SessionMeta) -> Canonical:
    """The canonical record `meta.json` holds (a part that claims more than its prefix is dropped)."""
    size = meta.canonical_size
    linked = meta.canonical_linked if meta.canonical_linked <= size else 0
    distinct = meta.canonical_distinct if meta.canonical_distinct <= size else 0
    return Canonical(size, meta.canonical_crc32, linked, distinct, meta.canonical_max_id if distinct else "")
