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
    from lamina.sources._api import ApiConnection
    from lamina.sources._connections import ConnectionProblem, SourceConnections
    from lamina.sources._guide import calls_to_source, guide_path
    from lamina.sources._mcp import McpConnection
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
        slug_problem,
    )
    from lamina.sources._tool import SourceTool

# Loaded on first use (PEP 562): the MCP SDK takes about half a second to import, and most
# sessions connect no MCP server.
_LAZY: Final = {
    "ApiConnection": "lamina.sources._api",
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
    "ConnectionProblem": "lamina.sources._connections",
    "SourceConnections": "lamina.sources._connections",
    "calls_to_source": "lamina.sources._guide",
    "guide_path": "lamina.sources._guide",
    "McpConnection": "lamina.sources._mcp",
    "SourceConnectionError": "lamina.errors",
    "SourceTool": "lamina.sources._tool",
}


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY, name)


__all__ = [
    "ApiConnection",
    "ApiEndpoint",
    "ApiSource",
    "ConnectionProblem",
    "McpConnection",
    "McpHttp",
    "McpSource",
    "McpStdio",
    "Source",
    "SourceConnectionError",
    "SourceConnections",
    "SourceProblem",
    "SourceScan",
    "SourceTool",
    "calls_to_source",
    "describe_source",
    "find_sources",
    "guide_path",
    "slug_problem",
]
