"""The PostgreSQL session store: many agent servers, one truth, the JSONL store's guarantees (I/O).

Described in docs/postgres.md ("Tables and guarantees").
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Unpack

import psycopg
import psycopg.errors

from lamina.errors import SessionExistsError, SessionNotFoundError, StoreConnectionError
from lamina.session._closing import Closing
from lamina.session._entries import LogEntry
from lamina.session._protocol import ForkOrigin, ImportKeywords, SessionSummary, absolute_cwd
from lamina.session._stamp import _title_from, check_session_id
from lamina.session.postgres._bounds import WATCHDOG
from lamina.session.postgres._connection import (
    DEFAULT_LEASE_SECONDS,
    NOTIFY_CHANNEL,
    PostgresConnection,
    _first_line,
    _new_entry_id,
    _new_session_id,
)
from lamina.session.postgres._import import carry_files, import_entries
from lamina.session.postgres._pg_files import drop_names
from lamina.session.postgres._pg_session import PostgresSession


class PostgresSessionStore(Closing):
    """Sessions in a PostgreSQL database, shared by any number of servers.

    Every wait is bounded (see `_bounds.py`); servers sharing a database should use the same bounds.

    Args:
        url: A libpq URL; `?schema=NAME` is Lamina's own. libpq's TCP settings in the URL win over
            the store's defaults (`keepalives=1`, `keepalives_idle=5`, `keepalives_interval=2`,
            `keepalives_count=3`, `tcp_user_timeout` = `query_timeout`), and are mirrored on the
            server side of each connection.
        schema: The PostgreSQL schema of the tables (default: the URL's, else `lamina`).
        files_root: Where sessions keep their files (default `$LAMINA_FILES`, else the user data folder).
        lease_seconds: How long a writer's lease lasts without renewal (default 30): a stalled or
            dead server's sessions can be taken over this long after its last renewal.
        max_connections: The pool's size.
        connect_timeout: Seconds to connect, and to wait for a free pooled connection (default 5).
        query_timeout: Seconds any one database operation may take: a statement, a lease take or
            renewal, a turn's whole transaction (plus 1 ms per entry it commits). Default 10, or a
            third of the lease when that is shorter. Past it the client shuts the connection and
            raises `StoreConnectionError`; the server enforces `statement_timeout` and
            `idle_in_transaction_session_timeout` of the same length and `lock_timeout` of half.
            A transaction that has held a session's row for longer is taken for stalled, and its
            backend ended (`pg_terminate_backend`; the role needs the right to signal it: the
            same role, or `pg_signal_backend`) by a takeover once the lease expired, or by the
            lease holder's own flush that finds its row so held.
        auto_migrate: Create or migrate the schema on first use (else refuse an old schema).
        clock: The time source of entry stamps.
        new_entry_id: The entry id source.

    Raises:
        UsageError: `lease_seconds` or `query_timeout` is not a positive number of seconds.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        files_root: Path | str | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        max_connections: int = 4,
        connect_timeout: float = 5.0,
        query_timeout: float | None = None,
        auto_migrate: bool = True,
        clock: Callable[[], float] = time.time,
        new_entry_id: Callable[[], str] = _new_entry_id,
    ) -> None:
        self._db = PostgresConnection(
            url,
            schema=schema,
            files_root=files_root,
            lease_seconds=lease_seconds,
            max_connections=max_connections,
            connect_timeout=connect_timeout,
            query_timeout=query_timeout,
            auto_migrate=auto_migrate,
            clock=clock,
            new_entry_id=new_entry_id,
        )
        """The database: pool, schema, bounds; the sessions this store opens share it."""
        self._leases = self._db.leases
        """The writer leases this store holds, renewed by a thread of its own."""

    # -- the database's facts and operations, as the store shows them ------------------------------

    @property
    def location(self) -> str:
        """The database and schema, shown without the password."""
        return self._db.location

    @property
    def schema(self) -> str:
        """The PostgreSQL schema of the tables."""
        return self._db.schema

    @property
    def files_root(self) -> Path:
        """Where sessions keep their files."""
        return self._db.files_root

    @property
    def lease_seconds(self) -> float:
        """How long a writer's lease lasts without renewal."""
        return self._db.lease_seconds

    @property
    def query_timeout(self) -> float:
        """The bound on one database operation, in seconds."""
        return self._db.query_timeout

    @property
    def owner(self) -> str:
        """How this store names itself as a lease holder."""
        return self._db.owner

    @property
    def read_only(self) -> bool:
        """The database takes no writes (a replica); known after the first use."""
        return self._db.read_only

    @property
    def application_name(self) -> str:
        """How the store's connections name themselves to the server (`pg_stat_activity`)."""
        return self._db.application_name

    @application_name.setter
    def application_name(self, name: str) -> None:
        self._db.application_name = name

    def migrate(self) -> tuple[int, int]:
        """Create or migrate the schema now; returns (version before, version after)."""
        return self._db.migrate()

    def version(self) -> int:
        """The schema version the database holds (0: none yet)."""
        return self._db.version()

    def close(self) -> None:
        """Stop renewing leases and close the connections (close the sessions first)."""
        self._db.close()

    def _conn(self, seconds: float | None = None) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        return self._db.conn(seconds)

    # -- sessions ---------------------------------------------------------------------------------

    def create(
        self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None, session_id: str | None = None
    ) -> PostgresSession:
        """Create an empty session, its writer lease taken.

        Raises:
            SessionExistsError: `session_id` is given and a session has it.
        """
        self._db.writes_allowed()
        now = self._db.clock()
        title, cwd = _title_from(title), absolute_cwd(cwd)
        chosen = check_session_id(session_id) if session_id is not None else None
        while True:
            session_id = chosen or _new_session_id(now)
            with self._conn() as conn:
                row = conn.execute(
                    "INSERT INTO sessions (id, created_at, updated_at, cwd, title, forked_from_session,"
                    " forked_from_entry, lease_owner, lease_token, lease_expires)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 1, now() + make_interval(secs => %s))"
                    " ON CONFLICT (id) DO NOTHING RETURNING lease_token",
                    (
                        session_id,
                        now,
                        now,
                        cwd,
                        title,
                        forked_from.session_id if forked_from else None,
                        forked_from.entry_id if forked_from else None,
                        self.owner,
                        self.lease_seconds,
                    ),
                ).fetchone()
            if row is not None:
                break
            if chosen is not None:
                raise SessionExistsError(chosen, self.location)
        info = SessionSummary(session_id, title, now, now, 0, cwd, forked_from)
        session = PostgresSession(self._db, info, self._db.session_folder(session_id), token=int(row[0]))
        self._leases.hold(session)
        return session

    def open(self, session_id: str, *, writable: bool = True, wait: float = 0.0) -> PostgresSession:
        """Open a session to continue it: reads only from the first entry its provider view needs.

        A writer takes the session's lease first (waiting up to `wait` seconds for the holder to let
        go, or for its lease to expire), then reads what the previous holder committed.
        """
        check_session_id(session_id)
        token = self._leases.take(session_id, wait=wait) if writable else None
        try:
            session = self._load(session_id, token)
        except BaseException:
            if token is not None:
                self._leases.release(session_id, token)
            raise
        if token is not None:
            self._leases.hold(session)
        return session

    def _load(self, session_id: str, token: int | None) -> PostgresSession:
        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = conn.execute(
                "SELECT id, title, created_at, updated_at, entry_count, cwd, forked_from_session,"
                " forked_from_entry, leaf_id, last_seq, resume_seq FROM sessions WHERE id = %s",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id, self.location)
            resume_seq = int(row[10])
            rows = self._db.fetch(conn, session_id, after=resume_seq - 1)
        origin = ForkOrigin(row[6], row[7]) if row[6] is not None else None
        info = SessionSummary(row[0], row[1], row[2], row[3], int(row[4]), row[5], origin)
        session = PostgresSession(self._db, info, self._db.session_folder(session_id), token=token)
        session._restore(rows, leaf_id=row[8], last_seq=int(row[9]))
        return session

    def list(self) -> list[SessionSummary]:
        """Every session, most recently updated first (reads the sessions table only)."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, title, created_at, updated_at, entry_count, cwd, forked_from_session, forked_from_entry"
                " FROM sessions ORDER BY updated_at DESC, id DESC"
            ).fetchall()
        return [
            SessionSummary(r[0], r[1], r[2], r[3], int(r[4]), r[5], ForkOrigin(r[6], r[7]) if r[6] else None)
            for r in rows
        ]

    def fork(self, session_id: str, entry_id: str) -> PostgresSession:
        """A new session holding a copy of the path to `entry_id` (and the session's files).

        The files are copied first; the new session's row and entries then commit in one transaction.
        """
        with self.open(session_id, writable=False) as source:
            path = source.path(entry_id)
            cwd, title, files = source.info.cwd, source.info.title, source.files_dir
        forked_id = self.new_session_id()
        carry_files(files, self.files_dir_of(forked_id))  # the local cache, so nothing is fetched again
        origin = ForkOrigin(session_id=session_id, entry_id=entry_id)
        return import_entries(
            self._db, path, session_id=forked_id, cwd=cwd, title=title, forked_from=origin, files_from=session_id
        )

    def delete(self, session_id: str) -> None:
        """Remove a session, its entries and its files; refused while a writer holds its lease."""
        check_session_id(session_id)
        token = self._leases.take(session_id, wait=0.0)
        with self._conn() as conn, conn.transaction():
            conn.execute("DELETE FROM sessions WHERE id = %s AND lease_token = %s", (session_id, token))
            drop_names(conn, session_id)
        shutil.rmtree(self.files_root / session_id, ignore_errors=True)

    def new_session_id(self) -> str:
        """A fresh session id (for an import that must place the session's files before its entries)."""
        return _new_session_id(self._db.clock())

    def files_dir_of(self, session_id: str) -> Path:
        """The folder of a session's files (`attachments/`, `data/`, `plans/`), created if missing."""
        return self._db.session_folder(check_session_id(session_id))

    def import_entries(self, entries: Sequence[LogEntry], **keywords: Unpack[ImportKeywords]) -> PostgresSession:
        """A new session holding `entries` as they are (ids, parents and times kept), open for writing.

        `files` (name, bytes or local path or chunks) are committed first; then the session row and
        every entry in one transaction: an interrupted import leaves no session at all. `leaf_id`
        (default: the last entry) becomes the leaf. Raises `UsageError` when `session_id` is taken.
        """
        return import_entries(self._db, entries, **keywords)

    def follow(
        self, session_id: str, *, after_seq: int = 0, poll_seconds: float = 1.0, stop: threading.Event | None = None
    ) -> Iterator[tuple[int, LogEntry]]:
        """The session's committed entries after `after_seq`, then each new one as it commits, with its seq.

        Waits on LISTEN/NOTIFY, and reads again at least every `poll_seconds` with the last sequence
        number as cursor, so a lost notification only delays an entry. Never blocks a writer. Ends
        when `stop` is set (or the caller stops iterating). Each read takes at most `query_timeout`,
        else `StoreConnectionError`.
        """
        db = self._db
        with db.listening(NOTIFY_CHANNEL) as conn:
            cursor = after_seq
            while stop is None or not stop.is_set():
                try:
                    with WATCHDOG.bound(conn, db.query_timeout):
                        seqs, entries = db.fetch(conn, session_id, after=cursor)
                except psycopg.OperationalError as exc:
                    raise StoreConnectionError(db.location, f"connection failed: {_first_line(exc)}") from None
                for seq, entry in zip(seqs, entries, strict=True):
                    cursor = seq
                    yield seq, entry
                for _ in conn.notifies(timeout=poll_seconds, stop_after=1):
                    pass
