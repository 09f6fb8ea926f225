"""The turn breakpoint: an idle gap between turns costs the last turn's writes, not the whole history's."""

from __future__ import annotations

from pathlib import Path

from lamina.cachesim import AnthropicCacheSimulator, CacheUsage, TimedRequest
from lamina.engine import ContextEngine
from lamina.placement import AnthropicTarget, render
from lamina.session import AssistantMessage, ToolCall, ToolResult
from tests.support.engine import Clock, json_body, make_engine

BIG = "value = compute(item, limit=10)  # a line of code\n" * 300  # about 4,000 tokens


def _turn(
    engine: ContextEngine, clock: Clock, sim: AnthropicCacheSimulator, target: AnthropicTarget, n: int
) -> list[CacheUsage]:
    turn = engine.prepare_turn(f"turn {n}")
    usages = []
    for call in range(3):
        body = render(turn, target, continuation=engine.continuation(turn))
        usages.append(sim.submit(TimedRequest(clock.now, json_body(body), clock.now + 1)))
        clock.advance(0.2)
        if call < 2:
            engine.record(AssistantMessage(text=f"step {call}"))
            engine.record(ToolCall(call_id=f"c{n}{call}", name="Read", input={"path": f"f{n}{call}"}))
            engine.record(ToolResult(call_id=f"c{n}{call}", name="Read", content=f"{n}{call}\n{BIG}"))
    engine.record(AssistantMessage(text="Done."))
    engine.commit(turn)
    return usages


def _session(tmp_path: Path, target: AnthropicTarget) -> list[list[CacheUsage]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Rules\n" + "- Run the tests.\n" * 200)
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    sim = AnthropicCacheSimulator()
    turns = []
    for n in range(5):
        clock.advance(9 if n == 4 else 2)  # minutes: the user's last pause outlives a 5-minute entry
        turns.append(_turn(engine, clock, sim, target, n))
    return turns


def test_after_an_idle_gap_only_the_last_turns_tool_loop_is_written_again(tmp_path: Path) -> None:
    turns = _session(tmp_path, AnthropicTarget(model="claude-sonnet-5"))
    after_gap = turns[4][0]
    last_loop = sum(u.write for u in turns[3][1:])  # what turn 3's tool loop wrote (two big results)
    assert after_gap.read > 3 * 8_000  # turns 0-2 and turn 3's message: read from the 1-hour turn entry
    assert after_gap.write < last_loop + 500
    # and a turn's first request writes its tail with 1 hour, its loop's calls with 5 minutes
    assert turns[1][0].write_1h > 0 and turns[1][1].write_1h == 0


def test_without_the_turn_breakpoint_the_gap_writes_the_whole_history(tmp_path: Path) -> None:
    rolling_only = AnthropicTarget(model="claude-sonnet-5", turn_ttl="5m")
    after_gap = _session(tmp_path, rolling_only)[4][0]
    assert after_gap.read < 2_000  # only the stable prefix survived
    assert after_gap.write > 4 * 8_000


def test_the_previous_request_is_marked_when_the_lookback_would_not_reach_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Rules\n" + "- Run the tests.\n" * 200)
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    sim = AnthropicCacheSimulator()
    target = AnthropicTarget(model="claude-sonnet-5")
    turn = engine.prepare_turn("go")
    sim.submit(TimedRequest(clock.now, json_body(render(turn, target)), clock.now + 1))
    engine.record(AssistantMessage(text="Reading."))
    engine.record(ToolCall(call_id="c0", name="Read", input={"path": "f"}))
    engine.record(ToolResult(call_id="c0", name="Read", content=BIG))
    clock.advance(0.2)
    body = render(turn, target, continuation=engine.continuation(turn))
    second = sim.submit(TimedRequest(clock.now, json_body(body), clock.now + 1))
    for i in range(25):  # 25 text blocks in one assistant message: 25 lookback positions
        engine.record(AssistantMessage(text=f"thinking aloud {i}: " + "words " * 60))
    engine.record(ToolCall(call_id="c1", name="Read", input={"path": "g"}))
    engine.record(ToolResult(call_id="c1", name="Read", content=BIG))
    clock.advance(0.2)
    body = render(turn, target, continuation=engine.continuation(turn))
    third = sim.submit(TimedRequest(clock.now, json_body(body), clock.now + 1))
    assert third.read >= second.read + second.write  # everything the previous request cached is read
