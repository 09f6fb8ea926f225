"""Importing entries into the PostgreSQL store as they are, in one transaction; carrying a fork's files (I/O)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from lamina.errors import StoreError
from lamina.session._entries import LogEntry
from lamina.session._protocol import FileSource, ForkOrigin, SessionSummary
from lamina.session._session_files import carried_folders
from lamina.session._stamp import _title_from, check_session_id
from lamina.session._tree import view_start_id
from lamina.session.postgres._connection import PostgresConnection, _new_session_id
from lamina.session.postgres._pg_files import drop_names
from lamina.session.postgres._pg_session import PostgresSession


def import_entries(
    store: PostgresConnection,
    entries: Sequence[LogEntry],
    *,
    session_id: str | None = None,
    cwd: str = "",
    title: str = "",
    created_at: float | None = None,
    forked_from: ForkOrigin | None = None,
    leaf_id: str | None = None,
    files: Iterable[tuple[str, FileSource]] = (),
    files_from: str | None = None,
) -> PostgresSession:
    """A new session holding `entries` as they are (ids, parents and times kept), open for writing.

    `files` are committed first, each on its own; then the session row, every entry and the names
    of `files_from`'s files (a fork's) in one transaction. An import that fails (a file that cannot
    be read to its end, a refused commit) leaves no session: the names it put are dropped again
    with the blobs no other session names, and its local cache folder is removed. `leaf_id`
    (default: the last entry) becomes the leaf. Raises `UsageError` when `session_id` is taken.
    """
    store.writes_allowed()
    now = store.clock()
    sid = check_session_id(session_id) if session_id is not None else _new_session_id(now)
    info = SessionSummary(sid, _title_from(title), now if created_at is None else created_at, now, 0, cwd, forked_from)
    session = PostgresSession(store, info, store.session_folder(sid), token=1)
    session._creating = True
    session._files_from = files_from
    try:
        for name, source in files:
            session.put_file(name, source)
    except BaseException:
        forget_files(store, sid)
        raise
    for entry in entries:
        session._add(entry)
    if leaf_id is not None and leaf_id != session.leaf_id:
        session.get(leaf_id)
        session._leaf = leaf_id
        session._view_start = view_start_id(session._entries, leaf_id)
    try:
        session._commit_pending()
    except BaseException:
        forget_files(store, sid)
        raise
    store.leases.hold(session)
    return session


def forget_files(store: PostgresConnection, session_id: str) -> None:
    """Drop the files of a session whose row never committed: its names, blobs only it named, its local cache.

    The database part is skipped when the database is away (then nothing else can be done; the
    caller raises the import's own error).
    """
    with contextlib.suppress(StoreError), store.conn() as conn, conn.transaction():
        if conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone() is not None:
            return  # the session exists after all (its commit's answer was lost): its files stay
        drop_names(conn, session_id)
    shutil.rmtree(store.files_root / session_id, ignore_errors=True)


def carry_files(source: Path, target: Path) -> None:
    """Hard-link (else copy) attachments and data; copy plans, which may be edited later."""
    for name, folders in carried_folders(source, target):
        for here, files in folders:
            here.mkdir(parents=True, exist_ok=True)
            for src, dst in files:
                if dst.exists():
                    continue
                if name == "plans":
                    shutil.copyfile(src, dst)
                    continue
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)
