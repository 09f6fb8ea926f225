"""Edit: replace an exact piece of text in a file (I/O: disk).

`old_string` must occur exactly once, or the call fails and says how many times it occurs (zero:
check the text; several: add context, or set `replace_all`). Matching is exact, whitespace and
line endings included. The file is read and rewritten through one location resolved by descriptor
(`lamina.workspace.locate`), atomically, and the result shows the changed lines, numbered as Read
numbers them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from lamina.tools._base import ToolContext, ToolOutput, located
from lamina.tools._file_tool import FileInput, FileTool
from lamina.tools._read import SNIFF_BYTES
from lamina.workspace import Located

DEFAULT_MAX_FILE_BYTES: Final = 10 * 1024 * 1024
_CONTEXT_LINES: Final = 2
_MAX_SNIPPET_LINES: Final = 20


class EditInput(FileInput, forbid_unknown_fields=True, kw_only=True):
    old_string: str
    new_string: str
    replace_all: bool = False


class EditTool(FileTool[EditInput]):
    """Replaces exact text in a file."""

    name = "Edit"
    description = (
        "Replace old_string with new_string in a file. old_string must match exactly, whitespace included, "
        "and occur once unless replace_all is true. Read the file first."
    )
    input_type = EditInput

    def __init__(self, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
        self.max_file_bytes = max_file_bytes

    def on_file(self, input: EditInput, ctx: ToolContext, path: Path, shown: str) -> ToolOutput:
        if not input.old_string:
            return _fail("old_string is empty; give the exact text to replace (to create a file, use Write).")
        if input.old_string == input.new_string:
            return _fail("old_string and new_string are the same; there is nothing to change.")
        try:
            with located(ctx, path, write=True) as where:
                return self._edit_located(where, input, shown)
        except FileNotFoundError:
            return _fail(f"File not found: {shown} (to create a file, use Write).")
        except IsADirectoryError:  # from `fdopen`, which refuses a folder
            return _fail(f"{shown} is a folder, not a file.")
        except OSError as exc:
            return _fail(f"Cannot edit {shown}: {exc.strerror or type(exc).__name__}")

    def _edit_located(self, where: Located, input: EditInput, shown: str) -> ToolOutput:
        """Read the located file by descriptor, change it, and replace it in the same held folder."""
        with os.fdopen(where.open(), "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                return _fail(f"{shown} is not a regular file (a device, socket or pipe).")
            if st.st_size > self.max_file_bytes:
                limit = self.max_file_bytes
                return _fail(f"{shown} is too large to edit ({st.st_size:,} bytes; the limit is {limit:,}).")
            data = handle.read()
        if b"\0" in data[:SNIFF_BYTES]:
            return _fail(f"{shown} is a binary file; Edit changes text files only.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _fail(f"{shown} is not UTF-8 text (bad byte at offset {exc.start}); Edit changes UTF-8 files only.")
        count = text.count(input.old_string)
        if count == 0:
            hint = ""
            if "\r\n" in text and "\n" in input.old_string and "\r\n" not in input.old_string:
                hint = " The file has Windows line endings (\\r\\n); old_string must use them too."
            return _fail(
                f"old_string was not found in {shown} (0 matches). It must match the file exactly, "
                f"whitespace and indentation included; Read the file to copy the text.{hint}"
            )
        if count > 1 and not input.replace_all:
            return _fail(
                f"old_string occurs {count} times in {shown}; it must occur exactly once. Include more "
                "surrounding text to pick one occurrence, or set replace_all to change all of them."
            )
        start = text.index(input.old_string)
        new_text = text.replace(input.old_string, input.new_string)
        try:
            where.replace(new_text.encode("utf-8", errors="surrogatepass"))
        except OSError as exc:
            return _fail(f"Cannot write {shown}: {exc.strerror or type(exc).__name__}")
        what = f"{count} occurrences" if count > 1 else "1 occurrence"
        return ToolOutput(f"Edited {shown}: replaced {what}.\n{_snippet(new_text, start, input.new_string)}")


def _fail(message: str) -> ToolOutput:
    return ToolOutput(message, is_error=True)


def _snippet(text: str, start: int, inserted: str) -> str:
    """The lines around the first replacement, numbered as Read numbers them."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    first = text.count("\n", 0, start)  # 0-based line of the replacement
    last = first + inserted.count("\n")
    low = max(0, first - _CONTEXT_LINES)
    high = min(len(lines), last + _CONTEXT_LINES + 1, low + _MAX_SNIPPET_LINES)
    rows = [f"{number + 1:>6}\t{lines[number].rstrip(chr(13))}" for number in range(low, high)]
    if not rows:
        return "The file is now empty."
    return f"Lines {low + 1}–{high} now read:\n" + "\n".join(rows)
