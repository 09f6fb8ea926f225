"""The PostgreSQL session store (`pip install 'lamina[postgres]'`): many servers, one truth (I/O)."""

from lamina.session.postgres._migrations import SCHEMA_VERSION
from lamina.session.postgres._store import PostgresSession, PostgresSessionStore, split_url

__all__ = ["SCHEMA_VERSION", "PostgresSession", "PostgresSessionStore", "split_url"]
