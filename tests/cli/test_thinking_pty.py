"""`lamina chat` in a pty: the model's thinking folded to one dim line, opened by Ctrl-O at the prompt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli.pty_session import Chat
from tests.cli.screen import screen
from tests.wire.server import WireServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

CTRL_O = "\x0f"
FIRST = "The user greets me; a greeting back is enough. FIRST-THOUGHT-END"
SECOND = "They ask again: answer with the count of files. SECOND-THOUGHT-END"


@pytest.mark.slow
def test_thinking_is_folded_and_ctrl_o_opens_the_latest_then_the_one_before(tmp_path: Path, wire: WireServer) -> None:
    (tmp_path / "ws").mkdir()
    script = tmp_path / "script.json"
    steps = [{"reasoning": FIRST, "text": "Hello."}, {"reasoning": SECOND, "text": "Two files."}]
    script.write_text(json.dumps({"responses": steps}))
    chat = Chat(tmp_path, wire, model=f"scripted:{script}")
    chat.say("hi")
    chat.expect("∴ Thinking · 10 words (ctrl+o to expand)")
    chat.expect("Hello.")
    chat.prompt()
    assert "FIRST-THOUGHT-END" not in chat.output()  # folded: only the line
    chat.send(CTRL_O)
    chat.expect("∴ thinking 1 of 1")
    chat.expect("FIRST-THOUGHT-END")
    chat.send("how many?\r")
    chat.expect("Two files.")
    chat.prompt()
    assert "SECOND-THOUGHT-END" not in chat.output()
    chat.send(CTRL_O)
    chat.expect("∴ thinking 2 of 2 · ctrl+o again: the one before")
    chat.expect("SECOND-THOUGHT-END")
    chat.send(CTRL_O)
    chat.expect("∴ thinking 1 of 2")
    chat.expect("FIRST-THOUGHT-END")
    chat.send("\x04")
    assert chat.finish() == 0
    with chat.transcript.open(newline="") as raw:  # what a person sees once the live lines are gone
        lines = screen(raw.read(), 200)
    folded = [i for i, line in enumerate(lines) if line == "∴ Thinking · 10 words (ctrl+o to expand)"]
    assert [lines[i + 1] for i in folded] == ["Hello.", "Two files."]  # each before its answer
    opened = [(line.split(" ─")[0], lines[i + 1]) for i, line in enumerate(lines) if line.startswith("∴ thinking")]
    assert opened == [
        ("∴ thinking 1 of 1", FIRST),
        ("∴ thinking 2 of 2 · ctrl+o again: the one before", SECOND),
        ("∴ thinking 1 of 2 · ctrl+o again: the one before", FIRST),
    ]
