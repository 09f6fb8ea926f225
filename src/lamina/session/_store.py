"""The session store: one folder per session with an append-only JSONL log (I/O).

Layout of a session folder::

    <root>/<session id>/
        log.jsonl      one entry per line, append-only
        meta.json      small metadata, replaced atomically, never unbounded text
        attachments/   stored attachments the log refers to
        data/          large tool results and other session data
        plans/         plan files
        .lock          the one-writer lock (holder named inside)

No file of a session folder is opened through a symbolic link (a link there is refused as damage).
A writer checks before every acknowledgement (flush, critical append) that its log and its lock are
still the files at the session's paths, so a folder removed or restored under it fails the flush
instead of acknowledging into a file nobody will read. A delete takes the writer lock, renames the
folder to a hidden `.deleting-` name in one step and only then removes it: an interrupted delete
leaves the session whole or gone, and the store removes what it left (`list`, `delete`).

Durability is group commit: every append reaches the kernel at once (a killed process loses at
most the line being written), and the log is fsynced at turn boundaries (`flush`) and immediately
for critical entries (outbox, plan state, compaction). Opening a session to continue it reads
only from the latest compaction boundary (its byte offset is kept in the metadata), so resume time
does not grow with the log.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import errno
import gc
import mmap
import os
import re
import secrets
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import Any, Final, TypeVar, overload

import msgspec
import platformdirs

from lamina.errors import (
    LaminaError,
    MissingEntryError,
    SessionCorruptError,
    SessionIOError,
    SessionNotFoundError,
    UsageError,
)
from lamina.session._core import SessionCore
from lamina.session._entries import (
    CRITICAL_ENTRY_TYPES,
    CompactionBoundary,
    Entry,
    LogEntry,
    UnknownEntry,
    UserMessage,
    encode_entry,
)
from lamina.session._files import (
    LINK_REFUSED,
    NOFOLLOW,
    OS_FILES,
    FileLayer,
    is_link_refusal,
    is_same_file,
    open_for_reading,
    write_new_file,
)
from lamina.session._lock import LOCK_NAME, WriterLock
from lamina.session._meta import META_NAME, ForkOrigin, SessionMeta, read_meta, write_meta
from lamina.session._protocol import STORE_ENV_VAR, LoadReport, LogCut, SessionSummary
from lamina.session._scan import (
    Canonical,
    DuplicateId,
    Log,
    LogScan,
    Offsets,
    TornTail,
    is_canonical_line,
    scan_log,
)
from lamina.session._tree import (
    LostLine,
    find_broken_links,
    mend_links,
    view_start_id,
)

LOG_NAME: Final = "log.jsonl"
SUBFOLDERS: Final = ("attachments", "data", "plans")
CREATING_PREFIX: Final = ".creating-"
"""A session folder being created is built under this hidden name, then renamed into place."""
DELETING_PREFIX: Final = ".deleting-"
"""A session folder being deleted is renamed to this hidden name (under its lock), then removed."""
TITLE_MAX_CHARS: Final = 120
META_REFRESH_SECONDS: Final = 5.0
"""Longest time a flush leaves `meta.json` behind the log (branches and compactions are written at once)."""
_ENTRY_ID: Final = attrgetter("id")
MAP_MIN_BYTES: Final = 1 << 20
"""A writer maps a log range at least this long instead of reading it (no copy); readers always read."""
_MAP_POPULATE: Final[int | None] = getattr(mmap, "MAP_POPULATE", None)
_SESSION_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

E = TypeVar("E", bound=Entry)


def default_store_root(explicit: Path | str | None = None) -> Path:
    """The store root: `explicit` if given, else `$LAMINA_STORE`, else the user's data directory."""
    if explicit is not None:
        return Path(explicit).expanduser()
    from_env = os.environ.get(STORE_ENV_VAR)
    if from_env:
        return Path(from_env).expanduser()
    return platformdirs.user_data_path("lamina") / "sessions"


_id_lock: Final = threading.Lock()
_last_id_us = 0


def _new_entry_id() -> str:
    """16 hex digits: microseconds since the epoch (13, strictly increasing in this process) and 3 random.

    Ids made later sort after earlier ones, so a writer that resumed from the tail still knows a new
    id is not in the older part of the log (see `Canonical.distinct`)."""
    global _last_id_us
    with _id_lock:
        _last_id_us = max(time.time_ns() // 1_000, _last_id_us + 1)
        micros = _last_id_us
    return f"{micros:013x}{secrets.token_hex(2)[1:]}"


def new_session_id(now: float) -> str:
    """A fresh session id: the UTC time and six random hex digits."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def check_session_id(session_id: str) -> str:
    """Reject ids that could name a path outside the store (`..`, `/`, empty)."""
    if not _SESSION_ID_RE.fullmatch(session_id) or ".." in session_id:
        raise UsageError(f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' only")
    return session_id


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


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a log is decoded: the entries cannot form cycles, and
    creating a hundred thousand of them would otherwise set off full collections over and over."""
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


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_MAX_CHARS else line[: TITLE_MAX_CHARS - 1] + "…"


class LocalSessionStore:
    """The embedded default store: session folders under one root on the local disk."""

    def __init__(
        self,
        root: Path | str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        new_entry_id: Callable[[], str] = _new_entry_id,
        files: FileLayer = OS_FILES,
    ) -> None:
        self.root = default_store_root(root)
        self._clock = clock
        self._new_entry_id = new_entry_id
        self._files = files

    @property
    def location(self) -> str:
        return str(self.root)

    def close(self) -> None:
        """Nothing to let go of: every session holds its own lock and descriptor."""

    def delete(self, session_id: str, *, wait: float = 0.0) -> None:
        """Remove a session's folder; refuses while a writer has it open.

        Takes the session's writer lock (waiting up to `wait` seconds), renames the folder to a
        hidden `.deleting-` name in one step while holding it, then removes that folder: a writer
        can never open the session in between, and an interrupted delete leaves the session whole
        or gone (what it left is removed by the next `list` or `delete`).

        Raises:
            SessionLockedError: a writer holds the session (after `wait` seconds).
            SessionNotFoundError: there is no such session (or another delete took it first).
            SessionIOError: the disk refused the rename or the removal.
        """
        folder = self.folder_of(session_id)
        if not folder.is_dir():
            raise SessionNotFoundError(session_id, self.root)
        if folder.is_symlink():  # its removal would reach outside the store (a linked file inside is only unlinked)
            raise SessionCorruptError(folder, LINK_REFUSED)
        files = self._files
        lock = WriterLock(folder, wait=wait, files=files)
        aside = self.root / f"{DELETING_PREFIX}{session_id}.{secrets.token_hex(3)}"
        try:
            files.replace(folder, aside)
            files.fsync_dir(self.root)
        except FileNotFoundError:
            raise SessionNotFoundError(session_id, self.root) from None
        except OSError as exc:
            raise SessionIOError(folder, "move the session folder aside to delete it", exc) from None
        finally:
            lock.release()  # its file is now inside the hidden folder: a writer that waited finds no session
        self._remove(aside)

    def _remove(self, folder: Path) -> None:
        """Remove a folder that no session name points at any more (a deleted session, a failed create)."""
        try:
            self._files.remove_tree(folder)
            self._files.fsync_dir(self.root)
        except OSError as exc:
            raise SessionIOError(folder, "remove the folder of a deleted session", exc) from None

    def _remove_leftovers(self) -> None:
        """Remove the folders of interrupted deletes: already gone from the store, never listed."""
        try:
            leftovers = [f for f in self.root.iterdir() if f.name.startswith(DELETING_PREFIX) and f.is_dir()]
        except OSError:
            return  # listing reports the store's own problem
        for folder in leftovers:
            with contextlib.suppress(SessionIOError):  # tried again at the next listing
                self._remove(folder)

    @property
    def files(self) -> FileLayer:
        """The layer every write of this store goes through."""
        return self._files

    def folder_of(self, session_id: str) -> Path:
        """The folder of a session (the id is checked, so it cannot point outside the root)."""
        return self.root / check_session_id(session_id)

    def _session(self, folder: Path, meta: SessionMeta, *, lock: WriterLock | None, report: LoadReport) -> JsonlSession:
        return JsonlSession(
            folder, meta, lock=lock, report=report, clock=self._clock, new_id=self._new_entry_id, files=self._files
        )

    def create(self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None) -> JsonlSession:
        """Create an empty session and open it for writing.

        The folder is built under a hidden name (`.creating-<id>`) and renamed into place once it
        holds its log and metadata, so an interrupted create never leaves a half-made session.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionIOError(self.root, "create the store folder", exc) from None
        now = self._clock()
        files = self._files
        while True:
            session_id = new_session_id(now)
            folder = self.root / session_id
            staging = self.root / f"{CREATING_PREFIX}{session_id}"
            if folder.exists() or staging.exists():
                continue
            meta = SessionMeta(
                id=session_id,
                created_at=now,
                updated_at=now,
                cwd=cwd,
                title=_title_from(title),
                forked_from=forked_from,
            )
            try:
                files.mkdir(staging)
            except FileExistsError:
                continue
            except OSError as exc:
                raise SessionIOError(staging, "create the session folder", exc) from None
            placed = False
            try:
                self._build(staging, meta)
                if folder.exists():  # the id was taken meanwhile: another one
                    self._remove(staging)
                    continue
                files.replace(staging, folder)
                placed = True
                files.fsync_dir(self.root)
                lock = WriterLock(folder, files=files)
            except (OSError, LaminaError) as exc:
                self._remove_made(folder if placed else staging)
                if isinstance(exc, LaminaError):
                    raise
                raise SessionIOError(staging, "create the session folder", exc) from None
            break
        session = self._session(folder, meta, lock=lock, report=LoadReport())
        session._loaded_from = 0
        return session

    def _build(self, staging: Path, meta: SessionMeta) -> None:
        """Fill a new session's staging folder: its subfolders, an empty log and the metadata (fsynced)."""
        files = self._files
        for name in SUBFOLDERS:
            files.mkdir(staging / name)
        files.close(files.open(staging / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644))
        write_meta(staging, meta, files)  # fsyncs the staging folder

    def _remove_made(self, made: Path) -> None:
        """After a failed create, remove the folder it made (its id was never handed out); best effort."""
        with contextlib.suppress(SessionIOError):  # the disk refuses even that: `sessions check` reports it
            self._remove(made)

    def open(self, session_id: str, *, writable: bool = True, wait: float = 0.0) -> JsonlSession:
        """Open a session to continue it: reads only from its latest compaction boundary.

        A writer waits up to `wait` seconds for another writer to close the session, then raises
        `SessionLockedError` naming the holder.

        Problems found on the way (torn last line, corrupt lines, duplicate ids, broken parent links,
        unknown entry types, missing or corrupt metadata) are repaired where safe and listed in
        `session.report`; what survives is always loaded. A log shorter than its metadata's record
        (cut or emptied from outside) is reported to a reader, and refused to a writer
        (`SessionCorruptError`) until `lamina sessions repair` accepts it. A symbolic link in place
        of the log, the metadata or the lock is refused (`SessionCorruptError`). A failed open
        releases the lock.
        """
        return self._open(session_id, writable=writable, wait=wait, accept_cut=False)

    def _open(self, session_id: str, *, writable: bool, wait: float, accept_cut: bool) -> JsonlSession:
        folder = self.folder_of(session_id)
        if not folder.is_dir():
            raise SessionNotFoundError(session_id, self.root)
        _refuse_links(folder)
        # the lock comes before reading what the holder wrote (and keeps a delete out)
        lock = WriterLock(folder, wait=wait, files=self._files) if writable else None
        session: JsonlSession | None = None
        try:
            log = folder / LOG_NAME
            if not log.is_file():
                if not folder.is_dir():
                    raise SessionNotFoundError(session_id, self.root)
                reason = "session log is missing" if not log.exists() else "session log is not a regular file"
                raise SessionCorruptError(log, reason)
            report = LoadReport()
            meta = _meta_for_open(folder, session_id, report)
            session = self._session(folder, meta, lock=lock, report=report)
            session._open_for_resume()
            report.log_cut = session._find_cut()
            if report.log_cut is not None and writable and not accept_cut:
                advice = "run `lamina sessions repair` to go on with what is left"
                raise SessionCorruptError(log, f"{report.log_cut.describe()}; {advice}")
            session._after_open(rebuild=report.meta_problem is not None)
        except BaseException as exc:
            if session is not None:
                session._abandon()
            elif lock is not None:
                lock.release()
            if isinstance(exc, OSError):  # never a raw OS error out of the store
                raise _gone_or(folder, exc, "open the session") from None
            raise
        return session

    def list(self) -> list[SessionSummary]:
        """Every session in the store, newest first, read from metadata only."""
        if not self.root.is_dir():
            return []
        self._remove_leftovers()
        rows: list[SessionSummary] = []
        try:
            folders = list(self.root.iterdir())
        except OSError as exc:
            raise SessionIOError(self.root, "list the store", exc) from None
        for folder in folders:
            if not _SESSION_ID_RE.fullmatch(folder.name) or not folder.is_dir():
                continue
            try:
                rows.append(_summary_of(folder))
            except FileNotFoundError:  # deleted while listed
                continue
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return rows

    def fork(self, session_id: str, entry_id: str) -> JsonlSession:
        """A new session holding a copy of the path to `entry_id`, recording where it came from."""
        with self.open(session_id, writable=False) as source:
            path = source.path(entry_id)
            origin = ForkOrigin(session_id=session_id, entry_id=entry_id)
            forked = self.create(cwd=source.meta.cwd, title=source.meta.title, forked_from=origin)
        try:
            self._carry_files(source.folder, forked.folder)
            for entry in path:
                forked._write(entry, sync=False)
            forked.flush()
        except BaseException:
            forked._abandon()
            raise
        return forked

    def _carry_files(self, source: Path, target: Path) -> None:
        """The files the copied entries may point at (attachments, offloaded output, the user's-words
        archive, plans), made durable before the entries that reference them are written.

        Attachments and data files are written once and never changed, so they are hard-linked
        (copied where links are refused); plans may be edited later, so they are copied.
        """
        for name in SUBFOLDERS:
            top = source / name
            if not top.is_dir():
                continue
            for folder, _, files in os.walk(top):
                here = target / Path(folder).relative_to(source)
                if not here.exists():
                    self._files.mkdir(here)
                for file in files:
                    src, dst = Path(folder) / file, here / file
                    if src.is_symlink() or not src.is_file():
                        continue  # the store writes regular files only; anything else is not ours
                    if name == "plans":
                        write_new_file(self._files, dst, src.read_bytes())
                    else:
                        try:
                            self._files.link(src, dst)
                        except OSError:
                            write_new_file(self._files, dst, src.read_bytes())
                self._files.fsync_dir(here)
            self._files.fsync_dir(target / name)


def _canonical_of(meta: SessionMeta) -> Canonical:
    """The canonical record `meta.json` holds (a part that claims more than its prefix is dropped)."""
    size = meta.canonical_size
    linked = meta.canonical_linked if meta.canonical_linked <= size else 0
    distinct = meta.canonical_distinct if meta.canonical_distinct <= size else 0
    return Canonical(size, meta.canonical_crc32, linked, distinct, meta.canonical_max_id if distinct else "")


def _meta_for_open(folder: Path, session_id: str, report: LoadReport) -> SessionMeta:
    """The metadata, or a blank one (to be rebuilt from the log) with the reason in `report`."""
    try:
        meta = read_meta(folder)
    except SessionCorruptError as exc:
        report.meta_problem = exc.reason
        try:
            stat = (folder / LOG_NAME).lstat()
        except OSError as err:
            raise _gone_or(folder, err, "read the log") from None
        return SessionMeta(id=session_id, created_at=stat.st_mtime, updated_at=stat.st_mtime)
    if meta.id != session_id:
        report.meta_problem = f"metadata names session {meta.id!r}, folder is {session_id!r}"
        meta = msgspec.structs.replace(meta, id=session_id, resume_offset=0, leaf_id=None)
    return meta


def _gone_or(folder: Path, exc: OSError, action: str) -> LaminaError:
    """The error for an OS error on a session's files: not found when its folder is gone (deleted meanwhile)."""
    if not folder.is_dir():
        return SessionNotFoundError(folder.name, folder.parent)
    return SessionIOError(Path(exc.filename) if exc.filename else folder, action, exc)


def _refuse_links(folder: Path) -> None:
    """Refuse a session whose log, metadata or lock file is a symbolic link (`SessionCorruptError` naming it).

    Every open passes `O_NOFOLLOW` as well; this check only makes the error come first, and clear.
    """
    for name in linked_files(folder):
        raise SessionCorruptError(folder if name == "." else folder / name, LINK_REFUSED)


def linked_files(folder: Path) -> list[str]:
    """The session's folder (".") or files (log, metadata, lock) that are symbolic links."""
    if folder.is_symlink():
        return ["."]
    return [name for name in (LOG_NAME, META_NAME, LOCK_NAME) if (folder / name).is_symlink()]


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


def _summary_of(folder: Path) -> SessionSummary:
    linked = linked_files(folder)
    if linked:
        what = "the session folder" if linked[0] == "." else linked[0]
        return SessionSummary(folder.name, "", 0.0, 0.0, 0, "", None, problem=f"{what} {LINK_REFUSED}")
    try:
        meta = read_meta(folder)
    except SessionCorruptError as exc:
        return SessionSummary(folder.name, "", 0.0, 0.0, 0, "", None, problem=exc.reason)
    problem = None if (folder / LOG_NAME).is_file() else "session log is missing"
    return SessionSummary(
        folder.name, meta.title, meta.created_at, meta.updated_at, meta.entry_count, meta.cwd, meta.forked_from, problem
    )


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _show_surrogate(match: re.Match[str]) -> str:
    return f"[U+{ord(match.group()):04X}]"


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(_show_surrogate, value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def _storable(entry: E) -> E:
    """`entry` as UTF-8 can hold it: a lone surrogate (a file name that is not UTF-8, read with
    surrogateescape) is shown as `[U+DCFF]`, so no text can make an append fail. The caller gets
    this copy back, so what is logged is what is sent."""
    try:
        encode_entry(entry)
    except UnicodeEncodeError:
        return msgspec.convert(_scrub(msgspec.to_builtins(entry)), type(entry))
    return entry
