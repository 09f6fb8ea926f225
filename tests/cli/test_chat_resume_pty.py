"""Resuming in `lamina chat` through the wire server in a pty: the session's model, a recap, rewinds, switching.

`/rewind` and Esc twice branch before an earlier message of the user's, its text back in the
input line; the resent turn is told only what is true on the branch (not what the abandoned path
held: its messages, its answers, an interruption there).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.session import AssistantMessage, CompactionBoundary, LocalSessionStore, StateChange, UserMessage
from tests.cli.pty_session import Chat, HoldingWire, run_here
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
    pytest.mark.slow,
]
NO_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("print('hi')\n")
    return workspace


def _sent(body: dict[str, Any]) -> str:
    """The request's conversation as JSON text (every message, whatever its role)."""
    return json.dumps(body["messages"], ensure_ascii=False)


def _store(tmp_path: Path) -> LocalSessionStore:
    return LocalSessionStore(tmp_path / "store")


def test_continue_runs_on_the_sessions_model_without_a_key_and_shows_a_recap(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(
        Reply(text="Let me look.", tool_calls=[ToolUse("Glob", {"pattern": "*.py"})]),
        Reply(text="Noted: the number is 42."),
        Reply(text="It was 42."),
    )
    spec = f"openai-compat:{wire.openai_url}#local-model"
    assert run_here(tmp_path, wire, "remember the number 42", spec).strip() == "Noted: the number is 42."
    (row,) = _store(tmp_path).list()
    second = Chat(tmp_path, wire, "--continue", model=None, unset=NO_KEYS)
    second.expect(f"session {row.id} (resumed) · {spec} · mode ask")
    second.expect("the last turns")
    second.expect("> remember the number 42")
    second.expect("Glob *.py")  # one line for the tool call
    second.expect("Noted: the number is 42.")
    second.say("which number?")
    second.expect("It was 42.")
    second.say("/quit")
    assert second.finish() == 0
    assert "no API key" not in second.output()
    assert [r.path for r in wire.requests] == ["/v1/chat/completions"] * 3
    assert wire.requests[2].body["model"] == "local-model"
    assert "remember the number 42" in _sent(wire.requests[2].body)


def test_rewind_lists_my_messages_and_the_resent_turn_holds_only_the_branch(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="Answer one."), Reply(text="Answer two, WRONG."), Reply(text="Answer two, fixed."))
    chat = Chat(tmp_path, wire)
    chat.say("first question")
    chat.expect("Answer one.")
    chat.say("second question, WRONG")
    chat.expect("Answer two, WRONG.")
    chat.say("/rewind")
    chat.expect("1  second question, WRONG")
    chat.expect("2  first question")
    chat.expect("rewind to before which (1-2, Enter: none):")
    chat.send("9\r")
    chat.expect("not a number between 1 and 2: '9'")  # asked again
    chat.expect("rewind to before which")
    chat.send("1\r")
    chat.expect("your message is back in the input line")
    chat.prompt()
    chat.expect("second question, WRONG")  # in the input line, to edit
    chat.send("\x15")  # Ctrl-U: the line emptied
    chat.send("second question, fixed\r")
    chat.expect("Answer two, fixed.")
    chat.say("/quit")
    assert chat.finish() == 0
    resent = _sent(wire.requests[2].body)
    assert "first question" in resent and "Answer one." in resent and "second question, fixed" in resent
    assert "WRONG" not in resent  # neither the rewound message nor its answer
    with _store(tmp_path).open(_store(tmp_path).list()[0].id, writable=False) as session:
        typed = [e.text for e in session.entries() if isinstance(e, UserMessage)]
        path = [e.text for e in session.path() if isinstance(e, UserMessage)]
    assert typed == ["first question", "second question, WRONG", "second question, fixed"]  # the log keeps it
    assert path == ["first question", "second question, fixed"]


def test_esc_twice_goes_back_to_the_last_message_and_the_branch_is_not_told_of_the_old_paths_interruption(
    tmp_path: Path, ws: Path
) -> None:
    with HoldingWire() as holding:
        holding.script(
            Reply(text="Alpha answered."),
            Reply(text="Beta answer that never finishes"),
            Reply(text="Beta answered."),
        )
        chat = Chat(tmp_path, holding)
        chat.say("alpha")
        chat.expect("Alpha answered.")
        holding.hold_next_stream()
        chat.say("beta")
        chat.expect("Beta answer")
        chat.send("\x03")  # cancelled: on this path the next turn would be told of the interruption
        chat.expect("interrupted")
        chat.prompt()
        chat.send("\x1b\x1b")
        chat.expect("your message is back in the input line")
        chat.prompt()
        chat.expect("beta")
        chat.send("\r")
        chat.expect("Beta answered.")
        chat.say("/quit")
        assert chat.finish() == 0
        resent = _sent(holding.requests[2].body)
    assert "alpha" in resent and "Alpha answered." in resent
    assert resent.count('"beta"') + resent.count("beta\\n") <= 1 and "beta" in resent  # sent once, not twice
    assert "interrupted" not in resent and "never finishes" not in resent


def test_compact_force_compacts_a_short_session(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(
        Reply(text="Noted, 42."),
        Reply(text="## Goal\n- keep the number 42 in mind"),  # the summary
        Reply(text="Still 42."),
    )
    chat = Chat(tmp_path, wire)
    chat.say("remember the number 42")
    chat.expect("Noted, 42.")
    chat.say("/compact")
    chat.expect("nothing to compact")
    chat.expect("/compact --force compacts it anyway")
    chat.say("/compact --force the number")
    chat.expect("compacted ")
    chat.say("/context")
    chat.expect("summary   manual compaction")
    chat.say("and now?")
    chat.expect("Still 42.")
    chat.say("/quit")
    assert chat.finish() == 0
    assert "the number" in _sent(wire.requests[1].body) or "the number" in json.dumps(wire.requests[1].body)
    after = json.dumps(wire.requests[2].body, ensure_ascii=False)
    assert "keep the number 42 in mind" in after and "remember the number 42" in after  # summary and the words
    with _store(tmp_path).open(_store(tmp_path).list()[0].id, writable=False) as session:
        (boundary,) = [e for e in session.entries() if isinstance(e, CompactionBoundary)]
    assert boundary.trigger == "manual" and boundary.first_kept_id is None and boundary.focus == "the number"


def test_context_shows_one_total(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Hello."))
    chat = Chat(tmp_path, wire)
    chat.say("hi")
    chat.expect("Hello.")
    chat.say("/context")
    chat.expect("one-shots")
    chat.expect("total")
    chat.say("/quit")
    assert chat.finish() == 0
    text = _ESCAPES.sub("", chat.output())
    context = next(line for line in text.splitlines() if line.startswith("context   ~"))
    total = next(line for line in text.splitlines() if line.strip().startswith("total"))
    figure = context.split("~")[1].split(" ")[0]
    assert total.split() == ["total", figure]  # the same figure, said once as the context line's


def test_sessions_n_switches_to_that_session_in_the_running_chat(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Alpha noted."), Reply(text="Beta noted."), Reply(text="Back in alpha."))
    assert run_here(tmp_path, wire, "alpha one").strip() == "Alpha noted."  # the session to switch back to
    (alpha,) = _store(tmp_path).list()
    chat = Chat(tmp_path, wire, "--mode", "explore")
    chat.say("beta one")
    chat.expect("Beta noted.")
    chat.say("/sessions")
    chat.expect("*  1")
    chat.expect("beta one")
    chat.expect("   2")
    chat.expect("alpha one")
    chat.say("/sessions 2")
    chat.expect("leaving session")
    chat.expect(f"session {alpha.id} (resumed)")
    chat.expect("mode ask")  # the other session's own mode, not this chat's --mode
    chat.expect("> alpha one")  # its recap
    chat.say("more")
    chat.expect("Back in alpha.")
    chat.say("/quit")
    assert chat.finish() == 0
    resent = _sent(wire.requests[2].body)
    assert "alpha one" in resent and "beta one" not in resent
    rows = {r.id: r for r in _store(tmp_path).list()}
    assert len(rows) == 2
    with _store(tmp_path).open(alpha.id, writable=False) as session:
        texts = [e.text for e in session.entries() if isinstance(e, UserMessage | AssistantMessage)]
        modes = [e.value for e in session.entries() if isinstance(e, StateChange) and e.key == "mode"]
    assert texts == ["alpha one", "Alpha noted.", "more", "Back in alpha."]
    assert modes == ["ask"]
