"""A scripted session resumed in a new command goes on with its script from the step it reached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore

runner = CliRunner()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return root


def _run(tmp_path: Path, *args: str) -> str:
    result = runner.invoke(app, ["--store", str(tmp_path / "store"), "run", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout.strip()


def test_a_resumed_scripted_session_continues_its_script(tmp_path: Path, workspace: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "One."}, {"text": "Two."}, {"text": "Three."}]}))
    assert _run(tmp_path, "first", "--model", f"scripted:{script}") == "One."
    (row,) = LocalSessionStore(tmp_path / "store").list()
    assert _run(tmp_path, "second", "--resume", row.id) == "Two."  # the session's own script, step 2
    assert _run(tmp_path, "third", "--resume", row.id, "--model", f"scripted:{script}") == "Three."


def test_a_session_resumed_on_another_script_starts_that_script(tmp_path: Path, workspace: Path) -> None:
    first, other = tmp_path / "first.json", tmp_path / "other.json"
    first.write_text(json.dumps({"responses": [{"text": "One."}, {"text": "Two."}]}))
    other.write_text(json.dumps({"responses": [{"text": "Other one."}]}))
    assert _run(tmp_path, "first", "--model", f"scripted:{first}") == "One."
    (row,) = LocalSessionStore(tmp_path / "store").list()
    assert _run(tmp_path, "second", "--resume", row.id, "--model", f"scripted:{other}") == "Other one."
