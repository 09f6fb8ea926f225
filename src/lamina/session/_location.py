"""Which store a location names: a `postgresql://` URL, or a folder for the JSONL store (I/O: environment, disk).

Described in docs/session-log.md ("Store locations").
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from lamina.errors import MissingExtraError, UsageError
from lamina.session._protocol import STORE_ENV_VAR, SessionStore

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
_URL_FORM: Final = "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?schema=NAME]"
_ANY_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_POSTGRES_PREFIX: Final = re.compile(r"^postgres(ql)?(\+[a-z0-9]+)?:", re.IGNORECASE)
_PASSWORD: Final = re.compile(r"^([^:]+://[^/@:?#]*:)[^/?#]*@")
"""The password of `scheme://user:password@host`, masked in every message."""


def is_postgres_url(location: str | Path | None) -> bool:
    """Whether `location` names a PostgreSQL database rather than a folder."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def store_location(explicit: str | Path | None = None) -> str | Path | None:
    """`explicit` if given, else `$LAMINA_STORE` if set, else None (the default folder)."""
    if explicit is not None and str(explicit) != "":
        return explicit
    return os.environ.get(STORE_ENV_VAR) or None


def check_location(location: str | Path, *, setting: str = STORE_ENV_VAR) -> None:
    """Refuse a store location that names neither a PostgreSQL database nor a usable folder.

    Args:
        location: A `postgresql://` URL or a folder.
        setting: Where the value came from, named in the error (`LAMINA_STORE`, `--store`).

    Raises:
        UsageError: The location is malformed; the message names `setting` (and never a password).
    """
    if is_postgres_url(location):
        _check_postgres_url(str(location), setting)
    else:
        _check_folder(location, setting)


def open_store(location: str | Path | None = None, *, setting: str | None = None) -> SessionStore:
    """The store named by `location` (else `$LAMINA_STORE`, else the JSONL store in the user's data directory).

    Args:
        location: A `postgresql://` URL or a folder; None or empty for `$LAMINA_STORE`.
        setting: What the caller calls `location` in an error (e.g. `--store`); by default
            `LAMINA_STORE` for a value from the environment, else `store location`.

    Raises:
        UsageError: The location is malformed (the message names the setting).
        MissingExtraError: A PostgreSQL URL without the `postgres` extra installed.
    """
    chosen = store_location(location)
    if chosen is not None:
        explicit = location is not None and str(location) != ""
        check_location(chosen, setting=setting or ("store location" if explicit else STORE_ENV_VAR))
    if is_postgres_url(chosen):
        from lamina.session.postgres import PostgresSessionStore  # MissingExtraError without the `postgres` extra

        return PostgresSessionStore(str(chosen))
    from lamina.session._jsonl import LocalSessionStore

    return LocalSessionStore(chosen)


def _check_postgres_url(url: str, setting: str) -> None:
    masked = _PASSWORD.sub(r"\1***@", url)
    shown = f"{setting}={masked!r}"

    def refuse(problem: str) -> UsageError:
        return UsageError(f"{shown}: {problem}; a PostgreSQL store is {_URL_FORM}")

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsed on access: a port that is not a number raises here
    except ValueError as exc:
        raise refuse(f"not a valid URL ({exc})") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise refuse("the URL holds a control character")
    if not parts.hostname:
        raise refuse("the URL names no host")
    if parts.path in ("", "/"):
        raise refuse("the URL names no database")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "schema" and not value for key, value in query):
        raise refuse("the URL's schema= is empty")
    problem = _libpq_problem(url)
    if problem is not None:
        if parts.password:
            problem = problem.replace(parts.password, "***")
        raise refuse(f"libpq cannot read the URL ({problem})")


def _libpq_problem(url: str) -> str | None:
    """What libpq's own parser says about the URL the store would connect with.

    Returns:
        The problem; None when libpq reads the URL, or when the driver is missing (`open_store` says so).
    """
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict

        from lamina.session.postgres import split_url  # how the store reads the URL: the one reading
    except (ImportError, MissingExtraError):
        return None
    try:
        conninfo_to_dict(split_url(url)[0])
    except ProgrammingError as exc:
        return str(exc).strip()
    return None


def _check_folder(location: str | Path, setting: str) -> None:
    text = str(location)
    shown = f"{setting}={text!r}"
    if _ANY_SCHEME.match(text):
        scheme = text.split(":", 1)[0]
        raise UsageError(f"{shown}: {scheme!r} is not a store: give a folder or a {_URL_FORM} URL")
    if _POSTGRES_PREFIX.match(text):
        raise UsageError(f"{shown}: a PostgreSQL URL starts with postgresql:// ({_URL_FORM})")
    if "\0" in text:
        raise UsageError(f"{shown}: a folder name cannot hold a NUL")
    if text != text.strip():
        raise UsageError(f"{shown}: the folder name starts or ends with a space (remove it)")
    try:
        folder = Path(text).expanduser()
    except RuntimeError:  # `~` with no home directory, `~name` with no such user
        user = text[1:].split("/", 1)[0]
        whose = f"no user {user!r}" if user else "no home directory"
        raise UsageError(f"{shown}: cannot expand {text.split('/', 1)[0]!r}: {whose}") from None
    try:
        not_a_folder = folder.exists() and not folder.is_dir()
    except OSError:  # not allowed to look, a name too long: the store reports it when it is used
        return
    if not_a_folder:
        raise UsageError(f"{shown}: {folder} is not a folder")
