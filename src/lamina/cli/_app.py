"""The `lamina` command's typer application: its commands, the root options and the run (I/O).

Imported by `lamina.cli.main` once the `cli` extra is known to be installed, and by `lamina.cli.app`.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

from lamina.errors import MissingExtraError

try:
    import typer
except ImportError as exc:
    raise MissingExtraError.of(exc, "the lamina command", "cli") from None

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from lamina.cli import _chat as chat
from lamina.cli import _config as config
from lamina.cli import _context as context
from lamina.cli import _run as run
from lamina.cli import _serve as serve
from lamina.cli import _sessions as sessions
from lamina.cli import _store as store
from lamina.cli import _trust as trust
from lamina.cli._console import safe


class _LiteralHelpGroup(TyperGroup):
    """The root group: every help text of the tree prints literally, and flags show no `<bool>`.

    Typer renders help texts as Rich markup (`[skill:NAME]` would vanish as a style tag) and shows a
    type after every option, flags included; the tree is fixed once, when typer builds it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _literal_help(self)

    def get_params(self, ctx: typer.Context) -> list[Any]:  # type: ignore[override]
        """The root's parameters, the completion options typer adds after `__init__` included."""
        params = super().get_params(ctx)
        _blank_flags(params)
        return params


def _literal_help(command: TyperCommand | TyperGroup) -> None:
    """Escape the help texts of `command` and of its subcommands, and blank their flags' metavars."""
    for attribute in ("help", "short_help", "epilog"):
        text = getattr(command, attribute)
        if isinstance(text, str):
            setattr(command, attribute, safe(text))
    params = [*command.params, command.get_help_option(typer.Context(command))]
    _blank_flags(params)
    for param in params:
        if isinstance(param, TyperOption | TyperArgument) and param.help:
            param.help = safe(param.help)
    for sub in getattr(command, "commands", {}).values():
        if isinstance(sub, TyperCommand | TyperGroup):
            _literal_help(sub)


def _blank_flags(params: list[Any]) -> None:
    """Flags take no value: an empty metavar instead of typer's `<bool>`."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


app = typer.Typer(
    name="lamina",
    cls=_LiteralHelpGroup,
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
app.command("trust")(trust.trust)


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
