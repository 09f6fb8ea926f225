"""Estimated cost of a turn: a small table of list prices (pure).

Prices are US dollars per million tokens, from the providers' public price pages (standard tier,
5-minute cache writes for Anthropic; OpenAI bills no cache writes). A model is matched by the
longest entry that its id starts with, so dated ids (`claude-sonnet-4-5-20250929`) match too. A
model not in the table gets no cost estimate: the footer leaves cost out rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from lamina.session.entries import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """List prices of one model, USD per million tokens."""

    input: float
    """Uncached input."""
    output: float
    cache_read: float
    cache_write: float


PRICES: Final[dict[str, Price]] = {
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "gpt-5-nano": Price(0.05, 0.40, 0.005, 0.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.0),
    "gpt-5": Price(1.25, 10.0, 0.125, 0.0),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10, 0.0),
    "gpt-4.1": Price(2.0, 8.0, 0.50, 0.0),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075, 0.0),
    "gpt-4o": Price(2.50, 10.0, 1.25, 0.0),
}
"""Model id prefix → price. Keep it short and current; unknown models simply show no cost."""


def price_of(model: str) -> Price | None:
    """The price entry for `model` (longest matching prefix), or None if the table does not know it."""
    matches = [prefix for prefix in PRICES if model.startswith(prefix)]
    return PRICES[max(matches, key=len)] if matches else None


def cost_of(model: str, usage: Usage) -> float | None:
    """Estimated USD for `usage` on `model`, or None when the model's prices are unknown."""
    price = price_of(model)
    if price is None:
        return None
    return (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * price.cache_read
        + usage.cache_write * price.cache_write
    ) / 1_000_000
