"""The `lamina` command's typer application: its commands, the root options and the run (I/O).

Imported by `lamina.cli.main` once the `cli` extra is known to be installed, and by `lamina.cli.app`.
"""

from __future__ import annotations

import sys
from typing import Annotated

from lamina.errors import MissingExtraError

try:
    import typer
except ImportError as exc:
    raise MissingExtraError.of(exc, "the lamina command", "cli") from None

from lamina.cli import _chat as chat
from lamina.cli import _config as config
from lamina.cli import _context as context
from lamina.cli import _run as run
from lamina.cli import _serve as serve
from lamina.cli import _sessions as sessions
from lamina.cli import _store as store

app = typer.Typer(
    name="lamina",
    help="Lamina: a context engine for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(sessions.app, name="sessions")
app.add_typer(config.app, name="config")
app.add_typer(store.app, name="store")
app.command("context")(context.show_context)
app.command("chat")(chat.chat)
app.command("run")(run.run)
app.command("serve")(serve.serve)


@app.command("demo")
def _demo(ctx: typer.Context) -> None:
    """Run the scripted demo session in a sample workspace: no API key, nothing to start (`make run`)."""
    from lamina.cli._demo import main as run_demo

    raise typer.Exit(run_demo(ctx.obj["store"]))


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"lamina {version('lamina')}")
        except PackageNotFoundError:
            typer.echo("lamina (not installed)")
        raise typer.Exit


@app.callback()
def _root(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Session store: a folder or a postgresql:// URL (default: $LAMINA_STORE, else the user data folder).",
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    ctx.obj = {"store": store}


def start(args: list[str]) -> None:
    """Run the command line on `args`: every `LaminaError` ends as one line and its exit code.

    Args:
        args: The arguments after the program's name.
    """
    from lamina.errors import LaminaError

    try:
        app(args=args)
    except LaminaError as exc:
        from lamina.cli._console import abort

        try:
            abort(str(exc))
        except typer.Exit as done:
            sys.exit(done.exit_code)
