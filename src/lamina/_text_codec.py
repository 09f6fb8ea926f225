"""Text in any encoding (pure): which codec a file's bytes decode with, for attachments, Read, Grep and context files.

A byte-order mark, BOM-less UTF-16 (from the pattern of its NULs), UTF-8; then Windows-1252 when
its reading is plausible (accented letters here and there, as Western text has them), else what
charset-normalizer finds (GB18030, Big5, Shift-JIS, EUC-KR, KOI8-R, Windows-1251, Latin-2 …). The
codec's name goes in the label the model sees. charset-normalizer comes with the cli and documents
extras; without it, Windows-1252 is the only guess. See docs/attachments.md ("Text encodings").
"""

from __future__ import annotations

import codecs
import importlib.util
import re
import unicodedata
from dataclasses import dataclass
from typing import Final

_BOMS: Final = (
    # UTF-32 first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32 LE"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32 BE"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16 BE"),
)
"""Byte-order marks, the codec that reads (and drops) each, and its name for the note."""
_NUL_SHARE: Final = 0.3
"""Least share of UTF-16 code units whose high byte is NUL for BOM-less UTF-16 (ASCII-heavy text has most)."""
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
"""Control characters no text file has (tab, line breaks and form feed aside; C1 controls too)."""
_CHAOS_SLACK: Final = 3.0
"""charset-normalizer's readings this close (in % of chaos) to its best are weighed by `_PREFERRED`."""
_PREFERRED: Final = ("cp1252", "iso8859_2", "cp1250")
"""Among near-equal readings, the commoner codecs first: Latin-2 before its look-alikes (ISO-8859-4, -10, -16)."""
_LATIN: Final = frozenset(
    {"cp1252", "cp1250", "cp1254", "cp1257", "cp1258", "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_10"}
    | {"iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "latin_1", "mac_latin2", "mac_roman"}
)
"""Single-byte Latin codecs that read the same bytes as different accented letters."""
_WITHOUT_NORMALIZER: Final = " (other encodings are told apart with `pip install 'lamina[documents]'`)"
_NAMES: Final = {"big5": "Big5", "shift_jis": "Shift-JIS", "iso8859_2": "ISO-8859-2 (Latin-2)"}
"""Names that the codec's own, upper-cased, does not give (`koi8_r` → `KOI8-R`, `cp1251` → `Windows-1251`)."""
_WINDOWS_NAMES: Final = {"cp932": "Shift-JIS (Windows-31J)", "cp949": "EUC-KR (Windows-949)"}


@dataclass(frozen=True, slots=True)
class TextCodec:
    """How a file's bytes decode to text."""

    codec: str
    """Python's codec name (`utf-8-sig`, `cp1252`, `gb18030` …)."""
    note: str = ""
    """How it was read when it is not plain UTF-8 (for the part's label), else ""."""
    guessed: bool = False
    """Whether the codec was guessed: not UTF-8, and no byte-order mark or NUL pattern said it."""


UTF8: Final = TextCodec("utf-8-sig")
"""The codec of UTF-8 text, with or without a byte-order mark."""


def find_codec(data: bytes, *, complete: bool = True) -> TextCodec | None:
    """The codec `data` reads with as text, or None when it is not text in any encoding found.

    Args:
        data: The file's bytes, or its first bytes.
        complete: False when `data` is the file's first bytes only (a UTF-8 character cut at the end is then allowed).
    """
    marked = _marked(data, complete=complete)
    if marked is not None or b"\0" in data:
        return marked
    if _decoded(data, "utf-8", complete=complete) is None:
        return _legacy(data, complete=complete)
    return UTF8


def decode(data: bytes, codec: TextCodec) -> str:
    """`data` as text through `codec` (a character the codec cannot read becomes U+FFFD)."""
    return data.decode(codec.codec, errors="replace")


def codec_name(codec: str) -> str:
    """The encoding's usual name, for a note (`gb18030` → `GB18030`, `cp1252` → `Windows-1252`)."""
    key = codecs.lookup(codec).name.replace("-", "_")
    if key in _NAMES or key in _WINDOWS_NAMES:
        return _NAMES.get(key) or _WINDOWS_NAMES[key]
    if re.fullmatch(r"cp125\d", key):
        return f"Windows-{key[2:]}"
    return key.upper().replace("_", "-")


def _decoded(data: bytes, codec: str, *, complete: bool) -> str | None:
    """`data` through `codec`, or None when it does not decode (a cut last character is allowed if not `complete`)."""
    try:
        return codecs.getincrementaldecoder(codec)().decode(data, final=complete)
    except (UnicodeDecodeError, LookupError):
        return None


def _marked(data: bytes, *, complete: bool) -> TextCodec | None:
    """The codec from a byte-order mark or BOM-less UTF-16's NULs, or None."""
    for mark, codec, label in _BOMS:
        if data.startswith(mark):
            note = "" if codec == "utf-8-sig" else f"read as {label} (from its byte-order mark)"
            break
    else:
        codec = _bom_less_utf16(data)
        if not codec:
            return None
        note = f"read as UTF-16 {codec[-2:].upper()} (no byte-order mark; from the pattern of its NUL bytes)"
    text = _decoded(data, codec, complete=complete)
    return None if text is None or _CONTROL.search(text) else TextCodec(codec, note)


def _bom_less_utf16(data: bytes) -> str:
    """`utf-16-le` or `utf-16-be` when `data`'s NULs fall on one side of its 16-bit units only, else ""."""
    if len(data) < 4 or len(data) % 2:
        return ""
    units = len(data) // 2
    low, high = data[0::2].count(0), data[1::2].count(0)
    if high >= _NUL_SHARE * units and low <= units // 100:
        return "utf-16-le"
    if low >= _NUL_SHARE * units and high <= units // 100:
        return "utf-16-be"
    return ""


def _legacy(data: bytes, *, complete: bool) -> TextCodec | None:
    """Bytes that are not UTF-8: Windows-1252 when it reads plausibly, else charset-normalizer's reading."""
    western = _cp1252(data)
    if western is not None and not _doubtful(western):
        return TextCodec("cp1252", "not UTF-8: read as Windows-1252", guessed=True)
    found = _normalizer(data, complete=complete)
    if found is not None:
        return TextCodec(found, f"not UTF-8: read as {codec_name(found)}", guessed=True)
    if western is not None:
        note = "not UTF-8: read as Windows-1252" + ("" if _normalizer_installed() else _WITHOUT_NORMALIZER)
        return TextCodec("cp1252", note, guessed=True)
    return None


def _normalizer_installed() -> bool:
    return importlib.util.find_spec("charset_normalizer") is not None


def _cp1252(data: bytes) -> str | None:
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return None
    return None if _CONTROL.search(text) else text


def _doubtful(text: str) -> bool:
    """Whether a Windows-1252 reading looks like another encoding's bytes.

    Western text has a non-ASCII letter here and there; GBK, KOI8-R or Latin-2 read as Windows-1252
    give runs of three or more (`ÄãºÃ£¬`), or a symbol inside a word (`Pøíli¹`).
    """
    run = 0
    for index, char in enumerate(text):
        if ord(char) < 128:
            run = 0
            continue
        run += 1
        if run >= 3:
            return True
        if unicodedata.category(char)[0] in "SN" and char not in "€£¥©®°±×÷":
            around = text[max(index - 1, 0) : index] + text[index + 1 : index + 2]
            if any(neighbour.isalpha() for neighbour in around):
                return True
    return False


def _normalizer(data: bytes, *, complete: bool) -> str | None:
    """charset-normalizer's codec for `data` (of near-equal Latin readings, the commonest); None when it finds none."""
    try:
        from charset_normalizer import from_bytes  # its tables load only for files that are not UTF-8
    except ImportError:  # the core install: the cli and documents extras bring it
        return None

    matches = [m for m in from_bytes(data) if m.encoding not in {"utf_8", "ascii"}]
    if not matches:
        return None
    chosen = matches[0].encoding
    if chosen in _LATIN:
        near = [m for m in matches if m.percent_chaos <= matches[0].percent_chaos + _CHAOS_SLACK]
        preferred = [m.encoding for m in near if m.encoding in _PREFERRED]
        if preferred:
            chosen = min(preferred, key=_PREFERRED.index)
    text = _decoded(data, chosen, complete=complete)
    return None if text is None or _CONTROL.search(text) else chosen
