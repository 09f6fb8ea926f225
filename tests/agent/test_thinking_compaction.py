"""A compaction inside a tool loop with thinking on: the loop's signed blocks go back whole, and the API accepts it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.placement import ReasoningConfig
from lamina.providers import RetryPolicy
from lamina.session import AssistantMessage
from tests.support.engine import memory_store
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Fail, Reply, ToolUse
from tests.wire.server import WireServer


async def _no_sleep(_: float) -> None:
    return None


@pytest.mark.slow
async def test_an_overflow_inside_a_thinking_tool_loop_compacts_and_the_loop_goes_on_accepted(
    tmp_path: Path, wire: WireServer
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("print('hi')\n")
    wire.script(
        *[Reply(reasoning=f"earlier thought {n}", text=f"Answer {n}: " + "detail " * 300) for n in range(4)],
        Reply(reasoning="Read app.py before answering.", tool_calls=[ToolUse("Read", {"path": "app.py"})]),
        Fail("overflow"),
        Reply(text="## Goal\nSay what app.py prints.\n## Next steps\n- answer"),  # the summariser's answer
        Reply(reasoning="It prints hi.", text="app.py prints hi."),
    )
    thinking = ReasoningConfig(thinking="adaptive", history="keep")
    async with anthropic_provider(wire, reasoning=thinking) as provider:
        options = AgentOptions(retry=RetryPolicy(sleep=_no_sleep), keep_tokens=400)
        with open_agent(memory_store(tmp_path, time.time), provider, workspace=workspace, options=options) as agent:
            for n in range(4):
                await agent.run_turn(f"Question {n}: " + "context " * 300)
            outcome = await agent.run_turn("What does app.py print?")
            entries = agent.engine.session.view().entries
    assert outcome.text == "app.py prints hi."
    assert agent.engine.boundary is not None and agent.engine.boundary.trigger == "overflow"
    statuses = [r.status for r in wire.requests]
    assert statuses[5] == 400 and statuses[-1] == 200  # the overflow, then the loop's next call accepted
    sent = wire.requests[-1].body
    assert "compaction_summary" in json.dumps(sent) and "earlier thought 0" not in json.dumps(sent)
    loop_step = sent["messages"][-2]  # the assistant step whose tool call the last message answers
    assert [b["type"] for b in loop_step["content"]] == ["thinking", "tool_use"]
    (signed,) = [
        r for e in entries if isinstance(e, AssistantMessage) for r in e.reasoning if r.text.startswith("Read app.py")
    ]
    assert loop_step["content"][0] == {"type": "thinking", "thinking": signed.text, "signature": signed.signature}
