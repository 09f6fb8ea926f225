"""What a file is, from its bytes (pure): magic numbers through puremagic, then a few text formats.

The name's extension is never trusted; when it disagrees with the content, the disagreement is
reported (in the attachment's note) and the content wins.
"""

from __future__ import annotations

import email.parser
import email.policy
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePath
from typing import Final, Literal

import puremagic

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
    """How a text file's bytes decode."""


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


_CONTROL: Final = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def legacy_text(data: bytes) -> bool:
    """Whether `data`, not UTF-8, reads as Windows-1252 text: every byte defined, no control character
    but tab, line breaks and form feed (binary data almost always has some)."""
    if _CONTROL.search(data):
        return False
    try:
        data.decode("cp1252")
    except UnicodeDecodeError:
        return False
    return True


def _text_type(data: bytes) -> str:
    if b"\0" in data:
        return ""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return TEXT if legacy_text(data) else ""
    head = text.lstrip()[:512].lower()
    if head.startswith("begin:vcalendar"):
        return ICS
    if head.startswith(("<!doctype html", "<html")):
        return HTML
    if _looks_like_mail(data):
        return EML
    return TEXT


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
    """The type of `data` (the file `name`) from its bytes.

    Raises:
        AttachmentError: the content is empty or of a type Lamina does not take.
    """
    if not data:
        raise AttachmentError(name, "the file is empty")
    media = _magic(data)
    if media in {"application/zip", DOCX, XLSX, PPTX} or data[:4] == b"PK\x03\x04":
        media = _ooxml(data) or "application/zip"
    elif media not in IMAGE_TYPES and media != PDF:
        media = _text_type(data) or media
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
    encoding = "utf-8-sig"
    if kind == "text":
        try:
            data.decode(encoding)
        except UnicodeDecodeError:
            encoding = "cp1252"
    return Sniffed(media, kind, _mismatch(name, media), encoding)


def _mismatch(name: str, media: str) -> str:
    suffix = PurePath(name).suffix.lower()
    expected = _EXTENSIONS.get(media)
    if not suffix or expected is None or suffix in expected:
        return ""
    if media == TEXT and suffix not in {s for exts in _EXTENSIONS.values() for s in exts}:
        return ""  # .py, .md, .csv ... are text whatever their name says
    return f"the name says {suffix} but the content is {media}"
