"""Which store a location names: a `postgresql://` URL, or a folder for the JSONL store (I/O: environment).

`--store` and `$LAMINA_STORE` take either. A path (or nothing: the user's data directory) keeps the
embedded JSONL store; a URL starting with `postgresql://` or `postgres://` opens the PostgreSQL
store, whose driver is imported only then (`pip install 'lamina[postgres]'`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from lamina.errors import UsageError
from lamina.session._protocol import STORE_ENV_VAR, SessionStore

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


def is_postgres_url(location: str | Path | None) -> bool:
    """Whether `location` names a PostgreSQL database rather than a folder."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def store_location(explicit: str | Path | None = None) -> str | Path | None:
    """`explicit` if given, else `$LAMINA_STORE` if set, else None (the default folder)."""
    if explicit is not None and str(explicit) != "":
        return explicit
    return os.environ.get(STORE_ENV_VAR) or None


def open_store(location: str | Path | None = None) -> SessionStore:
    """The store named by `location` (else `$LAMINA_STORE`, else the JSONL store in the user's data directory)."""
    chosen = store_location(location)
    if is_postgres_url(chosen):
        try:
            from lamina.session.postgres import PostgresSessionStore
        except ImportError as exc:
            raise UsageError(
                f"the PostgreSQL store needs its driver: pip install 'lamina[postgres]' ({exc.name} is missing)"
            ) from None
        return PostgresSessionStore(str(chosen))
    from lamina.session._store import LocalSessionStore

    return LocalSessionStore(chosen)
