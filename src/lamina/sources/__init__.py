"""Sources: MCP servers and HTTP APIs as tools, each with a guide the model reads first (F9).

A source lives in `sources/<slug>/` of the workspace: `source.toml` says how to reach it and
`guide.md` says how to use it. Its tools are named `<slug>__<tool>` and carry one-sentence
descriptions that point at the guide, so the guide can change without changing any tool spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.errors import SourceConnectionError
    from lamina.sources.api import ApiConnection, ApiTool
    from lamina.sources.config import (
        ApiEndpoint,
        ApiSource,
        McpHttp,
        McpSource,
        McpStdio,
        Source,
        SourceProblem,
        SourceScan,
        find_sources,
        load_source,
    )
    from lamina.sources.connections import ConnectionProblem, SourceConnections, connect_sources
    from lamina.sources.guide import calls_to_source, guide_path, source_of
    from lamina.sources.mcp import McpConnection, McpTool
    from lamina.sources.tool import MAX_DESCRIPTION, SourceTool, short_description, tool_name

# Loaded on first use (PEP 562): the MCP SDK takes about half a second to import, and most
# sessions connect no MCP server.
_LAZY: Final = {
    "ApiConnection": "lamina.sources.api",
    "ApiTool": "lamina.sources.api",
    "ApiEndpoint": "lamina.sources.config",
    "ApiSource": "lamina.sources.config",
    "McpHttp": "lamina.sources.config",
    "McpSource": "lamina.sources.config",
    "McpStdio": "lamina.sources.config",
    "Source": "lamina.sources.config",
    "SourceProblem": "lamina.sources.config",
    "SourceScan": "lamina.sources.config",
    "find_sources": "lamina.sources.config",
    "load_source": "lamina.sources.config",
    "ConnectionProblem": "lamina.sources.connections",
    "SourceConnections": "lamina.sources.connections",
    "connect_sources": "lamina.sources.connections",
    "calls_to_source": "lamina.sources.guide",
    "guide_path": "lamina.sources.guide",
    "source_of": "lamina.sources.guide",
    "McpConnection": "lamina.sources.mcp",
    "McpTool": "lamina.sources.mcp",
    "SourceConnectionError": "lamina.errors",
    "MAX_DESCRIPTION": "lamina.sources.tool",
    "SourceTool": "lamina.sources.tool",
    "short_description": "lamina.sources.tool",
    "tool_name": "lamina.sources.tool",
}


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY, name)


__all__ = [
    "MAX_DESCRIPTION",
    "ApiConnection",
    "ApiEndpoint",
    "ApiSource",
    "ApiTool",
    "ConnectionProblem",
    "McpConnection",
    "McpHttp",
    "McpSource",
    "McpStdio",
    "McpTool",
    "Source",
    "SourceConnectionError",
    "SourceConnections",
    "SourceProblem",
    "SourceScan",
    "SourceTool",
    "calls_to_source",
    "connect_sources",
    "find_sources",
    "guide_path",
    "load_source",
    "short_description",
    "source_of",
    "tool_name",
]
