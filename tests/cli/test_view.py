"""The chat's view: results broken at spaces and folded, `/output` whole, the model's Markdown inert, live rows."""

from __future__ import annotations

import io
import re
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from lamina.agent import ToolFinished, ToolProgress, ToolStarted
from lamina.cli._console import fit
from lamina.cli._live import Activity, SafeMarkdown, TextStream, elapsed
from lamina.cli._turn_view import FOLD_ROWS, TurnView, call_summary
from lamina.providers import TextDelta
from tests.cli.screen import screen

SGR = re.compile(r"\x1b\[[0-9;]*m")
REASON = (
    "Read AGENTS.md first: it holds the project's instructions for src/billing/reports/monthly_totals.py, "
    "and it says which tests to run after every change and which files never to touch. Edit is blocked "
    "there until then; the end of this reason is the part that says what to do next. END-OF-REASON"
)


def _console(width: int, *, terminal: bool = True, colour: bool = False) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=terminal,
        color_system="truecolor" if colour else None,
        highlight=False,
        emoji=False,
    )
    return console, buffer


def _view(width: int, *, relative_to: Path | None = None) -> tuple[TurnView, io.StringIO]:
    console, buffer = _console(width)
    view = TurnView(model="claude-sonnet-5", spinner=False, console=console, output_hint=True, relative_to=relative_to)
    return view, buffer


def _result(
    view: TurnView, content: str, *, name: str = "Edit", is_error: bool = False, path: str | None = None
) -> None:
    view(ToolStarted("call-1", name, {"path": "app.py"}))
    view(ToolFinished("call-1", name, is_error, content, path))


@pytest.mark.parametrize("width", [80, 160])
def test_a_long_refusal_wraps_at_spaces_and_keeps_its_end(width: int) -> None:
    view, buffer = _view(width)
    _result(view, REASON, is_error=True)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "→ Edit app.py"
    shown = lines[1:]
    assert shown[0].startswith("✗ Edit: Read AGENTS.md first")
    assert len(shown) > 1 and all(line.startswith("  ") for line in shown[1:])  # wrapped, hanging under the mark
    assert max(cell_len(line) for line in shown) <= width
    assert " ".join(line.strip() for line in shown) == f"✗ Edit: {REASON}"  # every word whole, the end kept


def test_long_output_folds_to_its_first_and_last_rows_and_output_prints_it_whole() -> None:
    view, buffer = _view(80)
    numbers = "\n".join(f"line {i}" for i in range(1, 301))
    _result(view, numbers + "\n[exit code 0]", name="Bash")
    shown = buffer.getvalue().splitlines()[1:]
    assert len(shown) <= FOLD_ROWS
    assert shown[0] == "✓ Bash: line 1" and shown[-1] == "  [exit code 0]"
    assert "  … +294 lines · /output 1 shows it whole" in shown
    assert "line 150" not in buffer.getvalue()
    buffer.truncate(0)
    buffer.seek(0)
    assert view.show_output() and view.show_output(1)
    whole = buffer.getvalue().splitlines()
    assert [line for line in whole if line.startswith("line ")] == [f"line {i}" for i in range(1, 301)] * 2
    assert not view.show_output(2)


def test_output_prints_an_offloaded_result_from_its_file(tmp_path: Path) -> None:
    saved = tmp_path / "toolu_1.txt"
    saved.write_text("".join(f"row {i}\n" for i in range(2_000)))
    view, buffer = _view(100, relative_to=tmp_path)
    _result(view, f"[too large; saved at {saved}]\nrow 0\n…\nrow 1999", name="Bash", path=str(saved))
    assert "(full output: toolu_1.txt)" in buffer.getvalue()  # the path shown relative to `relative_to`
    assert view.show_output(1)
    assert "row 1000" in buffer.getvalue()


def test_a_short_result_stays_on_one_line_and_piped_lines_are_left_whole() -> None:
    view, buffer = _view(80)
    _result(view, "ok\n", name="Bash")
    assert buffer.getvalue().splitlines()[1] == "✓ Bash: ok"
    console, piped = _console(80, terminal=False)
    console.soft_wrap = True  # as the CLI's consoles are when they write to a pipe
    TurnView(model="m", spinner=False, console=console)(ToolFinished("c", "Edit", True, REASON, None))
    assert piped.getvalue() == f"✗ Edit: {REASON}\n"


def test_the_models_markdown_is_rendered_and_hostile_text_stays_text() -> None:
    console, buffer = _console(70, colour=True)
    view = TurnView(model="m", spinner=False, console=console)
    hostile = (
        "## Goal\n\nDone **well**: [red]markup[/red] [link=http://x]a[/link] \x1b]52;c;aGk=\x07 \x1b[5;47mblink "
        "<b>html</b> :thumbs_up: [click](http://evil.example/)\n\n<script>alert(1)</script>\n"
    )
    for piece in (hostile[:9], hostile[9:40], hostile[40:]):
        view(TextDelta(piece))
    view.finish()
    raw = buffer.getvalue()
    assert {match for match in re.findall(r"\x1b\S{0,3}", SGR.sub("", raw))} == set()  # colours only, no control
    shown = SGR.sub("", raw)
    assert "## Goal" not in shown and "Goal" in shown and "**" not in shown
    for literal in ("[red]markup[/red]", "[link=http://x]a[/link]", "␛]52;c;aGk=␇", "␛[5;47mblink", "<b>html</b>"):
        assert literal in shown
    assert ":thumbs_up:" in shown and "<script>alert(1)</script>" in shown
    assert "click (http://evil.example/)" in shown  # a link shows where it goes


def test_piped_text_is_printed_as_it_came() -> None:
    console, buffer = _console(40, terminal=False)
    view = TurnView(model="m", spinner=False, console=console)
    view(TextDelta("## Goal\n\x1b[2J[red]x"))
    view(ToolStarted("c", "Read", {"path": "a.py"}))
    assert buffer.getvalue().splitlines()[:2] == ["## Goal", "␛[2J[red]x"]


@pytest.mark.slow
@pytest.mark.parametrize("width", [40, 80])
def test_streamed_markdown_ends_on_screen_as_it_renders_whole(width: int) -> None:
    text = "# Title\n\n" + " ".join(f"word{i}" for i in range(400)) + "\n\n- a\n- b\n\n```\ncode [i]\n```\n"
    console, buffer = _console(width)
    stream = TextStream(console, live=True)
    for start in range(0, len(text), 7):
        stream.add(text[start : start + 7])
    stream.close()
    expected, rendered = _console(width)
    expected.print(SafeMarkdown(text))
    assert _trimmed(screen(buffer.getvalue(), width)) == _trimmed(screen(rendered.getvalue(), width))


def _trimmed(lines: list[str]) -> list[str]:
    while lines and not lines[-1]:
        lines.pop()
    return lines


def test_a_running_tool_shows_its_name_input_timer_and_last_lines() -> None:
    console, buffer = _console(40)
    activity = Activity(Text("Bash sleep 1; echo a very long command line"))
    activity.feed("one\ntwo\nthr")
    activity.feed("ee\n4\n5\n6\n10%\r50%\r100%")
    console.print(activity)
    lines = buffer.getvalue().splitlines()
    assert re.fullmatch(r"\S Bash sleep 1; echo a very long c… · \d+s", lines[0])  # the label cut, never the timer
    assert lines[1:] == ["  three", "  4", "  5", "  6", "  100%"]  # a carriage return rewrites its line


def test_the_live_view_shows_a_tool_only_once_it_runs() -> None:
    console, buffer = _console(60)
    view = TurnView(model="m", spinner=True, console=console)
    view(ToolStarted("c", "Bash", {"command": "make test"}))
    assert view._activity is None  # an approval may be asked now: nothing live
    view(ToolProgress("c", "Bash", ""))
    view(ToolProgress("c", "Bash", "collected 3 items\n"))
    assert view._activity is not None and view._activity[1].tail == ("collected 3 items",)
    view(ToolFinished("c", "Bash", False, "3 passed\n[exit code 0]", None))
    view.finish()
    assert "✓ Bash: 3 passed" in screen(buffer.getvalue(), 60)


def test_elapsed_and_call_summary() -> None:
    assert [elapsed(s) for s in (0.4, 7, 125, 3720)] == ["0s", "7s", "2m 05s", "1h 02m"]
    assert call_summary("SubmitPlan", {"title": "Fix total()", "text": "# long\n..."}) == "Fix total()"
    assert call_summary("Bash", {"command": "echo  a\n  b"}) == "echo a b"


_WORDS = st.lists(st.text(alphabet=string.ascii_letters + "é界", min_size=1, max_size=30), min_size=1, max_size=40)


@given(_WORDS, st.integers(min_value=20, max_value=120), st.integers(min_value=0, max_value=6))
def test_fit_breaks_only_at_spaces_and_folds_only_a_word_too_long(words: list[str], width: int, indent: int) -> None:
    text = " ".join(words)
    room = width - indent - 2
    lines = fit(Text(text), width, indent=indent, fold=True)
    assert all(cell_len(line.plain) <= width for line in lines)
    assert "".join(line.plain.strip() for line in lines).replace(" ", "") == text.replace(" ", "")
    if all(cell_len(word) <= room for word in words):
        assert " ".join(line.plain.strip() for line in lines).split() == words
    whole = fit(Text(text), width, indent=indent, fold=False)
    assert " ".join(line.plain.strip() for line in whole).split() == words  # piped: a long word left whole


def test_a_tool_name_from_the_model_with_escape_codes_reaches_the_terminal_visible() -> None:
    view, buffer = _view(80)
    _result(view, "no such tool", name="Ev\x1b]0;owned\x07il\x1b[2J", is_error=True)
    shown = SGR.sub("", buffer.getvalue())
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown.count("Ev") == 2
