"""`lamina trust`: trust a workspace, list, revoke; and what chat and run say about an untrusted one (I/O).

An untrusted workspace's sources do not start and its `.lamina/config.toml` only narrows
(`lamina.cli._config`). `lamina chat` asks once, in a terminal, when the workspace would configure
something; `lamina run` and a piped chat say in one line what was not applied. docs/security.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from lamina.cli._console import JsonOption, abort, err, out, print_json, safe

if TYPE_CHECKING:
    from lamina.cli._config import Settings, Withheld
    from lamina.sources import Source

TRUST_OPTION_HELP: Final = (
    "Trust this workspace for this run only: its sources start and its whole .lamina/config.toml applies "
    "(`lamina trust` remembers it)."
)
_PRESET_LINES: Final = 12
"""Lines of a withheld custom preset file the trust question shows."""
_PRESET_CHARS: Final = 1_500


@dataclass(frozen=True, slots=True)
class Untrusted:
    """What an untrusted workspace would configure if the user trusted it."""

    workspace: Path
    settings: tuple[Withheld, ...]
    """Its config file's settings that were withheld."""
    sources: tuple[Source, ...]
    """Its sources, none of which starts."""

    @property
    def items(self) -> tuple[str, ...]:
        """One line each: the sources (what they run or reach), then the settings."""
        from lamina.sources import describe_source

        return (*(describe_source(source) for source in self.sources), *(str(held) for held in self.settings))

    def notice(self) -> str:
        """The one line `lamina run` (and a chat that cannot ask) prints: what was not applied."""
        return (
            f"workspace not trusted, so only your own settings apply; not applied: {'; '.join(self.items)} "
            "(`lamina trust` trusts it, --trust for one run)"
        )

    def json(self) -> dict[str, object]:
        """The `trust` field of `lamina run --json`."""
        return {"trusted": False, "not_applied": list(self.items)}


def untrusted_config(workspace: Path, settings: Settings) -> Untrusted | None:
    """What the workspace would configure if trusted; None when it is trusted or would configure nothing."""
    from lamina.sources import find_sources

    if settings.trust.trusted:
        return None
    sources = find_sources(workspace).sources  # read only: an untrusted source never starts
    if not sources and not settings.withheld:
        return None
    return Untrusted(workspace, settings.withheld, sources)


def ask_to_trust(untrusted: Untrusted) -> bool:
    """Show what trusting the workspace would allow and ask; True when the user trusts it (then it is recorded).

    Raises:
        ConfigError: The trust file cannot be written.
    """
    from lamina.sources import describe_source
    from lamina.workspace import trust_workspace

    err.print(f"[yellow]This folder is not trusted:[/yellow] {safe(untrusted.workspace)}")
    err.print("Trusted, it would configure:")
    for source in untrusted.sources:
        err.print(f"  · {safe(describe_source(source))}")
    for held in untrusted.settings:
        err.print(f"  · {safe(held)}")
        if held.key == "preset_file":  # the text it would put into the system prompt
            _print_preset(Path(held.value))
    err.print("[dim]Trust only a folder whose files you trust: they can run commands and use your keys.[/dim]")
    if not typer.confirm("Trust this folder?", default=False, err=True):
        err.print("[dim]not trusted: this session uses your own settings only[/dim]")
        return False
    entry = trust_workspace(untrusted.workspace)
    err.print(f"[dim]trusted {safe(entry.path)} (`lamina trust --revoke` undoes it)[/dim]")
    return True


def _print_preset(path: Path) -> None:
    """The first lines of a custom preset file the workspace would put into the system prompt."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:_PRESET_CHARS]
    except OSError as exc:
        err.print(f"    [dim](cannot read {safe(path)}: {safe(exc.strerror or exc)})[/dim]")
        return
    lines = text.splitlines()
    for line in lines[:_PRESET_LINES]:
        err.print(f"    [dim]│[/dim] {safe(line)}")
    if len(lines) > _PRESET_LINES:
        err.print("    [dim]│ …[/dim]")


def trust(
    path: Annotated[
        Path | None, typer.Argument(help="The folder to trust (default: the current one).", show_default=False)
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the trusted folders.")] = False,
    revoke: Annotated[
        Path | None, typer.Option("--revoke", help="Stop trusting this folder.", metavar="PATH", show_default=False)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Trust a workspace: its sources may start and its .lamina/config.toml applies in full (docs/security.md)."""
    from lamina.errors import LaminaError
    from lamina.workspace import revoke_trust, trust_workspace, trusted_workspaces

    if sum((list_, revoke is not None, path is not None)) > 1:
        abort("give a PATH to trust, --list or --revoke PATH: one of them", 2)
    try:
        if list_:
            listed = trusted_workspaces()
            if as_json:
                print_json([{"path": w.path, "trusted_at": w.trusted_at.isoformat()} for w in listed])
            for workspace in () if as_json else listed:
                out.print(f"{safe(workspace.path)}  [dim]since {workspace.trusted_at:%Y-%m-%d %H:%M} UTC[/dim]")
            if not listed and not as_json:
                err.print("[dim]no trusted folders[/dim]")
            return
        if revoke is not None:
            if not revoke_trust(revoke):
                abort(f"{revoke} was not trusted (`lamina trust --list` lists the trusted folders)")
            _done(as_json, "revoked", revoke.resolve(), f"no longer trusted: {safe(revoke.resolve())}")
            return
        entry = trust_workspace(path or Path.cwd())
    except LaminaError as exc:
        abort(str(exc))
    _done(as_json, "trusted", entry.path, f"trusted {safe(entry.path)}: its sources may start, its config applies")
    if not as_json:
        for item in _unlocked(entry.path):
            out.print(f"  · {safe(item)}")


def _unlocked(workspace: Path) -> tuple[str, ...]:
    """What trusting `workspace` lets it configure (nothing when its config file cannot be read)."""
    from lamina.cli._config import load_settings
    from lamina.errors import ConfigError
    from lamina.workspace import WorkspaceTrust

    try:
        untrusted = untrusted_config(workspace, load_settings(workspace, trust=WorkspaceTrust.UNTRUSTED))
    except ConfigError as exc:
        err.print(f"[yellow]warning:[/yellow] {safe(exc)}")
        return ()
    return () if untrusted is None else untrusted.items


def _done(as_json: bool, what: str, path: Path, line: str) -> None:
    if as_json:
        print_json({what: path})
    else:
        out.print(line)
