"""The list prices: a model's id or a dated snapshot of it, and no guess for a model the table does not know."""

from __future__ import annotations

import pytest

from lamina.pricing import cost_of
from lamina.pricing._prices import LONG_CONTEXT_ABOVE, LONG_CONTEXT_PRICES, PRICES, price_of
from lamina.session import Usage


def test_a_dated_snapshot_costs_what_its_alias_costs() -> None:
    assert price_of("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]
    assert price_of("gpt-5-2025-08-07") == PRICES["gpt-5"]
    assert price_of("no-such-model") is None


def test_a_turn_is_priced_per_million_tokens_of_each_kind() -> None:
    usage = Usage(input=1_000_000, output=100_000, cache_read=2_000_000, cache_write=400_000)
    assert cost_of("claude-sonnet-4-6", usage) == pytest.approx(3.0 + 1.5 + 0.6 + 1.5)
    assert cost_of("no-such-model", usage) is None


def test_a_prompt_over_200k_tokens_costs_the_long_context_prices() -> None:
    short = Usage(input=200_000, output=10_000)
    long = Usage(input=200_001, output=10_000)
    assert cost_of("claude-sonnet-4-5", short) == pytest.approx(0.6 + 0.15)
    assert cost_of("claude-sonnet-4-5", long) == pytest.approx(200_001 * 6.0 / 1e6 + 10_000 * 22.5 / 1e6)
    assert cost_of("claude-opus-4-5", long) == pytest.approx(200_001 * 5.0 / 1e6 + 10_000 * 25.0 / 1e6)  # no tier


def test_an_hour_long_cache_write_costs_twice_the_input_price() -> None:
    usage = Usage(cache_write=1_000_000)
    assert cost_of("claude-haiku-4-5", usage) == pytest.approx(1.25)
    assert cost_of("claude-haiku-4-5", usage, cache_ttl="1h") == pytest.approx(2.0)
    assert cost_of("gpt-5", usage, cache_ttl="1h") == pytest.approx(0.0)  # OpenAI bills no cache writes


def test_the_table_agrees_with_genai_prices_for_the_models_both_know() -> None:
    genai = pytest.importorskip("genai_prices")
    differences: list[str] = []
    compared = 0
    for model, price in sorted(PRICES.items()):
        provider = "anthropic" if model.startswith("claude") else "openai"
        try:
            theirs = genai.calc_price(genai.Usage(input_tokens=1), model_ref=model, provider_id=provider).model_price
        except LookupError:
            continue  # a model genai-prices does not know
        compared += 1
        for field in ("input", "output", "cache_read", "cache_write"):
            listed = getattr(theirs, f"{field}_mtok")
            base = getattr(listed, "base", listed)
            if float(base or 0) != getattr(price, field):
                differences.append(f"{model} {field}: ours {getattr(price, field)}, genai-prices {base}")
            tiers = getattr(listed, "tiers", None) or ()
            for tier in tiers:
                long = LONG_CONTEXT_PRICES.get(model) if tier.start == LONG_CONTEXT_ABOVE else None
                ours = getattr(long, field, None)
                if ours != float(tier.price):
                    differences.append(f"{model} {field} above {tier.start:,}: ours {ours}, genai-prices {tier.price}")
    assert compared >= 10
    assert not differences, "\n".join(differences)
