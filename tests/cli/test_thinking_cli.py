"""The model's reasoning from the command line: `lamina run --stream-json` thinking events, text mode's folded line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore

runner = CliRunner()
THOUGHT = "The README is the only file; read it before answering."


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    steps: list[dict[str, Any]] = [
        {"reasoning": THOUGHT, "text": "Looking.", "tool_calls": [{"name": "Glob", "input": {"pattern": "*.md"}}]},
        {"reasoning": [{"kind": "redacted_thinking", "data": "opaque"}], "text": "One file."},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": steps}))
    return path


def _run(tmp_path: Path, script: Path, *args: str) -> list[str]:
    store = ["--store", str(tmp_path / "store")]
    result = runner.invoke(app, [*store, "run", "What is here?", "--model", f"scripted:{script}", *args])
    assert result.exit_code == 0, result.output
    return [result.stdout, result.stderr]


def test_stream_json_streams_thinking_deltas_then_each_calls_thinking_whole(tmp_path: Path, script: Path) -> None:
    stdout, _ = _run(tmp_path, script, "--stream-json", "--mode", "explore")
    events = [json.loads(line) for line in stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds.index("thinking_delta") < kinds.index("text") < kinds.index("thinking") < kinds.index("model_call")
    assert "".join(e["text"] for e in events if e["type"] == "thinking_delta") == THOUGHT
    first, second = (e for e in events if e["type"] == "thinking")
    assert first["index"] == 0 and first["text"] == THOUGHT and first["tokens"] > 0
    assert first["blocks"] == [{"provider": "anthropic", "kind": "thinking", "text": THOUGHT}]
    assert "signature" not in json.dumps(first)  # signed and opaque content stays in the log
    assert second["text"] == "" and second["blocks"] == [
        {"provider": "anthropic", "kind": "redacted_thinking", "text": ""}
    ]
    calls = [e for e in events if e["type"] == "model_call"]
    assert calls[0]["usage"]["reasoning"] == first["tokens"]
    assert events[-1]["type"] == "result" and events[-1]["usage"]["reasoning"] == first["tokens"] + second["tokens"]


def test_text_mode_folds_thinking_into_one_line_on_stderr(tmp_path: Path, script: Path) -> None:
    stdout, stderr = _run(tmp_path, script, "--mode", "explore")
    assert stdout == "One file.\n"
    assert THOUGHT not in stdout + stderr
    assert "∴ Thinking · 10 words" in stderr and "∴ Thinking (redacted by the provider)" in stderr
    assert "ctrl+o" not in stderr  # nobody can press a key


def test_the_budget_and_the_sessions_composition_count_reasoning_in_a_row_of_its_own(
    tmp_path: Path, script: Path
) -> None:
    _run(tmp_path, script, "--mode", "explore")
    store = ["--store", str(tmp_path / "store")]
    (row,) = LocalSessionStore(tmp_path / "store").list()
    budget = runner.invoke(app, [*store, "sessions", "budget", row.id])
    assert budget.exit_code == 0, budget.output
    shown = [line.split() for line in budget.stdout.splitlines() if "of which reasoning" in line]
    assert len(shown) == 1 and int(shown[0][3].replace(",", "")) > 0
    document = json.loads(runner.invoke(app, [*store, "sessions", "budget", row.id, "--json"]).stdout)
    tiers = {t["name"]: t for t in document["tiers"]}
    assert tiers["history"]["reasoning_tokens"] == int(shown[0][3].replace(",", "")) <= tiers["history"]["tokens"]
    assert "reasoning" in tiers["history"]["items"]
    composition = runner.invoke(app, [*store, "context", "--session", row.id, "--json"])
    assert composition.exit_code == 0, composition.output
    document = json.loads(composition.stdout)
    assert document["by_kind"]["reasoning"] > 0  # the second request replays the first call's thinking
    assert [r["reasoning"] > 0 for r in document["per_request"]] == [False, True]
    text = runner.invoke(app, [*store, "context", "--session", row.id]).stdout
    assert any(line.split()[:1] == ["reasoning"] for line in text.splitlines())
