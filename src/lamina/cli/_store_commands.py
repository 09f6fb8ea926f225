"""`lamina store …`: the store's schema (create or migrate a PostgreSQL database; show its version)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lamina.cli._console import abort, out, print_json, safe
from lamina.errors import LaminaError

if TYPE_CHECKING:
    from lamina.session import SessionStore

app = typer.Typer(help="Manage the session store itself (PostgreSQL schema migrations).", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]


def open_named_store(given: str | Path | None) -> SessionStore:
    """The store `--store` (given) or `$LAMINA_STORE` names; a malformed one is a `UsageError` naming which."""
    from lamina.session import open_store

    return open_store(given, setting="--store" if given else None)


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


@app.command("migrate")
def migrate(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Create the PostgreSQL store's schema, or bring it to this Lamina's version (safe to run again)."""
    url = _location(ctx)
    if url is None:
        out.print("nothing to migrate: the store is a JSONL folder (give --store postgresql://…)")
        return
    from lamina.session.postgres import PostgresSessionStore

    store = PostgresSessionStore(url, auto_migrate=False)
    try:
        before, after = store.migrate()
    except LaminaError as exc:
        abort(str(exc))
    finally:
        store.close()
    if as_json:
        print_json({"store": store.location, "before": before, "after": after})
    elif before == after:
        out.print(f"{safe(store.location)}: schema already at version {after}")
    else:
        out.print(f"{safe(store.location)}: schema migrated from version {before} to {after}")


@app.command("version")
def version(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the schema version of the PostgreSQL store and the one this Lamina uses."""
    url = _location(ctx)
    if url is None:
        out.print("the store is a JSONL folder: no schema")
        return
    from lamina.session.postgres import SCHEMA_VERSION, PostgresSessionStore

    store = PostgresSessionStore(url, auto_migrate=False)
    try:
        found = store.version()
    except LaminaError as exc:
        abort(str(exc))
    if as_json:
        print_json({"store": store.location, "version": found, "supported": SCHEMA_VERSION})
        return
    out.print(f"{safe(store.location)}: schema version {found} (this Lamina: {SCHEMA_VERSION})")
