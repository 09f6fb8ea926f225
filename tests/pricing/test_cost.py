"""The cost model: prunes, TTLs and compactions priced by their expected bill, and the clock they read."""

from __future__ import annotations

import functools

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.compaction import PrunePolicy, choose_prune, reread_chances
from lamina.pricing import (
    DEFAULT_PRICES,
    CachePrices,
    CacheState,
    Outlook,
    PruneItem,
    SessionPace,
    choose_turn_ttl,
    price_compaction,
    price_prune,
)
from lamina.session import (
    AssistantMessage,
    CostDecision,
    LogEntry,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    TurnRecord,
    UserMessage,
    decode_entry,
    encode_entry,
)
from tests.conftest import examples

LINE = "    value = compute(item, limit=42)  # a line of code\n"
SMALL = PrunePolicy(protect_turns=2, protect_tokens=1_000, minimum_tokens=0, smallest_tokens=50)


def _view(sizes: list[list[int]], paths: dict[tuple[int, int], str] | None = None) -> list[LogEntry]:
    entries: list[LogEntry] = []
    for t, reads in enumerate(sizes):
        entries.append(UserMessage(id=f"u{t}", text=f"turn {t}"))
        for r in range(len(reads)):
            path = (paths or {}).get((t, r), f"src/m_{t}_{r}.py")
            entries.append(ToolCall(id=f"c{t}_{r}", call_id=f"call_{t}_{r}", name="Read", input={"path": path}))
        for r, tokens in enumerate(reads):
            content = LINE * max(1, tokens // 12)
            entries.append(ToolResult(id=f"r{t}_{r}", call_id=f"call_{t}_{r}", name="Read", content=content))
        entries.append(AssistantMessage(id=f"a{t}", text=f"done {t}"))
    return entries


def _outlook(idle: float | None, history: int, *, turns: int = 10, gaps: tuple[float, ...] = ()) -> Outlook:
    pace = SessionPace(gaps=gaps or (90.0,) * turns, turns=turns, calls=2 * turns)
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=200, since_turn_mark=history // 4)
    return Outlook(DEFAULT_PRICES, pace, cache)


items = st.lists(
    st.tuples(st.integers(1, 20_000), st.floats(0.0, 1.0)),
    max_size=12,
)


@settings(max_examples=examples(300), deadline=None)
@given(
    items,
    st.one_of(st.none(), st.floats(0.0, 10_000.0)),
    st.integers(0, 5),
    st.sampled_from([DEFAULT_PRICES, CachePrices.openai()]),
    st.integers(0, 30_000),
)
def test_the_choice_is_never_worse_than_doing_nothing_on_its_own_estimate(
    raw: list[tuple[int, float]], idle: float | None, turns: int, prices: CachePrices, minimum: int
) -> None:
    suffix = sum(t for t, _ in raw) + 500
    built = []
    for n, (tokens, chance) in enumerate(raw):
        built.append(PruneItem(f"c{n}", suffix, tokens, max(0, tokens - 30), chance))
        suffix -= tokens
    pace = SessionPace(gaps=(120.0,) * turns, turns=turns, calls=3 * turns)
    history = sum(t for t, _ in raw) + 500
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=300, since_turn_mark=history // 3)
    outlook = Outlook(prices, pace, cache)
    ids, decision = price_prune(built, outlook, minimum_tokens=minimum)
    assert decision.expected <= decision.expected_nothing
    assert (decision.action == "prune") == bool(ids)
    if ids:
        assert sum(it.freed for it in built if it.call_id in ids) >= minimum
    ttl, ttl_decision = choose_turn_ttl(outlook, turn_tokens=2_000)
    assert ttl_decision.action == f"ttl_{ttl}"
    action, compaction = price_compaction(outlook, tokens_after=history // 5)
    assert compaction.action == action and compaction.expected <= compaction.expected_nothing


@settings(max_examples=examples(300), deadline=None)
@given(
    st.integers(0, 300_000),
    st.integers(0, 60_000),
    st.one_of(st.none(), st.integers(0, 300_000)),
    st.floats(0.0, 30_000.0),
    st.one_of(st.none(), st.integers(0, 300_000)),
    st.integers(0, 20_000),
    st.one_of(st.none(), st.floats(0.0, 10_000.0)),
    st.integers(0, 40),
    st.sampled_from([DEFAULT_PRICES, CachePrices.openai()]),
)
def test_a_priced_compaction_is_never_worse_than_waiting_on_its_own_estimate_and_a_cold_cache_compacts_first(
    history: int,
    after: int,
    threshold: int | None,
    turn_tokens: float,
    summarised: int | None,
    summary: int,
    idle: float | None,
    turns: int,
    prices: CachePrices,
) -> None:
    pace = SessionPace(gaps=(120.0,) * turns, turns=turns, calls=2 * turns)
    terms = functools.partial(
        price_compaction, threshold_tokens=threshold, turn_tokens=turn_tokens, summarised_tokens=summarised
    )

    def price(idle: float | None) -> tuple[str, CostDecision]:
        cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=300, since_turn_mark=history // 3)
        return terms(Outlook(prices, pace, cache), tokens_after=after, summary_tokens=summary)

    action, decision = price(idle)
    assert decision.action == action and decision.expected <= decision.expected_nothing
    if action == "compact":  # whatever pays on a warm cache pays on a cold one: nothing of it is left to lose
        assert price(None)[0] == "compact"


def test_a_compaction_pays_for_its_summarising_call_and_for_compacting_more_often() -> None:
    cold = _outlook(7_200.0, 100_000, turns=30)

    def call_price(threshold: int | None) -> float:
        """What the summarising call (90k read, a 2k summary written) adds to compacting now."""
        terms = functools.partial(price_compaction, cold, tokens_after=10_000, threshold_tokens=threshold)
        free = terms(summarised_tokens=0, summary_tokens=0)[1]
        paid = terms(summarised_tokens=90_000, summary_tokens=2_000)[1]
        return paid.expected - free.expected

    extra = 1 - (100_000 - 10_000) / (120_000 - 10_000)  # the share of a compaction compacting now adds
    assert call_price(120_000) == pytest.approx(extra * (90_000 + 2_000 * 5), abs=0.2)  # output at 5x
    assert call_price(None) == pytest.approx(90_000 + 2_000 * 5, abs=0.2)  # no threshold: a compaction of its own
    assert call_price(400_000) > call_price(120_000) > call_price(100_000) == 0.0  # the earlier, the dearer


def test_in_the_band_a_warm_cache_waits_and_a_cold_one_compacts() -> None:
    # a long session: what a shorter history saves before the threshold, it gives back after it
    terms = functools.partial(price_compaction, tokens_after=25_000, threshold_tokens=175_000, turn_tokens=3_000.0)
    warm = terms(_outlook(30.0, 140_000, turns=100))
    cold = terms(_outlook(7_200.0, 140_000, turns=100))
    assert warm[0] == "wait" and warm[1].cache == "warm"  # never just after paying to write it
    assert cold[0] == "compact" and cold[1].cache == "cold"  # written again anyway: a shorter history to write


sizes = st.lists(st.lists(st.integers(0, 1_500), max_size=4), min_size=1, max_size=12)


@settings(max_examples=examples(150), deadline=None)
@given(sizes, st.integers(1, 4), st.integers(0, 3_000), st.one_of(st.none(), st.floats(0.0, 8_000.0)))
def test_a_priced_prune_never_removes_a_result_read_in_the_protected_window(
    turns: list[list[int]], protect_turns: int, protect_tokens: int, idle: float | None
) -> None:
    policy = PrunePolicy(protect_turns=protect_turns, protect_tokens=protect_tokens, minimum_tokens=0)
    view = _view(turns)
    chosen = choose_prune(view, policy, outlook=_outlook(idle, 5_000 * len(turns)))
    unpriced = choose_prune(view, PrunePolicy(protect_turns=protect_turns, protect_tokens=protect_tokens))
    if chosen is None:
        return
    protected_from = max(0, len(turns) - (protect_turns - 1))
    assert all(int(c.split("_")[1]) < protected_from for c in chosen.call_ids)
    # what the cost model takes is among what the fixed rule may take
    everything = choose_prune(
        view, PrunePolicy(protect_turns=protect_turns, protect_tokens=protect_tokens, minimum_tokens=0)
    )
    assert everything is not None and set(chosen.call_ids) <= set(everything.call_ids)
    assert isinstance(chosen.decision, CostDecision) and chosen.decision.action == "prune"
    assert unpriced is None or not isinstance(unpriced.decision, CostDecision)


def test_a_cold_cache_prunes_what_a_warm_one_keeps() -> None:
    view = _view([[900], [900], [900], [900], [900], [12_000]])  # the protected last turn is large
    history = 18_000
    warm = choose_prune(view, SMALL, outlook=_outlook(30.0, history, turns=2))
    cold = choose_prune(view, SMALL, outlook=_outlook(7_200.0, history, turns=2))
    assert warm is None  # rewriting the last turn, which the cache holds, costs more than the few calls left save
    assert cold is not None and cold.decision is not msgspec.UNSET
    assert isinstance(cold.decision, CostDecision) and cold.decision.cache == "cold"


def test_results_read_again_after_a_prune_raise_the_chance_and_edits_lower_it() -> None:
    view = _view([[900, 900], [900], [900]], {(0, 0): "a.py", (0, 1): "b.py", (1, 0): "c.py", (2, 0): "a.py"})
    fresh = reread_chances(view, {"call_0_1", "call_1_0"})
    assert fresh["call_0_1"] == pytest.approx(1 / 3) and fresh["call_1_0"] == pytest.approx(1 / 3)  # the prior
    again = reread_chances(view, {"call_0_0"})
    assert again["call_0_0"] > 1 / 3  # a.py was read twice
    edited = [*view, ToolCall(call_id="e", name="Edit", input={"path": "b.py"})]
    assert reread_chances(edited, {"call_0_1"})["call_0_1"] < 1 / 3
    pruned = [
        e.__class__(**{**msgspec.structs.asdict(e), "content": "[output pruned from context: Read; call it again]"})
        if isinstance(e, ToolResult) and e.call_id == "call_1_0"
        else e
        for e in view
    ]
    asked = [*pruned, ToolCall(call_id="x", name="Read", input={"path": "c.py"})]
    assert reread_chances(asked, {"call_0_1"})["call_0_1"] > reread_chances(pruned, {"call_0_1"})["call_0_1"]


def test_the_turn_ttl_follows_the_pace_and_the_cache() -> None:
    steady = _outlook(60.0, 80_000, turns=20, gaps=(90.0,) * 19 + (600.0,))
    assert choose_turn_ttl(steady, turn_tokens=3_000)[0] == "1h"  # warm: the premium is on a few tokens
    cold = _outlook(4_200.0, 80_000, turns=20, gaps=(90.0,) * 19 + (600.0,))
    assert choose_turn_ttl(cold, turn_tokens=3_000)[0] == "5m"  # everything is written again: not at 2x
    assert choose_turn_ttl(Outlook(CachePrices.openai(), steady.pace, steady.cache), turn_tokens=3_000)[0] == "5m"


def test_compaction_waits_for_a_cold_cache_unless_waiting_costs_more() -> None:
    warm = _outlook(30.0, 150_000, turns=30)
    assert price_compaction(warm, tokens_after=140_000)[0] == "wait"  # little freed: not worth a rewrite now
    cold = _outlook(7_200.0, 150_000, turns=30)
    assert price_compaction(cold, tokens_after=140_000)[0] == "compact"


def test_the_decisions_are_logged_and_older_entries_still_decode() -> None:
    decision = CostDecision(action="prune", expected=10.0, expected_nothing=20.0, horizon=5, cache="cold")
    prune = ToolOutputPruned(id="p", parent_id=None, ts=1.0, call_ids=("a",), tokens=3, decision=decision)
    assert decode_entry(encode_entry(prune)) == prune
    old = b'{"type":"prune","id":"p","parent_id":null,"ts":1.0,"call_ids":["a"],"tokens":3}'
    assert decode_entry(old) == ToolOutputPruned(id="p", parent_id=None, ts=1.0, call_ids=("a",), tokens=3)
    record = TurnRecord(
        id="t",
        parent_id=None,
        ts=1.0,
        turn_id="x",
        user_entry_id="u",
        stable_digest="d",
        stable_version=1,
        turn_ttl="5m",
        decision=decision,
    )
    assert decode_entry(encode_entry(record)) == record
    assert b"turn_ttl" not in encode_entry(
        TurnRecord(id="t", parent_id=None, ts=1.0, turn_id="x", user_entry_id="u", stable_digest="d", stable_version=1)
    )


def test_a_cold_cache_lowers_the_floor_a_prune_must_free() -> None:
    view = _view([[2_500], [2_500], [2_500], [2_500], [300], [300]])  # about 10,000 prunable tokens, old
    policy = PrunePolicy(protect_turns=2, protect_tokens=0)  # the default floors: 40,000 warm, 5,000 cold
    warm, cold = _outlook(30.0, 12_000, turns=6), _outlook(7_200.0, 12_000, turns=6)
    assert (
        policy.floor_tokens(warm) == policy.minimum_tokens and policy.floor_tokens(cold) == policy.cold_minimum_tokens
    )
    assert choose_prune(view, policy, outlook=warm) is None  # too little to be worth a rewrite of what the cache holds
    pruned = choose_prune(view, policy, outlook=cold)
    assert pruned is not None and 5_000 <= pruned.tokens < 40_000
    assert isinstance(pruned.decision, CostDecision) and pruned.decision.cache == "cold"
    unpriced = PrunePolicy(protect_turns=2, protect_tokens=0, priced=False)
    assert unpriced.floor_tokens(cold) == unpriced.minimum_tokens  # the fixed rule knows no clock
    assert choose_prune(view, unpriced, outlook=cold) is None
