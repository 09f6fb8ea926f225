"""`lamina models`: what the configured model can do, and where the figures came from (I/O: network, disk).

The capabilities a chat would use: the models endpoint's answer (Anthropic's, cached with its date in the
user's cache folder; an OpenAI-compatible server's window), else the shipped table, else the defaults,
with the settings' `context_window` over them. `--offline` reads no endpoint. docs/providers.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from lamina.cli._console import JsonOption

_FEATURES = (
    ("thinking", "thinking"),
    ("vision", "images"),
    ("pdf_input", "PDFs"),
    ("cache_diagnostics", "cache diagnostics"),
    ("tool_search", "tool search"),
    ("tool_changes", "tool changes"),
    ("system_clear_at", "system clear_at"),
)


def models(
    spec: Annotated[
        str | None,
        typer.Argument(help="A provider spec (anthropic:MODEL, openai:MODEL, ...); default: the configured model."),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Read no models endpoint: the cache is not read either.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show what the model can do (window, output limit, context features) and where that came from."""
    from lamina.cli._config import load_settings
    from lamina.cli._console import abort, out, print_json, safe
    from lamina.cli._session import close_provider, make_provider
    from lamina.errors import LaminaError
    from lamina.providers import Capabilities, Provider, discover_capabilities
    from lamina.workspace import workspace_trust

    workspace = Path.cwd()
    settings = load_settings(workspace, trust=workspace_trust(workspace))
    chosen = spec or settings.model
    try:
        provider = make_provider(chosen, settings, require_key=False)
    except LaminaError as exc:
        abort(str(exc))

    async def read(provider: Provider) -> Capabilities:
        try:
            return provider.capabilities if offline else await discover_capabilities(provider)
        finally:
            await close_provider(provider)

    found = asyncio.run(read(provider))
    if as_json:
        print_json({"model": chosen, **_json(found)})
        return
    out.print(f"model     {safe(chosen)}")
    out.print(f"source    {safe(found.source or 'defaults')}")
    out.print(f"window    {found.context_window:,} tokens")
    out.print(f"output    {found.max_output_tokens:,} tokens")
    out.print(f"cache     {found.cache_regime}")
    out.print(f"editing   {', '.join(sorted(found.context_editing)) or 'none'}")
    out.print(f"compacts  {', '.join(sorted(found.server_compaction)) or 'none'}")
    has = [label for field, label in _FEATURES if getattr(found, field)]
    out.print(f"has       {', '.join(has) or 'none of the context features'}")


def _json(found: Any) -> dict[str, object]:
    fields = dataclasses.asdict(found)
    return {name: sorted(value) if isinstance(value, frozenset) else value for name, value in fields.items()}
