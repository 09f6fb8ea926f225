"""Tests for the prompt-cache simulator: the providers' documented examples as vectors, plus properties."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.cachesim import (
    AnthropicCacheRules,
    AnthropicCacheSimulator,
    CacheBreakpointError,
    CacheSimulationError,
    CacheUsage,
    OpenAICacheRules,
    OpenAICacheSimulator,
    TimedRequest,
    simulate,
    summarise,
)
from tests.conftest import examples
from tests.support.tagged import TaggedEstimator

EST = TaggedEstimator()
EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}


def anthropic(**rules: Any) -> AnthropicCacheSimulator:
    return AnthropicCacheSimulator(rules=AnthropicCacheRules(**rules), estimator=EST)


def openai(**rules: Any) -> OpenAICacheSimulator:
    return OpenAICacheSimulator(rules=OpenAICacheRules(**rules), estimator=EST)


def text(label: str, tokens: int, ttl: str | None = None) -> dict[str, object]:
    block: dict[str, object] = {"type": "text", "text": f"{label} #{tokens}"}
    if ttl is not None:
        block["cache_control"] = EPH_1H if ttl == "1h" else EPH
    return block


def conversation(n: int, marks: Sequence[int], tokens: int = 200) -> dict[str, object]:
    """n messages of one text block each (alternating roles); `marks` are 1-based blocks with a breakpoint."""
    messages = [
        {"role": "user" if i % 2 else "assistant", "content": [text(f"m{i}", tokens, "5m" if i in marks else None)]}
        for i in range(1, n + 1)
    ]
    return {"model": "claude", "messages": messages}


def run(
    sim: AnthropicCacheSimulator | OpenAICacheSimulator, *timed: tuple[float, Mapping[str, object]]
) -> list[CacheUsage]:
    return simulate([TimedRequest(t_start=t, body=body) for t, body in timed], sim)


# --- Anthropic: documented vectors ----------------------------------------------------------------


def test_anthropic_large_system_prompt_written_then_read() -> None:
    body = {
        "model": "claude",
        "system": [text("manual", 188_086, "5m")],
        "messages": [{"role": "user", "content": "question #21"}],
    }
    first, second = run(anthropic(), (0, body), (10, body))
    assert (first.write_5m, first.write_1h, first.read, first.uncached) == (188_086, 0, 0, 21)
    assert (second.write, second.read, second.uncached) == (0, 188_086, 21)
    assert first.total == second.total == 188_107
    assert first.cost_multiplier == pytest.approx((21 + 1.25 * 188_086) / 188_107)
    assert second.cost_multiplier == pytest.approx((21 + 0.1 * 188_086) / 188_107)


def test_anthropic_mixed_ttl_billing_rule() -> None:
    system = [text("rules", 1800, "1h")]
    warm = {"model": "claude", "system": system, "messages": [{"role": "user", "content": "warm #5"}]}
    body = {
        "model": "claude",
        "system": system,
        "messages": [{"role": "user", "content": [text("a", 100, "1h"), text("b", 148, "5m"), text("c", 2048)]}],
    }
    _, usage = run(anthropic(), (0, warm), (1, body))
    assert (usage.uncached, usage.read, usage.write) == (2048, 1800, 248)
    assert (usage.write_5m, usage.write_1h) == (148, 100)


def test_anthropic_growing_conversation_falls_out_of_the_lookback_window() -> None:
    turn1, turn2, turn3 = conversation(10, [10]), conversation(15, [15]), conversation(35, [35])
    u1, u2, u3 = run(anthropic(), (0, turn1), (1, turn2), (2, turn3))
    assert (u1.read, u1.write) == (0, 2000)
    assert (u2.read, u2.write) == (2000, 1000)
    assert (u3.read, u3.write) == (0, 7000)  # block 15 is one position outside 35..16


def test_anthropic_second_breakpoint_fixes_the_growing_conversation() -> None:
    turn1, turn2, turn3 = conversation(10, [10]), conversation(15, [15]), conversation(35, [15, 35])
    *_, u3 = run(anthropic(), (0, turn1), (1, turn2), (2, turn3))
    assert (u3.read, u3.write, u3.uncached) == (3000, 4000, 0)


def _with_block_5_modified(n: int, marks: Sequence[int]) -> dict[str, object]:
    body = conversation(n, marks, tokens=300)
    messages = body["messages"]
    assert isinstance(messages, list)
    messages[4] = {"role": messages[4]["role"], "content": "modified #300"}
    return body


def test_anthropic_block_5_modified_with_only_block_30_marked_has_no_hit() -> None:
    _, usage = run(anthropic(), (0, conversation(30, [4, 30], tokens=300)), (1, _with_block_5_modified(30, [30])))
    assert usage.read == 0  # checks stop at block 11; the entry at block 4 is never reached


@pytest.mark.parametrize(("n", "expected_read"), [(23, 1200), (24, 0)])
def test_anthropic_lookback_is_exactly_20_positions_counting_the_breakpoint(n: int, expected_read: int) -> None:
    _, usage = run(anthropic(), (0, conversation(n, [4, n], tokens=300)), (1, _with_block_5_modified(n, [n])))
    assert usage.read == expected_read


def _tool_round(n_calls: int, *, mark_last: bool) -> list[dict[str, object]]:
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"path": f"f{i} #10"}} for i in range(n_calls)]
    results: list[dict[str, object]] = [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"body {i} #10"} for i in range(n_calls)
    ]
    if mark_last:
        results[-1] = {**results[-1], "cache_control": EPH}
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]


@pytest.mark.parametrize(("group", "expected_read"), [(True, 2000), (False, 0)])
def test_anthropic_tool_runs_count_as_one_lookback_position(group: bool, expected_read: int) -> None:
    first = {"model": "claude", "messages": [{"role": "user", "content": [text("task", 2000, "5m")]}]}
    second = {
        "model": "claude",
        "messages": [{"role": "user", "content": [text("task", 2000)]}, *_tool_round(25, mark_last=True)],
    }
    _, usage = run(anthropic(group_tool_runs=group), (0, first), (1, second))
    assert usage.read == expected_read


@pytest.mark.parametrize(("fillers", "expected_read"), [(17, 2000), (18, 0)])
def test_anthropic_a_tool_use_run_and_a_tool_result_run_are_two_positions(fillers: int, expected_read: int) -> None:
    first = {"model": "claude", "messages": [{"role": "user", "content": [text("task", 2000, "5m")]}]}
    filler = [{"role": "assistant" if i % 2 else "user", "content": f"filler {i}"} for i in range(fillers)]
    second = {
        "model": "claude",
        "messages": [{"role": "user", "content": [text("task", 2000)]}, *filler, *_tool_round(3, mark_last=True)],
    }
    _, usage = run(anthropic(), (0, first), (1, second))
    assert usage.read == expected_read  # positions: task, fillers, the tool_use run, the tool_result run


def test_anthropic_adding_an_image_invalidates_the_messages_level_only() -> None:
    system = [text("sys", 2000, "5m")]
    history = [{"role": "user", "content": [text("q", 500, "5m")]}, {"role": "assistant", "content": "a"}]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    first = {"model": "claude", "system": system, "messages": history}
    second = {
        "model": "claude",
        "system": system,
        "messages": [*history, {"role": "user", "content": [image, text("look", 10, "5m")]}],
    }
    _, usage = run(anthropic(), (0, first), (1, second))
    assert usage.read == 2000


def test_anthropic_below_minimum_caches_nothing_and_raises_nothing() -> None:
    body = {
        "model": "claude",
        "system": [text("short", 1000, "5m")],
        "messages": [{"role": "user", "content": "q #10"}],
    }
    u1, u2 = run(anthropic(), (0, body), (1, body))
    for usage in (u1, u2):
        assert (usage.read, usage.write, usage.uncached, usage.cost_multiplier) == (0, 0, 1010, 1.0)
    _, u2 = run(anthropic(min_tokens=512), (0, body), (1, body))
    assert u2.read == 1000


def _system_body(ttl: str = "5m") -> dict[str, object]:
    return {"model": "claude", "system": [text("sys", 2000, ttl)], "messages": [{"role": "user", "content": "q #1"}]}


def test_anthropic_5m_entry_expires_after_5_minutes() -> None:
    _, late = run(anthropic(), (0, _system_body()), (300, _system_body()))
    assert (late.read, late.write) == (0, 2000)


def test_anthropic_hit_refreshes_the_ttl() -> None:
    usages = run(anthropic(), (0, _system_body()), (250, _system_body()), (500, _system_body()))
    assert [u.read for u in usages] == [0, 2000, 2000]


def test_anthropic_1h_entry_survives_a_10_minute_gap() -> None:
    _, one_hour = run(anthropic(), (0, _system_body("1h")), (600, _system_body("1h")))
    _, five_min = run(anthropic(), (0, _system_body()), (600, _system_body()))
    assert (one_hour.read, five_min.read) == (2000, 0)
    assert run(anthropic(), (0, _system_body("1h")))[0].write_1h == 2000


def test_anthropic_entry_not_readable_before_first_byte() -> None:
    body = _system_body()
    requests = [
        TimedRequest(t_start=0, body=body, t_first_byte=3),
        TimedRequest(t_start=1, body=body, t_first_byte=4),  # parallel: the first response has not begun
        TimedRequest(t_start=3.5, body=body),  # after the first's first byte
    ]
    usages = simulate(requests, anthropic())
    assert [(u.read, u.write) for u in usages] == [(0, 2000), (0, 2000), (2000, 0)]


def test_anthropic_lifetime_counts_from_request_start() -> None:
    body = _system_body()
    requests = [TimedRequest(t_start=0, body=body, t_first_byte=240), TimedRequest(t_start=301, body=body)]
    assert simulate(requests, anthropic())[1].read == 0


def test_anthropic_automatic_caching_marks_the_last_block() -> None:
    def body(n: int) -> dict[str, object]:
        return {**conversation(n, []), "cache_control": EPH}

    u1, u2 = run(anthropic(), (0, body(6)), (1, body(8)))
    assert (u1.write, u2.read, u2.write) == (1200, 1200, 400)


def test_anthropic_moving_a_breakpoint_keeps_content_identity() -> None:
    marked, unmarked = conversation(10, [10]), conversation(10, [])
    u1, u2 = run(anthropic(), (0, marked), (1, conversation(10, [9, 10])))
    assert u1.total == run(anthropic(), (0, unmarked))[0].total == 2000
    assert u2.read == 2000


def test_anthropic_role_is_part_of_the_identity() -> None:
    first = {"model": "claude", "messages": [{"role": "user", "content": [text("same", 2000, "5m")]}]}
    second = {"model": "claude", "messages": [{"role": "assistant", "content": [text("same", 2000, "5m")]}]}
    _, usage = run(anthropic(), (0, first), (1, second))
    assert usage.read == 0


def test_anthropic_string_content_equals_one_text_block() -> None:
    first = {"model": "claude", "messages": [{"role": "user", "content": [text("q", 2000, "5m")]}]}
    second = {"model": "claude", "messages": [{"role": "user", "content": "q #2000"}], "cache_control": EPH}
    _, usage = run(anthropic(), (0, first), (1, second))
    assert usage.read == 2000


def _levels(*, tool: str = "Read", tool_choice: object = None) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "claude",
        "tools": [{"name": tool, "description": "d #2000", "input_schema": {}, "cache_control": EPH}],
        "system": [text("sys", 1000, "5m")],
        "messages": [{"role": "user", "content": [text("m", 500, "5m")]}],
    }
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    return body


def test_anthropic_changing_tools_invalidates_everything_after() -> None:
    _, same = run(anthropic(), (0, _levels()), (1, _levels()))
    _, changed = run(anthropic(), (0, _levels()), (1, _levels(tool="Write")))
    assert (same.read, changed.read) == (3500, 0)


def test_anthropic_changing_tool_choice_invalidates_only_messages() -> None:
    _, usage = run(anthropic(), (0, _levels()), (1, _levels(tool_choice={"type": "any"})))
    assert (usage.read, usage.write_5m) == (3000, 500)


def test_anthropic_body_without_cache_control_caches_nothing() -> None:
    usages = run(anthropic(), (0, conversation(10, [])), (1, conversation(10, [])))
    assert [(u.read, u.write, u.uncached) for u in usages] == [(0, 0, 2000), (0, 0, 2000)]


# --- Anthropic: errors ----------------------------------------------------------------------------


def test_anthropic_more_than_4_breakpoints_is_an_error() -> None:
    with pytest.raises(CacheBreakpointError, match=r"messages\[4\]\.content\[0\] \(block 5\).*at most 4") as info:
        run(anthropic(), (0, conversation(5, [1, 2, 3, 4, 5])))
    assert info.value.position == 5
    assert isinstance(info.value, ValueError)


def test_anthropic_automatic_caching_needs_a_free_slot() -> None:
    with pytest.raises(CacheBreakpointError, match="automatic caching"):
        run(anthropic(), (0, {**conversation(5, [1, 2, 3, 4]), "cache_control": EPH}))


def test_anthropic_automatic_caching_conflicting_ttl_is_an_error() -> None:
    with pytest.raises(CacheBreakpointError, match=r"messages\[2\]\.content\[0\]"):
        run(anthropic(), (0, {**conversation(3, [3]), "cache_control": EPH_1H}))


def test_anthropic_1h_after_5m_is_an_error() -> None:
    body = {
        "model": "claude",
        "system": [text("a", 10, "5m"), text("b", 10, "1h")],
        "messages": [{"role": "user", "content": "q"}],
    }
    with pytest.raises(CacheBreakpointError, match=r"system\[1\] \(block 2\).*after the 5m breakpoint at system\[0\]"):
        run(anthropic(), (0, body))


def test_anthropic_unknown_ttl_is_an_error() -> None:
    body = {
        "model": "claude",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "10m"}}],
            }
        ],
    }
    with pytest.raises(CacheBreakpointError, match=r"messages\[0\]\.content\[0\] \(block 1\).*'10m'"):
        run(anthropic(), (0, body))


def test_anthropic_marker_on_a_thinking_block_is_an_error() -> None:
    body = {
        "model": "claude",
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "hm", "signature": "s", "cache_control": EPH}],
            },
        ],
    }
    with pytest.raises(CacheBreakpointError, match="thinking block"):
        run(anthropic(), (0, body))


def test_requests_out_of_time_order_are_an_error() -> None:
    sim = anthropic()
    sim.submit(TimedRequest(t_start=10, body=_system_body()))
    with pytest.raises(CacheSimulationError, match="time order"):
        sim.submit(TimedRequest(t_start=5, body=_system_body()))


# --- OpenAI ---------------------------------------------------------------------------------------


def _chat(*contents: str, key: str | None = None, model: str = "gpt-5") -> dict[str, object]:
    roles = ["system", *["user"] * (len(contents) - 1)]
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)],
    }
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def test_openai_2006_token_prompt_reads_1920_on_repeat() -> None:
    body = _chat("system #1500", "question #506")
    first, second = run(openai(), (0, body), (1, body))
    assert (first.total, first.read, first.write, first.uncached) == (2006, 0, 0, 2006)
    assert (second.read, second.uncached) == (1920, 86)
    assert second.cost_multiplier == pytest.approx((86 + 0.1 * 1920) / 2006)


def test_openai_below_1024_tokens_is_never_cached() -> None:
    body = _chat("system #1000", "q #23")
    assert [u.read for u in run(openai(), (0, body), (1, body))] == [0, 0]


def test_openai_block_granularity_and_128_token_steps() -> None:
    _, usage = run(openai(), (0, _chat("s #1300", "a #100", "b #600")), (1, _chat("s #1300", "a #100", "c #600")))
    assert usage.read == 1280  # common prefix 1400 (the changed block counts 0): 1024 + 128·⌊376/128⌋


def test_openai_prompt_cache_key_and_model_partition_the_cache() -> None:
    body, other_key, other_model = (
        _chat("s #2000", key="a"),
        _chat("s #2000", key="b"),
        _chat("s #2000", key="a", model="x"),
    )
    assert run(openai(), (0, body), (1, other_key))[1].read == 0
    assert run(openai(), (0, body), (1, other_model))[1].read == 0
    assert run(openai(), (0, body), (1, body))[1].read == 1920


def test_openai_idle_expiry_and_refresh() -> None:
    body = _chat("s #2000")
    assert run(openai(), (0, body), (300, body))[1].read == 0
    assert [u.read for u in run(openai(), (0, body), (200, body), (400, body))] == [0, 1920, 1920]
    assert run(openai(idle_ttl_seconds=600), (0, body), (500, body))[1].read == 1920


def test_openai_hard_cap_of_one_hour() -> None:
    body = _chat("s #2000")
    times = [200.0 * i for i in range(20)]  # 0 .. 3800, every 200 s: never idle for long
    reads = [u.read for u in run(openai(), *[(t, body) for t in times])]
    assert reads[0] == 0 and all(r == 1920 for r in reads[1:18])
    assert reads[18] == 0  # t=3600: the entry created at t=0 is gone
    assert reads[19] == 1920  # re-created at t=3600


def test_openai_entry_not_readable_before_first_byte() -> None:
    body = _chat("s #2000")
    requests = [
        TimedRequest(t_start=0, body=body, t_first_byte=2),
        TimedRequest(t_start=1, body=body),
        TimedRequest(t_start=2, body=body),
    ]
    assert [u.read for u in simulate(requests, openai())] == [0, 0, 1920]


def test_openai_responses_body() -> None:
    def body(*turns: str) -> dict[str, object]:
        return {
            "model": "gpt-5",
            "instructions": "be brief #1500",
            "input": [{"role": "user", "content": t} for t in turns],
        }

    _, usage = run(openai(), (0, body("one #300")), (1, body("one #300", "two #50")))
    assert (usage.total, usage.read) == (1850, 1792)


def test_openai_instructions_and_input_are_different_roles() -> None:
    first = {"model": "gpt-5", "instructions": "shared #2000", "input": "q #1"}
    second = {"model": "gpt-5", "input": "shared #2000"}
    _, usage = run(openai(), (0, first), (1, second))
    assert (usage.total, usage.read) == (2000, 0)


def test_openai_tool_calls_are_part_of_the_prefix() -> None:
    def body(call_args: str) -> dict[str, object]:
        call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": call_args}}
        return {
            "model": "gpt-5",
            "messages": [
                {"role": "system", "content": "s #1100"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "out #300"},
            ],
        }

    same = run(openai(), (0, body("a #5")), (1, body("a #5")))[1]
    changed = run(openai(), (0, body("a #5")), (1, body("b #5")))[1]
    assert (same.total, same.read, changed.read) == (1405, 1280, 1024)


def test_openai_unreadable_body_is_an_error() -> None:
    with pytest.raises(CacheSimulationError, match="neither 'messages' nor"):
        run(openai(), (0, {"model": "gpt-5"}))


# --- reusable tokens and summaries ----------------------------------------------------------------


def _session(*, timestamp_first: bool, turns: int = 6) -> list[TimedRequest]:
    """An agent session with a rolling breakpoint; the per-turn timestamp goes first or in the tail."""
    requests: list[TimedRequest] = []
    history: list[dict[str, object]] = []
    for n in range(turns):
        stamp = text(f"now {n}", 5)
        user: list[dict[str, object]] = [text(f"ask {n}", 50)]
        if not timestamp_first:
            user.append(stamp)
        user[-1] = {**user[-1], "cache_control": EPH}
        system = [stamp, text("stable", 3000, "5m")] if timestamp_first else [text("stable", 3000, "5m")]
        messages = [*history, {"role": "user", "content": user}]
        requests.append(
            TimedRequest(t_start=10.0 * n, body={"model": "claude", "system": system, "messages": messages})
        )
        unmarked = [{k: v for k, v in b.items() if k != "cache_control"} for b in user]
        history = [*history, {"role": "user", "content": unmarked}, {"role": "assistant", "content": f"reply {n} #80"}]
    return requests


def test_good_placement_reads_everything_reusable() -> None:
    summary = summarise(simulate(_session(timestamp_first=False), anthropic()))
    assert summary.reusable > 0
    assert summary.cache_efficiency == 1.0
    assert summary.relative_input_cost < 0.5


def test_per_turn_content_before_history_scores_low() -> None:
    summary = summarise(simulate(_session(timestamp_first=True), anthropic()))
    assert summary.read == 0
    assert summary.reusable > 3000 * 5
    assert summary.cache_efficiency == 0.0
    assert summary.relative_input_cost > 1.0


def test_summary_totals() -> None:
    usages = simulate(_session(timestamp_first=False), anthropic())
    summary = summarise(usages)
    assert summary.requests == len(usages)
    assert summary.total == sum(u.total for u in usages)
    assert summary.read + summary.write + summary.uncached == summary.total
    assert summary.relative_input_cost == pytest.approx(sum(u.weighted_tokens for u in usages) / summary.total)
    empty = summarise([])
    assert (empty.total, empty.cache_efficiency, empty.relative_input_cost) == (0, 1.0, 1.0)


def test_reusable_expires_with_the_earlier_request_window() -> None:
    _, late = run(anthropic(), (0, _system_body()), (400, _system_body()))
    _, early = run(anthropic(), (0, _system_body()), (200, _system_body()))
    assert (late.reusable, early.reusable) == (0, 2001)


def test_a_block_repeated_within_one_request_is_not_reusable() -> None:
    repeated = {"role": "user", "content": "again #100"}
    body = {"model": "claude", "messages": [repeated, {"role": "assistant", "content": "ok"}, repeated]}
    assert run(anthropic(), (0, body))[0].reusable == 0
    chat = {"model": "gpt-5", "messages": [repeated, repeated]}
    assert run(openai(), (0, chat))[0].reusable == 0


def test_reusable_window_follows_the_ttl_of_an_entry_read() -> None:
    marked = _system_body("1h")
    reader = {
        "model": "claude",
        "system": [text("sys", 2000)],
        "messages": [{"role": "user", "content": [text("q", 1, "5m")]}],
    }
    # The 5m-only request at t=3000 refreshes the 1h entry, so its window is 1h too.
    *_, third = run(anthropic(), (0, marked), (3000, reader), (3700, reader))
    assert third.read == 2000
    assert third.reusable >= third.read


def _system_1h_history_5m(history: int) -> dict[str, object]:
    """A 1h breakpoint on the system prompt and a 5m one at the end of `history` tokens of conversation."""
    return {
        "model": "claude",
        "system": [text("sys", 2000, "1h")],
        "messages": [{"role": "user", "content": [text("history", history, "5m")]}],
    }


def test_reusable_window_is_per_block() -> None:
    # After 10 minutes the 1h system entry is alive but the 5m history entry is not: only the system
    # blocks could have been read, so a layout that reads them all is fully efficient.
    first, later = run(anthropic(), (0, _system_1h_history_5m(3000)), (600, _system_1h_history_5m(3000)))
    assert (later.read, later.write_5m) == (2000, 3000)
    assert later.reusable == 2000
    assert summarise([first, later]).cache_efficiency == 1.0


def test_reusable_window_per_block_within_the_short_ttl() -> None:
    _, soon = run(anthropic(), (0, _system_1h_history_5m(3000)), (200, _system_1h_history_5m(3000)))
    assert (soon.read, soon.reusable) == (5000, 5000)


def test_blocks_after_the_last_breakpoint_keep_a_5_minute_window() -> None:
    body = {
        "model": "claude",
        "system": [text("sys", 2000, "1h")],
        "messages": [{"role": "user", "content": [text("unmarked", 500)]}],
    }
    _, soon = run(anthropic(), (0, body), (200, body))
    _, late = run(anthropic(), (0, body), (600, body))
    assert (soon.reusable, late.reusable) == (2500, 2000)


def test_anthropic_1h_write_costs_twice_the_base_price() -> None:
    (usage,) = run(anthropic(), (0, _system_body("1h")))
    assert (usage.write_1h, usage.write_5m, usage.uncached) == (2000, 0, 1)
    assert usage.weighted_tokens == pytest.approx(2 * 2000 + 1)
    (five,) = run(anthropic(), (0, _system_body("5m")))
    assert five.weighted_tokens == pytest.approx(1.25 * 2000 + 1)


def test_anthropic_a_hit_refreshes_for_the_entry_own_ttl() -> None:
    # A 5m breakpoint that finds the 1h entry refreshes it for an hour, not for five minutes.
    reader = {
        "model": "claude",
        "system": [text("sys", 2000)],
        "messages": [{"role": "user", "content": [text("q", 1, "5m")]}],
    }
    *_, hit = run(anthropic(), (0, _system_body("1h")), (3000, reader), (3000 + 3000, reader))
    assert hit.read == 2000
    *_, missed = run(anthropic(), (0, _system_body("5m")), (200, reader), (200 + 400, reader))
    assert missed.read == 0


def test_anthropic_pre_warm_vector() -> None:
    # The docs' pre-warm example: `max_tokens: 0` writes 5,120 tokens (5m) and bills 8 uncached.
    body = {
        "model": "claude",
        "max_tokens": 0,
        "system": [text("instructions", 5120, "5m")],
        "messages": [{"role": "user", "content": "warm #8"}],
    }
    (usage,) = run(anthropic(), (0, body))
    assert (usage.write_5m, usage.write_1h, usage.read, usage.uncached) == (5120, 0, 0, 8)


def test_sixty_turn_session_is_fast() -> None:
    requests: list[TimedRequest] = []
    history: list[dict[str, object]] = []
    tools = [{"name": f"tool{i}", "description": "x" * 400, "input_schema": {"type": "object"}} for i in range(12)]
    for n in range(60):
        tail = {"type": "text", "text": f"turn {n} " + "y" * 2000, "cache_control": EPH}
        body = {
            "model": "claude",
            "tools": tools,
            "system": [{"type": "text", "text": "z" * 20_000, "cache_control": EPH_1H}],
        }
        requests.append(
            TimedRequest(t_start=30.0 * n, body={**body, "messages": [*history, {"role": "user", "content": [tail]}]})
        )
        history = [*history, {"role": "user", "content": [{"type": "text", "text": tail["text"]}]}]
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"reply {n} " + "w" * 1500}]})
    usages = simulate(requests, AnthropicCacheSimulator())
    assert summarise(usages).cache_efficiency == 1.0


# --- properties -----------------------------------------------------------------------------------

_LABELS = st.sampled_from(["a", "b", "c", "d"])
_TOKENS = st.sampled_from([0, 7, 300, 700, 1500])
_MARK = st.sampled_from([None, None, None, "5m", "1h"])
_BLOCK = st.tuples(_LABELS, _TOKENS, _MARK, st.sampled_from(["text", "tool_use", "tool_result"]))


def _anthropic_body(blocks: list[tuple[str, int, str | None, str]], auto: bool) -> dict[str, object]:
    marks_left = 3 if auto else 4
    seen_5m = False
    content: list[dict[str, object]] = []
    for label, tokens, mark, kind in blocks:
        if kind == "text":
            block: dict[str, object] = {"type": "text", "text": f"{label} #{tokens}"}
        elif kind == "tool_use":
            block = {"type": "tool_use", "id": label, "name": "t", "input": {"q": f"#{tokens}"}}
        else:
            block = {"type": "tool_result", "tool_use_id": label, "content": f"#{tokens}"}
        if mark is not None and marks_left > 0:
            mark = "5m" if seen_5m else mark
            seen_5m = seen_5m or mark == "5m"
            block["cache_control"] = EPH if mark == "5m" else EPH_1H
            marks_left -= 1
        content.append(block)
    body: dict[str, object] = {"model": "claude", "messages": [{"role": "user", "content": content}]}
    if auto:
        body["cache_control"] = {"type": "ephemeral", "ttl": "5m"}
        last = content[-1].get("cache_control")
        if last is not None and last != EPH:
            content[-1] = {k: v for k, v in content[-1].items() if k != "cache_control"}
    return body


def _check(usage: CacheUsage) -> None:
    assert usage.read + usage.write_5m + usage.write_1h + usage.uncached == usage.total
    assert 0 <= usage.read <= usage.total
    assert min(usage.read, usage.write_5m, usage.write_1h, usage.uncached) >= 0
    assert 0.1 - 1e-9 <= usage.cost_multiplier <= 2.0 + 1e-9
    assert usage.read <= usage.reusable <= usage.total


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 400),
            st.floats(0, 30),
            st.lists(_BLOCK, min_size=1, max_size=12),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    )
)
@pytest.mark.slow
def test_anthropic_usage_always_adds_up(
    requests: list[tuple[float, float, list[tuple[str, int, str | None, str]], bool]],
) -> None:
    sim, t = anthropic(min_tokens=500), 0.0
    for gap, delay, blocks, auto in requests:
        t += gap
        _check(sim.submit(TimedRequest(t_start=t, body=_anthropic_body(blocks, auto), t_first_byte=t + delay)))


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 400),
            st.lists(st.tuples(_LABELS, _TOKENS), min_size=1, max_size=8),
            st.sampled_from([None, "k"]),
        ),
        min_size=1,
        max_size=8,
    )
)
@pytest.mark.slow
def test_openai_usage_always_adds_up(requests: list[tuple[float, list[tuple[str, int]], str | None]]) -> None:
    sim, t = openai(), 0.0
    for gap, blocks, key in requests:
        t += gap
        body = {"model": "gpt-5", "messages": [{"role": "user", "content": f"{label} #{n}"} for label, n in blocks]}
        if key is not None:
            body["prompt_cache_key"] = key
        _check(sim.submit(TimedRequest(t_start=t, body=body)))
