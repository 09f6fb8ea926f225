"""Mid-session tool changes on the wire: `tool_addition` / `tool_removal` blocks keep the cached `tools` prefix.

A source added or removed between turns changes the engine's tools; for a model that takes tool
changes the request keeps the session's first `tools` array and carries the change as blocks in the
user message where it took effect, rebuilt from the log (a resumed session sends the same blocks).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anthropic
import pytest

from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.engine import ContextEngine
from lamina.placement import INLINE_TOOLS_BETA, TOOL_CHANGES_BETA
from lamina.providers import AnthropicProvider, Capabilities, Completed
from lamina.session import AssistantMessage, ToolCall, ToolResult
from tests.support.engine import Clock, make_engine
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer
from tests.wire.tool_search import with_call

_SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


def _source(slug: str, *names: str) -> tuple[ToolSpec, ...]:
    return tuple(ToolSpec(f"{slug}__{n}", trusted(f"{n.replace('_', ' ').capitalize()}."), _SCHEMA) for n in names)


GITHUB = _source("github", "create_issue", "list_pulls")
JIRA = _source("jira", "create_ticket")


async def _turn(provider: AnthropicProvider, engine: ContextEngine, text: str) -> None:
    """One turn: the model's calls run (each answered "done"), until it answers in words."""
    turn = engine.prepare_turn(text)
    while True:
        completed = None
        async for event in provider.stream(engine.request(turn, provider.target)):
            completed = event if isinstance(event, Completed) else completed
        assert completed is not None
        engine.record(AssistantMessage(text=completed.text, reasoning=completed.reasoning, turn_id=turn.id))
        if not completed.tool_calls:
            engine.end_turn()
            return
        for call in completed.tool_calls:
            engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
            engine.record(ToolResult(call_id=call.call_id, name=call.name, content="done"))


def _changes(body: Any) -> list[tuple[int, str, str]]:
    """Each tool change block of a body: its message, its kind and the tool it names."""
    found = []
    for i, message in enumerate(body["messages"]):
        for block in message["content"]:
            if block.get("type") in ("tool_addition", "tool_removal"):
                tool = block["tool"]
                name = tool["definition"]["name"] if tool["type"] == "tool_definition" else tool["name"]
                found.append((i, block["type"], name))
    return found


async def _session(tmp_path: Path, wire: WireServer, *, tool_changes: bool) -> ContextEngine:
    """Three turns: with GitHub's tools, after Jira is added (its tool called), after GitHub is removed.

    The history is long enough for the cost model to keep the cache (a short one is cheaper rewritten).
    """
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    engine = make_engine(tmp_path, workspace, Clock(), on_disk=True)
    builtin = engine.tools
    engine.tools = (*builtin, *GITHUB)
    wire.script(
        Reply(text="Hello."),
        Reply(tool_calls=[ToolUse("jira__create_ticket", {"title": "crash"})]),
        Reply(text="Ticket filed."),
        Reply(text="GitHub is gone."),
    )
    capabilities = Capabilities(tool_changes=tool_changes, cache_regime="anthropic")
    async with anthropic_provider(wire, capabilities=capabilities) as provider:
        await _turn(provider, engine, "hello, here is the log:\n" + "a line of the log\n" * 1500)
        engine.tools = (*builtin, *GITHUB, *JIRA)  # a source added mid-session
        await _turn(provider, engine, "file a ticket about the crash")
        engine.tools = (*builtin, *JIRA)  # a source removed
        await _turn(provider, engine, "we are done with GitHub")
    assert [r.status for r in wire.requests] == [200, 200, 200, 200]
    return engine


async def test_an_added_and_a_removed_source_go_as_blocks_and_keep_the_cache(tmp_path: Path, wire: WireServer) -> None:
    engine = await _session(tmp_path, wire, tool_changes=True)
    first, *later = [r.body for r in wire.requests]
    assert all(body["tools"] == first["tools"] for body in later)  # the cached tools prefix is never rewritten
    assert _changes(later[0]) == [(3, "tool_addition", "jira__create_ticket")]
    assert _changes(later[2]) == [
        (3, "tool_addition", "jira__create_ticket"),
        (7, "tool_removal", "github__create_issue"),
        (7, "tool_removal", "github__list_pulls"),
    ]
    assert {b.strip() for b in wire.requests[1].headers["anthropic-beta"].split(",")} >= {
        TOOL_CHANGES_BETA,
        INLINE_TOOLS_BETA,
    }
    usages = [r.usage for r in wire.requests]
    assert all(u is not None for u in usages)
    # each turn's first request reads everything the request before it wrote: the change cost no rewrite
    assert usages[1].read == usages[0].total  # type: ignore[union-attr]
    assert usages[3].read == usages[2].total  # type: ignore[union-attr]
    engine.session.close()


async def test_without_tool_changes_the_tools_array_is_rewritten(tmp_path: Path, wire: WireServer) -> None:
    engine = await _session(tmp_path, wire, tool_changes=False)
    bodies = [r.body for r in wire.requests]
    names = [[t["name"] for t in b["tools"]][-3:] for b in bodies]
    assert names[0][-2:] == names[1][-3:-1] == [t.name for t in GITHUB]
    assert names[1][-1] == names[3][-1] == JIRA[0].name and GITHUB[0].name not in names[3]
    assert not any(_changes(b) for b in bodies)
    assert wire.requests[1].usage is not None and wire.requests[1].usage.read == 0  # a new tools array: a miss
    engine.session.close()


async def test_a_removed_tool_is_refused_when_called(tmp_path: Path, wire: WireServer) -> None:
    engine = await _session(tmp_path, wire, tool_changes=True)
    last = wire.requests[-1].body
    body = with_call(last, "github__create_issue", "toolu_9")
    client = anthropic.Anthropic(api_key=API_KEY, base_url=wire.url, max_retries=0)
    betas = {"anthropic-beta": f"{TOOL_CHANGES_BETA},{INLINE_TOOLS_BETA}"}
    with pytest.raises(anthropic.BadRequestError, match="removed by a tool_removal"):
        client.messages.create(**body, extra_headers=betas)
    with pytest.raises(anthropic.BadRequestError, match=f"requires the `anthropic-beta: {TOOL_CHANGES_BETA}`"):
        client.messages.create(**last)
    engine.session.close()


async def test_a_resumed_session_sends_the_same_blocks(tmp_path: Path, wire: WireServer) -> None:
    engine = await _session(tmp_path, wire, tool_changes=True)
    session_id, tools = engine.session.id, engine.tools
    engine.session.close()
    again = make_engine(tmp_path, tmp_path / "ws", Clock(), session_id, on_disk=True)
    again.tools = tools
    turn = again.prepare_turn("and now?")
    target = dataclasses.replace(anthropic_provider(wire).target, tool_changes=True)
    body: Any = again.request(turn, target)
    last = wire.requests[-1].body
    assert body["tools"] == last["tools"]
    assert _changes(body) == _changes(last)
    again.session.close()
