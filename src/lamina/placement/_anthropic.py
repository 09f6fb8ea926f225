"""Placement for Anthropic Messages (pure).

Prefix order is tools → system → messages. Breakpoints (at most 3 of the 4 allowed):
1. the last stable system block (covers tools and system; `stable_ttl`);
2. the last block of the previous request, i.e. of the user message before the newest assistant
   turn: exactly where the previous request wrote, so the read never depends on the 20-block
   lookback however many blocks were added since;
3. the last block of this request (the current tail or tool results), written for the next one.
The breakpoints move with every request, each model call of a tool loop included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from lamina.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from lamina.placement.targets import AnthropicTarget, CacheTtl
from lamina.turn import TurnContext

if TYPE_CHECKING:  # the SDKs are heavy to import; their types are only needed by the checker
    from anthropic.types import TextBlockParam, ToolParam
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming


def _cache(ttl: CacheTtl) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}


def _blocks(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in message.blocks:
        match block:
            case TextBlock(text=text):
                out.append({"type": "text", "text": text})
            case ToolUseBlock(call_id=call_id, name=name, input=args):
                out.append({"type": "tool_use", "id": call_id, "name": name, "input": dict(args)})
            case ToolResultBlock(call_id=call_id, content=content, is_error=is_error):
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
                if is_error:
                    result["is_error"] = True
                out.append(result)
    return out


def render_anthropic(
    turn: TurnContext, messages: Sequence[Message], target: AnthropicTarget
) -> MessageCreateParamsNonStreaming:
    """The request body for `messages` (history, current message, tool loop so far)."""
    system: list[TextBlockParam] = [{"type": "text", "text": p.text} for p in turn.stable.parts if p.text]
    if system:
        system[-1] = {**system[-1], "cache_control": {"type": "ephemeral", "ttl": target.stable_ttl}}
    wire: list[dict[str, Any]] = [{"role": m.role, "content": _blocks(m)} for m in messages]
    last_user = [i for i, m in enumerate(wire) if m["role"] == "user"]
    marks: list[int] = []
    if wire:
        marks.append(len(wire) - 1)
        # the previous request ended with the user message before the newest assistant message
        newest_assistant = max((i for i, m in enumerate(wire) if m["role"] == "assistant"), default=-1)
        previous = [i for i in last_user if i < newest_assistant]
        if previous:
            marks.append(previous[-1])
    for index in marks:
        content = wire[index]["content"]
        content[-1] = {**content[-1], "cache_control": _cache(target.anthropic_cache_ttl)}
    body: dict[str, Any] = {"model": target.model, "max_tokens": target.max_tokens, "messages": wire}
    if system:
        body["system"] = system
    if turn.tools:
        tools: list[ToolParam] = [
            {"name": t.name, "description": t.description, "input_schema": cast(Any, dict(t.input_schema))}
            for t in turn.tools
        ]
        body["tools"] = tools
    return cast("MessageCreateParamsNonStreaming", body)
