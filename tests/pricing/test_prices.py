"""The list prices: a model's id or a dated snapshot of it, and no guess for a model the table does not know."""

from __future__ import annotations

import pytest

from lamina.pricing import cost_of
from lamina.pricing._prices import PRICES, price_of
from lamina.session import Usage


def test_a_dated_snapshot_costs_what_its_alias_costs() -> None:
    assert price_of("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert price_of("gpt-5-2025-08-07") == PRICES["gpt-5"]
    assert price_of("no-such-model") is None


def test_a_turn_is_priced_per_million_tokens_of_each_kind() -> None:
    usage = Usage(input=1_000_000, output=100_000, cache_read=2_000_000, cache_write=400_000)
    assert cost_of("claude-sonnet-4-5", usage) == pytest.approx(3.0 + 1.5 + 0.6 + 1.5)
    assert cost_of("no-such-model", usage) is None
