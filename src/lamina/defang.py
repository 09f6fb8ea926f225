"""Defanging: untrusted text wrapped in one labelled block that nothing inside can end or forge (pure).

Project files, memory, tool output, attachment text and summaries are data, not instructions
(SPEC F6, invariant 5). `defang` wraps such text as

```
<untrusted source="AGENTS.md" authority="project_file">
<the neutralised content>
[truncated: 1234 characters cut]            (only when the content was cut)
</untrusted>
```

and `render_block` builds every block of Lamina's own, so all our tags are made one way.

How the content is neutralised (`neutralise` returns it without the wrapper). The text is read
the ways an attacker may count on a reader (or a model) reading it. Each character is mapped to
how it reads: look-alikes from Unicode's own confusables data (UTS #39) and character names, as
generated into `look_alikes.txt` with the Unicode version recorded (see `lamina._look_alikes`:
`а` reads `a`, `＜`, `‹` and `〈` read `<`, a small capital reads as its letter); other characters
NFKD-normalised with combining marks dropped; invisible characters removed; every line break made
a line feed; then case-folded. A look-alike of `l`, `I` or `|`, which UTS #39 gives one prototype,
counts as any of them. ASCII is read as written. This once taking entities and escapes literally,
once with HTML entities decoded (`&lt;`, `&#60;`, `&#x3c;`, `&amp;lt;`, repeatedly), once with C,
JSON and JavaScript escapes (`\\u003c`, `\\u{3c}`, `\\x3c`, octal `\\074`, `\\n`, `\\/`),
percent-encoding (`%3C`) and quoted-printable (`=3C`, and its soft line break) decoded too, and
once reading backslash-hex as CSS escapes (`\\3c `). Each character of a reading knows the
characters of the original it comes from. Whatever any reading shows is neutralised in the
original, and nothing is dropped; all else, ordinary code included (`a < b`, `List<String>`,
`<div>`, `x[i]`, `"\\n"`), passes unchanged:

- a tag of a reserved name (`RESERVED_TAG_NAMES`, plus role tags such as `<user>`, `<im_start>`,
  `<tool_call>`), opening or closing, in any case, with whitespace, slashes, namespaces or
  attributes, and ended by anything but a plain ASCII letter or digit; a special token `<|...|>`;
  a Llama marker `<<SYS>>`, `[INST]`, `[SYSTEM]`: the original character behind each `<` or `[`
  of the span is shown as an escape, so the tag can no longer start, whatever the encoding it
  was written in (`<` becomes `[U+003C]`, `&lt;` becomes `[U+0026]lt;`, `＜` becomes `[U+FF1C]`);
- a line that starts a conversation turn (`Human:`, `Assistant:`, `System:`, `User:`, `AI:`,
  `Developer:`, `Instruction:`, in any case, also after `>`, `#`, `*` or `-`, and headings such as
  `### System`), or an indented one written any way but in plain lower case (`   USER: hi`): the
  line gets the visible prefix `(quoted) `. A lower-case role word on an indented line (also after
  a diff's `+` or `-`) is a field, a parameter or a key, not a turn, and stays (`    user: str`);
- invisible characters (zero-width, bidi controls, Unicode tag characters, other format and
  control characters, variation selectors except the emoji ones, unassigned code points, lone
  surrogates, line and paragraph separators, a carriage return not followed by a line feed) are
  shown as `[U+200B]`-style escapes, except where ordinary text needs them: a joiner after a
  letter of a script whose words use joiners or inside an emoji sequence, a subdivision flag's
  tags, the prepended concatenation marks (`U+0600`), code points kept for future emoji.

The result is read again and neutralised again until no reading shows anything (showing an
invisible character can end a name that it used to join), so `contains_reserved_marker` is false
on every defanged content by construction. Content is bounded: at most `max_chars` characters
after neutralisation; the rest is cut and counted in a visible mark.
"""

from __future__ import annotations

import bisect
import html
import html.entities
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from lamina import _look_alikes
from lamina.errors import UsageError
from lamina.parts import Authority, SafeText

__all__ = [
    "RESERVED_TAG_NAMES",
    "admit",
    "contains_reserved_marker",
    "defang",
    "escape_path",
    "join",
    "neutralise",
    "render_block",
    "trusted",
]

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

_WRAPPER = "untrusted"
_QUOTE_PREFIX = "(quoted) "
_SOURCE_LIMIT = 200
"""Most characters the escaped `source` attribute may take; a longer one is cut and ends in `…`."""
_DECODE_ROUNDS = 8
"""Rounds of entity and escape decoding; whatever still decodes after them is escaped outright."""

# --- look-alikes ---------------------------------------------------------------------------------

_L_CLASS = "\ufdd0"
"""Stands, in a reading, for a look-alike of `l`, `I` or `|` (UTS #39 gives them one prototype).

A noncharacter: never in any reading otherwise, since the text's own noncharacters are invisible
(and removed from readings). Name patterns take it for `i` or `l`, special tokens for `|`.
"""


def _load_look_alikes() -> tuple[dict[str, str], str]:
    table, version = _look_alikes.load()
    return {ch: reading.replace("l", _L_CLASS).replace("|", _L_CLASS) for ch, reading in table.items()}, version


_LOOK_ALIKES, LOOK_ALIKES_UNICODE_VERSION = _load_look_alikes()
"""Each look-alike character and its ASCII reading, from Unicode's confusables data (UTS #39) and
character names (see `lamina._look_alikes`), and the version of that data."""

_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"})
# Invisible characters outside those categories: fillers, joiners and variation selectors
# (U+FE0E and U+FE0F stay, they only choose text or emoji presentation).
_EXTRA_HIDDEN = frozenset(
    chr(c)
    for c in (
        0x034F,
        0x115F,
        0x1160,
        0x17B4,
        0x17B5,
        0x180B,
        0x180C,
        0x180D,
        0x180F,
        0x3164,
        0xFFA0,
        *range(0xFE00, 0xFE0E),
        *range(0xE0100, 0xE01F0),
    )
)


# Format characters that are seen: the prepended concatenation marks (Arabic number signs and the like).
_VISIBLE_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd")


def _pictograph_to_come(code: int) -> bool:
    """Whether an unassigned code point is one Unicode keeps for pictographs (Extended_Pictographic, UTS #51)."""
    return 0x1F000 <= code <= 0x1FAFF or 0x1FC00 <= code <= 0x1FFFD


def _hidden(ch: str) -> bool:
    """Whether `ch` is invisible (or a control character) and so must be shown as an escape."""
    if ch in "\t\n" or ch in _VISIBLE_FORMAT:
        return False
    category = unicodedata.category(ch)
    if category == "Cn" and _pictograph_to_come(ord(ch)):
        return False  # an emoji newer than this Python's Unicode data
    return category in _HIDDEN_CATEGORIES or ch in _EXTRA_HIDDEN


_ZWNJ, _ZWJ = "\u200c", "\u200d"
# Scripts whose words use joiners: the Arabic family's joining forms, the Brahmic scripts' conjuncts.
_JOINING_SCRIPTS = (
    *("ARABIC", "SYRIAC", "NKO", "MONGOLIAN", "PHAGS-PA", "MANICHAEAN", "PSALTER", "ADLAM", "HANIFI", "SOGDIAN"),
    *("DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA", "TAMIL", "TELUGU", "KANNADA", "MALAYALAM"),
    *("SINHALA", "TIBETAN", "MYANMAR", "KHMER", "BALINESE", "JAVANESE", "TAI THAM", "LAO", "THAI"),
)
_EMOJI_TAG_RE = re.compile(
    "\U0001f3f4\ufe0f?([\U000e0061-\U000e007a]{2}[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,4}\U000e007f)"
)
"""A subdivision flag (England's is 🏴 and the tags `gbeng`, UTS #51): its tags spell a region code, nothing more."""


def _before(text: str, i: int, skip: str | frozenset[str] = "") -> str:
    """The character before position `i`, passing visible combining marks and the characters in `skip`."""
    while i > 0 and (
        (unicodedata.category(text[i - 1]) in ("Mn", "Mc") and not _hidden(text[i - 1])) or text[i - 1] in skip
    ):
        i -= 1
    return text[i - 1] if i > 0 else ""


_EMOJI_MODIFIERS = frozenset("\ufe0f\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff")


def _never_escaped(ch: str) -> bool:
    """Whether `ch` reads as nothing that can be escaped (a `<`, `[` or the start of an encoding), so
    what it tells of a joiner beside it stays true in the output."""
    return not any(c in "<[&\\%=" for c in _fold_char(ch) + _lower_char(ch))


def _pictograph(ch: str) -> bool:
    """Whether `ch` can be part of an emoji sequence: a symbol beyond ASCII (emoji are `So`, `↔` is `Sm`)."""
    if not ch or ch.isascii() or not _never_escaped(ch):
        return False
    category = unicodedata.category(ch)
    return category[0] == "S" or (category == "Cn" and _pictograph_to_come(ord(ch)))


def _joins(text: str, i: int) -> bool:
    """Whether the joiner at `i` is ordinary text: after a letter (and its marks) of a script whose
    words use joiners (Persian `می‌خواهم`, Devanagari `क्‍ष`), or inside an emoji sequence (`👨‍👩‍👧`)."""
    letter = _before(text, i)
    if (
        letter
        and unicodedata.category(letter)[0] == "L"
        and unicodedata.name(letter, "").startswith(_JOINING_SCRIPTS)
        and _never_escaped(letter)
    ):
        return True
    return text[i] == _ZWJ and _pictograph(_before(text, i, _EMOJI_MODIFIERS)) and _pictograph(text[i + 1 : i + 2])


def _shown_characters(text: str) -> set[int]:
    """Where `text` holds an invisible or control character that must be shown as an escape.

    Not a CRLF's carriage return, a joiner that ordinary text of its script or an emoji sequence
    needs, or the tags of a subdivision flag.
    """
    shown = {m.start() for m in _SPECIAL_RE.finditer(text) if _hidden(m.group())}
    if not shown:
        return shown
    shown -= {i for i in shown if text[i] == "\r" and text[i + 1 : i + 2] == "\n"}
    shown -= {i for i in shown if text[i] in (_ZWNJ, _ZWJ) and _joins(text, i)}
    for flag in _EMOJI_TAG_RE.finditer(text):
        shown -= set(range(flag.start(1), flag.end(1)))
    return shown


def _escape(ch: str) -> str:
    return f"[U+{ord(ch):04X}]"


@lru_cache(maxsize=8192)
def _fold_char(ch: str) -> str:
    """How one character reads to an attacker before decoding: NFKD, no marks, look-alikes mapped."""
    if ch in _LINE_BREAKS:
        return "\n"
    if _hidden(ch):
        return ""
    if ch in _LOOK_ALIKES:
        return _LOOK_ALIKES[ch]
    out = []
    for d in unicodedata.normalize("NFKD", ch):
        if unicodedata.category(d) in ("Mn", "Me") or _hidden(d):
            continue
        out.append(_LOOK_ALIKES.get(d, d))
    return "".join(out)


@lru_cache(maxsize=8192)
def _lower_char(ch: str) -> str:
    """Case-folded `ch`, marks dropped again (`İ` folds to `i` plus a dot)."""
    out = []
    for c in ch.casefold():
        if c in _LOOK_ALIKES:
            out.append(_LOOK_ALIKES[c])
            continue
        for d in unicodedata.normalize("NFKD", c):
            if unicodedata.category(d) not in ("Mn", "Me"):
                out.append(_LOOK_ALIKES.get(d, d))
    return "".join(out)


# --- decoding entities and escapes ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Shadow:
    """Text as an attacker reads it, each character knowing the span of the original it comes from."""

    text: str
    starts: list[int]
    """Original position of the first character behind each shadow character: the one to escape."""
    ends: list[int]
    """Original position just after the last character behind each shadow character."""


# The entity grammar is the one `html.unescape` uses, so what it decodes we decode.
_ENTITY = r"(?P<entity>&(?:\#[0-9]+;?|\#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?))"
# C, JavaScript, JSON and Python escapes; percent-encoding; quoted-printable (and its soft line break).
_C_ESCAPE = (
    r"(?P<hex>\\u\{[0-9a-fA-F]{1,6}\}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2})"
    r"|(?P<octal>\\[0-7]{1,3})|(?P<char>\\[nrtbfv/\"'\\])"
    r"|(?P<percent>%[0-9a-fA-F]{2})|(?P<qp>=[0-9a-fA-F]{2}|=\r?\n)"
)
# CSS escapes: up to six hex digits and one optional white space (`\3c `), or any other character.
# The lenient reader takes `\x3c`, `\u003c` and a three-digit octal `\074` first, as a person would.
_LENIENT_ESCAPE = (
    r"(?P<hex>\\u\{[0-9a-fA-F]{1,6}\}|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2})"
    r"|(?P<octal>\\[0-3][0-7]{2}(?![0-9a-fA-F]))"
    r"|(?P<css>\\[0-9a-fA-F]{1,6}(?:\r\n|[ \t\r\n\f])?)|(?P<cssc>\\[^0-9a-fA-F\r\n\f])"
    r"|(?P<percent>%[0-9a-fA-F]{2})|(?P<qp>=[0-9a-fA-F]{2}|=\r?\n)"
)
_DECODERS = (
    re.compile(_ENTITY),
    # The lookahead lets the engine skip quickly to where a token can start.
    re.compile(f"(?=[&\\\\%=])(?:{_ENTITY}|{_C_ESCAPE})"),
    re.compile(f"(?=[&\\\\%=])(?:{_ENTITY}|{_LENIENT_ESCAPE})"),
)
"""The decoding readers: one that decodes HTML entities; one that also decodes C, JSON and
JavaScript escapes (`\\u003c`, `\\x3c`, octal `\\074`, `\\n`, `\\/`), percent-encoding (`%3C`) and
quoted-printable (`=3C`); one that reads a backslash and hex digits as a CSS escape (`\\3c `) unless
it is a `\\x`, `\\u` or three-digit octal escape, and decodes entities, percent-encoding and
quoted-printable too. They are apart because the notations disagree (`\\74` is `<` in octal and
`t` in CSS)."""
_HTML5 = html.entities.html5
_C_CHARACTERS = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "v": "\v"}


def _code_point(digits: str, base: int) -> str | None:
    number = int(digits, base)
    return chr(number) if number <= 0x10FFFF else None


def _decode_entity(token: str) -> tuple[str, int] | None:
    body = token[1:]
    if body[0] == "#":
        hexa = body[1:2] in ("x", "X")
        digits = (body[2:] if hexa else body[1:]).removesuffix(";").lstrip("0")
        # More than 8 digits is out of range anyway; int() would refuse very long ones.
        number = int(digits or "0", 16 if hexa else 10) if len(digits) <= 8 else 0x110000
        return html.unescape(f"&#{number};"), len(token)
    if body in _HTML5:
        return _HTML5[body], len(token)
    for size in range(len(body) - 1, 1, -1):  # a legacy entity without `;`, as html.unescape does
        if body[:size] in _HTML5:
            return _HTML5[body[:size]], 1 + size
    return None


def _decode_token(match: re.Match[str]) -> tuple[str, int] | None:
    """What an entity or escape decodes to and how many of its characters that used, or None."""
    token, kind = match.group(), match.lastgroup
    value: str | None
    if kind == "entity":
        return _decode_entity(token)
    if kind == "hex":
        value = _code_point(token[2:].strip("{}"), 16)
    elif kind == "octal":
        value = _code_point(token[1:], 8)
    elif kind == "char":
        value = _C_CHARACTERS.get(token[1], token[1])
    elif kind == "percent":
        value = _code_point(token[1:], 16)
    elif kind == "qp":
        value = "" if token[1] in "\r\n" else _code_point(token[1:], 16)
    elif kind == "css":
        value = _code_point(token[1:].rstrip(), 16)
    else:  # cssc
        value = token[1]
    return None if value is None else (value, len(token))


def _decode_round(shadow: _Shadow, decoder: re.Pattern[str]) -> _Shadow | None:
    """The shadow with every entity and escape decoded once, or None when there is none."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for match in decoder.finditer(shadow.text):
        decoded = _decode_token(match)
        if decoded is None:
            continue
        value, used = decoded
        start = match.start()
        chars.append(shadow.text[pos:start])
        starts.extend(shadow.starts[pos:start])
        ends.extend(shadow.ends[pos:start])
        folded = "".join(_fold_char(c) for c in value)
        chars.append(folded)
        # Decoded text comes from the whole token; it is escaped through its first character.
        starts.extend([shadow.starts[start]] * len(folded))
        ends.extend([shadow.ends[start + used - 1]] * len(folded))
        pos = start + used
    if not chars:
        return None
    chars.append(shadow.text[pos:])
    starts.extend(shadow.starts[pos:])
    ends.extend(shadow.ends[pos:])
    return _Shadow("".join(chars), starts, ends)


# --- finding dangerous spans ----------------------------------------------------------------------


def _word_pattern(word: str) -> str:
    """`word`, where a look-alike of `l`, `I` or `|` (one class in UTS #39) may stand for an `i` or an `l`."""
    return "".join(f"[{c}{_L_CLASS}]" if c in "il" else re.escape(c) for c in word)


def _name_pattern(name: str) -> str:
    return r"[\s_\-.]*".join(_word_pattern(word) for word in name.split("_"))


_TAG_NAMES = "|".join(_name_pattern(n) for n in sorted(RESERVED_TAG_NAMES | _ROLE_TAG_NAMES, key=len, reverse=True))
_ROLES = "|".join(_word_pattern(w) for w in sorted(_ROLE_WORDS, key=len, reverse=True))
_BAR = f"[|{_L_CLASS}]"
_NOT_BAR = f"[^|{_L_CLASS}"
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
    # Special tokens: `<|im_start|>`, `<|endoftext|>`, `<｜begin▁of▁sentence｜>`; on one line, or short.
    re.compile(rf"<\s*+{_BAR}(?:{_NOT_BAR}\n]*+|{_NOT_BAR}]{{0,64}}+){_BAR}\s*+>"),
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


@dataclass(frozen=True, slots=True)
class _Findings:
    """Where the original text must change: positions of characters to escape and of lines to quote."""

    escape: frozenset[int]
    quote: frozenset[int]


_SPECIAL_RE = re.compile(r"[^\t\n\x20-\x7e]")
"""A character that may not read as itself: anything but printable ASCII, tabs and line feeds."""


def _one_of(characters: dict[str, str]) -> re.Pattern[str]:
    """A pattern matching any one of `characters` (the keys)."""
    return re.compile("[" + "".join(map(re.escape, characters)) + "]")


def _map_special(text: str, starts: list[int], ends: list[int], fn: Callable[[str], str]) -> _Shadow:
    """The shadow with `fn` applied to each special character (see `_SPECIAL_RE`), each output
    character keeping the span of the character it came from."""
    mapping = {ch: fn(ch) for ch in set(_SPECIAL_RE.findall(text))}
    if not mapping:
        return _Shadow(text, starts, ends)
    even = {ch: mapped for ch, mapped in mapping.items() if len(mapped) == 1 and mapped != ch}
    translated = _one_of(even).sub(lambda match: even[match.group()], text) if even else text
    if all(len(mapped) == 1 for mapped in mapping.values()):  # positions unchanged
        return _Shadow(translated, starts, ends)
    out: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    pos = 0
    for match in _one_of({ch: mapped for ch, mapped in mapping.items() if len(mapped) != 1}).finditer(text):
        i = match.start()
        if i > pos:
            out.append(translated[pos:i])
            new_starts.extend(starts[pos:i])
            new_ends.extend(ends[pos:i])
        mapped = mapping[text[i]]
        out.append(mapped)
        new_starts.extend([starts[i]] * len(mapped))
        new_ends.extend([ends[i]] * len(mapped))
        pos = i + 1
    out.append(translated[pos:])
    new_starts.extend(starts[pos:])
    new_ends.extend(ends[pos:])
    return _Shadow("".join(out), new_starts, new_ends)


def _lower(shadow: _Shadow) -> _Shadow:
    lowered = shadow.text.lower() if shadow.text.isascii() else None
    if lowered is not None:
        return _Shadow(lowered, shadow.starts, shadow.ends)
    mapped = _map_special(shadow.text, shadow.starts, shadow.ends, _lower_char)
    return _Shadow(mapped.text.lower(), mapped.starts, mapped.ends)


def _read(text: str) -> tuple[list[_Shadow], set[int]]:
    """The readings of `text` an attacker may count on, and the positions of encodings still undecoded
    after `_DECODE_ROUNDS` rounds of decoding.

    Readers differ: one takes entities and escapes literally, one decodes HTML entities, one decodes
    everything; a marker seen by any of them counts (a decoded line feed may split a marker that
    the literal reader sees whole).
    """
    positions = list(range(len(text) + 1))
    literal = _map_special(text, positions, positions[1:], _fold_char)
    readings = [_lower(literal)]
    seen = {literal.text}
    stuck: set[int] = set()
    for decoder in _DECODERS:
        shadow = literal
        for _ in range(_DECODE_ROUNDS):
            decoded = _decode_round(shadow, decoder)
            if decoded is None:
                break
            shadow = decoded
        else:
            stuck.update(shadow.starts[m.start()] for m in decoder.finditer(shadow.text) if _decode_token(m))
        if shadow.text not in seen:
            seen.add(shadow.text)
            readings.append(_lower(shadow))
    return readings, stuck


def _plain_view(text: str, shadow: _Shadow, lo: int, hi: int) -> str:
    """The shadow with each letter that is not plainly the next ASCII letter of `text` in upper case.

    A name followed by a letter (`<systematic>`) is no tag; but a letter that only looks like one
    after folding (`<systemé`, `<systema\u0301`, `<system\u200bx`, `<system&#120;`) ends the name
    for some reader, and the shown escape of an invisible character ends it for every reader. In
    this view such letters still spell names but no longer continue them (digits become NUL).
    Only the shadow's characters `lo` to `hi` are viewed.
    """
    out = list(shadow.text[lo:hi])
    previous_end = shadow.ends[lo - 1] if lo else -1
    size = len(text)
    for p, start, end in zip(range(hi - lo), shadow.starts[lo:hi], shadow.ends[lo:hi], strict=True):
        ch = out[p]
        # NFKC composes a letter with a following mark into a letter that is not ASCII.
        if (
            ch.isascii()
            and ch.isalnum()
            and not (
                start == previous_end
                and end == start + 1
                and text[start].isascii()
                and (end == size or unicodedata.category(text[end])[0] != "M")
            )
        ):
            out[p] = ch.upper() if ch.isalpha() else "\x00"
        previous_end = end
    return "".join(out)


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
        for pattern in _MARKER_RES:
            for match in pattern.finditer(found):
                escape.update(starts[p] for p in range(match.start(), match.end()) if found[p] in "<[")
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


# --- rendering ------------------------------------------------------------------------------------


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


def neutralise(text: str, *, max_chars: int) -> str:
    """Untrusted `text` neutralised and bounded, with no wrapper: the content `defang` would wrap.

    Reserved tags and role markers, in any encoding or disguise, are escaped (`<` becomes
    `[U+003C]`) or quoted (`(quoted) Human:`), invisible characters are shown as `[U+XXXX]`, and
    everything else passes through unchanged, so ordinary code and prose stay as written. The
    result holds no reserved marker (`contains_reserved_marker` is false on it) and neutralising
    it again changes nothing. For text placed where the provider's own structure already
    separates it (a tool result block), so it needs neutralised markers, not a wrapper.

    Args:
        text: The untrusted text.
        max_chars: Most characters of neutralised content; when the rest is cut, a last line
            `[truncated: N characters cut]` follows (after a line feed) and says how many
            characters of `text` were left out.

    Raises:
        UsageError: `max_chars` is negative.
    """
    if max_chars < 0:
        raise UsageError(f"max_chars must be at least 0, not {max_chars}")
    content, cut = _fit(text, max_chars)
    return f"{content}\n{_truncation_mark(cut)}" if cut else content


_ATTRIBUTE_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_ATTRIBUTE_PUNCTUATION = frozenset(" ._-/:@+,()~=#!$*^{}…")


@lru_cache(maxsize=8192)
def _attribute_char(ch: str) -> str:
    """`ch` if it is a letter, digit or harmless punctuation however it is read, else its escape."""
    folded = _fold_char(ch)
    plain = (ch in _ATTRIBUTE_PUNCTUATION or unicodedata.category(ch)[0] in "LN") and bool(folded)
    if plain and all(c.isalnum() or c in _ATTRIBUTE_PUNCTUATION for c in folded):
        return ch
    return _escape(ch)


def _escape_attribute(value: str) -> str:
    return "".join(map(_attribute_char, value))


def _clip_attribute(value: str, limit: int) -> str:
    """The longest prefix of `value` whose escaped form fits `limit`, ending in `…` if cut."""
    if len(_escape_attribute(value)) <= limit:
        return value
    used = 0
    for i, ch in enumerate(value):
        used += len(_attribute_char(ch))
        if used > limit - 1:
            return value[:i] + "…"
    return value  # pragma: no cover - the escaped value was longer than limit


@lru_cache(maxsize=64)
def _own_tag_re(name: str) -> re.Pattern[str]:
    """The `<` of every tag, opening or closing, of block `name` (any case, spacing or slashes)."""
    return re.compile(rf"<(?=[\s/\\!?]*+{_name_pattern(name)}(?![a-z0-9]))", re.IGNORECASE)


def render_block(name: str, body: SafeText, /, **attrs: str) -> SafeText:
    """One of Lamina's own trusted blocks: `<name a="…">`, a line feed, `body`, a line feed, `</name>`.

    Every module builds our tags through this function. `body` is inserted as it is, except that
    the `<` of any tag of the block's own name in it (`</pinned>`, `< / PINNED >`, `<pinned>`) is
    shown as `[U+003C]`: the block ends exactly at its own closing tag whatever the body holds, so
    no content can make a block ambiguous or make rendering fail, also for text stored by an older
    Lamina. Untrusted text is neutralised before it gets here (`defang`). Attribute values are
    escaped: anything but letters, digits and harmless punctuation becomes `[U+XXXX]`, so no value
    can end its quotes or hold a tag.

    Args:
        name: A name from `RESERVED_TAG_NAMES`.
        body: The block's trusted content.
        **attrs: Attributes in the order given; names are lower-case identifiers.

    Raises:
        UsageError: `name` is not reserved or an attribute name is not an identifier (never
            because of `body` or an attribute value).
    """
    if name not in RESERVED_TAG_NAMES:
        raise UsageError(f"block name {name!r} is not one of Lamina's reserved tag names")
    for key in attrs:
        if not _ATTRIBUTE_NAME_RE.fullmatch(key):
            raise UsageError(f"attribute name {key!r} of block {name!r} is not a lower-case identifier")
    inner = _own_tag_re(name).sub("[U+003C]", body)
    rendered = "".join(f' {key}="{_escape_attribute(value)}"' for key, value in attrs.items())
    return SafeText(f"<{name}{rendered}>\n{inner}\n</{name}>")


def defang(text: str, *, source: str, authority: Authority, max_chars: int = 20_000) -> SafeText:
    """Untrusted `text` wrapped in one `<untrusted>` block that nothing inside can end or forge.

    The block's label names the source and authority; it holds the neutralised content (see the
    module docstring): reserved tags and role markers are escaped or quoted, invisible characters
    shown as `[U+XXXX]`; everything else passes through unchanged. There is no per-block note: the
    system prompt says once what `<untrusted>` blocks, tool results and these escapes are.

    Args:
        text: The untrusted text.
        source: Where it came from (a path, a tool name); escaped, and cut to 200 characters.
        authority: Its authority; never `Authority.SYSTEM_RULE`, which is trusted.
        max_chars: Most characters of neutralised content; the rest is cut, and a last line
            `[truncated: N characters cut]` says how many characters of `text` were left out.

    Raises:
        UsageError: `authority` is `SYSTEM_RULE` or `max_chars` is negative.
    """
    authority = Authority(authority)
    if authority is Authority.SYSTEM_RULE:
        raise UsageError("system_rule text is trusted: render it with render_block, not defang")
    if max_chars < 0:
        raise UsageError(f"max_chars must be at least 0, not {max_chars}")
    content, cut = _fit(text, max_chars)
    body = content
    if cut:
        body += f"\n[truncated: {cut} characters cut]"
    return render_block(
        _WRAPPER, SafeText(body), source=_clip_attribute(source, _SOURCE_LIMIT), authority=authority.value
    )


def admit(text: str, *, max_chars: int | None = None) -> SafeText:
    """Untrusted `text` neutralised for a request, with no wrapper: `neutralise`, memoised for short texts.

    Text with nothing to neutralise comes back byte for byte. With `max_chars`, at most that many
    characters are kept and a last line says how many were cut; without it nothing is cut.
    """
    limit = 20 * len(text) + 16 if max_chars is None else max_chars
    if limit < 0:
        raise UsageError(f"max_chars must be at least 0, not {max_chars}")
    return _admit(text, limit)


@lru_cache(maxsize=2048)
def _admit(text: str, limit: int) -> SafeText:
    """Memoised: the same tool results, names and sentences are shown again in every request."""
    if (
        len(text) <= limit
        and text.isascii()
        and not any(c in text for c in "<[&%=\\:#|")
        and all(c.isprintable() or c in "\t\n" for c in text)
    ):
        return SafeText(text)  # nothing can read as a marker: no bracket, no escape, no role line, nothing hidden
    return SafeText(neutralise(text, max_chars=limit))


def trusted(text: str) -> SafeText:
    """`text` marked as fit for a request as it is: only for Lamina's own text (built from literals,
    numbers, escaped names and other `SafeText`) and the user's own typing, never for text read
    from outside (files, tools, sources, models' summaries), which goes through `admit` or `defang`."""
    return SafeText(text)


def join(separator: str, texts: Iterable[SafeText]) -> SafeText:
    """`separator.join(texts)`: joining safe texts with a separator of Lamina's is still safe."""
    return SafeText(separator.join(texts))


_PATH_PUNCTUATION = frozenset(" ._-/+@,()~!$^{}'")


def escape_path(path: str, *, allow: str = "") -> SafeText:
    """`path` with every character but letters, digits and harmless punctuation shown as `[U+XXXX]`.

    Angle and square brackets, `&`, `%`, `=`, backslashes, colons, `#`, line breaks, invisible and
    look-alike punctuation are all escaped, so a path (or a name) cannot start a tag, an entity,
    an escape sequence or a role line such as `System:`. For every file and folder name, and
    other names from outside Lamina, shown in Lamina's own prompt text.

    Args:
        path: A path as text (use POSIX separators).
        allow: Extra characters to keep as they are (`":"` for a drive letter).
    """
    out = []
    for ch in path:
        keep = ch in _PATH_PUNCTUATION or ch in allow or unicodedata.category(ch)[0] in "LN"
        out.append(ch if keep else f"[U+{ord(ch):04X}]")
    return SafeText("".join(out))
