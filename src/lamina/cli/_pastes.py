"""Long pastes folded in the input line: `[pasted 40 lines]` shown, the whole text sent (pure)."""

from __future__ import annotations

from typing import Final

FOLD_LINES: Final = 4
"""A paste of more lines than this is folded to one placeholder in the input."""


class FoldedPastes:
    """The pastes folded in the message being typed, each behind its placeholder."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def fold(self, pasted: str) -> str:
        """What to insert for `pasted`: the text itself when short, else a placeholder standing for it."""
        text = pasted.replace("\r\n", "\n").replace("\r", "\n")
        lines = len(text.split("\n")) - text.endswith("\n")  # a last newline ends a line, it starts none
        if lines <= FOLD_LINES:
            return text
        number = len(self._texts) + 1
        label = f"[pasted {lines} lines]" if number == 1 else f"[pasted {lines} lines #{number}]"
        self._texts[label] = text
        return label

    def expand(self, message: str) -> str:
        """`message` with each placeholder still in it replaced by its paste."""
        for label, text in self._texts.items():
            message = message.replace(label, text)
        return message

    def clear(self) -> None:
        """The message was sent (or left): its pastes are gone."""
        self._texts.clear()
