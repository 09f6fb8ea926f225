"""How an attacker may read text: look-alikes, invisible characters, decoded entities and escapes (pure)."""

from __future__ import annotations

import html
import html.entities
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from lamina.defang import _look_alikes

__all__ = ["LOOK_ALIKES_UNICODE_VERSION"]

_DECODE_ROUNDS = 8
"""Rounds of entity and escape decoding; whatever still decodes after them is escaped outright."""


_L_CLASS = "\ufdd0"
"""Stands, in a reading, for a look-alike of `l`, `I` or `|` (UTS #39 gives them one prototype).

A noncharacter: never in any reading otherwise, since the text's own noncharacters are invisible
(and removed from readings). Name patterns take it for `i` or `l`, special tokens for `|`.
"""
_CLASSES: dict[str, str] = {_L_CLASS: "il|"}
"""Each class a reading may hold and what it stands for: the class of `l`, `I` and `|`, and one
for each pair of letters a character reads as both, its decomposition and its shape (`ſ` is an
`s` and looks like an `f`). Each is a noncharacter (U+FDD0 to U+FDEF)."""


def _class_of(letters: str) -> str:
    """The class that stands for each of `letters` (and for `i`, `l` and `|` with either of them)."""
    wanted = "".join(sorted(set(letters) | (set(_CLASSES[_L_CLASS]) if set(letters) & set("il|") else set())))
    for placeholder, members in _CLASSES.items():
        if members == wanted or (placeholder == _L_CLASS and set(wanted) <= set(members)):
            return placeholder
    placeholder = chr(0xFDD0 + len(_CLASSES))
    _CLASSES[placeholder] = wanted
    return placeholder


def _load_look_alikes() -> tuple[dict[str, str], str]:
    table, version = _look_alikes.load()
    readings: dict[str, str] = {}
    for ch, reading in table.items():
        plain = _look_alikes._plain(ch)
        if len(plain) == len(reading) == 1 and plain.isascii() and plain.isalpha() and reading.isalpha():
            # Its decomposition and its shape are two letters: it reads as either.
            readings[ch] = _class_of(plain.lower() + reading.lower())
        else:
            # A look-alike of an upper-case L (`Ł`, `ʟ`) is one of the class too: lowered, it reads `l`.
            readings[ch] = "".join(_L_CLASS if c in "lL|" else c for c in reading)
    return readings, version


_LOOK_ALIKES, LOOK_ALIKES_UNICODE_VERSION = _load_look_alikes()
"""Each look-alike character and its ASCII reading, from Unicode's confusables data (UTS #39) and
character names (see `lamina.defang._look_alikes`), and the version of that data."""

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
    """Whether `ch` reads as nothing that can be escaped (a `<`, `[` or the start of an encoding).

    Then what it tells of a joiner beside it stays true in the output.
    """
    return not any(c in "<[&\\%=" for c in _fold_char(ch) + _lower_char(ch))


def _pictograph(ch: str) -> bool:
    """Whether `ch` can be part of an emoji sequence: a symbol beyond ASCII (emoji are `So`, `↔` is `Sm`)."""
    if not ch or ch.isascii() or not _never_escaped(ch):
        return False
    category = unicodedata.category(ch)
    return category[0] == "S" or (category == "Cn" and _pictograph_to_come(ord(ch)))


def _joins(text: str, i: int) -> bool:
    """Whether the joiner at `i` is ordinary text.

    It is after a letter (and its marks) of a script whose words use joiners (Persian `می‌خواهم`,
    Devanagari `क्‍ष`), or inside an emoji sequence (`👨‍👩‍👧`).
    """
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


_SPECIAL_RE = re.compile(r"[^\t\n\x20-\x7e]")
"""A character that may not read as itself: anything but printable ASCII, tabs and line feeds."""


def _one_of(characters: dict[str, str]) -> re.Pattern[str]:
    """A pattern matching any one of `characters` (the keys)."""
    return re.compile("[" + "".join(map(re.escape, characters)) + "]")


def _map_special(text: str, starts: list[int], ends: list[int], fn: Callable[[str], str]) -> _Shadow:
    """The shadow with `fn` applied to each special character (see `_SPECIAL_RE`).

    Each output character keeps the span of the character it came from.
    """
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
    """The readings of `text` an attacker may count on, and where encodings are left undecoded.

    An encoding is left undecoded when it is still there after `_DECODE_ROUNDS` rounds of decoding.

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
