"""The loop reports a running tool call as `ToolProgress` events, between its `ToolStarted` and `ToolFinished`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from lamina.agent import AgentEvent, AgentOptions, ToolFinished, ToolProgress, ToolStarted, open_agent
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from tests.support.engine import memory_store

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell")


async def test_a_bash_call_reports_its_start_and_its_output_then_finishes(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    bash = ScriptedToolCall(name="Bash", input={"command": "echo one; echo two"})
    provider = ScriptedProvider([ScriptedResponse(text="Running.", tool_calls=(bash,)), ScriptedResponse(text="Ok.")])
    events: list[AgentEvent] = []
    async with open_agent(
        memory_store(tmp_path, time.time),
        provider,
        workspace=workspace,
        options=AgentOptions(mode="execute", on_event=events.append),
    ) as agent:
        await agent.run_turn("run it")
        assert agent.tools.context.progress is None  # the listener was the call's only
    tools = [e for e in events if isinstance(e, ToolStarted | ToolProgress | ToolFinished)]
    assert isinstance(tools[0], ToolStarted) and isinstance(tools[-1], ToolFinished)
    progress = [e for e in tools if isinstance(e, ToolProgress)]
    assert len(progress) == len(tools) - 2 and {e.call_id for e in progress} == {tools[0].call_id}
    assert progress[0].output == "" and "".join(e.output for e in progress) == "one\ntwo\n"
