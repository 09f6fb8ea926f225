"""Lamina's catalogue on the wire: a tool loaded in a turn is among the tools of that turn's next request.

Where the model has no provider tool search, the deferred source tools stand behind `ToolCatalogue`.
A load (through the catalogue, or the first-use rule's denial) records the tool set at once, so the
turn's next request sends the loaded tool: appended at the end of `tools` (Chat Completions), or as a
`tool_addition` block where the model takes tool changes (the cached `tools` array kept). The model
then calls it natively, in the same turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lamina.agent import Agent
from lamina.agent._tool_catalogue import DeferredTools
from lamina.agent._tool_sets import CATALOGUE_TOOL, ToolDeferral
from lamina.context import ToolSpec
from lamina.defang import trusted
from lamina.providers import Capabilities, Provider
from lamina.session import ToolResult
from lamina.tools import PermissionMode, ToolContext, ToolOutput, ToolPipeline
from tests.support.engine import Clock, make_engine
from tests.wire.fixtures import anthropic_provider, openai_chat_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

_WIDTH = 22


class _SourceTool:
    """A source tool with a wide schema, as an MCP server's are; it counts its runs."""

    read_only = True

    def __init__(self, n: int) -> None:
        self.name = f"srv__tool_{n}"
        self.runs = 0

    @property
    def spec(self) -> ToolSpec:
        props = {f"field_{i}": {"type": "string", "description": f"The value of field {i}."} for i in range(_WIDTH)}
        return ToolSpec(self.name, trusted(f"Do thing {self.name[-1]}."), {"type": "object", "properties": props})

    def validate(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        return dict(raw)

    def paths(self, input: dict[str, Any]) -> tuple[Path, ...]:
        return ()

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.runs += 1
        return ToolOutput(f"{self.name} ran with {sorted(input)}")


SOURCE = [_SourceTool(n) for n in range(70)]
"""Seventy wide schemas: far over a tenth of a 200k window, so the catalogue stands in for them."""


async def _session(tmp_path: Path, provider: Provider, *texts: str) -> tuple[Agent, DeferredTools]:
    """An agent over the source tools, deferred behind the catalogue; one turn per text."""
    for tool in SOURCE:
        tool.runs = 0
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    engine = make_engine(tmp_path, workspace, Clock())
    deferred = DeferredTools([], [t.spec for t in SOURCE], ToolDeferral())
    context = ToolContext(cwd=workspace, data_dir=tmp_path / ".data", mode=PermissionMode.EXECUTE)
    pipeline = ToolPipeline([*SOURCE, deferred.tool()], context, rules=[deferred.rule()])
    agent = Agent(engine, provider, pipeline)
    for text in texts:
        deferred.refresh(engine, provider.capabilities)  # `open_agent` runs it as a turn hook
        await agent.run_turn(text)
    return agent, deferred


def _names(body: Mapping[str, Any]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in body["tools"]]


def _results(agent: Agent) -> list[ToolResult]:
    return [e for e in agent.session.entries() if isinstance(e, ToolResult)]


async def test_a_tool_loaded_from_the_catalogue_is_appended_to_the_same_turns_next_request(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(
        Reply(tool_calls=[ToolUse(CATALOGUE_TOOL, {"load": ["srv__tool_3"]})]),
        Reply(tool_calls=[ToolUse("srv__tool_3", {"field_0": "x"})]),
        Reply(text="Done."),
    )
    async with openai_chat_provider(wire) as provider:
        agent, deferred = await _session(tmp_path, provider, "do thing 3")
    assert deferred.mode == "catalogue"
    assert [r.status for r in wire.requests] == [200, 200, 200]
    names = [_names(r.body) for r in wire.requests]
    assert names[0] == [CATALOGUE_TOOL]  # no source schema in the first request
    assert names[1] == names[2] == [CATALOGUE_TOOL, "srv__tool_3"]  # loaded: at the end of the array, same turn
    assert [r.content for r in _results(agent)][1] == "srv__tool_3 ran with ['field_0']"
    assert SOURCE[3].runs == 1  # called natively: no first-use denial
    agent.close()


async def test_where_the_model_takes_tool_changes_the_loaded_tool_is_a_tool_addition(
    tmp_path: Path, wire: WireServer
) -> None:
    wire.script(
        Reply(tool_calls=[ToolUse(CATALOGUE_TOOL, {"load": ["srv__tool_3"]})]),
        Reply(tool_calls=[ToolUse("srv__tool_3", {"field_0": "x"})]),
        Reply(text="Done."),
    )
    capabilities = Capabilities(tool_changes=True, cache_regime="anthropic")
    async with anthropic_provider(wire, capabilities=capabilities) as provider:
        agent, _ = await _session(tmp_path, provider, "do thing 3")
    assert [r.status for r in wire.requests] == [200, 200, 200]
    first, second, third = (r.body for r in wire.requests)
    assert first["tools"] == second["tools"] == third["tools"]  # the cached tools prefix is kept
    (result_message,) = [m for m in second["messages"][-1:] if m["role"] == "user"]
    kinds = [b["type"] for b in result_message["content"]]
    assert kinds[0] == "tool_result" and kinds[-1] == "tool_addition"  # with the catalogue's result
    assert result_message["content"][-1]["tool"]["definition"]["name"] == "srv__tool_3"
    assert SOURCE[3].runs == 1 and _results(agent)[-1].content == "srv__tool_3 ran with ['field_0']"
    agent.close()


async def test_the_first_call_of_an_unloaded_tool_is_denied_with_its_schema_and_the_next_succeeds(
    tmp_path: Path, wire: WireServer
) -> None:
    call = ToolUse("srv__tool_5", {"field_1": "y"})
    wire.script(Reply(tool_calls=[call]), Reply(tool_calls=[call]), Reply(text="Done."))
    async with openai_chat_provider(wire) as provider:
        agent, deferred = await _session(tmp_path, provider, "do thing 5")
    denied, ran = _results(agent)
    assert denied.is_error and "srv__tool_5 was deferred" in denied.content
    assert '"name": "srv__tool_5"' in denied.content and '"field_21"' in denied.content  # the schema, whole
    assert not ran.is_error and ran.content == "srv__tool_5 ran with ['field_1']"
    assert SOURCE[5].runs == 1  # the denied call never ran
    assert deferred.loaded == ["srv__tool_5"]
    names = [_names(r.body) for r in wire.requests]
    assert names[0] == [CATALOGUE_TOOL] and names[1] == [CATALOGUE_TOOL, "srv__tool_5"]
    agent.close()


async def test_a_load_is_sent_in_the_next_turns_too_and_the_array_only_grows(tmp_path: Path, wire: WireServer) -> None:
    wire.script(
        Reply(tool_calls=[ToolUse(CATALOGUE_TOOL, {"load": ["srv__tool_3"]})]),
        Reply(text="Loaded."),
        Reply(tool_calls=[ToolUse(CATALOGUE_TOOL, {"load": ["srv__tool_1", "srv__tool_3"]})]),
        Reply(text="Loaded too."),
    )
    async with openai_chat_provider(wire) as provider:
        agent, deferred = await _session(tmp_path, provider, "load 3", "load 1")
    names = [_names(r.body) for r in wire.requests]
    assert names[2] == [CATALOGUE_TOOL, "srv__tool_3"]  # the next turn keeps it
    assert names[3] == [CATALOGUE_TOOL, "srv__tool_3", "srv__tool_1"]  # in load order, appended
    assert deferred.loaded == ["srv__tool_3", "srv__tool_1"]
    agent.close()
