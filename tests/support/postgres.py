"""The PostgreSQL server the tests use, and a schema of its own per test (no pydantic imports).

The server is `$LAMINA_TEST_POSTGRES` (default: the local one, trust authentication, database
`test`). When no server answers, a test that needs it FAILS, saying so, unless
`LAMINA_SKIP_POSTGRES=1` is set: then it is skipped. Each test works in a fresh schema, dropped
after it, so parallel runs never collide.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import psycopg
import pytest

URL: Final = os.environ.get("LAMINA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
SKIP_ENV: Final = "LAMINA_SKIP_POSTGRES"


def require_server() -> None:
    """Fail (or skip, with LAMINA_SKIP_POSTGRES=1) when no PostgreSQL server answers at `URL`."""
    try:
        psycopg.connect(URL, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        message = f"no PostgreSQL server answers at {URL} ({str(exc).strip().splitlines()[0]})"
        if os.environ.get(SKIP_ENV) == "1":
            pytest.skip(f"{message}; skipped because {SKIP_ENV}=1")
        pytest.fail(f"{message}. Start one, or set {SKIP_ENV}=1 to skip the PostgreSQL tests.", pytrace=False)


@contextmanager
def fresh_schema(prefix: str = "t") -> Iterator[str]:
    """A schema name no other test uses; the schema (if created) is dropped afterwards."""
    require_server()
    schema = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        yield schema
    finally:
        with psycopg.connect(URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def schema_url(schema: str, url: str = URL) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"
