"""The PostgreSQL session store: many agent servers, one truth, the JSONL store's guarantees (I/O).

Tables (schema `lamina` by default, see `_migrations.py`): `sessions` (one row per session: its
metadata, leaf, entry count, last sequence number, where the provider view starts, and the writer
lease) and `entries` (one row per entry: session, per-session sequence number, id, parent id,
type, time, the entry's JSON payload exactly as the JSONL store writes it, and the lease token
that wrote it).

- **One writer per session, across servers.** Opening a session for writing takes its lease: the
  row's `lease_owner`, a `lease_expires` time on the database's clock, and a `lease_token` that
  grows by one at every take. A thread renews the leases a store holds; a server that dies (or
  stalls) loses its sessions when their leases expire, and any server may then take them over.
  Every write is conditional on the token (the fencing token), in the transaction that writes the
  entries, so a writer whose lease was taken over cannot write anything: its flush raises
  `SessionLeaseLostError`. Single-flight compaction, exactly-once plan dispatch and one-shot
  delivery follow: each is decided by a critical entry, and only the lease holder can commit one.
- **A turn is one transaction.** Appends are kept in memory and committed together at `flush` (the
  turn boundary); critical entries (outbox, plan state, compaction) are committed at once with
  whatever preceded them. A refused or dropped connection raises `StoreConnectionError`: the
  batch was committed whole or not at all (when the COMMIT's answer was lost, it may have been);
  the entries stay pending and the next flush settles it. A commit whose answer was lost is
  recognised by the sequence number it left, never written twice.
- **Every wait is bounded** (`_bounds.py`): `query_timeout` per operation, client and server
  side, TCP keepalives, takeovers that never wait on a row lock and end a stalled holder's backend.
- **Resume is flat.** The session row keeps the sequence number of the first entry the leaf's
  provider view needs; an open reads from there by the primary key's index.
- **Readers never block writers.** Reads are plain snapshots (MVCC); only writes touch the lease.
  `follow` lets a reader tail a live session (LISTEN/NOTIFY, with a cursor on the sequence number).

A session's files (attachments, offloaded output, plans) live under `files_root/<session id>/`; for
several hosts, that folder must be shared between them (a network mount).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar, overload
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import msgspec
import platformdirs
import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.adapt import Loader
from psycopg_pool import ConnectionPool, PoolTimeout

from lamina.errors import (
    MissingEntryError,
    SessionLeaseLostError,
    SessionLockedError,
    SessionNotFoundError,
    StoreConnectionError,
    StoreError,
    StoreReadOnlyError,
    StoreSchemaError,
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
from lamina.session._meta import ForkOrigin
from lamina.session._protocol import LoadReport, SessionSummary
from lamina.session._scan import scan_log
from lamina.session._stamp import SUBFOLDERS, _storable, _title_from, check_session_id
from lamina.session._tree import view_start_id
from lamina.session.postgres._bounds import (
    TERMINATE_WAIT_MS,
    WATCHDOG,
    Bound,
    StalledHolder,
    end_stalled_holder,
    query_timeout_for,
    session_settings,
    with_keepalives,
)
from lamina.session.postgres._migrations import SCHEMA_VERSION, migrate, schema_version

E = TypeVar("E", bound=Entry)

DEFAULT_SCHEMA: Final = "lamina"
DEFAULT_LEASE_SECONDS: Final = 30.0
"""How long a writer's lease lasts without renewal; a dead server's sessions are free after this."""
FILES_ENV_VAR: Final = "LAMINA_FILES"
"""Where PostgreSQL sessions keep their files (default: the user data folder); shared between hosts."""
NOTIFY_CHANNEL: Final = "lamina_entries"
_RETRY_PAUSE: Final = 0.1
_ENTRY_ALLOWANCE: Final = 0.001
"""Seconds a turn's transaction is allowed per entry it commits, on top of `query_timeout` (big imports)."""
_BIG_BATCH: Final = 1_000
"""From this many entries a transaction raises its own server-side `statement_timeout` to match."""
_TIMEOUTS: Final = (
    psycopg.errors.QueryCanceled,
    psycopg.errors.LockNotAvailable,
    psycopg.errors.IdleInTransactionSessionTimeout,
)


class _JsonBytes(Loader):
    """`json` columns as the bytes the database holds (decoded by msgspec, not by `json.loads`)."""

    def load(self, data: Any) -> bytes:
        return bytes(data)


def _new_entry_id() -> str:
    return secrets.token_hex(8)


def _new_session_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def _entry_type(entry: LogEntry) -> str:
    if isinstance(entry, UnknownEntry):
        return entry.type
    return str(entry.__struct_config__.tag)


def split_url(url: str) -> tuple[str, str, str]:
    """(libpq URL, schema, URL to show): `?schema=` is Lamina's, the password is never shown."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), DEFAULT_SCHEMA)
    rest = [(k, v) for k, v in query if k != "schema"]
    conninfo = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    shown = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return conninfo, schema, shown


class PostgresSessionStore:
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
        try:
            self.query_timeout = query_timeout_for(lease_seconds, query_timeout)
            """The bound on one database operation, in seconds."""
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        conninfo, url_schema, shown = split_url(url)
        self._conninfo, self._tcp = with_keepalives(conninfo, self.query_timeout)
        self.schema = schema or url_schema
        self._shown = shown if self.schema == DEFAULT_SCHEMA else f"{shown}?schema={self.schema}"
        root = files_root or os.environ.get(FILES_ENV_VAR)
        self.files_root = (
            Path(root).expanduser() if root else platformdirs.user_data_path("lamina") / "postgres-files" / self.schema
        )
        self.lease_seconds = lease_seconds
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._auto_migrate = auto_migrate
        self._clock = clock
        self._new_entry_id = new_entry_id
        self.owner = f"{socket.gethostname()} pid {os.getpid()} ({secrets.token_hex(3)})"
        """How this store names itself as a lease holder."""
        self.application_name = f"lamina-{self.schema}"[:63]
        """How the store's connections name themselves to the server (`pg_stat_activity`)."""
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._ready_lock = threading.Lock()
        self.read_only = False
        """The database takes no writes (a replica); known after the first use."""
        self._held: weakref.WeakSet[PostgresSession] = weakref.WeakSet()
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def location(self) -> str:
        return self._shown

    # -- connections -----------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.adapters.register_loader("json", _JsonBytes)
        settings = session_settings(self.query_timeout, self._tcp)
        with WATCHDOG.bound(conn, self.query_timeout):
            conn.execute(sql.SQL("SET search_path TO {}; ").format(sql.Identifier(self.schema)) + settings)

    def _connect_once(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=max(1, round(self._connect_timeout)),
                application_name=self.application_name,
            )
        except psycopg.OperationalError as exc:
            raise StoreConnectionError(self.location, f"cannot connect: {_first_line(exc)}") from None

    def _ready(self) -> ConnectionPool[psycopg.Connection[Any]]:
        """The pool, opened on first use after the schema version was checked (and migrated)."""
        if self._pool is not None:
            return self._pool
        with self._ready_lock:
            if self._pool is not None:
                return self._pool
            with self._connect_once() as conn:
                self._check_schema(conn)
            pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self._max_connections,
                kwargs={
                    "autocommit": True,
                    "connect_timeout": max(1, round(self._connect_timeout)),
                    "application_name": self.application_name,
                },
                configure=self._configure,
                timeout=self._connect_timeout,
                open=False,
                name=f"lamina-{self.schema}",
            )
            try:
                pool.open(wait=True, timeout=self._connect_timeout)
            except PoolTimeout:
                pool.close()
                raise StoreConnectionError(self.location, "cannot connect (the pool timed out)") from None
            self._pool = pool
            return pool

    def _check_schema(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute("SHOW transaction_read_only").fetchone()
        self.read_only = row is not None and row[0] == "on"
        found = schema_version(conn, self.schema)
        if found > SCHEMA_VERSION:
            raise StoreSchemaError(self.location, found, SCHEMA_VERSION, "upgrade Lamina to use this database")
        if found < SCHEMA_VERSION:
            if self.read_only:
                raise StoreSchemaError(
                    self.location, found, SCHEMA_VERSION, "the database is read-only: migrate the primary"
                )
            if not self._auto_migrate:
                raise StoreSchemaError(self.location, found, SCHEMA_VERSION, "run `lamina store migrate`")
            self._migrate(conn)

    def _migrate(self, conn: psycopg.Connection[Any]) -> tuple[int, int]:
        try:
            before, after = migrate(conn, self.schema)
        except psycopg.errors.ReadOnlySqlTransaction:
            raise self._read_only_error() from None
        except psycopg.Error as exc:
            raise StoreError(self.location, f"cannot migrate the schema: {_first_line(exc)}") from None
        if before > SCHEMA_VERSION:
            raise StoreSchemaError(self.location, before, SCHEMA_VERSION, "upgrade Lamina to use this database")
        return before, after

    def migrate(self) -> tuple[int, int]:
        """Create or migrate the schema now; returns (version before, version after)."""
        with self._connect_once() as conn:
            return self._migrate(conn)

    def version(self) -> int:
        """The schema version the database holds (0: none yet)."""
        with self._connect_once() as conn:
            return schema_version(conn, self.schema)

    def _read_only_error(self) -> StoreReadOnlyError:
        return StoreReadOnlyError(
            self.location,
            "the database is read-only (a replica?): sessions can be opened read-only; point the store at the primary",
        )

    @contextlib.contextmanager
    def _conn(self, seconds: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one operation of at most `seconds` (default `query_timeout`).

        Database failures become the store's errors; an operation that overruns has its connection
        shut (`StoreConnectionError`).
        """
        pool = self._ready()
        limit = self.query_timeout if seconds is None else seconds
        bound: Bound | None = None
        try:
            with pool.connection() as conn, WATCHDOG.bound(conn, limit) as bound:
                yield conn
        except psycopg.errors.ReadOnlySqlTransaction:
            raise self._read_only_error() from None
        except PoolTimeout:
            raise StoreConnectionError(self.location, "no connection to the database (pool timed out)") from None
        except (psycopg.OperationalError, *_TIMEOUTS) as exc:
            if (bound is not None and bound.fired) or isinstance(exc, _TIMEOUTS):
                raise StoreConnectionError(
                    self.location, f"no answer within {limit:g} s (query_timeout): {_first_line(exc)}"
                ) from None
            raise StoreConnectionError(self.location, f"connection failed: {_first_line(exc)}") from None
        except psycopg.Error as exc:
            raise StoreError(self.location, f"the database refused: {_first_line(exc)}") from None

    def _writes_allowed(self) -> None:
        self._ready()
        if self.read_only:
            raise self._read_only_error()

    def close(self) -> None:
        """Stop renewing leases and close the connections (close the sessions first)."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=self.query_timeout + 1)
            self._heartbeat = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- leases ----------------------------------------------------------------------------------

    def _take_lease(self, session_id: str, *, wait: float) -> int:
        """Take the session's writer lease (waiting up to `wait` seconds); returns the fencing token.

        Never waits on a row lock: a free or expired lease whose row is locked is retried, and when
        the lock belongs to a transaction older than `query_timeout` (the old holder, stalled inside
        its turn), that backend is ended first. So a take answers within `wait` plus a round trip
        (and the ended backend's exit).
        """
        self._writes_allowed()
        deadline = time.monotonic() + wait
        ended = False
        while True:
            with self._conn() as conn:
                token, holder = self._try_take(conn, session_id, end_stalled=not ended)
                if token is not None:
                    return token
                held = conn.execute(
                    "SELECT lease_owner, extract(epoch FROM lease_expires - now()) FROM sessions WHERE id = %s",
                    (session_id,),
                ).fetchone()
            if held is None:
                raise SessionNotFoundError(session_id, self.location)
            if holder is not None and holder.ended:
                ended = True  # its rollback frees the row: take again at once, even at the deadline
                continue
            if time.monotonic() >= deadline:
                left = max(float(held[1]) if held[1] is not None else 0.0, 0.0)
                stalled = ""
                if holder is not None:
                    stalled = f"; its transaction (backend {holder.pid}) has held the session {holder.seconds:.1f} s"
                    stalled += f" and cannot be ended: {holder.refused}" if holder.refused else ""
                raise SessionLockedError(session_id, f"{held[0]} (lease expires in {left:.1f} s{stalled})")
            ended = False
            time.sleep(min(_RETRY_PAUSE, max(deadline - time.monotonic(), 0.0)))

    def _try_take(
        self, conn: psycopg.Connection[Any], session_id: str, *, end_stalled: bool
    ) -> tuple[int | None, StalledHolder | None]:
        """One attempt at the lease, never waiting on the row's lock: (the token, or the row's stalled holder)."""
        try:
            row = conn.execute(
                "WITH free AS (SELECT id FROM sessions WHERE id = %s"
                " AND (lease_owner IS NULL OR lease_expires < now()) FOR UPDATE NOWAIT)"
                " UPDATE sessions SET lease_owner = %s, lease_token = lease_token + 1,"
                " lease_expires = now() + make_interval(secs => %s)"
                " FROM free WHERE sessions.id = free.id RETURNING sessions.lease_token",
                (session_id, self.owner, self.lease_seconds),
            ).fetchone()
        except psycopg.errors.LockNotAvailable:  # expired (or free), but a transaction holds the row
            older = self.query_timeout if end_stalled else float("inf")
            return None, end_stalled_holder(
                conn, session_id, older_than=older, expired_only=True, wait_ms=TERMINATE_WAIT_MS
            )
        return (int(row[0]) if row is not None else None), None

    def _hold(self, session: PostgresSession) -> None:
        self._held.add(session)
        if self._heartbeat is None or not self._heartbeat.is_alive():
            self._stop.clear()
            self._heartbeat = threading.Thread(target=self._renew_leases, name="lamina-lease", daemon=True)
            self._heartbeat.start()

    def _renew_leases(self) -> None:
        """Renew every held lease a few times per lease period; a lease found taken marks its session lost."""
        period = max(self.lease_seconds / 3, 0.05)
        while not self._stop.wait(period):
            held = [s for s in list(self._held) if s._token is not None and not s._lost]
            if held:
                with contextlib.suppress(StoreError):  # the database is away: try again next period
                    self._renew(held)

    def _renew(self, held: Sequence[PostgresSession]) -> set[str]:
        """Extend the leases of `held` in one statement (at most `query_timeout`); marks the ones taken over lost.

        Returns the ids of the sessions whose lease was extended.

        A row locked by a transaction (this writer's own turn, or a stalled one) is skipped, not
        waited for: a turn extends its lease when it commits, and a stalled one must not keep it.
        """
        with self._conn() as conn:
            rows = conn.execute(
                "WITH held(id, token) AS (SELECT * FROM unnest(%s::text[], %s::bigint[])),"
                " mine AS (SELECT sessions.id FROM sessions JOIN held ON sessions.id = held.id"
                " AND sessions.lease_token = held.token FOR UPDATE OF sessions SKIP LOCKED),"
                " renewed AS (UPDATE sessions SET lease_expires = now() + make_interval(secs => %s)"
                " FROM mine WHERE sessions.id = mine.id RETURNING sessions.id)"
                " SELECT held.id, sessions.lease_token IS DISTINCT FROM held.token, renewed.id IS NOT NULL"
                " FROM held LEFT JOIN sessions ON sessions.id = held.id LEFT JOIN renewed ON renewed.id = held.id",
                ([s.id for s in held], [s._token for s in held], self.lease_seconds),
            ).fetchall()
        taken = {r[0] for r in rows if r[1]}
        for session in held:
            if session.id in taken and session._token is not None:
                session._lost = True
        return {r[0] for r in rows if r[2]}

    # -- sessions --------------------------------------------------------------------------------

    def _folders(self, session_id: str) -> Path:
        folder = self.files_root / session_id
        for name in SUBFOLDERS:
            (folder / name).mkdir(parents=True, exist_ok=True)
        return folder

    def create(self, *, cwd: str = "", title: str = "", forked_from: ForkOrigin | None = None) -> PostgresSession:
        """Create an empty session, its writer lease taken."""
        self._writes_allowed()
        now = self._clock()
        title = _title_from(title)
        while True:
            session_id = _new_session_id(now)
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
        info = SessionSummary(session_id, title, now, now, 0, cwd, forked_from)
        session = PostgresSession(self, info, self._folders(session_id), token=int(row[0]))
        self._hold(session)
        return session

    def open(self, session_id: str, *, writable: bool = True, wait: float = 0.0) -> PostgresSession:
        """Open a session to continue it: reads only from the first entry its provider view needs.

        A writer takes the session's lease first (waiting up to `wait` seconds for the holder to let
        go, or for its lease to expire), then reads what the previous holder committed.
        """
        check_session_id(session_id)
        token = self._take_lease(session_id, wait=wait) if writable else None
        try:
            session = self._load(session_id, token)
        except BaseException:
            if token is not None:
                self._release(session_id, token)
            raise
        if token is not None:
            self._hold(session)
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
            rows = self._fetch(conn, session_id, after=resume_seq - 1)
        origin = ForkOrigin(row[6], row[7]) if row[6] is not None else None
        info = SessionSummary(row[0], row[1], row[2], row[3], int(row[4]), row[5], origin)
        session = PostgresSession(self, info, self._folders(session_id), token=token)
        session._restore(rows, leaf_id=row[8], last_seq=int(row[9]))
        return session

    def _fetch(
        self, conn: psycopg.Connection[Any], session_id: str, *, after: int, before: int | None = None
    ) -> tuple[list[int], list[LogEntry]]:
        """Entries with `after` < seq (< `before`), in order, decoded by the JSONL store's scanner."""
        if before is None:
            cur = conn.execute(
                "SELECT seq, payload FROM entries WHERE session_id = %s AND seq > %s ORDER BY seq",
                (session_id, after),
            )
        else:
            cur = conn.execute(
                "SELECT seq, payload FROM entries WHERE session_id = %s AND seq > %s AND seq < %s ORDER BY seq",
                (session_id, after, before),
            )
        rows = cur.fetchall()
        if not rows:
            return [], []
        seqs = [int(r[0]) for r in rows]
        scan = scan_log(b"\n".join(_payload(r[1]) for r in rows) + b"\n", base_offset=0, first_line=1)
        if scan.corrupt or len(scan.entries) != len(rows):
            first = scan.corrupt[0].reason if scan.corrupt else "entry count differs"
            raise StoreError(self.location, f"session {session_id}: an entry cannot be read: {first}")
        return seqs, scan.entries

    def _release(self, session_id: str, token: int) -> None:
        # an unreleased lease simply expires
        with contextlib.suppress(StoreError), self._conn() as conn:
            conn.execute(
                "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL WHERE id = %s AND lease_token = %s",
                (session_id, token),
            )

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
        _carry_files(files, self.files_dir_of(forked_id))
        origin = ForkOrigin(session_id=session_id, entry_id=entry_id)
        return self.import_entries(path, session_id=forked_id, cwd=cwd, title=title, forked_from=origin)

    def delete(self, session_id: str) -> None:
        """Remove a session, its entries and its files; refused while a writer holds its lease."""
        check_session_id(session_id)
        token = self._take_lease(session_id, wait=0.0)
        with self._conn() as conn:
            conn.execute("DELETE FROM sessions WHERE id = %s AND lease_token = %s", (session_id, token))
        shutil.rmtree(self.files_root / session_id, ignore_errors=True)

    def new_session_id(self) -> str:
        """A fresh session id (for an import that must place the session's files before its entries)."""
        return _new_session_id(self._clock())

    def files_dir_of(self, session_id: str) -> Path:
        """The folder of a session's files (`attachments/`, `data/`, `plans/`), created if missing."""
        return self._folders(check_session_id(session_id))

    def import_entries(
        self,
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
        self._writes_allowed()
        now = self._clock()
        sid = check_session_id(session_id) if session_id is not None else _new_session_id(now)
        info = SessionSummary(
            sid, _title_from(title), now if created_at is None else created_at, now, 0, cwd, forked_from
        )
        session = PostgresSession(self, info, self._folders(sid), token=1)
        session._creating = True
        for entry in entries:
            session._add(entry)
        if leaf_id is not None and leaf_id != session.leaf_id:
            session.get(leaf_id)
            session._leaf = leaf_id
            session._view_start = view_start_id(session._entries, leaf_id)
        session._commit_pending()
        self._hold(session)
        return session

    def follow(
        self, session_id: str, *, after_seq: int = 0, poll_seconds: float = 1.0, stop: threading.Event | None = None
    ) -> Iterator[tuple[int, LogEntry]]:
        """The session's committed entries after `after_seq`, then each new one as it commits, with its seq.

        Waits on LISTEN/NOTIFY, and reads again at least every `poll_seconds` with the last sequence
        number as cursor, so a lost notification only delays an entry. Never blocks a writer. Ends
        when `stop` is set (or the caller stops iterating). Each read takes at most `query_timeout`,
        else `StoreConnectionError`.
        """
        self._ready()
        conn = self._connect_once()
        try:
            self._configure(conn)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
            cursor = after_seq
            while stop is None or not stop.is_set():
                try:
                    with WATCHDOG.bound(conn, self.query_timeout):
                        seqs, entries = self._fetch(conn, session_id, after=cursor)
                except psycopg.OperationalError as exc:
                    raise StoreConnectionError(self.location, f"connection failed: {_first_line(exc)}") from None
                for seq, entry in zip(seqs, entries, strict=True):
                    cursor = seq
                    yield seq, entry
                for _ in conn.notifies(timeout=poll_seconds, stop_after=1):
                    pass
        finally:
            conn.close()


def _row_held(session_id: str, holder: StalledHolder | None) -> str:
    """Why a flush gave up on its session's row lock (nothing of the batch was committed)."""
    if holder is None or not (holder.ended or holder.refused):
        return f"session {session_id}: its row stayed locked by another transaction; nothing committed, flush again"
    what = f"session {session_id}: its row was held by a stalled transaction"
    what += f" (backend {holder.pid}, open {holder.seconds:.1f} s)"
    if holder.refused:
        return f"{what} that cannot be ended: {holder.refused}"
    return f"{what}, now ended; nothing committed, flush again"


def _payload(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _carry_files(source: Path, target: Path) -> None:
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


class PostgresSession(SessionCore):
    """An open session of a `PostgresSessionStore`. Create it through the store."""

    def __init__(
        self, store: PostgresSessionStore, info: SessionSummary, files_dir: Path, *, token: int | None
    ) -> None:
        super().__init__()
        self._store = store
        self._info = info
        self.files_dir = files_dir
        """The session's folder of files: `attachments/`, `data/`, `plans/`."""
        self._token = token
        """The fencing token of this writer's lease; None when read-only or closed."""
        self._lost = False
        """The lease was found taken over: every write is refused."""
        self._creating = False
        """The session's row is not in the database yet: the first commit inserts it (an import)."""
        self.report = LoadReport()
        self._seq_of: dict[str, int] = {}
        self._pending: list[tuple[int, LogEntry]] = []
        self._committed_seq = 0
        """The last sequence number known committed."""
        self._next_seq = 1
        self._loaded_from = 1
        """The lowest sequence number in memory (1: everything is loaded)."""
        self._committed_leaf: str | None = None
        self._count = info.entry_count
        self._view_start: str | None = None

    # -- loading ---------------------------------------------------------------------------------

    def _restore(self, rows: tuple[list[int], list[LogEntry]], *, leaf_id: str | None, last_seq: int) -> None:
        seqs, entries = rows
        self._entry_list = list(entries)
        self._by_id = {e.id: e for e in entries}
        self._order_list = None
        self._seq_of = dict(zip((e.id for e in entries), seqs, strict=True))
        self._loaded_from = seqs[0] if seqs else last_seq + 1
        self._committed_seq = last_seq
        self._next_seq = last_seq + 1
        self._leaf = leaf_id if leaf_id in self._entries else (entries[-1].id if entries else None)
        if leaf_id is not None and leaf_id not in self._entries and self._loaded_from > 1:
            self.load_all()
            self._leaf = leaf_id if leaf_id in self._entries else self._last_id()
        self._committed_leaf = self._leaf
        self.report.unknown_entries = sum(isinstance(e, UnknownEntry) for e in self._entry_list)
        try:
            self._view_start = view_start_id(self._entries, self._leaf)
        except MissingEntryError:
            self.load_all()
            self._view_start = view_start_id(self._entries, self._leaf)

    def load_all(self) -> None:
        """Load the entries before the first one in memory (needed for full history, old branches, forks)."""
        if self._loaded_from <= 1:
            return
        with self._store._conn() as conn:
            seqs, older = self._store._fetch(conn, self.id, after=0, before=self._loaded_from)
        self._entry_list = older + self._entry_list
        self._order_list = None
        for seq, entry in zip(seqs, older, strict=True):
            self._entries[entry.id] = entry
            self._seq_of[entry.id] = seq
        self._loaded_from = 1

    # -- reading (the rest is `SessionCore`'s) -------------------------------------------------

    @property
    def id(self) -> str:
        return self._info.id

    def _header(self) -> SessionSummary:
        return self._info

    @property
    def _files_root(self) -> Path:
        return self.files_dir

    def _leaf_view_start(self) -> str | None:
        return self._view_start

    @property
    def writable(self) -> bool:
        return self._token is not None

    @property
    def lease_token(self) -> int | None:
        """This writer's fencing token (None when read-only)."""
        return self._token

    def seq_of(self, entry_id: str) -> int | None:
        """The per-session sequence number of an entry in memory."""
        return self._seq_of.get(entry_id)

    def children(self, entry_id: str) -> list[LogEntry]:
        """The entries whose parent is `entry_id`, in append order.

        All of them, not only those after the parent as `SessionCore` looks: an imported list of
        entries (`import_entries`) may hold a child before its parent, and nothing here mends it.
        """
        self.get(entry_id)
        return [e for e in self._entry_list if e.parent_id == entry_id]

    # -- writing ---------------------------------------------------------------------------------

    def renew_lease(self) -> bool:
        """Extend this writer's lease now (the store's thread also does, a few times per lease period).

        Takes at most `query_timeout` (plus `connect_timeout` when a connection must be made).

        Returns:
            False when the session's row was held by a transaction (this writer's turn in flight,
            or one of its turns stalled) and the lease was not extended; True when it was.

        Raises:
            SessionLeaseLostError: Another server has taken the session over.
            StoreConnectionError: The database did not answer within the bound.
        """
        self._check_writable()
        renewed = self.id in self._store._renew([self])
        self._check_writable()
        return renewed

    def _check_writable(self) -> None:
        if self._token is None:
            raise UsageError(f"session {self.id} was opened read-only (or is closed)")
        if self._lost:
            raise SessionLeaseLostError(self.id, "another server")

    def _add(self, entry: LogEntry) -> None:
        """Put an entry in memory and in the pending batch, as the new leaf."""
        self._check_writable()
        seq = self._next_seq
        self._next_seq += 1
        self._remember(entry)
        self._seq_of[entry.id] = seq
        self._pending.append((seq, entry))
        if isinstance(entry, CompactionBoundary):
            self._view_start = entry.first_kept_id or entry.id
        elif self._leaf is None:
            self._view_start = entry.id
        self._leaf = entry.id
        self._count += 1
        if not self._info.title and isinstance(entry, UserMessage):
            self._info = dataclasses.replace(self._info, title=_title_from(entry.text))

    def append(self, entry: E, *, durable: bool | None = None) -> E:
        """Append `entry` as a child of the leaf; it becomes the new leaf.

        Committed now when `durable` is true (default: only critical entries), with the entries
        still pending before it; else at the next `flush`. A critical append that cannot be
        committed is taken back (the leaf returns to where it was) and its error raised.
        """
        self._check_writable()
        stamped = _storable(
            msgspec.structs.replace(
                entry, id=self._store._new_entry_id(), parent_id=self._leaf, ts=self._store._clock()
            )
        )
        must_commit = isinstance(stamped, CRITICAL_ENTRY_TYPES) if durable is None else durable
        saved = (self._leaf, self._view_start, self._count, self._info)
        self._add(stamped)
        if must_commit:
            try:
                self.flush()
            except BaseException:
                self._take_back(stamped, saved)
                raise
        return stamped

    def _take_back(self, entry: LogEntry, saved: tuple[str | None, str | None, int, SessionSummary]) -> None:
        self._pending.pop()
        self._forget_last()
        del self._seq_of[entry.id]
        self._next_seq -= 1
        self._leaf, self._view_start, self._count, self._info = saved

    @overload
    def branch(self, entry_id: str, *, first: None = None) -> None: ...
    @overload
    def branch(self, entry_id: str, *, first: E) -> E: ...
    def branch(self, entry_id: str, *, first: E | None = None) -> E | None:
        """Move the leaf to `entry_id` (committed at once): the next append starts a new branch from there.

        With `first`, that entry is appended as the branch's first and committed in the same
        transaction as the new leaf. Returns it stamped.
        """
        self._check_writable()
        self.get(entry_id)
        previous = (self._leaf, self._view_start)
        self._leaf = entry_id
        self._view_start = view_start_id(self._entries, entry_id)
        if first is None:
            self.flush(force=True)
            return None
        try:
            return self.append(first, durable=True)  # one commit: the entry and the leaf it makes
        except BaseException:
            self._leaf, self._view_start = previous
            raise

    def flush(self, *, force: bool = False) -> None:
        """The turn boundary: commit every pending entry and the session row in one transaction.

        The transaction is bounded: it takes at most the store's `query_timeout` plus 1 ms per
        entry committed (plus `connect_timeout` when a new connection must be made), even when the
        database or the network stalls; then `StoreConnectionError`.

        Raises:
            StoreConnectionError: The database could not be reached, the connection dropped, or it
                did not answer within the bound. The batch was committed entirely or not at all, and
                if the COMMIT's answer was what got lost, it may well have been committed. Either way
                the entries stay pending and the next `flush` (or `close`) settles it: it recognises
                the sequence number a lost commit left and never writes an entry twice. A caller that
                gives up instead (or whose next flush raises `SessionLeaseLostError`) learns what
                landed by reopening the session (read-only is enough) and looking for the turn's
                entry ids.
            SessionLeaseLostError: Another server has taken the session over; nothing is committed
                by this writer any more.
        """
        if self._token is None:
            return
        self._check_writable()
        if not self._pending and not force and self._leaf == self._committed_leaf:
            return
        for _ in range(2):  # a second round only after an earlier commit whose answer was lost
            try:
                self._commit_pending()
            except _NotApplied:
                self._settle()
                continue
            return
        raise StoreError(self._store.location, f"session {self.id}: the flush could not be settled")

    def _commit_pending(self) -> None:
        batch = list(self._pending)
        last_seq = batch[-1][0] if batch else self._committed_seq
        store = self._store
        start_seq = self._seq_of.get(self._view_start, 0) if self._view_start is not None else 0
        seconds = store.query_timeout + len(batch) * _ENTRY_ALLOWANCE
        with store._conn(seconds) as conn:
            try:
                with conn.transaction():
                    if len(batch) >= _BIG_BATCH:  # the server's statement_timeout grows with the batch too
                        conn.execute(
                            sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(round(seconds * 1000)))
                        )
                    if self._creating:
                        self._insert_row(conn, last_seq, start_seq)
                    row = conn.execute(
                        "UPDATE sessions SET last_seq = %s, leaf_id = %s, entry_count = %s, resume_seq = %s,"
                        " title = %s, updated_at = %s, lease_expires = now() + make_interval(secs => %s)"
                        " WHERE id = %s AND lease_token = %s AND last_seq = %s RETURNING 1",
                        (
                            last_seq,
                            self._leaf,
                            self._count,
                            start_seq,
                            self._info.title,
                            store._clock(),
                            store.lease_seconds,
                            self.id,
                            self._token,
                            self._committed_seq,
                        ),
                    ).fetchone()
                    if row is None:
                        raise _NotApplied
                    if batch:
                        with conn.cursor().copy(
                            "COPY entries (session_id, seq, id, parent_id, type, ts, payload, lease_token) FROM STDIN"
                        ) as copy:
                            for seq, entry in batch:
                                copy.write_row(
                                    (
                                        self.id,
                                        seq,
                                        entry.id,
                                        entry.parent_id,
                                        _entry_type(entry),
                                        entry.ts,
                                        encode_entry(entry).decode(),
                                        self._token,
                                    )
                                )
                    conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, f"{store.schema}\t{self.id}\t{last_seq}"))
            except psycopg.errors.LockNotAvailable:  # the row stayed locked for half the bound
                holder = end_stalled_holder(conn, self.id, older_than=store.query_timeout, wait_ms=0)
                raise StoreConnectionError(store.location, _row_held(self.id, holder)) from None
        self._creating = False
        self._committed_seq = last_seq
        self._committed_leaf = self._leaf
        del self._pending[: len(batch)]

    def _insert_row(self, conn: psycopg.Connection[Any], last_seq: int, start_seq: int) -> None:
        """The row of a session being imported, in the transaction that commits its entries."""
        info, store = self._info, self._store
        row = conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, cwd, title, forked_from_session, forked_from_entry,"
            " leaf_id, entry_count, last_seq, resume_seq, lease_owner, lease_token, lease_expires)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, now() + make_interval(secs => %s))"
            " ON CONFLICT (id) DO NOTHING RETURNING 1",
            (
                info.id,
                info.created_at,
                info.updated_at,
                info.cwd,
                info.title,
                info.forked_from.session_id if info.forked_from else None,
                info.forked_from.entry_id if info.forked_from else None,
                self._leaf,
                self._count,
                start_seq,
                store.owner,
                self._token,
                store.lease_seconds,
            ),
        ).fetchone()
        if row is None:
            raise UsageError(f"session {info.id} already exists in store {store.location}")

    def _settle(self) -> None:
        """The conditional update matched nothing: either the lease was taken (raise), or an earlier
        attempt committed part of the pending entries and only its answer was lost (drop those)."""
        with self._store._conn() as conn:
            row = conn.execute(
                "SELECT lease_token, last_seq, lease_owner FROM sessions WHERE id = %s", (self.id,)
            ).fetchone()
        if row is None:
            self._lost = True
            raise SessionLeaseLostError(self.id, "a delete")
        token, committed, owner = int(row[0]), int(row[1]), row[2]
        if token != self._token:
            self._lost = True
            raise SessionLeaseLostError(self.id, str(owner or "another server"))
        pending_end = self._pending[-1][0] if self._pending else self._committed_seq
        if not self._committed_seq <= committed <= pending_end:
            self._lost = True
            raise SessionLeaseLostError(self.id, f"a writer that left sequence number {committed}")
        self._pending = [(seq, e) for seq, e in self._pending if seq > committed]
        self._committed_seq = committed

    def close(self) -> None:
        """Flush, then give the lease back. Safe to call twice; the lease is released even when the flush fails."""
        if self._token is None:
            return
        try:
            if not self._lost:
                self.flush()
        finally:
            self._abandon()

    def _abandon(self) -> None:
        token, self._token = self._token, None
        if token is not None and not self._lost:
            self._store._release(self.id, token)
        self._store._held.discard(self)

    def __enter__(self) -> PostgresSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None:
        self.close()


class _NotApplied(Exception):
    """The session row did not match this writer's token and sequence number (raised to roll back)."""
