"""What a terminal shows after a pty transcript: a small emulator of the sequences rich and prompt_toolkit send.

Live output (a spinner, a running tool's lines, streamed text) is drawn, erased and drawn again
with cursor moves; a test that reads the raw transcript sees every frame. `screen` replays the
transcript on a grid the width of the terminal (scrollback kept), so a test reads what a person
sees at the end: the lines that stayed, wrapped where the terminal wrapped them.
"""

from __future__ import annotations

import re
from typing import Final

_SEQUENCE: Final = re.compile(r"\x1b\[([0-9;?]*)([ -/]*)([@-~])|\x1b[\]P_^][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
"""A control sequence (CSI), a string sequence (OSC, DCS: skipped whole) or a two-character escape."""


class _Grid:
    def __init__(self, width: int) -> None:
        self.width = width
        self.rows: list[list[str]] = [[]]
        self.row = 0
        self.col = 0
        self.wrap = True
        self.pending = False
        """The cursor is past the last column: the next character wraps first (as xterm does)."""

    def _line(self) -> list[str]:
        while len(self.rows) <= self.row:
            self.rows.append([])
        line = self.rows[self.row]
        if len(line) < self.col:
            line.extend(" " * (self.col - len(line)))
        return line

    def put(self, char: str) -> None:
        if self.pending and self.wrap:
            self.row, self.col, self.pending = self.row + 1, 0, False
        line = self._line()
        if self.col < len(line):
            line[self.col] = char
        else:
            line.append(char)
        if self.col == self.width - 1:
            self.pending = True
        else:
            self.col += 1

    def control(self, params: str, final: str) -> None:
        numbers = [int(p) if p.isdigit() else 0 for p in params.lstrip("?").split(";")] if params else []
        count = max(numbers[0], 1) if numbers else 1
        self.pending = False
        if params.startswith("?"):
            if "7" in params.lstrip("?").split(";"):
                self.wrap = final == "h"
            return
        match final:
            case "A":
                self.row = max(self.row - count, 0)
            case "B":
                self.row += count
            case "C":
                self.col = min(self.col + count, self.width - 1)
            case "D":
                self.col = max(self.col - count, 0)
            case "G":
                self.col = min(count - 1, self.width - 1)
            case "K":
                line = self._line()
                mode = numbers[0] if numbers else 0
                if mode == 0:
                    del line[self.col :]
                elif mode == 1:
                    line[: self.col + 1] = " " * min(self.col + 1, len(line))
                else:
                    line.clear()
            case "J":
                if (numbers[0] if numbers else 0) == 0:
                    del self._line()[self.col :]
                    del self.rows[self.row + 1 :]
            case _:
                pass  # colours and the rest change nothing a test reads

    def feed(self, text: str) -> None:
        position = 0
        for match in _SEQUENCE.finditer(text):
            self._chars(text[position : match.start()])
            if match.group(3) is not None:
                self.control(match.group(1), match.group(3))
            position = match.end()
        self._chars(text[position:])

    def _chars(self, text: str) -> None:
        for char in text:
            if char == "\r":
                self.col, self.pending = 0, False
            elif char == "\n":  # the pty's ONLCR: a newline returns the cursor too (rich writes bare newlines)
                self.row, self.col, self.pending = self.row + 1, 0, False
                self._line()
            elif char == "\b":
                self.col, self.pending = max(self.col - 1, 0), False
            elif char >= " ":
                self.put(char)


def screen(raw: str, width: int) -> list[str]:
    """The lines a terminal `width` columns wide shows after `raw` (scrollback included), trailing spaces removed."""
    grid = _Grid(width)
    grid.feed(raw)
    return ["".join(row).rstrip() for row in grid.rows]
