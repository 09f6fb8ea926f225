"""Bash without its sandbox is never silent: one `sandbox` warning per session in the agent's events.

The sandbox is missing here because bubblewrap is looked up under a name no program has.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from lamina.agent import AgentEvent, AgentOptions, SkillWarning, open_agent
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.tools import SandboxSettings
from tests.support.engine import memory_store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell"),
]

MISSING = SandboxSettings(program="lamina-no-such-bwrap")


def _two_bash_calls() -> list[ScriptedResponse]:
    first = ScriptedToolCall(name="Bash", input={"command": "echo one"})
    second = ScriptedToolCall(name="Bash", input={"command": "echo two"}, call_id="call-2")
    return [
        ScriptedResponse(text="One.", tool_calls=(first,)),
        ScriptedResponse(text="Two.", tool_calls=(second,)),
        ScriptedResponse(text="Done."),
    ]


async def test_the_agent_warns_once_when_bash_runs_without_its_sandbox(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    events: list[AgentEvent] = []
    provider = ScriptedProvider(_two_bash_calls())
    store = memory_store(tmp_path, time.time)
    async with open_agent(
        store,
        provider,
        workspace=workspace,
        options=AgentOptions(mode="execute", on_event=events.append, sandbox=MISSING),
    ) as agent:
        assert not [e for e in events if isinstance(e, SkillWarning)]  # nothing before a command runs
        await agent.run_turn("run both")
    warnings = [e for e in events if isinstance(e, SkillWarning)]
    assert len(warnings) == 1 and warnings[0].name == "sandbox"
    assert "without its sandbox" in warnings[0].message and "lamina-no-such-bwrap" in warnings[0].message
