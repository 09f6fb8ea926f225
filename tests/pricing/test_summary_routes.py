"""The summarising call's route (fresh, on the cache, the server's): the cheapest taken, every price named."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.pricing import (
    DEFAULT_PRICES,
    CachePrices,
    CacheState,
    Outlook,
    SessionPace,
    SummaryCall,
    call_prices,
    describe_decision,
    price_compaction_backend,
    price_summary_call,
)
from tests.conftest import examples


def _outlook(idle: float | None, history: int, *, turns: int = 10, prices: CachePrices = DEFAULT_PRICES) -> Outlook:
    pace = SessionPace(gaps=(90.0,) * turns, turns=turns, calls=2 * turns)
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=200, since_turn_mark=history // 4)
    return Outlook(prices, pace, cache)


def _call(history: int, **routes: int | None) -> SummaryCall:
    return SummaryCall(fresh_tokens=history, summary_tokens=2_000, **routes)  # type: ignore[arg-type]


def test_on_a_warm_cache_the_summarising_call_reads_the_history_at_the_read_price() -> None:
    outlook = _outlook(30.0, 150_000)
    call = _call(150_000, cached_tokens=170_000, cached_new_tokens=1_500)
    route, decision = price_summary_call(outlook, call)
    assert route == "cached" and decision.action == "lamina_cached_compaction"
    prices = call_prices(outlook, call)
    inputs = {r: prices[r] - 2_000 * 5 for r in prices}  # the summary's output apart
    assert inputs["cached"] <= 0.3 * inputs["fresh"]
    assert decision.reason == f"summarising call on the cache {prices['cached']:,.0f}, fresh {prices['fresh']:,.0f}"


def test_on_a_cold_cache_a_fresh_request_is_cheaper_than_writing_the_prefix_again() -> None:
    outlook = _outlook(7_200.0, 150_000)  # past the 1-hour TTL: nothing of the history is cached
    route, decision = price_summary_call(outlook, _call(150_000, cached_tokens=170_000, cached_new_tokens=1_500))
    assert route == "fresh" and decision.action == "lamina_compaction"


def test_without_a_cached_prefix_or_a_server_form_the_fresh_request_is_the_only_route() -> None:
    route, decision = price_summary_call(_outlook(30.0, 50_000), _call(50_000))
    assert route == "fresh" and decision.expected == decision.expected_nothing
    assert decision.reason == "summarising call fresh 60,000"


def test_the_server_route_prices_as_the_backend_choice_does_without_a_cached_prefix() -> None:
    outlook = _outlook(30.0, 80_000)
    call = SummaryCall(
        fresh_tokens=80_000 + 3_000,
        summary_tokens=2_000,
        server_tokens=80_000,
        server_summary_tokens=1_500,
        server_rewrite_tokens=4_000,
    )
    route, decision = price_summary_call(outlook, call)
    backend, before = price_compaction_backend(
        outlook,
        summarised_tokens=80_000,
        lamina_prompt_tokens=3_000,
        lamina_summary_tokens=2_000,
        server_summary_tokens=1_500,
        server_rewrite_tokens=4_000,
    )
    assert (route == "server") == (backend == "server")
    assert (decision.expected, decision.expected_nothing) == (before.expected, before.expected_nothing)


def test_a_decision_in_words_names_the_route_and_every_price() -> None:
    _, decision = price_summary_call(_outlook(30.0, 150_000), _call(150_000, cached_tokens=170_000))
    words = describe_decision(decision)
    assert words.startswith("summarised on the session's cached prefix: expected")
    assert "summarising call on the cache" in words and "fresh" in words


@settings(max_examples=examples(300), deadline=None)
@given(
    idle=st.one_of(st.none(), st.floats(0, 10_000)),
    history=st.integers(0, 300_000),
    fresh=st.integers(0, 300_000),
    cached=st.one_of(st.none(), st.integers(0, 400_000)),
    new=st.integers(0, 10_000),
    server=st.one_of(st.none(), st.integers(0, 300_000)),
    server_summary=st.integers(0, 8_000),
    rewrite=st.integers(0, 50_000),
    openai=st.booleans(),
)
def test_the_route_taken_is_never_dearer_than_another_on_its_estimate(
    idle: float | None,
    history: int,
    fresh: int,
    cached: int | None,
    new: int,
    server: int | None,
    server_summary: int,
    rewrite: int,
    openai: bool,
) -> None:
    prices = CachePrices.openai() if openai else DEFAULT_PRICES
    call = SummaryCall(
        fresh_tokens=fresh,
        summary_tokens=2_000,
        cached_tokens=cached,
        cached_new_tokens=new,
        server_tokens=server,
        server_summary_tokens=server_summary,
        server_rewrite_tokens=rewrite,
    )
    route, decision = price_summary_call(_outlook(idle, history, prices=prices), call)
    assert decision.expected <= decision.expected_nothing
    assert (route == "cached") <= (cached is not None) and (route == "server") <= (server is not None)
