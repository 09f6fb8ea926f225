"""The compaction backend choice: never worse than the other backend on its own estimate; ties to Lamina's own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.pricing import DEFAULT_PRICES, CacheState, Outlook, SessionPace, price_compaction_backend
from tests.conftest import examples


def _outlook(idle: float | None, history: int, turns: int) -> Outlook:
    pace = SessionPace(gaps=(90.0,) * turns, turns=turns, calls=2 * turns)
    cache = CacheState(idle_seconds=idle, history_tokens=history, since_request=200, since_turn_mark=history // 4)
    return Outlook(DEFAULT_PRICES, pace, cache)


@settings(max_examples=examples(300), deadline=None)
@given(
    idle=st.one_of(st.none(), st.floats(0, 10_000)),
    history=st.integers(0, 300_000),
    turns=st.integers(1, 60),
    summarised=st.integers(0, 200_000),
    prompt=st.integers(0, 20_000),
    lamina=st.integers(1, 8_000),
    server=st.integers(1, 8_000),
    rewrite=st.integers(0, 50_000),
)
def test_the_backend_chosen_is_never_dearer_than_the_other_on_its_estimate(
    idle: float | None, history: int, turns: int, summarised: int, prompt: int, lamina: int, server: int, rewrite: int
) -> None:
    backend, decision = price_compaction_backend(
        _outlook(idle, history, turns),
        summarised_tokens=summarised,
        lamina_prompt_tokens=prompt,
        lamina_summary_tokens=lamina,
        server_summary_tokens=server,
        server_rewrite_tokens=rewrite,
    )
    assert decision.expected <= decision.expected_nothing
    assert decision.action == f"{backend}_compaction"


def test_a_tie_goes_to_laminas_own_and_a_smaller_server_summary_goes_to_the_server() -> None:
    outlook = _outlook(None, 50_000, 10)
    same = dict(summarised_tokens=40_000, lamina_prompt_tokens=0, lamina_summary_tokens=2_000)
    assert price_compaction_backend(outlook, **same, server_summary_tokens=2_000)[0] == "lamina"
    assert price_compaction_backend(outlook, **same, server_summary_tokens=800)[0] == "server"
    dear = price_compaction_backend(outlook, **same, server_summary_tokens=800, server_rewrite_tokens=100_000)
    assert dear[0] == "lamina"  # the context the block makes the next request write again outweighs it
