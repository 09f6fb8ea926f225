"""Why a model call missed the prompt cache, as the log records it beside the call's answer (pure data)."""

from __future__ import annotations

import msgspec


class CacheMiss(msgspec.Struct, frozen=True, kw_only=True):
    """Why one request did not read the previous request's prefix from the prompt cache, as one side tells it."""

    reason: str
    """`none` (nothing diverged, nothing expired), `ttl_expired`, `model_changed`, `system_changed`,
    `tools_changed`, `messages_changed`, `not_found` (the provider has no record of the previous request),
    `unavailable`, `pending` (the provider had not finished comparing), or another word of the provider's
    own (`reasoning_effort_changed`, `prompt_cache_key_changed`, ...)."""
    missed_tokens: int = 0
    """About how many input tokens would have been read from the cache had the prefix matched."""
    entry: int | None = None
    """Where the prefix was rewritten: the 1-based position, in the request's messages (input items), of the
    first one that differs from the previous request's (None: not known, or not a message change)."""


class CacheCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One model call's cache miss: the provider's own diagnosis beside the cache simulator's prediction."""

    provider: CacheMiss | None = None
    """What the provider's cache diagnostics said (None: not asked for, or the model has none)."""
    predicted: CacheMiss | None = None
    """What Lamina's cache simulator predicted, from the previous request of the session it sent."""
