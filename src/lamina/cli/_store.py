"""`lamina store …`: the store's schema (create or migrate a PostgreSQL database; show its version)."""

from __future__ import annotations

from typing import Annotated

import typer

from lamina.cli._console import abort, out, print_json, safe
from lamina.errors import LaminaError

app = typer.Typer(help="Manage the session store itself (PostgreSQL schema migrations).", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]


def _location(ctx: typer.Context) -> str | None:
    from lamina.session._location import is_postgres_url, store_location

    chosen = store_location((ctx.find_root().obj or {}).get("store"))
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
