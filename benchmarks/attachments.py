"""Attachments: preparing a photo for the providers, and turning documents into text.

Figures:

- `image_prepare_ms_12mp`: a 4000 x 3000 JPEG photo (noise, quality 90, EXIF orientation 6)
  checked, decoded, turned upright and fitted to both providers (an Anthropic and an OpenAI
  rendition, each resized and encoded): the whole of `prepare_image`, median of the runs.
- `image_prepare_ms_108mp`: a 12000 x 9000 JPEG (a phone's 108-megapixel photo; noise, quality 85)
  prepared the same way: decoded reduced by the JPEG decoder (`draft`), then fitted.
- `pdf_text_ms_per_page`: text with page markers from a 50-page PDF (written by fpdf2, 40 lines a
  page) through pypdf, per page.
- `docx_to_text_ms`: a Word document of 300 paragraphs and a 50-row table (written by
  python-docx) to text through markitdown, after a first conversion that loads the libraries.

The files are generated in memory; nothing is written to disk, so storage is not measured here.
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable

from benchmarks import Figure
from lamina.attachments._convert import pdf_text, to_text
from lamina.attachments._images import prepare_image
from lamina.attachments._sniff import sniff


def _photo() -> bytes:
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6
    out = io.BytesIO()
    Image.effect_noise((4000, 3000), 60).convert("RGB").save(out, format="JPEG", quality=90, exif=exif.tobytes())
    return out.getvalue()


def _large_photo() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.effect_noise((12_000, 9_000), 20).convert("RGB").save(out, format="JPEG", quality=85)
    return out.getvalue()


def _pdf(pages: int) -> bytes:
    from fpdf import FPDF

    document = FPDF()
    document.set_font("helvetica", size=9)
    for page in range(pages):
        document.add_page()
        for line in range(40):
            document.cell(text=f"Page {page + 1}, line {line + 1}: revenue grew in every region this quarter.")
            document.ln()
    return bytes(document.output())


def _docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    for i in range(300):
        document.add_paragraph(f"Paragraph {i}: the launch plan, its owners, its risks and what we learnt.")
    table = document.add_table(rows=50, cols=4)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"r{r}c{c}"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _median_ms(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run(*, quick: bool, progress: Callable[[str], None]) -> list[Figure]:
    runs = 3 if quick else 7
    progress("generating a 12- and a 108-megapixel photo, a 50-page PDF and a Word document")
    photo, large, pdf, word = _photo(), _large_photo(), _pdf(10 if quick else 50), _docx()
    pages = pdf_text(pdf, "bench.pdf").pages
    progress("preparing the photo")
    image_ms = _median_ms(lambda: prepare_image(photo, "photo.jpg"), runs)
    large_ms = _median_ms(lambda: prepare_image(large, "phone.jpg"), runs)
    progress("extracting the PDF's text")
    pdf_ms = _median_ms(lambda: pdf_text(pdf, "bench.pdf"), runs)
    sniffed = sniff(word, "report.docx")
    to_text(word, sniffed, "report.docx", time_zone="UTC")  # loads markitdown and its converters once
    progress("converting the Word document")
    docx_ms = _median_ms(lambda: to_text(word, sniffed, "report.docx", time_zone="UTC"), runs)
    return [
        Figure("image_prepare_ms_12mp", image_ms, "ms", note=f"{len(photo) / 1e6:.1f} MB JPEG, both providers"),
        Figure("image_prepare_ms_108mp", large_ms, "ms", note=f"{len(large) / 1e6:.1f} MB JPEG, both providers"),
        Figure("pdf_text_ms_per_page", pdf_ms / pages, "ms", note=f"{pages} pages"),
        Figure("docx_to_text_ms", docx_ms, "ms", note=f"{len(word) / 1e3:.0f} kB docx"),
    ]
