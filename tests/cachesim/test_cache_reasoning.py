"""The cache simulator and reasoning: replayed thinking and reasoning items are input, never a breakpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.cachesim import (
    AnthropicCacheRules,
    AnthropicCacheSimulator,
    CacheBreakpointError,
    OpenAICacheSimulator,
    TimedRequest,
)
from lamina.placement import AnthropicTarget, ReasoningConfig, render
from lamina.session import AssistantMessage, Reasoning, ToolCall, ToolResult
from tests.conftest import examples
from tests.support.engine import Clock, json_body, make_engine
from tests.support.tagged import TaggedEstimator

EPH = {"type": "ephemeral"}


def _sim(**rules: Any) -> AnthropicCacheSimulator:
    return AnthropicCacheSimulator(rules=AnthropicCacheRules(**rules), estimator=TaggedEstimator())


def _thinking(tokens: int, n: int = 0) -> dict[str, object]:
    return {"type": "thinking", "thinking": f"plan {n} #{tokens}", "signature": f"sig-{n}"}


def _tool_loop(thinking: int, *, redacted: bool = False) -> list[dict[str, Any]]:
    """A user turn and one tool round with interleaved thinking, the tool result marked."""
    block = {"type": "redacted_thinking", "data": f"opaque #{thinking}"} if redacted else _thinking(thinking)
    return [
        {"role": "user", "content": [{"type": "text", "text": "task #2000"}]},
        {"role": "assistant", "content": [block, {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "out #100"}]},
    ]


@pytest.mark.parametrize("redacted", [False, True])
def test_replayed_thinking_is_billed_as_input_and_read_from_the_cache(redacted: bool) -> None:
    messages = _tool_loop(300, redacted=redacted)
    messages[-1]["content"][-1]["cache_control"] = EPH
    sim = _sim()
    first = sim.submit(TimedRequest(0.0, {"messages": messages}))
    assert first.total == 2000 + 300 + 100  # the thinking is input like any block
    assert first.write_5m == first.total
    again = sim.submit(TimedRequest(10.0, {"messages": messages}))
    assert again.read == again.total == 2400  # cached inside the earlier turn, read as input


@pytest.mark.parametrize(("thinking_blocks", "expected_read"), [(17, 2000), (18, 0)])
def test_thinking_blocks_take_lookback_positions(thinking_blocks: int, expected_read: int) -> None:
    """Written at block 1; 20 positions back from the breakpoint reach it only with 17 thinking blocks between."""
    first = {"messages": [{"role": "user", "content": [{"type": "text", "text": "task #2000", "cache_control": EPH}]}]}
    thinking = [_thinking(10, n) for n in range(thinking_blocks)]
    second = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "task #2000"}]},
            {"role": "assistant", "content": [*thinking, {"type": "text", "text": "done #5"}]},
            {"role": "user", "content": [{"type": "text", "text": "next #5", "cache_control": EPH}]},
        ]
    }
    sim = _sim()
    sim.submit(TimedRequest(0.0, first))
    assert sim.submit(TimedRequest(10.0, second)).read == expected_read


def test_automatic_caching_walks_back_over_a_trailing_thinking_block() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "task #2000"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "so far #50"}, _thinking(300)]},
    ]
    usage = _sim().submit(TimedRequest(0.0, {"messages": messages, "cache_control": EPH}))
    assert (usage.write_5m, usage.uncached) == (2050, 300)  # the breakpoint went on the text before it


@given(
    st.lists(st.integers(1, 500), min_size=1, max_size=6),
    st.integers(0, 5),
    st.sampled_from(["thinking", "redacted_thinking"]),
)
@settings(max_examples=examples(100), deadline=None)
def test_a_marked_thinking_block_is_always_refused(tokens: list[int], at: int, kind: str) -> None:
    blocks: list[dict[str, object]] = [
        _thinking(t, n) if kind == "thinking" else {"type": kind, "data": f"d{n} #{t}"} for n, t in enumerate(tokens)
    ]
    blocks[at % len(blocks)]["cache_control"] = EPH
    messages = [
        {"role": "user", "content": "task #2000"},
        {"role": "assistant", "content": [*blocks, {"type": "text", "text": "ok #1"}]},
    ]
    with pytest.raises(CacheBreakpointError, match="cannot carry cache_control"):
        _sim().submit(TimedRequest(0.0, {"messages": messages}))


def test_older_models_strip_earlier_turns_thinking() -> None:
    """`strip_earlier_thinking`: the next user turn drops the last turn's thinking, so the cache breaks there."""
    loop = _tool_loop(300)
    loop[-1]["content"][-1]["cache_control"] = EPH
    done = [*loop, {"role": "assistant", "content": [_thinking(40, 1), {"type": "text", "text": "fixed #20"}]}]
    unmarked = [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]} for m in done
    ]
    nxt = [*unmarked, {"role": "user", "content": [{"type": "text", "text": "more #30", "cache_control": EPH}]}]
    for strip, total, read in ((False, 2490, 2400), (True, 2150, 0)):  # no entry before the stripped block
        sim = _sim(strip_earlier_thinking=strip)
        during = sim.submit(TimedRequest(0.0, {"messages": loop}))
        assert during.total == 2400  # the turn in progress keeps its thinking either way
        after = sim.submit(TimedRequest(30.0, {"messages": nxt}))
        assert (after.total, after.read) == (total, read)


def test_responses_reasoning_items_are_input_and_part_of_the_prefix() -> None:
    sim = OpenAICacheSimulator(estimator=TaggedEstimator())
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA #300"}
    call = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{} #20"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "out #100"}
    user = {"role": "user", "content": [{"type": "input_text", "text": "task #2000"}]}
    first = sim.submit(TimedRequest(0.0, {"model": "gpt-5", "input": [user, reasoning, call, output]}))
    assert first.total == 2420
    changed = {**reasoning, "encrypted_content": "gBBB #300"}
    again = sim.submit(TimedRequest(10.0, {"model": "gpt-5", "input": [user, changed, call, output]}))
    assert again.read == 1024 + 128 * ((2000 - 1024) // 128)  # the prefix ends where the item changed


@pytest.mark.parametrize("rounds", [1, 3])
def test_rendered_thinking_never_carries_a_breakpoint(tmp_path: Path, rounds: int) -> None:
    """Our Anthropic placement with interleaved thinking: every body is accepted, thinking billed, never marked."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Rules\n")
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    target = AnthropicTarget(model="claude-sonnet-5", reasoning=ReasoningConfig(thinking="adaptive"))
    sim = AnthropicCacheSimulator()
    replayed = 0
    for t in range(3):
        turn = engine.prepare_turn(f"Turn {t}: fix module_{t}.py " * 40)
        for r in range(rounds + 1):
            body = json_body(render(turn, target, continuation=engine.continuation(turn)))
            thinking = [
                b
                for m in body["messages"]
                if isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") == "thinking"
            ]
            assert all("cache_control" not in b for b in thinking)
            assert len(thinking) == replayed
            plain = {**body, "messages": _without_thinking(body["messages"])}
            usage = sim.submit(TimedRequest(clock.now, body))  # raises CacheBreakpointError on a marked thinking block
            if thinking:  # billed as input
                assert usage.total > AnthropicCacheSimulator().submit(TimedRequest(0.0, plain)).total
            clock.advance(0.2)
            reasoning = (Reasoning(provider="anthropic", kind="thinking", text=f"think {t}.{r} " * 30, signature="s"),)
            engine.record(AssistantMessage(text="done" if r == rounds else "", reasoning=reasoning))
            replayed += 1
            if r < rounds:
                engine.record(ToolCall(call_id=f"c{t}{r}", name="Read", input={"path": f"m{t}.py"}))
                engine.record(ToolResult(call_id=f"c{t}{r}", name="Read", content="x = 1\n" * 50))
        engine.commit(turn)
        clock.advance(1)


def _without_thinking(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [b for b in content if b.get("type") != "thinking"]
        out.append({**m, "content": content})
    return out


@pytest.mark.slow
@pytest.mark.parametrize("target", ["anthropic", "responses"])
def test_the_reasoning_benchmark_runs_on_the_wire_server_and_nothing_is_refused(target: str) -> None:
    """The cache benchmark with reasoning on: every request accepted, billed once per model call."""
    from benchmarks._reasoning import run_on_wire
    from benchmarks._scenario import session_script

    script = session_script(turns=2)
    calls = sum(len(t.steps) for t in script)
    on, off = run_on_wire(script, target, reasoning=True), run_on_wire(script, target, reasoning=False)
    assert (on.refused, off.refused) == (0, 0)
    assert len(on.usages) == len(off.usages) == calls
    assert off.replayed == off.reasoning == 0
    assert on.bill(target) >= off.bill(target)  # reasoning is output when made, input when sent back
