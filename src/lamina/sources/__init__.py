"""Sources: MCP servers and HTTP APIs as tools, each with a guide the model reads first (F9).

A source lives in `sources/<slug>/` of the workspace: `source.toml` says how to reach it and
`guide.md` says how to use it. Its tools are named `<slug>__<tool>` and carry one-sentence
descriptions that point at the guide, so the guide can change without changing any tool spec.
"""

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
from lamina.sources.mcp import McpConnection, McpTool, SourceConnectionError
from lamina.sources.tool import MAX_DESCRIPTION, SourceTool, short_description, tool_name

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
