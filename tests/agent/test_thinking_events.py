"""The loop reports the model's reasoning: `ReasoningDelta`s as it streams, then one `Thinking` per model call."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lamina.agent import AgentEvent, AgentOptions, ModelCallFinished, Thinking, ToolStarted, open_agent
from lamina.providers import ReasoningDelta, ScriptedProvider, ScriptedResponse, ScriptedToolCall, TextDelta
from lamina.session import AssistantMessage, Reasoning, Usage
from tests.support.engine import memory_store

REDACTED = Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque")


async def test_each_calls_reasoning_streams_before_its_text_then_comes_whole(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    glob = ScriptedToolCall(name="Glob", input={"pattern": "*.py"})
    provider = ScriptedProvider(
        [
            ScriptedResponse(reasoning="List the Python files first.", text="Looking.", tool_calls=(glob,)),
            ScriptedResponse(text="None here.", usage=Usage(input=5, output=3)),
            ScriptedResponse(reasoning=(REDACTED,), text="Still none."),
        ]
    )
    events: list[AgentEvent] = []
    async with open_agent(
        memory_store(tmp_path, time.time),
        provider,
        workspace=workspace,
        options=AgentOptions(mode="execute", on_event=events.append),
    ) as agent:
        outcome = await agent.run_turn("which files?")
        second = await agent.run_turn("sure?")
        logged = [e for e in agent.engine.session.entries() if isinstance(e, AssistantMessage)]
        request = agent.engine.request(agent.engine.preview_turn("again"), provider.target)
    first_turn = events[: events.index(next(e for e in events if isinstance(e, ToolStarted)))]
    kinds = [type(e) for e in first_turn if not isinstance(e, ModelCallFinished)]
    assert kinds.index(TextDelta) > kinds.index(ReasoningDelta) and kinds.count(Thinking) == 1
    assert "".join(e.text for e in first_turn if isinstance(e, ReasoningDelta)) == "List the Python files first."
    thinking = [e for e in events if isinstance(e, Thinking)]
    assert [t.index for t in thinking] == [0, 0]  # the second call (no reasoning) has none
    assert thinking[0].text == "List the Python files first." and thinking[0].hidden == 0
    assert thinking[0].tokens == outcome.usages[0].reasoning > 0
    assert thinking[0].blocks == logged[0].reasoning  # what the log keeps, block for block
    assert thinking[1].text == "" and thinking[1].hidden == 1 and thinking[1].blocks == (REDACTED,)
    assert outcome.usage.reasoning == sum(u.reasoning for u in outcome.usages) > 0
    assert second.usage.reasoning == thinking[1].tokens > 0  # nothing to read, but the tokens were spent
    body: Any = request
    history = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
    signed = [b for b in history if b.get("type") == "thinking"]
    assert signed == [
        {"type": "thinking", "thinking": "List the Python files first.", "signature": logged[0].reasoning[0].signature}
    ]
