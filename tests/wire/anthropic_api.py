"""The Anthropic Messages wire format (`POST /v1/messages`): replies, errors and request checks.

Shapes follow the API reference and the SDK's types: a stream is `message_start` (usage with the
input and cache counts), `ping`, per block `content_block_start` / `content_block_delta` /
`content_block_stop`, then `message_delta` (stop reason, cumulative usage) and `message_stop`.
Errors are `{"type": "error", "error": {"type", "message"}, "request_id"}`; inside a stream they
are an `error` event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lamina.cachesim import CacheUsage
from tests.wire.script import (
    Fail,
    Reply,
    WireResponse,
    arguments_json,
    json_response,
    pieces,
    retry_headers,
    sse_response,
    stop_reason,
)

MAX_BREAKPOINTS = 4

_FAILURES: dict[str, tuple[int, str, str]] = {
    "overflow": (400, "invalid_request_error", "prompt is too long: {tokens} tokens > 200000 maximum"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per minute. "
        "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    "auth": (401, "authentication_error", "invalid x-api-key"),
    "server": (500, "api_error", "Internal server error"),
    "invalid": (400, "invalid_request_error", "messages: text content blocks must be non-empty"),
}


def error(status: int, error_type: str, message: str, n: int, headers: Mapping[str, str] | None = None) -> WireResponse:
    payload = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": f"req_wire_{n:04d}"}
    return json_response(status, payload, headers)


def failure(body: Mapping[str, Any], step: Fail, n: int, tokens: int) -> WireResponse:
    status, error_type, wording = _FAILURES[step.kind]
    message = step.message or wording.format(tokens=max(tokens, 200_001))
    if not step.in_stream:
        return error(status, error_type, message, n, retry_headers(step))
    frames: list[tuple[str | None, object]] = [_message_start(body, n, None), ("ping", {"type": "ping"})]
    if step.text_before:
        frames.append(_event("content_block_start", index=0, content_block={"type": "text", "text": ""}))
        for piece in pieces(step.text_before):
            frames.append(_event("content_block_delta", index=0, delta={"type": "text_delta", "text": piece}))
    frames.append(("error", {"type": "error", "error": {"type": error_type, "message": message}}))
    return sse_response(frames)


def reply(body: Mapping[str, Any], step: Reply, usage: CacheUsage, n: int, output_tokens: int) -> WireResponse:
    calls = [(call.id or f"toolu_wire_{n:04d}_{i}", call) for i, call in enumerate(step.tool_calls)]
    stop = {"refusal": "refusal"}.get(step.stop_reason or "", stop_reason(step))
    if not body.get("stream"):
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text, "citations": None}] if step.text else []
        content += [{"type": "tool_use", "id": cid, "name": c.name, "input": dict(c.input)} for cid, c in calls]
        message = _message(body, step, n, usage, output_tokens)
        return json_response(200, {**message, "content": content, "stop_reason": stop})
    frames: list[tuple[str | None, object]] = [_message_start(body, n, usage, step), ("ping", {"type": "ping"})]
    index = 0
    if step.text:
        frames.append(_event("content_block_start", index=0, content_block={"type": "text", "text": ""}))
        for piece in pieces(step.text):
            frames.append(_event("content_block_delta", index=0, delta={"type": "text_delta", "text": piece}))
        frames.append(_event("content_block_stop", index=0))
        index = 1
    for offset, (cid, call) in enumerate(calls):
        i = index + offset
        block = {"type": "tool_use", "id": cid, "name": call.name, "input": {}}
        frames.append(_event("content_block_start", index=i, content_block=block))
        for piece in ["", *pieces(arguments_json(call), 2)]:  # the API's first input_json_delta is empty
            frames.append(
                _event("content_block_delta", index=i, delta={"type": "input_json_delta", "partial_json": piece})
            )
        frames.append(_event("content_block_stop", index=i))
    frames.append(
        _event("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage=_usage(usage, output_tokens))
    )
    frames.append(_event("message_stop"))
    return sse_response(frames)


def _event(kind: str, **fields: object) -> tuple[str, dict[str, object]]:
    return kind, {"type": kind, **fields}


def _message(
    body: Mapping[str, Any], step: Reply | None, n: int, usage: CacheUsage | None, output_tokens: int
) -> dict[str, Any]:
    model = (step.model if step is not None else None) or body.get("model", "")
    return {
        "id": f"msg_wire_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(usage, output_tokens),
    }


def _message_start(
    body: Mapping[str, Any], n: int, usage: CacheUsage | None, step: Reply | None = None
) -> tuple[str, dict[str, object]]:
    return _event("message_start", message=_message(body, step, n, usage, 1))


def _usage(usage: CacheUsage | None, output_tokens: int) -> dict[str, Any]:
    if usage is None:
        return {"input_tokens": 0, "output_tokens": output_tokens}
    return {
        "input_tokens": usage.uncached,
        "cache_creation_input_tokens": usage.write,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.write_5m, "ephemeral_1h_input_tokens": usage.write_1h},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


# --- request checks (the API answers 400 with these words) ------------------------------------


def problem(body: Mapping[str, Any]) -> str | None:
    """Why the API would reject `body` with 400, or None: cache breakpoints and tool_use/tool_result pairing."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    marks = _count_marks(body.get("tools")) + _count_marks(body.get("system"))
    marks += sum(_count_marks(m.get("content")) for m in messages if isinstance(m, Mapping))
    marks += 1 if body.get("cache_control") is not None else 0
    if marks > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}."
    return _pairing_problem(messages)


def _count_marks(blocks: object) -> int:
    if not isinstance(blocks, list):
        return 0
    return sum(1 for b in blocks if isinstance(b, Mapping) and b.get("cache_control") is not None)


def _blocks(message: object) -> Sequence[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, Mapping) else None


_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")


def _pairing_problem(messages: Sequence[object]) -> str | None:
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        for j, block in enumerate(blocks):
            field = {"tool_use": "id", "tool_result": "tool_use_id"}.get(str(block.get("type")))
            if field is not None and not _TOOL_ID.fullmatch(str(block.get(field))):
                where = f"messages.{i}.content.{j}.{block.get('type')}.{field}"
                return f"{where}: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if _role(message) == "assistant":
            uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = (
                {b.get("tool_use_id") for b in _blocks(following) if b.get("type") == "tool_result"}
                if _role(following) == "user"
                else set()
            )
            missing = [u for u in uses if u not in answered]
            if missing:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
        elif _role(message) == "user":
            previous = messages[i - 1] if i > 0 else None
            offered = (
                {b.get("id") for b in _blocks(previous) if b.get("type") == "tool_use"}
                if _role(previous) == "assistant"
                else set()
            )
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in offered:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                        "block in the previous message."
                    )
    return None
