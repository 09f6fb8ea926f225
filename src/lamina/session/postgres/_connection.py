"""The PostgreSQL store's connections and schema: the pool, bounded operations, migrations (I/O).

`PostgresConnection` is what a `PostgresSessionStore` owns, and its sessions share, to talk to the
database: every operation takes a pooled connection for at most `query_timeout` (see `_bounds.py`),
the schema is checked (and migrated) on first use, and failures become the store's errors.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import platformdirs
import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.adapt import Loader
from psycopg_pool import ConnectionPool, PoolTimeout

from lamina.errors import StoreConnectionError, StoreError, StoreReadOnlyError, StoreSchemaError, UsageError
from lamina.session._entries import LogEntry
from lamina.session._scan import scan_log
from lamina.session._stamp import SUBFOLDERS
from lamina.session.postgres._bounds import WATCHDOG, Bound, query_timeout_for, session_settings, with_keepalives
from lamina.session.postgres._leases import Leases
from lamina.session.postgres._migrations import SCHEMA_VERSION, migrate, schema_version

DEFAULT_SCHEMA: Final = "lamina"
DEFAULT_LEASE_SECONDS: Final = 30.0
"""How long a writer's lease lasts without renewal; a dead server's sessions are free after this."""
FILES_ENV_VAR: Final = "LAMINA_FILES"
"""Where PostgreSQL sessions keep their files (default: the user data folder); shared between hosts."""
NOTIFY_CHANNEL: Final = "lamina_entries"
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


class PostgresConnection:
    """A store's database: its pool, schema, bounds and leases (`PostgresSessionStore` describes the arguments)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None,
        files_root: Path | str | None,
        lease_seconds: float,
        max_connections: int,
        connect_timeout: float,
        query_timeout: float | None,
        auto_migrate: bool,
        clock: Callable[[], float],
        new_entry_id: Callable[[], str],
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
        self.clock = clock
        """The time source of entry stamps."""
        self.new_entry_id = new_entry_id
        """The entry id source."""
        self.owner = f"{socket.gethostname()} pid {os.getpid()} ({secrets.token_hex(3)})"
        """How this store names itself as a lease holder."""
        self.application_name = f"lamina-{self.schema}"[:63]
        """How the store's connections name themselves to the server (`pg_stat_activity`)."""
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._ready_lock = threading.Lock()
        self.read_only = False
        """The database takes no writes (a replica); known after the first use."""
        self.leases = Leases(self)
        """The writer leases this store holds, renewed by a thread of its own."""

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
    def conn(self, seconds: float | None = None) -> Iterator[psycopg.Connection[Any]]:
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

    def writes_allowed(self) -> None:
        """Raise `StoreReadOnlyError` when the database takes no writes (connecting first if need be)."""
        self._ready()
        if self.read_only:
            raise self._read_only_error()

    @contextlib.contextmanager
    def listening(self, channel: str) -> Iterator[psycopg.Connection[Any]]:
        """A connection of its own (not pooled, set up as the pool's), listening on `channel`; closed after."""
        self._ready()
        conn = self._connect_once()
        try:
            self._configure(conn)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Stop renewing leases and close the connections (close the sessions first)."""
        self.leases.stop()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def fetch(
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

    def session_folder(self, session_id: str) -> Path:
        """The local folder of a session's files, its subfolders created."""
        folder = self.files_root / session_id
        for name in SUBFOLDERS:
            (folder / name).mkdir(parents=True, exist_ok=True)
        return folder


def _payload(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
