"""A pre-warm priced: it pays before a warm prefix expires when the user is likely back after the expiry."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.pricing import DEFAULT_PRICES, CacheState, Outlook, PrewarmCall, SessionPace, price_prewarm
from tests.conftest import examples


def _outlook(gaps: tuple[float, ...], idle: float | None, history: int = 100_000) -> Outlook:
    pace = SessionPace(gaps=gaps, turns=len(gaps) + 1, calls=2 * (len(gaps) + 1))
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=0, since_turn_mark=0)
    return Outlook(DEFAULT_PRICES, pace, cache)


def _call(warm: int, cold: int, left: float) -> PrewarmCall:
    return PrewarmCall(warm_tokens=warm, cold_tokens=cold, warm_left=left, ttl_seconds=3_600.0, write_price=2.0)


def test_right_after_a_compaction_a_pre_warm_only_moves_the_write_and_does_not_pay() -> None:
    outlook = _outlook((60.0,) * 10, idle=5.0)
    action, decision = price_prewarm(outlook, _call(warm=5_000, cold=60_000, left=3_595.0))
    assert action == "wait" and decision.action == "no_prewarm"
    assert decision.expected <= decision.expected_nothing


def test_just_before_an_expiry_a_read_that_keeps_the_prefix_pays_when_the_user_comes_back_later() -> None:
    gaps = (4_000.0, 5_000.0, 4_500.0, 5_500.0)  # the user comes back after an hour and a bit, each time
    action, decision = price_prewarm(_outlook(gaps, idle=3_550.0), _call(warm=100_000, cold=0, left=50.0))
    assert action == "prewarm" and decision.action == "prewarm"
    assert decision.expected < decision.expected_nothing


def test_a_user_who_is_back_within_the_ttl_needs_no_pre_warm() -> None:
    action, _ = price_prewarm(_outlook((30.0,) * 20, idle=10.0), _call(warm=100_000, cold=0, left=3_590.0))
    assert action == "wait"


@settings(max_examples=examples(300), deadline=None)
@given(
    gaps=st.lists(st.floats(0, 20_000), max_size=20),
    idle=st.one_of(st.none(), st.floats(0, 10_000)),
    warm=st.integers(0, 200_000),
    cold=st.integers(0, 200_000),
    left=st.floats(0, 3_600),
)
def test_the_choice_is_never_dearer_than_the_other_on_its_estimate(
    gaps: list[float], idle: float | None, warm: int, cold: int, left: float
) -> None:
    action, decision = price_prewarm(_outlook(tuple(gaps), idle), _call(warm, cold, left))
    assert decision.expected <= decision.expected_nothing
    assert decision.action == ("prewarm" if action == "prewarm" else "no_prewarm")
