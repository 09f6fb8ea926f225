"""A session's files in PostgreSQL: content-addressed blobs in chunks, named per session, streamed on read (I/O).

A file's bytes are stored once per SHA-256 (`file_blobs`, `file_chunks` of 1 MiB), whichever
sessions name it (`session_files`); a put commits its chunks and its name in one transaction,
before the caller appends any entry naming it. Reads fetch one chunk at a time.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, BinaryIO, Final

import psycopg
from psycopg import sql

from lamina.errors import SessionLeaseLostError, StoreError
from lamina.session._protocol import FileInfo
from lamina.session._session_files import CHUNK, chunks_of
from lamina.session.postgres._connection import PostgresConnection

_BYTES_PER_SECOND: Final = 4 * 1024 * 1024
"""The slowest upload a put allows for, on top of `query_timeout` (a 20 MB file: 5 s more)."""


class _Fenced(Exception):
    """The session's lease was not this writer's when its file was named (raised to roll back)."""


def store_file(
    store: PostgresConnection,
    session_id: str,
    name: str,
    source: bytes | Path,
    digest: tuple[str, int],
    *,
    token: int,
    creating: bool,
) -> None:
    """Commit the file `name` of a session: its blob (unless already stored) and its name, in one transaction.

    Raises:
        SessionLeaseLostError: Another writer holds the session's lease (nothing was committed).
        StoreConnectionError: The database did not answer within the bound.
    """
    sha256, size = digest
    seconds = store.query_timeout + size / _BYTES_PER_SECOND
    named = "NOT EXISTS (SELECT 1 FROM sessions WHERE id = %s)" if creating else "TRUE"
    fence: tuple[Any, ...] = (session_id,) if creating else ()
    try:
        with store.conn(seconds) as conn, conn.transaction():
            conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(round(seconds * 1000))))
            row = conn.execute(
                "INSERT INTO file_blobs (sha256, size) VALUES (%s, %s)"
                " ON CONFLICT (sha256) DO UPDATE SET size = file_blobs.size RETURNING xmax = 0",
                (sha256, size),
            ).fetchone()
            if row is not None and row[0]:  # new here: its chunks go in with it
                with conn.cursor().copy("COPY file_chunks (sha256, n, data) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["text", "int4", "bytea"])
                    for n, chunk in enumerate(chunks_of(source)):
                        copy.write_row((sha256, n, chunk))
            # The lease is checked under the session row's lock, held to the commit, as a turn's
            # UPDATE of the row holds it: a takeover (FOR UPDATE NOWAIT) cannot come in between,
            # and a put that waited for one sees the new token and lands nothing.
            if not creating and (
                conn.execute(
                    "SELECT 1 FROM sessions WHERE id = %s AND lease_token = %s FOR SHARE", (session_id, token)
                ).fetchone()
                is None
            ):
                raise _Fenced
            done = conn.execute(
                "INSERT INTO session_files (session_id, name, sha256, size) SELECT %s, %s, %s, %s WHERE "
                + named
                + " ON CONFLICT (session_id, name) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size"
                " RETURNING 1",
                (session_id, name, sha256, size, *fence),
            ).fetchone()
            if done is None:
                raise _Fenced
    except _Fenced:
        raise SessionLeaseLostError(session_id, "another server") from None


def file_info(store: PostgresConnection, session_id: str, name: str) -> FileInfo | None:
    """The file `name` of a session, or None."""
    with store.conn() as conn:
        row = conn.execute(
            "SELECT size, sha256 FROM session_files WHERE session_id = %s AND name = %s", (session_id, name)
        ).fetchone()
    return None if row is None else FileInfo(name, int(row[0]), row[1])


def file_list(store: PostgresConnection, session_id: str, prefix: str) -> list[FileInfo]:
    """The files of a session whose names start with `prefix`, sorted by name."""
    with store.conn() as conn:
        rows = conn.execute(
            "SELECT name, size, sha256 FROM session_files WHERE session_id = %s AND starts_with(name, %s)"
            ' ORDER BY name COLLATE "C"',
            (session_id, prefix),
        ).fetchall()
    return [FileInfo(r[0], int(r[1]), r[2]) for r in rows]


def open_blob(store: PostgresConnection, info: FileInfo) -> BinaryIO:
    """The bytes of `info`'s blob as a stream that holds one chunk at a time."""
    return io.BufferedReader(_Chunks(store, info), buffer_size=CHUNK)


def copy_names(conn: psycopg.Connection[Any], source_id: str, target_id: str) -> None:
    """Give `target_id` every file of `source_id` (names only: the blobs are shared)."""
    conn.execute(
        "INSERT INTO session_files (session_id, name, sha256, size)"
        " SELECT %s, name, sha256, size FROM session_files WHERE session_id = %s ON CONFLICT DO NOTHING",
        (target_id, source_id),
    )


def drop_names(conn: psycopg.Connection[Any], session_id: str) -> None:
    """Forget a session's files, and the blobs no other session names."""
    conn.execute(
        "WITH gone AS (DELETE FROM session_files WHERE session_id = %s RETURNING sha256)"
        " DELETE FROM file_blobs b WHERE b.sha256 IN (SELECT sha256 FROM gone)"
        " AND NOT EXISTS (SELECT 1 FROM session_files f WHERE f.sha256 = b.sha256 AND f.session_id <> %s)",
        (session_id, session_id),
    )


class _Chunks(io.RawIOBase):
    """A blob read chunk by chunk, each on a pooled connection of its own (one bounded query each)."""

    def __init__(self, store: PostgresConnection, info: FileInfo) -> None:
        super().__init__()
        self._store = store
        self._info = info
        self._next = 0
        self._left = info.size
        self._chunk = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._chunk:
            if self._left <= 0:
                return 0
            with self._store.conn() as conn:
                row = conn.execute(
                    "SELECT data FROM file_chunks WHERE sha256 = %s AND n = %s",
                    (self._info.sha256, self._next),
                    binary=True,  # the bytes as they are, not as hex text
                ).fetchone()
            if row is None or not row[0]:
                raise StoreError(self._store.location, f"file {self._info.name}: chunk {self._next} is missing")
            self._chunk = memoryview(bytes(row[0]))
            self._next += 1
        count = min(len(buffer), len(self._chunk), self._left)
        buffer[:count] = self._chunk[:count]
        self._chunk = self._chunk[count:]
        self._left -= count
        return count
