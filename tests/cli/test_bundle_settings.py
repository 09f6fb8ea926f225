"""A shared bundle is data: importing and resuming it never adopts its author's model endpoint or permission mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lamina.agent import AgentOptions, open_agent
from lamina.cli import app
from lamina.engine import recorded_settings
from lamina.providers import ScriptedProvider, ScriptedResponse, ScriptedToolCall
from lamina.session import LocalSessionStore, StateChange, export_session, import_session
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()
USER_KEY = "sk-the-users-own-openai-key"


@pytest.fixture
def theirs() -> Iterator[WireServer]:
    """The bundle author's model server."""
    with WireServer() as server:
        yield server


@pytest.fixture
def imported(tmp_path: Path, theirs: WireServer, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A session the author ran in execute mode on their own server, exported, imported by the user; its new id."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("OPENAI_API_KEY", USER_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    author = tmp_path / "author"
    author.mkdir()
    monkeypatch.chdir(author)
    theirs.script(Reply(text="Hello."))
    spec = f"openai-compat:{theirs.openai_url}#their-model"
    made = _lamina(tmp_path / "their-store", "run", "hello", "--model", spec, "--mode", "execute", "--json")
    assert made.exit_code == 0, made.output
    bundle = tmp_path / "shared.zip"
    session_id = json.loads(made.stdout)["session_id"]
    exported = _lamina(tmp_path / "their-store", "sessions", "export", session_id, "--output", str(bundle))
    assert exported.exit_code == 0, exported.output

    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.chdir(mine)
    user_config = tmp_path / "config" / "lamina" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text('mode = "ask"\nmodel = "anthropic:claude-sonnet-5"\n')
    result = _lamina(tmp_path / "store", "sessions", "import", str(bundle))
    assert result.exit_code == 0, result.output
    assert f"its bundle ran with model {spec}, mode execute" in result.stdout and "not adopted" in result.stdout
    assert len(theirs.requests) == 1
    return LocalSessionStore(tmp_path / "store").list()[0].id


def _lamina(store: Path, *args: str) -> Result:
    return runner.invoke(app, ["--store", str(store), *args])


def test_resuming_an_imported_bundle_uses_the_users_model_and_mode(
    tmp_path: Path, imported: str, theirs: WireServer, wire: WireServer
) -> None:
    touch = Reply(text="Setting up.", tool_calls=[ToolUse("Bash", {"command": "touch pwned"})])
    theirs.script(touch, Reply(text="Done."))
    wire.script(touch, Reply(text="Done."))
    result = _lamina(tmp_path / "store", "run", "go on", "--resume", imported, "--json")
    assert result.exit_code == 0, result.output
    assert len(theirs.requests) == 1  # nothing more reached the author's server, so no key either
    assert len(wire.requests) == 2 and not (tmp_path / "mine" / "pwned").exists()  # ask mode: nobody approved
    document = json.loads(result.stdout)
    assert document["model"] == "anthropic:claude-sonnet-5"
    assert "imported session: its bundle ran with model openai-compat:" in result.stderr
    assert not (tmp_path / "config" / "lamina" / "trusted.toml").exists()  # and no trust came with it

    again = _lamina(tmp_path / "store", "chat", "--resume", imported, "--model", "anthropic:claude-sonnet-5")
    assert "mode ask" in again.stderr and "imported session" not in again.stderr  # its own settings now


def test_adopting_the_bundle_settings_is_an_explicit_choice(
    tmp_path: Path, imported: str, theirs: WireServer, wire: WireServer
) -> None:
    theirs.script(Reply(text="Back on the author's model."))
    result = _lamina(tmp_path / "store", "run", "go on", "--resume", imported, "--adopt-bundle-settings", "--json")
    assert result.exit_code == 0, result.output
    assert len(theirs.requests) == 2 and wire.requests == []
    assert json.loads(result.stdout)["model"].startswith("openai-compat:")
    with LocalSessionStore(tmp_path / "store").open(imported, writable=False) as session:
        assert recorded_settings(session.entries_loaded()).mode == "execute"
    fresh = _lamina(tmp_path / "store", "run", "hi", "--adopt-bundle-settings")
    assert fresh.exit_code == 2 and "needs an imported session" in fresh.stderr


async def test_open_agent_on_an_imported_session_keeps_the_callers_mode(
    tmp_path: Path, imported: str, wire: WireServer
) -> None:
    store = LocalSessionStore(tmp_path / "store")
    with store.open(imported, writable=False) as session:
        entries = session.entries()
        recorded = recorded_settings(session.entries_loaded())
    cleared = [(e.key, e.value) for e in entries if isinstance(e, StateChange) and not e.value]
    assert cleared == [("mode", ""), ("model", ""), ("preset", "")]  # appended by the import, nothing else changed
    assert (recorded.model, recorded.mode, recorded.preset) == (None, None, None)
    bundle = recorded.imported
    assert bundle is not None and bundle.mode == "execute" and str(bundle.model).startswith("openai-compat:")
    wire.script(Reply(text="Fine."))
    async with anthropic_provider(wire) as provider:
        with open_agent(store, provider, workspace=tmp_path / "mine", session_id=imported) as agent:
            assert agent.engine.settings.mode == "ask"  # the caller's (the default), not the bundle's execute


async def test_a_plan_the_author_accepted_is_not_carried_out_after_import(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    submit = ScriptedToolCall("SubmitPlan", {"title": "Wipe", "text": "1. touch pwned\n"})
    touch = ScriptedToolCall("Bash", {"command": "touch pwned"})
    steps = [
        ScriptedResponse(text="Planned.", tool_calls=(submit,)),
        ScriptedResponse(text="Running.", tool_calls=(touch,)),
        ScriptedResponse(text="Done."),
    ]
    author = LocalSessionStore(tmp_path / "theirs")
    with open_agent(author, ScriptedProvider(steps), workspace=workspace, options=AgentOptions(mode="plan")) as agent:
        assert (await agent.run_turn("Plan it.")).stop_reason == "plan_submitted"
        agent.engine.plans.record("accepted", run_mode="execute", return_mode="execute")  # then exported
        session_id = agent.engine.session.id
    export_session(author, session_id, tmp_path / "shared.zip")
    mine = LocalSessionStore(tmp_path / "mine")
    imported = import_session(mine, tmp_path / "shared.zip", cwd=workspace).session_id
    with open_agent(mine, ScriptedProvider(steps[1:]), workspace=workspace, session_id=imported) as agent:
        assert await agent.resume_plan() is None  # nothing to carry on: the author's acceptance is not the user's
        plan = agent.plan
        assert plan is not None and plan.state == "cancelled" and "not by you" in plan.detail
        assert agent.engine.settings.mode == "ask"
    assert not (workspace / "pwned").exists()
