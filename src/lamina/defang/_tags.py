"""Reserved names and the patterns that find a tag, a special token or a role line in a reading (pure)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from lamina.defang._readings import _CLASSES

__all__ = ["RESERVED_TAG_NAMES"]

RESERVED_TAG_NAMES: frozenset[str] = frozenset(
    {
        "branch_seed",
        "compaction_summary",
        "context_files",
        "date_time",
        "instructions",
        "interruption",
        "ledger",
        "memory",
        "mode_transition",
        "one_shot",
        "pinned",
        "preferences",
        "project_context",
        "project_manifest",
        "recovery",
        "session_state",
        "skill",
        "skills",
        "source",
        "source_guide",
        "sources",
        "stable_context",
        "system",
        "tool_result",
        "transfer_summary",
        "untrusted",
        "volatile_context",
    }
)
"""Block names Lamina uses for its own trusted structure; untrusted text can never open or close one."""

# Tags that pose as conversation roles or tool calls: never ours, never allowed in untrusted text.
_ROLE_TAG_NAMES = frozenset(
    {
        "assistant",
        "developer",
        "end_of_turn",
        "function_call",
        "function_calls",
        "function_results",
        "human",
        "im_end",
        "im_start",
        "invoke",
        "start_of_turn",
        "tool_call",
        "tool_calls",
        "tool_use",
        "user",
    }
)
_BRACKET_WORDS = ("inst", "sys", "system", "user", "assistant", "human", "developer")
_ROLE_WORDS = ("system", "developer", "user", "human", "assistant", "ai", "instruction", "instructions")


def _letter_pattern(c: str) -> str:
    """`c`, or a class that stands for it (a look-alike of `l`, `I` or `|` may stand for an `i` or an `l`)."""
    classes = "".join(placeholder for placeholder, members in _CLASSES.items() if c in members)
    return f"[{re.escape(c)}{classes}]" if classes else re.escape(c)


def _word_pattern(word: str) -> str:
    """`word`, where a class that stands for one of its letters may stand in for it."""
    return "".join(map(_letter_pattern, word))


def _name_pattern(name: str) -> str:
    return r"[\s_\-.]*".join(_word_pattern(word) for word in name.split("_"))


_TAG_NAMES = "|".join(_name_pattern(n) for n in sorted(RESERVED_TAG_NAMES | _ROLE_TAG_NAMES, key=len, reverse=True))
_ROLES = "|".join(_word_pattern(w) for w in sorted(_ROLE_WORDS, key=len, reverse=True))
_BAR = _letter_pattern("|")
_LEAD = r"(?:[>*_`~|+#\-]|[^\S\n])*+"
_TRAIL = r"(?:[*_`~]|[^\S\n])*+"
# A tag of ours or a role tag: `</untrusted>`, `< / System >`, `<x:memory a="1">`, `<\/skill>`.
_TAG_RE = re.compile(rf"<[\s/\\!?]*+(?:[a-z0-9_.\-]{{1,32}}:)?(?:{_TAG_NAMES})(?![a-z0-9])")
# Where a tag may start, whatever follows the name.
_TAG_START_RE = re.compile(rf"<[\s/\\!?]*+(?:[a-z0-9_.\-]{{1,32}}:)?(?:{_TAG_NAMES})")
_PLAIN_WINDOW = 2
"""Characters past such a start that the plain view covers: the one after the name, and one more."""
# The same on a plain view (see `_plain_view`), where only lower-case letters continue a name.
_PLAIN_TAG_RE = re.compile(rf"<[\s/\\!?]*+(?i:[a-z0-9_.\-]{{1,32}}:)?(?i:{_TAG_NAMES})(?![a-z0-9])")
_MARKER_RES = (
    _TAG_RE,
    # Llama chat markers.
    re.compile(rf"<\s*+<\s*+/?\s*+{_word_pattern('sys')}\s*+>\s*+>"),
    re.compile(
        rf"\[\s*+/?\s*+(?:{'|'.join(map(_word_pattern, _BRACKET_WORDS))})\s*+\]",
    ),
)
# A role word after the line's decoration (`>`, `#`, `*`, `-`) and before a colon, or a heading of one.
_ROLE_LINE_RE = re.compile(rf"^[^\S\n]*+(?P<at>(?P<lead>{_LEAD})(?P<role>{_ROLES}){_TRAIL}(?P<end>:|$))", re.MULTILINE)
_INDENTED_RE = re.compile(r"[+\-]?[ \t]")
"""How an indented line starts: with a space or a tab, also after a diff's `+` or `-` (or a list's `-`)."""


_TOKEN_OPEN_RE = re.compile(rf"<\s*+{_BAR}")
_TOKEN_CLOSE_RE = re.compile(rf"{_BAR}\s*+>")
_TOKEN_SHORT = 64
"""Most characters of a special token's body that spans lines."""


def _special_tokens(found: str) -> Iterator[tuple[int, int]]:
    """Where a reading holds a special token (`<|im_start|>`, `<｜begin▁of▁sentence｜>`): spans, in order.

    A `<`, a bar, a body on one line (or of at most 64 characters) with no `|` in it, a bar, a `>`.
    A look-alike of `l`, `I` or `|` is a bar at either end and a letter inside (`<|Іm_start|>`
    with a Cyrillic `І`). Linear: each opening is matched with the first closing after it, through
    sorted positions, so no opening scans the line again; spans do not overlap (an opening inside
    a token found is part of it).
    """
    if ">" not in found:
        return
    closings = [(m.start(), m.end()) for m in _TOKEN_CLOSE_RE.finditer(found)]
    if not closings:
        return
    starts = [start for start, _ in closings]
    pipes = [m.start() for m in re.finditer(r"\|", found)]
    breaks = [m.start() for m in re.finditer(r"\n", found)]
    covered = 0
    for opening in _TOKEN_OPEN_RE.finditer(found):
        if opening.start() < covered:
            continue  # inside a token already found: its `<` is escaped with it
        bar = opening.end() - 1
        k = bisect.bisect_right(starts, bar)
        if k == len(starts):
            return  # no closing after this opening, nor after any later one
        close_start, close_end = closings[k]
        p = bisect.bisect_right(pipes, bar)
        if p < len(pipes) and pipes[p] < close_start:
            continue  # a `|` inside the body
        b = bisect.bisect_right(breaks, bar)
        if b < len(breaks) and breaks[b] < close_start and close_start - bar - 1 > _TOKEN_SHORT:
            continue  # a long body over lines
        covered = close_end
        yield opening.start(), close_end


def marker_spans(found: str) -> Iterator[tuple[int, int]]:
    """Every tag of ours or a role's, special token and Llama marker in a reading, as spans."""
    for pattern in _MARKER_RES:
        for match in pattern.finditer(found):
            yield match.start(), match.end()
    yield from _special_tokens(found)
