"""The PostgreSQL store's schema: versioned migrations, applied in order, one transaction each (I/O).

Every table lives in one PostgreSQL schema (`lamina` unless the store is told otherwise), so
several stores (and parallel test runs) can share a database. `schema_migrations` records each
applied version; a database whose version is newer than `SCHEMA_VERSION` is refused with both
numbers, never written to. Migrations are serialised across servers by an advisory lock.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg
from psycopg import sql

_MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: sessions with their writer lease, and entries by per-session sequence number
    """
    CREATE TABLE sessions (
        id text PRIMARY KEY,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        cwd text NOT NULL DEFAULT '',
        title text NOT NULL DEFAULT '',
        forked_from_session text,
        forked_from_entry text,
        leaf_id text,
        entry_count bigint NOT NULL DEFAULT 0,
        last_seq bigint NOT NULL DEFAULT 0,
        resume_seq bigint NOT NULL DEFAULT 0,
        lease_owner text,
        lease_token bigint NOT NULL DEFAULT 0,
        lease_expires timestamptz
    );
    CREATE INDEX sessions_updated ON sessions (updated_at DESC, id DESC);
    CREATE TABLE entries (
        session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        id text NOT NULL,
        parent_id text,
        type text NOT NULL,
        ts double precision NOT NULL,
        payload json NOT NULL,
        lease_token bigint NOT NULL,
        PRIMARY KEY (session_id, seq),
        UNIQUE (session_id, id)
    );
    """,
    # 2: find a plan's or an outbox part's records without reading the log
    """
    CREATE INDEX entries_by_type ON entries (session_id, type, seq);
    """,
    # 3: session files, content-addressed: blobs stored once in 1 MiB chunks, named per session
    """
    CREATE TABLE file_blobs (
        sha256 text PRIMARY KEY,
        size bigint NOT NULL
    );
    CREATE TABLE file_chunks (
        sha256 text NOT NULL REFERENCES file_blobs (sha256) ON DELETE CASCADE,
        n integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (sha256, n)
    );
    ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
    CREATE TABLE session_files (
        session_id text NOT NULL,
        name text NOT NULL,
        sha256 text NOT NULL REFERENCES file_blobs (sha256),
        size bigint NOT NULL,
        PRIMARY KEY (session_id, name)
    );
    CREATE INDEX session_files_by_blob ON session_files (sha256);
    """,
    # 4: a session's compaction claim: the one host making its background compaction, until `expires`
    """
    CREATE TABLE compaction_claims (
        session_id text PRIMARY KEY,
        owner text NOT NULL,
        expires timestamptz NOT NULL
    );
    """,
)

SCHEMA_VERSION: Final = len(_MIGRATIONS)
"""The schema version this code reads and writes."""


def schema_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The version of `schema` in the database (0: no Lamina tables yet)."""
    table = sql.Identifier(schema).as_string(conn) + ".schema_migrations"
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    if row is None or not row[0]:
        return 0
    query = sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(sql.Identifier(schema))
    found = conn.execute(query).fetchone()
    return int(found[0]) if found is not None else 0


def migrate(conn: psycopg.Connection[Any], schema: str) -> tuple[int, int]:
    """Bring `schema` up to `SCHEMA_VERSION`; returns (version before, version after).

    Each migration and its version row commit together. Returns the found version unchanged (and
    applies nothing) when it is newer than this code's; the caller refuses such a database.
    """
    lock_key = f"lamina-migrate:{schema}"
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock_key,))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_migrations"
                " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema))
        )
        before = schema_version(conn, schema)
        if before >= SCHEMA_VERSION:
            return before, before
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        for version in range(before + 1, SCHEMA_VERSION + 1):
            conn.execute(_MIGRATIONS[version - 1].encode())
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
    return before, SCHEMA_VERSION
