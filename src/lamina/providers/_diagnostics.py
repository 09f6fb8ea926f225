"""The providers' cache diagnostics: the request field that asks for them, and the answer in Lamina's words (pure).

Anthropic: `diagnostics: {"previous_message_id": ...}` (null on a session's first request, to opt
in) and the response's `diagnostics.cache_miss_reason`. OpenAI Responses:
`prompt_cache_options.comparison_response_id` and the response's `prompt_cache_diagnostics`. Both
are sent only where `Capabilities.cache_diagnostics` says the model has them; docs/providers.md
tells the reasons.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, cast

from lamina.placement import AnthropicTarget, OpenAIResponsesTarget, RenderedRequest, RenderTarget, SdkManagedPrompt
from lamina.session import CacheMiss

_ANTHROPIC_WORDS: Final = {"previous_message_not_found": "not_found"}
_REASON: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""A reason as the APIs write them (`tools_changed`); anything else is kept as `unavailable`, never shown raw."""
_OPENAI_WORDS: Final = {
    "cache_hit": "none",
    "comparison_response_not_found": "not_found",
    "input_changed": "messages_changed",
}


def ask_cache_diagnostics(request: RenderedRequest, target: RenderTarget, previous_id: str | None) -> RenderedRequest:
    """`request` with the field that asks the provider why it missed the cache, compared with `previous_id`.

    Args:
        request: The rendered body.
        target: The target it was rendered for: an Anthropic Messages or OpenAI Responses body gets
            the field; any other is returned as it is.
        previous_id: The previous response's id in the session (None: its first request; Anthropic
            opts in with null, OpenAI has nothing to compare with and is sent nothing).

    Returns:
        A new body, or `request` itself.
    """
    if isinstance(request, SdkManagedPrompt):
        return request
    body = cast("Mapping[str, object]", request)
    if isinstance(target, AnthropicTarget):
        return cast("RenderedRequest", {**body, "diagnostics": {"previous_message_id": previous_id}})
    if isinstance(target, OpenAIResponsesTarget) and previous_id is not None:
        options = body.get("prompt_cache_options")
        merged = {**(options if isinstance(options, Mapping) else {}), "comparison_response_id": previous_id}
        return cast("RenderedRequest", {**body, "prompt_cache_options": merged})
    return request


def asked_diagnostics(request: RenderedRequest) -> bool:
    """Whether `request` asks for cache diagnostics (so an absent answer means no divergence)."""
    if isinstance(request, SdkManagedPrompt):
        return False
    body = cast("Mapping[str, object]", request)
    options = body.get("prompt_cache_options")
    return "diagnostics" in body or (isinstance(options, Mapping) and "comparison_response_id" in options)


def anthropic_cache_miss(diagnostics: object) -> CacheMiss:
    """An Anthropic response's `diagnostics` (asked for) in Lamina's words.

    Args:
        diagnostics: The response's `diagnostics` (an SDK `Diagnostics` or None).

    Returns:
        `none` for null (no divergence), `pending` for a null `cache_miss_reason`, else its type
        (`previous_message_not_found` as `not_found`) with `cache_missed_input_tokens`.
    """
    if diagnostics is None:
        return CacheMiss(reason="none")
    reason = getattr(diagnostics, "cache_miss_reason", None)
    if reason is None:
        return CacheMiss(reason="pending")
    kind = str(getattr(reason, "type", "unavailable"))
    missed = getattr(reason, "cache_missed_input_tokens", 0)
    return CacheMiss(reason=_reason(_ANTHROPIC_WORDS.get(kind, kind)), missed_tokens=_tokens(missed))


def openai_cache_miss(diagnostics: object) -> CacheMiss | None:
    """An OpenAI response's `prompt_cache_diagnostics` in Lamina's words.

    Args:
        diagnostics: The response's `prompt_cache_diagnostics` (an SDK model or None).

    Returns:
        None when the response has none (the feature is not enabled for the account); `none` for a
        `cache_hit`; a `cache_miss`'s `reason` (`input_changed` as `messages_changed`) with
        `cache_missed_tokens`; `not_found` or `unavailable` otherwise.
    """
    if diagnostics is None:
        return None
    kind = str(getattr(diagnostics, "type", "unavailable"))
    if kind == "cache_miss":
        kind = str(getattr(diagnostics, "reason", "unavailable"))
    missed = getattr(diagnostics, "cache_missed_tokens", 0)
    return CacheMiss(reason=_reason(_OPENAI_WORDS.get(kind, kind)), missed_tokens=_tokens(missed))


def _reason(kind: str) -> str:
    """The provider's reason when it reads as one (a new reason of theirs is kept), else `unavailable`."""
    return kind if _REASON.fullmatch(kind) else "unavailable"


def _tokens(value: object) -> int:
    """A missed-token count the provider gave, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
