"""`lamina chat` in a pseudo-terminal through the wire server: approvals, pastes, Ctrl-C, --continue, escaping."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina.context import INTERRUPTED_RESULT
from lamina.session import AssistantMessage, LocalSessionStore, ToolCall, ToolResult, UserMessage
from tests.cli.pty_session import Chat, HoldingWire, paste, run_here
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

OSC52 = "\x1b]52;c;aGk=\x07"
"""A clipboard-writing escape sequence: must never reach the terminal."""
MARKUP = "[/red] [/] xs[i] + xs[b]"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("def f(xs, i, b):\n    return xs[i] + xs[b]\n")
    return workspace


@pytest.fixture
def holding() -> Iterator[HoldingWire]:
    with HoldingWire() as server:
        yield server


def _user_text(body: dict[str, Any]) -> str:
    """Every text the request sends in user-role messages (tool results included), joined."""
    texts: list[str] = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                texts.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                texts.append(inner if isinstance(inner, str) else " ".join(b.get("text", "") for b in inner or []))
    return "\n".join(texts)


def _only_session(tmp_path: Path) -> tuple[str, list[Any]]:
    store = LocalSessionStore(tmp_path / "store")
    (row,) = store.list()
    with store.open(row.id, writable=False) as session:
        return row.id, session.entries()


@pytest.mark.slow
def test_ask_mode_approves_edit_write_and_bash_with_always(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    edit = {"path": "app.py", "old_string": "xs[i] + xs[b]", "new_string": "xs[i] - xs[b]"}
    wire.script(
        Reply(text="Reading " + MARKUP, tool_calls=[ToolUse("Read", {"path": "app.py"})]),
        Reply(tool_calls=[ToolUse("Edit", edit)]),
        Reply(tool_calls=[ToolUse("Write", {"path": "a.md", "content": MARKUP + OSC52})]),
        Reply(tool_calls=[ToolUse("Write", {"path": "b.md", "content": "second"})]),
        Reply(tool_calls=[ToolUse("Bash", {"command": "touch ran.txt"})]),
        Reply(text="Done " + MARKUP + OSC52),
    )
    chat = Chat(tmp_path, wire, "--mode", "ask")
    chat.say("fix " + MARKUP)
    chat.expect("Allow Edit?")
    chat.send("y\r")
    chat.expect("Allow Write?")
    chat.send("a\r")
    chat.expect("Allow Bash?")
    chat.send("n\r")
    chat.expect("Done [/red] [/] xs[i] + xs[b]␛]52;c;aGk=␇")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    text = chat.output()
    assert "-    return xs[i] + xs[b]" in text and "+    return xs[i] - xs[b]" in text  # the Edit's diff
    assert "+[/red] [/] xs[i] + xs[b]␛]52;c;aGk=␇" in text  # the Write's diff, verbatim and defused
    assert "+++ b/a.md" in text and "+++ b/b.md" not in text  # "always": the second Write was not asked about
    assert "\x1b]52" not in text
    assert (ws / "app.py").read_text().endswith("xs[i] - xs[b]\n")
    assert (ws / "b.md").read_text() == "second"
    assert not (ws / "ran.txt").exists()
    session_id, entries = _only_session(tmp_path)
    assert f"resume with: lamina chat --resume {session_id} --model anthropic:claude-sonnet-5" in text
    bash = [e for e in entries if isinstance(e, ToolResult) and e.name == "Bash"]
    assert bash[0].is_error and "declined" in bash[0].content


@pytest.mark.slow
def test_a_multi_line_paste_is_one_message_and_is_not_cut(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Got all of it."), Reply(text="Two lines."))
    long_line = "y" * 6000
    lines = ["first line", "second line", "  indented third", long_line, "last line"]
    chat = Chat(tmp_path, wire)
    chat.prompt()
    chat.send(paste("\n".join(lines)))
    chat.send("\r")
    chat.expect("Got all of it.")
    chat.prompt()
    chat.send("typed one\x1b\rtyped two\r")  # Alt-Enter starts a new line; Enter sends
    chat.expect("Two lines.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert len(wire.requests) == 2
    assert "\n".join(lines) in _user_text(wire.requests[0].body)
    assert "typed one\ntyped two" in _user_text(wire.requests[1].body)
    history = (tmp_path / "state" / "lamina" / "chat_history").read_text()
    assert "+first line" in history and "+typed two" in history  # kept for the next session


@pytest.mark.slow
def test_ctrl_c_while_streaming_cancels_the_turn_and_the_session_goes_on(
    tmp_path: Path, ws: Path, holding: HoldingWire
) -> None:
    holding.script(Reply(text="First part of a long answer that never finishes"), Reply(text="Second answer."))
    holding.hold_next_stream()
    chat = Chat(tmp_path, holding)
    chat.say("tell me a story")
    chat.expect("First part")
    chat.send("\x03")
    chat.expect("interrupted")
    chat.say("and now?")
    chat.expect("Second answer.")
    chat.prompt()
    chat.send("\x03")
    chat.expect("Ctrl-C again or Ctrl-D to quit")
    chat.prompt()
    chat.send("\x03")
    assert chat.finish() == 0
    assert "The user interrupted the previous turn" in _user_text(holding.requests[1].body)
    _, entries = _only_session(tmp_path)
    assert [e.text for e in entries if isinstance(e, UserMessage)] == ["tell me a story", "and now?"]
    assert [e.text for e in entries if isinstance(e, AssistantMessage)] == ["Second answer."]


@pytest.mark.slow
def test_ctrl_c_during_a_tool_call_records_it_as_interrupted(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(
        Reply(text="Running it.", tool_calls=[ToolUse("Bash", {"command": "sleep 30"})]),
        Reply(text="Understood, it was interrupted."),
    )
    chat = Chat(tmp_path, wire, "--mode", "execute")
    chat.say("run the slow thing")
    chat.expect("→ Bash")
    chat.send("\x03")
    chat.expect("interrupted")
    chat.say("what happened?")
    chat.expect("Understood, it was interrupted.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    _, entries = _only_session(tmp_path)
    calls = [e for e in entries if isinstance(e, ToolCall)]
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert [c.call_id for c in calls] == [r.call_id for r in results]
    assert results[0].content == INTERRUPTED_RESULT and results[0].is_error
    assert "while 1 tool call(s) were running" in _user_text(wire.requests[1].body)


@pytest.mark.slow
def test_continue_resumes_the_latest_session_of_the_directory(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Noted."), Reply(text="It was 42."))
    assert run_here(tmp_path, wire, "remember the number 42").strip() == "Noted."  # the session to continue
    session_id, _ = _only_session(tmp_path)
    second = Chat(tmp_path, wire, "--continue")
    second.expect(f"session {session_id} (resumed)")
    second.say("which number?")
    second.expect("It was 42.")
    second.say("/quit")
    assert second.finish() == 0
    assert "remember the number 42" in _user_text(wire.requests[1].body)
    assert len(LocalSessionStore(tmp_path / "store").list()) == 1


@pytest.mark.slow
def test_ctrl_c_at_an_approval_question_cancels_the_turn(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(
        Reply(text="Running it.", tool_calls=[ToolUse("Bash", {"command": "touch ran.txt"})]),
        Reply(text="Fine, I will not."),
    )
    (ws / ".lamina").mkdir()
    (ws / ".lamina" / "config.toml").write_text("context_window = 100000\n")  # the footer shows the configured window
    chat = Chat(tmp_path, wire)
    chat.say("run it")
    chat.expect("Allow Bash?")
    chat.send("\x03")
    chat.expect("interrupted")
    chat.say("never mind")
    chat.expect("Fine, I will not.")
    chat.expect("% of 100k")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert not (ws / "ran.txt").exists()
    _, entries = _only_session(tmp_path)
    results = [e for e in entries if isinstance(e, ToolResult)]
    assert [r.content for r in results] == [INTERRUPTED_RESULT]


@pytest.mark.slow
def test_run_in_a_terminal_neutralises_the_answer(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Answer " + MARKUP + OSC52))
    run = Chat(tmp_path, wire, "say it", command="run")
    run.expect("Answer [/red] [/] xs[i] + xs[b]␛]52;c;aGk=␇")
    assert run.finish() == 0
    assert "\x1b]52" not in run.output()


@pytest.mark.slow
def test_branch_goes_back_before_the_last_message_and_puts_it_in_the_input_line(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="First answer."), Reply(text="Second answer."), Reply(text="Answer on the branch."))
    chat = Chat(tmp_path, wire)
    chat.say("First question")
    chat.expect("First answer.")
    chat.say("Second question")
    chat.expect("Second answer.")
    chat.say("/branch")
    chat.expect("your message is back in the input line")
    chat.prompt()
    chat.send(", put better\r")  # the input line holds the message: typing goes on after it
    chat.expect("Answer on the branch.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    sent = _user_text(wire.requests[-1].body)
    assert "Second question, put better" in sent and "First question" in sent
    assert sent.count("Second question") == 1  # the message it replaces is not on the branch
    assert "Second answer." not in str(wire.requests[-1].body)
    _, entries = _only_session(tmp_path)
    assert [e.text for e in entries if isinstance(e, UserMessage)] == [
        "First question",
        "Second question",
        "Second question, put better",
    ]
