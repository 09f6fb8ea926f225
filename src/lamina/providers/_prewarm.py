"""Pre-warm calls: a request that writes the prompt cache and generates nothing (I/O: network).

Anthropic: the body with `max_tokens: 0`, not streamed (the API refuses a streamed one, extended
thinking and a forced `tool_choice`); its answer has no content, `stop_reason: "max_tokens"`, no
output tokens. OpenAI Responses, on a model of the breakpoint regime (GPT-5.6 and later):
`prompt_cache_options.prewarm: true`. Each returns the usage the provider billed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import msgspec

from lamina.session import Usage


@runtime_checkable
class Prewarmer(Protocol):
    """A provider that can write its prompt cache without generating anything."""

    async def prewarm(self, request: Mapping[str, Any]) -> Usage:
        """Send `request` (a rendered body) as a pre-warm; return what the provider billed."""
        ...


def anthropic_prewarm_body(request: Mapping[str, Any]) -> dict[str, Any]:
    """`request` as Anthropic's pre-warm: `max_tokens: 0`, not streamed."""
    body = {**request, "max_tokens": 0}
    body.pop("stream", None)
    return body


def openai_prewarm_body(request: Mapping[str, Any]) -> dict[str, Any]:
    """`request` as OpenAI's pre-warm (Responses): `prompt_cache_options.prewarm: true`, not streamed."""
    options = request.get("prompt_cache_options")
    body = {**request, "prompt_cache_options": {**(options if isinstance(options, Mapping) else {}), "prewarm": True}}
    body.pop("stream", None)
    return body


async def raw_usage(send: Callable[[], Awaitable[Any]], reraise: Callable[[Exception], Exception | None]) -> Usage:
    """The usage of a raw response `send` returns (`with_raw_response`), errors mapped by `reraise`."""
    try:
        raw = await send()
        data = msgspec.json.decode(raw.http_response.content)
    except Exception as exc:
        raise (reraise(exc) or exc) from exc
    usage = (data.get("usage") or {}) if isinstance(data, dict) else {}
    if "prompt_tokens" in usage or "input_tokens_details" in usage:  # OpenAI: cached tokens inside the input
        details = usage.get("input_tokens_details") or usage.get("prompt_tokens_details") or {}
        cached, written = int(details.get("cached_tokens") or 0), int(details.get("cache_write_tokens") or 0)
        total = int(usage.get("input_tokens") or usage.get("prompt_tokens") or 0)
        return Usage(input=total - cached - written, cache_read=cached, cache_write=written)
    return Usage(
        input=int(usage.get("input_tokens") or 0),
        output=int(usage.get("output_tokens") or 0),
        cache_read=int(usage.get("cache_read_input_tokens") or 0),
        cache_write=int(usage.get("cache_creation_input_tokens") or 0),
    )
