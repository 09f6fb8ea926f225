"""Estimated cost of a turn: a small table of list prices (pure).

Prices are US dollars per million tokens, from the providers' public price pages (standard tier,
5-minute cache writes for Anthropic; OpenAI's older models bill no cache writes). A model matches
its exact id or a dated snapshot of it (`claude-sonnet-4-5-20250929`). A model not in the table
gets no cost estimate: the footer leaves cost out rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from lamina.session import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """List prices of one model, USD per million tokens."""

    input: float
    """Uncached input."""
    output: float
    cache_read: float
    cache_write: float


_OPUS_NEW = Price(5.0, 25.0, 0.50, 6.25)
_OPUS_OLD = Price(15.0, 75.0, 1.50, 18.75)
_SONNET_4 = Price(3.0, 15.0, 0.30, 3.75)

PRICES: Final[dict[str, Price]] = {
    "claude-opus-5": _OPUS_NEW,
    "claude-opus-4-8": _OPUS_NEW,
    "claude-opus-4-7": _OPUS_NEW,
    "claude-opus-4-6": _OPUS_NEW,
    "claude-opus-4-5": _OPUS_NEW,
    "claude-opus-4-1": _OPUS_OLD,
    "claude-opus-4": _OPUS_OLD,
    "claude-sonnet-5": Price(2.0, 10.0, 0.20, 2.50),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4": _SONNET_4,
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "claude-fable-5": Price(10.0, 50.0, 1.0, 12.50),
    "claude-mythos-5": Price(10.0, 50.0, 1.0, 12.50),
    "claude-fable-5-1": Price(10.0, 50.0, 0.25, 12.50),
    "claude-mythos-5-1": Price(10.0, 50.0, 0.25, 12.50),
    "gpt-5": Price(1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.0),
    "gpt-4.1": Price(2.0, 8.0, 0.50, 0.0),
    "gpt-4o": Price(2.50, 10.0, 1.25, 0.0),
}
"""Model id → price. Keep it short and current; unknown models simply show no cost."""

_DATED: Final = re.compile(r"-\d{4}-?\d{2}-?\d{2}$")
"""A snapshot suffix (`-20250929`, `-2025-08-07`): the dated id costs what its alias costs."""


def price_of(model: str) -> Price | None:
    """The price of `model` (an exact id, or a dated snapshot of one), or None if the table does not know it."""
    return PRICES.get(model) or PRICES.get(_DATED.sub("", model))


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
