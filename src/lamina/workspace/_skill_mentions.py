"""Skill mentions: `[skill:name]` in a user message, outside code, resolved against a scan (pure).

Text is read as CommonMark: a mention inside a code block or an inline code span does not count.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lamina.workspace._skills import Skill, SkillScan

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = [
    "MentionResolution",
    "parse_skill_mentions",
    "resolve_mentions",
]


@dataclass(frozen=True, slots=True)
class MentionResolution:
    """Mentioned skill names split into known skills and unknown names, each in mention order."""

    found: tuple[Skill, ...]
    unknown: tuple[str, ...]
    """Names with no skill: a warning for the user, not a failed turn (SPEC F8)."""


_MENTION_RE: Final = re.compile(r"\[skill:([a-z0-9][a-z0-9_-]*)\]")
_PUNCTUATION: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def parse_skill_mentions(text: str) -> tuple[str, ...]:
    """The skill names mentioned as `[skill:name]` in `text`, first mention first, each once.

    Text is read as CommonMark: mentions inside fenced or indented code blocks and inside inline
    code spans do not count (a message that quotes the syntax does not load a skill); mentions in
    paragraphs, headings, lists, quotes and HTML blocks do.
    """
    names: list[str] = []
    for chunk in _prose(text):
        for match in _MENTION_RE.finditer(chunk):
            if match.group(1) not in names:
                names.append(match.group(1))
    return tuple(names)


def _prose(text: str) -> Iterable[str]:
    """The pieces of `text` outside code, in order.

    Code blocks come from the Markdown parser (it knows fences inside lists and quotes, and
    indented code); every other line is prose, including lines the parser keeps no token for,
    such as a line `[skill:x]: ...` that reads as a link reference definition. Prose is split at
    blank lines, since a code span never crosses a paragraph break, then stripped of code spans.
    """
    # Line breaks as the parser counts them (only LF, CRLF and CR), so its line numbers match ours.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    code = [False] * len(lines)
    for token in _markdown().parse(text):
        if token.type in ("fence", "code_block") and token.map is not None:
            start, end = token.map
            code[start:end] = [True] * (end - start)
    paragraph: list[str] = []
    for line, is_code in zip(lines, code, strict=True):
        if is_code or not line.strip(" \t>"):
            yield from _outside_code_spans("\n".join(paragraph))
            paragraph = []
        else:
            paragraph.append(line)
    yield from _outside_code_spans("\n".join(paragraph))


@functools.cache
def _markdown() -> MarkdownIt:
    """The CommonMark parser, built (its package imported) when the first message is read."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _outside_code_spans(text: str) -> Iterable[str]:
    """The pieces of one inline run outside its code spans.

    CommonMark: a run of n backticks opens a span that the next run of exactly n backticks closes;
    an unmatched run is plain text.
    """
    start = i = 0
    size = len(text)
    while i < size:
        ch = text[i]
        if ch == "\\" and i + 1 < size and text[i + 1] in _PUNCTUATION:
            i += 2  # an escaped backtick opens nothing
            continue
        if ch != "`":
            i += 1
            continue
        run_end = i
        while run_end < size and text[run_end] == "`":
            run_end += 1
        run = run_end - i
        close = _closing_run(text, run_end, run)
        if close is None:
            i = run_end
            continue
        yield text[start:i]
        start = i = close + run
    yield text[start:]


def _closing_run(text: str, pos: int, length: int) -> int | None:
    """Where the next run of exactly `length` backticks at or after `pos` starts, or None."""
    size = len(text)
    while True:
        found = text.find("`", pos)
        if found < 0:
            return None
        end = found
        while end < size and text[end] == "`":
            end += 1
        if end - found == length:
            return found
        pos = end


def resolve_mentions(names: Iterable[str], scan: SkillScan) -> MentionResolution:
    """The skills `names` refer to, and the names that match no skill, each in order and once."""
    found: list[Skill] = []
    unknown: list[str] = []
    for name in names:
        skill = scan.get(name)
        if skill is None:
            if name not in unknown:
                unknown.append(name)
        elif skill not in found:
            found.append(skill)
    return MentionResolution(found=tuple(found), unknown=tuple(unknown))
