"""Type-ahead in a pseudo-terminal: Enter during a turn queues a message, sent in order after it, never a newline."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamina.session import LocalSessionStore, UserMessage
from tests.cli.pty_session import Chat, HoldingWire, paste
from tests.wire.script import Reply

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def holding() -> Iterator[HoldingWire]:
    with HoldingWire() as server:
        yield server


def _user_messages(tmp_path: Path) -> list[str]:
    store = LocalSessionStore(tmp_path / "store")
    (row,) = store.list()
    with store.open(row.id, writable=False) as session:
        return [e.text for e in session.entries() if isinstance(e, UserMessage)]


@pytest.mark.parametrize("columns", [80, 160])
def test_enter_during_a_turn_queues_each_message_and_they_are_sent_in_order(
    tmp_path: Path, ws: Path, holding: HoldingWire, columns: int
) -> None:
    holding.script(
        Reply(text="First part of a long answer that finishes later."),
        Reply(text="Second answer."),
        Reply(text="Third answer."),
        Reply(text="Fourth answer."),
    )
    holding.hold_next_stream()
    chat = Chat(tmp_path, holding, columns=columns)
    chat.say("one")
    chat.expect("First")
    chat.send("two\r")
    chat.expect("queued: two")
    chat.send("three\r")
    chat.expect("queued: three")
    chat.send("draf")
    chat.expect("› draf")
    chat.send("x\x7ft")  # Backspace edits the line being typed
    chat.expect("› draft")
    holding.release()
    chat.expect("Second answer.")
    chat.expect("Third answer.")
    chat.prompt()  # the line typed without Enter is the prompt's draft
    chat.send("\r")
    chat.expect("Fourth answer.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert _user_messages(tmp_path) == ["one", "two", "three", "draft"]
    shown = chat.screen()
    assert "ask > two" in shown and "ask > three" in shown  # each sent as its own message, shown as typed
    assert not [line for line in shown if "thinking…" in line or "queued" in line]  # the live lines went away
    assert all(len(line) <= columns for line in shown)


@pytest.mark.parametrize("columns", [80, 160])
def test_backspace_on_an_empty_line_takes_the_last_queued_message_back(
    tmp_path: Path, ws: Path, holding: HoldingWire, columns: int
) -> None:
    holding.script(Reply(text="First part of a long answer that finishes later."), Reply(text="Second answer."))
    holding.hold_next_stream()
    chat = Chat(tmp_path, holding, columns=columns)
    chat.say("one")
    chat.expect("First")
    chat.send("tow\r")
    chat.expect("queued: tow")
    chat.send("\x7f\x7f\x7fwo\r")  # the queued message back in the line, edited, queued again
    chat.expect("queued: two")
    chat.send("gone\x15")  # Ctrl-U clears the line
    holding.release()
    chat.expect("Second answer.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert _user_messages(tmp_path) == ["one", "two"]


def test_keys_typed_while_chat_starts_are_a_message_not_a_newline(
    tmp_path: Path, ws: Path, holding: HoldingWire
) -> None:
    holding.script(Reply(text="Hello there."), Reply(text="Context next."))
    chat = Chat(tmp_path, holding, columns=80)
    chat.send("hello\r")  # before the prompt shows: the terminal buffers it
    chat.expect("Hello there.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert _user_messages(tmp_path) == ["hello"]


@pytest.mark.parametrize("columns", [80, 160])
def test_a_long_paste_folds_to_one_line_and_is_sent_whole(
    tmp_path: Path, ws: Path, holding: HoldingWire, columns: int
) -> None:
    holding.script(Reply(text="Got all forty."))
    lines = [f"pasted line {n} of the log" for n in range(1, 41)]
    chat = Chat(tmp_path, holding, columns=columns)
    chat.prompt()
    chat.send("look at this: " + paste("\n".join(lines)))
    chat.expect("[pasted 40 lines]")
    chat.send("\r")
    chat.expect("Got all forty.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert _user_messages(tmp_path) == ["look at this: " + "\n".join(lines)]
    shown = chat.screen()
    assert "ask > look at this: [pasted 40 lines]" in shown
    assert not [line for line in shown if "pasted line 20" in line]  # the input never showed the forty lines
