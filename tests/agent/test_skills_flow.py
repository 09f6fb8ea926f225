"""Skills end to end through the wire server: a mention blocks other tools until SKILL.md is read."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from lamina.agent import AgentEvent, AgentOptions, SkillWarning, open_agent
from lamina.compaction import DeterministicSummariser
from lamina.providers import RetryPolicy
from lamina.session import LocalSessionStore, StateChange, ToolResult
from tests.wire.fixtures import anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

SKILL = """---
name: deploy
description: How to deploy this service safely.
required_sources: [github]
---
# Deploy
1. Run the tests.
2. Tag the release.
"""


async def _no_sleep(_: float) -> None:
    return None


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".lamina" / "skills" / "deploy").mkdir(parents=True)
    (root / ".lamina" / "skills" / "deploy" / "SKILL.md").write_text(SKILL)
    return root


def _results(agent_entries: Sequence[object]) -> list[ToolResult]:
    return [e for e in agent_entries if isinstance(e, ToolResult)]


@pytest.mark.slow
async def test_a_skill_mention_requires_reading_it_first_and_again_after_compaction(
    tmp_path: Path, wire: WireServer
) -> None:
    workspace = _workspace(tmp_path)
    skill_md = workspace / ".lamina" / "skills" / "deploy" / "SKILL.md"
    wire.script(
        Reply(text="Deploying.", tool_calls=[ToolUse("Bash", {"command": "ls"})]),
        Reply(text="Reading the skill.", tool_calls=[ToolUse("Read", {"path": ".lamina/skills/deploy/SKILL.md"})]),
        # the user's words stay verbatim after a compaction: what it frees is the model's side
        Reply(text="Now running. " + "notes " * 400, tool_calls=[ToolUse("Bash", {"command": "echo deployed"})]),
        Reply(text="Deployed. " + "details " * 400),
        Reply(text="Noted."),
        Reply(text="Again.", tool_calls=[ToolUse("Bash", {"command": "ls"})]),
        Reply(text="OK, I will read it again first."),
    )
    async with anthropic_provider(wire) as provider:
        agent = open_agent(
            LocalSessionStore(tmp_path / "store"),
            provider,
            workspace=workspace,
            options=AgentOptions(
                mode="execute",
                retry=RetryPolicy(sleep=_no_sleep),
                summariser=DeterministicSummariser(),
                keep_tokens=200,
            ),
        )
        first = await agent.run_turn("Please [skill:deploy] the service now. " + "context " * 400)
        assert first.text.startswith("Deployed.")
        results = _results(agent.engine.session.entries())
        denied, read, ran = results[0], results[1], results[2]
        assert denied.is_error and str(skill_md) in denied.content  # the denial names the file
        assert not read.is_error and "Tag the release" in read.content
        assert not ran.is_error and "deployed" in ran.content
        stable = json.dumps(wire.requests[0].body["messages"][0])  # the catalogue is a project part: user role
        assert "deploy" in stable and "How to deploy this service safely." in stable  # catalogue only
        assert "How to deploy" not in json.dumps(wire.requests[0].body["system"])
        assert "Tag the release" not in stable  # the body is never inlined
        sources = [e for e in agent.engine.session.entries() if isinstance(e, StateChange) and e.key == "sources"]
        assert sources and sources[0].value == "github"  # the skill's source was enabled before its turn

        await agent.run_turn("Thanks.")
        outcome = await agent.compact()
        assert outcome.status == "compacted", outcome.message
        await agent.run_turn("Deploy once more.")
        again = _results(agent.engine.session.entries())[-1]
        assert again.is_error and str(skill_md) in again.content  # read state was reset by the compaction
        # and the model was told so once, before its next tool call, naming the file to read again
        told = json.dumps(wire.requests[-2].body["messages"][-1])
        assert "Read these SKILL.md files again before your next tool call" in told and "SKILL.md" in told
        assert "Read these SKILL.md files again" not in json.dumps(wire.requests[-1].body["messages"][-1])
    agent.engine.session.close()


async def test_an_unknown_skill_is_a_warning_not_a_failed_turn(tmp_path: Path, wire: WireServer) -> None:
    workspace = _workspace(tmp_path)
    events: list[AgentEvent] = []
    wire.script(Reply(text="There is no such skill; here is what I can do."))
    async with anthropic_provider(wire) as provider:
        agent = open_agent(
            LocalSessionStore(tmp_path / "store"),
            provider,
            workspace=workspace,
            options=AgentOptions(on_event=events.append, retry=RetryPolicy(sleep=_no_sleep)),
        )
        outcome = await agent.run_turn("Use [skill:teleport] and `[skill:deploy]` in code is not a mention")
    assert outcome.text.startswith("There is no such skill")
    warnings = [e for e in events if isinstance(e, SkillWarning)]
    assert [w.name for w in warnings] == ["teleport"]
    tail = json.dumps(wire.requests[0].body["messages"][-1])
    assert "teleport" in tail and "no such skill" in tail
    assert "invoked the skill 'deploy'" not in tail  # a mention inside a code span does not count
    agent.engine.session.close()


@pytest.mark.slow
async def test_skills_in_use_survive_a_resume_and_are_required_again_after_compaction(
    tmp_path: Path, wire: WireServer
) -> None:
    workspace = _workspace(tmp_path)
    skill_md = workspace / ".lamina" / "skills" / "deploy" / "SKILL.md"
    store = LocalSessionStore(tmp_path / "store")
    wire.script(
        Reply(text="Reading. " + "notes " * 400, tool_calls=[ToolUse("Read", {"path": str(skill_md)})]),
        Reply(text="Read it. " + "details " * 400),
        Reply(text="Noted."),
        Reply(text="Listing.", tool_calls=[ToolUse("Bash", {"command": "ls"})]),
        Reply(text="I must read the skill again."),
    )
    async with anthropic_provider(wire) as provider:
        options = AgentOptions(
            retry=RetryPolicy(sleep=_no_sleep), summariser=DeterministicSummariser(), keep_tokens=200
        )
        agent = open_agent(store, provider, workspace=workspace, options=dataclasses.replace(options, mode="execute"))
        await agent.run_turn("Use [skill:deploy] please. " + "context " * 400)
        await agent.run_turn("Thanks.")
        session_id = agent.engine.session.id
        agent.engine.session.close()

        resumed = open_agent(store, provider, workspace=workspace, session_id=session_id, options=options)
        assert resumed.engine.settings.skills_in_use == ("deploy",)
        assert (await resumed.compact()).status == "compacted"
        await resumed.run_turn("List the files.")
        denied = _results(resumed.engine.session.entries())[-1]
        assert denied.is_error and str(skill_md) in denied.content
        resumed.engine.session.close()
        again = open_agent(store, provider, workspace=workspace, session_id=session_id, options=options)
        assert again.engine.settings.skills_in_use == ("deploy",)  # from the boundary's snapshot after a resume
        again.engine.session.close()
