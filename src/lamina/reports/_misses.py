"""Why a turn missed the prompt cache, in words: the provider's diagnosis, else the simulator's, labelled (pure).

Each model call's `CacheCheck` (on its assistant message) holds the provider's reason and Lamina's
prediction. The provider's is the truth where it gave one; where it gave none (a model without
diagnostics, an unknown previous request, a diagnosis still pending) the prediction stands in,
marked as predicted. docs/providers.md ("Cache diagnostics") tells the reasons.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from lamina.session import AssistantMessage, CacheCheck, CacheMiss, LogEntry

__all__ = ["CacheMissReport", "explain_miss", "session_misses"]

_WORDS: Final = {
    "ttl_expired": "TTL expired",
    "tools_changed": "tools changed",
    "system_changed": "system prompt changed",
    "model_changed": "model changed",
    "messages_changed": "messages changed",
    "unavailable": "thinking or tool choice changed",
    "prompt_cache_key_changed": "cache key changed",
    "context_compacted": "context compacted",
}
_NO_ANSWER: Final = frozenset({"not_found", "pending", "unavailable"})
"""Provider answers that say nothing about this request (the prediction stands in)."""


@dataclass(frozen=True, slots=True)
class CacheMissReport:
    """Why one model call missed the cache, as a report shows it."""

    reason: str
    """The reason's word (`ttl_expired`, `tools_changed`, `messages_changed`, ...)."""
    missed_tokens: int
    entry: int | None
    """For a rewritten prefix: the 1-based message (input item) of the request that differs first."""
    source: Literal["provider", "predicted"]
    agrees: bool | None
    """Whether the simulator predicted the provider's reason (None: only one of them is known)."""

    @property
    def words(self) -> str:
        """`tools changed (4,210 tokens)`, `prefix rewritten at entry 7 (predicted)`."""
        if self.reason == "messages_changed" and self.entry is not None:
            what = f"prefix rewritten at entry {self.entry}"
        else:
            what = _WORDS.get(self.reason, self.reason.replace("_", " "))
        tokens = f" ({self.missed_tokens:,} tokens)" if self.missed_tokens else ""
        return what + tokens + (" (predicted)" if self.source == "predicted" else "")

    @property
    def short(self) -> str:
        """The reason alone, for a status line: `tools changed`, `TTL expired?` (a trailing `?`: predicted)."""
        what = _WORDS.get(self.reason, self.reason.replace("_", " "))
        return what + ("?" if self.source == "predicted" else "")


def explain_miss(check: CacheCheck | None) -> CacheMissReport | None:
    """Why a call missed the cache: the provider's reason where it gave one, else the prediction.

    Args:
        check: The call's cache check (None: none recorded).

    Returns:
        None when nothing missed (or nothing is known); else the reason, its source and whether
        the two sides agree.
    """
    if check is None:
        return None
    provider, predicted = check.provider, check.predicted
    agrees = None if provider is None or predicted is None else provider.reason == predicted.reason
    if provider is not None and provider.reason not in _NO_ANSWER:
        if provider.reason == "none":
            return None
        entry = predicted.entry if predicted is not None and predicted.reason == provider.reason else None
        return _report(provider, "provider", agrees, entry)
    if predicted is None or predicted.reason == "none":
        return None if provider is None else _report(provider, "provider", agrees, None)
    return _report(predicted, "predicted", agrees, predicted.entry)


def _report(
    miss: CacheMiss, source: Literal["provider", "predicted"], agrees: bool | None, entry: int | None
) -> CacheMissReport:
    return CacheMissReport(miss.reason, miss.missed_tokens, entry, source, agrees)


def session_misses(entries: Iterable[LogEntry]) -> list[tuple[AssistantMessage, CacheMissReport]]:
    """Every model call of `entries` that missed the cache, with why, oldest first."""
    found: list[tuple[AssistantMessage, CacheMissReport]] = []
    for entry in entries:
        if isinstance(entry, AssistantMessage):
            report = explain_miss(entry.cache_check)
            if report is not None:
                found.append((entry, report))
    return found
