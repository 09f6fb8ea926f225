"""Anthropic context editing in a request body: the `context_management.edits` list (pure).

Built from the log alone, so a replay renders the same body: the server's clearing a prune chose
(`ToolOutputPruned.server`) goes on every later request as a `clear_tool_uses_20250919` edit that
keeps the tool uses after the prune's newest one, and with reasoning on, `clear_thinking_20251015`
says how many turns' thinking the server keeps. Others append their own edits (`context_management`
orders and checks the list). Described in docs/providers.md ("Context editing").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from lamina.errors import UsageError
from lamina.placement._targets import AnthropicTarget
from lamina.session import LogEntry, ServerClearing, ToolCall, ToolOutputPruned

CONTEXT_MANAGEMENT_BETA: Final = "context-management-2025-06-27"
"""The `anthropic-beta` value a body with `context_management` needs."""
CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
CLEAR_THINKING: Final = "clear_thinking_20251015"
_COMPACT: Final = "compact_20260112"
SERVER_CLEARED_NOTE: Final = "[cleared to save context]"
"""What a result the server cleared shows the model (the inspector and the replay show it so)."""


def clear_tool_uses_edit(
    *, keep: int, clear_at_least: int = 0, exclude_tools: Sequence[str] = (), clear_tool_inputs: bool = False
) -> dict[str, Any]:
    """A `clear_tool_uses_20250919` edit that clears every tool use but the newest `keep` (its trigger always met)."""
    edit: dict[str, Any] = {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": keep},
    }
    if clear_at_least > 0:
        edit["clear_at_least"] = {"type": "input_tokens", "value": clear_at_least}
    if exclude_tools:
        edit["exclude_tools"] = list(exclude_tools)
    if clear_tool_inputs:
        edit["clear_tool_inputs"] = True
    return edit


def clear_thinking_edit(keep: int | Literal["all"]) -> dict[str, Any]:
    """A `clear_thinking_20251015` edit keeping the newest `keep` turns' thinking (`all`: every turn's, cache kept)."""
    if keep == "all":
        return {"type": CLEAR_THINKING, "keep": "all"}
    return {"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": keep}}


def context_management(edits: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The body's `context_management` for `edits` (None: no edit), `clear_thinking` first as the API asks.

    Raises:
        UsageError: Two edits of one type, or `clear_tool_uses` beside server compaction (`compact_20260112`).
    """
    listed = [dict(e) for e in edits]
    kinds = [e.get("type") for e in listed]
    if len(set(kinds)) != len(kinds):
        raise UsageError(f"context_management: an edit type is listed twice ({', '.join(map(str, kinds))})")
    if CLEAR_TOOL_USES in kinds and _COMPACT in kinds:
        raise UsageError(f"context_management: {CLEAR_TOOL_USES} is never sent with server compaction ({_COMPACT})")
    if not listed:
        return None
    listed.sort(key=lambda e: e.get("type") != CLEAR_THINKING)  # stable: the rest keep their order
    return {"edits": listed}


def server_clearing(entries: Sequence[LogEntry]) -> tuple[frozenset[str], ServerClearing | None]:
    """The calls the server clears in a view (every server prune's), and the latest prune's settings."""
    cleared: set[str] = set()
    latest: ServerClearing | None = None
    for entry in entries:
        if isinstance(entry, ToolOutputPruned) and entry.server is not None:
            cleared.update(entry.call_ids)
            latest = entry.server
    return frozenset(cleared), latest


def tool_clearing_edit(entries: Sequence[LogEntry]) -> dict[str, Any] | None:
    """The `clear_tool_uses` edit that keeps the server's clearing in a request of `entries` (None: none to keep).

    The server clears every tool use but the newest `keep` (those of `exclude_tools` apart), so
    `keep` is the tool uses after the newest cleared one: what was cleared stays cleared and
    nothing newer is, whatever the request adds (the trigger is always met).
    """
    cleared, settings = server_clearing(entries)
    if settings is None:
        return None
    excluded = set(settings.exclude_tools)
    calls = [e for e in entries if isinstance(e, ToolCall) and e.name not in excluded]
    last = max((i for i, call in enumerate(calls) if call.call_id in cleared), default=-1)
    if last < 0:
        return None  # a compaction took every cleared call
    return clear_tool_uses_edit(
        keep=len(calls) - last - 1,
        clear_at_least=settings.clear_at_least,
        exclude_tools=settings.exclude_tools,
        clear_tool_inputs=settings.clear_tool_inputs,
    )


def with_context_edits(body: Any, entries: Sequence[LogEntry], target: AnthropicTarget) -> Any:
    """`body` with the context edits `target` allows and the log asks for (the same body when none).

    With thinking on and completed turns' reasoning kept (`history` `keep`, as the agent's priced
    choice sets it), `clear_thinking` keeps every turn's thinking (`keep: "all"`): the server's
    default would strip all but the last turn's, changing the cached prefix. A dropped history is
    dropped by Lamina itself, so the server is asked nothing.
    """
    allowed = target.context_edits
    if not allowed:
        return body
    edits: list[dict[str, Any]] = []
    reasoning = target.reasoning
    if CLEAR_THINKING in allowed and reasoning.thinking in ("enabled", "adaptive") and reasoning.history != "drop":
        edits.append(clear_thinking_edit("all"))
    tools = tool_clearing_edit(entries) if CLEAR_TOOL_USES in allowed else None
    if tools is not None:
        edits.append(tools)
    managed = context_management(edits)
    return body if managed is None else {**body, "context_management": managed}
