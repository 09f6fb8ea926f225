"""`lamina context`: the command's options; the reports are imported when it runs (I/O).

`lamina context [PATH]`: what an agent starting a session here would be sent, part by part;
`lamina context --session ID`: what a stored session's requests were made of, component by
component. The reports live in `_context_report` and `_session_report`, imported when the command
runs, so `lamina --help` does not load the engine.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from lamina.cli._console import JsonOption


class RequestFormat(StrEnum):
    """Which request format to show."""

    anthropic = "anthropic"
    openai = "openai"
    sdk = "sdk"


def show_context(
    ctx: typer.Context,
    path: Annotated[
        Path, typer.Argument(help="The working directory (default: the current one).", metavar="PATH")
    ] = Path("."),
    provider: Annotated[
        RequestFormat, typer.Option("--provider", help="The request format to render.")
    ] = RequestFormat.anthropic,
    preset: Annotated[
        str | None, typer.Option("--preset", help="System prompt preset: default, mini or custom.", show_default=False)
    ] = None,
    custom_preset: Annotated[
        Path | None, typer.Option("--custom-preset", help="TOML file of the custom preset (implies --preset custom).")
    ] = None,
    show_text: Annotated[bool, typer.Option("--text", help="Also print the full text of every part.")] = False,
    as_json: JsonOption = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Instead: the composition of a stored session's requests (tokens per component, per request "
            "and summed).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show what a new session here would send: parts, tiers, tokens, context files and cache layout.

    With --session ID: what each request of that stored session was made of (system sections, tool
    definitions, project parts, tails, tool results and their framing, history), and the sums.
    """
    if session is not None:
        from lamina.cli._session_report import show_session

        store: str | None = (ctx.find_root().obj or {}).get("store")
        show_session(store, session, as_json=as_json)
        return
    from lamina.cli._context_report import show_context

    show_context(path, provider, preset, custom_preset, show_text=show_text, as_json=as_json)
