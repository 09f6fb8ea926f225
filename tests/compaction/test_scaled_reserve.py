"""The default compaction reserve scales down with a small window; a set one stays as set."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lamina.compaction import DEFAULT_RESERVE, scaled_reserve, should_compact


@given(st.integers(min_value=1, max_value=2_000_000))
def test_the_default_reserve_leaves_three_quarters_of_any_window(window: int) -> None:
    reserve = scaled_reserve(DEFAULT_RESERVE, window)
    assert 0 <= reserve <= DEFAULT_RESERVE and reserve <= window // 4
    assert not should_compact(window - reserve, context_window=window, reserve=reserve)
    if window >= 4 * DEFAULT_RESERVE:
        assert reserve == DEFAULT_RESERVE


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=2_000_000))
def test_a_set_reserve_stays_as_set(reserve: int, window: int) -> None:
    if reserve != DEFAULT_RESERVE:
        assert scaled_reserve(reserve, window) == reserve
