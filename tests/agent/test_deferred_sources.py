"""Deferred source tools end to end: `open_agent` over an MCP server whose schemas exceed the share of the window.

On Anthropic the source tools go with `defer_loading` and the tool-search tool: the model searches,
and the tool it found is called through the agent's pipeline to the MCP server. On Chat Completions
Lamina's catalogue stands in: the model loads a tool (or calls it unloaded and is given its schema),
and calls it in the same turn. Each test starts the MCP server process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.agent import Agent, AgentOptions, open_agent
from lamina.providers import Capabilities, Provider
from lamina.session import ToolResult
from lamina.sources import SourceConnections, find_sources
from lamina.workspace import WorkspaceTrust
from tests.support.engine import Clock, memory_store
from tests.wire.fixtures import anthropic_provider, openai_chat_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = pytest.mark.slow

SERVER = Path(__file__).parents[1] / "sources" / "mcp_wide_server.py"
GUIDE = "sources/ledger/guide.md"
READ_GUIDE = ToolUse("Read", {"path": GUIDE})  # a source's guide is a required read before its tools
CALL = ToolUse("ledger__record_12", {"field_0": "shipped", "field_3": "today"})
ANSWER = "record_12 updated: field_0, field_3"


def _workspace(tmp_path: Path) -> Path:
    """A workspace with the `ledger` source: sixty tools of twenty-five fields each (about 30k tokens)."""
    workspace = tmp_path / "ws"
    folder = workspace / "sources" / "ledger"
    folder.mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    (folder / "guide.md").write_text("# Ledger\n\nUpdate one record at a time.\n")
    config = (
        f'kind = "mcp"\ndescription = "The ledger."\ncommand = "{sys.executable}"\nargs = ["{SERVER}", "60", "25"]\n'
    )
    (folder / "source.toml").write_text(config)
    return workspace


async def _turn(tmp_path: Path, provider: Provider, text: str) -> Agent:
    """One turn of an agent on the ledger source (its server started and stopped here)."""
    workspace = _workspace(tmp_path)
    scan = find_sources(workspace, trust=WorkspaceTrust.TRUSTED)
    assert scan.problems == ()
    clock = Clock()
    async with SourceConnections(scan.sources) as sources:
        options = AgentOptions(sources=sources, mode="execute", clock=clock)
        agent = open_agent(memory_store(tmp_path, clock), provider, workspace=workspace, options=options)
        await agent.run_turn(text)
    return agent


def _results(agent: Agent) -> dict[str, ToolResult]:
    return {e.name: e for e in agent.session.entries() if isinstance(e, ToolResult)}


def _names(body: Any) -> list[str]:
    return [t["function"]["name"] if "function" in t else t.get("name", t.get("type")) for t in body["tools"]]


async def test_on_anthropic_the_source_tools_are_found_by_the_tool_search_and_called(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(
        Reply(tool_search="shipment batch 1", tool_calls=[READ_GUIDE]),
        Reply(tool_calls=[CALL]),
        Reply(text="Updated."),
    )
    capabilities = Capabilities(tool_search=True, cache_regime="anthropic")
    async with anthropic_provider(wire, capabilities=capabilities) as provider:
        agent = await _turn(tmp_path, provider, "mark the shipment of batch 1 shipped")
    assert [r.status for r in wire.requests] == [200, 200, 200]
    tools = wire.requests[0].body["tools"]
    sources = [t for t in tools if str(t.get("name", "")).startswith("ledger__")]
    assert len(sources) == 60 and all(t["defer_loading"] for t in sources)
    assert not any(t.get("defer_loading") for t in tools if t not in sources)  # the built-ins stay loaded
    assert tools[-1]["type"] == "tool_search_tool_bm25_20251119"
    found = wire.requests[1].body["messages"][-2]["content"][1]["content"]["tool_references"]
    assert {"type": "tool_reference", "tool_name": "ledger__record_12"} in found
    result = _results(agent)["ledger__record_12"]
    assert (result.content, result.is_error) == (ANSWER, False)
    assert all(r.body["tools"] == tools for r in wire.requests)  # the cached tools prefix is never rewritten
    agent.close()


async def test_on_chat_completions_the_catalogue_loads_the_tool_for_the_same_turn(
    tmp_path: Path, wire: WireServer
) -> None:
    load = ToolUse("ToolCatalogue", {"load": ["ledger__record_12"]})
    wire.script(Reply(tool_calls=[READ_GUIDE, load]), Reply(tool_calls=[CALL]), Reply(text="Updated."))
    async with openai_chat_provider(wire) as provider:
        agent = await _turn(tmp_path, provider, "mark the shipment of batch 1 shipped")
    assert [r.status for r in wire.requests] == [200, 200, 200]
    first, second, _ = (_names(r.body) for r in wire.requests)
    assert first[-1] == "ToolCatalogue" and not any(n.startswith("ledger__") for n in first)
    assert second == [*first, "ledger__record_12"]  # loaded: appended, in the turn's next request
    results = _results(agent)
    assert '"name": "ledger__record_12"' in results["ToolCatalogue"].content
    assert (results["ledger__record_12"].content, results["ledger__record_12"].is_error) == (ANSWER, False)
    agent.close()


async def test_on_chat_completions_a_call_before_the_load_gets_the_schema_and_the_next_call_works(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(Reply(tool_calls=[READ_GUIDE]), Reply(tool_calls=[CALL]), Reply(tool_calls=[CALL]), Reply(text="Ok."))
    async with openai_chat_provider(wire) as provider:
        agent = await _turn(tmp_path, provider, "mark the shipment of batch 1 shipped")
    denied, ran = [e for e in agent.session.entries() if isinstance(e, ToolResult) and e.name == CALL.name]
    assert denied.is_error and "was deferred to save context" in denied.content and '"field_24"' in denied.content
    assert (ran.content, ran.is_error) == (ANSWER, False)
    assert _names(wire.requests[2].body)[-1] == "ledger__record_12"
    agent.close()
