"""The session store: one folder per session with an append-only JSONL log (I/O).

Layout of a session folder::

    <root>/<session id>/
        log.jsonl      one entry per line, append-only
        meta.json      small metadata, replaced atomically, never unbounded text
        attachments/   stored attachments the log refers to
        data/          large tool results and other session data
        plans/         plan files
        .lock          the one-writer lock (holder named inside)

Durability is group commit: every append reaches the kernel at once (a killed process loses at
most the line being written), and the log is fsynced at turn boundaries (`flush`) and immediately
for critical entries (outbox, plan state, compaction). Opening a session to continue it reads
only from the latest compaction boundary (its byte offset is kept in the metadata), so resume time
does not grow with the log.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol, TypeVar

import msgspec
import platformdirs

from lamina.errors import SessionCorruptError, SessionNotFoundError, UsageError
from lamina.session._lock import WriterLock
from lamina.session.entries import (
    CRITICAL_ENTRY_TYPES,
    CompactionBoundary,
    Entry,
    LogEntry,
    UnknownEntry,
    UserMessage,
    encode_entry,
)
from lamina.session.meta import ForkOrigin, SessionMeta, fsync_dir, read_meta, write_meta
from lamina.session.scan import CorruptLine, LogScan, TornTail, scan_log
from lamina.session.tree import MissingEntryError, ProviderView, path_to, provider_view, view_start_id

LOG_NAME: Final = "log.jsonl"
SUBFOLDERS: Final = ("attachments", "data", "plans")
STORE_ENV_VAR: Final = "LAMINA_STORE"
"""Environment variable that overrides the default store root."""
TITLE_MAX_CHARS: Final = 120
META_REFRESH_SECONDS: Final = 5.0
"""Longest time a flush leaves `meta.json` behind the log (branches and compactions are written at once)."""
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


@dataclass(slots=True)
class LoadReport:
    """What opening a session found wrong, and what it did about it."""

    torn_tail: TornTail | None = None
    corrupt_lines: list[CorruptLine] = field(default_factory=list)
    unknown_entries: int = 0
    """Entries of types from a newer Lamina: kept, skipped by the provider view."""
    meta_problem: str | None = None
    """Why the metadata was rebuilt from the log, if it was."""

    @property
    def clean(self) -> bool:
        return self.torn_tail is None and not self.corrupt_lines and self.meta_problem is None

    def messages(self) -> list[str]:
        """Human-readable lines, one per problem."""
        out: list[str] = []
        if self.meta_problem:
            out.append(f"metadata rebuilt from the log: {self.meta_problem}")
        if self.torn_tail:
            kept = f"; torn bytes kept in {self.torn_tail.saved_to}" if self.torn_tail.saved_to else ""
            out.append(f"torn last line at byte {self.torn_tail.offset} ({self.torn_tail.length} bytes){kept}")
        for c in self.corrupt_lines:
            where = f"line {c.line}" if c.line is not None else f"byte {c.offset}"
            out.append(f"corrupt entry skipped at {where}: {c.reason}")
        if self.unknown_entries:
            out.append(f"{self.unknown_entries} entries of unknown (newer) types kept and skipped")
        return out


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of `sessions list`, read from metadata only."""

    id: str
    title: str
    created_at: float
    updated_at: float
    entry_count: int
    cwd: str
    forked_from: ForkOrigin | None
    problem: str | None = None


class SessionLog(Protocol):
    """An open session: the append-only log tree and its leaf."""

    @property
    def id(self) -> str: ...
    @property
    def leaf_id(self) -> str | None: ...
    def append(self, entry: E, *, durable: bool | None = None) -> E: ...
    def flush(self) -> None: ...
    def branch(self, entry_id: str) -> None: ...
    def path(self, entry_id: str | None = None) -> list[LogEntry]: ...
    def view(self) -> ProviderView: ...
    def close(self) -> None: ...


class SessionStore(Protocol):
    """Where sessions live. The local-disk store is the embedded default."""

    def create(self, *, cwd: str = "", title: str = "") -> SessionLog: ...
    def open(self, session_id: str, *, writable: bool = True) -> SessionLog: ...
    def list(self) -> list[SessionSummary]: ...
    def fork(self, session_id: str, entry_id: str) -> SessionLog: ...


def _new_entry_id() -> str:
    return secrets.token_hex(8)


def _new_session_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def check_session_id(session_id: str) -> str:
    """Reject ids that could name a path outside the store (`..`, `/`, empty)."""
    if not _SESSION_ID_RE.fullmatch(session_id) or ".." in session_id:
        raise UsageError(f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' only")
    return session_id


class JsonlSession:
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
    ) -> None:
        self.folder = folder
        self.meta = meta
        self.report = report
        self._clock = clock
        self._new_id = new_id
        self._entries: dict[str, LogEntry] = {}
        self._order: list[str] = []
        self._offsets: dict[str, int] = {}
        self._loaded_from = meta.log_size  # nothing loaded yet
        self._leaf: str | None = None
        self._lock = lock
        """The write lock, taken by the store before the metadata is read; None when read-only."""
        self._fd: int | None = None
        self._size = 0
        self._unsynced = False
        self._dirty_meta = False
        self._torn: TornTail | None = None
        self._appended = 0
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
            with open(self.log_path, "rb") as f:
                f.seek(start)
                data = f.read() if end is None else f.read(end - start)
        except FileNotFoundError:
            raise SessionCorruptError(self.log_path, "session log is missing") from None
        return scan_log(data, base_offset=start, first_line=1 if start == 0 else None)

    def _load_tail(self, start: int) -> None:
        """Load entries from byte `start` to the end of the log."""
        scan = self._read(start, None)
        for offset, entry in scan.entries:
            self._entries[entry.id] = entry
            self._offsets[entry.id] = offset
            self._order.append(entry.id)
        self._torn = scan.torn
        self._size = scan.end
        self.report.torn_tail = scan.torn
        self.report.corrupt_lines.extend(scan.corrupt)
        self.report.unknown_entries += sum(1 for _, e in scan.entries if isinstance(e, UnknownEntry))
        self._loaded_from = start

    def _open_for_resume(self) -> None:
        start = self.meta.resume_offset
        if start > 0 and not self._starts_line(start):
            start = 0
        self._load_tail(start)
        self._leaf = self._pick_leaf()
        if start > 0:
            try:
                view_start_id(self._entries, self._leaf)
            except MissingEntryError:
                self.load_all()

    def _starts_line(self, offset: int) -> bool:
        try:
            with open(self.log_path, "rb") as f:
                if offset > os.fstat(f.fileno()).st_size:
                    return False
                f.seek(offset - 1)
                return f.read(1) == b"\n"
        except FileNotFoundError:
            raise SessionCorruptError(self.log_path, "session log is missing") from None

    def _pick_leaf(self) -> str | None:
        if self.meta.leaf_id is not None and self.meta.leaf_offset >= self._size and self.meta.leaf_id in self._entries:
            return self.meta.leaf_id
        return self._order[-1] if self._order else None

    def _after_open(self, *, rebuild: bool) -> None:
        """Bring metadata counters up to date with what the open found on disk."""
        if rebuild:
            self.load_all()
            first_user = next((e for e in self.entries() if isinstance(e, UserMessage)), None)
            self.meta = msgspec.structs.replace(
                self.meta,
                title=_title_from(first_user.text) if first_user else "",
                entry_count=len(self._order),
                log_size=0,
            )
            self._appended = 0
        else:
            # entries appended after the metadata was last written (a crash before `flush`)
            late = sum(1 for i in self._order if self._offsets[i] >= self.meta.log_size)
            self._appended = late if self.meta.log_size < self._size else 0
        stale = self.meta.log_size != self._size or self.meta.leaf_id != self._leaf
        if self._lock is not None and (rebuild or stale):
            self._dirty_meta = True
            self._write_meta()

    def load_all(self) -> None:
        """Load the whole log (needed for full history, paths into old branches, forks)."""
        if self._loaded_from == 0:
            return
        scan = self._read(0, self._loaded_from)
        for offset, entry in scan.entries:
            self._entries[entry.id] = entry
            self._offsets[entry.id] = offset
        self._order[:0] = [e.id for _, e in scan.entries]
        # the prefix was read from the start, so its problems come with line numbers
        self.report.corrupt_lines[:0] = scan.corrupt
        self.report.unknown_entries += sum(1 for _, e in scan.entries if isinstance(e, UnknownEntry))
        self._loaded_from = 0

    # -- reading -----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def leaf_id(self) -> str | None:
        return self._leaf

    def get(self, entry_id: str) -> LogEntry:
        """The entry with this id (loading the whole log if it is older than what is loaded)."""
        if entry_id not in self._entries:
            self.load_all()
        try:
            return self._entries[entry_id]
        except KeyError:
            raise UsageError(f"no entry {entry_id!r} in session {self.id}") from None

    def entries(self) -> list[LogEntry]:
        """Every entry of the log in file order (the full history a UI scrolls through)."""
        self.load_all()
        return [self._entries[i] for i in self._order]

    def path(self, entry_id: str | None = None) -> list[LogEntry]:
        """The entries from the root to `entry_id` (default: the leaf)."""
        target = self._leaf if entry_id is None else entry_id
        try:
            return path_to(self._entries, target)
        except MissingEntryError:
            self.load_all()
        if target is not None and target not in self._entries:
            raise UsageError(f"no entry {target!r} in session {self.id}")
        try:
            return path_to(self._entries, target)
        except MissingEntryError as exc:
            raise SessionCorruptError(self.log_path, f"entry {exc.entry_id!r} is referenced but missing") from None

    def view(self) -> ProviderView:
        """The provider view of the current leaf."""
        return provider_view(self._view_path())

    def _view_path(self) -> list[LogEntry]:
        try:
            start = view_start_id(self._entries, self._leaf)
        except MissingEntryError:
            return self.path()
        path: list[LogEntry] = []
        current = self._leaf
        while current is not None:
            entry = self._entries[current]
            path.append(entry)
            if entry.id == start:
                break
            current = entry.parent_id
        path.reverse()
        return path

    def entries_loaded(self) -> list[LogEntry]:
        """The entries in memory, in file order (after a resume: from the boundary on)."""
        return [self._entries[i] for i in self._order]

    def loaded_count(self) -> int:
        """How many entries are in memory (a resume loads only the tail)."""
        return len(self._order)

    # -- writing -----------------------------------------------------------------------------

    def _writable_fd(self) -> int:
        if self._lock is None:
            raise UsageError(f"session {self.id} was opened read-only")
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if self._torn is not None:
                self._repair_torn_tail(self._torn)
        return self._fd

    def _repair_torn_tail(self, torn: TornTail) -> None:
        assert self._fd is not None
        with open(self.log_path, "rb") as f:
            f.seek(torn.offset)
            tail = f.read()
        if torn.offset + len(tail) > torn.offset and self._entries_at(torn.offset):
            # the last entry was complete but lacked its newline: keep it, add the newline
            os.write(self._fd, b"\n")
            saved = None
            self._size = torn.offset + len(tail) + 1
        else:
            saved = self.folder / f"{LOG_NAME}.torn-{torn.offset}"
            with open(saved, "wb") as out:
                out.write(tail)
                out.flush()
                os.fsync(out.fileno())
            os.truncate(self.log_path, torn.offset)
            self._size = torn.offset
        os.fsync(self._fd)
        repaired = TornTail(torn.offset, torn.length, saved)
        self.report.torn_tail = repaired
        self._torn = None

    def _entries_at(self, offset: int) -> bool:
        return any(off == offset for off in self._offsets.values())

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf; it becomes the new leaf.

        The id, parent and timestamp are stamped here. The line reaches the kernel at once; it is
        fsynced now when `durable` is true (default: only for critical entries), else at `flush`.
        """
        stamped = msgspec.structs.replace(entry, id=self._new_id(), parent_id=self._leaf, ts=self._clock())
        must_sync = isinstance(stamped, CRITICAL_ENTRY_TYPES) if durable is None else durable
        self._write(stamped, sync=must_sync)
        return stamped

    def _write(self, entry: LogEntry, *, sync: bool) -> None:
        fd = self._writable_fd()
        line = encode_entry(entry) + b"\n"
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        offset = self._size
        self._size += len(line)
        self._entries[entry.id] = entry
        self._order.append(entry.id)
        self._offsets[entry.id] = offset
        if isinstance(entry, CompactionBoundary):
            self._view_start, self._view_start_known = entry.first_kept_id or entry.id, True
            self._meta_urgent = True
        elif self._leaf is None:
            self._view_start, self._view_start_known = entry.id, True
        self._leaf = entry.id
        self._appended += 1
        self._dirty_meta = True
        if self.meta.title == "" and isinstance(entry, UserMessage):
            self.meta = msgspec.structs.replace(self.meta, title=_title_from(entry.text))
            self._meta_urgent = True
        if sync:
            os.fsync(fd)
            self._unsynced = False
            if isinstance(entry, CompactionBoundary):
                self._write_meta()
        else:
            self._unsynced = True

    def flush(self) -> None:
        """The turn boundary: fsync what was appended; refresh the metadata when it matters.

        The metadata is rewritten at once after a branch, a compaction or a new title, and
        otherwise at most every `META_REFRESH_SECONDS` (and on close): a stale `meta.json` only
        makes the next open read a little more, because the open reconciles it with the log.
        """
        if self._fd is not None and self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False
        if self._dirty_meta and self._lock is not None:
            due = time.monotonic() - self._meta_written_at >= META_REFRESH_SECONDS
            if self._meta_urgent or due:
                self._write_meta()

    def _resume_offset(self) -> int:
        """Byte offset of the first entry the current leaf's provider view needs."""
        if not self._view_start_known:
            try:
                self._view_start = view_start_id(self._entries, self._leaf)
            except MissingEntryError:
                return 0
            self._view_start_known = True
        start = self._view_start
        return self._offsets.get(start, 0) if start is not None else 0

    def _write_meta(self) -> None:
        self.meta = msgspec.structs.replace(
            self.meta,
            resume_offset=self._resume_offset(),
            updated_at=self._clock(),
            leaf_id=self._leaf,
            leaf_offset=self._size,
            log_size=self._size,
            entry_count=self.meta.entry_count + self._appended,
        )
        write_meta(self.folder, self.meta)
        self._appended = 0
        self._dirty_meta = False
        self._meta_urgent = False
        self._meta_written_at = time.monotonic()

    def branch(self, entry_id: str) -> None:
        """Move the leaf to `entry_id`: the next append starts a new branch from there."""
        self.get(entry_id)
        self._leaf = entry_id
        self._view_start_known = False
        self._dirty_meta = True
        self._meta_urgent = True
        if self._lock is not None:
            self._writable_fd()
            self.flush()

    def close(self) -> None:
        """Flush and release the write lock. Safe to call twice."""
        if self._lock is not None:
            self.flush()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._lock.release()
            self._lock = None

    def __enter__(self) -> JsonlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    ) -> None:
        self.root = default_store_root(root)
        self._clock = clock
        self._new_entry_id = new_entry_id

    def folder_of(self, session_id: str) -> Path:
        """The folder of a session (the id is checked, so it cannot point outside the root)."""
        return self.root / check_session_id(session_id)

    def _session(self, folder: Path, meta: SessionMeta, *, lock: WriterLock | None, report: LoadReport) -> JsonlSession:
        return JsonlSession(folder, meta, lock=lock, report=report, clock=self._clock, new_id=self._new_entry_id)

    def create(self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None) -> JsonlSession:
        """Create an empty session and open it for writing."""
        self.root.mkdir(parents=True, exist_ok=True)
        now = self._clock()
        while True:
            session_id = _new_session_id(now)
            folder = self.root / session_id
            try:
                folder.mkdir()
                break
            except FileExistsError:
                continue
        for name in SUBFOLDERS:
            (folder / name).mkdir()
        (folder / LOG_NAME).touch()
        meta = SessionMeta(
            id=session_id, created_at=now, updated_at=now, cwd=cwd, title=_title_from(title), forked_from=forked_from
        )
        write_meta(folder, meta)
        fsync_dir(self.root)
        session = self._session(folder, meta, lock=WriterLock(folder), report=LoadReport())
        session._loaded_from = 0
        return session

    def open(self, session_id: str, *, writable: bool = True, wait: float = 0.0) -> JsonlSession:
        """Open a session to continue it: reads only from its latest compaction boundary.

        A writer waits up to `wait` seconds for another writer to close the session, then raises
        `SessionLockedError` naming the holder.

        Problems found on the way (torn last line, corrupt lines, unknown entry types, missing or
        corrupt metadata) are repaired where safe and listed in `session.report`.
        """
        folder = self.folder_of(session_id)
        if not folder.is_dir():
            raise SessionNotFoundError(session_id, self.root)
        if not (folder / LOG_NAME).is_file():
            raise SessionCorruptError(folder / LOG_NAME, "session log is missing")
        report = LoadReport()
        lock = WriterLock(folder, wait=wait) if writable else None  # before reading what the holder wrote
        try:
            try:
                meta = read_meta(folder)
            except SessionCorruptError as exc:
                report.meta_problem = exc.reason
                stat = (folder / LOG_NAME).stat()
                meta = SessionMeta(id=session_id, created_at=stat.st_mtime, updated_at=stat.st_mtime)
            if meta.id != session_id:
                report.meta_problem = f"metadata names session {meta.id!r}, folder is {session_id!r}"
                meta = msgspec.structs.replace(meta, id=session_id, resume_offset=0, leaf_id=None)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        session = self._session(folder, meta, lock=lock, report=report)
        try:
            session._open_for_resume()
        except BaseException:
            session.close()
            raise
        session._after_open(rebuild=report.meta_problem is not None)
        return session

    def list(self) -> list[SessionSummary]:
        """Every session in the store, newest first, read from metadata only."""
        if not self.root.is_dir():
            return []
        rows: list[SessionSummary] = []
        for folder in self.root.iterdir():
            if not folder.is_dir() or not _SESSION_ID_RE.fullmatch(folder.name):
                continue
            rows.append(_summary_of(folder))
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return rows

    def fork(self, session_id: str, entry_id: str) -> JsonlSession:
        """A new session holding a copy of the path to `entry_id`, recording where it came from."""
        with self.open(session_id, writable=False) as source:
            path = source.path(entry_id)
            origin = ForkOrigin(session_id=session_id, entry_id=entry_id)
            forked = self.create(cwd=source.meta.cwd, title=source.meta.title, forked_from=origin)
        for entry in path:
            forked._write(entry, sync=False)
        forked.flush()
        return forked


def _summary_of(folder: Path) -> SessionSummary:
    try:
        meta = read_meta(folder)
    except SessionCorruptError as exc:
        return SessionSummary(folder.name, "", 0.0, 0.0, 0, "", None, problem=exc.reason)
    problem = None if (folder / LOG_NAME).is_file() else "session log is missing"
    return SessionSummary(
        meta.id, meta.title, meta.created_at, meta.updated_at, meta.entry_count, meta.cwd, meta.forked_from, problem
    )
