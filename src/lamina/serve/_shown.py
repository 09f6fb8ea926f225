"""What a page shows of a text from a session: controls made visible, and cut to a bound in bytes (pure).

Every value a page template prints goes through `visible` (the template engine's `finalize`) before
it is HTML-escaped: control characters and bidirectional controls become visible symbols, the same
way the CLI prints them (`lamina.cli`'s one console wrapper), so a right-to-left override in a tool
result cannot reorder what the page shows. `fit` cuts a text so that what the page sends of it (made
visible, then escaped) stays within a number of bytes.
"""

from __future__ import annotations

from typing import Final

from lamina.defang import show_controls  # the one escaping of controls and bidi, shared with the CLI
from lamina.errors import MissingExtraError

try:
    from markupsafe import Markup, escape
except ImportError as exc:
    raise MissingExtraError.of(exc, "the session inspector (lamina serve)", "serve") from None

MAX_CHAR_BYTES: Final = 14
"""The most bytes one character can take on a page: `<U+202E>`, escaped, is `&lt;U+202E&gt;`."""


def visible(value: object) -> object:
    """`value` with control and bidi characters made visible, when it is text (the pages' `finalize`)."""
    if isinstance(value, Markup):
        return Markup(show_controls(str(value)))
    if isinstance(value, str):
        return show_controls(value)
    return value


def shown_bytes(text: str) -> int:
    """How many bytes a page sends for `text` (made visible, then escaped)."""
    return len(str(escape(show_controls(text))).encode())


def fit(text: str, budget: int) -> str:
    """The longest start of `text` found (a few proportional cuts) whose `shown_bytes` is at most `budget`.

    Args:
        text: Any text.
        budget: Bytes; 0 or less gives the empty string.

    Returns:
        `text` itself when it fits, else a start of it that does.
    """
    if budget <= 0:
        return ""
    if len(text) * MAX_CHAR_BYTES <= budget:
        return text
    end = min(len(text), budget)  # every character takes at least one byte
    while end > 0:
        size = shown_bytes(text[:end])
        if size <= budget:
            break
        end = min(end - 1, end * budget // size)
    if 0 < end < len(text) and text[end - 1 : end + 1] == "\r\n":
        end -= 1  # a CRLF is shown as one line break: do not cut it in two
    return text[:end]


PATH_CHARS: Final = 30
"""Characters of a path a table cell shows (the whole path is in the cell's title)."""


def middle(path: str, limit: int = PATH_CHARS) -> str:
    """`path` shortened from the middle to about `limit` characters: its first folders, `…`, its last ones.

    Whole names are kept where they fit (the last one always, cut in its middle only when it alone is
    too long), so both the root the path starts from and the folder it names stay readable.
    """
    if len(path) <= limit:
        return path
    parts = path.split("/")
    tail = [parts.pop()]
    if len(tail[0]) + 2 > limit:
        keep = max(limit - 1, 2)
        return tail[0][: keep // 2] + "…" + tail[0][len(tail[0]) - (keep - keep // 2) :]
    room = limit - len(tail[0]) - 2  # the "…/" before the tail
    first = 2 if parts and parts[0] == "" else 1  # the root folder it starts from ("/home", "C:", "src")
    head: list[str] = []
    if len("/".join(parts[:first])) + 1 <= room:
        head, parts = parts[:first], parts[first:]
        room -= len("/".join(head)) + 1
    while parts and len(parts[-1]) + 1 <= room:
        room -= len(parts[-1]) + 1
        tail.insert(0, parts.pop())
    if not parts:
        return "/".join([*head, *tail])
    return "/".join([*head, "…", *tail])
