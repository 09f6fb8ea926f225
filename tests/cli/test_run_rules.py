"""`lamina run` through the wire server: the config's allow and deny rules in ask mode, and Bash's streamed output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from lamina.workspace import trust_workspace
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()
MODEL = "anthropic:claude-sonnet-5"


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "x").write_text("keep me\n")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _rules(ws: Path, allow: list[str], deny: list[str] = []) -> Path:  # noqa: B006  # read, never changed
    path = ws / ".lamina" / "config.toml"
    path.parent.mkdir()
    path.write_text(f"[permissions]\nallow = {json.dumps(allow)}\ndeny = {json.dumps(deny)}\n")
    trust_workspace(ws)  # an untrusted workspace's allow rules do not apply (tests/cli/test_trust_cli.py)
    return path


def _run(tmp_path: Path, *args: str) -> Result:
    return runner.invoke(app, ["--store", str(tmp_path / "store"), "run", *args, "--model", MODEL])


def _two_calls(wire: WireServer, second: str) -> None:
    calls = [ToolUse("Bash", {"command": "echo hi"}, id="call_echo"), ToolUse("Bash", {"command": second}, id="call_2")]
    wire.script(Reply(text="Running.", tool_calls=calls), Reply(text="Done."))


@pytest.mark.slow
def test_an_allow_rule_runs_its_command_in_ask_mode_and_the_rest_is_refused(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    config = _rules(ws, ["Bash(echo:*)"])
    _two_calls(wire, "rm x")
    result = _run(tmp_path, "clean up", "--mode", "ask")
    assert result.exit_code == 0, result.output
    sent = wire.tool_results()
    assert "hi" in sent["call_echo"] and "approval" not in sent["call_echo"]
    assert "no one can approve calls in this session" in sent["call_2"]
    assert (ws / "x").read_text() == "keep me\n"
    assert f"Bash allowed by Bash(echo:*) ({config})" in result.stderr  # the line chat prints


@pytest.mark.slow
def test_json_and_stream_json_name_the_rule_that_allowed_a_call(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    config = _rules(ws, ["Bash(echo:*)"])
    _two_calls(wire, "rm x")
    data = json.loads(_run(tmp_path, "clean up", "--mode", "ask", "--json").stdout)
    allowed = [{"call_id": "call_echo", "name": "Bash", "rules": [{"rule": "Bash(echo:*)", "origin": str(config)}]}]
    assert data["allowed"] == allowed and data["text"] == "Done."
    _two_calls(wire, "rm x")
    streamed = _run(tmp_path, "clean up", "--mode", "ask", "--stream-json")
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert [e for e in events if e["type"] == "tool_allowed"] == [{"type": "tool_allowed", **allowed[0]}]
    assert events[-1]["type"] == "result" and events[-1]["allowed"] == allowed


@pytest.mark.slow
def test_a_deny_rule_wins_over_an_allow_rule(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    _rules(ws, ["Bash"], deny=["Bash(rm:*)"])
    _two_calls(wire, "rm x")
    data = json.loads(_run(tmp_path, "clean up", "--mode", "ask", "--json").stdout)
    sent = wire.tool_results()
    assert "hi" in sent["call_echo"] and "The deny rule Bash(rm:*)" in sent["call_2"]
    assert (ws / "x").read_text() == "keep me\n"
    assert [a["call_id"] for a in data["allowed"]] == ["call_echo"]


@pytest.mark.slow
def test_without_a_rule_ask_mode_refuses_every_call(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    _two_calls(wire, "rm x")
    data = json.loads(_run(tmp_path, "clean up", "--mode", "ask", "--json").stdout)
    sent = wire.tool_results()
    assert all("no one can approve calls in this session" in text for text in sent.values()) and len(sent) == 2
    assert data["allowed"] == []


@pytest.mark.slow
def test_stream_json_carries_bash_output_as_it_comes(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    command = "echo first; sleep 0.3; echo second"
    wire.script(Reply(text="", tool_calls=[ToolUse("Bash", {"command": command}, id="call_b")]), Reply(text="Ok."))
    result = _run(tmp_path, "two lines", "--mode", "execute", "--stream-json")
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    progress = [e for e in events if e["type"] == "tool_progress"]
    assert progress and all(e["call_id"] == "call_b" and e["name"] == "Bash" and e["output"] for e in progress)
    assert "".join(e["output"] for e in progress) == "first\nsecond\n"
    first, last = kinds.index("tool_progress"), len(kinds) - 1 - kinds[::-1].index("tool_progress")
    assert kinds.index("tool_started") < first and last < kinds.index("tool_finished")
