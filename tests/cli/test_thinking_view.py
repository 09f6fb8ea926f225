"""The chat's view of the model's thinking: one folded line per thinking, before its answer, opened whole."""

from __future__ import annotations

import io

from rich.console import Console

from lamina.agent import ModelCallFinished, Thinking, ToolStarted
from lamina.cli._turn_view import TurnView, footer_text
from lamina.providers import ReasoningDelta, TextDelta
from lamina.session import Reasoning, Usage
from tests.cli.screen import screen as drawn

THOUGHT = Reasoning(provider="anthropic", kind="thinking", text="Check the tests first.", signature="s")
REDACTED = Reasoning(provider="anthropic", kind="redacted_thinking", data="opaque")
OMITTED = Reasoning(provider="openai", kind="reasoning", data="enc", item_id="rs_1")
ESCAPE = "\x1b]52;c;aGk=\x07"


def screen(output: str, width: int) -> list[str]:
    """The lines a person sees, blank ones left out."""
    return [line for line in drawn(output, width) if line]


def _view(*, hint: bool = True) -> tuple[TurnView, io.StringIO]:
    buffer = io.StringIO()
    console = Console(file=buffer, width=100, force_terminal=True, color_system=None, highlight=False, emoji=False)
    return TurnView(model="claude-sonnet-5", spinner=False, console=console, output_hint=hint), buffer


def _call(view: TurnView, index: int, *blocks: Reasoning, text: str = "Done.", stream: bool = True) -> None:
    for block in blocks:
        if stream and block.text:
            view(ReasoningDelta(block.text))
    view(TextDelta(text))
    view(Thinking(index, blocks, tokens=5))
    view(ModelCallFinished(index, Usage(output=9, reasoning=5), "end_turn"))
    view.finish()


def test_streamed_thinking_is_one_line_before_the_answer_and_opens_whole() -> None:
    view, buffer = _view()
    _call(view, 0, THOUGHT)
    assert screen(buffer.getvalue(), 100)[:2] == ["∴ Thinking · 4 words (ctrl+o to expand)", "Done."]
    assert "Check the tests" not in buffer.getvalue()
    assert view.open_thinking()
    assert "Check the tests first." in screen(buffer.getvalue(), 100)


def test_thinking_that_did_not_stream_is_folded_when_the_call_completes() -> None:
    view, buffer = _view(hint=False)
    _call(view, 0, THOUGHT, stream=False)
    assert screen(buffer.getvalue(), 100)[:2] == ["Done.", "∴ Thinking · 4 words"]


def test_nothing_to_read_says_whether_the_provider_redacted_or_did_not_show_it() -> None:
    view, buffer = _view()
    _call(view, 0, REDACTED)
    _call(view, 1, OMITTED)
    shown = screen(buffer.getvalue(), 100)
    assert "∴ Thinking (redacted by the provider)" in shown and "∴ Thinking (not shown by the provider)" in shown
    assert not view.open_thinking()
    assert screen(buffer.getvalue(), 100)[-1] == "no thinking to open yet"


def test_each_model_call_folds_its_own_thinking_and_opening_goes_back_round() -> None:
    view, buffer = _view()
    view(ReasoningDelta("First: list "))
    view(ReasoningDelta("the files."))
    view(ToolStarted("c1", "Glob", {"pattern": "*"}))
    view(Thinking(0, (Reasoning(provider="anthropic", kind="thinking", text="First: list the files."),)))
    _call(view, 1, Reasoning(provider="anthropic", kind="thinking", text="Second" + ESCAPE))
    folded = [line for line in screen(buffer.getvalue(), 100) if line.startswith("∴ Thinking")]
    assert folded == ["∴ Thinking · 4 words (ctrl+o to expand)", "∴ Thinking · 1 word (ctrl+o to expand)"]
    opened = []
    for _ in range(3):
        start = len(buffer.getvalue())
        view.open_thinking()
        opened.append(buffer.getvalue()[start:])
    assert "2 of 2" in opened[0] and "Second␛]52;c;aGk=␇" in opened[0] and ESCAPE not in buffer.getvalue()
    assert "1 of 2" in opened[1] and "First: list the files." in opened[1]
    assert "2 of 2" in opened[2]  # round again


def test_the_footer_says_how_much_of_the_output_was_thinking() -> None:
    assert footer_text("m", Usage(input=10, output=87, reasoning=40), 0, 0) == (
        "in 10 · out 87 (thinking 40) · cache read 0 · write 0"
    )
    assert "thinking" not in footer_text("m", Usage(input=10, output=87), 0, 0)
