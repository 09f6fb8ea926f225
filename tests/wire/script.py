"""What a test scripts the wire server to answer, and what the server sends back (provider-neutral)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

FailKind: TypeAlias = Literal["overflow", "overloaded", "rate_limit", "auth", "server", "invalid"]


@dataclass(frozen=True)
class ToolUse:
    """A tool call in a scripted reply."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    """None: the server makes one up in the provider's style (`toolu_…`, `call_…`)."""


@dataclass(frozen=True)
class Reply:
    """A successful model response, rendered in whichever wire format the request used."""

    text: str = ""
    tool_calls: Sequence[ToolUse] = ()
    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "refusal"] | None = None
    """None: `tool_use` when there are tool calls, else `end_turn` (mapped to each API's word)."""
    model: str | None = None
    """None: echo the request's model."""
    output_tokens: int | None = None
    """None: estimated from the text and tool arguments."""
    reasoning: str = ""
    """The model's reasoning before its answer, in each API's form: Anthropic thinking signed by the
    server, a Responses reasoning item it encrypts, a server's `reasoning_content` (empty: none)."""
    redacted: bool = False
    """Anthropic: the reasoning comes as a `redacted_thinking` block (opaque data, no text)."""
    tool_search: str = ""
    """A query the model runs through the request's tool-search tool before answering (`tests.wire.tool_search`)."""


@dataclass(frozen=True)
class Fail:
    """A failure, in the provider's real status code, error shape and wording."""

    kind: FailKind
    retry_after: float | None = None
    """Sent as the `retry-after` header (seconds)."""
    message: str | None = None
    """None: the provider's usual wording for this kind."""
    in_stream: bool = False
    """Fail after the stream started (HTTP 200), as providers do when overloaded mid-response."""
    text_before: str = ""
    """With `in_stream`: text streamed before the failure."""


@dataclass(frozen=True)
class Disconnect:
    """The connection drops halfway through the response body (a network failure mid-stream)."""

    text: str = "An answer long enough that the connection drops while it streams."


Step: TypeAlias = Reply | Fail | Disconnect


@dataclass(frozen=True)
class WireResponse:
    """An HTTP response the server writes."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    cut: int | None = None
    """Send only this many bytes of `body` (with the full Content-Length), then close the connection."""


def json_response(status: int, payload: object, headers: Mapping[str, str] | None = None) -> WireResponse:
    return WireResponse(status, msgspec.json.encode(payload), "application/json", headers or {})


def sse_response(frames: Sequence[tuple[str | None, object]]) -> WireResponse:
    """Server-sent events: `(event name or None, data)`; a `str` data is sent verbatim (`[DONE]`)."""
    out: list[bytes] = []
    for event, data in frames:
        if event is not None:
            out.append(f"event: {event}\n".encode())
        payload = data.encode() if isinstance(data, str) else msgspec.json.encode(data)
        out.append(b"data: " + payload + b"\n\n")
    return WireResponse(200, b"".join(out), "text/event-stream", {"cache-control": "no-cache"})


def retry_headers(step: Fail) -> dict[str, str]:
    return {} if step.retry_after is None else {"retry-after": _seconds(step.retry_after)}


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def pieces(text: str, count: int = 3) -> Iterator[str]:
    """`text` in up to `count` chunks that join back to it (how servers stream deltas)."""
    if not text:
        return
    size = max(1, -(-len(text) // count))
    for start in range(0, len(text), size):
        yield text[start : start + size]


def arguments_json(call: ToolUse) -> str:
    return msgspec.json.encode(dict(call.input)).decode()


def stop_reason(step: Reply) -> str:
    return step.stop_reason or ("tool_use" if step.tool_calls else "end_turn")
