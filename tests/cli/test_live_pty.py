"""`lamina chat` in a pty through the wire server: a running tool live, lines that fit, Markdown that stays inert.

`screen` replays the transcript as the terminal draws it, so the tests read what a person sees
once the live lines (spinner, timer, a tool's last lines) are gone.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.cli.pty_session import Chat, HoldingWire
from tests.cli.screen import screen
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

LONG_LINE = (
    "The migration stopped: the table billing_monthly_totals has rows whose currency is missing, and the "
    "report job reads them every night; fill the currency from the invoices first (see docs/billing.md), "
    "then run the migration again with --resume, never with --force. END-OF-REASON"
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("# Rules\n- Run the tests after every change.\n")
    (workspace / "src" / "billing").mkdir(parents=True)
    (workspace / "src" / "billing" / "monthly_totals.py").write_text("def total(xs):\n    return sum(xs) + 1\n")
    return workspace


def _chat(tmp_path: Path, wire: WireServer, columns: int, *args: str) -> Chat:
    chat = Chat(tmp_path, wire, *args)
    chat.child.setwinsize(50, columns)
    return chat


def _screen(chat: Chat, columns: int) -> list[str]:
    with chat.transcript.open(newline="") as raw:  # the pty's carriage returns kept
        return screen(raw.read(), columns)


def _block(lines: list[str], first: str) -> list[str]:
    """The line that starts with `first` and the indented lines under it."""
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


@pytest.mark.slow
def test_a_running_bash_command_shows_its_name_timer_and_output_as_it_comes(
    tmp_path: Path, ws: Path, wire: WireServer
) -> None:
    command = "echo first-line; echo second-line; while [ ! -e go ]; do sleep 0.1; done; echo finished $((40 + 2))"
    wire.script(Reply(text="Running it.", tool_calls=[ToolUse("Bash", {"command": command})]), Reply(text="Done."))
    chat = _chat(tmp_path, wire, 80, "--mode", "execute")
    chat.say("run the job")
    # the command waits for `go`: what shows now is shown while it runs
    chat.expect(re.compile(r"Bash\x1b\[0m echo first-line; echo second-line; .*\x1b\[2m · 1s"))  # name, input, timer
    chat.expect("  second-line")
    assert "finished 42" not in chat.output()
    (ws / "go").touch()
    chat.expect("Done.")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = _screen(chat, 80)
    assert _block(shown, "✓ Bash:") == ["✓ Bash: first-line", "  second-line", "  finished 42", "  [exit code 0]"]
    assert not [line for line in shown if re.search(r" · \d+s$", line)]  # the live lines went away


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 160])
def test_long_results_wrap_at_spaces_keep_their_end_and_fold(
    tmp_path: Path, ws: Path, wire: WireServer, columns: int
) -> None:
    edit = {"path": "src/billing/monthly_totals.py", "old_string": "+ 1", "new_string": ""}
    wire.script(
        Reply(tool_calls=[ToolUse("Edit", edit)]),  # refused: AGENTS.md was not read
        Reply(tool_calls=[ToolUse("Bash", {"command": f"echo '{LONG_LINE}'"})]),
        Reply(tool_calls=[ToolUse("Bash", {"command": "seq 1 300"})]),
        Reply(text="All three done."),
    )
    chat = _chat(tmp_path, wire, columns, "--mode", "execute")
    chat.say("go")
    chat.expect("All three done.")
    folded = _screen(chat, columns)
    notice = next(line for line in folded if "/output" in line)
    number = re.search(r"/output (\d+)", notice)
    assert number is not None and re.fullmatch(r"  … \+\d+ lines · /output \d+ shows it whole", notice)
    chat.say(f"/output {number.group(1)}")
    chat.expect("300")
    chat.prompt()
    chat.send("\x04")
    assert chat.finish() == 0
    shown = _screen(chat, columns)
    assert max(cell_len(line) for line in shown) <= columns

    refusal = _block(shown, "✗ Edit:")
    agents = ws.resolve() / "AGENTS.md"
    expected = (
        f"✗ Edit: Read {agents} first: it holds the project's instructions for src/billing/monthly_totals.py. "
        "Edit is blocked there until then."
    )
    if cell_len(str(agents)) < columns - 2:  # broken at spaces only
        assert " ".join(line.strip() for line in refusal) == expected
    else:  # the path is longer than a line: only it is cut across lines
        assert "".join(line.strip() for line in refusal).replace(" ", "") == expected.replace(" ", "")
        assert refusal[-1].endswith("Edit is blocked there until then.")

    result = _block(shown, "✓ Bash: The migration stopped")
    assert len(result) > 2  # wrapped, at either width
    assert " ".join(line.strip() for line in result) == f"✓ Bash: {LONG_LINE} [exit code 0]"  # no word split

    typed = f"execute > /output {number.group(1)}"  # the prompt shows the mode
    before = shown[: shown.index(next(line for line in shown if line.startswith(typed)))]
    fold = _block(before, "✓ Bash: 1")
    assert fold[0] == "✓ Bash: 1" and fold[-1] == "  [exit code 0]" and len(fold) <= 8
    assert "  150" not in before
    after = shown[len(before) :]
    assert [line for line in after if line.isdigit()] == [str(i) for i in range(1, 301)]  # whole


@pytest.mark.slow
def test_the_models_markdown_is_rendered_as_it_streams_and_hostile_text_prints_literally(
    tmp_path: Path, ws: Path
) -> None:
    text = (
        "## Goal\n\nFix the total, **carefully**: [red]markup[/red] [bold]stays[/bold] \x1b]52;c;aGk=\x07 "
        "\x1b[5;47mblink <b>tag</b> and [a link](http://evil.example/x).\n\n- first step\n- second step\n"
    )
    with HoldingWire() as holding:
        holding.script(Reply(text=text))
        holding.hold_next_stream()
        chat = _chat(tmp_path, holding, 100)
        chat.say("what is the goal?")
        # the heading drawn, styled, while the answer still streams (held after its start); the style is rich's
        # theme's (bold underline in rich 13, magenta underline in rich 15), so any style will do
        chat.expect(re.compile(r"\x1b\[[0-9;]+mGoal"))
        holding.release()
        chat.expect("second step")
        chat.prompt()
        chat.send("\x04")
        assert chat.finish() == 0
    raw = chat.output()
    assert "\x1b]52" not in raw and "\x1b[5;47m" not in raw  # the model's escapes never reach the terminal
    shown = _screen(chat, 100)
    # a line of its own (rich 13 centres a second-level heading), never the markdown source
    assert "Goal" in [line.strip() for line in shown] and not [line for line in shown if "## Goal" in line]
    body = " ".join(shown)  # the paragraph wraps at spaces: joined, it reads as written
    assert "Fix the total, carefully:" in body and "**" not in body
    for literal in ("[red]markup[/red]", "[bold]stays[/bold]", "␛]52;c;aGk=␇", "␛[5;47mblink", "<b>tag</b>"):
        assert literal in body
    assert "a link (http://evil.example/x)" in body
    assert " • first step" in shown and " • second step" in shown
