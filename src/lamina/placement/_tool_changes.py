"""Mid-session tool changes: `tool_addition` / `tool_removal` blocks instead of a new `tools` array (pure).

The log records each version of the tool definitions as a `tools` state change (`lamina.engine`).
A request's `tools` is the set of its window's first change (or of the latest one recorded as a
rewrite); where the model takes tool changes (`AnthropicTarget.tool_changes`), every later change
goes as blocks at the end of the user message after it: a removal by reference, an addition (or a
changed definition) inline. Rebuilt from the log each request, so a resumed session sends the same
blocks. Elsewhere the request sends the latest set whole. docs/providers.md, "Deferred tools".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.placement._call_ids import anthropic_call_id
from lamina.placement._tool_search import anthropic_tools
from lamina.session import LogEntry, StateChange, ToolResult, UserMessage

TOOL_CHANGES_BETA: Final = "mid-conversation-tool-changes-2026-07-01"
"""The `anthropic-beta` value a body with `tool_addition` / `tool_removal` blocks needs."""
INLINE_TOOLS_BETA: Final = "inline-tools-2026-09-15"
"""The `anthropic-beta` value a `tool_addition` carrying its definition inline needs."""


def recorded_tools(change: StateChange) -> tuple[ToolSpec, ...] | None:
    """The tool definitions a `tools` state change records (None: not a readable `tools` change).

    Args:
        change: A state change from the log.

    Returns:
        The definitions, as the requests from that change on sent them; None for any other change,
        or a hand-edited one whose schema is not a JSON object.
    """
    if change.key != "tools":
        return None
    specs: list[ToolSpec] = []
    for tool in change.tools:
        try:
            schema = json.loads(tool.input_schema)
        except ValueError:
            return None
        if not isinstance(schema, dict):
            return None
        # texts Lamina checked (and neutralised) itself before the first request sent them
        specs.append(ToolSpec(tool.name, trusted(tool.description), schema, deferred=tool.deferred))
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class ToolChange:
    """The blocks one change of the tool set adds to a user message, and where."""

    at: int
    """The index, in the entries given, of the user message or tool result the blocks go with."""
    blocks: tuple[dict[str, Any], ...]


def _versions(entries: Sequence[LogEntry]) -> list[tuple[int, tuple[ToolSpec, ...], bool]]:
    """The readable `tools` changes of `entries`: index, definitions, whether it rewrote the array."""
    found = []
    for i, entry in enumerate(entries):
        tools = recorded_tools(entry) if isinstance(entry, StateChange) else None
        if tools is not None and isinstance(entry, StateChange):
            found.append((i, tools, entry.tools_rewritten is True))
    return found


def request_tools(
    entries: Sequence[LogEntry], turn_tools: Sequence[ToolSpec], *, from_index: int
) -> tuple[ToolSpec, ...]:
    """The definitions a request sends whole: the latest `tools` change at or after `from_index`, else `turn_tools`."""
    later = [tools for i, tools, _ in _versions(entries) if i >= from_index]
    return later[-1] if later else tuple(turn_tools)


def tool_changes(
    entries: Sequence[LogEntry], turn_tools: Sequence[ToolSpec]
) -> tuple[tuple[ToolSpec, ...], list[ToolChange]]:
    """The `tools` array and the change blocks of a request over `entries`, for a model with tool changes.

    Args:
        entries: The request's provider view (the turn's history and its tool loop so far).
        turn_tools: The turn's definitions (the array when `entries` record none).

    Returns:
        The base definitions (the window's first set, or the latest rewrite), and each later change's blocks.
    """
    versions = _versions(entries)
    if not versions:
        return tuple(turn_tools), []
    start = max(n for n, (_, _, rewritten) in enumerate(versions) if n == 0 or rewritten)
    base = versions[start][1]
    changes: list[ToolChange] = []
    previous = base
    for i, tools, _ in versions[start + 1 :]:
        at = next((j for j in range(i + 1, len(entries)) if isinstance(entries[j], UserMessage | ToolResult)), None)
        blocks = change_blocks(previous, tools)
        if blocks and at is not None:
            changes.append(ToolChange(at, blocks))
        previous = tools
    return base, changes


def change_blocks(before: Sequence[ToolSpec], after: Sequence[ToolSpec]) -> tuple[dict[str, Any], ...]:
    """The blocks that turn the tool set `before` into `after`: removals by name, then additions inline."""
    old = {t.name: _definition(t) for t in before}
    new = {t.name: _definition(t) for t in after}
    removed = [n for n in old if n not in new or new[n] != old[n]]
    added = [n for n in new if old.get(n) != new[n]]
    return (
        *({"type": "tool_removal", "tool": {"type": "tool_reference", "name": n}} for n in removed),
        *({"type": "tool_addition", "tool": {"type": "tool_definition", "definition": new[n]}} for n in added),
    )


def _definition(tool: ToolSpec) -> dict[str, Any]:
    return anthropic_tools([tool], "bm25")[0]


def with_change_blocks(
    wire: list[dict[str, Any]], entries: Sequence[LogEntry], changes: Sequence[ToolChange], *, prelude: int
) -> list[dict[str, Any]]:
    """`wire` with each change's blocks at the end of its user message (changed messages are copies).

    Args:
        wire: The request's messages (`prelude` of them before the view's).
        entries: The view the messages were converted from.
        changes: The blocks and the entries they go with.
        prelude: How many messages come before the view's (a compaction block, the summary).

    Returns:
        The messages with the blocks placed.
    """
    out = list(wire)
    for change in changes:
        index = _message_of(out, entries, change.at, prelude)
        if index is not None:
            out[index] = {**out[index], "content": [*out[index]["content"], *change.blocks]}
    return out


def _message_of(wire: Sequence[dict[str, Any]], entries: Sequence[LogEntry], at: int, prelude: int) -> int | None:
    """The wire message holding entry `at`: its tool result's, or the k-th user message with more than results."""
    entry = entries[at]
    if isinstance(entry, ToolResult):
        wanted = anthropic_call_id(entry.call_id)
        return next(
            (
                i
                for i, m in enumerate(wire)
                if m["role"] == "user" and any(b.get("tool_use_id") == wanted for b in m["content"])
            ),
            None,
        )
    k = sum(1 for e in entries[: at + 1] if isinstance(e, UserMessage))
    typed = [
        i
        for i, m in enumerate(wire)
        if i >= prelude and m["role"] == "user" and any(b.get("type") != "tool_result" for b in m["content"])
    ]
    return typed[k - 1] if 0 < k <= len(typed) else None


def tool_change_betas(body: Any) -> list[str]:
    """The `anthropic-beta` values `body`'s tool changes need (none without a change block)."""
    kinds = [
        (block.get("type"), block.get("tool", {}).get("type"))
        for message in body.get("messages") or ()
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") in ("tool_addition", "tool_removal")
    ]
    if not kinds:
        return []
    inline = any(tool == "tool_definition" for _, tool in kinds)
    return [TOOL_CHANGES_BETA, INLINE_TOOLS_BETA] if inline else [TOOL_CHANGES_BETA]
