"""The `lamina` command line: thin commands over the public API (I/O).

Command modules import the engine, the SDKs and prompt_toolkit inside their functions, so
`lamina --help` and shell completion stay fast.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from lamina.cli import _chat as chat
from lamina.cli import _config as config
from lamina.cli import _context as context
from lamina.cli import _run as run
from lamina.cli import _serve as serve
from lamina.cli import _sessions as sessions
from lamina.cli import _store as store

__all__ = [
    "app",
    "main",
    "resume_without_id",
]

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


def main() -> None:
    """Console-script entry point: every `LaminaError` ends as one line and its exit code."""
    from lamina.errors import LaminaError

    try:
        app(args=resume_without_id(sys.argv[1:]))
    except LaminaError as exc:
        from lamina.cli._console import abort

        try:
            abort(str(exc))
        except typer.Exit as done:
            sys.exit(done.exit_code)


def resume_without_id(args: list[str]) -> list[str]:
    """`chat --resume` with no id (last, or followed by an option) becomes `--resume ''`: the picker."""
    fixed = list(args)
    for i, arg in enumerate(fixed):
        if arg == "--resume" and (i + 1 == len(fixed) or fixed[i + 1].startswith("-")):
            fixed.insert(i + 1, "")
            break
    return fixed
