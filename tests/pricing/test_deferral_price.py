"""Deferred tools and tool changes priced: each choice is never worse than the other option on its own estimate."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.pricing import CachePrices, CacheState, Outlook, SessionPace, price_deferral, price_tool_change

_PRICES = st.sampled_from([CachePrices.anthropic(), CachePrices.openai(), CachePrices.openai_breakpoints()])


@st.composite
def _outlooks(draw: st.DrawFn) -> Outlook:
    """A session at any pace, with any history, cache warm or cold."""
    gaps = tuple(draw(st.lists(st.floats(0, 20_000), max_size=8)))
    turns = draw(st.integers(0, 80))
    pace = SessionPace(gaps=gaps, turns=turns, calls=turns * draw(st.integers(1, 6)))
    history = draw(st.integers(0, 400_000))
    idle = draw(st.none() | st.floats(0, 10_000))
    since = draw(st.integers(0, history))
    return Outlook(draw(_PRICES), pace, CacheState(idle, history, since, draw(st.integers(0, since))))


_TOKENS = st.integers(0, 60_000)


@settings(max_examples=300, deadline=None)
@given(outlook=_outlooks(), added=_TOKENS, removed=_TOKENS, references=st.integers(0, 40))
def test_a_tool_change_goes_the_cheaper_way_on_its_own_estimate(
    outlook: Outlook, added: int, removed: int, references: int
) -> None:
    price = price_tool_change(outlook, added_tokens=added, removed_tokens=removed, block_tokens=references * 20)
    chosen, other = (price.blocks, price.rewrite) if price.keeps_cache else (price.rewrite, price.blocks)
    assert chosen <= other
    # a longer cached history only makes the rewrite dearer: blocks chosen once stay chosen
    longer = Outlook(outlook.prices, outlook.pace, CacheState(None, outlook.cache.history_tokens + 50_000, 0, 0))
    again = price_tool_change(longer, added_tokens=added, removed_tokens=removed, block_tokens=references * 20)
    shorter_state = CacheState(None, outlook.cache.history_tokens, 0, 0)
    base = price_tool_change(
        Outlook(outlook.prices, outlook.pace, shorter_state),
        added_tokens=added,
        removed_tokens=removed,
        block_tokens=references * 20,
    )
    assert again.keeps_cache or not base.keeps_cache
    assert again.blocks == base.blocks  # the blocks rewrite nothing cached


@settings(max_examples=100, deadline=None)
@given(outlook=_outlooks(), added=st.integers(1, 60_000))
def test_an_addition_with_nothing_cached_behind_it_is_a_tie_and_keeps_the_cache(outlook: Outlook, added: int) -> None:
    empty = Outlook(outlook.prices, outlook.pace, CacheState(None, 0, 0, 0))
    price = price_tool_change(empty, added_tokens=added, removed_tokens=0, block_tokens=0)
    assert price.blocks == price.rewrite and price.keeps_cache


@settings(max_examples=300, deadline=None)
@given(
    outlook=_outlooks(),
    schema=_TOKENS,
    stub=st.integers(0, 2_000),
    loaded=_TOKENS,
    rewrite=st.integers(0, 400_000),
    deferred_now=st.booleans(),
)
def test_deferring_is_chosen_only_when_cheaper_on_its_own_estimate(
    outlook: Outlook, schema: int, stub: int, loaded: int, rewrite: int, deferred_now: bool
) -> None:
    price = price_deferral(
        outlook,
        schema_tokens=schema,
        stub_tokens=stub,
        loaded_tokens=loaded,
        rewrite_tokens=rewrite,
        current="deferred" if deferred_now else "all",
    )
    chosen, other = (price.deferred, price.send_all) if price.defers else (price.send_all, price.deferred)
    assert chosen <= other
