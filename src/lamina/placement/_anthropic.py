"""Placement for Anthropic Messages (pure).

Prefix order is tools → system → messages. Authority decides the role: `system` holds only the
stable parts with system authority (Lamina's rules, the user's preferences); the other stable
parts (project files, memory, the skill and source catalogues) open the conversation as its
first user message, still part of the cached stable prefix. Breakpoints (at most the 4 allowed):
1. the last stable system block (covers tools and system; `stable_ttl`);
2. the last block of that first user message, when there is one (`stable_ttl`);
3. the last block of the previous request, i.e. of the user message before the newest assistant
   turn: exactly where the previous request wrote, so the read never depends on the 20-block
   lookback however many blocks were added since;
4. the last block of this request (the current tail or tool results), written for the next one.
The breakpoints move with every request, each model call of a tool loop included.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from lamina.messages import DocumentBlock, ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
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
            case ImageBlock(media_type=media, data=data):
                source = {"type": "base64", "media_type": media, "data": base64.b64encode(data).decode()}
                out.append({"type": "image", "source": source})
            case DocumentBlock(media_type=media, data=data, title=title):
                source = {"type": "base64", "media_type": media, "data": base64.b64encode(data).decode()}
                out.append({"type": "document", "source": source, "title": title})
    return out


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the Messages API's shape, without cache markers."""
    return [{"role": m.role, "content": _blocks(m)} for m in messages]


def _mark_last_block(message: dict[str, Any], ttl: CacheTtl) -> dict[str, Any]:
    # copies: the unmarked message may be shared with a render cache
    content = message["content"]
    return {**message, "content": [*content[:-1], {**content[-1], "cache_control": _cache(ttl)}]}


def render_anthropic(
    turn: TurnContext, wire: list[dict[str, Any]], target: AnthropicTarget
) -> MessageCreateParamsNonStreaming:
    """The request body around `wire` (history, current message, tool loop so far); marks the breakpoints."""
    system: list[TextBlockParam] = [{"type": "text", "text": p.text} for p in turn.stable.system_parts]
    if system:
        system[-1] = {**system[-1], "cache_control": {"type": "ephemeral", "ttl": target.stable_ttl}}
    context: list[dict[str, Any]] = [{"type": "text", "text": p.text} for p in turn.stable.context_parts]
    if wire:
        marks = [len(wire) - 1]
        # the previous request ended with the user message before the newest assistant message
        newest_assistant = next((i for i in range(len(wire) - 1, -1, -1) if wire[i]["role"] == "assistant"), -1)
        previous = next((i for i in range(newest_assistant - 1, -1, -1) if wire[i]["role"] == "user"), None)
        if previous is not None:
            marks.append(previous)
        for index in marks:
            wire[index] = _mark_last_block(wire[index], target.anthropic_cache_ttl)
    if context:
        context[-1] = {**context[-1], "cache_control": _cache(target.stable_ttl)}
        wire = [{"role": "user", "content": context}, *wire]
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
