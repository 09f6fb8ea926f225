"""The summarising request on the session's cached prefix, against the wire server: byte for byte, billed as a read."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lamina.agent import AgentOptions, open_agent
from lamina.compaction import ProviderSummariser, ServerSummariser
from lamina.providers import Capabilities
from lamina.session import CompactionBoundary
from tests.support.engine import memory_store
from tests.wire.fixtures import anthropic_provider, openai_responses_provider
from tests.wire.script import Fail, Reply
from tests.wire.server import Received, WireServer

SUMMARY = "## Goal\nAnswer the questions.\n## Next steps\n- the next question"
OPTIONS = AgentOptions(keep_tokens=400, prewarm="off")


def _unmarked(value: Any) -> Any:
    """`value` without its cache breakpoints (where they go moves with each request)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k not in ("cache_control", "prompt_cache_breakpoint")}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _summarising(wire: WireServer) -> tuple[Received, Received]:
    """The last turn's request and the summarising request after it."""
    asked = [i for i, r in enumerate(wire.requests) if "Summarise the conversation" in json.dumps(r.body)]
    assert asked, "no summarising request"
    return wire.requests[asked[0] - 1], wire.requests[asked[0]]


def _boundary(agent: Any) -> CompactionBoundary:
    boundary = agent.engine.boundary
    assert isinstance(boundary, CompactionBoundary)
    return boundary


async def _session(tmp_path: Path, provider: Any, turns: int = 6, options: AgentOptions = OPTIONS) -> Any:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    agent = open_agent(memory_store(tmp_path, time.time), provider, workspace=workspace, options=options)
    for n in range(turns):
        await agent.run_turn(f"Question {n}: " + "context " * 300)
    return agent


async def test_the_summarising_request_is_the_sessions_own_byte_for_byte_read_from_the_cache(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(6)], Reply(text=SUMMARY))
    async with anthropic_provider(wire) as provider:
        with await _session(tmp_path, provider) as agent:
            outcome = await agent.compact()
            boundary = _boundary(agent)
    assert outcome.status == "compacted" and outcome.summary_by == "model"
    last, asked = _summarising(wire)
    for key in ("model", "system", "tools", "thinking", "context_management"):
        assert asked.body.get(key) == last.body.get(key), key
    sent = last.body["messages"]
    assert _unmarked(asked.body["messages"][: len(sent)]) == _unmarked(sent)  # the prefix, byte for byte
    assert asked.body["messages"][-1]["role"] == "user"
    assert "<instructions>" in asked.body["messages"][-1]["content"][0]["text"]
    # everything the last request sent is read from the cache; only its answer and the instruction are new
    assert last.usage is not None and asked.usage is not None
    assert asked.usage.read == last.usage.total
    assert asked.usage.write_1h == 0  # the instruction's breakpoint is written under the short TTL
    assert asked.usage.cost_multiplier < 0.3
    assert boundary.backend and boundary.backend.action == "lamina_cached_compaction"
    reason = boundary.backend.reason
    assert isinstance(reason, str) and reason.startswith("summarising call on the cache")


async def test_on_openai_responses_the_summarising_request_reads_the_sessions_cached_input(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(6)], Reply(text=SUMMARY))
    async with openai_responses_provider(wire) as provider:
        with await _session(tmp_path, provider) as agent:
            await agent.compact()
            boundary = _boundary(agent)
    last, asked = _summarising(wire)
    for key in ("model", "instructions", "tools", "prompt_cache_key"):
        assert asked.body.get(key) == last.body.get(key), key
    assert _unmarked(asked.body["input"][: len(last.body["input"])]) == _unmarked(last.body["input"])
    assert asked.usage is not None and last.usage is not None and asked.usage.read >= last.usage.read
    assert boundary.backend and boundary.backend.action == "lamina_cached_compaction"


async def test_a_failed_request_on_the_cache_falls_back_to_a_fresh_one_and_says_so(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(
        *[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(6)], Fail("overloaded"), Reply(text=SUMMARY)
    )
    async with anthropic_provider(wire) as provider:
        with await _session(tmp_path, provider) as agent:
            outcome = await agent.compact()
            boundary = _boundary(agent)
    assert outcome.summary_by == "model"
    fresh = wire.requests[-1].body
    assert fresh["messages"][0]["content"].startswith("<instructions>")  # the conversation as data, one message
    assert boundary.backend and boundary.backend.action == "lamina_compaction"
    assert "on the cache failed" in str(boundary.backend.reason)


async def test_a_model_that_calls_a_tool_instead_of_summarising_gets_a_fresh_request(
    tmp_path: Path, wire: WireServer
) -> None:
    from tests.wire.script import ToolUse

    wire.script(
        *[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(6)],
        Reply(tool_calls=[ToolUse("Read", {"path": "app.py"})]),
        Reply(text=SUMMARY),
    )
    async with anthropic_provider(wire) as provider:
        with await _session(tmp_path, provider) as agent:
            outcome = await agent.compact()
    assert outcome.summary_by == "model" and "called a tool" in outcome.message


async def test_a_context_with_no_room_for_the_summary_has_no_cached_prefix(tmp_path: Path, wire: WireServer) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(2)])
    small = Capabilities(context_window=12_000)
    async with anthropic_provider(wire, capabilities=small) as provider:
        with await _session(tmp_path, provider, turns=2) as agent:
            summariser = agent._calls.warming.summariser(None, agent.session.id)
            assert isinstance(summariser, ProviderSummariser) and summariser.prefix is not None
            assert summariser.prefix() is None  # the session's request cannot take the instruction and the summary


async def test_a_server_summariser_weighs_the_three_routes_with_its_fallback_on_the_cache(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(6)], Reply(text=SUMMARY))
    server = Capabilities(server_compaction=frozenset({"summarize"}))
    async with anthropic_provider(wire, capabilities=server) as provider:
        fallback = ProviderSummariser(provider)
        options = AgentOptions(keep_tokens=400, prewarm="off", summariser=ServerSummariser(provider, fallback=fallback))
        with await _session(tmp_path, provider, options=options) as agent:
            await agent.compact()
            boundary = _boundary(agent)
    assert fallback.prefix is not None  # the agent gave it the session's
    assert boundary.backend and boundary.backend.action == "lamina_cached_compaction"
    assert "server" in str(boundary.backend.reason) and "fresh" in str(boundary.backend.reason)


async def test_with_the_lamina_backend_setting_the_fallbacks_route_is_what_the_boundary_records(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(6)], Reply(text=SUMMARY))
    async with anthropic_provider(wire) as provider:
        summariser = ServerSummariser(provider, backend="lamina", fallback=ProviderSummariser(provider))
        options = AgentOptions(keep_tokens=400, prewarm="off", summariser=summariser)
        with await _session(tmp_path, provider, options=options) as agent:
            await agent.compact()
            boundary = _boundary(agent)
    assert boundary.backend and boundary.backend.action == "lamina_cached_compaction"
    assert "Summarise the conversation" in json.dumps(wire.requests[-1].body["messages"][-1])


async def test_a_summariser_of_a_provider_the_agent_left_has_no_cached_prefix(tmp_path: Path, wire: WireServer) -> None:
    wire.script(*[Reply(text=f"Answer {n}: " + "detail " * 300) for n in range(2)])
    async with anthropic_provider(wire) as provider, openai_responses_provider(wire) as other:
        with await _session(tmp_path, provider, turns=2) as agent:
            summariser = agent._calls.warming.summariser(None, agent.session.id)
            assert isinstance(summariser, ProviderSummariser) and summariser.prefix is not None
            assert summariser.prefix() is not None
            agent.provider = other  # as /model switches it
            assert summariser.prefix() is None  # the session's request is now another API's
