"""`lamina chat --model demo` in a pseudo-terminal: the offline chat, its resume, and lines that wrap at spaces."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from lamina.session import AssistantMessage, LocalSessionStore
from tests.cli.pty_session import Chat
from tests.wire.server import WireServer

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")]
NO_KEY = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def _block(lines: list[str], first: str) -> list[str]:
    """The last line that starts with `first` and the indented lines under it."""
    start = max(i for i, line in enumerate(lines) if line.startswith(first))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


def _words_whole(rows: list[str], text: str) -> None:
    """Every word of `text` is on one row (none broken across two), and the rows after the first hang."""
    shown = [row.split() for row in rows]
    assert all(row.startswith("  ") for row in rows[1:]), rows
    assert [w for row in shown for w in row] == text.split(), rows


@pytest.mark.parametrize("columns", [80, 160])
def test_the_demo_model_chats_without_a_key_and_a_resumed_session_goes_on_with_the_script(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    chat = Chat(tmp_path, wire, model="demo", unset=NO_KEY, columns=columns)
    chat.say("hello")
    chat.expect("Allow Bash?")
    chat.send("y")
    chat.expect("It fails, as expected.")
    chat.expect("Allow Edit?")
    chat.send("y")
    chat.expect("Running the test again")
    chat.expect("Allow Bash?")
    chat.send("y")
    chat.expect("Things to try next")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = chat.screen()
    assert all(len(line) <= columns for line in shown)
    question = _block(shown, "Allow Edit?")
    assert question[-1].endswith(": y")
    _words_whole(question, " ".join(question))  # no word cut at the edge
    diff = _block(shown, "? Edit")
    assert "  --- a/app.py" in diff and "  +    return sum(xs)" in diff
    store = LocalSessionStore(tmp_path / "store")
    (row,) = store.list()
    assert row.cwd == str(tmp_path / "state" / "lamina" / "demo-workspace")
    assert (Path(row.cwd) / "app.py").read_text() == "def total(xs):\n    return sum(xs)\n"

    resumed = Chat(tmp_path, wire, "--resume", row.id, model=None, unset=NO_KEY, columns=columns)
    resumed.say("anything else?")
    resumed.expect("That was the whole script")  # step 6, not step 1 again
    resumed.prompt()
    resumed.send("\x04")
    assert resumed.finish() == 0
    with store.open(row.id, writable=False) as session:
        answers = [e.text for e in session.entries() if isinstance(e, AssistantMessage)]
    assert len(answers) == 6 and answers[0].startswith("Hello!") and answers[-1].startswith("That was the whole")


@pytest.mark.parametrize("columns", [80, 160])
def test_without_a_key_the_error_names_the_offline_demo(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    chat = Chat(tmp_path, wire, model=None, unset=NO_KEY, columns=columns)
    assert chat.finish() == 2
    shown = [line for line in chat.screen() if line]
    error = " ".join(line.strip() for line in shown)
    assert re.search(r"error: no API key for anthropic: set ANTHROPIC_API_KEY in the environment", error)
    assert "(or try the chat offline: lamina chat --model demo)" in error
    assert all(len(line) <= columns for line in shown)
    assert all(line.startswith("  ") for line in shown[1:])  # wrapped at spaces, hanging
