"""A PostgreSQL session's compaction claim: one host at a time makes its background compaction (I/O).

A row of `compaction_claims` names the host (the store's `owner`) and when its claim lapses (the
database's clock); a host takes it when it is free, lapsed or already its own. See
`lamina.session.CompactionClaims`.
"""

from __future__ import annotations

from typing import Protocol

from lamina.session.postgres._connection import PostgresConnection


class _Claimant(Protocol):
    _store: PostgresConnection

    @property
    def id(self) -> str: ...


def claim_compaction(self: _Claimant, seconds: float) -> bool:
    """Take the session's compaction claim for `seconds` (again, when this host holds it); False: another holds it."""
    store = self._store
    with store.conn() as conn:
        row = conn.execute(
            "INSERT INTO compaction_claims (session_id, owner, expires)"
            " VALUES (%s, %s, now() + make_interval(secs => %s))"
            " ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires"
            " WHERE compaction_claims.expires < now() OR compaction_claims.owner = EXCLUDED.owner"
            " RETURNING 1",
            (self.id, store.owner, seconds),
        ).fetchone()
    return row is not None


def release_compaction(self: _Claimant) -> None:
    """Give the claim back (a no-op when this host does not hold it)."""
    store = self._store
    with store.conn() as conn:
        conn.execute("DELETE FROM compaction_claims WHERE session_id = %s AND owner = %s", (self.id, store.owner))
