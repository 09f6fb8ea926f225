"""Grep's search of one file's text, and the worker process that runs it (stdlib only: it runs as a script).

The parent walks, opens and reads the files (by descriptor, inside the roots) and sends each one to
`python -I -S _grep_worker.py`, which searches it with Python's `re` and answers with the rows; the
parent kills the worker at the time limit or when the call is cancelled, whatever `re` is doing (a
pattern such as `^(a+)+$` can take hours on one line). Nothing of Lamina is imported here.
"""

from __future__ import annotations

import json
import re
import struct
import sys
from typing import Final, Literal

FRAME: Final = struct.Struct("!III")
"""Each file sent to the worker: its shown name's bytes, its data's bytes, and the rows it may add; then both."""
_WHOLE_TEXT_ANCHOR: Final = re.compile(r"\\[AZ]")
# `\A` and `\Z` mean "start/end of the line" when searching line by line but "of the file" when
# searching the whole text, so the whole-file pre-check would wrongly skip files.

Mode = Literal["files_with_matches", "content", "count"]


def compile_pattern(pattern: str, *, ignore_case: bool) -> re.Pattern[str]:
    """The pattern as Grep searches with it (multi-line, optionally ignoring case).

    Raises:
        re.error: The pattern is not a regular expression.
    """
    return re.compile(pattern, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))


def search_text(
    regex: re.Pattern[str], text: str, shown: str, mode: Mode, limit: int, max_line_chars: int
) -> tuple[list[str], bool]:
    """One file's rows in `mode`, and whether more matching lines were left out (`content` beyond `limit`).

    Args:
        regex: The compiled pattern.
        text: The file's text.
        shown: The file's path as shown.
        mode: `files_with_matches` (the path), `content` (`path:line:text` rows) or `count` (`path:n`).
        limit: At most this many `content` rows.
        max_line_chars: A longer matching line is cut.

    Returns:
        The rows, and whether `content` rows were left out.
    """
    if _WHOLE_TEXT_ANCHOR.search(regex.pattern) is None and regex.search(text) is None:
        return [], False
    if mode == "files_with_matches":
        return [shown], False
    rows: list[str] = []
    count = 0
    for number, line in enumerate(text.splitlines(), 1):
        if regex.search(line) is None:
            continue
        count += 1
        if mode == "content":
            if len(rows) >= limit:
                return rows, True
            if len(line) > max_line_chars:
                line = line[:max_line_chars] + " […]"
            rows.append(f"{shown}:{number}:{line}")
    if mode == "count":
        return ([f"{shown}:{count}"] if count else []), False
    return rows, False


def main() -> None:
    """Serve one Grep: a JSON header line, then `FRAME`d files until the input ends; one JSON line per file."""
    source = sys.stdin.buffer
    header = json.loads(source.readline())
    regex = compile_pattern(header["pattern"], ignore_case=header["ignore_case"])
    while True:
        head = source.read(FRAME.size)
        if len(head) < FRAME.size:
            return
        name_size, data_size, limit = FRAME.unpack(head)
        shown = source.read(name_size).decode("utf-8", errors="surrogatepass")
        text = source.read(data_size).decode("utf-8", errors="replace")
        rows, more = search_text(regex, text, shown, header["mode"], limit, header["max_line_chars"])
        sys.stdout.write(json.dumps([rows, more]) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
