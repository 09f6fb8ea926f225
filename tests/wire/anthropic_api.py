"""The Anthropic Messages wire format (`POST /v1/messages`): replies, errors and request checks.

Shapes follow the API reference and the SDK's types: a stream is `message_start` (usage with the
input and cache counts), `ping`, per block `content_block_start` / `content_block_delta` /
`content_block_stop`, then `message_delta` (stop reason, cumulative usage) and `message_stop`.
Errors are `{"type": "error", "error": {"type", "message"}, "request_id"}`; inside a stream they
are an `error` event. Thinking is signed by the server (`ThinkingSigner`), which refuses a block
that does not verify and an active tool loop that dropped or changed its response's thinking.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from lamina.cachesim import CacheUsage
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from tests.wire import tool_search
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
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"


def count_tokens(body: Any, n: int, estimator: TokenEstimator) -> WireResponse:
    """`POST /v1/messages/count_tokens`: the body's input tokens, estimated (400 for a body without messages)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return error(400, "invalid_request_error", "messages: Field required", n)
    text = msgspec.json.encode({k: body.get(k) for k in ("system", "messages", "tools")}).decode()
    return json_response(200, {"input_tokens": estimator.count(text)})


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


def reply(
    body: Mapping[str, Any],
    step: Reply,
    usage: CacheUsage,
    n: int,
    output_tokens: int,
    signer: ThinkingSigner,
    *,
    context_management: Mapping[str, Any] | None = None,
    **diagnostics: object,
) -> WireResponse:
    """The response to `body` for `step`: its thinking first (signed by `signer`), then its text and tool calls.

    `context_management` (the edits the server applied) goes in the message and the `message_delta` event;
    `diagnostics=...` (given when the request asked for cache diagnostics) is the message's `diagnostics`.
    """
    edits = {} if context_management is None else {"context_management": context_management}
    calls = [(call.id or f"toolu_wire_{n:04d}_{i}", call) for i, call in enumerate(step.tool_calls)]
    stop = {"refusal": "refusal"}.get(step.stop_reason or "", stop_reason(step))
    thinking = _thinking(body, step, signer, n)
    signer.remember([cid for cid, _ in calls], thinking, on=thinking_on(body))
    reasoning_tokens = DEFAULT_ESTIMATOR.count(step.reasoning) if thinking else None
    if reasoning_tokens is not None and step.output_tokens is None:  # the estimate counted only the answer
        output_tokens += reasoning_tokens
    billed = _usage(usage, output_tokens, None if reasoning_tokens is None else min(reasoning_tokens, output_tokens))
    searched = tool_search.anthropic_blocks(body, step, n)
    if not body.get("stream"):
        content: list[dict[str, Any]] = [dict(b) for b in thinking] + searched
        content += [{"type": "text", "text": step.text, "citations": None}] if step.text else []
        content += [{"type": "tool_use", "id": cid, "name": c.name, "input": dict(c.input)} for cid, c in calls]
        message = {**_message(body, step, n, usage, output_tokens), **diagnostics}
        return json_response(200, {**message, "content": content, "stop_reason": stop, "usage": billed, **edits})
    frames: list[tuple[str | None, object]] = [
        _message_start(body, n, usage, step, diagnostics),
        ("ping", {"type": "ping"}),
    ]
    for index, thought in enumerate(thinking):
        frames += _thinking_frames(index, thought)
    index = len(thinking)
    for block in searched:  # a server_tool_use streams its input; a search result arrives whole
        start = {**block, "input": {}} if block["type"] == "server_tool_use" else block
        frames.append(_event("content_block_start", index=index, content_block=start))
        if block["type"] == "server_tool_use":
            delta = {"type": "input_json_delta", "partial_json": msgspec.json.encode(block["input"]).decode()}
            frames.append(_event("content_block_delta", index=index, delta=delta))
        frames.append(_stop(index))
        index += 1
    if step.text:
        frames.append(_event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
        for piece in pieces(step.text):
            frames.append(_event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece}))
        frames.append(_event("content_block_stop", index=index))
        index += 1
    for offset, (cid, call) in enumerate(calls):
        i = index + offset
        block = {"type": "tool_use", "id": cid, "name": call.name, "input": {}}
        frames.append(_event("content_block_start", index=i, content_block=block))
        for piece in ["", *pieces(arguments_json(call), 2)]:  # the API's first input_json_delta is empty
            frames.append(
                _event("content_block_delta", index=i, delta={"type": "input_json_delta", "partial_json": piece})
            )
        frames.append(_event("content_block_stop", index=i))
    frames.append(_event("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage=billed, **edits))
    frames.append(_event("message_stop"))
    return sse_response(frames)


def _thinking(body: Mapping[str, Any], step: Reply, signer: ThinkingSigner, n: int) -> list[Mapping[str, str]]:
    """The response's thinking blocks: none, a signed `thinking` block (empty text when omitted) or a redacted one."""
    if not step.reasoning and not step.redacted:
        return []
    config = body.get("thinking")
    omitted = isinstance(config, Mapping) and config.get("display") == "omitted"
    text = "" if omitted and not step.redacted else step.reasoning
    return [signer.block(text, redacted=step.redacted, n=n)]


def _thinking_frames(index: int, block: Mapping[str, str]) -> list[tuple[str | None, object]]:
    """A thinking block as the API streams it; a redacted one arrives whole in its `content_block_start`."""
    if block["type"] == "redacted_thinking":
        return [_event("content_block_start", index=index, content_block=dict(block)), _stop(index)]
    start = _event(
        "content_block_start", index=index, content_block={"type": "thinking", "thinking": "", "signature": ""}
    )
    frames: list[tuple[str | None, object]] = [start]
    for piece in pieces(block["thinking"]):
        frames.append(_event("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece}))
    signature = {"type": "signature_delta", "signature": block["signature"]}
    return [*frames, _event("content_block_delta", index=index, delta=signature), _stop(index)]


def _stop(index: int) -> tuple[str, dict[str, object]]:
    return _event("content_block_stop", index=index)


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
    body: Mapping[str, Any],
    n: int,
    usage: CacheUsage | None,
    step: Reply | None = None,
    diagnostics: Mapping[str, object] | None = None,
) -> tuple[str, dict[str, object]]:
    return _event("message_start", message={**_message(body, step, n, usage, 1), **(diagnostics or {})})


def _usage(usage: CacheUsage | None, output_tokens: int, thinking_tokens: int | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if thinking_tokens is not None:
        details["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    if usage is None:
        return {"input_tokens": 0, "output_tokens": output_tokens, **details}
    return {
        "input_tokens": usage.uncached,
        "cache_creation_input_tokens": usage.write,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.write_5m, "ephemeral_1h_input_tokens": usage.write_1h},
        "output_tokens": output_tokens,
        **details,
        "service_tier": "standard",
    }


# --- request checks (the API answers 400 with these words) ------------------------------------


def problem(body: Mapping[str, Any], signer: ThinkingSigner) -> str | None:
    """Why the API would reject `body` with 400, or None: cache breakpoints, tool_use/tool_result pairing, thinking."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    marks = _count_marks(body.get("tools")) + _count_marks(body.get("system"))
    marks += sum(_count_marks(m.get("content")) for m in messages if isinstance(m, Mapping))
    marks += 1 if body.get("cache_control") is not None else 0
    if marks > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}."
    return _ttl_order_problem(body) or _pairing_problem(messages) or signer.problem(body)


def _ttl_order_problem(body: Mapping[str, Any]) -> str | None:
    """A one-hour breakpoint after a five-minute one (tools, then system, then messages): the API refuses it."""
    system = body.get("system")
    blocks: list[Any] = [*(body.get("tools") or []), *(system if isinstance(system, list) else [])]
    for message in messages if isinstance(messages := body.get("messages"), list) else []:
        blocks += _blocks(message)
    short_seen = False
    for block in blocks:
        mark = block.get("cache_control") if isinstance(block, Mapping) else None
        if not isinstance(mark, Mapping):
            continue
        if mark.get("ttl", "5m") == "1h" and short_seen:
            return "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block"
        short_seen = short_seen or mark.get("ttl", "5m") == "5m"
    return None


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


# --- thinking: signed by the server, checked when it comes back -----------------------------------

_MAC_SIZE: Final = hashlib.sha256().digest_size
_NONCE_SIZE: Final = 8
_THINKING_KINDS: Final = frozenset({"thinking", "redacted_thinking"})
_DOCS: Final = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


@dataclass(frozen=True)
class _Sent:
    """The thinking one response carried before its tool calls, and whether thinking was on for it."""

    blocks: tuple[Mapping[str, str], ...]
    thinking_on: bool


def thinking_on(body: Mapping[str, Any]) -> bool:
    """Whether the request turns thinking on (`enabled` or `adaptive`)."""
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


class ThinkingSigner:
    """The server's signing key and the thinking it sent with each tool call (by `tool_use` id)."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)
        self._sent: dict[str, _Sent] = {}

    # --- making blocks -----------------------------------------------------------------------------

    def block(self, text: str, *, redacted: bool, n: int) -> dict[str, str]:
        """A signed `thinking` block for `text` (response `n`), or a `redacted_thinking` block holding it."""
        nonce = n.to_bytes(_NONCE_SIZE, "big")
        if redacted:
            payload = nonce + text.encode()
            return {"type": "redacted_thinking", "data": _b64(payload + self._mac(b"redacted_thinking", payload))}
        return {"type": "thinking", "thinking": text, "signature": _b64(nonce + self._mac(b"thinking", nonce, text))}

    def remember(self, tool_use_ids: Sequence[str], blocks: Sequence[Mapping[str, str]], *, on: bool) -> None:
        """Note the thinking a response sent before these tool calls (checked when the loop comes back)."""
        sent = _Sent(tuple(blocks), on)
        for tool_use_id in tool_use_ids:
            self._sent[tool_use_id] = sent

    # --- checking requests -------------------------------------------------------------------------

    def problem(self, body: Mapping[str, Any]) -> str | None:
        """Why the API would refuse the thinking in `body` with 400, or None."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        for i, message in enumerate(messages):
            for j, block in enumerate(_blocks(message)):
                found = self._invalid(block)
                if found is not None:
                    return f"messages.{i}.content.{j}{found}"
        return self._tool_loop_problem(messages, on=thinking_on(body))

    def _invalid(self, block: Mapping[str, Any]) -> str | None:
        kind = block.get("type")
        if kind == "thinking":
            signature = block.get("signature")
            if not isinstance(signature, str):
                return ".thinking.signature: Field required"
            raw = _unb64(signature)
            text = block.get("thinking")
            if raw is None or len(raw) != _NONCE_SIZE + _MAC_SIZE or not isinstance(text, str):
                return _BAD_SIGNATURE
            nonce, mac = raw[:_NONCE_SIZE], raw[_NONCE_SIZE:]
            return None if hmac.compare_digest(mac, self._mac(b"thinking", nonce, text)) else _BAD_SIGNATURE
        if kind == "redacted_thinking":
            data = block.get("data")
            raw = _unb64(data) if isinstance(data, str) else None
            if raw is None or len(raw) < _NONCE_SIZE + _MAC_SIZE:
                return _BAD_DATA
            payload, mac = raw[:-_MAC_SIZE], raw[-_MAC_SIZE:]
            return None if hmac.compare_digest(mac, self._mac(b"redacted_thinking", payload)) else _BAD_DATA
        return None

    def _tool_loop_problem(self, messages: Sequence[object], *, on: bool) -> str | None:
        """The last assistant message of an active tool loop must carry its response's thinking, unchanged."""
        if not on or len(messages) < 2 or _role(messages[-1]) != "user" or _role(messages[-2]) != "assistant":
            return None
        if not any(b.get("type") == "tool_result" for b in _blocks(messages[-1])):
            return None
        i, blocks = len(messages) - 2, _blocks(messages[-2])
        uses = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        sent = next((self._sent[u] for u in uses if u in self._sent), None)
        if sent is None or not sent.thinking_on or not sent.blocks:
            return None
        carried = [(j, b) for j, b in enumerate(blocks) if b.get("type") in _THINKING_KINDS]
        if not carried:
            found = blocks[0].get("type") if blocks else "nothing"
            return (
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
                "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
                "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult "
                f"our documentation at {_DOCS}"
            )
        for (j, block), original in zip(carried, (*sent.blocks, None), strict=False):
            if original is None or _essence(block) != _essence(original):
                return f"messages.{i}.content.{j}: {_MODIFIED}"
        if len(carried) < len(sent.blocks):
            return f"messages.{i}.content.{carried[-1][0]}: {_MODIFIED}"
        return None

    def _mac(self, kind: bytes, nonce: bytes, text: str = "") -> bytes:
        return hmac.new(self._secret, kind + b"\0" + nonce + text.encode(), hashlib.sha256).digest()


_BAD_SIGNATURE: Final = ": Invalid `signature` in `thinking` block"
_BAD_DATA: Final = ": Invalid `data` in `redacted_thinking` block"
_MODIFIED: Final = (
    "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. "
    "These blocks must remain as they were in the original response."
)


def _essence(block: Mapping[str, Any]) -> tuple[object, ...]:
    """What of a block must not change (`cache_control` may be added)."""
    return (block.get("type"), block.get("thinking"), block.get("signature"), block.get("data"))


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _unb64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
