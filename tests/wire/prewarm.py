"""Anthropic's pre-warm request on the wire server: `max_tokens: 0` writes the cache and generates nothing.

The API (provider-caching.md, "Pre-warming"): the request is billed as any other (cache reads and
writes by the simulator), returns no content with `stop_reason: "max_tokens"` and zero output
tokens, and is refused with `stream: true`, extended thinking or a forced `tool_choice`. It uses no
scripted step (as a standalone compaction uses none): the model never runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina.cachesim import CacheUsage
from tests.wire.anthropic_api import thinking_on
from tests.wire.script import WireResponse, json_response


def is_prewarm(body: Mapping[str, Any]) -> bool:
    """Whether `body` is a pre-warm (`max_tokens: 0`)."""
    return body.get("max_tokens") == 0


def prewarm_problem(body: Mapping[str, Any]) -> str | None:
    """Why the API refuses this pre-warm with 400, or None."""
    if body.get("stream"):
        return "max_tokens: 0 is not supported with streaming"
    if thinking_on(body):
        return "max_tokens: 0 is not supported with extended thinking"
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        return "max_tokens: 0 is not supported with a forced tool_choice"
    return None


def prewarm_reply(body: Mapping[str, Any], usage: CacheUsage, n: int) -> WireResponse:
    """The pre-warm's answer: no content, `stop_reason: "max_tokens"`, the cache's bill, no output tokens."""
    billed = {
        "input_tokens": usage.uncached,
        "cache_creation_input_tokens": usage.write,
        "cache_read_input_tokens": usage.read,
        "cache_creation": {"ephemeral_5m_input_tokens": usage.write_5m, "ephemeral_1h_input_tokens": usage.write_1h},
        "output_tokens": 0,
        "service_tier": "standard",
    }
    message = {"id": f"msg_wire_{n:04d}", "type": "message", "role": "assistant", "model": body.get("model", "")}
    return json_response(
        200, {**message, "content": [], "stop_reason": "max_tokens", "stop_sequence": None, "usage": billed}
    )
