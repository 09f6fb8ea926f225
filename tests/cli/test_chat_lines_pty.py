"""`lamina chat` in a pty at 80 and 160 columns: /help wrapped at spaces, a one-line rewind, Ctrl-C mid-tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lamina.session import LocalSessionStore, ToolResult
from tests.cli.pty_session import Chat
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")]
COLUMNS = [80, 160]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.mark.parametrize("columns", COLUMNS)
def test_help_wraps_at_spaces_under_its_description_column(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    chat = Chat(tmp_path, wire, columns=columns)
    chat.say("/help")
    chat.expect("cancels a running turn.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = chat.screen()
    start = next(i for i, line in enumerate(shown) if line.startswith("/help "))
    end = next(i for i, line in enumerate(shown) if line.endswith("cancels a running turn."))
    rows = shown[start : end + 1]
    assert all(len(row) <= columns for row in rows)
    for row in rows:  # a command, a description's wrapped line under its column, or the keys' wrapped line
        assert row.startswith(("/", " " * 19, "Enter sends", "  ")), rows
    words = " ".join(rows).split()
    assert "`/compact" in words and "--force" in words and "xhigh," in words  # no word cut at the edge


@pytest.mark.parametrize("columns", COLUMNS)
def test_esc_twice_rewinds_with_one_line(tmp_path: Path, ws: Path, wire: WireServer, columns: int) -> None:
    wire.script(Reply(text="Answer one."), Reply(text="Answer two."))
    chat = Chat(tmp_path, wire, columns=columns)
    chat.say("first question")
    chat.expect("Answer one.")
    chat.say("second question")
    chat.expect("Answer two.")
    chat.prompt()
    chat.send("\x1b\x1b")
    chat.expect("rewound: your message is back in the input line (send it again or edit it)")
    chat.prompt()
    chat.send("\x15\x04")
    assert chat.finish() == 0
    output = chat.output()
    assert "branched at" not in output and "provider view" not in output


def test_verbose_rewind_shows_the_branch(tmp_path: Path, ws: Path, wire: WireServer) -> None:
    wire.script(Reply(text="Answer one."))
    chat = Chat(tmp_path, wire, "--verbose", columns=80)
    chat.say("first question")
    chat.expect("Answer one.")
    chat.say("/rewind 1")
    chat.expect("branched at")
    chat.prompt()
    chat.send("\x15\x04")
    assert chat.finish() == 0


@pytest.mark.parametrize("columns", COLUMNS)
def test_ctrl_c_mid_bash_keeps_the_output_seen_on_screen_and_in_the_log(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    command = "echo first-line; echo second-line; sleep 30"
    wire.script(
        Reply(text="Running it.", tool_calls=[ToolUse("Bash", {"command": command})]),
        Reply(text="It printed two lines before you stopped it."),
    )
    chat = Chat(tmp_path, wire, "--mode", "execute", columns=columns)
    chat.say("run the job")
    chat.expect("  second-line")
    chat.send("\x03")
    chat.expect("interrupted")
    chat.say("what happened?")
    chat.expect("It printed two lines")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = chat.screen()
    start = next(i for i, line in enumerate(shown) if line.startswith("⏹ Bash (interrupted):"))
    assert shown[start : start + 2] == ["⏹ Bash (interrupted): first-line", "  second-line"]
    store = LocalSessionStore(tmp_path / "store")
    (row,) = store.list()
    with store.open(row.id, writable=False) as session:
        (result,) = [e for e in session.entries() if isinstance(e, ToolResult)]
    assert result.is_error and result.content.startswith("[interrupted by the user")
    assert result.content.endswith("first-line\nsecond-line\n")
    sent = str(wire.requests[1].body["messages"])
    assert "second-line" in sent  # the model is told what it printed


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_plan_is_shown_as_markdown_once_and_decided_with_single_keys(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    plan = "# Fix total()\n\nIt adds one to the sum.\n\n1. Remove the + 1.\n2. Run the tests.\n"
    script = tmp_path / "plan.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {
                        "text": "Here is my plan.",
                        "tool_calls": [{"name": "SubmitPlan", "input": {"title": "Fix", "text": plan}}],
                    },
                    {"text": "Done as planned."},
                ]
            }
        )
    )
    chat = Chat(tmp_path, wire, "--mode", "plan", model=f"scripted:{script}", columns=columns)
    chat.say("plan the fix")
    chat.expect("Plan? a accept")
    chat.send("a")  # no Enter
    chat.expect("run it:")
    chat.send("e")
    chat.expect("Done as planned.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = chat.screen()
    assert len([line for line in shown if "submitted for your decision" in line]) == 1
    assert "Fix total()" in shown  # the level-1 heading, at the left margin
    assert not [line for line in shown if line.startswith("# Fix") or line.strip() == "1. Remove the + 1."]
    assert [line for line in shown if line.strip().endswith("Remove the + 1.")]
    assert all(len(line) <= columns for line in shown)


@pytest.mark.parametrize("columns", COLUMNS)
def test_always_on_a_loop_offers_one_exact_rule_and_s_saves_it_in_the_personal_file_out_of_git(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    (ws / ".git" / "info").mkdir(parents=True)
    (ws / ".git" / "info" / "exclude").write_text("# git ls-files --others --exclude-from=.git/info/exclude")
    loop = "for i in 1 2; do echo tick; done"
    wire.script(Reply(tool_calls=[ToolUse("Bash", {"command": loop})]), Reply(text="Ticked."))
    chat = Chat(tmp_path, wire, "--mode", "ask", columns=columns)
    chat.say("tick twice")
    chat.expect("Allow Bash?")
    chat.send("s")
    chat.expect("Ticked.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = chat.screen()
    start = max(i for i, line in enumerate(shown) if line.startswith("Allow Bash?"))
    end = next(i for i in range(start, len(shown)) if shown[i].endswith("why: s"))
    question = " ".join(shown[start : end + 1])
    assert f"a always Bash({loop})" in " ".join(question.split())  # one exact rule, no keyword prefixes
    assert "Bash(for" not in question.replace(f"Bash({loop})", "")
    assert all(len(line) <= columns for line in shown[start : end + 1])
    assert all(line.startswith("  ") for line in shown[start + 1 : end + 1])
    assert not (ws / ".lamina" / "config.toml").exists()  # the team's file is an explicit choice (t)
    assert f"Bash({loop})" in (ws / ".lamina" / "config.local.toml").read_text()
    exclude = (ws / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude[-1] == "/.lamina/config.local.toml"


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_new_files_diff_starts_at_dev_null_and_keeps_its_gutter_when_wrapped(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    words = " ".join(f"word{n}" for n in range(40))  # longer than a line at 160 columns
    wire.script(
        Reply(tool_calls=[ToolUse("Write", {"path": "notes.md", "content": f"# Notes\n{words}\n"})]),
        Reply(text="Written."),
    )
    chat = Chat(tmp_path, wire, "--mode", "ask", columns=columns)
    chat.say("write the notes")
    chat.expect("Allow Write?")
    chat.send("y")
    chat.expect("Written.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = chat.screen()
    start = shown.index("  --- /dev/null")
    assert shown[start + 1] == "  +++ b/notes.md"
    first = next(i for i in range(start, len(shown)) if shown[i].startswith("  +word0 "))
    rows = [shown[first]]
    for line in shown[first + 1 :]:
        if not line.startswith("    "):
            break
        rows.append(line)
    assert len(rows) > 1 and all(len(row) <= columns for row in rows)  # wrapped, under the gutter
    assert " ".join(row.strip() for row in rows).removeprefix("+") == words
