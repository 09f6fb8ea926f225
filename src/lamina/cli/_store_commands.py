"""`lamina store …`: the store's schema (create or migrate a PostgreSQL database; show its version)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from lamina.cli._console import JsonOption, abort, out, print_json, safe
from lamina.errors import LaminaError, UsageError

if TYPE_CHECKING:
    from lamina.session import SessionLog, SessionStore
    from lamina.session.postgres import PostgresSessionStore

app = typer.Typer(help="Manage the session store itself (PostgreSQL schema migrations).", no_args_is_help=True)

_T = TypeVar("_T")


def open_named_store(given: str | Path | None) -> SessionStore:
    """The store `--store` (given) or `$LAMINA_STORE` names; a malformed one is a `UsageError` naming which."""
    from lamina.session import open_store

    return open_store(given, setting="--store" if given else None)


def read_session(given: str | Path | None, session_id: str, read: Callable[[SessionLog], _T]) -> _T:
    """What `read` makes of session `session_id`, opened read-only in the store `given` names (closed after).

    A store or session that cannot be read, or a `LaminaError` from `read`, ends the command with one
    error line (exit 2 for a `UsageError`).
    """
    try:
        store = open_named_store(given)
        try:
            with store.open(session_id, writable=False) as session:
                return read(session)
        finally:
            store.close()
    except UsageError as exc:
        abort(str(exc), 2)
    except LaminaError as exc:
        abort(str(exc))


def store_or_abort(ctx: typer.Context) -> SessionStore:
    """The command's store; a location that cannot be used ends it with one error line (exit 2 when malformed)."""
    try:
        return open_named_store((ctx.find_root().obj or {}).get("store"))
    except LaminaError as exc:
        abort(str(exc))


def _location(ctx: typer.Context) -> str | None:
    from lamina.session import check_location, is_postgres_url, store_location

    given = (ctx.find_root().obj or {}).get("store")
    chosen = store_location(given)
    if chosen is None:
        return None
    try:
        check_location(chosen, setting="--store" if given else "LAMINA_STORE")
    except LaminaError as exc:
        abort(str(exc))
    return str(chosen) if is_postgres_url(chosen) else None


def _on_schema(
    ctx: typer.Context, jsonl_note: str, call: Callable[[PostgresSessionStore], _T]
) -> tuple[str, _T] | None:
    """`call` on the PostgreSQL store the command names, which is closed after it; its location and the answer.

    Args:
        ctx: The command's context (`--store`).
        jsonl_note: Printed, and None returned, when the store is a JSONL folder (no schema).
        call: What to ask the store; a `LaminaError` it raises ends the command with one error line.

    Returns:
        The store's location (no password) and what `call` returned; None for a JSONL folder.
    """
    url = _location(ctx)
    if url is None:
        out.print(jsonl_note)
        return None
    from lamina.session.postgres import PostgresSessionStore

    store = PostgresSessionStore(url, auto_migrate=False)
    try:
        return store.location, call(store)
    except LaminaError as exc:
        abort(str(exc))
    finally:
        store.close()


@app.command("migrate")
def migrate(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Create the PostgreSQL store's schema, or bring it to this Lamina's version (safe to run again)."""
    done = _on_schema(
        ctx, "nothing to migrate: the store is a JSONL folder (give --store postgresql://…)", lambda s: s.migrate()
    )
    if done is None:
        return
    location, (before, after) = done
    if as_json:
        print_json({"store": location, "before": before, "after": after})
    elif before == after:
        out.print(f"{safe(location)}: schema already at version {after}")
    else:
        out.print(f"{safe(location)}: schema migrated from version {before} to {after}")


@app.command("version")
def version(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the schema version of the PostgreSQL store and the one this Lamina uses."""
    found = _on_schema(ctx, "the store is a JSONL folder: no schema", lambda s: s.version())
    if found is None:
        return
    from lamina.session.postgres import SCHEMA_VERSION

    location, at = found
    if as_json:
        print_json({"store": location, "version": at, "supported": SCHEMA_VERSION})
        return
    out.print(f"{safe(location)}: schema version {at} (this Lamina: {SCHEMA_VERSION})")
