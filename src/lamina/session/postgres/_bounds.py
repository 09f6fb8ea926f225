"""The PostgreSQL store's time bounds: nothing it does waits on the database without limit (I/O).

Described in docs/postgres.md ("Time bounds").
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_QUERY_TIMEOUT: Final = 10.0
"""Seconds any one database operation may take (capped at a third of the lease when that is shorter)."""
KEEPALIVE_DEFAULTS: Final = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
}
"""libpq's TCP keepalives unless the URL sets them: a silent peer is found in about 11 s."""
TERMINATE_WAIT_MS: Final = 1_000
"""How long a takeover waits for an ended backend to exit (and release its locks)."""


def query_timeout_for(lease_seconds: float, query_timeout: float | None) -> float:
    """The bound on one operation: `query_timeout`, by default 10 s or a third of the lease if shorter.

    A holder's renewals come every third of the lease, so a turn stalled inside its transaction has
    been open at least two thirds of the lease when the lease expires: with `query_timeout` no
    longer than that, a takeover may end it at once.

    Raises:
        ValueError: `lease_seconds` or `query_timeout` is not a positive number of seconds.
    """
    if not lease_seconds > 0:
        raise ValueError(f"lease_seconds must be a positive number of seconds, not {lease_seconds!r}")
    if query_timeout is None:
        return min(DEFAULT_QUERY_TIMEOUT, lease_seconds / 3)
    if not query_timeout > 0:
        raise ValueError(f"query_timeout must be a positive number of seconds, not {query_timeout!r}")
    return query_timeout


def with_keepalives(conninfo: str, query_timeout: float) -> tuple[str, dict[str, str]]:
    """`conninfo` with libpq's keepalives and `tcp_user_timeout` added where it sets none; and the result's values."""
    given = conninfo_to_dict(conninfo)
    defaults = {**KEEPALIVE_DEFAULTS, "tcp_user_timeout": str(round(query_timeout * 1000))}
    added = {k: v for k, v in defaults.items() if k not in given}
    final = make_conninfo(conninfo, **added) if added else conninfo
    values = {k: str(v) for k, v in conninfo_to_dict(final).items() if k in defaults and v is not None}
    return final, values


def session_settings(query_timeout: float, tcp: dict[str, str]) -> sql.Composed:
    """The server-side bounds of a store's connection: one round trip of SETs."""
    ms = sql.Literal(round(query_timeout * 1000))
    statements = [
        sql.SQL("SET statement_timeout = {}").format(ms),
        sql.SQL("SET lock_timeout = {}").format(sql.Literal(round(query_timeout * 500))),
        sql.SQL("SET idle_in_transaction_session_timeout = {}").format(ms),
    ]
    server_names = {
        "keepalives_idle": "tcp_keepalives_idle",
        "keepalives_interval": "tcp_keepalives_interval",
        "keepalives_count": "tcp_keepalives_count",
        "tcp_user_timeout": "tcp_user_timeout",
    }
    if tcp.get("keepalives", "1") != "0":
        for client, server in server_names.items():
            if client in tcp:
                value = sql.Literal(int(tcp[client]))
                statements.append(sql.SQL("SET {} = {}").format(sql.Identifier(server), value))
    return sql.SQL("; ").join(statements)


@dataclasses.dataclass(eq=False)
class Bound:
    """One armed deadline; `fired` once the watchdog broke its connection."""

    deadline: float
    conn: psycopg.Connection[Any]
    fired: bool = False


class Watchdog:
    """One thread per process that breaks the socket of a connection whose operation overran its deadline.

    Shutting the socket down (both ways) wakes the thread blocked on it: psycopg raises a connection
    error at once. The connection is then useless; `bound` closes it, so a pool discards it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Bound]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    @contextlib.contextmanager
    def bound(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[Bound]:
        """Run the block with `conn` broken if it lasts more than `seconds`; yields the `Bound`."""
        armed = Bound(time.monotonic() + seconds, conn)
        with self._cond:
            self._start()
            heapq.heappush(self._heap, (armed.deadline, next(self._order), armed))
            if self._heap[0][2] is armed:  # the thread sleeps until the earliest deadline: wake it
                self._cond.notify()
        try:
            yield armed
        finally:
            with self._cond:
                fired = armed.fired
                armed.deadline = -1.0  # disarmed
                while self._heap and self._heap[0][2].deadline < 0:
                    heapq.heappop(self._heap)
            if fired:
                conn.close()

    def _start(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's thread is not here
            self._pid, self._heap, self._thread = os.getpid(), [], None
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="lamina-pg-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].deadline < 0:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                due, _, armed = self._heap[0]
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                if armed.deadline == due:
                    armed.fired = True
                    _break(armed.conn)


def _break(conn: psycopg.Connection[Any]) -> None:
    with contextlib.suppress(Exception):  # already closed: nothing to break
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


WATCHDOG: Final = Watchdog()


@dataclasses.dataclass(frozen=True)
class StalledHolder:
    """The backend whose open transaction holds a session's row lock."""

    pid: int
    seconds: float
    """How long its transaction has been open."""
    ended: bool
    """It was ended (or was already gone) by this call."""
    refused: str = ""
    """Why it could not be ended (the role may not signal it), when it could not."""


def end_stalled_holder(
    conn: psycopg.Connection[Any], session_id: str, *, older_than: float, expired_only: bool = False, wait_ms: int
) -> StalledHolder | None:
    """End the backend whose transaction has held `session_id`'s row for more than `older_than` seconds.

    The holder is found by the row's `xmax` (the id of the transaction that locked it). With
    `expired_only`, only while the session's committed lease has expired (or was given back): what
    a takeover may do. Waits up to `wait_ms` for the backend to exit. Returns None when no
    transaction holds the row.
    """
    row = conn.execute(
        "SELECT a.pid, extract(epoch FROM now() - a.xact_start) FROM sessions s"
        " JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = s.xmax AND l.granted"
        " JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE s.id = %s AND a.pid <> pg_backend_pid()"
        " AND (NOT %s OR s.lease_owner IS NULL OR s.lease_expires < now())",
        (session_id, expired_only),
    ).fetchone()
    if row is None:
        return None
    pid, seconds = int(row[0]), float(row[1] or 0.0)
    if seconds <= older_than:
        return StalledHolder(pid, seconds, ended=False)
    try:
        conn.execute("SELECT pg_terminate_backend(%s, %s)", (pid, wait_ms))
    except psycopg.errors.InsufficientPrivilege as exc:
        return StalledHolder(pid, seconds, ended=False, refused=str(exc).strip().splitlines()[0])
    return StalledHolder(pid, seconds, ended=True)
