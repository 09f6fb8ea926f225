"""Sources: MCP servers and HTTP APIs as tools, each with a guide the model reads first (F9; I/O: subprocess, network).

A source lives in `sources/<slug>/` of the workspace: `source.toml` says how to reach it and
`guide.md` says how to use it. Its tools are named `<slug>__<tool>` and carry one-sentence
descriptions that point at the guide, so the guide can change without changing any tool spec.
MCP sources need the `mcp` extra, API sources the `http` extra (else a `ConnectionProblem` names it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.errors import SourceConnectionError
    from lamina.sources._api import ApiConnection, ApiTool
    from lamina.sources._connections import ConnectionProblem, SourceConnections, connect_sources
    from lamina.sources._guide import calls_to_source, guide_path, source_of
    from lamina.sources._mcp import McpConnection, McpTool
    from lamina.sources._source_config import (
        ApiEndpoint,
        ApiSource,
        McpHttp,
        McpSource,
        McpStdio,
        Source,
        SourceProblem,
        SourceScan,
        describe_source,
        find_sources,
        load_source,
        slug_problem,
    )
    from lamina.sources._tool import MAX_DESCRIPTION, SourceTool, short_description, tool_name

# Loaded on first use (PEP 562): the MCP SDK takes about half a second to import, and most
# sessions connect no MCP server.
_LAZY: Final = {
    "ApiConnection": "lamina.sources._api",
    "ApiTool": "lamina.sources._api",
    "ApiEndpoint": "lamina.sources._source_config",
    "ApiSource": "lamina.sources._source_config",
    "McpHttp": "lamina.sources._source_config",
    "McpSource": "lamina.sources._source_config",
    "McpStdio": "lamina.sources._source_config",
    "Source": "lamina.sources._source_config",
    "SourceProblem": "lamina.sources._source_config",
    "SourceScan": "lamina.sources._source_config",
    "slug_problem": "lamina.sources._source_config",
    "describe_source": "lamina.sources._source_config",
    "find_sources": "lamina.sources._source_config",
    "load_source": "lamina.sources._source_config",
    "ConnectionProblem": "lamina.sources._connections",
    "SourceConnections": "lamina.sources._connections",
    "connect_sources": "lamina.sources._connections",
    "calls_to_source": "lamina.sources._guide",
    "guide_path": "lamina.sources._guide",
    "source_of": "lamina.sources._guide",
    "McpConnection": "lamina.sources._mcp",
    "McpTool": "lamina.sources._mcp",
    "SourceConnectionError": "lamina.errors",
    "MAX_DESCRIPTION": "lamina.sources._tool",
    "SourceTool": "lamina.sources._tool",
    "short_description": "lamina.sources._tool",
    "tool_name": "lamina.sources._tool",
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
    "describe_source",
    "find_sources",
    "guide_path",
    "load_source",
    "short_description",
    "slug_problem",
    "source_of",
    "tool_name",
]
