"""The `tools` array of a request whose source tools are deferred, per request format (pure).

A `ToolSpec` marked `deferred` goes out with `defer_loading: true` and the format's tool-search tool
(Anthropic's `tool_search_tool_bm25_20251119` or `_regex_`, Responses' `{"type": "tool_search"}`), so
the model loads its schema only through a search's `tool_reference`. Chat Completions has no tool
search: a deferred spec reaching it is sent whole (the agent gives it Lamina's catalogue instead).
The search blocks a response returns go back unchanged as `server_tool` reasoning blocks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

from lamina.context import ReasoningBlock, ToolSpec

ToolSearch: TypeAlias = Literal["bm25", "regex"]
"""Which of Anthropic's tool-search tools a request with deferred tools carries."""

ANTHROPIC_SEARCH_TOOLS: Final[dict[ToolSearch, dict[str, str]]] = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
RESPONSES_SEARCH_TOOL: Final = {"type": "tool_search", "execution": "server"}


def anthropic_tools(tools: Sequence[ToolSpec], search: ToolSearch) -> list[dict[str, Any]]:
    """The Messages API's `tools`: each definition in order, then the search tool when one is deferred."""
    out: list[dict[str, Any]] = []
    for t in tools:
        tool: dict[str, Any] = {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
        if t.deferred:
            tool["defer_loading"] = True
        out.append(tool)
    if any(t.deferred for t in tools):
        out.append(dict(ANTHROPIC_SEARCH_TOOLS[search]))
    return out


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The Responses API's `tools`: function tools in order, then the hosted tool search when one is deferred."""
    out: list[dict[str, Any]] = []
    for t in tools:
        tool: dict[str, Any] = {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.input_schema),
            "strict": False,
        }
        if t.deferred:
            tool["defer_loading"] = True
        out.append(tool)
    if any(t.deferred for t in tools):
        out.append(dict(RESPONSES_SEARCH_TOOL))
    return out


def server_tool_block(block: ReasoningBlock) -> dict[str, Any] | None:
    """A kept server tool block as the request sends it back (its JSON as returned); None for real reasoning."""
    if block.reasoning.kind != "server_tool":
        return None
    value = json.loads(block.reasoning.data)
    return value if isinstance(value, dict) else None
