"""Ask mode in `lamina chat`: every tool's approval prompt, diffs, "always", and escaping of every field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore, ToolResult

runner = CliRunner()

MARKUP = "[/red] [/] xs[i] + xs[b] [skill:name] [bold]"
ESCAPES = "\x1b[2J\x1b]52;c;aGk=\x07\x9b31m"


def _script(tmp_path: Path, responses: list[dict[str, object]]) -> Path:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": responses}))
    return script


def test_ask_mode_prompts_for_edit_write_and_bash_with_diffs_and_always(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("def f(xs, i, b):\n    return xs[i] + xs[b]\n")
    script = _script(
        tmp_path,
        [
            {"text": "Editing.", "tool_calls": [{"name": "Read", "input": {"path": "app.py"}}]},
            {
                "text": "",
                "tool_calls": [
                    {
                        "name": "Edit",
                        "input": {"path": "app.py", "old_string": "xs[i] + xs[b]", "new_string": "xs[i] - xs[b]"},
                    }
                ],
            },
            {"text": "", "tool_calls": [{"name": "Write", "input": {"path": "a.md", "content": MARKUP + ESCAPES}}]},
            {"text": "", "tool_calls": [{"name": "Write", "input": {"path": "b.md", "content": "second"}}]},
            {"text": "", "tool_calls": [{"name": "Bash", "input": {"command": "echo " + MARKUP}}]},
            {"text": "Done: " + MARKUP + ESCAPES},
        ],
    )
    monkeypatch.chdir(workspace)
    store = tmp_path / "store"
    result = runner.invoke(
        app,
        ["--store", str(store), "chat", "--model", f"scripted:{script}", "--mode", "ask"],
        input="fix it\ny\na\nn\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert result.exception is None
    # the Edit was shown as a diff, brackets intact, then approved and applied
    assert "-    return xs[i] + xs[b]" in result.stderr
    assert "+    return xs[i] - xs[b]" in result.stderr
    assert (workspace / "app.py").read_text().endswith("xs[i] - xs[b]\n")
    # the Write's content shown verbatim (markup as text, escapes neutralised); "always" covers the second Write
    assert "+" + MARKUP + "␛[2J␛]52;c;aGk=␇<U+009B>31m" in result.stderr
    assert result.stderr.count("Allow Write?") == 1
    assert "Write is allowed for the rest of this session" in result.stderr
    assert (workspace / "b.md").read_text() == "second"
    # the Bash call was declined: it never ran, and the model was told
    assert "declined Bash" in result.stderr
    with LocalSessionStore(store).open(LocalSessionStore(store).list()[0].id, writable=False) as session:
        bash = [e for e in session.entries() if isinstance(e, ToolResult) and e.name == "Bash"]
    assert bash and bash[0].is_error and "declined" in bash[0].content
    # the model's text reaches stdout exactly, escapes neutralised
    assert "Done: " + MARKUP + "␛[2J" in result.stdout
    for stream in (result.stdout, result.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream and "\x07" not in stream


def test_markup_and_escapes_in_every_field_of_sessions_list_and_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / (MARKUP.replace("/", "_") + ".txt")).write_text(MARKUP + ESCAPES)
    script = _script(
        tmp_path,
        [
            {"text": MARKUP, "tool_calls": [{"name": "Glob", "input": {"pattern": "*" + ESCAPES}}]},
            {"text": "", "tool_calls": [{"name": "Grep", "input": {"pattern": "xs"}}]},
            {"text": MARKUP + ESCAPES},
        ],
    )
    monkeypatch.chdir(workspace)
    store = tmp_path / "store"
    chat = runner.invoke(
        app,
        ["--store", str(store), "chat", "--model", f"scripted:{script}", "--mode", "explore"],
        input=MARKUP + ESCAPES + "\n/quit\n",
    )
    assert chat.exit_code == 0, chat.output
    assert chat.exception is None
    listed = runner.invoke(app, ["--store", str(store), "sessions", "list"])
    assert listed.exit_code == 0, listed.output
    assert "[/red] [/] xs[i] + xs[b] [skill:name] [bold]␛[2J" in " ".join(listed.stdout.split())  # wrapped cell
    session_id = LocalSessionStore(store).list()[0].id
    shown = runner.invoke(app, ["--store", str(store), "sessions", "show", session_id])
    assert shown.exit_code == 0, shown.output
    assert "user: " + MARKUP + "␛[2J" in shown.stdout
    assert "assistant · scripted: " + MARKUP in shown.stdout  # the title names the model that answered
    for stream in (chat.stdout, chat.stderr, listed.stdout, shown.stdout):
        assert "\x1b" not in stream and "\x9b" not in stream and "\x07" not in stream


def test_markup_and_escapes_in_a_context_file_print_as_text(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("# Rules\n- keep " + MARKUP + ESCAPES + "\n")
    result = runner.invoke(app, ["context", str(tmp_path), "--text"])
    assert result.exit_code == 0, result.output
    assert "- keep [/red] [/] xs[i] + xs[b] [skill:name] [bold]" in result.stdout
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout and "\x07" not in result.stdout
