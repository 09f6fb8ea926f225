"""Approvals in a pseudo-terminal through the wire server: one key, an answer for the model, prefix and config rules.

And an escape sequence typed at the prompt: dropped, with no traceback and no half message sent.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from lamina.session import LocalSessionStore, ToolResult
from lamina.workspace import trust_workspace
from tests.cli.pty_session import Chat
from tests.cli.test_chat_pty import _user_text
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
    pytest.mark.slow,
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def _bash(command: str) -> Reply:
    return Reply(tool_calls=[ToolUse("Bash", {"command": command})])


def _bash_results(tmp_path: Path) -> list[ToolResult]:
    store = LocalSessionStore(tmp_path / "store")
    (row,) = store.list()
    with store.open(row.id, writable=False) as session:
        return [e for e in session.entries() if isinstance(e, ToolResult) and e.name == "Bash"]


def _answers(transcript: str) -> list[str]:
    """The keys pressed at approval questions, in order (the question is shown again with its answer)."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", transcript)  # a long question is wrapped at spaces
    return re.findall(r"tell\s+the\s+model\s+why:\s+([nyaste])", plain)


def test_one_key_answers_and_e_tells_the_model_what_to_do_instead(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(
        _bash("echo first > one.txt"),
        _bash("touch ran.txt"),
        Reply(text="Understood, I will use the Makefile."),
    )
    chat = Chat(tmp_path, wire, "--mode", "ask")
    chat.say("make the files")
    chat.expect("Allow Bash?")
    chat.send("\x1b[1m")  # an escape sequence at the question is dropped too
    chat.send("x")  # not an answer: nothing happens
    chat.send("y")  # no Enter
    chat.expect("a always Bash(touch:*)")  # the next question (a key pressed before it shows is typed ahead)
    chat.send("e")
    chat.expect("what should the model do instead?")
    chat.send("use the Makefile, not touch\r")
    chat.expect("Understood, I will use the Makefile.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert (ws / "one.txt").read_text() == "first\n"
    assert not (ws / "ran.txt").exists()
    assert "The user declined this call and said: use the Makefile, not touch" in _user_text(wire.requests[2].body)
    declined = _bash_results(tmp_path)[1]
    assert declined.is_error and "use the Makefile, not touch" in declined.content
    text = chat.output()
    assert "Traceback" not in text and "Unhandled exception" not in text
    assert _answers(text) == ["y", "e"]


def test_always_on_git_status_allows_its_prefix_only(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(
        _bash("git status"),
        _bash("git status -s"),
        _bash("git status; touch sneaky.txt"),
        _bash("git push"),
        Reply(text="Done."),
    )
    chat = Chat(tmp_path, wire, "--mode", "ask")
    chat.say("check the repository")
    chat.expect("a always Bash(git status:*)")
    chat.send("a")
    chat.expect("Bash(git status:*) is allowed for the rest of this session")
    chat.expect("Bash allowed by Bash(git status:*)")  # `git status -s`, not asked about
    chat.expect("Allow Bash?")  # the compound command is asked about: `touch` is not allowed
    chat.send("n")
    chat.expect("a always Bash(git push:*)")  # the next question (a key pressed before it shows is typed ahead)
    chat.send("n")
    chat.expect("Done.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    text = chat.output()
    assert _answers(text) == ["a", "n", "n"]
    assert not (ws / "sneaky.txt").exists()
    results = _bash_results(tmp_path)
    assert [r.content.startswith("the user declined") for r in results] == [False, False, True, True]
    assert not (ws / ".lamina" / "config.toml").exists()  # "a" is for this session only


def test_config_rules_allow_and_deny_without_asking_and_s_saves_a_rule(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    (ws / ".lamina").mkdir()
    config = ws / ".lamina" / "config.toml"
    config.write_text('[permissions]\nallow = ["Bash(echo:*)", "Bash(rm:*)"]\ndeny = ["Bash(rm:*)"]\n')
    trust_workspace(ws, file=tmp_path / "config" / "lamina" / "trusted.toml")  # its allow rules apply
    wire.script(
        _bash("echo allowed"),
        _bash("touch keep.txt && rm -f keep.txt"),
        _bash("ls -a"),
        _bash("ls -a"),
        Reply(text="Finished."),
    )
    (ws / "keep.txt").write_text("still here")
    chat = Chat(tmp_path, wire, "--mode", "ask")
    chat.say("tidy up")
    chat.expect("Bash allowed by Bash(echo:*)")
    chat.expect("Allow Bash?")  # the rm was refused without a question; this is `ls -a`
    chat.send("s")
    chat.expect("saved in")
    chat.expect("Finished.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    assert _answers(chat.output()) == ["s"]  # the second `ls -a` ran under the new rule
    assert _bash_results(tmp_path)[0].content.startswith("allowed")  # it ran
    assert (ws / "keep.txt").read_text() == "still here"  # deny wins over allow, and over the touch's part
    refused = _bash_results(tmp_path)[1]
    assert refused.is_error and "Bash(rm:*)" in refused.content and str(config) in refused.content
    assert "The deny rule Bash(rm:*)" in _user_text(wire.requests[2].body)
    assert 'allow = ["Bash(ls -a:*)"]' in (ws / ".lamina" / "config.local.toml").read_text()  # s: the personal file
    assert "ls -a" not in config.read_text()  # the team's file: only with t


def test_an_escape_sequence_at_the_prompt_is_dropped_and_the_message_stays_whole(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    wire.script(Reply(text="Got it."))
    chat = Chat(tmp_path, wire)
    chat.prompt()
    chat.send("hello \x1b[31m")  # what prompt_toolkit reads as a mouse report
    chat.send("\x1b[<0;1;2")  # half a real one, then the rest
    chat.send("Mworld \x1b[M!!!")
    chat.send("and more\r")
    chat.expect("Got it.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    text = chat.output()
    assert "Traceback" not in text and "Unhandled exception" not in text and "Press ENTER" not in text
    assert len(wire.requests) == 1
    assert _user_text(wire.requests[0].body).startswith("hello world and more")
