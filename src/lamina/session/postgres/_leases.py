"""The writer leases of the PostgreSQL store: taking one, renewing those held, giving them back (I/O).

A lease is a session row's `lease_owner`, `lease_expires` (the database's clock) and `lease_token`
(the fencing token, one more at every take). A store's thread renews the leases it holds a few
times per lease period and marks a session whose lease was taken over lost.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, Protocol

import psycopg
import psycopg.errors

from lamina.errors import SessionLockedError, SessionNotFoundError, StoreError
from lamina.session.postgres._bounds import TERMINATE_WAIT_MS, StalledHolder, end_stalled_holder

_RETRY_PAUSE: Final = 0.1


class Database(Protocol):
    """What the leases need of the store: its bounded connections, its name as holder, its bounds."""

    owner: str
    lease_seconds: float
    query_timeout: float

    @property
    def location(self) -> str: ...

    def conn(self, seconds: float | None = None) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def writes_allowed(self) -> None: ...


class LeasedSession(Protocol):
    """A session whose lease is held: its id, its token (None once closed), lost, unsettled by a failed flush."""

    _token: int | None
    _lost: bool
    _unsettled: bool

    @property
    def id(self) -> str: ...


class Leases:
    """The leases one store holds, and the thread that renews them."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._held: weakref.WeakSet[LeasedSession] = weakref.WeakSet()
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    def take(self, session_id: str, *, wait: float) -> int:
        """Take the session's writer lease (waiting up to `wait` seconds); returns the fencing token.

        Never waits on a row lock: a free or expired lease whose row is locked is retried, and when
        the lock belongs to a transaction older than `query_timeout` (the old holder, stalled inside
        its turn), that backend is ended first. So a take answers within `wait` plus a round trip
        (and the ended backend's exit).
        """
        db = self._db
        db.writes_allowed()
        deadline = time.monotonic() + wait
        ended = False
        while True:
            with db.conn() as conn:
                token, holder = self._try_take(conn, session_id, end_stalled=not ended)
                if token is not None:
                    return token
                held = conn.execute(
                    "SELECT lease_owner, extract(epoch FROM lease_expires - now()) FROM sessions WHERE id = %s",
                    (session_id,),
                ).fetchone()
            if held is None:
                raise SessionNotFoundError(session_id, db.location)
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
                (session_id, self._db.owner, self._db.lease_seconds),
            ).fetchone()
        except psycopg.errors.LockNotAvailable:  # expired (or free), but a transaction holds the row
            older = self._db.query_timeout if end_stalled else float("inf")
            return None, end_stalled_holder(
                conn, session_id, older_than=older, expired_only=True, wait_ms=TERMINATE_WAIT_MS
            )
        return (int(row[0]) if row is not None else None), None

    def hold(self, session: LeasedSession) -> None:
        """Keep `session`'s lease renewed (starting the renewing thread if it is not running)."""
        self._held.add(session)
        if self._heartbeat is None or not self._heartbeat.is_alive():
            self._stop.clear()
            self._heartbeat = threading.Thread(target=self._renew_all, name="lamina-lease", daemon=True)
            self._heartbeat.start()

    def _renew_all(self) -> None:
        """Renew every held lease a few times per lease period; a lease found taken marks its session lost."""
        period = max(self._db.lease_seconds / 3, 0.05)
        while not self._stop.wait(period):
            # An unsettled session's turn may still sit in a stalled transaction: once a takeover ends
            # that transaction, a renewal here would give the lease back to the stalled writer.
            held = [s for s in list(self._held) if s._token is not None and not s._lost and not s._unsettled]
            if held:
                with contextlib.suppress(StoreError):  # the database is away: try again next period
                    self.renew(held)

    def renew(self, held: Sequence[LeasedSession]) -> set[str]:
        """Extend the leases of `held` in one statement (at most `query_timeout`); marks the ones taken over lost.

        Returns the ids of the sessions whose lease was extended.

        A row locked by a transaction (this writer's own turn, or a stalled one) is skipped, not
        waited for: a turn extends its lease when it commits, and a stalled one must not keep it.
        """
        with self._db.conn() as conn:
            rows = conn.execute(
                "WITH held(id, token) AS (SELECT * FROM unnest(%s::text[], %s::bigint[])),"
                " mine AS (SELECT sessions.id FROM sessions JOIN held ON sessions.id = held.id"
                " AND sessions.lease_token = held.token FOR UPDATE OF sessions SKIP LOCKED),"
                " renewed AS (UPDATE sessions SET lease_expires = now() + make_interval(secs => %s)"
                " FROM mine WHERE sessions.id = mine.id RETURNING sessions.id)"
                " SELECT held.id, sessions.lease_token IS DISTINCT FROM held.token, renewed.id IS NOT NULL"
                " FROM held LEFT JOIN sessions ON sessions.id = held.id LEFT JOIN renewed ON renewed.id = held.id",
                ([s.id for s in held], [s._token for s in held], self._db.lease_seconds),
            ).fetchall()
        taken = {r[0] for r in rows if r[1]}
        for session in held:
            if session.id in taken and session._token is not None:
                session._lost = True
        return {r[0] for r in rows if r[2]}

    def drop(self, session: LeasedSession) -> None:
        """Stop renewing `session`'s lease (it was released or lost)."""
        self._held.discard(session)

    def release(self, session_id: str, token: int) -> None:
        """Give the lease back (an unreleased lease simply expires)."""
        with contextlib.suppress(StoreError), self._db.conn() as conn:
            conn.execute(
                "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL WHERE id = %s AND lease_token = %s",
                (session_id, token),
            )

    def stop(self) -> None:
        """Stop the renewing thread (waiting for it at most one operation's bound)."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=self._db.query_timeout + 1)
            self._heartbeat = None
