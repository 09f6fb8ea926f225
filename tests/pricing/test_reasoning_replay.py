"""The replay of completed turns' reasoning, priced: keep it (the cached prefix holds) or drop it (fewer tokens)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lamina.pricing import (
    CachePrices,
    CacheState,
    Outlook,
    SessionPace,
    describe_decision,
    price_reasoning_replay,
)
from tests.conftest import examples

_GAPS = (90.0, 120.0, 400.0, 60.0)
"""A pace that does not change with the session's length, so only the requests ahead vary."""

prices = st.sampled_from([CachePrices.anthropic(), CachePrices.openai()])
idles = st.one_of(st.none(), st.floats(0.0, 10_000.0))


def _outlook(prices: CachePrices, *, history: int, turns: int, idle: float | None = 30.0) -> Outlook:
    pace = SessionPace(gaps=_GAPS, turns=turns, calls=3 * turns)
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=300, since_turn_mark=history // 3)
    return Outlook(prices, pace, cache)


@st.composite
def figures(draw: st.DrawFn) -> tuple[int, int, int]:
    """(history as kept, reasoning in it, what dropping rewrites): consistent sizes."""
    history = draw(st.integers(0, 200_000))
    reasoning = draw(st.integers(0, history))
    rewrite = draw(st.integers(0, history - reasoning))
    return history, reasoning, rewrite


@given(prices, figures(), st.integers(0, 400), st.integers(0, 400), idles)
@settings(max_examples=examples(300), deadline=None)
def test_more_requests_ahead_never_turn_drop_into_keep(
    p: CachePrices, f: tuple[int, int, int], fewer: int, more: int, idle: float | None
) -> None:
    history, reasoning, rewrite = f
    fewer, more = sorted((fewer, more))
    short, _ = price_reasoning_replay(
        _outlook(p, history=history, turns=fewer, idle=idle), reasoning_tokens=reasoning, drop_rewrite_tokens=rewrite
    )
    long, _ = price_reasoning_replay(
        _outlook(p, history=history, turns=more, idle=idle), reasoning_tokens=reasoning, drop_rewrite_tokens=rewrite
    )
    assert not (short == "drop" and long == "keep")


@given(prices, figures(), st.integers(0, 200_000), st.integers(0, 400), idles)
@settings(max_examples=examples(300), deadline=None)
def test_a_larger_rewrite_never_turns_keep_into_drop(
    p: CachePrices, f: tuple[int, int, int], other: int, turns: int, idle: float | None
) -> None:
    history, reasoning, rewrite = f
    smaller, larger = sorted((rewrite, min(other, history - reasoning)))
    outlook = _outlook(p, history=history, turns=turns, idle=idle)
    with_larger, _ = price_reasoning_replay(outlook, reasoning_tokens=reasoning, drop_rewrite_tokens=larger)
    with_smaller, _ = price_reasoning_replay(outlook, reasoning_tokens=reasoning, drop_rewrite_tokens=smaller)
    assert not (with_larger == "drop" and with_smaller == "keep")


@given(prices, figures(), st.integers(0, 400))
@settings(max_examples=examples(200), deadline=None)
def test_keep_when_dropping_rewrites_more_than_it_saves(p: CachePrices, f: tuple[int, int, int], turns: int) -> None:
    """Warm cache: the rewrite, at the write price over the read, against the reasoning's reads and cold starts."""
    history, reasoning, rewrite = f
    outlook = _outlook(p, history=history, turns=turns)
    cold = outlook.cache.cold_tokens(p)
    saved = reasoning * (p.read + outlook.per_token_later())
    cost = (max(rewrite, min(cold, history - reasoning)) - min(cold, history)) * (p.write_5m - p.read)
    assume(abs(saved - cost) > 1e-6)
    choice, decision = price_reasoning_replay(outlook, reasoning_tokens=reasoning, drop_rewrite_tokens=rewrite)
    assert choice == ("keep" if cost > saved else "drop")
    assert decision.expected <= decision.expected_nothing


@given(prices, figures(), st.integers(0, 400))
@settings(max_examples=examples(200), deadline=None)
def test_a_cold_cache_drops_whatever_reasoning_there_is(p: CachePrices, f: tuple[int, int, int], turns: int) -> None:
    """Nothing is cached: every token is written this time anyway, so the reasoning is only a price."""
    history, reasoning, rewrite = f
    outlook = _outlook(p, history=history, turns=turns, idle=None)
    choice, _ = price_reasoning_replay(outlook, reasoning_tokens=reasoning, drop_rewrite_tokens=rewrite)
    assert choice == ("drop" if reasoning else "keep")


@given(prices, st.integers(0, 200_000), st.integers(0, 400), idles)
@settings(max_examples=examples(100), deadline=None)
def test_no_reasoning_keeps(p: CachePrices, history: int, turns: int, idle: float | None) -> None:
    outlook = _outlook(p, history=history, turns=turns, idle=idle)
    choice, _ = price_reasoning_replay(outlook, reasoning_tokens=0, drop_rewrite_tokens=history)
    assert choice == "keep"


def test_going_back_to_keeping_pays_its_own_rewrite() -> None:
    """The last request left the reasoning out: keeping now rewrites from there, dropping again changes nothing."""
    outlook = _outlook(CachePrices.anthropic(), history=50_000, turns=2)
    again, _ = price_reasoning_replay(outlook, reasoning_tokens=3_000, drop_rewrite_tokens=0)
    assert again == "drop"
    back, _ = price_reasoning_replay(outlook, reasoning_tokens=3_000, drop_rewrite_tokens=0, keep_rewrite_tokens=40_000)
    assert back == "drop"


def test_a_short_session_keeps_a_long_one_drops() -> None:
    """3,000 reasoning tokens before a 30,000-token tail on Anthropic: dropping pays from 96 calls ahead (32 turns)."""
    p = CachePrices.anthropic()
    short = _outlook(p, history=40_000, turns=4)
    long = _outlook(p, history=40_000, turns=60)
    choice, decision = price_reasoning_replay(short, reasoning_tokens=3_000, drop_rewrite_tokens=30_000)
    assert choice == "keep"
    assert describe_decision(decision).startswith("send completed turns' reasoning back: expected")
    assert decision.expected == round(short.nothing_bill(), 1) < decision.expected_nothing  # dropping costs more
    choice, decision = price_reasoning_replay(long, reasoning_tokens=3_000, drop_rewrite_tokens=30_000)
    assert choice == "drop"
    assert "drop completed turns' reasoning" in describe_decision(decision)
    assert decision.expected < decision.expected_nothing
