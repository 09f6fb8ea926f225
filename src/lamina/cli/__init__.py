"""The `lamina` command line: thin commands over the public API (I/O)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lamina.cli import chat, context, sessions

app = typer.Typer(
    name="lamina",
    help="Lamina: a context engine for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(sessions.app, name="sessions")
app.command("context")(context.show_context)
app.command("chat")(chat.chat)


@app.callback()
def _root(
    ctx: typer.Context,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="Session store root (default: $LAMINA_STORE, else the user data directory)."),
    ] = None,
) -> None:
    ctx.obj = {"store": store}


def main() -> None:
    """Console-script entry point."""
    app()
