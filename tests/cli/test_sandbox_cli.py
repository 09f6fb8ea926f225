"""The `[sandbox]` table of the config files, and the sandbox notice on the command line.

The sandbox is missing in the run tests because PATH holds no bubblewrap; the config's table
reaches the tool, and a workspace's file can only tighten it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.cli._config import load_settings
from lamina.tools import BashTool, SandboxSettings
from lamina.workspace import WorkspaceTrust

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell")


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


@pytest.mark.slow
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
    assert [e["content"] for e in events if e["type"] == "tool_finished"] == [
        "one\n[exit code 0]",
        "two\n[exit code 0]",
    ]
    text = CliRunner().invoke(app, args)
    assert text.stderr.count("without its sandbox") == 1


def test_the_config_files_sandbox_table_and_what_a_workspace_may_not_loosen(tmp_path: Path, ws: Path) -> None:
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[sandbox]\nnetwork = true\nwritable = ["~/.cache", "/srv/data"]\n')
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text('[sandbox]\nenabled = false\nnetwork = false\nwritable = ["/"]\n')
    settings = load_settings(ws, trust=WorkspaceTrust.TRUSTED)  # even a trusted workspace only tightens it
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


@pytest.mark.slow
def test_a_workspace_that_asks_to_loosen_the_sandbox_is_told_at_start(
    tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("[sandbox]\nenabled = false\n")
    model = _scripted(tmp_path)
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "store"), "run", "go", "--model", model, "--json"])
    assert "enabled = false under [sandbox]: ignored" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    (problem := BashTool().sandbox_notice()) is not None, reason=f"no sandbox on this machine: {problem}"
)
def test_lamina_run_confines_bash_and_the_users_file_can_turn_it_off(tmp_path: Path, ws: Path) -> None:
    (ws / ".lamina").mkdir()
    config = ws / ".lamina" / "config.toml"
    config.write_text('mode = "ask"\n')
    (ws / "edit.sh").write_text("echo 'mode = 1' >> .lamina/config.toml\n")  # a script: past the shell reader
    calls = [
        {"text": "Editing.", "tool_calls": [{"name": "Bash", "input": {"command": "bash edit.sh"}}]},
        {"text": "Done."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": calls}))
    args = ["--store", str(tmp_path / "store"), "run", "go", "--model", f"scripted:{script}", "--mode", "execute"]
    confined = CliRunner().invoke(app, [*args, "--stream-json"])
    finished = [json.loads(line) for line in confined.stdout.splitlines() if '"tool_finished"' in line]
    assert "Read-only file system" in finished[0]["content"]
    assert config.read_text() == 'mode = "ask"\n'
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[sandbox]\nenabled = false\n")
    unconfined = CliRunner().invoke(app, args)
    assert unconfined.exit_code == 0, unconfined.output
    assert config.read_text() == 'mode = "ask"\nmode = 1\n'
