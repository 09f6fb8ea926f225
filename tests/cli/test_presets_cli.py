"""Presets everywhere: `--custom-preset` on `chat` and `run`, the config file, and the headless platform section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore, PlanState
from lamina.workspace import trust_workspace
from tests.wire.fixtures import API_KEY
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

runner = CliRunner()
MODEL = "anthropic:claude-sonnet-5"
PRESET = 'base = "mini"\n[text]\nhouse_rules = "Answer in British English."\n'
HEADLESS = "Headless: no one can answer questions"
MINI_TOOLS = ["Read", "Edit", "Write", "Glob", "Grep", "Bash", "SubmitPlan"]
"""What the mini preset offers in every mode, SubmitPlan included, as the default preset does."""


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", wire.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return workspace


def _system(wire: WireServer, index: int = 0) -> str:
    system = wire.requests[index].body["system"]
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


def _tool_names(wire: WireServer, index: int = 0) -> list[str]:
    return [tool["name"] for tool in wire.requests[index].body.get("tools", [])]


def _invoke(tmp_path: Path, *args: str, stdin: str | None = None) -> object:
    return runner.invoke(app, ["--store", str(tmp_path / "store"), *args, "--model", MODEL], input=stdin)


def test_run_with_a_custom_preset_file_sends_its_sections_headless(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    preset = tmp_path / "preset.toml"
    preset.write_text(PRESET)
    wire.script(Reply(text="Done."))
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "run", "hi", "--model", MODEL, "--custom-preset", str(preset)]
    )
    assert result.exit_code == 0, result.output
    system = _system(wire)
    assert "Answer in British English." in system
    assert "You are a coding agent on a small, focused task" in system  # the mini base
    assert HEADLESS in system  # `lamina run` has no one to answer
    assert _tool_names(wire) == MINI_TOOLS  # in execute mode too: the tools stay the same in every mode


def test_the_mini_preset_offers_submit_plan_and_completes_a_plan_flow_in_plan_mode(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    (ws / "app.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    plan = "1. Remove the + 1 in app.py.\n2. Run the tests.\n"
    wire.script(
        Reply(text="Here is my plan.", tool_calls=[ToolUse("SubmitPlan", {"title": "Fix", "text": plan})]),
        Reply(text="Fixed as planned."),
    )
    args = ["run", "Plan the fix.", "--model", MODEL, "--mode", "plan", "--preset", "mini", "--accept-plan", "--json"]
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), *args])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["text"] == "Fixed as planned." and data["stop_reason"] == "end_turn"
    assert "You are a coding agent on a small, focused task" in _system(wire)  # the mini prompt
    assert "submit it with SubmitPlan" in _system(wire)
    assert [_tool_names(wire, i) for i in range(len(wire.requests))] == [MINI_TOOLS] * len(wire.requests)
    store = LocalSessionStore(tmp_path / "store")
    with store.open(store.list()[0].id, writable=False) as session:
        assert [e.state for e in session.entries() if isinstance(e, PlanState)][:2] == ["submitted", "accepted"]


def test_chat_with_preset_custom_and_its_file(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    preset = tmp_path / "preset.toml"
    preset.write_text('tools = ["Read", "Grep"]\n[text]\nhouse_rules = "Answer in haiku."\n')
    wire.script(Reply(text="Done."))
    store = ["--store", str(tmp_path / "store")]
    args = ["chat", "--model", MODEL, "--preset", "custom", "--custom-preset", str(preset)]
    result = runner.invoke(app, [*store, *args], input="hi\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "Answer in haiku." in _system(wire)
    assert _tool_names(wire) == ["Read", "Grep"]
    assert HEADLESS in _system(wire)  # no terminal: the headless platform section


@pytest.mark.slow
def test_the_config_file_names_a_custom_preset_and_the_command_line_wins(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "preset.toml").write_text(PRESET)
    (ws / ".lamina" / "config.toml").write_text('preset = "custom"\npreset_file = "preset.toml"\n')
    trust_workspace(ws)  # an untrusted workspace's preset stays out of the system role (tests/cli/test_trust_cli.py)
    wire.script(Reply(text="One."), Reply(text="Two."))
    store = ["--store", str(tmp_path / "store")]
    first = runner.invoke(app, [*store, "run", "hi", "--model", MODEL])
    second = runner.invoke(app, [*store, "run", "hi", "--model", MODEL, "--preset", "default"])
    assert first.exit_code == 0 and second.exit_code == 0, second.output
    assert "Answer in British English." in _system(wire, 0)
    assert "Answer in British English." not in _system(wire, 1)
    assert "You are a coding agent in the user's project" in _system(wire, 1)  # the default preset


def test_a_bad_custom_preset_is_one_clear_error_and_no_session(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    preset = tmp_path / "preset.toml"
    preset.write_text('sections = ["tools", "nope"]\n')
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "run", "hi", "--model", MODEL, "--custom-preset", str(preset)]
    )
    assert result.exit_code == 2  # a usage error
    assert f"error: custom preset {preset}: sections[1]: unknown section 'nope'" in result.stderr
    assert not wire.requests
    assert LocalSessionStore(tmp_path / "store").list() == []


def test_another_preset_with_a_custom_file_on_the_command_line_is_refused(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    preset = tmp_path / "preset.toml"
    preset.write_text(PRESET)
    args = ["run", "hi", "--model", MODEL, "--preset", "mini", "--custom-preset", str(preset)]
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), *args])
    assert result.exit_code == 2
    assert "the preset is 'mini', not 'custom'" in result.stderr
