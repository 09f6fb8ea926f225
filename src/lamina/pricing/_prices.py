"""Estimated cost of a turn: a small table of list prices (pure).

Prices are US dollars per million tokens, from the providers' public price pages (standard tier;
Anthropic's cache writes for 5 minutes and for an hour; long-context prices where a model has them;
OpenAI's older models bill no cache writes). tests/pricing checks them against genai-prices. A model matches
its exact id or a dated snapshot of it (`claude-sonnet-4-5-20250929`). A model not in the table
gets no cost estimate: the footer leaves cost out rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from lamina.session import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """List prices of one model, USD per million tokens.

    Attributes:
        input: Uncached input.
        cache_write: A cache write kept 5 minutes (Anthropic's default).
        cache_write_1h: A cache write kept an hour (Anthropic: twice the input price); None where there is none.
    """

    input: float
    output: float
    cache_read: float
    cache_write: float
    cache_write_1h: float | None = None


LONG_CONTEXT_ABOVE: Final = 200_000
"""Prompt tokens (input, cache reads and writes) above which a model's long-context prices apply."""


def _claude(input: float, output: float, *, cache_read: float | None = None) -> Price:
    """A Claude model's prices: cache reads a tenth of input, writes 1.25 times (5 minutes) or twice (an hour)."""
    read = input / 10 if cache_read is None else cache_read
    return Price(input, output, read, input * 1.25, input * 2)


_OPUS_NEW = _claude(5.0, 25.0)
_OPUS_OLD = _claude(15.0, 75.0)
_SONNET_4 = _claude(3.0, 15.0)

PRICES: Final[dict[str, Price]] = {
    "claude-opus-5": _OPUS_NEW,
    "claude-opus-4-8": _OPUS_NEW,
    "claude-opus-4-7": _OPUS_NEW,
    "claude-opus-4-6": _OPUS_NEW,
    "claude-opus-4-5": _OPUS_NEW,
    "claude-opus-4-1": _OPUS_OLD,
    "claude-opus-4": _OPUS_OLD,
    "claude-sonnet-5": _claude(2.0, 10.0),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4": _SONNET_4,
    "claude-haiku-4-5": _claude(1.0, 5.0),
    "claude-3-5-haiku": _claude(0.80, 4.0),
    "claude-fable-5": _claude(10.0, 50.0),
    "claude-mythos-5": _claude(10.0, 50.0),
    "claude-fable-5-1": _claude(10.0, 50.0, cache_read=0.25),
    "claude-mythos-5-1": _claude(10.0, 50.0, cache_read=0.25),
    "gpt-5": Price(1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.0),
    "gpt-4.1": Price(2.0, 8.0, 0.50, 0.0),
    "gpt-4o": Price(2.50, 10.0, 1.25, 0.0),
}
"""Model id → price. Keep it short and current; unknown models simply show no cost."""

LONG_CONTEXT_PRICES: Final[dict[str, Price]] = {
    "claude-sonnet-4-5": _claude(6.0, 22.5),
    "claude-sonnet-4": _claude(6.0, 22.5),
}
"""Model id → the prices of a prompt over `LONG_CONTEXT_ABOVE` tokens (every token of it), where they differ.

Sonnet 4 and 4.5 with the 1M-token context: twice the input prices, 1.5 times the output price.
"""

_DATED: Final = re.compile(r"-\d{4}-?\d{2}-?\d{2}$")
"""A snapshot suffix (`-20250929`, `-2025-08-07`): the dated id costs what its alias costs."""


def price_of(model: str) -> Price | None:
    """The price of `model` (an exact id, or a dated snapshot of one), or None if the table does not know it."""
    return PRICES.get(model) or PRICES.get(_DATED.sub("", model))


def cost_of(model: str, usage: Usage, *, cache_ttl: Literal["5m", "1h"] = "5m") -> float | None:
    """Estimated USD for `usage` on `model`, or None when the model's prices are unknown.

    A prompt over `LONG_CONTEXT_ABOVE` tokens is priced at the model's long-context prices (if it
    has any); cache writes at the `cache_ttl` they were made with.
    """
    price = price_of(model)
    if price is None:
        return None
    if usage.input + usage.cache_read + usage.cache_write > LONG_CONTEXT_ABOVE:
        price = LONG_CONTEXT_PRICES.get(model) or LONG_CONTEXT_PRICES.get(_DATED.sub("", model)) or price
    write = price.cache_write_1h if cache_ttl == "1h" and price.cache_write_1h is not None else price.cache_write
    return (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_read * price.cache_read
        + usage.cache_write * write
    ) / 1_000_000
