"""Deferred tools on the wire: `defer_loading` and the provider's tool search, through the official SDKs.

The engine sends source tools deferred; the wire server's search returns references, the provider
keeps the search blocks, and the next request sends them back so the deferred call it answers is
accepted (a deferred tool loads only through a reference).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import anthropic
import pytest

from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.engine import ContextEngine
from lamina.placement import RenderTarget
from lamina.providers import Capabilities, Completed, Provider
from lamina.session import AssistantMessage, ToolCall, ToolResult
from tests.support.engine import Clock, make_engine
from tests.wire.fixtures import API_KEY, anthropic_provider, openai_responses_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer
from tests.wire.tool_search import with_call


def _source_tools() -> tuple[ToolSpec, ...]:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    return tuple(
        dataclasses.replace(ToolSpec(name, trusted(text), schema), deferred=True)
        for name, text in (
            ("github__create_issue", "Create an issue in a repository."),
            ("github__list_pulls", "List the pull requests of a repository."),
            ("jira__create_ticket", "Create a ticket in a project."),
        )
    )


def _engine(tmp_path: Path) -> ContextEngine:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    engine = make_engine(tmp_path, workspace, Clock())
    engine.tools = (*engine.tools, *_source_tools())
    return engine


async def _send(provider: Provider, engine: ContextEngine, turn: Any, target: RenderTarget | None = None) -> Completed:
    completed = None
    async for event in provider.stream(engine.request(turn, target or provider.target)):
        if isinstance(event, Completed):
            completed = event
    assert completed is not None
    return completed


async def _deferred_call_round(
    provider: Provider, engine: ContextEngine, target: RenderTarget | None = None
) -> Completed:
    """One turn: a search that loads `github__create_issue`, its call, the result, and the answer."""
    turn = engine.prepare_turn("open an issue about the crash")
    completed = await _send(provider, engine, turn, target)
    engine.record(AssistantMessage(text=completed.text, reasoning=completed.reasoning, turn_id=turn.id))
    (call,) = completed.tool_calls
    engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
    engine.record(ToolResult(call_id=call.call_id, name=call.name, content="issue #7 opened"))
    return await _send(provider, engine, turn, target)


@pytest.mark.parametrize("search", ["bm25", "regex"])
async def test_anthropic_sends_deferred_tools_with_a_search_tool_and_sends_its_blocks_back(
    tmp_path: Path, wire: WireServer, search: Literal["bm25", "regex"]
) -> None:
    query = "issue" if search == "bm25" else "create_issue"
    wire.script(
        Reply(tool_search=query, tool_calls=[ToolUse("github__create_issue", {"title": "crash"})]),
        Reply(text="Opened issue #7."),
    )
    engine = _engine(tmp_path)
    async with anthropic_provider(wire) as provider:
        target = dataclasses.replace(provider.target, anthropic_tool_search=search)
        completed = await _deferred_call_round(provider, engine, target)
    assert completed.text == "Opened issue #7."
    assert [r.status for r in wire.requests] == [200, 200]
    tools = wire.requests[0].body["tools"]
    assert [t.get("defer_loading") for t in tools[:4]] == [None, True, True, True]  # the built-in stays loaded
    assert tools[-1] == {"type": f"tool_search_tool_{search}_20251119", "name": f"tool_search_tool_{search}"}
    assistant = wire.requests[1].body["messages"][-2]["content"]
    assert [b["type"] for b in assistant] == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    refs = assistant[1]["content"]["tool_references"]
    assert {"type": "tool_reference", "tool_name": "github__create_issue"} in refs
    assert wire.requests[1].body["tools"] == tools  # the cached tools prefix is not rewritten


async def test_a_deferred_call_without_its_search_blocks_is_refused(tmp_path: Path, wire: WireServer) -> None:
    wire.script(Reply(tool_search="issue", tool_calls=[ToolUse("github__create_issue", {"title": "crash"})]))
    engine = _engine(tmp_path)
    async with anthropic_provider(wire) as provider:
        turn = engine.prepare_turn("open an issue")
        completed = await _send(provider, engine, turn)
    body = with_call(wire.requests[0].body, "github__create_issue")
    client = anthropic.Anthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="deferred and was not loaded"):
        client.messages.create(**body)
    assert [r.kind for r in completed.reasoning] == ["server_tool", "server_tool"]


async def test_a_tool_change_naming_an_unknown_tool_is_tool_reference_unresolved(wire: WireServer) -> None:
    client = anthropic.Anthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    removal = {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "nowhere__tool"}}
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "hi"}, removal]}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="claude-sonnet-5", max_tokens=100, messages=messages)
    assert caught.value.error_code == "tool_reference_unresolved"


async def test_a_tool_change_takes_effect_from_its_position_and_keeps_the_tools_prefix(wire: WireServer) -> None:
    wire.script(Reply(text="ok"))
    client = anthropic.Anthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    tool = {"name": "deploy", "description": "Deploy.", "input_schema": {"type": "object"}, "defer_loading": True}
    addition = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "deploy"}}
    use = {"type": "tool_use", "id": "toolu_1", "name": "deploy", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "deploy it"}, addition]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    betas = {"anthropic-beta": "mid-conversation-tool-changes-2026-07-01"}
    sdk: Any = client.messages  # the tool dict is not typed as a ToolParam
    sdk.create(model="claude-sonnet-5", max_tokens=100, tools=[tool], messages=messages, extra_headers=betas)
    messages[0] = {"role": "user", "content": [{"type": "text", "text": "deploy it"}]}
    with pytest.raises(anthropic.BadRequestError, match="deferred and was not loaded"):
        client.messages.create(model="claude-sonnet-5", max_tokens=100, tools=[tool], messages=messages)  # type: ignore[list-item]


async def test_responses_sends_the_hosted_tool_search_and_sends_its_items_back(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(
        Reply(tool_search="issue", tool_calls=[ToolUse("github__create_issue", {"title": "crash"})]),
        Reply(text="Opened."),
    )
    engine = _engine(tmp_path)
    async with openai_responses_provider(wire) as provider:
        completed = await _deferred_call_round(provider, engine)
    assert completed.text == "Opened."
    assert [r.status for r in wire.requests] == [200, 200]
    tools = wire.requests[0].body["tools"]
    assert tools[-1] == {"type": "tool_search", "execution": "server"}
    assert all(t["defer_loading"] for t in tools[1:-1])
    kinds = [i.get("type") for i in wire.requests[1].body["input"]]
    assert kinds[-4:] == ["tool_search_call", "tool_search_output", "function_call", "function_call_output"]


@pytest.mark.parametrize("deferred_before", [True, False])
async def test_a_source_added_mid_session_inline_with_defer_loading_is_found_by_the_search(
    tmp_path: Path, wire: WireServer, deferred_before: bool
) -> None:
    github, jira = _source_tools()[:2], _source_tools()[2:]
    engine = _engine(tmp_path)
    builtin = engine.tools[:1]
    engine.tools = (
        *builtin,
        *(github if deferred_before else (dataclasses.replace(t, deferred=False) for t in github)),
    )
    wire.script(
        Reply(text="Hello."),
        Reply(tool_search="ticket", tool_calls=[ToolUse("jira__create_ticket", {"title": "crash"})]),
        Reply(text="Ticket filed."),
    )
    capabilities = Capabilities(tool_search=True, tool_changes=True, cache_regime="anthropic")
    async with anthropic_provider(wire, capabilities=capabilities) as provider:
        turn = engine.prepare_turn("hello, here is the log:\n" + "a line of the log\n" * 1500)  # worth keeping cached
        completed = await _send(provider, engine, turn)
        engine.record(AssistantMessage(text=completed.text, turn_id=turn.id))
        engine.tools = (*builtin, *github, *jira)  # a source added: its tool deferred too
        turn = engine.prepare_turn("file a ticket about the crash")
        completed = await _send(provider, engine, turn)
        engine.record(AssistantMessage(text=completed.text, reasoning=completed.reasoning, turn_id=turn.id))
        (call,) = completed.tool_calls
        engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
        engine.record(ToolResult(call_id=call.call_id, name=call.name, content="JIRA-7 filed"))
        completed = await _send(provider, engine, turn)
    assert completed.text == "Ticket filed."
    assert [r.status for r in wire.requests] == [200, 200, 200]
    first, second, third = (r.body for r in wire.requests)
    if deferred_before:  # the array has the search tool: the new tool goes inline, deferred, the array kept
        added = second["messages"][-1]["content"][-1]
        assert added["type"] == "tool_addition" and added["tool"]["definition"]["defer_loading"] is True
        assert second["tools"] == first["tools"]
    else:  # the first deferred tool needs the search tool in the array: rewritten once
        assert second["tools"][-1]["type"] == "tool_search_tool_bm25_20251119"
        assert "tool_search_tool_bm25_20251119" not in [t.get("type") for t in first["tools"]]
    assert third["tools"] == second["tools"]
    refs = third["messages"][-2]["content"][1]["content"]["tool_references"]
    assert refs == [{"type": "tool_reference", "tool_name": "jira__create_ticket"}]  # found by the search
