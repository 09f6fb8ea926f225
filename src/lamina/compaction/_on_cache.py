"""The summarising request on the session's cached prefix: its own request, the instruction at the end (pure).

The session renders its next request with the summary instruction as the user's message (the
same system, tools and messages the last request sent, byte for byte, with the breakpoints where
the provider's cache rules place them), so the history is read at the cache-read price. Described in
docs/compaction.md ("Summarising on the cache").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from lamina.placement import AnthropicTarget, RenderedRequest, RenderTarget, SdkManagedPrompt
from lamina.pricing import Outlook, SummaryCall
from lamina.tokens import TokenEstimator


@dataclass(frozen=True, slots=True)
class CachedPrefix:
    """The session's request as the provider's cache holds it, ready to take an instruction at its end."""

    render: Callable[[str], RenderedRequest]
    """The session's next request with the given text as the user's message, for the session's provider."""
    tokens: int
    """Its tokens before that text: what a request on the cache reads again."""
    outlook: Outlook
    """The prices and the cache's state now (what the cache still holds of the prefix)."""
    target: RenderTarget
    """Whom the request is for (the session's provider's target)."""


SummaryPrefix: TypeAlias = Callable[[], "CachedPrefix | None"]
"""The session's cached prefix now, or None when there is none to reuse (an SDK-managed backend, an overflow)."""


@dataclass(frozen=True, slots=True)
class SummaryAsk:
    """One summarising request, both ways: the fresh prompt and the instruction for the cached prefix."""

    fresh_prompt: str
    """The whole request text of a fresh request (the conversation in it as defanged data)."""
    instruction: str
    """What a request on the cache appends after the session's own messages."""
    prefix: CachedPrefix | None
    """The session's cached prefix (None: only a fresh request can be made)."""

    def call(self, estimator: TokenEstimator, summary_tokens: int) -> SummaryCall:
        """The figures `lamina.pricing.price_summary_call` prices (no server route)."""
        return SummaryCall(
            fresh_tokens=estimator.count(self.fresh_prompt),
            summary_tokens=summary_tokens,
            cached_tokens=self.prefix.tokens if self.prefix is not None else None,
            cached_new_tokens=estimator.count(self.instruction),
        )


def cached_summary_request(prefix: CachedPrefix, instruction: str) -> RenderedRequest:
    """The session's own request with `instruction` as its last user message.

    On Anthropic the breakpoint on the instruction is written under the short TTL (nothing reads it
    again); every other byte before it is the session's, so the provider reads the prefix from its cache.
    """
    request = prefix.render(instruction)
    if isinstance(request, SdkManagedPrompt) or not isinstance(prefix.target, AnthropicTarget):
        return request
    body = cast(dict[str, Any], dict(request))
    messages = list(body.get("messages") or ())
    if messages and isinstance(messages[-1].get("content"), list):
        content = [
            {**b, "cache_control": {"type": "ephemeral", "ttl": prefix.target.anthropic_cache_ttl}}
            if isinstance(b, dict) and "cache_control" in b
            else b
            for b in messages[-1]["content"]
        ]
        messages[-1] = {**messages[-1], "content": content}
        body["messages"] = messages
    return cast(RenderedRequest, body)
