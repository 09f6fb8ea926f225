"""The pre-warm against the wire server: sent between turns as the setting says, billed, read by the next turn."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from lamina.agent import AgentOptions, PrewarmSetting, open_agent
from lamina.placement import ReasoningConfig
from lamina.providers import Capabilities
from tests.support.engine import memory_store
from tests.wire.fixtures import API_KEY, anthropic_provider, openai_responses_provider
from tests.wire.script import Reply
from tests.wire.server import Received, WireServer

SUMMARY = "## Goal\nAnswer the questions.\n## Next steps\n- the next question"
BREAKPOINTS = Capabilities(cache_regime="openai-breakpoints")


def _prewarms(wire: WireServer) -> list[Received]:
    return [r for r in wire.requests if r.body.get("max_tokens") == 0 or _openai_prewarm(r.body)]


def _openai_prewarm(body: Any) -> bool:
    options = body.get("prompt_cache_options")
    return isinstance(options, dict) and options.get("prewarm") is True


async def _compacted(
    tmp_path: Path, provider: Any, prewarm: PrewarmSetting, wire: WireServer, *, then: tuple[Reply, ...] = ()
) -> Any:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(4)], Reply(text=SUMMARY), *then)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    options = AgentOptions(keep_tokens=400, prewarm=prewarm)
    agent = open_agent(memory_store(tmp_path, time.time), provider, workspace=workspace, options=options)
    for n in range(4):
        await agent.run_turn(f"Question {n}: " + "context " * 300)
    assert (await agent.compact()).status == "compacted"
    return agent


async def test_always_pre_warms_the_compacted_prefix_and_the_next_turn_reads_it(
    tmp_path: Path, wire: WireServer
) -> None:
    async with anthropic_provider(wire) as provider:
        with await _compacted(tmp_path, provider, "always", wire) as agent:
            (warm,) = _prewarms(wire)
            wire.script(Reply(text="Answer 4."))
            await agent.run_turn("Question 4?")
    assert warm.status == 200 and warm.step is None and "stream" not in warm.body  # no script step, not streamed
    assert warm.usage is not None and warm.usage.write > 0
    sent = wire.requests[-1].body["messages"]
    assert warm.body["messages"][:-1] == sent[: len(warm.body["messages"]) - 1]  # the same prefix
    after = wire.requests[-1].usage
    assert after is not None and after.read >= warm.usage.total  # the next turn reads what the pre-warm wrote


async def test_priced_does_not_pre_warm_right_after_a_compaction_when_it_would_only_move_the_write(
    tmp_path: Path, wire: WireServer
) -> None:
    async with anthropic_provider(wire) as provider:
        with await _compacted(tmp_path, provider, "priced", wire) as agent:
            warmed = await agent._calls.warming.prewarm()
    assert _prewarms(wire) == []
    assert not warmed.sent and warmed.decision is not None and warmed.decision.action == "no_prewarm"


async def test_off_never_pre_warms(tmp_path: Path, wire: WireServer) -> None:
    async with anthropic_provider(wire) as provider:
        with await _compacted(tmp_path, provider, "off", wire):
            pass
    assert _prewarms(wire) == []


async def test_thinking_on_anthropic_is_never_pre_warmed(tmp_path: Path, wire: WireServer) -> None:
    async with anthropic_provider(wire, reasoning=ReasoningConfig(thinking="adaptive")) as provider:
        with await _compacted(tmp_path, provider, "always", wire):
            pass
    assert _prewarms(wire) == []


async def test_on_openai_responses_of_the_breakpoint_regime_prewarm_is_asked(tmp_path: Path, wire: WireServer) -> None:
    async with openai_responses_provider(wire, "gpt-5.6", capabilities=BREAKPOINTS) as provider:
        # this server's OpenAI pre-warm answers from a scripted step (its text is never sent)
        with await _compacted(tmp_path, provider, "always", wire, then=(Reply(text="unused"),)):
            pass
    (warm,) = _prewarms(wire)
    assert warm.status == 200 and warm.usage is not None and warm.usage.write > 0
    assert warm.body["input"][-1]["role"] == "assistant"  # the history's end: the next turn's message follows it


async def test_openai_automatic_caching_has_no_pre_warm(tmp_path: Path, wire: WireServer) -> None:
    async with openai_responses_provider(wire) as provider:
        with await _compacted(tmp_path, provider, "always", wire):
            pass
    assert _prewarms(wire) == []


@pytest.mark.parametrize(
    ("extra", "refusal"),
    [
        ({"stream": True}, "streaming"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "extended thinking"),
        ({"tool_choice": {"type": "any"}}, "forced tool_choice"),
    ],
)
async def test_the_wire_server_refuses_a_pre_warm_as_the_api_does(
    wire: WireServer, extra: dict[str, Any], refusal: str
) -> None:
    body: Any = {"model": "claude-sonnet-5", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}
    tools: Any = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError, match=refusal):
            await client.messages.create(**body, **extra, **({"tools": tools} if "tool_choice" in extra else {}))


async def test_a_pre_warm_writes_the_cache_and_returns_nothing(wire: WireServer) -> None:
    text: Any = [{"type": "text", "text": "stable " * 1500, "cache_control": {"type": "ephemeral"}}]
    body: Any = {"model": "claude-sonnet-5", "messages": [{"role": "user", "content": text}]}
    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0) as client:
        warm = await client.messages.create(max_tokens=0, **body)
        wire.script(Reply(text="said"))
        said = await client.messages.create(max_tokens=100, **body)
    assert warm.content == [] and warm.stop_reason == "max_tokens" and warm.usage.output_tokens == 0
    assert warm.usage.cache_creation_input_tokens and warm.usage.cache_creation_input_tokens > 0
    assert said.usage.cache_read_input_tokens == warm.usage.cache_creation_input_tokens
