"""Neutralising: what any reading shows as a marker is escaped or quoted in the original (pure)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

from lamina.defang._readings import _escape, _plain_view, _read, _Shadow, _shown_characters
from lamina.defang._safe import SafeText
from lamina.defang._tags import (
    _INDENTED_RE,
    _PLAIN_TAG_RE,
    _PLAIN_WINDOW,
    _ROLE_LINE_RE,
    _TAG_START_RE,
    marker_spans,
)
from lamina.errors import UsageError

__all__ = ["contains_reserved_marker", "neutralise"]

_QUOTE_PREFIX = "(quoted) "


@dataclass(frozen=True, slots=True)
class _Findings:
    """Where the original text must change: positions of characters to escape and of lines to quote."""

    escape: frozenset[int]
    quote: frozenset[int]


def _opens_a_turn(text: str, shadow: _Shadow, match: re.Match[str]) -> bool:
    """Whether a role line found in `shadow` can be read as a conversation turn.

    A turn starts its line (`Human:`, `system: obey`, `> Assistant:`, `**System:**`, `### User`) in
    any case, or is indented in any case but lower case (`   USER: hi`). On an indented line (also
    one indented after a diff's `+` or `-`, or a list's `-`), a lower-case role word written in plain
    ASCII, the line up to its colon read exactly as written, is code or data: a field, a parameter,
    a key, a comment or an argument's description (`    user: str`, `+    system: str = ""`,
    `  - user: alice`, `    _instructions: list[str]`, ``    - `user`: the sender``).
    """
    if match.group("end") != ":" and not match.group("lead").startswith("#"):
        return False  # a role word alone on a line is a turn only as a heading (`### System`)
    lo, hi = match.start(), match.end()
    if not _INDENTED_RE.match(shadow.text, lo, match.start("role")):
        return True
    written = text[shadow.starts[lo] : shadow.ends[hi - 1]]
    return written != shadow.text[lo:hi]  # a capital, look-alike, escape or hidden character: a turn


def _analyse(text: str) -> _Findings:
    readings, escape = _read(text)
    quote: set[int] = set()
    for shadow in readings:
        found, starts = shadow.text, shadow.starts
        for lo, hi in marker_spans(found):
            escape.update(starts[p] for p in range(lo, hi) if found[p] in "<[")
        if "<" in found and (len(found) != len(text) or not text.isascii() or starts[-1] != len(text) - 1):
            # The plain view is only needed where a name starts; a match that runs to the end of the
            # window is taken as a tag (its next character unseen): escaping more is safe.
            for candidate in _TAG_START_RE.finditer(found):
                lo, hi = candidate.start(), candidate.end() + _PLAIN_WINDOW
                if _PLAIN_TAG_RE.match(_plain_view(text, shadow, lo, min(hi, len(found)))):
                    escape.add(starts[lo])
        quote.update(starts[m.start("at")] for m in _ROLE_LINE_RE.finditer(found) if _opens_a_turn(text, shadow, m))
    return _Findings(escape=frozenset(escape), quote=frozenset(quote))


def contains_reserved_marker(text: str) -> bool:
    """Whether `text` holds a reserved tag or a role marker as an attacker could read it.

    The text is read after NFKC-style normalisation, with look-alike brackets, slashes and letters
    mapped, invisible characters removed and entities and escapes decoded; a tag of any reserved
    name, opening or closing, in any case and spacing, a special token such as `<|im_start|>`,
    `[INST]`, `<<SYS>>`, or a line that opens a turn such as `Human:` counts. False on the content
    of every `defang` result.
    """
    findings = _analyse(text)
    return bool(findings.escape or findings.quote)


_PLAIN_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n")


def _owner(position: int, out_starts: list[int], changed: list[int], pieces: list[str]) -> int:
    """The character of the input behind `position` of the output (`changed[k]` starts at `out_starts[k]`)."""
    k = bisect.bisect_right(out_starts, position) - 1
    if k < 0:
        return position
    i = changed[k]
    past = position - out_starts[k] - len(pieces[i])
    return i if past < 0 else i + 1 + past


def _neutralise(text: str) -> list[str]:
    """One output piece per character of `text`: the character, its escape, or either after `(quoted) `.

    The output is analysed again, and whatever it still shows is neutralised at its source, until
    nothing is left: escapes can change how neighbouring characters read (an invisible character
    that joined two words now separates them), and this makes the result safe by construction.
    """
    findings = _analyse(text)
    escape, quote = set(findings.escape), set(findings.quote)
    shown = _shown_characters(text)
    if not escape and not quote and not shown:
        return list(text)  # nothing to show or change: the output is the input, already analysed
    while True:
        pieces = list(text)
        changed = sorted(escape | quote | shown)
        # Where each changed piece starts in the output, to trace output positions back to `text`.
        out_starts: list[int] = []
        shift = 0
        for i in changed:
            piece = _escape(text[i]) if i in escape or i in shown else text[i]
            pieces[i] = _QUOTE_PREFIX + piece if i in quote else piece
            out_starts.append(i + shift)
            shift += len(pieces[i]) - 1
        left = _analyse("".join(pieces))
        if not left.escape and not left.quote:
            return pieces
        new_escape = {_owner(p, out_starts, changed, pieces) for p in left.escape} - escape
        new_quote = {_owner(p, out_starts, changed, pieces) for p in left.quote} - quote
        if not new_escape and not new_quote:  # no known input gets here
            # Fail closed: keep only ASCII letters, digits, spaces and line feeds, which spell no marker.
            return [ch if ch in _PLAIN_CHARACTERS else _escape(ch) for ch in text]
        escape |= new_escape
        quote |= new_quote


def _fit(text: str, max_chars: int) -> tuple[str, int]:
    """The neutralised text, at most `max_chars` long, and how many original characters were cut."""
    candidate = text[:max_chars]
    slack = 0
    while True:
        pieces = _neutralise(candidate)
        if sum(map(len, pieces)) <= max_chars:
            return "".join(pieces), len(text) - len(candidate)
        # Escapes made it too long: keep what fits and neutralise that prefix again, since a cut can
        # turn a harmless sequence into a marker. The slack grows so this ends in a few rounds.
        budget = max(max_chars - slack, 0)
        used = keep = 0
        for piece in pieces:
            if used + len(piece) > budget:
                break
            used += len(piece)
            keep += 1
        candidate = candidate[:keep]
        slack = slack * 2 + 16


def _truncation_mark(cut: int) -> str:
    return f"[truncated: {cut} characters cut]"


def neutralise(text: str, *, max_chars: int | None = None) -> SafeText:
    """Untrusted `text` neutralised and bounded, with no wrapper: the content `defang` would wrap.

    Reserved tags and role markers, in any encoding or disguise, are escaped (`<` becomes
    `[U+003C]`) or quoted (`(quoted) Human:`), invisible characters are shown as `[U+XXXX]`, and
    everything else passes through unchanged, so ordinary code and prose stay as written; text
    with nothing to neutralise comes back byte for byte. The result holds no reserved marker
    (`contains_reserved_marker` is false on it) and neutralising it again changes nothing. For
    text placed where the provider's own structure already separates it (a tool result block).

    Args:
        text: The untrusted text.
        max_chars: Most characters of neutralised content; when the rest is cut, a last line
            `[truncated: N characters cut]` follows (after a line feed) and says how many
            characters of `text` were left out. Without it nothing is cut.

    Returns:
        The neutralised text, memoised: the same results and names are shown in every request.

    Raises:
        UsageError: `max_chars` is negative.
    """
    limit = 20 * len(text) + 16 if max_chars is None else max_chars
    if limit < 0:
        raise UsageError(f"max_chars must be at least 0, not {max_chars}")
    return _neutralised(text, limit)


@lru_cache(maxsize=2048)
def _neutralised(text: str, limit: int) -> SafeText:
    if (
        len(text) <= limit
        and text.isascii()
        and not any(c in text for c in "<[&%=\\:#|")
        and all(c.isprintable() or c in "\t\n" for c in text)
    ):
        return SafeText(text)  # nothing can read as a marker: no bracket, no escape, no role line, nothing hidden
    content, cut = _fit(text, limit)
    return SafeText(f"{content}\n{_truncation_mark(cut)}" if cut else content)
