"""The in-memory store: sessions whose log lives in this process only (I/O: the session files' folders).

For tests and for embedding: the same semantics as the JSONL store (one writer per session, read-only
opens, branches, forks, deletes, a resume that loads from the latest compaction boundary) with no
log on disk and no fsync. A session's files (attachments, data, plans) are real files, because the
model reads them with its tools: they live in a folder the store creates and removes at `close()`,
or in a folder the caller passes in (and keeps).
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar, overload

import msgspec

from lamina.errors import SessionExistsError, SessionLockedError, SessionNotFoundError, UsageError
from lamina.session._closing import Closing
from lamina.session._entries import Entry, LogEntry, UserMessage
from lamina.session._protocol import FileInfo, ForkOrigin, LoadReport, SessionSummary, absolute_cwd
from lamina.session._session_core import SessionCore
from lamina.session._session_files import (
    CachedFiles,
    check_file_name,
    chunks_of,
    digest_of,
    open_for_reading,
    stored_files,
)
from lamina.session._stamp import (
    SUBFOLDERS,
    _new_entry_id,
    _storable,
    _title_from,
    check_session_id,
    new_session_id,
)
from lamina.session._tree import view_start_id

E = TypeVar("E", bound=Entry)


@dataclasses.dataclass(slots=True)
class _StoredSession:
    """One session as the store keeps it: its entries in append order, its leaf, its metadata."""

    summary: SessionSummary
    folder: Path
    entries: list[LogEntry] = dataclasses.field(default_factory=list)
    leaf_id: str | None = None
    writer: InMemorySession | None = None
    files: dict[str, tuple[bytes, str]] = dataclasses.field(default_factory=dict)
    """Name -> (bytes, SHA-256) of the session's files (its folder is a cache of them)."""


class InMemorySession(CachedFiles, SessionCore):
    """An open session of an `InMemorySessionStore`. Create it through the store."""

    def __init__(self, store: InMemorySessionStore, stored: _StoredSession, *, writable: bool) -> None:
        super().__init__()
        self._store = store
        self._stored = stored
        self._meta = stored.summary
        self._writable = writable
        self.report = LoadReport()
        """Always clean: nothing in memory can be torn or corrupt."""
        entries = list(stored.entries)
        self._leaf = stored.leaf_id
        self._count = len(entries)
        self._all = entries
        """Every entry the session had when it was opened, and its own appends since."""
        # like a resume from disk: only from the first entry the leaf's provider view needs
        start = view_start_id({e.id: e for e in entries}, self._leaf)
        self._loaded_from = next((i for i, e in enumerate(entries) if e.id == start), 0)
        """Position in `_all` of the first loaded entry (0: everything is loaded)."""
        for entry in entries[self._loaded_from :]:
            self._remember(entry)

    def _header(self) -> SessionSummary:
        return self._meta

    @property
    def _files_root(self) -> Path:
        return self._stored.folder

    def _store_file(self, name: str, source: bytes | Path, sha256: str, size: int) -> None:
        self._check_writable()
        data = source if isinstance(source, bytes) else b"".join(chunks_of(source))
        with self._store._changed:
            self._stored.files[name] = (data, sha256)

    # A tool writes into the session's folder by path (a plan drafted with Write, say): what is
    # there is the session's file, as in the JSONL store; the backend keeps what was put.

    def _in_folder(self, name: str) -> Path | None:
        path = self._files_root / check_file_name(name)
        return None if path.is_symlink() or not path.is_file() else path

    def open_file(self, name: str) -> BinaryIO:
        local = self._in_folder(name)
        if local is not None:
            return open_for_reading(local)
        with self._store._changed:
            found = self._stored.files.get(name)
        if found is None:
            raise FileNotFoundError(f"session {self.id} has no file {name}")
        return io.BytesIO(found[0])

    def stat_file(self, name: str) -> FileInfo | None:
        local = self._in_folder(name)
        if local is not None:
            sha256, size = digest_of(local)
            return FileInfo(name, size, sha256)
        with self._store._changed:
            found = self._stored.files.get(name)
        return None if found is None else FileInfo(name, len(found[0]), found[1])

    def list_files(self, prefix: str = "") -> list[FileInfo]:
        with self._store._changed:
            kept = {name: FileInfo(name, len(data), sha) for name, (data, sha) in self._stored.files.items()}
        for name, path in stored_files(self._files_root, prefix):
            sha256, size = digest_of(path)
            kept[name] = FileInfo(name, size, sha256)
        return [kept[name] for name in sorted(kept) if name.startswith(prefix)]

    def load_all(self) -> None:
        """Load the entries before the first one in memory (needed for full history, old branches, forks)."""
        if self._loaded_from == 0:
            return
        loaded = self._entry_list
        self._entry_list, self._by_id, self._order_list = [], {}, []
        for entry in (*self._all[: self._loaded_from], *loaded):
            self._remember(entry)
        self._loaded_from = 0

    # -- writing -----------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if not self._writable:
            raise UsageError(f"session {self.id} was opened read-only (or is closed)")

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf; it becomes the new leaf (`durable` changes nothing here).

        The id, parent and timestamp are stamped here; a later open sees the entry at once.
        """
        self._check_writable()
        stamped = _storable(
            msgspec.structs.replace(
                entry, id=self._store._new_entry_id(), parent_id=self._leaf, ts=self._store._clock()
            )
        )
        self._put(stamped)
        return stamped

    def _put(self, entry: LogEntry) -> None:
        """Add `entry` as it is (id and parent kept) as the new leaf, in this session and in the store."""
        self._remember(entry)
        self._all.append(entry)
        self._leaf = entry.id
        self._count += 1
        if not self._meta.title and isinstance(entry, UserMessage):
            self._meta = dataclasses.replace(self._meta, title=_title_from(entry.text))
        with self._store._changed:
            self._stored.entries.append(entry)
            self._publish()

    def _publish(self) -> None:
        """Hand the leaf and the metadata to the store (its lock held)."""
        self._meta = dataclasses.replace(self._meta, updated_at=self._store._clock(), entry_count=self._count)
        self._stored.leaf_id = self._leaf
        self._stored.summary = self._meta

    def flush(self) -> None:
        """The turn boundary: nothing to do, every append is already where a later open reads it."""

    @overload
    def branch(self, entry_id: str, *, first: None = None) -> None: ...
    @overload
    def branch(self, entry_id: str, *, first: E) -> E: ...
    def branch(self, entry_id: str, *, first: E | None = None) -> E | None:
        """Move the leaf to `entry_id`: the next append starts a new branch from there.

        With `first`, the branch's first entry is appended as a child of `entry_id` in the same step.
        Returns the stamped `first`.
        """
        self.get(entry_id)
        previous = self._leaf
        self._leaf = entry_id
        stamped: E | None = None
        if first is not None:
            try:
                stamped = self.append(first)
            except BaseException:
                self._leaf = previous
                raise
        if self._writable:
            with self._store._changed:
                self._publish()
        return stamped

    def close(self) -> None:
        """Let the session go (another writer may open it). Safe to call twice."""
        if not self._writable:
            return
        self._writable = False
        with self._store._changed:
            if self._stored.writer is self:
                self._stored.writer = None
            self._store._changed.notify_all()


class InMemorySessionStore(Closing):
    """A store whose logs live in this process's memory (no disk for the log, no fsync).

    Args:
        files_root: the folder for the sessions' files (one subfolder per session). Default: a
            temporary folder the store creates and removes at `close()`.
        clock: the time stamped on entries and metadata.
        new_entry_id: makes the id of each appended entry.
    """

    def __init__(
        self,
        files_root: Path | str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        new_entry_id: Callable[[], str] = _new_entry_id,
    ) -> None:
        self._owned = files_root is None
        self.files_root = Path(tempfile.mkdtemp(prefix="lamina-memory-")) if files_root is None else Path(files_root)
        self._clock = clock
        self._new_entry_id = new_entry_id
        self._sessions: dict[str, _StoredSession] = {}
        self._changed = threading.Condition()
        """Held for every change of `_sessions` and of a stored session; notified when a writer lets go."""
        self._closed = False

    @property
    def location(self) -> str:
        return f"memory:{self.files_root}"

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"store {self.location} is closed")

    def create(
        self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None, session_id: str | None = None
    ) -> InMemorySession:
        """Create an empty session and open it for writing (its folders of files made).

        Raises:
            SessionExistsError: `session_id` is given and a session has it.
        """
        self._check_open()
        now = self._clock()
        with self._changed:
            if session_id is not None:
                if check_session_id(session_id) in self._sessions:
                    raise SessionExistsError(session_id, self.location)
            else:
                session_id = new_session_id(now)
                while session_id in self._sessions:
                    session_id = new_session_id(now)
            folder = self.files_root / session_id
            for name in SUBFOLDERS:
                (folder / name).mkdir(parents=True, exist_ok=True)
            summary = SessionSummary(session_id, _title_from(title), now, now, 0, absolute_cwd(cwd), forked_from)
            stored = self._sessions[session_id] = _StoredSession(summary, folder)
            session = stored.writer = InMemorySession(self, stored, writable=True)
        return session

    def _stored(self, session_id: str) -> _StoredSession:
        try:
            return self._sessions[check_session_id(session_id)]
        except KeyError:
            raise SessionNotFoundError(session_id, self.location) from None

    def open(self, session_id: str, *, writable: bool = True, wait: float = 0.0) -> InMemorySession:
        """Open a session to continue it: loads from its latest compaction boundary on.

        A writer waits up to `wait` seconds for another writer to close the session, then raises
        `SessionLockedError`; a reader never waits.
        """
        self._check_open()
        with self._changed:
            stored = self._stored(session_id)
            if not writable:
                return InMemorySession(self, stored, writable=False)
            self._changed.wait_for(lambda: stored.writer is None or self._sessions.get(session_id) is not stored, wait)
            stored = self._stored(session_id)  # deleted meanwhile: not found
            if stored.writer is not None:
                raise SessionLockedError(stored.folder, "another session of this in-memory store")
            session = stored.writer = InMemorySession(self, stored, writable=True)
        return session

    def list(self) -> list[SessionSummary]:
        """Every session, most recently updated first."""
        with self._changed:
            rows = [s.summary for s in self._sessions.values()]
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return rows

    def fork(self, session_id: str, entry_id: str) -> InMemorySession:
        """A new session holding the path to `entry_id` (ids kept) and a copy of the session's files."""
        with self.open(session_id, writable=False) as source:
            path = source.path(entry_id)
            info = source.info
        forked = self.create(cwd=info.cwd, title=info.title, forked_from=ForkOrigin(session_id, entry_id))
        for name in SUBFOLDERS:  # copies: plans may be edited in either session
            shutil.copytree(source._files_root / name, forked._files_root / name, ignore=_links_in, dirs_exist_ok=True)
        with self._changed:
            forked._stored.files.update(source._stored.files)
        for entry in path:
            forked._put(entry)
        return forked

    def delete(self, session_id: str) -> None:
        """Remove a session and its files; refused (`SessionLockedError`) while a writer has it open."""
        with self._changed:
            stored = self._stored(session_id)
            if stored.writer is not None:
                raise SessionLockedError(stored.folder, "another session of this in-memory store")
            del self._sessions[session_id]
            self._changed.notify_all()
        shutil.rmtree(stored.folder, ignore_errors=True)

    def close(self) -> None:
        """Forget every session; remove the folder of files if the store made it. Safe to call twice."""
        with self._changed:
            self._sessions.clear()
            self._closed = True
        if self._owned:
            shutil.rmtree(self.files_root, ignore_errors=True)


def _links_in(folder: str, names: list[str]) -> list[str]:
    """The names in `folder` that are symbolic links: never copied (the store writes regular files only)."""
    return [name for name in names if (Path(folder) / name).is_symlink()]
