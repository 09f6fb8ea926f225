"""Placement for OpenAI Chat Completions and Responses (pure).

OpenAI caches automatically by longest common prefix, so placement is about order: stable parts
first, history next, the volatile and one-shot parts in
the tail of the user message. `prompt_cache_key` is the session id, so one session's requests are
routed to the same cache. Authority decides the role: the system message (or `instructions`)
holds only the stable parts with system authority (Lamina's rules, the user's preferences); the
other stable parts (project files, memory, the catalogues) are the first user message, right
after it, so they are still in the cached prefix.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec

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
from lamina.placement._call_ids import openai_chat_call_id, openai_responses_call_id
from lamina.placement._openai_cache_marks import mark_chat, mark_responses
from lamina.placement._targets import OpenAIChatTarget, OpenAIResponsesTarget
from lamina.placement._tool_search import responses_tools, server_tool_block

if TYPE_CHECKING:  # the SDKs are heavy to import; their types are only needed by the checker
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming


def stable_text(turn: TurnContext) -> str:
    """The stable parts with system authority as one instruction text."""
    return "\n\n".join(p.text for p in turn.stable.system_parts)


def _context_texts(turn: TurnContext) -> list[str]:
    """The other stable parts' texts: the first user message."""
    return [p.text for p in turn.stable.context_parts]


def _arguments(args: Any) -> str:
    # key order as the model produced it: re-encoding must not reorder, or the prefix changes
    return msgspec.json.encode(dict(args)).decode()


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _chat_part(block: Block) -> dict[str, Any] | None:
    """A user content part in the Chat Completions shape (None: not a user content part)."""
    match block:
        case TextBlock(text=text):
            return {"type": "text", "text": text}
        case ImageBlock(media_type=media, data=data):
            return {"type": "image_url", "image_url": {"url": _data_url(media, data), "detail": "high"}}
        case DocumentBlock(media_type=media, data=data, title=title):
            return {"type": "file", "file": {"filename": title, "file_data": _data_url(media, data)}}
        case _:
            return None


def chat_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the Chat Completions shape."""
    out: list[dict[str, Any]] = []
    for message in messages:
        texts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
        if message.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
            for block in message.blocks:  # a server's reasoning, in the field it came in
                if isinstance(block, ReasoningBlock) and block.reasoning.text:
                    name = block.reasoning.field or "reasoning_content"
                    item[name] = item[name] + block.reasoning.text if name in item else block.reasoning.text
            calls = [b for b in message.blocks if isinstance(b, ToolUseBlock)]
            if calls:
                item["tool_calls"] = [
                    {
                        "id": openai_chat_call_id(c.call_id),
                        "type": "function",
                        "function": {"name": c.name, "arguments": _arguments(c.input)},
                    }
                    for c in calls
                ]
            out.append(item)
            continue
        media: list[Block] = []
        for block in message.blocks:  # tool results first: they answer the previous assistant message
            if isinstance(block, ToolResultBlock):
                out.append(
                    {"role": "tool", "tool_call_id": openai_chat_call_id(block.call_id), "content": block.content}
                )
                media += block.media
        # a tool message holds only text: the images the tools returned follow in the user message after them
        parts = [p for p in map(_chat_part, [*media, *message.blocks]) if p is not None]
        if parts:
            out.append({"role": "user", "content": parts})
    return out


def render_openai_chat(
    turn: TurnContext, wire: list[dict[str, Any]], target: OpenAIChatTarget
) -> CompletionCreateParamsNonStreaming:
    """A Chat Completions request body around `wire` (from `chat_wire_messages`)."""
    system = stable_text(turn)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    context = _context_texts(turn)
    if context:
        messages.append({"role": "user", "content": [{"type": "text", "text": t} for t in context]})
    messages += wire
    body: dict[str, Any] = {"model": target.model, "messages": messages}
    if turn.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.input_schema)},
            }
            for t in turn.tools
        ]
    if target.reasoning.effort is not None:
        body["reasoning_effort"] = target.reasoning.effort
    if target.max_tokens is not None:
        body["max_completion_tokens"] = target.max_tokens
    if target.prompt_cache_key:
        body["prompt_cache_key"] = turn.session_id
    if target.cache_breakpoints:
        mark_chat(body, bool(context))
    return cast("CompletionCreateParamsNonStreaming", body)


def responses_wire_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Input items in the Responses shape."""
    out: list[dict[str, Any]] = []
    for message in messages:
        for block in message.blocks:
            match block:
                case TextBlock(text=text) if message.role == "user":
                    out.append({"role": "user", "content": [{"type": "input_text", "text": text}]})
                case TextBlock(text=text):
                    out.append({"role": "assistant", "content": text})
                case ToolUseBlock(call_id=call_id, name=name, input=args):
                    out.append(
                        {
                            "type": "function_call",
                            "call_id": openai_responses_call_id(call_id),
                            "name": name,
                            "arguments": _arguments(args),
                        }
                    )
                case ToolResultBlock(call_id=call_id, content=content, media=media):
                    output: str | list[dict[str, Any]] = content
                    if media:  # a function call's output takes text, image and file items
                        output = [{"type": "input_text", "text": content}, *map(_responses_part, media)]
                    out.append(
                        {"type": "function_call_output", "call_id": openai_responses_call_id(call_id), "output": output}
                    )
                case ImageBlock() | DocumentBlock():
                    out.append({"role": "user", "content": [_responses_part(block)]})
                case ReasoningBlock(reasoning=r) if r.kind == "server_tool":  # a tool search item, as returned
                    out.extend(filter(None, [server_tool_block(block)]))
                case ReasoningBlock(reasoning=r) if r.data:  # store is false: only the encrypted item can go back
                    out.append(
                        {
                            "type": "reasoning",
                            "id": r.item_id,
                            "summary": [{"type": "summary_text", "text": t} for t in r.summary],
                            "encrypted_content": r.data,
                        }
                    )
    return out


def _responses_part(block: Block) -> dict[str, Any]:
    """A user content item (or function call output item) in the Responses shape."""
    match block:
        case ImageBlock(media_type=media, data=data):
            return {"type": "input_image", "image_url": _data_url(media, data), "detail": "high"}
        case DocumentBlock(media_type=media, data=data, title=title):
            return {"type": "input_file", "filename": title, "file_data": _data_url(media, data)}
        case TextBlock(text=text):
            return {"type": "input_text", "text": text}
        case _:
            raise TypeError(f"{type(block).__name__} is not user content")


def render_openai_responses(
    turn: TurnContext, wire: list[dict[str, Any]], target: OpenAIResponsesTarget
) -> ResponseCreateParamsNonStreaming:
    """A Responses request body around `wire` (stateless: the whole input, no `previous_response_id`)."""
    context = _context_texts(turn)
    if context:
        wire = [{"role": "user", "content": [{"type": "input_text", "text": t} for t in context]}, *wire]
    body: dict[str, Any] = {"model": target.model, "input": wire, "store": False}
    instructions = stable_text(turn)
    if instructions:
        body["instructions"] = instructions
    if turn.tools:
        body["tools"] = responses_tools(turn.tools)
    reasoning = {
        k: v for k, v in (("effort", target.reasoning.effort), ("summary", target.reasoning.summary)) if v is not None
    }
    if reasoning:
        body["reasoning"] = reasoning
    if target.includes_encrypted_reasoning:
        body["include"] = ["reasoning.encrypted_content"]
    if target.max_output_tokens is not None:
        body["max_output_tokens"] = target.max_output_tokens
    if target.prompt_cache_key:
        body["prompt_cache_key"] = turn.session_id
    if target.cache_breakpoints:
        mark_responses(body, target, turn.turn_ttl, bool(context))
    return cast("ResponseCreateParamsNonStreaming", body)
