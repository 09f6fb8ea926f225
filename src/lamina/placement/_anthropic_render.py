"""Placement for Anthropic Messages (pure).

Described in docs/placement.md ("Anthropic Messages: roles and cache breakpoints").
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, assert_never, cast

from lamina.context import (
    Block,
    DocumentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnContext,
)
from lamina.placement._call_ids import anthropic_call_id
from lamina.placement._targets import AnthropicTarget, CacheTtl, ReasoningConfig
from lamina.placement._tool_search import anthropic_tools, server_tool_block

if TYPE_CHECKING:  # the SDKs are heavy to import; their types are only needed by the checker
    from anthropic.types import TextBlockParam, ToolParam
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming


def _cache(ttl: CacheTtl) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}


def _block(block: Block) -> dict[str, Any]:
    match block:
        case TextBlock(text=text):
            return {"type": "text", "text": text}
        case ToolUseBlock(call_id=call_id, name=name, input=args):
            return {"type": "tool_use", "id": anthropic_call_id(call_id), "name": name, "input": dict(args)}
        case ToolResultBlock(call_id=call_id, content=content, is_error=is_error, media=media):
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": anthropic_call_id(call_id),
                # the images a tool returned go inside its result (text and image blocks), after its text
                "content": [{"type": "text", "text": content}, *map(_block, media)] if media else content,
            }
            if is_error:
                result["is_error"] = True
            return result
        case ImageBlock(media_type=media_type, data=data):
            source = {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}
            return {"type": "image", "source": source}
        case DocumentBlock(media_type=media_type, data=data, title=title):
            source = {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}
            return {"type": "document", "source": source, "title": title}
        case ReasoningBlock(reasoning=r) if r.kind == "server_tool":  # a tool search, sent back as returned
            return server_tool_block(block) or {}
        case ReasoningBlock(reasoning=r) if r.kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": r.data}
        case ReasoningBlock(reasoning=r):  # unchanged, signature included, or the API refuses the tool loop
            return {"type": "thinking", "thinking": r.text, "signature": r.signature}
        case _:
            assert_never(block)


def _blocks(message: Message) -> list[dict[str, Any]]:
    return [_block(block) for block in message.blocks]


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the Messages API's shape, without cache markers."""
    return [{"role": m.role, "content": _blocks(m)} for m in messages]


def _mark_last_block(message: dict[str, Any], ttl: CacheTtl) -> dict[str, Any]:
    # copies: the unmarked message may be shared with a render cache
    content = message["content"]
    return {**message, "content": [*content[:-1], {**content[-1], "cache_control": _cache(ttl)}]}


def starts_with_block(wire: Sequence[dict[str, Any]]) -> bool:
    """Whether `wire` opens with a provider's compaction block (the stable context then goes after it)."""
    content = wire[0].get("content") if wire else None
    return isinstance(content, list) and bool(content) and content[0].get("type") == "compaction"


_LOOKBACK = 20
"""Positions the provider checks back from a breakpoint, the breakpoint's own included."""
_MAX_BREAKPOINTS = 4


def _positions_after(wire: list[dict[str, Any]], start: int, end: int) -> int:
    """Lookback positions from the last block of message `start` to the last block of `end`.

    Runs of tool_use or tool_result blocks in one message count once; counted generously otherwise.
    """
    count = 0
    for message in wire[start + 1 : end + 1]:
        previous_kind = None
        for block in message["content"]:
            kind = block.get("type")
            if not (kind in ("tool_use", "tool_result") and kind == previous_kind):
                count += 1
            previous_kind = kind
    return count


def _turn_index(wire: list[dict[str, Any]]) -> int | None:
    """The current turn's user message: the newest user message with more than tool results."""
    return next(
        (
            i
            for i in range(len(wire) - 1, -1, -1)
            if wire[i]["role"] == "user" and any(b.get("type") != "tool_result" for b in wire[i]["content"])
        ),
        None,
    )


def _previous_index(wire: list[dict[str, Any]]) -> int | None:
    """Where the previous request ended: the user message before the newest assistant message."""
    newest_assistant = next((i for i in range(len(wire) - 1, -1, -1) if wire[i]["role"] == "assistant"), -1)
    return next((i for i in range(newest_assistant - 1, -1, -1) if wire[i]["role"] == "user"), None)


def _marks(wire: list[dict[str, Any]], target: AnthropicTarget, free: int, turn_ttl: CacheTtl) -> dict[int, CacheTtl]:
    """Which messages get a breakpoint on their last block, with which TTL (`free`: breakpoints left)."""
    last = len(wire) - 1
    rolling = target.anthropic_cache_ttl
    turn = _turn_index(wire)
    previous = _previous_index(wire)
    far = previous is not None and _positions_after(wire, previous, last) >= _LOOKBACK
    if turn == last and not far:
        return {last: turn_ttl}  # the first request of a turn: its tail is the turn breakpoint
    marks: dict[int, CacheTtl] = {last: rolling}
    if far and previous is not None:
        marks[previous] = rolling  # out of the lookback's reach: mark where the previous request wrote
    if turn is not None and turn < last and len(marks) < free and (previous is None or turn <= previous):
        marks[turn] = turn_ttl  # before every 5-minute mark: 1-hour entries must come first
    if previous is not None and len(marks) < free:
        marks.setdefault(previous, rolling)
    return marks


def _reasoning_params(reasoning: ReasoningConfig) -> dict[str, Any]:
    """The request's `thinking` and `output_config` for `reasoning` (nothing for the model's defaults)."""
    params: dict[str, Any] = {}
    if reasoning.thinking is not None:
        thinking: dict[str, Any] = {"type": reasoning.thinking}
        if reasoning.budget_tokens is not None:
            thinking["budget_tokens"] = reasoning.budget_tokens
        if reasoning.display is not None and reasoning.thinking != "disabled":
            thinking["display"] = reasoning.display
        params["thinking"] = thinking
    if reasoning.effort is not None:
        params["output_config"] = {"effort": reasoning.effort}
    return params


def render_anthropic(
    turn: TurnContext, wire: list[dict[str, Any]], target: AnthropicTarget
) -> MessageCreateParamsNonStreaming:
    """The request body around `wire` (history, current message, tool loop so far); marks the breakpoints."""
    system: list[TextBlockParam] = [{"type": "text", "text": p.text} for p in turn.stable.system_parts]
    if system:
        system[-1] = {**system[-1], "cache_control": {"type": "ephemeral", "ttl": target.stable_ttl}}
    context: list[dict[str, Any]] = [{"type": "text", "text": p.text} for p in turn.stable.context_parts]
    if wire:
        free = _MAX_BREAKPOINTS - bool(system) - bool(context)
        for index, ttl in _marks(wire, target, free, target.breakpoint_ttl(turn.turn_ttl)).items():
            wire[index] = _mark_last_block(wire[index], ttl)
    if context:
        context[-1] = {**context[-1], "cache_control": _cache(target.stable_ttl)}
        # the API wants a compaction block first in the conversation: the stable context then follows it
        at = 1 if starts_with_block(wire) else 0
        wire = [*wire[:at], {"role": "user", "content": context}, *wire[at:]]
    body: dict[str, Any] = {"model": target.model, "max_tokens": target.max_tokens, "messages": wire}
    body.update(_reasoning_params(target.reasoning))
    if system:
        body["system"] = system
    if turn.tools:
        tools: list[ToolParam] = cast(Any, anthropic_tools(turn.tools, target.anthropic_tool_search))
        body["tools"] = tools
    return cast("MessageCreateParamsNonStreaming", body)
