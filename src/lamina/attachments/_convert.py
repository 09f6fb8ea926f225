"""Documents turned into text (pure: bytes in, text out).

PDFs through pypdf with page markers; Office documents (docx, xlsx, pptx) and HTML through
markitdown; e-mail through the standard `email` package; calendars through icalendar, with times
in the user's time zone. Bad input raises `AttachmentError` naming the file.
"""

from __future__ import annotations

import email
import email.policy
import io
import zipfile
from dataclasses import dataclass
from datetime import date, datetime
from email.message import EmailMessage
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lamina.attachments._sniff import DOCX, EML, HTML, ICS, PDF, PPTX, XLSX, Sniffed
from lamina.errors import AttachmentError

MAX_UNZIPPED_BYTES: Final = 200 * 1024 * 1024
"""Most bytes an Office file may unpack to (a zip bomb unpacks to far more)."""
MAX_ZIP_RATIO: Final = 100
"""Most a large member of an Office file may expand by (ordinary XML packs 5-20 times)."""
MAX_ZIP_MEMBERS: Final = 10_000
MAX_PDF_PAGES: Final = 2_000


@dataclass(frozen=True, slots=True)
class Converted:
    """A document's text and, for a PDF, its page count."""

    text: str
    pages: int = 0


def to_text(data: bytes, sniffed: Sniffed, name: str, *, time_zone: str) -> Converted:
    """The text of `data` (a document or text file whose type is `sniffed`).

    Raises:
        AttachmentError: the file is corrupt, truncated, encrypted or a zip bomb.
    """
    media = sniffed.media_type
    if media == PDF:
        return pdf_text(data, name)
    if media in {DOCX, XLSX, PPTX}:
        check_zip(data, name)
        return Converted(_markitdown(data, name, media))
    if media == HTML:
        return Converted(_markitdown(data, name, media))
    if media == EML:
        return Converted(eml_text(data, name))
    if media == ICS:
        return Converted(ics_text(data, name, time_zone))
    return Converted(data.decode(sniffed.encoding))


def check_zip(data: bytes, name: str) -> None:
    """Refuse an archive that unpacks to too much, or expands too steeply (a zip bomb)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise AttachmentError(name, f"the Office file is not a readable zip archive ({exc})") from None
    if len(members) > MAX_ZIP_MEMBERS:
        raise AttachmentError(name, f"the Office file holds {len(members):,} parts, more than {MAX_ZIP_MEMBERS:,}")
    total = sum(m.file_size for m in members)
    if total > MAX_UNZIPPED_BYTES:
        raise AttachmentError(
            name, f"the Office file unpacks to {total:,} bytes, more than {MAX_UNZIPPED_BYTES:,} (a zip bomb?)"
        )
    for member in members:
        if member.file_size > 1024 * 1024 and member.file_size > MAX_ZIP_RATIO * max(1, member.compress_size):
            raise AttachmentError(
                name,
                f"the Office file's part {member.filename} expands {member.file_size // max(1, member.compress_size)}"
                f" times (more than {MAX_ZIP_RATIO}): a zip bomb?",
            )


_EXTENSION: Final = {DOCX: ".docx", XLSX: ".xlsx", PPTX: ".pptx", HTML: ".html"}


def _markitdown(data: bytes, name: str, media: str) -> str:
    from markitdown import StreamInfo
    from markitdown.converters import DocxConverter, HtmlConverter, PptxConverter, XlsxConverter

    converters: dict[str, Any] = {DOCX: DocxConverter, XLSX: XlsxConverter, PPTX: PptxConverter, HTML: HtmlConverter}
    info = StreamInfo(mimetype=media, extension=_EXTENSION[media], filename=name)
    try:
        result = converters[media]().convert(io.BytesIO(data), info)
    except Exception as exc:  # the converters raise whatever their parsers raise on a broken file
        raise AttachmentError(name, f"the document could not be read ({type(exc).__name__}: {exc})") from None
    return str(result.markdown).strip()


def pdf_text(data: bytes, name: str) -> Converted:
    """Every page's text after a `--- page N of M ---` marker."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PyPdfError

    if b"%%EOF" not in data[-2048:]:
        raise AttachmentError(name, "the PDF is truncated (no end-of-file marker)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentError(name, "the PDF is encrypted with a password")
        pages = len(reader.pages)
        if pages > MAX_PDF_PAGES:
            raise AttachmentError(name, f"the PDF has {pages:,} pages, more than {MAX_PDF_PAGES:,}")
        texts = [
            f"--- page {i} of {pages} ---\n{(page.extract_text() or '').strip()}"
            for i, page in enumerate(reader.pages, 1)
        ]
    except AttachmentError:
        raise
    except DependencyError:  # AES encryption without the optional crypto library
        raise AttachmentError(name, "the PDF is encrypted (AES) and cannot be opened here") from None
    except (PyPdfError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise AttachmentError(name, f"the PDF is corrupt ({type(exc).__name__}: {exc})") from None
    if pages == 0:
        raise AttachmentError(name, "the PDF has no pages")
    return Converted("\n\n".join(texts), pages)


def eml_text(data: bytes, name: str) -> str:
    """Headers, the text body and the list of the message's own attachments."""
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage):  # pragma: no cover - the default policy makes EmailMessage
        raise AttachmentError(name, "the e-mail could not be parsed")
    lines = [f"{header}: {message[header]}" for header in ("From", "To", "Cc", "Date", "Subject") if message[header]]
    try:
        body = message.get_body(preferencelist=("plain", "html"))
        text = body.get_content() if isinstance(body, EmailMessage) else ""
        if isinstance(body, EmailMessage) and body.get_content_type() == "text/html":
            text = _markitdown(text.encode(), name, HTML)
        attached = [_listed(part) for part in message.iter_attachments()]
    except (LookupError, ValueError, TypeError) as exc:
        raise AttachmentError(name, f"the e-mail could not be read ({exc})") from None
    out = "\n".join(lines) + "\n\n" + str(text).strip()
    if attached:
        out += "\n\nAttachments of this e-mail (not opened):\n" + "\n".join(attached)
    return out


def _listed(part: Any) -> str:
    payload = part.get_payload(decode=True)
    size = len(payload) if isinstance(payload, bytes) else 0
    return f"- {part.get_filename() or '(no name)'} ({part.get_content_type()}, {size:,} bytes)"


def _when(value: Any, zone: ZoneInfo) -> str:
    moment = getattr(value, "dt", value)
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            return moment.strftime("%Y-%m-%d %H:%M") + " (floating time)"
        return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
    if isinstance(moment, date):
        return moment.isoformat() + " (all day)"
    return str(moment)


def ics_text(data: bytes, name: str, time_zone: str) -> str:
    """The calendar's events, with times in `time_zone`."""
    from icalendar import Calendar

    try:
        zone = ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        zone, time_zone = ZoneInfo("UTC"), "UTC"  # an unknown zone name: times in UTC, and the text says so
    try:
        calendar = Calendar.from_ical(data)
        events = list(calendar.walk("VEVENT"))
        blocks = []
        for event in events:
            lines = [f"Event: {event.get('SUMMARY', '(no title)')}"]
            if event.get("DTSTART") is not None:
                lines.append(f"  Starts: {_when(event['DTSTART'], zone)}")
            if event.get("DTEND") is not None:
                lines.append(f"  Ends: {_when(event['DTEND'], zone)}")
            for key, label in (("LOCATION", "Where"), ("RRULE", "Repeats"), ("ORGANIZER", "Organizer")):
                if event.get(key) is not None:
                    value = event[key]
                    shown = value.to_ical() if key == "RRULE" else value
                    lines.append(f"  {label}: {shown.decode() if isinstance(shown, bytes) else shown}")
            if event.get("DESCRIPTION"):
                lines.append(f"  Description: {event['DESCRIPTION']}")
            blocks.append("\n".join(lines))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise AttachmentError(name, f"the calendar could not be read ({exc})") from None
    header = f"Calendar with {len(events)} event(s); times in {time_zone}."
    return "\n\n".join([header, *blocks])
