"""`lamina context [PATH]`: what an agent starting a session here would be sent, part by part.

The report itself lives in `_context_report` and is imported when the command runs, so
`lamina --help` does not load the engine.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer


class Provider(StrEnum):
    """Which request format to show."""

    anthropic = "anthropic"
    openai = "openai"
    sdk = "sdk"


def show_context(
    path: Annotated[
        Path, typer.Argument(help="The working directory (default: the current one).", metavar="PATH")
    ] = Path("."),
    provider: Annotated[
        Provider, typer.Option("--provider", help="The request format to render.")
    ] = Provider.anthropic,
    preset: Annotated[
        str | None, typer.Option("--preset", help="System prompt preset: default, mini or custom.", show_default=False)
    ] = None,
    custom_preset: Annotated[
        Path | None, typer.Option("--custom-preset", help="TOML file of the custom preset (implies --preset custom).")
    ] = None,
    show_text: Annotated[bool, typer.Option("--text", help="Also print the full text of every part.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")] = False,
) -> None:
    """Show what a new session here would send: parts, tiers, tokens, context files and cache layout."""
    from lamina.cli import _context_report

    _context_report.show_context(path, provider, preset, custom_preset, show_text=show_text, as_json=as_json)
