"""The output cap (`max_output_tokens`, `--max-output-tokens`): sent by every provider chat and run open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from tests.support.wire_env import use_wire
from tests.wire.script import Reply
from tests.wire.server import Api, WireServer

runner = CliRunner()
ANTHROPIC = "anthropic:claude-sonnet-5"


@pytest.fixture
def ws(tmp_path: Path, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    use_wire(monkeypatch, wire, tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    return workspace


def _compat(wire: WireServer) -> str:
    return f"openai-compat:{wire.openai_url}#smollm2"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _user_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "lamina" / "config.toml"


def _run(tmp_path: Path, *args: str) -> Result:
    return runner.invoke(app, ["--store", str(tmp_path / "store"), "run", "hi", *args])


def _last(wire: WireServer, api: Api) -> Any:
    return wire.bodies(api)[-1]


@pytest.mark.parametrize(
    ("spec", "api", "field"),
    [
        (ANTHROPIC, "anthropic", "max_tokens"),
        ("openai:gpt-5.4", "chat", "max_completion_tokens"),
        ("openai-responses:gpt-5.4", "responses", "max_output_tokens"),
        ("compat", "chat", "max_tokens"),
    ],
)
def test_the_flag_reaches_the_wire_of_every_provider(
    tmp_path: Path, ws: Path, wire: WireServer, spec: str, api: Api, field: str
) -> None:
    wire.script(Reply(text="Short."))
    model = _compat(wire) if spec == "compat" else spec
    result = _run(tmp_path, "--model", model, "--max-output-tokens", "1234")
    assert result.exit_code == 0, result.output
    assert _last(wire, api)[field] == 1234


def test_without_a_setting_each_provider_keeps_its_own_cap(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    assert _run(tmp_path, "--model", ANTHROPIC).exit_code == 0
    assert _last(wire, "anthropic")["max_tokens"] == 8192
    assert _run(tmp_path, "--model", "openai:gpt-5.4").exit_code == 0
    assert "max_completion_tokens" not in _last(wire, "chat")  # the model's own limit
    assert _run(tmp_path, "--model", _compat(wire)).exit_code == 0
    assert 256 <= _last(wire, "chat")["max_tokens"] <= 8192  # a quarter of the window, within the table's limit


def test_the_flag_wins_over_the_workspace_file_which_wins_over_the_users(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(*[Reply(text="Ok.") for _ in range(4)])
    model = _compat(wire)
    user = _write(_user_file(tmp_path), "max_output_tokens = 1000\n")
    assert _run(tmp_path, "--model", model).exit_code == 0
    assert _last(wire, "chat")["max_tokens"] == 1000
    workspace = _write(ws / ".lamina" / "config.toml", "max_output_tokens = 2000\n")  # applies untrusted too
    assert _run(tmp_path, "--model", model).exit_code == 0
    assert _last(wire, "chat")["max_tokens"] == 2000
    shown = json.loads(runner.invoke(app, ["config", "show", "--json"]).stdout)["settings"]["max_output_tokens"]
    assert shown == {"value": 2000, "from": str(workspace)}
    assert _run(tmp_path, "--model", model, "--max-output-tokens", "3000").exit_code == 0
    assert _last(wire, "chat")["max_tokens"] == 3000
    workspace.unlink()
    shown = json.loads(runner.invoke(app, ["config", "show", "--json"]).stdout)["settings"]["max_output_tokens"]
    assert shown == {"value": 1000, "from": str(user)}
    user.unlink()
    shown = json.loads(runner.invoke(app, ["config", "show", "--json"]).stdout)["settings"]["max_output_tokens"]
    assert shown == {"value": None, "from": "default"}
    table = runner.invoke(app, ["config", "show"]).stdout
    assert any(line.split()[:2] == ["max_output_tokens", "(provider"] for line in table.splitlines())


def test_model_in_chat_opens_the_next_provider_with_the_cap(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="From Claude."), Reply(text="From the local server."))
    typed = f"first\n/model {_compat(wire)}\nsecond\n/quit\n"
    args = ["--store", str(tmp_path / "store"), "chat", "--model", ANTHROPIC, "--max-output-tokens", "777"]
    result = runner.invoke(app, args, input=typed)
    assert result.exit_code == 0, result.output
    assert _last(wire, "anthropic")["max_tokens"] == 777
    assert _last(wire, "chat")["max_tokens"] == 777


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ("0", "must be an integer >= 1"),
        ("-5", "must be an integer >= 1"),
        ('"lots"', "must be an integer, not a string"),
        ("true", "must be an integer, not true or false"),
        ("1.5", "must be an integer, not a number"),
    ],
)
def test_a_bad_value_in_a_file_names_the_file_the_key_and_what_it_may_be(
    tmp_path: Path, ws: Path, wire: WireServer, written: str, problem: str
) -> None:
    path = _write(ws / ".lamina" / "config.toml", f"max_output_tokens = {written}\n")
    result = _run(tmp_path, "--model", _compat(wire))
    assert result.exit_code != 0
    assert f"{path}: max_output_tokens: {problem}" in " ".join(result.output.split())
    shown = runner.invoke(app, ["config", "show"])
    assert shown.exit_code != 0 and f"{path}: max_output_tokens: {problem}" in " ".join(shown.stderr.split())
    assert wire.requests == []


@pytest.mark.parametrize("given", ["0", "-1", "many"])
def test_a_bad_flag_is_refused_before_anything_runs(tmp_path: Path, ws: Path, wire: WireServer, given: str) -> None:
    result = _run(tmp_path, "--model", _compat(wire), "--max-output-tokens", given)
    assert result.exit_code == 2 and "--max-output-tokens" in result.stderr
    assert wire.requests == []


def test_a_thinking_budget_not_below_the_cap_is_one_clear_error(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    result = _run(tmp_path, "--model", ANTHROPIC, "--max-output-tokens", "2000", "--thinking", "4096", "--json")
    assert result.exit_code != 0
    assert "budget_tokens (4096) must be below max_tokens (2000)" in json.loads(result.stdout)["error"]["message"]
    assert wire.requests == []
