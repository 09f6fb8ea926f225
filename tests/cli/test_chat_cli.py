"""`lamina chat` driven through its prompt with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamina.cli import app
from lamina.session import LocalSessionStore, StateChange, ToolResult, UserMessage

runner = CliRunner()


def test_chat_runs_tools_switches_mode_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"text": "Looking.", "tool_calls": [{"name": "Glob", "input": {"pattern": "*.md"}}]},
                    {"text": "There is one markdown file."},
                ]
            }
        )
    )
    monkeypatch.chdir(workspace)
    store = tmp_path / "store"
    first = runner.invoke(
        app,
        ["--store", str(store), "chat", "--model", f"scripted:{script}", "--mode", "explore"],
        input="What is here?\n/mode execute\n/mode nonsense\n/compact markdown\n/quit\n",
    )
    assert first.exit_code == 0, first.output
    assert "→ Glob" in first.stderr and "There is one markdown file." in first.stdout
    assert "unknown mode 'nonsense'" in first.stderr
    assert "nothing to compact: the conversation fits the kept budget" in first.stderr
    session_id = LocalSessionStore(store).list()[0].id
    with LocalSessionStore(store).open(session_id, writable=False) as session:
        entries = session.entries()
    assert [e.value for e in entries if isinstance(e, StateChange) and e.key == "mode"] == ["explore", "execute"]
    assert any(isinstance(e, ToolResult) and "README.md" in e.content for e in entries)

    # resume: the same session goes on from its leaf, in the mode it was left in, and its script from its third step
    steps = json.loads(script.read_text())["responses"]
    script.write_text(json.dumps({"responses": [*steps, {"text": "Still the one markdown file."}]}))
    second = runner.invoke(
        app,
        ["--store", str(store), "chat", "--model", f"scripted:{script}", "--resume", session_id],
        input="And now?\n/quit\n",
    )
    assert second.exit_code == 0, second.output
    assert f"session {session_id} (resumed)" in second.stderr and "mode execute" in second.stderr
    assert "Still the one markdown file." in second.stdout
    assert [s.id for s in LocalSessionStore(store).list()] == [session_id]
    with LocalSessionStore(store).open(session_id, writable=False) as session:
        resumed = session.entries()
        path = session.path()
    assert resumed[: len(entries)] == entries  # nothing before the resume changed
    asked = next(e for e in resumed[len(entries) :] if isinstance(e, UserMessage))
    assert asked.text == "And now?" and asked.parent_id == entries[-1].id  # it follows the old leaf
    texts = [e.text for e in path if isinstance(e, UserMessage)]
    assert texts == ["What is here?", "And now?"]  # the resumed turn's path holds the first one
    assert [e.value for e in resumed if isinstance(e, StateChange) and e.key == "mode"] == ["explore", "execute"]


def test_chat_rejects_an_unknown_model_spec(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--store", str(tmp_path), "chat", "--model", "nope:thing"], input="/quit\n")
    assert result.exit_code == 2  # a usage error
    assert "error:" in result.stderr and "nope:thing" in result.stderr


def test_chat_warns_about_an_unknown_skill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "No such skill."}]}))
    monkeypatch.chdir(workspace)
    result = runner.invoke(
        app,
        ["--store", str(tmp_path / "store"), "chat", "--model", f"scripted:{script}"],
        input="[skill:nope]\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert "warning: unknown skill [skill:nope]" in result.stderr


def test_chat_warns_about_a_skipped_project_manifest_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".lamina").mkdir(parents=True)
    manifest = workspace / ".lamina" / "project.toml"
    manifest.write_text("description = 3\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "Hello there."}]}))
    monkeypatch.chdir(workspace)
    result = runner.invoke(
        app, ["--store", str(tmp_path / "store"), "chat", "--model", f"scripted:{script}"], input="Hi\n/quit\n"
    )
    assert result.exit_code == 0, result.output
    assert (
        f"warning: project file {manifest.resolve()}: description: must be a string, not an integer"
        " (the file is skipped)" in result.stderr
    )
    assert "Hello there." in result.stdout


def test_chat_attach_sends_a_file_with_the_next_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("remember the milk\n")
    invite = tmp_path / "dragged in.ics"  # a file dragged onto the terminal: pasted as an escaped path
    invite.write_text("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n")
    pasted = str(invite).replace(" ", "\\ ")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "Milk."}]}))
    monkeypatch.chdir(workspace)
    store = tmp_path / "store"
    result = runner.invoke(
        app,
        ["--store", str(store), "chat", "--model", f"scripted:{script}"],
        input=f"/attach missing.png\n/attach notes.txt\nWhat should I remember? {pasted}\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert "no file missing.png" in result.stderr
    assert "attached to your next message: notes.txt" in result.stderr
    session_id = LocalSessionStore(store).list()[0].id
    with LocalSessionStore(store).open(session_id, writable=False) as session:
        (user,) = [e for e in session.entries() if isinstance(e, UserMessage)]
    assert user.text == "What should I remember? [attached: dragged in.ics]"
    assert [(a.name, a.media_type) for a in user.attachments] == [
        ("notes.txt", "text/plain"),
        ("dragged in.ics", "text/calendar"),
    ]


def test_context_shows_the_budget_of_the_next_request_without_writing_to_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# demo\n")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"text": "Looking.", "tool_calls": [{"name": "Glob", "input": {"pattern": "*.md"}}]},
                    {"text": "There is one markdown file."},
                ]
            }
        )
    )
    monkeypatch.chdir(workspace)
    store = tmp_path / "store"
    chat = ["--store", str(store), "chat", "--model", f"scripted:{script}", "--mode", "explore"]
    # a turn with a tool call, then a mode switch: its one-shot waits in the outbox for the next turn
    first = runner.invoke(app, chat, input="What is here?\n/mode execute\n/quit\n")
    assert first.exit_code == 0, first.output
    session_id = LocalSessionStore(store).list()[0].id
    log = next((store / session_id).glob("*.jsonl"))
    before = log.read_bytes()

    resumed = runner.invoke(app, [*chat[:-2], "--resume", session_id], input="/context\n/quit\n")

    assert resumed.exit_code == 0, resumed.output
    report = resumed.stderr
    assert "Budget by tier" in report
    tiers = {line.split()[0]: line for line in map(str.strip, report.splitlines()) if line[:1].isdigit()}
    assert sorted(tiers) == [str(n) for n in range(1, 9)], report
    assert "rules" in tiers["1"] and "tools" in tiers["2"] and "history, user message" in tiers["5"]  # sent order
    assert "tool results" in tiers["7"]
    assert "mode_transition" in tiers["8"]  # the pending one-shot counts, and stays pending
    assert any(line.strip().startswith("total") for line in report.splitlines())
    assert log.read_bytes() == before
    with LocalSessionStore(store).open(session_id, writable=False) as session:
        assert sum(isinstance(e, UserMessage) for e in session.entries()) == 1
