r"""Read again: a pointer when the request already holds the same bytes, else only the changes (pure).

The request's earlier Read results come from the provider view (`ToolContext.request_results`),
each with its `ReadStamp` (file, SHA-256, window). A pointer is sent only when the latest result
for the same file and window carries the same hash and exactly the text this Read would send (a
pruned result shows its note instead, so it never matches). When the file changed and that result
shows the whole window, the changes alone go when they are smaller: hunks headed `@@ -a,b +c,d @@`
(unified diff's line ranges), each old line as `-text`, each new one as `+N\ttext`, N its number now.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from lamina.session import ReadStamp, ToolResult
from lamina.tokens import TokenEstimator

_ROW: Final = re.compile(r"(\d+)\t(.*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Shown:
    """A Read result taken apart: its numbered rows and its closing note."""

    first: int
    """The number of the first row."""
    texts: tuple[str, ...]
    note: str | None


def shown_of(content: str) -> Shown | None:
    """The rows and note of a whole-window Read result; None for anything else (a note, a pointer, a pruned result).

    Args:
        content: A result's text as the request holds it.

    Returns:
        The rows (consecutive numbers) and the closing note, or None.
    """
    lines = content.split("\n")
    note = lines.pop() if len(lines) > 1 and lines[-1].startswith("[") else None
    texts: list[str] = []
    first = 0
    for line in lines:
        match = _ROW.fullmatch(line)
        if match is None:
            return None
        number = int(match.group(1))
        if not texts:
            first = number
        elif number != first + len(texts):
            return None
        texts.append(match.group(2))
    return Shown(first, tuple(texts), note) if texts else None


def changes(old: Shown, new: Shown) -> list[str]:
    """The hunks that turn `old`'s rows into `new`'s, numbered as the file is now (no context lines).

    Args:
        old: The rows the request holds.
        new: The rows this Read would show.

    Returns:
        The lines of the hunks, empty when the rows are the same.
    """
    lines: list[str] = []
    matcher = difflib.SequenceMatcher(None, old.texts, new.texts, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lines.append(f"@@ -{old.first + i1},{i2 - i1} +{new.first + j1},{j2 - j1} @@")
        lines.extend(f"-{text}" for text in old.texts[i1:i2])
        lines.extend(f"+{new.first + j}\t{new.texts[j]}" for j in range(j1, j2))
    return lines


def _same_window(a: ReadStamp, b: ReadStamp) -> bool:
    return a.path == b.path and a.offset == b.offset and a.limit == b.limit


def _changes_text(base: ToolResult, body: str, shown: str) -> str | None:
    """The changes from `base` to `body` as Read sends them, or None when `base` is not a whole window."""
    old, new = shown_of(base.content), shown_of(body)
    if old is None or new is None:
        return None
    lines = [f"[{shown} changed since the latest Read of these lines, still above; only the changes:]"]
    lines.extend(changes(old, new))
    if new.note != old.note:
        lines.append(new.note or "[the earlier closing note no longer holds: the file ends with these lines]")
    return "\n".join(lines)


def answer(
    earlier: Iterable[ToolResult], stamp: ReadStamp, body: str, shown: str, estimator: TokenEstimator
) -> tuple[str, ReadStamp]:
    """What a Read sends, given the results the request holds: a pointer, the changes, or `body`.

    Args:
        earlier: The tool results the next request holds, oldest first.
        stamp: The new read's file, hash and window.
        body: The whole window as Read renders it.
        shown: The path as the model is shown it.
        estimator: Counts tokens, to send the changes only when they are smaller.

    Returns:
        The text to send and the stamp to log with it.
    """
    results: Sequence[ToolResult] = [r for r in earlier if r.read is not None and not r.is_error]
    by_call = {r.call_id: r for r in results}
    latest = next(
        (r for r in reversed(results) if r.read and r.read.unchanged_from is None and _same_window(r.read, stamp)),
        None,
    )
    if latest is None or latest.read is None:
        return body, stamp
    base_id = latest.read.changes_from
    if latest.read.sha256 == stamp.sha256:
        if base_id is None:
            same = latest.content == body
        else:
            base = by_call.get(base_id)
            same = base is not None and latest.content == _changes_text(base, body, shown)
        if same:  # byte-identical to what the request holds
            pointer = f"[{shown} is unchanged since the latest Read of these lines; that result above is current]"
            return pointer, msgspec.structs.replace(stamp, unchanged_from=latest.call_id)
    if base_id is None:
        diff = _changes_text(latest, body, shown)
        if diff is not None and estimator.count(diff) < estimator.count(body):
            return diff, msgspec.structs.replace(stamp, changes_from=latest.call_id)
    return body, stamp
