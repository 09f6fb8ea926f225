"""Bash without its sandbox is never silent: one `sandbox` warning per session, in the events and on the CLI.

The sandbox is missing here because bubblewrap is looked up where it is not (a name no program has,
or a PATH without it); the config's `[sandbox]` table reaches the tool, and a workspace's file can
only tighten it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.agent import AgentEvent, SkillWarning, open_agent
from lamina.cli import app
from lamina.cli._config import load_settings
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.tools import BashTool, SandboxSettings
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
        store, provider, workspace=workspace, mode="execute", on_event=events.append, sandbox=MISSING
    ) as agent:
        assert not [e for e in events if isinstance(e, SkillWarning)]  # nothing before a command runs
        await agent.run_turn("run both")
    warnings = [e for e in events if isinstance(e, SkillWarning)]
    assert len(warnings) == 1 and warnings[0].name == "sandbox"
    assert "without its sandbox" in warnings[0].message and "lamina-no-such-bwrap" in warnings[0].message


async def test_a_bash_tool_nobody_listens_to_says_it_in_its_first_result(tmp_path: Path) -> None:
    from lamina.tools import PermissionMode, ToolContext
    from lamina.tools._bash import BashInput

    bash = BashTool(sandbox=MISSING)
    ctx = ToolContext(cwd=tmp_path, data_dir=tmp_path / "data", mode=PermissionMode.EXECUTE)
    first = await bash.run(BashInput(command="true"), ctx)
    second = await bash.run(BashInput(command="true"), ctx)
    assert "without its sandbox" in first.content
    assert second.content == "(no output)\n[exit code 0]"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _scripted(tmp_path: Path) -> str:
    calls = [
        {"text": "One.", "tool_calls": [{"name": "Bash", "input": {"command": "echo one"}}]},
        {"text": "Two.", "tool_calls": [{"name": "Bash", "input": {"command": "echo two"}}]},
        {"text": "Done."},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": calls}))
    return f"scripted:{path}"


def test_lamina_run_shows_the_notice_once_per_session(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no bubblewrap to find (the shell is /bin/sh then)
    args = ["--store", str(tmp_path / "store"), "run", "go", "--model", _scripted(tmp_path), "--mode", "execute"]
    result = CliRunner().invoke(app, [*args, "--stream-json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    warnings = [e for e in events if e["type"] == "warning"]
    assert len(warnings) == 1 and "bubblewrap (bwrap) was not found" in warnings[0]["message"]
    assert [e["content"] for e in events if e["type"] == "tool_finished"] == ["one\n[exit code 0]", "two\n[exit code 0]"]
    text = CliRunner().invoke(app, args)
    assert text.stderr.count("without its sandbox") == 1


def test_the_config_files_sandbox_table_and_what_a_workspace_may_not_loosen(tmp_path: Path, ws: Path) -> None:
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[sandbox]\nnetwork = true\nwritable = ["~/.cache", "/srv/data"]\n')
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text('[sandbox]\nenabled = false\nnetwork = false\nwritable = ["/"]\n')
    settings = load_settings(ws)
    assert settings.sandbox == SandboxSettings(
        enabled=True, network=False, writable=(Path.home() / ".cache", Path("/srv/data"))
    )
    assert settings.origin("sandbox.network") == str(ws / ".lamina" / "config.toml")  # tightening counts
    assert settings.origin("sandbox.writable") == str(user)
    assert len(settings.sandbox_ignored) == 2
    assert "enabled = false" in settings.sandbox_ignored[0] and '["/"]' in settings.sandbox_ignored[1]
    shown = json.loads(CliRunner().invoke(app, ["config", "show", "--json"]).stdout)
    assert shown["settings"]["sandbox.enabled"] == {"value": True, "from": "default"}
    assert shown["sandbox_ignored"] == list(settings.sandbox_ignored)


def test_a_relative_writable_folder_is_an_error_naming_the_file(tmp_path: Path, ws: Path) -> None:
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[sandbox]\nwritable = ["build"]\n')
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 2 and str(user) in result.stderr and "sandbox.writable" in result.stderr


def test_a_workspace_that_asks_to_loosen_the_sandbox_is_told_at_start(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("[sandbox]\nenabled = false\n")
    model = _scripted(tmp_path)
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "store"), "run", "go", "--model", model, "--json"])
    assert "enabled = false under [sandbox]: ignored" in result.stderr
