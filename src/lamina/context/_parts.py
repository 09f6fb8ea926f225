"""Parts: one piece of context with its provenance, authority and stability class (pure).

Nothing reaches a request without being a `Part` first (SPEC F1). The stability class decides
where placement puts a part (cached prefix, per-turn tail, on demand, exactly once, history);
the tier is its rank in the context budget of the design chapter's §10.18 (SPEC F17).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING

from lamina.defang import Authority, SafeText

if TYPE_CHECKING:
    from lamina.tokens import TokenEstimator

__all__ = [
    "Part",
    "Stability",
    "Tier",
]


class Stability(StrEnum):
    """How often a part changes, which decides where placement puts it."""

    STABLE = "stable"
    """Same bytes turn after turn; goes in the cache-friendly prefix."""
    VOLATILE = "volatile"
    """May change every turn; goes in the tail of the current user message."""
    ON_DEMAND = "on_demand"
    """Not inlined; the model reads it when needed."""
    ONE_SHOT = "one_shot"
    """Delivered exactly once through the outbox."""
    COMPACTABLE = "compactable"
    """Conversation history; summarised by compaction, never deleted from the log."""


class Tier(IntEnum):
    """The context budget's priority order (design chapter §10.18), most important first."""

    RULES = 1
    CATALOGUE = 2
    SESSION_STATE = 3
    ON_DEMAND = 4
    HISTORY = 5
    MEMORY = 6
    TOOL_RESULTS = 7
    ONE_SHOT = 8


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of context: text plus where it came from and how it is treated."""

    key: str
    """A stable identity such as `system.base` or `context.files`, unique within a turn."""
    text: SafeText
    """Lamina's own text or neutralised untrusted text: never a raw string from outside."""
    provenance: str
    """Where the text came from: a file path, a setting, `lamina` for built-in text."""
    authority: Authority
    stability: Stability
    tier: Tier
    media_tokens: int | None = None
    """For a part sent as the provider's media block (an attached image, a PDF read natively): the
    provider's token estimate for it, and `text` is only a label that is not sent. None for every
    other part, whose text is what is sent and counted."""
    digest: str = field(init=False, repr=False, compare=False)
    """SHA-256 of `text`, so stable versions can be compared without the text."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", hashlib.sha256(self.text.encode("utf-8")).hexdigest())

    def token_count(self, estimator: TokenEstimator) -> int:
        """The tokens this part adds to a request: `media_tokens` for media, else `estimator`'s count of its text."""
        return self.media_tokens if self.media_tokens is not None else estimator.count(self.text)
