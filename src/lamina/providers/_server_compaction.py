"""Server compaction calls: Anthropic's standalone `compaction` request, OpenAI's `/responses/compact` (I/O: network).

Each reads the raw response, so the block (or item) is kept as the JSON text the provider sent,
never rebuilt from the SDK's model of it. A failed compaction (Anthropic's `content: null`, or no
compaction item) comes back as `ServerCompacted(block=None)`; errors are the adapters' own
`ProviderError`s (`compaction_unavailable` is an `OverloadedError`: retryable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import msgspec

from lamina.errors import ProviderError
from lamina.session import ServerCompaction, Usage

if TYPE_CHECKING:
    import anthropic
    import openai

COMPACT_BETA: Final = "compact-2026-09-04"
"""The `anthropic-beta` value of the standalone `compaction` request."""


@dataclass(frozen=True, slots=True)
class ServerCompacted:
    """What a provider's compaction returned."""

    block: ServerCompaction | None
    """The block or item, as sent; None: the provider's compaction failed (nothing to send back)."""
    user_messages: tuple[str, ...] = ()
    """OpenAI: the user messages the output listed before its item (hostile input: checked, never trusted)."""
    usage: Usage = field(default_factory=Usage)

    def unvouched(self, request: Mapping[str, Any]) -> int:
        """How many of `user_messages` were not sent, in order, by `request` (a `/responses/compact` body).

        The lane (Lamina's record of the user's words) stays the source of truth: the returned
        messages are never sent on; a message among them that the request did not hold, or out of
        order, means the response cannot be trusted. Both sides are read as text the same way.
        """
        items = request.get("input")
        sent = (
            [_text(i) for i in items if isinstance(i, Mapping) and i.get("role") == "user"]
            if isinstance(items, list)
            else []
        )
        at, missing = 0, 0
        for text in self.user_messages:
            found = next((k for k in range(at, len(sent)) if sent[k] == text), None)
            if found is None:
                missing += 1
            else:
                at = found + 1
        return missing


@runtime_checkable
class ServerCompactor(Protocol):
    """A provider that compacts a conversation on its side (`Capabilities.server_compaction` says which form)."""

    async def server_compact(self, request: Mapping[str, Any]) -> ServerCompacted:
        """Send a compaction body (`lamina.placement.compaction_request`) and return the provider's block."""
        ...


async def anthropic_compact(client: anthropic.AsyncAnthropic, request: Mapping[str, Any]) -> ServerCompacted:
    """Anthropic's standalone compaction: the response's only block is the signed `compaction` block.

    Raises:
        ProviderError: The request failed (mapped as every Messages request is), or the answer held no block.
    """
    from lamina.providers._anthropic_errors import map_anthropic_error

    try:
        raw = await client.beta.messages.with_raw_response.create(**request, betas=[COMPACT_BETA])
        data = msgspec.json.decode(raw.http_response.content)
    except Exception as exc:
        raise (map_anthropic_error(exc) or exc) from exc
    blocks = [b for b in data.get("content") or () if isinstance(b, dict) and b.get("type") == "compaction"]
    if data.get("stop_reason") != "compaction" or len(blocks) != 1:
        stop = data.get("stop_reason")
        raise ProviderError("anthropic", f"a compaction request was answered with stop_reason {stop}")
    block = blocks[0]
    usage = data.get("usage") or {}
    counted = Usage(
        input=int(usage.get("input_tokens") or 0),
        output=int(usage.get("output_tokens") or 0),
        cache_read=int(usage.get("cache_read_input_tokens") or 0),
        cache_write=int(usage.get("cache_creation_input_tokens") or 0),
    )
    content = block.get("content")
    if not isinstance(content, str):  # `content: null`: the compaction failed (a no-op if sent back)
        return ServerCompacted(None, usage=counted)
    made = ServerCompaction(
        provider="anthropic",
        form="summarize",
        model=str(data.get("model") or request.get("model") or ""),
        block=msgspec.json.encode(block).decode(),
        readable=content,
    )
    return ServerCompacted(made, usage=counted)


async def openai_compact(client: openai.AsyncOpenAI, request: Mapping[str, Any], *, name: str) -> ServerCompacted:
    """OpenAI's `/responses/compact`: the user messages it lists, then its one encrypted compaction item.

    Raises:
        ProviderError: The request failed (mapped as every Responses request is).
    """
    from lamina.providers._openai_errors import map_openai_error

    try:
        raw = await client.responses.with_raw_response.compact(**request)
        data = msgspec.json.decode(raw.http_response.content)
    except Exception as exc:
        raise (map_openai_error(exc, provider=name) or exc) from exc
    output = [i for i in data.get("output") or () if isinstance(i, dict)]
    users = tuple(_text(i) for i in output if i.get("type", "message") == "message" and i.get("role") == "user")
    items = [i for i in output if i.get("type") == "compaction"]
    usage = data.get("usage") or {}
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    counted = Usage(
        input=int(usage.get("input_tokens") or 0) - cached,
        output=int(usage.get("output_tokens") or 0),
        cache_read=cached,
    )
    if len(items) != 1 or not isinstance(items[0].get("encrypted_content"), str):
        return ServerCompacted(None, users, counted)
    made = ServerCompaction(
        provider="openai",
        form="responses_compact",
        model=str(request.get("model") or ""),
        block=msgspec.json.encode(items[0]).decode(),
    )
    return ServerCompacted(made, users, counted)


def _text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))
