"""The session's pace as the cost model reads it: gaps, turns and calls, and where the cache stands."""

from __future__ import annotations

from typing import Literal

from lamina.pricing import DEFAULT_PRICES, PaceTracker, SessionPace
from lamina.session import AssistantMessage, TurnRecord, UserMessage


def _record(ttl: Literal["5m", "1h"]) -> TurnRecord:
    return TurnRecord(
        id="t",
        parent_id=None,
        ts=0.0,
        turn_id="x",
        user_entry_id="u",
        stable_digest="d",
        stable_version=1,
        turn_ttl=ttl,
    )


def test_the_gaps_between_turns_the_turns_and_the_calls_are_folded() -> None:
    pace = PaceTracker()
    pace.observe(UserMessage(id="u1", text="one"), 0.0, 0, 100)
    pace.observe(AssistantMessage(id="a1", text="done"), 5.0, 100, 150)
    pace.observe(UserMessage(id="u2", text="two"), 65.0, 150, 250)
    pace.observe(AssistantMessage(id="a2", text="done"), 70.0, 250, 300)
    pace.observe(AssistantMessage(id="a3", text="again"), 75.0, 300, 350)
    assert pace.pace() == SessionPace(gaps=(60.0,), turns=2, calls=3)
    assert pace.turn_tokens() == 150.0  # the first turn grew the history from 0 to 150


def test_the_cache_is_cold_before_a_request_and_a_rewrite_forgets_what_was_sent() -> None:
    pace = PaceTracker()
    assert pace.cache(10.0, 500).idle_seconds is None and pace.turn_tokens() == 2_000.0
    pace.observe(UserMessage(id="u1", text="one"), 0.0, 0, 400)
    pace.observe(_record("5m"), 0.0, 400, 400)
    pace.observe(AssistantMessage(id="a1", text="done"), 10.0, 400, 500)
    warm = pace.cache(70.0, 500)
    assert (warm.idle_seconds, warm.since_request, warm.since_turn_mark, warm.turn_mark_ttl) == (60.0, 100, 100, "5m")
    assert warm.label(DEFAULT_PRICES) == "warm"
    pace.reset()  # a compaction rewrote the history: nothing of it is cached
    assert pace.cache(70.0, 500).cold_tokens(DEFAULT_PRICES) == 500
