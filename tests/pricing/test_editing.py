"""Context editing as an option of the cost model: Lamina's prune, the server's clearing or nothing, priced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.pricing import (
    DEFAULT_PRICES,
    CachePrices,
    CacheState,
    ContextEditing,
    Outlook,
    PruneItem,
    SessionPace,
    choose_prune_option,
    describe_decision,
)
from tests.conftest import examples


def _items(raw: list[tuple[int, float]], *, tail: int = 500, note: int = 30) -> list[PruneItem]:
    suffix = sum(t for t, _ in raw) + tail
    built = []
    for n, (tokens, chance) in enumerate(raw):
        built.append(PruneItem(f"c{n}", suffix, tokens, max(0, tokens - note), chance))
        suffix -= tokens
    return built


def _outlook(history: int, idle: float | None, *, turns: int = 10, prices: CachePrices = DEFAULT_PRICES) -> Outlook:
    pace = SessionPace(gaps=(120.0,) * turns, turns=turns, calls=3 * turns)
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=300, since_turn_mark=history // 3)
    return Outlook(prices, pace, cache)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 20_000), st.floats(0.0, 1.0)), max_size=12),
    st.one_of(st.none(), st.floats(0.0, 10_000.0)),
    st.integers(0, 5),
    st.sampled_from([DEFAULT_PRICES, CachePrices.openai()]),
    st.integers(0, 30_000),
    st.sampled_from(["priced", "lamina", "server", "off"]),
    st.integers(0, 12),
)
def test_the_prune_option_is_never_worse_than_doing_nothing_on_its_own_estimate(
    raw: list[tuple[int, float]],
    idle: float | None,
    turns: int,
    prices: CachePrices,
    minimum: int,
    mode: str,
    server_from: int,
) -> None:
    items = _items(raw)
    outlook = _outlook(sum(t for t, _ in raw) + 500, idle, turns=turns, prices=prices)
    server = items[min(server_from, len(items)) :]
    choice = choose_prune_option(items, outlook, minimum_tokens=minimum, server_items=server, mode=mode)  # type: ignore[arg-type]
    decision = choice.decision
    assert decision.expected <= decision.expected_nothing
    assert (choice.option == "nothing") == (not choice.call_ids)
    if choice.option != "nothing":
        assert choice.freed >= minimum
    if choice.option == "server":
        assert mode in ("priced", "server")
        assert choice.call_ids == tuple(it.call_id for it in server[: len(choice.call_ids)])  # the oldest: a run
        assert 1 <= choice.clear_at_least <= choice.freed
        assert decision.action == "clear_tool_uses"
    lamina = choose_prune_option(items, outlook, minimum_tokens=minimum, server_items=None, mode="lamina")
    if mode == "priced":  # the cheapest of the three: never above Lamina's prune alone
        assert decision.expected <= lamina.decision.expected + 1e-6


def test_a_cold_cache_lets_the_server_clear_everything_and_a_warm_one_keeps_lamina_s_newest_prune() -> None:
    raw = [(6_000, 0.05)] * 8 + [(200, 0.5)] * 30  # big old results, then many small recent ones
    items = _items(raw, tail=3_000, note=60)
    history = sum(t for t, _ in raw) + 3_000
    cold = choose_prune_option(items, _outlook(history, None), server_items=items)
    assert cold.option == "server" and cold.call_ids[0] == "c0"
    assert "clear on the server" in describe_decision(cold.decision)
    warm_items = _items([(200, 0.5)] * 30 + [(6_000, 0.05)] * 4, tail=500, note=60)
    warm_history = 30 * 200 + 4 * 6_000 + 500
    warm = choose_prune_option(warm_items, _outlook(warm_history, 30.0), server_items=warm_items)
    assert warm.option == "lamina" and "c0" not in warm.call_ids  # the server would rewrite from the oldest


def test_clear_at_least_is_the_break_even_of_the_rewrite() -> None:
    items = _items([(6_000, 0.0)] * 6, tail=20_000)
    outlook = _outlook(sum(6_000 for _ in range(6)) + 20_000, 30.0)
    choice = choose_prune_option(items, outlook, server_items=items, mode="server")
    assert choice.option == "server"
    p = outlook.prices
    rewrite = (items[0].suffix_tokens - outlook.cache.cold_tokens(p)) * (p.write_5m - p.read)
    per_token = p.write_5m + outlook.per_token_later()
    assert choice.clear_at_least * per_token >= rewrite > (choice.clear_at_least - 1) * per_token


def test_off_and_lamina_never_choose_the_server() -> None:
    items = _items([(6_000, 0.0)] * 6)
    outlook = _outlook(36_500, None)
    modes: tuple[ContextEditing, ...] = ("off", "lamina")
    for mode in modes:
        assert choose_prune_option(items, outlook, server_items=items, mode=mode).option == "lamina"
