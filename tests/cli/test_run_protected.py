"""`lamina run` end to end: allow rules cover no hidden command, and protected paths are never written unasked.

The rules are in the user's config (the workspace's own may not raise permissions); nobody can
answer a question in a run, so what would need the user's approval is refused.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from tests.cli.test_permissions import SMUGGLED, WRITES
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = pytest.mark.slow
runner = CliRunner()
MODEL = "anthropic:claude-sonnet-5"
FSMONITOR = "[core]\n\tfsmonitor = touch C\n"


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "notes.txt").write_text("notes\n")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _user_rules(tmp_path: Path, allow: list[str]) -> None:
    path = tmp_path / "config" / "lamina" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[permissions]\nallow = {json.dumps(allow)}\n")


def _run(tmp_path: Path, *args: str) -> Result:
    return runner.invoke(app, ["--store", str(tmp_path / "store"), "run", *args, "--model", MODEL])


def test_a_prefix_rule_runs_none_of_the_commands_hidden_behind_it(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    _user_rules(tmp_path, ["Bash(git status:*)"])
    commands = ["git status --short", *SMUGGLED, *WRITES]
    calls = [ToolUse("Bash", {"command": command}, id=f"call_{n}") for n, command in enumerate(commands)]
    wire.script(Reply(text="Checking.", tool_calls=calls), Reply(text="Done."))
    result = _run(tmp_path, "check the tree", "--mode", "ask", "--json")
    assert result.exit_code == 0, result.output
    sent = wire.tool_results()
    assert "exit code 0" in sent["call_0"]  # the plain command ran, allowed by the rule
    for n in range(1, len(commands)):
        assert "no one can approve calls in this session" in sent[f"call_{n}"], commands[n]
    # no C, no `1`, `2` or `&1` (an empty .lamina/ is the sandbox's, made before a command runs)
    assert sorted(p.name for p in ws.iterdir() if not (p.name == ".lamina" and not any(p.iterdir()))) == [
        ".git",
        "notes.txt",
    ]
    assert [a["call_id"] for a in json.loads(result.stdout)["allowed"]] == ["call_0"]


@pytest.mark.parametrize("mode", ["ask", "execute"])
def test_edit_cannot_plant_a_command_that_an_allowed_git_status_then_runs(
    tmp_path: Path, ws: Path, wire: WireServer, mode: str
) -> None:
    _user_rules(tmp_path, ["Edit", "Write", "Bash(git status:*)"])
    config = (ws / ".git" / "config").read_text()
    calls = [
        ToolUse("Read", {"path": ".git/config"}, id="call_read"),
        ToolUse("Edit", {"path": ".git/config", "old_string": "[core]\n", "new_string": FSMONITOR}, id="call_edit"),
        ToolUse("Write", {"path": ".lamina/config.toml", "content": 'mode = "execute"\n'}, id="call_lamina"),
        ToolUse("Bash", {"command": "git config core.fsmonitor 'touch C'"}, id="call_git_config"),
        ToolUse("Bash", {"command": f"printf '{FSMONITOR}' >> .git/config"}, id="call_append"),
        ToolUse("Bash", {"command": "git status"}, id="call_status"),
    ]
    wire.script(Reply(text="Setting up.", tool_calls=calls), Reply(text="Done."))
    result = _run(tmp_path, "speed up git status", "--mode", mode)
    assert result.exit_code == 0, result.output
    sent = wire.tool_results()
    for call_id in ("call_edit", "call_lamina", "call_git_config", "call_append"):
        assert "a protected path" in sent[call_id] and "no one can approve" in sent[call_id], call_id
    assert ".git/config" in sent["call_edit"] and ".lamina/config.toml" in sent["call_lamina"]
    assert (ws / ".git" / "config").read_text() == config
    lamina = ws / ".lamina"
    assert not lamina.exists() or list(lamina.iterdir()) == []  # at most the sandbox's empty folder
    assert "exit code 0" in sent["call_status"] and not (ws / "C").exists()
