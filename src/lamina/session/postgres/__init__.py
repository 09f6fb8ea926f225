"""The PostgreSQL session store (`pip install 'lamina[postgres]'`): many servers, one truth (I/O)."""

from lamina.errors import MissingExtraError

try:
    import psycopg  # noqa: F401  (the driver and its pool: the `postgres` extra, checked before the store loads)
    import psycopg_pool  # noqa: F401
except ImportError as exc:
    raise MissingExtraError.of(exc, "the PostgreSQL store", "postgres") from None

from lamina.session.postgres._connection import split_url
from lamina.session.postgres._migrations import SCHEMA_VERSION
from lamina.session.postgres._pg_session import PostgresSession
from lamina.session.postgres._pg_store import PostgresSessionStore

__all__ = ["SCHEMA_VERSION", "PostgresSession", "PostgresSessionStore", "split_url"]
