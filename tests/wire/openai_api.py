"""The OpenAI wire formats: Chat Completions (`POST /v1/chat/completions`) and Responses (`POST /v1/responses`).

Chat streams are `data:` chunks of `chat.completion.chunk` (the role first, content deltas,
`tool_calls` deltas keyed by `index` with id and name first, then argument pieces, a chunk with
`finish_reason`), then, with `stream_options.include_usage`, a chunk with empty `choices` and the
usage, then `data: [DONE]`. Responses streams are named events with a `sequence_number`, ending
with `response.completed` (or `response.incomplete`) and no `[DONE]`. Errors are
`{"error": {"message", "type", "param", "code"}}`. A scripted reasoning is a Responses reasoning
item (summary only when asked, encrypted content only with `include`, sealed with the server's
secret) and a Chat `reasoning_content`; `reasoning_problem` refuses what the APIs refuse of them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lamina.cachesim import CacheUsage
from lamina.tokens import DEFAULT_ESTIMATOR
from tests.wire import tool_search
from tests.wire.openai_cache import prewarm
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

_CHAT_OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in {tokens} tokens. "
    "Please reduce the length of the messages."
)
_RESPONSES_OVERFLOW = "Your input exceeds the context window of this model. Please adjust your input and try again."
_FAILURES: dict[str, tuple[int, str, str | None, str]] = {  # status, type, code, wording
    "overflow": (400, "invalid_request_error", "context_length_exceeded", _CHAT_OVERFLOW),
    "overloaded": (503, "server_error", None, "The server is overloaded or not ready yet."),
    "rate_limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for {model} in organization org-wire on requests per min (RPM): Limit 3, Used 3, "
        "Requested 1. Please try again in 20s.",
    ),
    "auth": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-wire***. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    "server": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "invalid": (400, "invalid_request_error", None, "Invalid value for 'messages'."),
}
_CHAT_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}


def error(
    status: int,
    error_type: str,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> WireResponse:
    return json_response(
        status, {"error": {"message": message, "type": error_type, "param": param, "code": code}}, headers
    )


def _error_object(body: Mapping[str, Any], step: Fail, api: str, tokens: int) -> tuple[int, dict[str, Any]]:
    status, error_type, code, wording = _FAILURES[step.kind]
    if step.kind == "overflow" and api == "responses":
        wording = _RESPONSES_OVERFLOW
    message = step.message or wording.format(tokens=max(tokens, 128_001), model=body.get("model", ""))
    param = ("input" if api == "responses" else "messages") if step.kind == "overflow" else None
    return status, {"message": message, "type": error_type, "param": param, "code": code}


def failure(body: Mapping[str, Any], step: Fail, api: str, n: int, tokens: int) -> WireResponse:
    status, err = _error_object(body, step, api, tokens)
    if not step.in_stream:
        return json_response(status, {"error": err}, retry_headers(step))
    if api == "chat":
        frames: list[tuple[str | None, object]] = [(None, _chunk(body, n, {"role": "assistant", "content": ""}))]
        frames += [(None, _chunk(body, n, {"content": p})) for p in pieces(step.text_before)]
        frames.append((None, {"error": err}))  # the SDK raises on a chunk that carries `error`
        return sse_response(frames)
    stream = _ResponsesStream(body, n)
    stream.emit("response.created", response=stream.response("in_progress"))
    if step.text_before:
        stream.text_item(step.text_before, finish=False)
    if step.kind in ("overflow", "invalid"):
        # input problems found after the stream opened arrive as an `error` event wrapping the error object
        stream.emit("error", error=err)
    else:
        failed = stream.response("failed")
        failed["error"] = {"code": err["code"] or "server_error", "message": err["message"]}
        stream.emit("response.failed", response=failed)
    return sse_response(stream.frames)


# --- Chat Completions -------------------------------------------------------------------------


def _chunk(
    body: Mapping[str, Any], n: int, delta: Mapping[str, Any] | None, finish: str | None = None
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": f"chatcmpl-wire{n:04d}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "fp_wire",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if _include_usage(body):
        chunk["usage"] = None
    return chunk


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, Mapping) and bool(options.get("include_usage"))


def reasoning_tokens(step: Reply) -> int:
    """The tokens a scripted reasoning costs: billed as output, on top of the answer's."""
    return DEFAULT_ESTIMATOR.count(step.reasoning) if step.reasoning else 0


def _chat_usage(usage: CacheUsage, output_tokens: int, reasoning: int) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.total,
        "completion_tokens": output_tokens + reasoning,
        "total_tokens": usage.total + output_tokens + reasoning,
        "prompt_tokens_details": {"cached_tokens": usage.read, "cache_write_tokens": usage.write, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }


def chat_reply(body: Mapping[str, Any], step: Reply, usage: CacheUsage, n: int, output_tokens: int) -> WireResponse:
    """A Chat completion (or its chunks); a scripted reasoning comes as `reasoning_content`, before the content."""
    calls = [(call.id or f"call_wire{n:04d}x{i}", call) for i, call in enumerate(step.tool_calls)]
    finish = _CHAT_FINISH[stop_reason(step)]
    model = step.model or body.get("model", "")
    billed = _chat_usage(usage, output_tokens, reasoning_tokens(step))
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None, "refusal": None}
        if step.reasoning:
            message["reasoning_content"] = step.reasoning
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": arguments_json(c)}}
                for cid, c in calls
            ]
        return json_response(
            200,
            {
                "id": f"chatcmpl-wire{n:04d}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": billed,
            },
        )
    body = {**body, "model": model}
    frames: list[tuple[str | None, object]] = [
        (None, _chunk(body, n, {"role": "assistant", "content": "", "refusal": None}))
    ]
    frames += [(None, _chunk(body, n, {"content": None, "reasoning_content": p})) for p in pieces(step.reasoning)]
    frames += [(None, _chunk(body, n, {"content": p})) for p in pieces(step.text)]
    for index, (cid, call) in enumerate(calls):
        head = {"index": index, "id": cid, "type": "function", "function": {"name": call.name, "arguments": ""}}
        frames.append((None, _chunk(body, n, {"tool_calls": [head]})))
        for piece in pieces(arguments_json(call), 2):
            frames.append((None, _chunk(body, n, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]})))
    frames.append((None, _chunk(body, n, {}, finish)))
    if _include_usage(body):
        frames.append((None, {**_chunk(body, n, None), "usage": billed}))
    frames.append((None, "[DONE]"))
    return sse_response(frames)


def chat_problem(body: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """Why the API would reject `body` with 400 (message, param), or None: tool call / tool message pairing."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "[] is too short - 'messages'", "messages"
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        for j, call in enumerate(message.get("tool_calls") or ()):
            too_long = _too_long(call.get("id") if isinstance(call, Mapping) else None, CHAT_CALL_ID_MAX)
            if too_long is not None:
                return too_long.format(param=f"messages[{i}].tool_calls[{j}].id"), f"messages[{i}].tool_calls[{j}].id"
        if message.get("role") == "assistant" and message.get("tool_calls"):
            asked = [str(c.get("id")) for c in message["tool_calls"] if isinstance(c, Mapping)]
            answered: set[object] = set()
            for later in messages[i + 1 :]:
                if not isinstance(later, Mapping) or later.get("role") != "tool":
                    break
                answered.add(later.get("tool_call_id"))
            missing = [c for c in asked if c not in answered]
            if missing:
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
                    f"messages.[{i}].role",
                )
        if message.get("role") == "tool" and message.get("tool_call_id") not in _offered(messages, i):
            return (
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                "'tool_calls'.",
                f"messages.[{i}].role",
            )
    return None


CHAT_CALL_ID_MAX = 40
RESPONSES_CALL_ID_MAX = 64


def _too_long(value: object, limit: int) -> str | None:
    """The API's words for a tool call id over `limit` characters (with a `{param}` to fill in), or None."""
    if not isinstance(value, str) or len(value) <= limit:
        return None
    return (
        f"Invalid '{{param}}': string too long. Expected a string with maximum length {limit}, "
        f"but got a string with length {len(value)} instead."
    )


def _offered(messages: Sequence[object], i: int) -> set[object]:
    """The tool call ids of the assistant message the tool message at `i` answers (across earlier tool messages)."""
    j = i - 1
    while j >= 0 and _role(messages[j]) == "tool":
        j -= 1
    before = messages[j] if j >= 0 else None
    if not isinstance(before, Mapping) or before.get("role") != "assistant":
        return set()
    return {c.get("id") for c in before.get("tool_calls") or () if isinstance(c, Mapping)}


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, Mapping) else None


# --- Responses --------------------------------------------------------------------------------


class _ResponsesStream:
    """Builds a Responses event stream (every event numbered)."""

    def __init__(self, body: Mapping[str, Any], n: int, model: str | None = None) -> None:
        self.body = body
        self.n = n
        self.model = model or body.get("model", "")
        self.frames: list[tuple[str | None, object]] = []
        self.output: list[dict[str, Any]] = []

    def emit(self, kind: str, **fields: object) -> None:
        self.frames.append((kind, {"type": kind, "sequence_number": len(self.frames), **fields}))

    def response(self, status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        body = self.body
        return {
            "id": f"resp_wire{self.n:04d}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": self.model,
            "output": list(self.output) if status != "in_progress" else [],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "prompt_cache_key": body.get("prompt_cache_key"),
            "store": body.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": body.get("tools", []),
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "metadata": {},
        }

    def text_item(self, text: str, *, finish: bool = True) -> None:
        index, item_id = len(self.output), f"msg_wire{self.n:04d}"
        item: dict[str, Any] = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
        self.emit("response.output_item.added", output_index=index, item={**item, "content": []})
        part = {"type": "output_text", "text": "", "annotations": []}
        self.emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part)
        for piece in pieces(text):
            self.emit(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        if not finish:
            return
        done_part = {**part, "text": text}
        self.emit(
            "response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text, logprobs=[]
        )
        self.emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=done_part)
        item = {**item, "status": "completed", "content": [done_part]}
        self.output.append(item)
        self.emit("response.output_item.done", output_index=index, item=item)

    def reasoning_item(self, text: str, *, summarised: bool, sealed: str | None) -> None:
        """A reasoning item as the API streams it; on `.added` its encrypted content is incomplete."""
        index, item_id = len(self.output), f"rs_wire{self.n:04d}x{len(self.output)}"
        added: dict[str, Any] = {
            "id": item_id,
            "type": "reasoning",
            "summary": [],
            "encrypted_content": sealed and sealed[:8],
            "status": "in_progress",
        }
        self.emit("response.output_item.added", output_index=index, item=added)
        summary = [text] if summarised else []
        at: dict[str, Any] = {"item_id": item_id, "output_index": index}
        for i, part_text in enumerate(summary):
            self.emit("response.reasoning_summary_part.added", **at, summary_index=i, part=_summary_part(""))
            for piece in pieces(part_text):
                self.emit("response.reasoning_summary_text.delta", **at, summary_index=i, delta=piece)
            self.emit("response.reasoning_summary_text.done", **at, summary_index=i, text=part_text)
            self.emit("response.reasoning_summary_part.done", **at, summary_index=i, part=_summary_part(part_text))
        done = {
            **added,
            "summary": [_summary_part(t) for t in summary],
            "encrypted_content": sealed,
            "status": "completed",
        }
        self.output.append(done)
        self.emit("response.output_item.done", output_index=index, item=done)

    def call_item(self, call_id: str, name: str, arguments: str) -> None:
        index, item_id = len(self.output), f"fc_wire{self.n:04d}x{len(self.output)}"
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id, "name": name}
        self.emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
        for piece in pieces(arguments, 2):
            self.emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
        self.emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        done = {**item, "status": "completed", "arguments": arguments}
        self.output.append(done)
        self.emit("response.output_item.done", output_index=index, item=done)


def _summary_part(text: str) -> dict[str, str]:
    return {"type": "summary_text", "text": text}


def _responses_usage(usage: CacheUsage, output_tokens: int, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.total,
        "input_tokens_details": {
            "cached_tokens": usage.read,
            "cache_write_tokens": usage.write,
            "cache_write_tokens_details": {"ttl_30m_tokens": usage.write_30m, "ttl_12h_tokens": usage.write_12h},
        },
        "output_tokens": output_tokens + reasoning,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.total + output_tokens + reasoning,
    }


def responses_reply(
    body: Mapping[str, Any],
    step: Reply,
    usage: CacheUsage,
    n: int,
    output_tokens: int,
    *,
    secret: bytes,
    diagnostics: object = None,
) -> WireResponse:
    """A response (or its events); a scripted reasoning is a reasoning item first, its content sealed with `secret`.

    `diagnostics` (when the request asked) is the final response's `prompt_cache_diagnostics`.
    """
    stream = _ResponsesStream(body, n, step.model)
    stream.emit("response.created", response=stream.response("in_progress"))
    stream.emit("response.in_progress", response=stream.response("in_progress"))
    if prewarm(body):  # the cache is prepared, nothing is generated
        step, output_tokens = Reply(model=step.model), 0
    if step.reasoning:
        asked = body.get("reasoning")
        summarised = isinstance(asked, Mapping) and asked.get("summary") is not None
        encrypted = "reasoning.encrypted_content" in (body.get("include") or ())
        stream.reasoning_item(
            step.reasoning, summarised=summarised, sealed=seal(secret, step.reasoning) if encrypted else None
        )
    for item in tool_search.responses_items(body, step, n):  # a hosted search: whole items, before the answer
        stream.emit("response.output_item.added", output_index=len(stream.output), item=item)
        stream.output.append(item)
        stream.emit("response.output_item.done", output_index=len(stream.output) - 1, item=item)
    if step.text:
        stream.text_item(step.text)
    for i, call in enumerate(step.tool_calls):
        stream.call_item(call.id or f"call_wire{n:04d}x{i}", call.name, arguments_json(call))
    incomplete = stop_reason(step) == "max_tokens"
    billed = _responses_usage(usage, output_tokens, reasoning_tokens(step))
    final = stream.response("incomplete" if incomplete else "completed", billed)
    if diagnostics is not None:
        final["prompt_cache_diagnostics"] = diagnostics
    if incomplete:
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    if not body.get("stream"):
        return json_response(200, final)
    stream.emit("response.incomplete" if incomplete else "response.completed", response=final)
    return sse_response(stream.frames)


def responses_problem(body: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """Why the API would reject `body` with 400 (message, param), or None: function call / output pairing."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    called: list[object] = []
    answered: set[object] = set()
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        too_long = _too_long(item.get("call_id"), RESPONSES_CALL_ID_MAX)
        if too_long is not None:
            return too_long.format(param=f"input[{i}].call_id"), f"input[{i}].call_id"
        if item.get("type") == "function_call":
            called.append(item.get("call_id"))
        elif item.get("type") == "function_call_output":
            if item.get("call_id") not in called:
                return f"No tool call found for function call output with call_id {item.get('call_id')}.", "input"
            answered.add(item.get("call_id"))
    for call_id in called:
        if call_id not in answered:
            return f"No tool output found for function call {call_id}.", "input"
    return None


# --- Reasoning --------------------------------------------------------------------------------

_SEALED_VERSION = b"\x80"  # a Fernet token's first byte, as the API's contents (`gAAAA…`) begin
_DEEPSEEK_MISSING = "The `reasoning_content` in the thinking mode must be passed back to the API."


def seal(secret: bytes, text: str) -> str:
    """A reasoning item's encrypted content: only a server holding `secret` can verify it."""
    raw = text.encode()
    return base64.urlsafe_b64encode(_SEALED_VERSION + hmac.new(secret, raw, hashlib.sha256).digest() + raw).decode()


def unseal(secret: bytes, sealed: str) -> str | None:
    """The text `sealed` holds if it verifies with `secret` (None: changed, or sealed elsewhere)."""
    try:
        raw = base64.b64decode(sealed.encode("ascii"), altchars=b"-_", validate=True)
    except (UnicodeEncodeError, binascii.Error):
        return None
    if base64.urlsafe_b64encode(raw).decode() != sealed:  # an unused bit of the last character changed
        return None
    mac, text = raw[1:33], raw[33:]
    if raw[:1] != _SEALED_VERSION or not hmac.compare_digest(mac, hmac.new(secret, text, hashlib.sha256).digest()):
        return None
    try:
        return text.decode()
    except UnicodeDecodeError:
        return None


def reasoning_problem(api: str, body: Mapping[str, Any], *, secret: bytes, deepseek: bool) -> WireResponse | None:
    """The API's refusal of the reasoning `body` sends back, or None.

    Responses: a reasoning item whose encrypted content does not verify (400
    `invalid_encrypted_content`), or one with no encrypted content under `store: false` (404: the
    item was never persisted). Chat, with `deepseek`: an assistant message with tool calls whose
    `reasoning_content` was left out (DeepSeek's 400).
    """
    if api == "chat":
        messages = body.get("messages") if deepseek else None
        for message in messages if isinstance(messages, list) else ():
            if not isinstance(message, Mapping) or message.get("role") != "assistant" or not message.get("tool_calls"):
                continue
            if not isinstance(message.get("reasoning_content"), str):
                return error(400, "invalid_request_error", _DEEPSEEK_MISSING, code="invalid_request_error")
        return None
    items = body.get("input")
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, Mapping) or item.get("type") != "reasoning":
            continue
        sealed = item.get("encrypted_content")
        if isinstance(sealed, str) and sealed:
            if unseal(secret, sealed) is None:
                message = (
                    f"The encrypted content for item {item.get('id')} could not be verified. "
                    "Reason: Encrypted content could not be decrypted or parsed."
                )
                return error(400, "invalid_request_error", message, code="invalid_encrypted_content")
        elif body.get("store") is False:
            message = (
                f"Item with id '{item.get('id')}' not found. Items are not persisted when `store` is set to false. "
                "Try again with `store` set to true, or remove this item from your input."
            )
            return error(404, "invalid_request_error", message, param="input")
    return None
