"""The priced TTL on OpenAI's breakpoint regime (30 minutes or 12 hours), beside Anthropic's (5 minutes or 1 hour)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.cachesim import OpenAIBreakpointRules
from lamina.placement import OpenAIChatTarget, OpenAIResponsesTarget
from lamina.pricing import (
    CachePrices,
    CacheState,
    Outlook,
    SessionPace,
    choose_turn_ttl,
    describe_decision,
    kept_default_ttl,
)
from tests.conftest import examples

OPENAI = CachePrices.openai_breakpoints()


def _outlook(prices: CachePrices, gaps: tuple[float, ...], *, idle: float | None = 60.0) -> Outlook:
    pace = SessionPace(gaps=gaps, turns=len(gaps) + 1, calls=3 * (len(gaps) + 1))
    cache = CacheState(idle_seconds=idle, history_tokens=60_000, since_request=300, since_turn_mark=4_000)
    return Outlook(prices, pace, cache)


@settings(max_examples=examples(400), deadline=None)
@given(
    st.sampled_from([OPENAI, CachePrices.anthropic()]),
    st.lists(st.floats(1.0, 100_000.0), max_size=30),
    st.one_of(st.none(), st.floats(0.0, 100_000.0)),
    st.integers(0, 400_000),
    st.integers(0, 50_000),
    st.floats(0.0, 40_000.0),
)
def test_the_priced_ttl_is_never_worse_than_the_default_on_its_own_estimate(
    prices: CachePrices, gaps: list[float], idle: float | None, history: int, since: int, turn_tokens: float
) -> None:
    pace = SessionPace(gaps=tuple(gaps), turns=len(gaps), calls=2 * len(gaps))
    cache = CacheState(
        idle_seconds=idle, history_tokens=history, since_request=min(since, history), since_turn_mark=since
    )
    ttl, decision = choose_turn_ttl(Outlook(prices, pace, cache), turn_tokens=turn_tokens)
    short, long = (f"ttl_{name}" for name in prices.ttl_names)
    assert decision.action == (long if ttl == "1h" else short)
    default = long if prices.long_default else short
    if decision.action != default:  # weighed against the default, it must cost less
        assert decision.expected <= decision.expected_nothing


def test_the_12_hour_ttl_follows_long_gaps_and_30_minutes_short_ones() -> None:
    assert choose_turn_ttl(_outlook(OPENAI, (5_400.0,) * 12), turn_tokens=3_000)[:1] == ("1h",)
    # the whole history to write: the premium on all of it pays only when the middle gaps are likely
    assert choose_turn_ttl(_outlook(OPENAI, (120.0,) * 12, idle=None), turn_tokens=3_000)[:1] == ("5m",)
    assert choose_turn_ttl(_outlook(OPENAI, (90_000.0,) * 12, idle=None), turn_tokens=3_000)[:1] == ("5m",)
    assert choose_turn_ttl(_outlook(OPENAI, (5_400.0,) * 12, idle=None), turn_tokens=3_000)[:1] == ("1h",)
    _, decision = choose_turn_ttl(_outlook(OPENAI, (5_400.0,) * 12), turn_tokens=3_000)
    assert decision.action == "ttl_12h" and describe_decision(decision).startswith("12-hour TTL: expected")
    assert "against" in describe_decision(decision) and "with the 30-minute TTL" in describe_decision(decision)


def test_the_prices_of_each_openai_target() -> None:
    rules = OpenAIBreakpointRules()
    assert (OPENAI.write_5m, OPENAI.write_1h, OPENAI.read) == (1.25, rules.write_12h_multiplier, 0.1)
    assert (OPENAI.ttl_5m_seconds, OPENAI.ttl_1h_seconds) == (1800.0, 43_200.0)
    assert CachePrices.for_target(OpenAIResponsesTarget("gpt-5.6", cache_breakpoints=True)) == OPENAI
    chat = CachePrices.for_target(OpenAIChatTarget("gpt-5.6", cache_breakpoints=True))
    assert not chat.choose_ttl and chat.write_5m == 1.25
    ttl, decision = choose_turn_ttl(_outlook(chat, (5_400.0,) * 12), turn_tokens=3_000)
    assert (ttl, decision.action) == ("5m", "ttl_30m")
    assert describe_decision(decision).endswith("the provider has no other TTL") or "no other TTL" in describe_decision(
        decision
    )
    assert CachePrices.for_target(OpenAIResponsesTarget("gpt-5")) == CachePrices.openai()  # the older regime


def test_the_turn_breakpoint_takes_the_chosen_ttl_or_the_targets() -> None:
    target = OpenAIResponsesTarget("gpt-5.6", cache_breakpoints=True)
    assert [target.breakpoint_ttl(c) for c in (None, "5m", "1h")] == ["30m", "30m", "12h"]
    fixed = OpenAIResponsesTarget("gpt-5.6", cache_breakpoints=True, openai_cache_ttl="30m")
    assert fixed.breakpoint_ttl("1h") == "30m"


def test_reports_leave_out_only_a_turn_that_kept_its_providers_default_ttl() -> None:
    # Anthropic's default is the hour, OpenAI's (GPT-5.6 and later) the half hour: either is routine
    assert kept_default_ttl("turn TTL", "ttl_1h") and kept_default_ttl("turn TTL", "ttl_30m")
    assert not kept_default_ttl("turn TTL", "ttl_5m") and not kept_default_ttl("turn TTL", "ttl_12h")
    assert not kept_default_ttl("prune", "ttl_1h")
