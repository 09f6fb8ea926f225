"""Approval answers read from a pipe (`lamina chat` with a scripted model): `e` with a reason, `a` on a prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore, ToolResult

runner = CliRunner()


def _chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commands: list[str], answers: str) -> list[ToolResult]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    script = tmp_path / "script.json"
    responses = [{"text": "", "tool_calls": [{"name": "Bash", "input": {"command": c}}]} for c in commands]
    script.write_text(json.dumps({"responses": [*responses, {"text": "Done."}]}))
    store = tmp_path / "store"
    result = runner.invoke(
        app, ["--store", str(store), "chat", "--model", f"scripted:{script}", "--mode", "ask"], input=answers
    )
    assert result.exit_code == 0, result.output
    sessions = LocalSessionStore(store)
    with sessions.open(sessions.list()[0].id, writable=False) as session:
        return [e for e in session.entries() if isinstance(e, ToolResult)]


def test_e_declines_with_the_users_words_for_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (result,) = _chat(tmp_path, monkeypatch, ["touch x"], "go\ne\nrun make clean instead\n/quit\n")
    assert result.is_error
    assert result.content == "The user declined this call and said: run make clean instead"
    assert not (tmp_path / "ws" / "x").exists()


def test_always_on_a_prefix_and_an_empty_line_is_no(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = _chat(tmp_path, monkeypatch, ["ls", "ls -a", "ls && touch y", "pwd"], "go\nalways\n\nn\n/quit\n")
    assert [r.is_error for r in results[:2]] == [False, False]  # `Bash(ls:*)` covered the second
    assert [r.is_error for r in results[2:]] == [True, True]  # `touch` is not covered; an empty line is no
    assert not (tmp_path / "ws" / "y").exists()
