"""What a file is, from its bytes (pure): magic numbers through puremagic, then a few text formats.

The name's extension is never trusted; when it disagrees with the content, the disagreement is
reported (in the attachment's note) and the content wins.
"""

from __future__ import annotations

import email.parser
import email.policy
import io
import zipfile
from dataclasses import dataclass
from pathlib import PurePath
from typing import Final, Literal

import puremagic

from lamina._text_codec import decode, find_codec
from lamina.errors import AttachmentError

Kind = Literal["image", "pdf", "document", "text"]

IMAGE_TYPES: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff", "image/x-icon"}
)
"""Images Pillow opens and Lamina prepares (re-encoded to PNG when a provider does not take the format)."""

DOCX: Final = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX: Final = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX: Final = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
PDF: Final = "application/pdf"
HTML: Final = "text/html"
EML: Final = "message/rfc822"
ICS: Final = "text/calendar"
TEXT: Final = "text/plain"

_ALIASES: Final = {
    "image/x-ms-bmp": "image/bmp",
    "image/x-bmp": "image/bmp",
    "image/pjpeg": "image/jpeg",
    "image/jpg": "image/jpeg",
    "image/x-png": "image/png",
    "image/vnd.microsoft.icon": "image/x-icon",
    "image/tiff-fx": "image/tiff",
}
_OOXML_PARTS: Final = (("word/document.xml", DOCX), ("xl/workbook.xml", XLSX), ("ppt/presentation.xml", PPTX))

_EXTENSIONS: Final = {
    "image/png": (".png",),
    "image/jpeg": (".jpg", ".jpeg", ".jpe", ".jfif"),
    "image/gif": (".gif",),
    "image/webp": (".webp",),
    "image/bmp": (".bmp",),
    "image/tiff": (".tif", ".tiff"),
    "image/x-icon": (".ico",),
    PDF: (".pdf",),
    DOCX: (".docx",),
    XLSX: (".xlsx",),
    PPTX: (".pptx",),
    HTML: (".html", ".htm", ".xhtml"),
    EML: (".eml",),
    ICS: (".ics", ".ical", ".ifb"),
}
_MAIL_HEADERS: Final = (
    b"from:",
    b"to:",
    b"subject:",
    b"date:",
    b"received:",
    b"return-path:",
    b"message-id:",
    b"mime-version:",
)


@dataclass(frozen=True, slots=True)
class Sniffed:
    """A file's type as its content says."""

    media_type: str
    kind: Kind
    mismatch: str = ""
    """A sentence when the name's extension says something else, else ""."""
    encoding: str = "utf-8-sig"
    """The codec a text file's (or a text document's) bytes decode with."""
    encoding_note: str = ""
    """How the text was read when it is not UTF-8 (for the attachment's note), else ""."""


def _magic(data: bytes) -> str:
    try:
        matches = puremagic.magic_string(data)
    except puremagic.PureError:
        return ""
    for match in matches:
        if match.mime_type:
            return _ALIASES.get(str(match.mime_type), str(match.mime_type))
    return ""


def _ooxml(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return ""
    return next((media for part, media in _OOXML_PARTS if part in names), "")


@dataclass(frozen=True, slots=True)
class _Text:
    media_type: str
    encoding: str
    note: str = ""


def _classify(text: str) -> str:
    head = text.lstrip()[:512].lower()
    if head.startswith("begin:vcalendar"):
        return ICS
    if head.startswith(("<!doctype html", "<html")):
        return HTML
    return TEXT


def _text_type(data: bytes) -> _Text | None:
    """A text file's type and how it decodes.

    A byte-order mark, else BOM-less UTF-16, else (no NUL) mail by its headers whatever its bytes
    (each part says its own charset), else UTF-8, else the encoding `lamina._text_codec` finds.

    Returns:
        The type and encoding; None when it is not text.
    """
    codec = find_codec(data)
    if (codec is None or codec.guessed) and b"\0" not in data and _looks_like_mail(data):
        return _Text(EML, "utf-8-sig")
    if codec is None:
        return None
    text = decode(data, codec)
    media = _classify(text)
    if media == TEXT and _looks_like_mail(text.encode("utf-8")):
        media = EML
    return _Text(media, codec.codec, codec.note)


def _looks_like_mail(data: bytes) -> bool:
    head, _, _ = data.partition(b"\n\n") if b"\r\n\r\n" not in data[:8192] else data.partition(b"\r\n\r\n")
    lines = [line.strip().lower() for line in head[:8192].splitlines() if line and not line[:1].isspace()]
    if not lines or any(b":" not in line for line in lines):
        return False
    known = {line.split(b":", 1)[0] + b":" for line in lines} & set(_MAIL_HEADERS)
    if len(known) < 2:
        return False
    message = email.parser.BytesHeaderParser(policy=email.policy.default).parsebytes(data[:8192])
    return bool(message.get("from") or message.get("to"))


def sniff(data: bytes, name: str) -> Sniffed:
    """The type of a file, from its bytes.

    Args:
        data: The file's bytes.
        name: The file's name, for errors.

    Returns:
        Its media type and kind, and for text how it decodes.

    Raises:
        AttachmentError: The content is empty or of a type Lamina does not take.
    """
    if not data:
        raise AttachmentError(name, "the file is empty")
    media = _magic(data)
    text: _Text | None = None
    if media in {"application/zip", DOCX, XLSX, PPTX} or data[:4] == b"PK\x03\x04":
        media = _ooxml(data) or "application/zip"
    elif media not in IMAGE_TYPES and media != PDF:
        text = _text_type(data)
        media = text.media_type if text is not None else "" if media == TEXT else media
    if media in IMAGE_TYPES:
        kind: Kind = "image"
    elif media == PDF:
        kind = "pdf"
    elif media in {DOCX, XLSX, PPTX, HTML, EML, ICS}:
        kind = "document"
    elif media == TEXT:
        kind = "text"
    else:
        what = f"its content is {media}" if media else "its content is of no type Lamina knows"
        raise AttachmentError(name, f"unsupported file type ({what}); see the README's supported types")
    if text is None:
        return Sniffed(media, kind, _mismatch(name, media))
    return Sniffed(media, kind, _mismatch(name, media), text.encoding, text.note)


def _mismatch(name: str, media: str) -> str:
    suffix = PurePath(name).suffix.lower()
    expected = _EXTENSIONS.get(media)
    if not suffix or expected is None or suffix in expected:
        return ""
    if media == TEXT and suffix not in {s for exts in _EXTENSIONS.values() for s in exts}:
        return ""  # .py, .md, .csv ... are text whatever their name says
    return f"the name says {suffix} but the content is {media}"
