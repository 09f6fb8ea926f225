"""The agent loop end to end: official SDK clients against the local wire server, real tools."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import Agent, AgentEvent, AgentOptions, ToolStarted, open_agent
from lamina.context import INTERRUPTED_RESULT
from lamina.errors import ContextOverflowError, ProviderError
from lamina.providers import Provider, RetryPolicy
from lamina.session import LocalSessionStore, OutboxRecord, SessionStore, ToolCall, ToolResult
from tests.support.engine import memory_store
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Fail, Reply, ToolUse
from tests.wire.server import WireServer

PROVIDERS: dict[str, Callable[[WireServer], Any]] = {
    "anthropic": anthropic_provider,
    "openai-chat": openai_chat_provider,
    "openai-responses": openai_responses_provider,
}


async def _no_sleep(_: float) -> None:
    return None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (root / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    return root


def _agent(
    tmp_path: Path, workspace: Path, provider: Provider, *, store: SessionStore | None = None, **options: Any
) -> Agent:
    """An agent on the test folder's in-memory store (or on `store`)."""
    store = store or memory_store(tmp_path, time.time)
    return open_agent(
        store, provider, workspace=workspace, options=AgentOptions(retry=RetryPolicy(sleep=_no_sleep), **options)
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", PROVIDERS)
async def test_tool_round_trip_and_parallel_calls(tmp_path: Path, workspace: Path, wire: WireServer, kind: str) -> None:
    wire.script(
        Reply(
            text="Reading the rules and the code.",
            tool_calls=[
                ToolUse("Read", {"path": "AGENTS.md"}),
                ToolUse("Read", {"path": "app.py"}),
                ToolUse("Glob", {"pattern": "*.py"}),
            ],
        ),
        Reply(text="Fixing.", tool_calls=[ToolUse("Edit", {"path": "app.py", "old_string": " + 1", "new_string": ""})]),
        Reply(text="Done: total() no longer adds 1."),
    )
    async with PROVIDERS[kind](wire) as provider:
        agent = _agent(tmp_path, workspace, provider, mode="execute")
        outcome = await agent.run_turn("Fix total() in app.py")
    assert outcome.text == "Done: total() no longer adds 1."
    assert outcome.tools_run == ("Read", "Read", "Glob", "Edit")
    assert (workspace / "app.py").read_text() == "def total(xs):\n    return sum(xs)\n"
    assert [r.status for r in wire.requests] == [200, 200, 200]  # the server checks tool pairing
    assert outcome.usages[-1].cache_read > 0  # the third request read what the second wrote
    entries = agent.engine.session.entries()
    calls = [e for e in entries if isinstance(e, ToolCall)]
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert [c.call_id for c in calls] == [r.call_id for r in results]
    agent.engine.session.close()


async def test_denied_call_keeps_the_log_well_formed(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    wire.script(
        Reply(text="Writing.", tool_calls=[ToolUse("Write", {"path": "new.py", "content": "x = 1\n"})]),
        Reply(text="I may not write in explore mode."),
    )
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider, mode="explore")
        outcome = await agent.run_turn("Create new.py")
    result = next(e for e in agent.engine.session.entries() if isinstance(e, ToolResult))
    assert result.is_error and "explore" in result.content
    assert not (workspace / "new.py").exists()
    assert outcome.text == "I may not write in explore mode."
    assert wire.requests[-1].status == 200


@pytest.mark.slow
async def test_retry_after_overload_then_overflow_is_a_typed_error(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    wire.script(Fail("overloaded", retry_after=1), Reply(text="Hello."), Fail("overflow"))
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider)
        assert (await agent.run_turn("hi")).text == "Hello."
        with pytest.raises(ContextOverflowError):
            await agent.run_turn("a very long request")


@pytest.mark.slow
@pytest.mark.parametrize("kind", PROVIDERS)
async def test_a_one_shot_is_delivered_only_once_a_request_carrying_it_is_accepted(
    tmp_path: Path, workspace: Path, wire: WireServer, kind: str
) -> None:
    wire.script(Fail("auth"), Reply(text="Hello."))
    async with PROVIDERS[kind](wire) as provider:
        agent = _agent(tmp_path, workspace, provider)
        part_id = agent.engine.queue_one_shot("note", "ONE-SHOT-MARK-7f3")
        with pytest.raises(ProviderError):
            await agent.run_turn("the refused request")
        refused = [e for e in agent.engine.session.entries() if isinstance(e, OutboxRecord) and e.part_id == part_id]
        assert [r.status for r in refused] == ["queued"]  # the provider refused it: not delivered
        assert [r.status for r in wire.requests] == [401]
        outcome = await agent.run_turn("the accepted request")
        assert outcome.text == "Hello."
        assert "ONE-SHOT-MARK-7f3" in outcome.turn.tail  # sent in the tail of the turn that was accepted
        assert json.dumps(wire.bodies()[-1]).count("ONE-SHOT-MARK-7f3") == 1
        records = [e for e in agent.engine.session.entries() if isinstance(e, OutboxRecord) and e.part_id == part_id]
        assert [r.status for r in records] == ["queued", "delivered"]
        agent.engine.session.close()


async def test_cancelled_mid_tool_call_leaves_a_log_the_providers_accept(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="Running.", tool_calls=[ToolUse("Bash", {"command": "sleep 30"})]))
    started = asyncio.Event()

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, ToolStarted):
            started.set()

    async with anthropic_provider(wire) as provider:
        store = LocalSessionStore(tmp_path / "store")  # the log is read back from disk
        agent = _agent(tmp_path, workspace, provider, store=store, mode="execute", on_event=on_event)
        task = asyncio.create_task(agent.run_turn("Run the slow job"))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        session_id = agent.engine.session.id
        agent.engine.session.close()

        with LocalSessionStore(tmp_path / "store").open(session_id, writable=False) as reopened:
            assert reopened.report.clean
            result = next(e for e in reopened.entries() if isinstance(e, ToolResult))
            assert result.content == INTERRUPTED_RESULT and result.is_error

        wire.script(Reply(text="The previous job was interrupted; I will check its state."))
        resumed = open_agent(
            store,
            provider,
            workspace=workspace,
            session_id=session_id,
            options=AgentOptions(retry=RetryPolicy(sleep=_no_sleep)),
        )
        outcome = await resumed.run_turn("What happened?")
    assert wire.requests[-1].status == 200  # the provider accepted the repaired history
    assert "interrupted" in str(wire.requests[-1].body["messages"][-1])  # the one-shot reminder
    assert outcome.text.startswith("The previous job was interrupted")
    resumed.engine.session.close()


@pytest.mark.slow
async def test_overflow_compacts_and_the_turn_completes(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    wire.script(
        *[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(4)],
        Fail("overflow"),
        Reply(text="## Goal\nKeep total() correct.\n## Next steps\n- continue"),  # the summariser's answer
        Reply(text="Done after compaction."),
        Reply(text="And the next turn is accepted."),
    )
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider, keep_tokens=400)
        for n in range(4):
            await agent.run_turn(f"Question {n}: never use eval. " + "context " * 300)
        outcome = await agent.run_turn("One more question")
        assert outcome.text == "Done after compaction."
        assert (await agent.run_turn("And another")).text == "And the next turn is accepted."
    boundary = agent.engine.boundary
    assert boundary is not None and boundary.trigger == "overflow"
    assert boundary.summary.startswith("## Goal")  # written by the model through the provider
    assert any(w.text.startswith("Question 3: never use eval.") for w in boundary.lane.messages)
    statuses = [r.status for r in wire.requests]
    assert statuses[4] == 400 and statuses[-3:] == [200, 200, 200]
    retried = json.dumps(wire.requests[-2].body)
    assert "compaction_summary" in retried and "Answer 0:" not in retried  # summarised away
    agent.engine.session.close()


@pytest.mark.slow
async def test_a_second_overflow_is_a_clear_error(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    wire.script(
        *[Reply(text="ok " * 300) for _ in range(3)], Fail("overflow"), Reply(text="## Goal\nx"), Fail("overflow")
    )
    async with anthropic_provider(wire) as provider:
        agent = _agent(tmp_path, workspace, provider, keep_tokens=300)
        for n in range(3):
            await agent.run_turn(f"Question {n} " + "context " * 300)
        with pytest.raises(ContextOverflowError, match="still too long after compaction"):
            await agent.run_turn("Overflowing question")
    agent.engine.session.close()


async def test_the_estimate_is_calibrated_from_reported_usage(tmp_path: Path, workspace: Path) -> None:
    from lamina.cachesim import AnthropicCacheSimulator
    from lamina.providers import ScriptedProvider, ScriptedResponse
    from lamina.session import Usage

    # the simulator counts blocks as sent (JSON), more than the text estimate: the ratio is learnt
    provider = ScriptedProvider([ScriptedResponse(text="ok")] * 4, simulator=AnthropicCacheSimulator())
    agent = _agent(tmp_path, workspace, provider)
    for n in range(4):
        await agent.run_turn(f"turn {n}")
    learnt = agent.engine.compactor.calibration
    assert learnt > 1.0  # moved from its start, towards what the provider counted
    assert agent.engine.compactor.calibrated_context_tokens() == round(agent.engine.compactor.context_tokens() * learnt)
    for _ in range(20):  # a provider that counts exactly twice the estimate pulls the factor to 2
        agent.engine.compactor.observe_usage(1_000, Usage(input=2_000))
    assert abs(agent.engine.compactor.calibration - 2.0) < 0.01
    agent.engine.session.close()
