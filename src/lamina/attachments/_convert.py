"""Documents turned into text (pure: bytes in, text out).

PDFs through pypdf with page markers; Office documents (docx, xlsx, pptx) and HTML through
markitdown; e-mail through the standard `email` package; calendars through icalendar, with times
in the user's time zone. Bad input raises `AttachmentError` naming the file.
"""

from __future__ import annotations

import codecs
import email
import email.errors
import email.policy
import io
import zipfile
from dataclasses import dataclass
from datetime import date, datetime
from email.message import EmailMessage
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lamina.attachments._sniff import DOCX, EML, HTML, ICS, PDF, PPTX, XLSX, Sniffed
from lamina.errors import AttachmentError, MissingExtraError

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
    """The text of a document or text file.

    Args:
        data: The file's bytes.
        sniffed: Its type, from its bytes.
        name: The file's name, for errors.
        time_zone: The time zone a calendar file's times are shown in.

    Returns:
        The converted text.

    Raises:
        AttachmentError: The file is corrupt, truncated, encrypted or a zip bomb.
    """
    media = sniffed.media_type
    if media in {HTML, EML, ICS} and (sniffed.encoding != "utf-8-sig" or data.startswith(codecs.BOM_UTF8)):
        data = _utf8(data, sniffed.encoding)  # the converters read UTF-8 without a mark (mail: parts say their own)
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


def _utf8(data: bytes, encoding: str) -> bytes:
    return data.decode(encoding).encode("utf-8")  # sniff decoded it already: no error here


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


_EXTENSION: Final = {DOCX: "docx", XLSX: "xlsx", PPTX: "pptx", HTML: "html"}


def _markitdown(data: bytes, name: str, media: str) -> str:
    from lamina.attachments._markitdown import convert

    try:
        return convert(data, _EXTENSION[media], media, name).strip()
    except MissingExtraError:
        raise
    except Exception as exc:  # the converters raise whatever their parsers raise on a broken file
        raise AttachmentError(name, f"the document could not be read ({type(exc).__name__}: {exc})") from None


def pdf_text(data: bytes, name: str) -> Converted:
    """Every page's text after a `--- page N of M ---` marker."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import DependencyError, PyPdfError
    except ImportError as exc:
        raise MissingExtraError.of(exc, "a PDF attachment", "documents") from None

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
    """Headers, the text of the body's parts and the list of the message's own attachments.

    Encoded words (RFC 2047) and encoded file names (RFC 2231) are decoded; each text part is read
    in the charset it declares (UTF-8, else Windows-1252, when it declares none or a wrong one), and
    raw 8-bit bytes in a header as UTF-8, else Windows-1252.
    """
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage):  # pragma: no cover - the default policy makes EmailMessage
        raise AttachmentError(name, "the e-mail could not be parsed")
    headers = [(header, _header(message, header)) for header in ("From", "To", "Cc", "Date", "Subject")]
    lines = [f"{header}: {value}" for header, value in headers if value]
    try:
        body = _body_texts(message, name)
        shown = {id(part) for part, _ in body}
        attached = [_listed(part) for part in message.iter_attachments() if id(part) not in shown]
    except (LookupError, ValueError, TypeError) as exc:
        raise AttachmentError(name, f"the e-mail could not be read ({exc})") from None
    out = "\n".join(lines) + "\n\n" + "\n\n".join(text for _, text in body)
    if attached:
        out += "\n\nAttachments of this e-mail (not opened):\n" + "\n".join(attached)
    return out


def _header(message: EmailMessage, header: str) -> str:
    raw = next((value for key, value in message.raw_items() if key.lower() == header.lower()), None)
    if raw is None:
        return ""
    if not any("\udc80" <= c <= "\udcff" for c in raw):
        return str(message[header])
    # raw 8-bit bytes (no encoded word): the parser kept them as surrogates
    unfolded = "".join(str(raw).splitlines())
    value = _decoded(unfolded.encode("ascii", errors="surrogateescape"), "")
    try:
        return str(email.policy.default.header_factory(header, value))
    except (email.errors.MessageError, ValueError, TypeError, IndexError, LookupError):  # unparsable: as it came
        return value


def _decoded(raw: bytes, charset: str) -> str:
    """`raw` in `charset`, else UTF-8, else Windows-1252 (every byte but five; those replaced)."""
    for codec in (charset, "utf-8"):
        if codec:
            try:
                return raw.decode(codec)
            except (LookupError, UnicodeDecodeError):
                continue
    return raw.decode("cp1252", errors="replace")


def _body_texts(part: EmailMessage, name: str) -> list[tuple[EmailMessage, str]]:
    """The text parts that make the body, each in its own charset; of alternatives, the plain text."""
    if part.get_content_maintype() == "multipart":
        inner = [p for p in part.iter_parts() if isinstance(p, EmailMessage) and not p.is_attachment()]
        if part.get_content_subtype() == "alternative":
            plain = [p for p in inner if p.get_content_type() == "text/plain"]
            html = [p for p in inner if p.get_content_type() == "text/html"]
            inner = (plain or html or inner[-1:])[:1]
        return [found for p in inner for found in _body_texts(p, name)]
    if part.get_content_maintype() != "text" or part.is_attachment():
        return []
    payload = part.get_payload(decode=True)
    text = _decoded(payload if isinstance(payload, bytes) else b"", part.get_content_charset() or "")
    if part.get_content_type() == "text/html":
        text = _markitdown(text.encode(), name, HTML)
    text = text.strip()
    return [(part, text)] if text else []


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
    try:
        from icalendar import Calendar
    except ImportError as exc:
        raise MissingExtraError.of(exc, "a calendar attachment", "documents") from None

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
