"""A skill's `allowed_tools` while it is the turn's task, and skills named by a task rather than mentioned."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.agent import AgentOptions, open_agent
from lamina.cli import app
from lamina.providers import RetryPolicy
from lamina.session import LocalSessionStore, ToolResult
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

REVIEW = """---
name: review
description: Review the code without changing it.
allowed_tools: [Read, Grep]
---
Read the code and report problems. Change nothing.
"""
NOTES = """---
name: notes
description: Take notes.
---
Write notes.
"""


async def _no_sleep(_: float) -> None:
    return None


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for name, text in (("review", REVIEW), ("notes", NOTES)):
        (root / ".lamina" / "skills" / name).mkdir(parents=True)
        (root / ".lamina" / "skills" / name / "SKILL.md").write_text(text)
    (root / "app.py").write_text("x = 1\n")
    return root


def _results(entries: Sequence[object]) -> list[ToolResult]:
    return [e for e in entries if isinstance(e, ToolResult)]


READ_REVIEW = ToolUse("Read", {"path": ".lamina/skills/review/SKILL.md"})


@pytest.mark.slow
async def test_allowed_tools_hold_while_the_skill_is_the_task_and_lift_after(tmp_path: Path, wire: WireServer) -> None:
    workspace = _workspace(tmp_path)
    wire.script(
        Reply(text="Reading the skill.", tool_calls=[READ_REVIEW]),
        Reply(text="Checking.", tool_calls=[ToolUse("Grep", {"pattern": "x"}), ToolUse("Glob", {"pattern": "*.py"})]),
        Reply(text="Found x = 1."),
        Reply(text="Listing.", tool_calls=[ToolUse("Glob", {"pattern": "*.py"})]),  # the next turn: no skill
        Reply(text="app.py."),
    )
    async with anthropic_provider(wire) as provider:
        agent = open_agent(
            LocalSessionStore(tmp_path / "store"),
            provider,
            workspace=workspace,
            options=AgentOptions(retry=RetryPolicy(sleep=_no_sleep)),
        )
        await agent.run_turn("Please [skill:review] app.py")
        first = _results(agent.engine.session.entries())
        assert [r.is_error for r in first] == [False, False, True]  # Read (the skill), Grep; Glob denied
        assert "Glob is not allowed while the skill 'review' is the task: it allows only Grep, Read" in first[2].content
        await agent.run_turn("Which Python files are there?")
        last = _results(agent.engine.session.entries())[-1]
        assert not last.is_error and "app.py" in last.content  # the task ended with its turn
        agent.engine.session.close()
    note = json.dumps(wire.requests[0].body["messages"])
    assert "While it is the task, only these tools run: Read, Grep." in note


@pytest.mark.slow
async def test_a_skill_without_allowed_tools_lifts_the_restriction(tmp_path: Path, wire: WireServer) -> None:
    workspace = _workspace(tmp_path)
    wire.script(
        Reply(
            text="Reading both.",
            tool_calls=[READ_REVIEW, ToolUse("Read", {"path": ".lamina/skills/notes/SKILL.md"})],
        ),
        Reply(text="Listing.", tool_calls=[ToolUse("Glob", {"pattern": "*.py"})]),
        Reply(text="Done."),
    )
    async with anthropic_provider(wire) as provider:
        agent = open_agent(
            LocalSessionStore(tmp_path / "store"),
            provider,
            workspace=workspace,
            options=AgentOptions(retry=RetryPolicy(sleep=_no_sleep)),
        )
        await agent.run_turn("[skill:review] and [skill:notes], please")
        assert [r.is_error for r in _results(agent.engine.session.entries())] == [False, False, False]
        agent.engine.session.close()


async def test_a_task_that_names_a_skill_requires_reading_it_like_a_mention(tmp_path: Path, wire: WireServer) -> None:
    workspace = _workspace(tmp_path)
    skill_md = workspace / ".lamina" / "skills" / "review" / "SKILL.md"
    wire.script(
        Reply(text="Grepping first.", tool_calls=[ToolUse("Grep", {"pattern": "x"})]),
        Reply(text="Reading the skill.", tool_calls=[READ_REVIEW]),
        Reply(text="Done."),
    )
    async with anthropic_provider(wire) as provider:
        agent = open_agent(
            LocalSessionStore(tmp_path / "store"),
            provider,
            workspace=workspace,
            options=AgentOptions(retry=RetryPolicy(sleep=_no_sleep)),
        )
        await agent.run_turn("Look at app.py", skills=["review"])
        denied, read = _results(agent.engine.session.entries())
        assert denied.is_error and str(skill_md) in denied.content  # blocked until the skill is read
        assert not read.is_error
        assert agent.engine.settings.skills_in_use == ("review",)
        agent.engine.session.close()
    assert "invoked the skill 'review'" in json.dumps(wire.requests[0].body["messages"])


def test_lamina_run_skill_option(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = _workspace(tmp_path)
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    wire.script(
        Reply(text="Reading.", tool_calls=[READ_REVIEW]),
        Reply(text="Editing.", tool_calls=[ToolUse("Write", {"path": "b.py", "content": "y = 2\n"})]),
        Reply(text="I may not write during a review."),
    )
    args = ["--store", str(tmp_path / "store"), "run", "review app.py", "--model", "anthropic:claude-sonnet-5"]
    result = CliRunner().invoke(app, [*args, "--mode", "execute", "--skill", "review", "--json"])
    assert result.exit_code == 0, result.output
    assert not (workspace / "b.py").exists()  # Write is not in the review skill's allowed tools
    last = json.dumps(wire.requests[-1].body["messages"])
    assert "Write is not allowed while the skill 'review' is the task" in last
