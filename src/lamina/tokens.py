"""Token estimation: one pluggable estimator for everything that counts tokens (pure).

Providers do not ship offline tokenizers for current models, so Lamina estimates from characters;
the context engine learns the ratio between its estimate and the usage a provider reports
(`engine.compactor.observe_usage`) and scales the estimate where it decides (the compaction
threshold). Every module that needs a token count takes a `TokenEstimator`; nothing counts
tokens any other way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "DEFAULT_ESTIMATOR",
    "CharTokenEstimator",
    "TokenEstimator",
]


@runtime_checkable
class TokenEstimator(Protocol):
    """Anything that turns text into a token count."""

    def count(self, text: str) -> int:
        """Estimated tokens in `text` (0 for the empty string)."""
        ...


@dataclass(frozen=True, slots=True)
class CharTokenEstimator:
    """Characters-per-token estimate, calibrated from usage that providers report.

    The default of 3.5 characters per token is Anthropic's published rule of thumb for English;
    code and prose come out a little higher, JSON and CJK text lower, hence the engine's calibration.
    """

    chars_per_token: float = 3.5

    def count(self, text: str) -> int:
        """The estimated tokens of `text`: 0 for empty text, else at least 1."""
        if not text:
            return 0
        return max(1, math.ceil(len(text) / self.chars_per_token))


DEFAULT_ESTIMATOR = CharTokenEstimator()
"""The estimator used when a caller does not pass one."""
