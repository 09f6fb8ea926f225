r"""Read: a text file's lines, numbered, a window at a time (I/O: disk).

Output is numbered lines (`7\tline seven`: the number and a tab, no padding, which would cost
tokens on every line), so the model can cite line numbers and pass `offset` to continue. One call
returns at most `max_lines` lines and stays under the session's offload threshold (so a read never
has to be offloaded itself); an overlong line is cut at `max_line_chars`. Whatever was left out is
said in a closing note with the `offset` to use next. Binary files (a NUL byte in the first 8 KiB)
and missing paths are clear errors, never exceptions.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, BinaryIO, Final

import msgspec

from lamina._text_codec import UTF8, find_codec
from lamina.session import ReadStamp
from lamina.tools._base import ToolContext, ToolOutput, located
from lamina.tools._file_tool import FileInput, FileTool
from lamina.tools._reread import answer

DEFAULT_MAX_LINES: Final = 2_000
DEFAULT_MAX_LINE_CHARS: Final = 2_000
SNIFF_BYTES: Final = 8_192
"""A NUL byte among a file's first bytes marks it as binary."""
COUNT_ALL_BELOW_BYTES: Final = 8 * 1024 * 1024
"""Files up to this size are read to the end so the note can give the total line count."""
_BUDGET_SHARE: Final = 0.9  # of the offload threshold, leaving room for the closing note
_SKIP_CHUNK: Final = 65_536


@dataclass(slots=True)
class _Window:
    """The rows one Read shows, and what the note says about the rest."""

    rows: list[str] = field(default_factory=list)
    number: int = 0
    """Lines read so far (the file's total when it was read to the end)."""
    cut_lines: int = 0
    next_line: int | None = None
    """The first line not shown, when the window stopped early."""


def numbered(number: int, line: str) -> str:
    """One line of Read's output: its number, a tab, the text."""
    return f"{number}\t{line}"


class ReadInput(FileInput, forbid_unknown_fields=True, kw_only=True):
    offset: Annotated[int, msgspec.Meta(ge=1, description="First line (1-based).")] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, description="Number of lines (default: up to 2,000).")] | None = None


class ReadTool(FileTool[ReadInput]):
    """Reads a text file, numbered by line, a window at a time."""

    name = "Read"
    description = (
        "Read a text file, lines numbered (number, tab, text), a window at a time: the closing note gives "
        "the offset to continue."
    )
    read_only = True
    input_type = ReadInput

    def __init__(self, *, max_lines: int = DEFAULT_MAX_LINES, max_line_chars: int = DEFAULT_MAX_LINE_CHARS) -> None:
        self.max_lines = max_lines
        self.max_line_chars = max_line_chars

    def on_file(self, input: ReadInput, ctx: ToolContext, path: Path, shown: str) -> ToolOutput:
        try:
            with located(ctx, path) as where, os.fdopen(where.open(), "rb") as raw:
                return self._read_open(raw, where.real, input, ctx, shown)
        except FileNotFoundError:
            return ToolOutput(f"File not found: {shown}", is_error=True)
        except IsADirectoryError:  # from `fdopen`, which refuses a folder
            return ToolOutput(f"{shown} is a folder, not a file; use Glob to list its files.", is_error=True)
        except OSError as exc:
            return ToolOutput(f"Cannot read {shown}: {exc.strerror or type(exc).__name__}", is_error=True)

    def _read_open(self, raw: BinaryIO, real: str, input: ReadInput, ctx: ToolContext, shown: str) -> ToolOutput:
        """Read's answer for the file open as `raw` (opened by descriptor, never through a link)."""
        st = os.fstat(raw.fileno())
        if not stat.S_ISREG(st.st_mode):
            return ToolOutput(f"{shown} is not a regular file (a device, socket or pipe).", is_error=True)
        head = raw.read(SNIFF_BYTES)
        codec = find_codec(head, complete=len(head) == st.st_size)
        if codec is None and b"\0" in head:
            return ToolOutput(
                f"{shown} is a binary file ({st.st_size:,} bytes); Read shows text files only.", is_error=True
            )
        raw.seek(0)
        if st.st_size > COUNT_ALL_BELOW_BYTES:  # too large to hold: streamed, never pointed at
            codec = codec or UTF8
            text = io.TextIOWrapper(raw, encoding=codec.codec, errors="replace", newline=None)
            try:
                return self._window(text, input, ctx, shown, st.st_size, note=codec.note)
            finally:
                text.detach()  # the caller closes the file
        data = raw.read()
        codec = find_codec(data) or UTF8
        with io.TextIOWrapper(io.BytesIO(data), encoding=codec.codec, errors="replace", newline=None) as text:
            output = self._window(text, input, ctx, shown, len(data), note=codec.note)
        if output.is_error or not data:
            return output
        return self._stamped(output.content, data, real, input, ctx, shown)

    def _stamped(self, body: str, data: bytes, real: str, input: ReadInput, ctx: ToolContext, shown: str) -> ToolOutput:
        """The window stamped with the file's hash: a pointer or the changes when the request holds an earlier read."""
        digest = hashlib.sha256(data).hexdigest()
        stamp = ReadStamp(path=real, sha256=digest, offset=input.offset or 1, limit=input.limit)
        if ctx.request_results is None:
            return ToolOutput(body, read=stamp)
        content, stamp = answer(ctx.request_results(), stamp, body, shown, ctx.estimator)
        return ToolOutput(content, read=stamp)

    def _window(
        self, text: io.TextIOWrapper, input: ReadInput, ctx: ToolContext, shown: str, size: int, *, note: str = ""
    ) -> ToolOutput:
        first = input.offset or 1
        wanted = min(input.limit or self.max_lines, self.max_lines)
        budget = int(ctx.offload.threshold_tokens * _BUDGET_SHARE)
        window = self._collect(text, first, wanted, budget, ctx, size)
        if window.number == 0:
            return ToolOutput(f"{shown} is empty.")
        if not window.rows:
            return ToolOutput(
                f"offset {first} is past the end of {shown}, which has {window.number:,} lines.",
                is_error=True,
            )
        notes = ([note] if note else []) + self._notes(window, input, first, size)
        body = "\n".join(window.rows)
        return ToolOutput(body + ("\n[" + "; ".join(notes) + "]" if notes else ""))

    def _collect(
        self, text: io.TextIOWrapper, first: int, wanted: int, budget: int, ctx: ToolContext, size: int
    ) -> _Window:
        """The numbered rows from line `first`: at most `wanted`, within `budget` tokens (I/O: the open file)."""
        window = _Window()
        used = 0
        while True:
            line, cut = self._next_line(text)
            if not line and not cut:
                break
            window.number += 1
            number = window.number
            if number < first:
                continue
            if window.next_line is not None or len(window.rows) >= wanted:
                window.next_line = window.next_line or number
                if size > COUNT_ALL_BELOW_BYTES:
                    break
                continue  # count the rest for the note
            row = numbered(number, line.rstrip(chr(10))) + (" […line cut]" if cut else "")
            cost = ctx.estimator.count(row) + 1
            if window.rows and used + cost > budget:
                window.next_line = number
                continue
            window.rows.append(row)
            used += cost
            window.cut_lines += cut
        return window

    def _notes(self, window: _Window, input: ReadInput, first: int, size: int) -> list[str]:
        """What the closing note says: lines cut, and where to continue when the window stopped early."""
        notes: list[str] = []
        if window.cut_lines:
            notes.append(f"{window.cut_lines} line(s) longer than {self.max_line_chars:,} characters were cut")
        next_line = window.next_line
        if next_line is not None:
            total = window.number if size <= COUNT_ALL_BELOW_BYTES else None
            of = f" of {total:,}" if total is not None else f" (the file has {size:,} bytes)"
            notes.append(
                f"showing lines {first:,}–{next_line - 1:,}{of}; "
                f"continue with offset={next_line}" + ("" if input.limit else " (and a limit if you need less)")
            )
        return notes

    def _next_line(self, text: io.TextIOWrapper) -> tuple[str, bool]:
        """The next line (at most `max_line_chars`) and whether it was cut; ("", False) at the end."""
        line = text.readline(self.max_line_chars + 1)
        if len(line) <= self.max_line_chars or line.endswith("\n"):
            return line, False
        rest = line[self.max_line_chars :]
        while not rest.endswith("\n"):  # skip the rest of an overlong line without holding it
            rest = text.readline(_SKIP_CHUNK)
            if not rest:
                break
        return line[: self.max_line_chars], True
