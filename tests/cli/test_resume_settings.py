"""A resumed `lamina chat` or `lamina run` uses the session's model, mode and preset unless the command line says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._config import load_settings
from lamina.cli._session import SESSION_ORIGIN, resumed_settings
from lamina.engine import RecordedSettings
from lamina.session import LocalSessionStore, StateChange
from lamina.workspace import WorkspaceTrust
from tests.wire.script import Reply
from tests.wire.server import WireServer

runner = CliRunner()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # a resumed session must not need one
    return workspace


def test_the_session_gives_what_the_command_line_does_not(tmp_path: Path, ws: Path) -> None:
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text('model = "anthropic:claude-opus-5"\nmode = "execute"\n')
    recorded = RecordedSettings(model="scripted:s.json", mode="plan", preset="mini")
    from_files = resumed_settings(load_settings(ws, trust=WorkspaceTrust.TRUSTED), recorded)
    assert (from_files.model, from_files.mode, from_files.preset) == ("scripted:s.json", "plan", "mini")
    assert from_files.origin("model") == SESSION_ORIGIN and from_files.preset_file is None
    given = resumed_settings(
        load_settings(ws, trust=WorkspaceTrust.TRUSTED, model="openai:gpt-5", preset="default"), recorded
    )
    assert (given.model, given.mode, given.preset) == ("openai:gpt-5", "plan", "default")
    assert given.origin("model") == "command line"
    assert (
        resumed_settings(load_settings(ws, trust=WorkspaceTrust.TRUSTED), RecordedSettings()).model
        == "anthropic:claude-opus-5"
    )  # an older log


def test_a_scripted_chat_continues_with_its_model_and_no_api_key(tmp_path: Path, ws: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "Noted."}, {"text": "It was 42."}]}))
    store = ["--store", str(tmp_path / "store")]
    first = runner.invoke(
        app, [*store, "chat", "--model", f"scripted:{script}", "--mode", "explore"], input="remember 42\n/quit\n"
    )
    assert first.exit_code == 0, first.output
    # the second process reads the script afresh and goes on where the session stopped: its second step
    second = runner.invoke(app, [*store, "chat", "--continue"], input="which number?\n/quit\n")
    assert second.exit_code == 0, second.output
    assert "no API key" not in second.stderr
    assert f"(resumed) · scripted:{script} · mode explore" in second.stderr
    assert "> remember 42" in second.stderr and "Noted." in second.stderr  # the recap
    assert "It was 42." in second.stdout


@pytest.mark.slow
def test_run_continue_reuses_the_model_and_a_given_mode_is_recorded(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Noted."), Reply(text="42."))
    spec = f"openai-compat:{wire.openai_url}#local-model"
    store = ["--store", str(tmp_path / "store")]
    first = runner.invoke(app, [*store, "run", "remember 42", "--model", spec, "--json"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, [*store, "run", "which number?", "--continue", "--mode", "explore", "--json"])
    assert second.exit_code == 0, second.output
    data = json.loads(second.stdout)
    assert data["model"] == spec and data["session_id"] == json.loads(first.stdout)["session_id"]
    assert [r.path for r in wire.requests] == ["/v1/chat/completions"] * 2
    assert wire.requests[1].body["model"] == "local-model"
    with LocalSessionStore(tmp_path / "store").open(data["session_id"], writable=False) as session:
        changes = [(e.key, e.value) for e in session.entries() if isinstance(e, StateChange)]
    assert ("model", spec) in changes and changes.count(("model", spec)) == 1  # recorded once
    assert [v for k, v in changes if k == "mode"] == ["ask", "explore"]  # --mode on a resumed session switches it


def test_the_picker_lists_model_entries_and_workspace_and_asks_again(tmp_path: Path, ws: Path) -> None:
    script = ws / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "Noted."}, {"text": "Again."}]}))
    store = ["--store", str(tmp_path / "store")]
    first = runner.invoke(app, [*store, "chat", "--model", "scripted:script.json"], input="first session\n/quit\n")
    assert first.exit_code == 0, first.output
    (listed,) = LocalSessionStore(tmp_path / "store").list()
    picked = runner.invoke(app, [*store, "chat", "--resume", ""], input="7\nnope\n1\nmore\n/quit\n")
    assert picked.exit_code == 0, picked.output
    err = picked.stderr
    header = next(line for line in err.splitlines() if "last activity" in line)
    assert header.split() == ["#", "last", "activity", "entries", "model", "workspace", "first", "message"]
    row = err.splitlines()[err.splitlines().index(header) + 1]
    # at 80 columns a long model spec or path is cut at its end, with "…"
    number, _day, _time, entries, model, place, *title = row.split()
    assert (number, entries, title) == ("1", str(listed.entry_count), ["first", "session"])
    assert "scripted:script.json".startswith(model.rstrip("…")) and str(ws).startswith(place.rstrip("…"))
    assert err.count("not a number between 1 and 1 or a listed id") == 2  # asked again, twice
    assert "(resumed) · scripted:script.json" in err and "Again." in picked.stdout
