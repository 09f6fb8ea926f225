"""Folded pastes: a long paste stands behind one placeholder and comes back whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lamina.cli._pastes import FOLD_LINES, FoldedPastes


def test_a_short_paste_is_inserted_as_it_is() -> None:
    assert FoldedPastes().fold("one\r\ntwo") == "one\ntwo"


def test_a_long_paste_folds_and_expands_back() -> None:
    pastes = FoldedPastes()
    text = "\n".join(f"line {n}" for n in range(40))
    first = pastes.fold(text)
    second = pastes.fold(text + "\nmore")
    assert (first, second) == ("[pasted 40 lines]", "[pasted 41 lines #2]")
    assert pastes.expand(f"see {first} and {second}") == f"see {text} and {text}\nmore"
    pastes.clear()
    assert pastes.expand(first) == first


@given(st.lists(st.text(alphabet="ab \n", max_size=30), max_size=4), st.text(alphabet="xy ", max_size=10))
def test_what_is_sent_is_what_was_pasted(pasted: list[str], typed: str) -> None:
    pastes = FoldedPastes()
    shown = typed + "".join(pastes.fold(text) for text in pasted)
    assert pastes.expand(shown) == typed + "".join(pasted)
    assert all(len(pastes.fold(t).split("\n")) <= FOLD_LINES + 1 for t in pasted)
