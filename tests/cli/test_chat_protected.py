"""Chat asks about every write to a protected path, in every mode; no rule and no "always" answers for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lamina.cli import app
from lamina.session import LocalSessionStore, ToolResult

runner = CliRunner()


def _chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[dict[str, Any]], answers: str, *, mode: str
) -> tuple[Result, list[ToolResult]]:
    workspace = tmp_path / "ws"
    (workspace / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(workspace)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    user = tmp_path / "config" / "lamina" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[permissions]\nallow = ["Write", "Bash"]\n')
    script = tmp_path / "script.json"
    responses = [{"text": "", "tool_calls": [call]} for call in calls]
    script.write_text(json.dumps({"responses": [*responses, {"text": "Done."}]}))
    store = tmp_path / "store"
    result = runner.invoke(
        app, ["--store", str(store), "chat", "--model", f"scripted:{script}", "--mode", mode], input=answers
    )
    assert result.exit_code == 0, result.output
    sessions = LocalSessionStore(store)
    with sessions.open(sessions.list()[0].id, writable=False) as session:
        return result, [e for e in session.entries() if isinstance(e, ToolResult)]


@pytest.mark.parametrize("mode", ["ask", "execute"])
def test_a_write_to_a_protected_path_is_asked_about_once_and_always_is_not_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    hook = {"name": "Bash", "input": {"command": "printf 'touch C' > .git/hooks/pre-commit"}}
    plain = {"name": "Bash", "input": {"command": "echo ok > notes.txt"}}
    settings = {"name": "Write", "input": {"path": ".lamina/config.toml", "content": 'mode = "execute"\n'}}
    result, results = _chat(tmp_path, monkeypatch, [hook, plain, settings], "go\na\nn\ny\n/quit\n", mode=mode)
    assert [r.is_error for r in results] == [True, False, False]
    assert not (tmp_path / "ws" / ".git" / "hooks" / "pre-commit").exists()  # `a` is not an answer here; `n` is
    assert (tmp_path / "ws" / "notes.txt").read_text() == "ok\n"  # an allow rule ran it unasked
    assert (tmp_path / "ws" / ".lamina" / "config.toml").read_text() == 'mode = "execute"\n'  # `y`, asked
    assert "writes .git/hooks/pre-commit: a protected path" in result.stderr
    assert "writes .lamina/config.toml: a protected path" in result.stderr
    assert "always" not in result.stderr.split("writes .git/hooks/pre-commit")[1].split("declined")[0]
