"""Importing entries into the PostgreSQL store as they are, in one transaction; carrying a fork's files (I/O)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from lamina.session._entries import LogEntry
from lamina.session._meta import ForkOrigin
from lamina.session._protocol import SessionSummary
from lamina.session._stamp import SUBFOLDERS, _title_from, check_session_id
from lamina.session._tree import view_start_id
from lamina.session.postgres._connection import PostgresConnection, _new_session_id
from lamina.session.postgres._session import PostgresSession


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
) -> PostgresSession:
    """A new session holding `entries` as they are (ids, parents and times kept), open for writing.

    The session row and every entry are committed in one transaction: an interrupted import
    leaves no session at all. `leaf_id` (default: the last entry) becomes the leaf. Raises
    `UsageError` when `session_id` is taken.
    """
    store._writes_allowed()
    now = store._clock()
    sid = check_session_id(session_id) if session_id is not None else _new_session_id(now)
    info = SessionSummary(sid, _title_from(title), now if created_at is None else created_at, now, 0, cwd, forked_from)
    session = PostgresSession(store, info, store._folders(sid), token=1)
    session._creating = True
    for entry in entries:
        session._add(entry)
    if leaf_id is not None and leaf_id != session.leaf_id:
        session.get(leaf_id)
        session._leaf = leaf_id
        session._view_start = view_start_id(session._entries, leaf_id)
    session._commit_pending()
    store._leases.hold(session)
    return session


def carry_files(source: Path, target: Path) -> None:
    """Hard-link (else copy) attachments and data; copy plans, which may be edited later."""
    for name in SUBFOLDERS:
        top = source / name
        if not top.is_dir():
            continue
        for folder, _, files in os.walk(top):
            here = target / Path(folder).relative_to(source)
            here.mkdir(parents=True, exist_ok=True)
            for file in files:
                src, dst = Path(folder) / file, here / file
                if src.is_symlink() or not src.is_file() or dst.exists():
                    continue
                if name == "plans":
                    shutil.copyfile(src, dst)
                    continue
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)
