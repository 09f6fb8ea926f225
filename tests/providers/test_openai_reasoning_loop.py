"""Tool loops with reasoning through `lamina.agent` on the wire server: Responses with `store: false`, DeepSeek mode."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import AgentOptions, open_agent
from lamina.placement import ReasoningConfig
from lamina.providers import RetryPolicy
from lamina.session import AssistantMessage, Reasoning
from tests.support.engine import memory_store
from tests.wire.fixtures import openai_chat_provider, openai_responses_provider
from tests.wire.openai_api import seal
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer


async def _no_sleep(_: float) -> None:
    return None


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "setup.cfg").write_text("[metadata]\nname = demo\n")
    (workspace / "app.py").write_text("print('demo')\n")
    return workspace


LOOP = (
    Reply(reasoning="Start from the config.", tool_calls=[ToolUse("Read", {"path": "setup.cfg"})]),
    Reply(
        text="Now the code.",
        reasoning="The name is demo; look for code.",
        tool_calls=[ToolUse("Glob", {"pattern": "*.py"})],
    ),
    Reply(text="It is a demo app.", reasoning="Enough to answer."),
    Reply(reasoning="Read the app itself.", tool_calls=[ToolUse("Read", {"path": "app.py"})]),
    Reply(text="It prints demo.", reasoning="Answer now."),
)


def _logged(agent_entries: list[Any]) -> list[Reasoning]:
    return [r for e in agent_entries if isinstance(e, AssistantMessage) for r in e.reasoning]


@pytest.mark.slow
async def test_a_responses_tool_loop_sends_every_encrypted_item_back_before_its_call(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*LOOP)
    reasoning = ReasoningConfig(effort="low", summary="auto", history="keep")  # completed turns send theirs back
    async with (
        openai_responses_provider(wire, reasoning=reasoning) as provider,
        open_agent(
            memory_store(tmp_path, time.time),
            provider,
            workspace=_workspace(tmp_path),
            options=AgentOptions(mode="execute", retry=RetryPolicy(sleep=_no_sleep)),
        ) as agent,
    ):
        first = await agent.run_turn("What is this project?")
        second = await agent.run_turn("And what does the app do?")
        entries = agent.engine.session.entries()
    assert (first.text, second.text) == ("It is a demo app.", "It prints demo.")
    assert wire.pending == 0 and [r.status for r in wire.requests] == [200] * len(LOOP)
    logged = _logged(entries)
    assert [r.summary for r in logged] == [(step.reasoning,) for step in LOOP]
    assert [r.data for r in logged] == [seal(wire.secret, step.reasoning) for step in LOOP]  # byte for byte
    for n, body in enumerate(wire.bodies("responses")):
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "low", "summary": "auto"}
        items = body["input"]
        sent = [i for i in items if i.get("type") == "reasoning"]
        assert [i["encrypted_content"] for i in sent] == [r.data for r in logged[:n]]  # every earlier one, in order
        assert [i["id"] for i in sent] == [r.item_id for r in logged[:n]]
        for item in sent:  # each before the call it preceded (its response's text between), none other between
            step = LOOP[[r.item_id for r in logged].index(item["id"])]
            rest = items[items.index(item) + 1 :]
            following = next((i for i in rest if i.get("type") != "message" and "role" not in i), None)
            if step.tool_calls:
                assert following is not None and following["type"] == "function_call"
                assert following["name"] == step.tool_calls[0].name


@pytest.mark.slow
async def test_a_deepseek_tool_loop_keeps_the_reasoning_of_tool_call_turns_when_history_drops(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.deepseek = True
    wire.script(*LOOP)
    async with (
        openai_chat_provider(
            wire, "deepseek-reasoner", name="openai-compat", reasoning=ReasoningConfig(history="drop")
        ) as provider,
        open_agent(
            memory_store(tmp_path, time.time),
            provider,
            workspace=_workspace(tmp_path),
            options=AgentOptions(mode="execute", retry=RetryPolicy(sleep=_no_sleep)),
        ) as agent,
    ):
        await agent.run_turn("What is this project?")
        outcome = await agent.run_turn("And what does the app do?")
        logged = _logged(agent.engine.session.entries())
    assert outcome.text == "It prints demo." and [r.status for r in wire.requests] == [200] * len(LOOP)
    assert [(r.provider, r.field, r.text) for r in logged] == [
        ("openai-compat", "reasoning_content", step.reasoning) for step in LOOP
    ]
    last = wire.bodies("chat")[-1]["messages"]
    kept = [m.get("reasoning_content") for m in last if m["role"] == "assistant"]
    # the first turn's tool-call turns keep theirs (DeepSeek needs them), its answer's is dropped; the turn
    # in progress keeps all of its own
    assert kept == [LOOP[0].reasoning, LOOP[1].reasoning, None, LOOP[3].reasoning]
