"""`lamina chat`: an accepted plan runs in the mode the user chose, then the mode before it; the prompt shows it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore, StateChange

runner = CliRunner()
PLAN = "1. Write fixed.txt.\n"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return root


def _chat(tmp_path: Path, text: str) -> tuple[int, str]:
    script = tmp_path / "script.json"
    responses = [
        {"text": "Here is my plan.", "tool_calls": [{"name": "SubmitPlan", "input": {"title": "Fix", "text": PLAN}}]},
        {"text": "Fixing.", "tool_calls": [{"name": "Write", "input": {"path": "fixed.txt", "content": "ok\n"}}]},
        {"text": "Fixed."},
        {"text": "Touching.", "tool_calls": [{"name": "Bash", "input": {"command": "touch later"}}]},
        {"text": "Done."},
    ]
    script.write_text(json.dumps({"responses": responses}))
    args = ["--store", str(tmp_path / "store"), "chat", "--model", f"scripted:{script}", "--mode", "ask"]
    result = runner.invoke(app, args, input=text)
    return result.exit_code, result.stderr


def _modes(tmp_path: Path) -> list[str]:
    store = LocalSessionStore(tmp_path / "store")
    with store.open(store.list()[0].id, writable=False) as session:
        return [e.value for e in session.entries() if isinstance(e, StateChange) and e.key == "mode"]


def test_a_plan_accepted_to_execute_runs_unasked_and_later_requests_are_asked_again(
    tmp_path: Path, workspace: Path
) -> None:
    # a: accept; e: execute it without asking; then an unrelated request, whose Bash call is declined (n)
    code, stderr = _chat(tmp_path, "/mode plan\nPlan the fix.\na\ne\nNow something else.\nn\n/quit\n")
    assert code == 0, stderr
    assert (workspace / "fixed.txt").exists()  # the plan ran without a question
    assert not (workspace / "later").exists()  # the later touch was asked about, and declined
    assert "run it: [a]sk before each change · [e]xecute without asking" in stderr
    assert "the plan ran in execute mode; mode ask again" in stderr
    assert stderr.count("Allow Bash?") == 1 and "Allow Write?" not in stderr
    assert _modes(tmp_path) == ["ask", "plan", "execute", "ask"]
    prompts = re.findall(r"^(explore|plan|ask|execute) > ", stderr, re.MULTILINE)
    assert prompts == ["ask", "plan", "ask", "ask"]  # each prompt shows the mode


def test_a_plan_accepted_to_ask_asks_before_each_change(tmp_path: Path, workspace: Path) -> None:
    code, stderr = _chat(tmp_path, "/mode plan\nPlan the fix.\na\na\ny\n/quit\n")
    assert code == 0, stderr
    assert "Allow Write?" in stderr and (workspace / "fixed.txt").exists()  # approved with y
    assert "the plan ran in ask mode; mode ask again" in stderr
    assert _modes(tmp_path) == ["ask", "plan", "ask"]
