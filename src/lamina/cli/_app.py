"""The `lamina` command's typer application: its commands, the root options and the run (I/O).

Imported by `lamina.cli.main` once the `cli` extra is known to be installed, and by `lamina.cli.app`.
Each command's module is imported when that command runs (or its help is asked for): the root's help
lists the commands from `_COMMANDS`, so `lamina --help` imports no command module, and no rich.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from lamina.errors import MissingExtraError

try:
    import typer
except ImportError as exc:
    raise MissingExtraError.of(exc, "the lamina command", "cli") from None

import typer.main
from typer.core import TyperGroup, TyperOption


@dataclass(frozen=True, slots=True)
class _Command:
    """Where one of the root's commands lives, and the line the root's help shows for it."""

    module: str
    attribute: str
    """A command function, or (`group`) a `typer.Typer` of subcommands."""
    summary: str
    """The first line of the command's own help."""
    group: bool = False


_COMMANDS: Final = {
    "context": _Command(
        "lamina.cli._context",
        "show_context",
        "Show what a new session here would send: parts, tiers, tokens, context files and cache layout.",
    ),
    "chat": _Command(
        "lamina.cli._chat",
        "chat",
        "Chat with an agent in the current directory (API keys from the usual environment variables).",
    ),
    "run": _Command(
        "lamina.cli._run",
        "run",
        "Run one turn without a prompt and print the answer (or JSON); exit non-zero on failure.",
    ),
    "serve": _Command(
        "lamina.cli._serve",
        "serve",
        "Inspect stored sessions in the browser: timeline, branches, compactions, plans, each request's layers.",
    ),
    "demo": _Command(
        "lamina.cli._app",
        "demo",
        "Run the scripted demo session in a sample workspace: no API key, nothing to start (`make run`).",
    ),
    "models": _Command(
        "lamina.cli._model_info",
        "models",
        "Show what the model can do (window, output limit, context features) and where that came from.",
    ),
    "sessions": _Command("lamina.cli._sessions_commands", "app", "List, show and manage stored sessions.", group=True),
    "config": _Command("lamina.cli._config", "app", "Show the settings of `lamina chat` and `lamina run`.", group=True),
    "store": _Command(
        "lamina.cli._store_commands",
        "app",
        "Manage the session store itself (PostgreSQL schema migrations).",
        group=True,
    ),
    "proxy": _Command(
        "lamina.cli._proxy",
        "app",
        "Run the proxy in front of Claude Code, Codex, pi, aider or opencode: each conversation a Lamina session.",
        group=True,
    ),
    "trust": _Command(
        "lamina.cli._trust_commands",
        "trust",
        "Trust a workspace: its sources may start and its .lamina/config.toml applies in full (docs/security.md).",
    ),
}
"""The root's commands in the order its help lists them."""


class _Commands(MutableMapping[str, Any]):
    """The root's commands by name, each built (its module imported) when first looked up."""

    def __init__(self) -> None:
        self._names = dict.fromkeys(_COMMANDS)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._built:
            self._built[name] = _build(name, _COMMANDS[name])
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._names[name] = None
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._names[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def summary(self, name: str) -> str:
        """The line the root's help shows for `name`, without building it when it is one of `_COMMANDS`."""
        known = _COMMANDS.get(name)
        if known is not None and name not in self._built:
            return known.summary
        return str(self[name].get_short_help_str(limit=200))


def _build(name: str, command: _Command) -> Any:
    """The click command for `command`: its module imported, its help printed as written."""
    target = getattr(importlib.import_module(command.module), command.attribute)
    if command.group:
        built: Any = typer.main.get_group(target)
        built.name = name
    else:
        single = typer.Typer(add_completion=False, rich_markup_mode=None)
        single.command(name)(target)
        built = typer.main.get_command(single)
    built.short_help = command.summary
    _plain_help(built)
    return built


def _plain_help(command: Any) -> None:
    """Help of `command` and its subcommands as plain text, without rich: texts as written, flags without `<bool>`.

    A subcommand's line in its group's help is its help's first paragraph, whole (click would cut it).
    """
    command.rich_markup_mode = None
    _blank_flags(command.params)
    for sub in getattr(command, "commands", {}).values():
        if sub.short_help is None and sub.help:
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        _plain_help(sub)


def _blank_flags(params: list[Any]) -> None:
    """Flags take no value: an empty metavar instead of typer's `<bool>`."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class _LazyGroup(TyperGroup):
    """The root group: its commands built on first use, its help listing them from `_COMMANDS`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = self.commands = _Commands()

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        """The commands' names, in `_COMMANDS`' order; none is built."""
        return list(self.commands)

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        """The help's `Commands` section, from each command's summary (its module is not imported)."""
        rows = [(name, self.lazy.summary(name)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_params(self, ctx: typer.Context) -> list[Any]:  # type: ignore[override]
        """The root's parameters, the completion options typer adds after `__init__` included."""
        params = super().get_params(ctx)
        _blank_flags(params)
        return params


app = typer.Typer(
    name="lamina",
    cls=_LazyGroup,
    help="Lamina: a context engine for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def demo(
    ctx: typer.Context,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the temporary session store (to inspect it with lamina serve).")
    ] = False,
) -> None:
    """Run the scripted demo session in a sample workspace: no API key, nothing to start (`make run`)."""
    from lamina.cli._demo import main as run_demo

    raise typer.Exit(run_demo(ctx.obj["store"], keep=keep))


def _version(value: bool) -> None:
    if value:
        from lamina.cli._version import version_line

        typer.echo(version_line())
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
