"""A stable input that changes mid-session (invariant 3): delivered once in the tail, the cached prefix kept.

The design: while a conversation is under way, a change of a stable input (AGENTS.md, preferences,
the skill catalogue) is recorded as a `stable` state change and queued as a one-shot
`stable_update` part; the prefix keeps the version it was cached with until the next compaction,
which rebuilds it with the latest version. The kept prefix is stored in the state change, so a
resumed session renders the same bytes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from lamina.cachesim import AnthropicCacheRules, AnthropicCacheSimulator, TimedRequest, summarise
from lamina.compaction import DeterministicSummariser
from lamina.engine import ContextEngine
from lamina.placement import render
from lamina.session import AssistantMessage, StateChange, ToolCall, ToolResult, TurnRecord, Usage
from tests.support.engine import ANTHROPIC, Clock, make_engine

NEW_RULE = "Never push to main."


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests with `make test`.\n" * 40)
    return root


def edit(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Run the tests with `make test`.\n" * 40 + NEW_RULE + "\n")


def prefix(body: Any) -> str:
    """The stable prefix: tools, system and the first user message (the stable project parts)."""
    first = body["messages"][0]
    return json.dumps({"tools": body.get("tools"), "system": body.get("system"), "context": first}, sort_keys=True)


def play(engine: ContextEngine, n: int, *, commit: bool = True) -> Any:
    """One turn with a tool call; returns the body of its first request."""
    turn = engine.prepare_turn(f"request {n}: look at module_{n}.py " + "and check it carefully " * 20)
    body = render(turn, ANTHROPIC)
    engine.record(ToolCall(call_id=f"c{n}", name="Read", input={"path": f"module_{n}.py"}))
    engine.record(ToolResult(call_id=f"c{n}", name="Read", content="def check():\n    return True\n" * 30))
    engine.record(AssistantMessage(text=f"answer {n}", usage=Usage(input=10, output=5)))
    if commit:
        engine.commit(turn)
    return body


def stable_changes(engine: ContextEngine) -> list[StateChange]:
    return [e for e in engine.session.entries() if isinstance(e, StateChange) and e.key == "stable"]


def test_invariant_3_an_edit_mid_session_costs_no_cached_prefix(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    simulator = AnthropicCacheSimulator(rules=AnthropicCacheRules(min_tokens=0))  # a small test session
    usages = []
    for n in range(6):
        if n == 3:
            edit(workspace)
        clock.advance(1)
        body = play(engine, n)
        usages.append(simulator.submit(TimedRequest(clock.now, body)))
    before, after = usages[2], usages[3]
    # the request after the edit reads everything the request before it sent
    assert after.read == before.total
    assert summarise(usages).cache_efficiency == 1.0


def test_invariant_2_the_edit_arrives_exactly_once_through_the_outbox_and_is_recorded(
    tmp_path: Path, workspace: Path
) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    play(engine, 0)
    edit(workspace)
    turn = engine.prepare_turn("next")
    assert [o.kind for o in turn.one_shots] == ["stable_update"]
    assert NEW_RULE in turn.one_shots[0].text
    assert NEW_RULE not in prefix(render(turn, ANTHROPIC))
    assert turn.stable.version == 1
    engine.commit(turn)
    later = [render(engine.prepare_turn(f"later {n}"), ANTHROPIC) for n in range(3)]
    assert json.dumps(later[-1]).count(NEW_RULE) == 1
    changes = stable_changes(engine)
    assert [c.value.split(":")[0] for c in changes] == ["1", "2"]
    assert (changes[1].prefix_version, "changed context.agents" in changes[1].detail) == (1, True)


def test_the_kept_prefix_and_the_delivery_survive_a_resume(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    first = play(engine, 0)
    edit(workspace)
    play(engine, 1)
    engine.session.close()

    again = make_engine(tmp_path, workspace, clock, session_id=engine.session.id)
    turn = again.prepare_turn("after the resume")
    body = render(turn, ANTHROPIC)
    assert prefix(body) == prefix(first)  # byte for byte: the cache written before the resume still applies
    assert turn.one_shots == ()
    assert json.dumps(body).count(NEW_RULE) == 1
    assert len(stable_changes(again)) == 2


def test_an_edit_while_the_session_was_closed_arrives_in_the_tail(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    first = play(engine, 0)
    engine.session.close()
    edit(workspace)

    again = make_engine(tmp_path, workspace, clock, session_id=engine.session.id)
    turn = again.prepare_turn("after the resume")
    body = render(turn, ANTHROPIC)
    assert prefix(body) == prefix(first)
    assert [o.kind for o in turn.one_shots] == ["stable_update"]
    assert json.dumps(body).count(NEW_RULE) == 1


def test_an_undelivered_update_is_sent_again_after_a_crash(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    play(engine, 0)
    edit(workspace)
    play(engine, 1, commit=False)  # sent, but the process died before the commit
    engine.session.close()

    again = make_engine(tmp_path, workspace, clock, session_id=engine.session.id)
    turn = again.prepare_turn("retry")
    assert [o.kind for o in turn.one_shots] == ["stable_update"]
    again.commit(turn)
    assert again.prepare_turn("then").one_shots == ()


def test_a_compaction_rebuilds_the_prefix_with_the_latest_version(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(4):
        play(engine, n)
    edit(workspace)
    play(engine, 4)
    outcome = asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="manual", keep_tokens=300))
    assert outcome.status == "compacted"
    turn = engine.prepare_turn("after the compaction")
    assert NEW_RULE in prefix(render(turn, ANTHROPIC))
    assert turn.stable.version == 2
    records = [e for e in engine.session.entries() if isinstance(e, TurnRecord)]
    assert records[-1].stable_version == 2

    # the next edit right after a compaction, before a turn was sent under the new prefix, re-pins it
    engine.session.close()
    again = make_engine(tmp_path, workspace, clock, session_id=engine.session.id)
    assert again.prepare_turn("once more").stable.version == 2


def test_an_edit_right_after_a_compaction_repins_the_prefix(tmp_path: Path, workspace: Path) -> None:
    clock = Clock()
    engine = make_engine(tmp_path, workspace, clock)
    for n in range(4):
        play(engine, n)
    asyncio.run(engine.compactor.compact(DeterministicSummariser(), trigger="manual", keep_tokens=300))
    edit(workspace)
    turn = engine.prepare_turn("after the compaction")
    assert turn.one_shots == ()
    assert NEW_RULE in prefix(render(turn, ANTHROPIC))
    assert stable_changes(engine)[-1].prefix_version == 2
