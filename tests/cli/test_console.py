"""The one escaping helper: whatever the text, it prints exactly as it reads and cannot drive the terminal."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from lamina.cli._console import WORD_JOINER, safe
from lamina.defang import show_controls

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_MARKUPISH = st.text(
    alphabet=st.sampled_from(list("[]/\\ab:=#@ \n\x1b\x07\x9b\r")) | st.characters(), max_size=60
) | st.text(alphabet="[]/\\ab", max_size=12)


def _render(markup: str) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=10_000, highlight=False, emoji=False, color_system=None, soft_wrap=True)
    console.print(markup, end="")
    return buffer.getvalue().replace(WORD_JOINER, "")


@pytest.mark.slow
@given(_MARKUPISH)
def test_safe_text_renders_exactly_as_its_neutralised_self(text: str) -> None:
    text = text.replace("\t", " ")  # rich expands tabs to spaces: layout, not markup
    assert _render(safe(text)) == show_controls(text)
    assert _render(f"[dim]{safe(text)}[/dim]<{safe(text)}>") == f"{show_controls(text)}<{show_controls(text)}>"


@given(_MARKUPISH)
def test_neutralised_text_has_no_control_characters_but_tab_and_newline(text: str) -> None:
    assert _UNSAFE.search(show_controls(text)) is None


def test_known_troublemakers() -> None:
    for text in ["[/red]", "[/]", "xs[i] + xs[b]", "[skill:name]", "[bold]x", "trailing\\", ":thumbs_up:"]:
        assert _render(safe(text)) == text
    assert show_controls("\x1b[2J\x1b]52;c;aGk=\x07\x9b31m\r\n") == "␛[2J␛]52;c;aGk=␇<U+009B>31m\n"
