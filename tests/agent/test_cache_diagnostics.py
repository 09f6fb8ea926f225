"""Cache diagnostics in the agent loop: asked for where the model has them, recorded beside the simulator's prediction.

The official SDKs against the wire server, which answers the diagnostics by the documented rules.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.providers import Capabilities, Provider, RetryPolicy
from lamina.session import AssistantMessage, CacheCheck, CacheMiss
from tests.support.engine import memory_store
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

DIAGNOSED = Capabilities(cache_diagnostics=True, cache_regime="anthropic")


async def _no_sleep(_: float) -> None:
    return None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    rules = "\n".join(f"- Rule {i}: keep functions small and name them after what they do." for i in range(120))
    (root / "AGENTS.md").write_text(f"# Project rules\n{rules}\n")
    return root


def _agent(tmp_path: Path, workspace: Path, provider: Provider, **options: Any) -> Agent:
    store = memory_store(tmp_path, time.time)
    return open_agent(
        store, provider, workspace=workspace, options=AgentOptions(retry=RetryPolicy(sleep=_no_sleep), **options)
    )


def _checks(agent: Agent) -> list[CacheCheck | None]:
    return [e.cache_check for e in agent.engine.session.entries() if isinstance(e, AssistantMessage)]


async def test_each_call_records_the_providers_reason_beside_the_prediction(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    async with (
        anthropic_provider(wire, capabilities=DIAGNOSED) as provider,
        anthropic_provider(wire, "claude-opus-5", capabilities=DIAGNOSED) as other,
    ):
        agent = _agent(tmp_path, workspace, provider)
        await agent.run_turn("First question")
        await agent.run_turn("Second question")
        agent.provider = other
        await agent.run_turn("Third question, on another model")
    bodies = wire.bodies("anthropic")
    assert [b["diagnostics"] for b in bodies] == [
        {"previous_message_id": None},  # opting in on the first request
        {"previous_message_id": "msg_wire_0001"},
        {"previous_message_id": "msg_wire_0002"},
    ]
    first, second, third = _checks(agent)
    assert first == CacheCheck(provider=CacheMiss(reason="none"), predicted=None)
    assert second is not None and second.provider == CacheMiss(reason="none")
    assert second.predicted == CacheMiss(reason="none")
    assert third is not None and third.provider is not None and third.predicted is not None
    assert third.provider.reason == third.predicted.reason == "model_changed"
    assert third.provider.missed_tokens > 0 and third.predicted.missed_tokens > 0


async def test_the_opt_out_sends_nothing_and_records_nothing(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    wire.script(Reply(text="one"), Reply(text="two"))
    async with anthropic_provider(wire, capabilities=DIAGNOSED) as provider:
        agent = _agent(tmp_path, workspace, provider, cache_diagnostics=False)
        await agent.run_turn("First question")
        await agent.run_turn("Second question")
    assert all("diagnostics" not in b for b in wire.bodies("anthropic"))
    assert _checks(agent) == [None, None]


async def test_a_model_without_diagnostics_gets_only_the_prediction(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="one"), Reply(text="two"))
    async with anthropic_provider(wire, capabilities=Capabilities()) as provider:  # no diagnostics
        agent = _agent(tmp_path, workspace, provider)
        await agent.run_turn("First question")
        await agent.run_turn("Second question")
    assert all("diagnostics" not in b for b in wire.bodies("anthropic"))
    assert _checks(agent) == [None, CacheCheck(provider=None, predicted=CacheMiss(reason="none"))]


async def test_openai_responses_compares_with_the_previous_response(
    tmp_path: Path, workspace: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="one"), Reply(text="two"))
    capabilities = Capabilities(cache_diagnostics=True, cache_regime="openai-breakpoints")
    async with openai_responses_provider(wire, "gpt-5.6", capabilities=capabilities) as provider:
        agent = _agent(tmp_path, workspace, provider)
        await agent.run_turn("First question")
        await agent.run_turn("Second question")
    first, second = wire.bodies("responses")
    assert "comparison_response_id" not in (first.get("prompt_cache_options") or {})  # nothing to compare with
    assert second["prompt_cache_options"]["comparison_response_id"] == "resp_wire0001"
    checks = _checks(agent)
    assert checks[1] == CacheCheck(provider=CacheMiss(reason="none"), predicted=CacheMiss(reason="none"))


async def test_chat_completions_has_no_diagnostics_field(tmp_path: Path, workspace: Path, wire: WireServer) -> None:
    wire.script(Reply(text="one"), Reply(text="two"))
    async with openai_chat_provider(wire, capabilities=Capabilities(cache_diagnostics=True)) as provider:
        agent = _agent(tmp_path, workspace, provider)
        await agent.run_turn("First question")
        await agent.run_turn("Second question")
    assert all("prompt_cache_options" not in b and "diagnostics" not in b for b in wire.bodies("chat"))
    assert _checks(agent)[1] == CacheCheck(provider=None, predicted=CacheMiss(reason="none"))
