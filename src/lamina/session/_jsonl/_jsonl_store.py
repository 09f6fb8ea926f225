"""The session store: one folder per session with an append-only JSONL log (I/O).

Described in docs/session-log.md ("The JSONL store").
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec
import platformdirs

from lamina.errors import (
    LaminaError,
    SessionCorruptError,
    SessionExistsError,
    SessionIOError,
    SessionNotFoundError,
)
from lamina.session._jsonl._file_layer import LINK_REFUSED, OS_FILES, FileLayer, write_new_file
from lamina.session._jsonl._jsonl_open import LOG_NAME
from lamina.session._jsonl._jsonl_write import JsonlSession
from lamina.session._jsonl._session_meta import META_NAME, SessionMeta, read_meta, write_meta
from lamina.session._jsonl._writer_lock import LOCK_NAME, WriterLock, held_now
from lamina.session._protocol import STORE_ENV_VAR, ForkOrigin, LoadReport, SessionSummary, absolute_cwd
from lamina.session._session_files import NOFOLLOW, carried_folders
from lamina.session._stamp import (
    _SESSION_ID_RE,
    SUBFOLDERS,
    _new_entry_id,
    _title_from,
    check_session_id,
    new_session_id,
)

CREATING_PREFIX: Final = ".creating-"
"""A session folder being created is built under this hidden name, then renamed into place."""
DELETING_PREFIX: Final = ".deleting-"
"""A session folder being deleted is renamed to this hidden name (under its lock), then removed."""


def default_store_root(explicit: Path | str | None = None) -> Path:
    """The store root: `explicit` if given, else `$LAMINA_STORE`, else the user's data directory."""
    if explicit is not None:
        return Path(explicit).expanduser()
    from_env = os.environ.get(STORE_ENV_VAR)
    if from_env:
        return Path(from_env).expanduser()
    return platformdirs.user_data_path("lamina") / "sessions"


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

    def in_use(self, session_id: str) -> bool:
        """Whether a writer has the session open now (a process holds its lock), looked at without taking the lock."""
        return held_now(self.folder_of(session_id))

    def _session(self, folder: Path, meta: SessionMeta, *, lock: WriterLock | None, report: LoadReport) -> JsonlSession:
        return JsonlSession(
            folder, meta, lock=lock, report=report, clock=self._clock, new_id=self._new_entry_id, files=self._files
        )

    def create(
        self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None, session_id: str | None = None
    ) -> JsonlSession:
        """Create an empty session and open it for writing.

        The folder is built under a hidden name (`.creating-<id>`) and renamed into place once it
        holds its log and metadata, so an interrupted create never leaves a half-made session. A
        chosen `session_id` is built under a name of its own and renamed in one step, which fails
        when another create or a session already holds the id.

        Raises:
            SessionExistsError: `session_id` is given and a session has it.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionIOError(self.root, "create the store folder", exc) from None
        now = self._clock()
        files = self._files
        chosen = check_session_id(session_id) if session_id is not None else None
        while True:
            new_id = chosen or new_session_id(now)
            folder = self.root / new_id
            staging = self.root / f"{CREATING_PREFIX}{new_id}"
            if chosen is not None:  # several creates of one id may race: each builds its own folder
                staging = staging.with_name(f"{staging.name}.{secrets.token_hex(3)}")
            if folder.exists() or staging.exists():
                if chosen is not None:
                    raise SessionExistsError(chosen, self.root)
                continue
            meta = SessionMeta(
                id=new_id,
                created_at=now,
                updated_at=now,
                cwd=absolute_cwd(cwd),
                title=_title_from(title),
                forked_from=forked_from,
            )
            try:
                files.mkdir(staging)
            except FileExistsError:
                continue
            except OSError as exc:
                raise SessionIOError(staging, "create the session folder", exc) from None
            lock = self._place(staging, folder, meta)
            if lock is not None:
                break
            if chosen is not None:
                raise SessionExistsError(chosen, self.root)
        session = self._session(folder, meta, lock=lock, report=LoadReport())
        session._loaded_from = 0
        return session

    def _place(self, staging: Path, folder: Path, meta: SessionMeta) -> WriterLock | None:
        """Build a new session in `staging`, rename it to `folder` and lock it; None when `folder` is taken.

        Raises:
            SessionIOError: the disk refused (what was made is removed).
        """
        files = self._files
        placed = False
        try:
            self._build(staging, meta)
            if not folder.exists():
                try:
                    files.replace(staging, folder)  # refused when a (never empty) session folder is there
                    placed = True
                except OSError:
                    if not folder.exists():
                        raise
            if not placed:  # the id was taken meanwhile
                self._remove(staging)
                return None
            files.fsync_dir(self.root)
            return WriterLock(folder, files=files)
        except (OSError, LaminaError) as exc:
            self._remove_made(folder if placed else staging)
            if isinstance(exc, LaminaError):
                raise
            raise SessionIOError(staging, "create the session folder", exc) from None

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
            forked._write_meta()  # listed with its entries now, not after the next refresh or its close
        except BaseException:
            forked._abandon()
            raise
        return forked

    def _carry_files(self, source: Path, target: Path) -> None:
        """The files the copied entries may point at, made durable before the entries that reference them are written.

        They are the attachments, offloaded output, the user's-words archive and plans.

        Attachments and data files are written once and never changed, so they are hard-linked
        (copied where links are refused); plans may be edited later, so they are copied.
        """
        for name, folders in carried_folders(source, target):
            for here, files in folders:
                if not here.exists():
                    self._files.mkdir(here)
                for src, dst in files:
                    if name == "plans":
                        write_new_file(self._files, dst, src.read_bytes())
                    else:
                        try:
                            self._files.link(src, dst)
                        except OSError:
                            write_new_file(self._files, dst, src.read_bytes())
                self._files.fsync_dir(here)
            self._files.fsync_dir(target / name)


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
