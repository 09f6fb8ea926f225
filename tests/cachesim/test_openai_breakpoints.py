"""OpenAI's breakpoint regime (GPT-5.6 and later): the documented rules as vectors, plus properties."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.cachesim import (
    CacheBreakpointError,
    CacheSimulator,
    CacheUsage,
    OpenAIBreakpointRules,
    OpenAIBreakpointSimulator,
    OpenAICacheSimulator,
    TimedRequest,
    simulate,
    summarise,
)
from tests.conftest import examples
from tests.support.tagged import TaggedEstimator

EST = TaggedEstimator()
MARK = {"mode": "explicit"}
MARK_12H = {"mode": "explicit", "ttl": "12h"}


def sim(**rules: Any) -> OpenAIBreakpointSimulator:
    return OpenAIBreakpointSimulator(rules=OpenAIBreakpointRules(**rules), estimator=EST)


def part(label: str, tokens: int, mark: Mapping[str, str] | None = None) -> dict[str, object]:
    block: dict[str, object] = {"type": "input_text", "text": f"{label} #{tokens}"}
    if mark is not None:
        block["prompt_cache_breakpoint"] = dict(mark)
    return block


def responses(*parts: dict[str, object], key: str = "s1", **options: Any) -> dict[str, object]:
    """A Responses body whose input is one user message per part."""
    body: dict[str, object] = {
        "model": "gpt-5.6",
        "prompt_cache_key": key,
        "input": [{"role": "user", "content": [p]} for p in parts],
    }
    if options:
        body["prompt_cache_options"] = options
    return body


def run(simulator: CacheSimulator, *timed: tuple[float, Mapping[str, object]]) -> list[CacheUsage]:
    return simulate([TimedRequest(t_start=t, body=body) for t, body in timed], simulator)


def test_a_2006_token_prompt_is_read_whole_on_repeat_boundaries_are_exact() -> None:
    # the older regime's vector reads 1920 of it (128-token steps); a breakpoint's boundary is not rounded
    body = responses(part("system", 1500), part("question", 506))
    first, second = run(sim(), (0, body), (1, body))
    assert (first.total, first.read, first.write_30m, first.uncached) == (2006, 0, 2006, 0)
    assert (second.read, second.write, second.uncached) == (2006, 0, 0)
    assert run(OpenAICacheSimulator(estimator=EST), (0, body), (1, body))[1].read == 1920


def test_writes_cost_one_and_a_quarter_and_plain_input_is_the_rest() -> None:
    body = responses(part("system", 3000, MARK), part("question", 500))
    (usage,) = run(sim(), (0, body))
    assert (usage.write_30m, usage.write_12h, usage.read) == (3500, 0, 0)  # the implicit one reaches the end
    assert usage.uncached == usage.total - usage.read - usage.write
    assert usage.cost_multiplier == pytest.approx(1.25)
    explicit = responses(part("system", 3000, MARK), part("question", 500), mode="explicit")
    (only,) = run(sim(), (0, explicit))
    assert (only.write_30m, only.uncached) == (3000, 500)
    assert only.cost_multiplier == pytest.approx((3000 * 1.25 + 500) / 3500)


def test_explicit_mode_without_breakpoints_caches_nothing() -> None:
    body = responses(part("system", 3000), mode="explicit")
    assert [(u.read, u.write) for u in run(sim(), (0, body), (1, body))] == [(0, 0), (0, 0)]


def test_a_prefix_below_the_minimum_is_not_written() -> None:
    body = responses(part("system", 1000, MARK), part("question", 30))
    assert run(sim(), (0, body))[0].write == 1030  # the implicit breakpoint reaches 1030
    small = responses(part("system", 1000, MARK), part("question", 30), mode="explicit")
    assert run(sim(), (0, small))[0].write == 0


def test_at_most_four_writes_and_the_implicit_breakpoint_takes_one() -> None:
    parts = [part(f"p{i}", 2000, MARK) for i in range(5)]
    body = responses(*parts, part("tail", 100))
    (usage,) = run(sim(), (0, body))
    assert usage.write == 10_100  # the latest three explicit (to 10,000) and the implicit one (to the end)
    later = responses(*parts, part("tail", 100), part("more", 100))
    # the first two markers were read-only: the first request wrote from 6,000 on, so nothing before is held
    assert run(sim(), (0, body), (1, later))[1].read == 10_100
    first_two = responses(*parts[:2], part("other", 5000))
    assert run(sim(), (0, body), (1, first_two))[1].read == 0
    explicit = responses(*parts, part("tail", 100), mode="explicit")
    assert run(sim(), (0, explicit), (1, first_two))[1].read == 4000  # explicit mode writes the latest four


def test_the_longest_live_match_is_read_without_a_lookback_limit() -> None:
    head = [part("system", 2000, MARK)]
    history = [part(f"h{i}", 10) for i in range(60)]  # 60 blocks between the two breakpoints: no lookback limit
    first = responses(*head, *history)
    second = responses(*head, *history, part("next", 300))
    changed = responses(*head, part("rewritten", 700))
    usages = run(sim(), (0, first), (1, second), (2, changed))
    assert [u.read for u in usages] == [0, 2600, 2000]
    assert usages[1].write_30m == 300


def test_only_the_latest_breakpoints_are_read() -> None:
    stable = responses(part("stable", 2000, MARK), part("q0", 10))
    others = [responses(part(f"other{i}", 2000)) for i in range(3)]
    timed = [(0.0, stable), *((1.0 + i, b) for i, b in enumerate(others)), (9.0, stable)]
    assert run(sim(read_breakpoints=3), *timed)[-1].read == 0  # three newer breakpoints hide it
    assert run(sim(), *timed)[-1].read == 2010


def test_ttls_30_minutes_and_12_hours_and_a_hit_refreshes() -> None:
    body = responses(part("system", 3000, MARK_12H), part("question", 500))
    first, *later = run(sim(), (0, body), (1799, body), (40_000, body))
    assert (first.write_12h, first.write_30m) == (3000, 500)  # the implicit one takes the request's TTL
    assert [u.read for u in later] == [3500, 3000]  # then the 30-minute entry is gone, the 12-hour one lives
    short = responses(part("system", 3000), part("question", 500))
    assert [u.read for u in run(sim(), (0, short), (1799, short), (3598, short), (5400, short))] == [
        0,
        3500,
        3500,
        0,
    ]
    requested = responses(part("system", 3000), ttl="12h")
    assert [u.read for u in run(sim(), (0, requested), (40_000, requested))] == [0, 3000]
    assert run(sim(), (0, requested))[0].cost_multiplier == pytest.approx(2.0)  # the assumed 12-hour price


def test_markers_do_not_change_identity_and_the_cache_is_partitioned_by_key() -> None:
    marked = responses(part("system", 3000, MARK), part("question", 500))
    plain = responses(part("system", 3000), part("question", 500))
    assert run(sim(), (0, marked), (1, plain))[1].read == 3500
    assert run(sim(), (0, marked), (1, responses(part("system", 3000), key="s2")))[1].read == 0


def test_an_entry_is_readable_from_the_first_byte() -> None:
    body = responses(part("system", 3000))
    requests = [TimedRequest(0, body, 2), TimedRequest(1, body), TimedRequest(2, body)]
    assert [u.read for u in simulate(requests, sim())] == [0, 0, 3000]


def test_chat_completions_bodies_and_their_parts() -> None:
    def chat(*texts: str, **options: Any) -> dict[str, object]:
        system = {"role": "system", "content": [{"type": "text", "text": texts[0], "prompt_cache_breakpoint": MARK}]}
        users = [{"role": "user", "content": t} for t in texts[1:]]
        body: dict[str, object] = {"model": "gpt-5.6", "messages": [system, *users]}
        if options:
            body["prompt_cache_options"] = options
        return body

    first, second = run(sim(), (0, chat("rules #2000", "q #100")), (1, chat("rules #2000", "other #100")))
    assert (first.write, second.read, second.write) == (2100, 2000, 100)
    with pytest.raises(CacheBreakpointError, match="ttl"):
        run(sim(), (0, chat("rules #2000", ttl="12h")))  # Chat Completions takes 30m only
    with pytest.raises(CacheBreakpointError, match="prewarm"):
        run(sim(), (0, chat("rules #2000", prewarm=True)))


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (responses(part("s", 10), mode="both"), "prompt_cache_options.mode"),
        (responses(part("s", 10), ttl="1h"), "prompt_cache_options.ttl"),
        ({**responses(part("s", 10)), "prompt_cache_retention": "in_memory"}, "prompt_cache_retention"),
        (responses(part("s", 10, {"mode": "explicit", "ttl": "5m"})), "input[0].content[0]"),
        (responses(part("s", 10, {"mode": "implicit"})), "input[0].content[0]"),
        (
            {
                "model": "gpt-5.6",
                "input": [
                    {
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "x", "prompt_cache_breakpoint": MARK}],
                    }
                ],
            },
            "input[0].content[0]",
        ),
    ],
)
def test_what_the_api_refuses(body: dict[str, object], where: str) -> None:
    with pytest.raises(CacheBreakpointError) as caught:
        run(sim(), (0, body))
    assert caught.value.where == where


def test_prewarm_and_24h_retention_are_accepted_on_responses() -> None:
    body = {**responses(part("s", 2000), prewarm=True), "prompt_cache_retention": "24h"}
    assert run(sim(), (0, body))[0].write == 2000


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(1, 3000), st.sampled_from([None, "30m", "12h"])), min_size=1, max_size=8),
            st.floats(0, 50_000),
            st.sampled_from(["implicit", "explicit"]),
            st.sampled_from(["30m", "12h"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_every_token_is_read_written_or_uncached_once_and_the_cost_follows(
    requests: list[tuple[list[tuple[int, str | None]], float, str, str]],
) -> None:
    timed, t = [], 0.0
    for blocks, gap, mode, ttl in requests:
        t += gap
        marks = [None if m is None else {"mode": "explicit", "ttl": m} for _, m in blocks]
        body = responses(*(part(f"b{i}", n, mk) for i, ((n, _), mk) in enumerate(zip(blocks, marks, strict=True))))
        timed.append((t, {**body, "prompt_cache_options": {"mode": mode, "ttl": ttl}}))
    usages = run(sim(), *timed)
    for u in usages:
        assert min(u.read, u.write_30m, u.write_12h, u.uncached) >= 0 and u.write_5m == u.write_1h == 0
        assert u.read + u.write + u.uncached == u.total
        billed = u.uncached + 1.25 * u.write_30m + 2.0 * u.write_12h + 0.1 * u.read
        assert u.weighted_tokens == pytest.approx(billed)
    summary = summarise(usages)
    assert summary.write == sum(u.write for u in usages) and summary.write_12h == sum(u.write_12h for u in usages)
