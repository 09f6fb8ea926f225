"""Real files made by their own libraries, for the attachment tests (and the benchmark)."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from email.message import EmailMessage
from zoneinfo import ZoneInfo

from PIL import Image


def image(fmt: str, size: tuple[int, int] = (64, 48), *, orientation: int | None = None, mode: str = "RGB") -> bytes:
    """An image in Pillow format `fmt` with a colour gradient (so it does not compress to nothing)."""
    picture = Image.linear_gradient("L").resize(size).convert(mode) if mode != "L" else Image.new("L", size, 128)
    if mode == "RGB":
        picture = Image.merge(
            "RGB",
            (
                picture.split()[0],
                Image.new("L", size, 90),
                picture.split()[0].transpose(Image.Transpose.FLIP_LEFT_RIGHT),
            ),
        )
    out = io.BytesIO()
    options: dict[str, object] = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        options["exif"] = exif.tobytes()
    picture.save(out, format=fmt, **options)
    return out.getvalue()


def noisy_jpeg(size: tuple[int, int]) -> bytes:
    """A JPEG of random noise: large for its pixel count, like a photo."""
    out = io.BytesIO()
    Image.effect_noise(size, 80).convert("RGB").save(out, format="JPEG", quality=95)
    return out.getvalue()


def animated_gif(frames: int = 3) -> bytes:
    pictures = [Image.new("RGB", (40, 30), (40 * i, 90, 200 - 40 * i)) for i in range(frames)]
    out = io.BytesIO()
    pictures[0].save(out, format="GIF", save_all=True, append_images=pictures[1:], duration=100, loop=0)
    return out.getvalue()


def pdf(pages: int = 2, text: str = "Quarterly figures") -> bytes:
    from fpdf import FPDF

    document = FPDF()
    document.set_font("helvetica", size=12)
    for page in range(1, pages + 1):
        document.add_page()
        document.cell(text=f"{text} page {page}")
    return bytes(document.output())


def encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(1))))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx(text: str = "The launch moves to March.") -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading("Plan", level=1)
    document.add_paragraph(text)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "owner"
    table.cell(0, 1).text = "Ada"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["region", "sales"])
    sheet.append(["north", 1200])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pptx() -> bytes:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Ship attachments"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def zip_bomb_docx() -> bytes:
    """A real docx with one more part of 8 MB of zeros (expands about 1000 times)."""
    out = io.BytesIO(docx())
    with zipfile.ZipFile(out, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/media/bomb.bin", b"\0" * (8 * 1024 * 1024))
    return out.getvalue()


def eml() -> bytes:
    message = EmailMessage()
    message["From"] = "Ada <ada@example.com>"
    message["To"] = "Bob <bob@example.com>"
    message["Subject"] = "Budget review"
    message["Date"] = "Mon, 30 Nov 2026 09:00:00 +0000"
    message.set_content("Hi Bob,\nthe budget is attached.\nAda\n")
    message.add_attachment(b"region,sales\nnorth,1200\n", maintype="text", subtype="csv", filename="budget.csv")
    return message.as_bytes()


def ics() -> bytes:
    from icalendar import Calendar, Event

    calendar = Calendar()
    calendar.add("prodid", "-//Lamina tests//")
    calendar.add("version", "2.0")
    event = Event()
    event.add("summary", "Design review")
    event.add("uid", "review-1@example.com")
    event.add("dtstart", datetime(2026, 12, 1, 15, 0, tzinfo=ZoneInfo("America/New_York")))
    event.add("dtend", datetime(2026, 12, 1, 16, 0, tzinfo=ZoneInfo("America/New_York")))
    event.add("location", "Room 4")
    calendar.add_component(event)
    return bytes(calendar.to_ical())
