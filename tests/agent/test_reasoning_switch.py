"""A session that moves from Anthropic to OpenAI Responses inside a tool loop: the thinking stays home.

The first call of the turn answers with signed thinking and a tool call (a provider of this test:
the wire server does not sign thinking yet); the provider is switched while the tool runs, and the
loop's next call goes to OpenAI Responses on the wire server, which never sees Anthropic's blocks.
The log keeps them, and a request rendered for Anthropic again carries them unchanged.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lamina.agent import AgentEvent, AgentOptions, ToolFinished, open_agent
from lamina.placement import AnthropicTarget, OpenAIResponsesTarget, RenderedRequest, RenderTarget, render
from lamina.providers import Capabilities, Completed, ProviderEvent, ToolCallRequest
from lamina.session import AssistantMessage, Reasoning, Usage
from tests.support.engine import memory_store
from tests.wire.fixtures import openai_responses_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

THINKING = (
    Reasoning(provider="anthropic", kind="thinking", text="The README first.", signature="sig-anthropic-1"),
    Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque-anthropic-data"),
)


class _ThinkingClaude:
    """An Anthropic-format provider whose one answer thinks, then calls Glob."""

    name = "anthropic"
    target: RenderTarget = AnthropicTarget(model="claude-sonnet-5")
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.requests: list[RenderedRequest] = []

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        call = ToolCallRequest("toolu_1", "Glob", {"pattern": "*.md"})
        yield call
        yield Completed(
            text="Looking.",
            tool_calls=(call,),
            stop_reason="tool_use",
            usage=Usage(input=100, output=20),
            model="claude-sonnet-5",
            reasoning=THINKING,
        )


def _blocks(body: Any, kind: str) -> list[Any]:
    """The items (Responses input) or content blocks (Anthropic messages) of type `kind` in `body`."""
    items = list(body.get("input") or [])
    for message in body.get("messages") or []:
        content = message.get("content")
        items += content if isinstance(content, list) else []
    return [item for item in items if isinstance(item, dict) and item.get("type") == kind]


async def test_a_switch_to_responses_mid_tool_loop_sends_no_anthropic_reasoning(
    tmp_path: Path, wire: WireServer
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    wire.script(Reply(text="One file: README.md."))
    responses = openai_responses_provider(wire)
    claude = _ThinkingClaude()

    def switch(event: AgentEvent) -> None:
        if isinstance(event, ToolFinished):  # between the loop's two calls
            agent.provider = responses

    agent = open_agent(
        memory_store(tmp_path, time.time), claude, workspace=workspace, options=AgentOptions(on_event=switch)
    )
    try:
        outcome = await agent.run_turn("What is here?")
        assert outcome.text == "One file: README.md." and outcome.tools_run == ("Glob",)
        (sent,) = wire.bodies()
        assert _blocks(sent, "reasoning") == [] and "sig-anthropic-1" not in repr(sent)
        assert [item["call_id"] for item in _blocks(sent, "function_call")] == ["toolu_1"]  # the loop goes on
        logged = [e for e in agent.engine.view if isinstance(e, AssistantMessage) and e.reasoning]
        assert [e.reasoning for e in logged] == [THINKING]  # the log keeps them, unchanged

        turn = agent.engine.prepare_turn("And now?")
        back = render(turn, AnthropicTarget(model="claude-sonnet-5"))
        assert [b.get("signature") for b in _blocks(back, "thinking")] == ["sig-anthropic-1"]
        assert [b.get("data") for b in _blocks(back, "redacted_thinking")] == ["opaque-anthropic-data"]
        onward = render(turn, OpenAIResponsesTarget(model="gpt-5"))
        assert _blocks(onward, "reasoning") == [] and "opaque-anthropic-data" not in repr(onward)
    finally:
        await agent.aclose()
        await responses.aclose()
