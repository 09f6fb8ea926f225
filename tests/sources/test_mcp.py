"""MCP sources against a real MCP server (written with the official SDK) started by the tests."""

from __future__ import annotations

import dataclasses
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest
import pytest_asyncio

from lamina.sources import SourceConnections, find_sources, guide_path
from lamina.sources._tool import MAX_DESCRIPTION, guide_pointer
from lamina.workspace import WorkspaceTrust
from tests.sources.conftest import SERVER, pipeline, stdio_config, write_source


def _connections(workspace: Path) -> SourceConnections:
    scan = find_sources(workspace, trust=WorkspaceTrust.TRUSTED)
    assert scan.problems == ()
    return SourceConnections(scan.sources)


# every test here starts an MCP server process
# one worker runs the module (`make test` runs pytest-xdist with --dist loadgroup): its server starts once
pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.slow,
    pytest.mark.xdist_group("mcp-calc"),
]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def calc(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, SourceConnections]]:
    """Two sources on the test server, connected once for the module (a server takes seconds to start)."""
    workspace = tmp_path_factory.mktemp("calc")
    write_source(workspace, "calc", stdio_config())
    write_source(workspace, "lite", stdio_config(extra='enabled_tools = ["add", "nope"]\nread_only_tools = ["add"]\n'))
    async with _connections(workspace) as sources:
        yield workspace, sources


@pytest.mark.slow
async def test_server_tools_are_listed_with_short_descriptions_and_the_server_schema(
    calc: tuple[Path, SourceConnections],
) -> None:
    _, sources = calc
    specs = {tool.spec.name: tool.spec for tool in sources.tools if tool.source == "calc"}
    assert sorted(specs) == ["calc__add", "calc__blob", "calc__crash", "calc__shout", "calc__which_session"]
    for spec in specs.values():
        assert len(spec.description) <= MAX_DESCRIPTION
        assert spec.description.endswith(guide_pointer("calc"))
    assert specs["calc__add"].description == (
        "Add two integers and return the sum as text. Read sources/calc/guide.md before first use."
    )
    assert "second paragraph" not in specs["calc__shout"].description
    assert specs["calc__add"].input_schema == {
        "type": "object",
        "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}},
        "required": ["a", "b"],
    }
    assert sources.source_of_tool("calc__add") == "calc"
    assert sources.source_of_tool("Read") is None
    calc_source = next(source for source in sources.sources if source.slug == "calc")
    assert all(tool.guide == guide_path(calc_source) for tool in sources.tools if tool.source == "calc")
    assert not any(tool.read_only for tool in sources.tools if tool.source == "calc")


async def test_enabled_tools_filters_the_server_tools(calc: tuple[Path, SourceConnections]) -> None:
    _, sources = calc
    lite = [tool for tool in sources.tools if tool.source == "lite"]
    assert [tool.spec.name for tool in lite] == ["lite__add"]
    assert lite[0].read_only
    (problem,) = sources.problems
    assert problem.slug == "lite" and "nope" in problem.reason


async def test_call_round_trip_through_the_pipeline(calc: tuple[Path, SourceConnections]) -> None:
    workspace, sources = calc
    tools = pipeline(sources.tools, workspace)
    added = await tools.execute("c1", "calc__add", {"a": 2, "b": 40})
    assert (added.content, added.is_error) == ("42", False)
    shouted = await tools.execute("c2", "calc__shout", {"text": "hi"})
    assert (shouted.content, shouted.is_error) == ("HI", False)
    missing = await tools.execute("c3", "calc__add", {"a": 2})
    assert missing.is_error and missing.decision.kind == "deny"
    assert "b: required field missing" in missing.content
    wrong = await tools.execute("c4", "calc__add", {"a": 2, "b": 3.5})
    assert wrong.is_error and wrong.content.endswith("b: expected integer, got float")


@pytest.mark.slow
async def test_editing_a_guide_changes_no_tool_spec(calc: tuple[Path, SourceConnections]) -> None:
    workspace, sources = calc
    before = [msgspec.json.encode(dataclasses.asdict(tool.spec)) for tool in sources.tools]
    for source in sources.sources:
        guide_path(source).write_text("# Rewritten\n\nEntirely different advice. " * 50, encoding="utf-8")
    async with _connections(workspace) as again:
        after = [msgspec.json.encode(dataclasses.asdict(tool.spec)) for tool in again.tools]
    assert after == before


@pytest.mark.slow
async def test_a_server_that_dies_mid_call_gives_a_clear_error_and_the_next_call_restarts_it(
    calc: tuple[Path, SourceConnections],
) -> None:
    workspace, sources = calc
    tools = pipeline(sources.tools, workspace)
    died = await tools.execute("c1", "calc__crash", {})
    assert died.is_error
    assert died.content.startswith("source calc: the MCP server stopped during the call to crash")
    again = await tools.execute("c2", "calc__add", {"a": 1, "b": 1})
    assert (again.content, again.is_error) == ("2", False)


async def test_an_unstartable_command_is_a_clear_problem_and_no_tools(workspace: Path) -> None:
    write_source(workspace, "ghost", 'kind = "mcp"\ndescription = "Nothing."\ncommand = "lamina-no-such-server-cmd"\n')
    crash_at_start = "import sys; sys.stderr.write('bad config: no token\\n'); sys.exit(2)"
    write_source(workspace, "quitter", stdio_config("-c", crash_at_start))
    async with _connections(workspace) as sources:
        assert sources.tools == ()
        problems = {problem.slug: problem.reason for problem in sources.problems}
        assert problems["ghost"].startswith("cannot start the MCP server:")
        assert "lamina-no-such-server-cmd" in problems["ghost"]
        assert "bad config: no token" in problems["quitter"]


async def test_a_missing_environment_variable_is_named(workspace: Path) -> None:
    write_source(workspace, "calc", stdio_config(extra='env = { TOKEN = "${LAMINA_TEST_UNSET_VAR}" }\n'))
    async with SourceConnections(find_sources(workspace, trust=WorkspaceTrust.TRUSTED).sources, environ={}) as sources:
        (problem,) = sources.problems
        assert problem.reason == "environment variable LAMINA_TEST_UNSET_VAR is not set"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP, one process for the module (each test opens its own client session)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the test MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
async def test_streamable_http_server_round_trip(workspace: Path, http_server: str) -> None:
    write_source(workspace, "remote", f'kind = "mcp"\ndescription = "Remote."\nurl = "{http_server}"\n')
    async with _connections(workspace) as sources:
        assert sources.problems == ()
        result = await pipeline(sources.tools, workspace).execute("c1", "remote__add", {"a": 20, "b": 22})
        assert (result.content, result.is_error) == ("42", False)


@pytest.mark.slow
async def test_an_http_result_over_the_clients_event_limit_is_too_large_and_the_connection_is_kept(
    workspace: Path, http_server: str
) -> None:
    write_source(workspace, "remote", f'kind = "mcp"\ndescription = "Remote."\nurl = "{http_server}"\n')
    async with _connections(workspace) as sources:
        tools = pipeline(sources.tools, workspace)
        before = await tools.execute("c1", "remote__which_session", {})
        result = await tools.execute("c2", "remote__blob", {"size": 1_500_000})
        assert result.is_error and "stopped" not in result.content
        found = re.fullmatch(
            r"source remote: the result of blob is ([\d,]+) bytes, more than the MCP client takes in one message"
            r" \(1,048,576 bytes\); the tool ran but its result cannot be received\. The connection is kept: ask"
            r" for less \(a smaller page, range or query\)\.",
            result.content,
        )
        assert found is not None, result.content
        # the answer as sent: the text twice (as content and as structured content) and its JSON-RPC frame
        assert 3_000_000 < int(found.group(1).replace(",", "")) < 3_001_000
        after = await tools.execute("c3", "remote__which_session", {})
        assert (after.content, after.is_error) == (before.content, False)  # the same client session
        small = await tools.execute("c4", "remote__blob", {"size": 400_000})  # 800 kB as sent: under the limit
        assert not small.is_error


@pytest.mark.slow
async def test_the_guide_must_be_read_before_the_first_call_of_a_source(
    calc: tuple[Path, SourceConnections], tmp_path: Path
) -> None:
    from lamina.agent import AgentOptions, open_agent
    from lamina.placement import AnthropicTarget
    from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
    from lamina.session import LocalSessionStore, ToolResult

    workspace, sources = calc
    guide = guide_path(next(s for s in sources.sources if s.slug == "calc"))
    steps = [
        ScriptedResponse(text="Adding.", tool_calls=(ScriptedToolCall("calc__add", {"a": 1, "b": 2}),)),
        ScriptedResponse(text="Reading the guide.", tool_calls=(ScriptedToolCall("Read", {"path": str(guide)}),)),
        ScriptedResponse(text="Adding again.", tool_calls=(ScriptedToolCall("calc__add", {"a": 1, "b": 2}),)),
        ScriptedResponse(text="1 + 2 = 3."),
    ]
    provider = ScriptedProvider(steps, target=AnthropicTarget(model="claude-sonnet-5"))
    agent = open_agent(
        LocalSessionStore(tmp_path / "store"),
        provider,
        workspace=workspace,
        options=AgentOptions(mode="execute", sources=sources),
    )
    outcome = await agent.run_turn("What is 1 + 2? Use the calculator.")
    results = [e for e in agent.engine.session.entries() if isinstance(e, ToolResult)]
    assert results[0].is_error and str(guide) in results[0].content  # gated until the guide is read
    assert not results[1].is_error
    assert (results[2].content, results[2].is_error) == ("3", False)
    assert outcome.text == "1 + 2 = 3."
    assert agent.engine.settings.active_sources == ("calc", "lite")  # the volatile part states them
    agent.engine.session.close()
