"""Stored attachments shown to a model, by provider family and capability (reads the store).

An image as the provider's rendition for a vision model, a PDF as a document block where the
provider reads PDFs, every other file as its converted text, neutralised and wrapped as untrusted
data (`docs/attachments.md`). The blocks for one reference are always the same bytes, so a
completed turn renders identically in every later request and stays cached.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from lamina.attachments._attachment_store import INLINE_TEXT_CHARS, PDF_PAGE_TOKENS, PREVIEW_CHARS, AttachmentStore
from lamina.attachments._limits import TOKENS, anthropic_tokens, openai_tokens
from lamina.context import Authority, Block, DocumentBlock, ImageBlock, TextBlock
from lamina.defang import defang, neutralise, trusted
from lamina.session import AttachmentRef

ANTHROPIC_PDF_MAX_PAGES: Final = 100
ANTHROPIC_PDF_MAX_BYTES: Final = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MediaSupport:
    """What the model in use takes besides text."""

    vision: bool = False
    pdf: bool = False


def _size(n: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("kB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def describe(ref: AttachmentRef) -> str:
    """`name (media type, size[, W×H][, N pages])`, neutralised."""
    facts = [ref.media_type, _size(ref.size)]
    if ref.width:
        facts.append(f"{ref.width}x{ref.height}")
    if ref.pages:
        facts.append(f"{ref.pages} page{'s' if ref.pages != 1 else ''}")
    return neutralise(f"{ref.name} ({', '.join(facts)})")


def media_tokens(media_type: str, data: str) -> int:
    """Estimated input tokens of a base64 image or PDF as sent.

    Args:
        media_type: The block's media type.
        data: The base64 data.

    Returns:
        For an image, the larger provider formula (from its header); for a PDF, `PDF_PAGE_TOKENS`
        a page (pages counted by pypdf).
    """
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return 0
    try:
        if media_type == "application/pdf":
            from pypdf import PdfReader

            return len(PdfReader(io.BytesIO(raw)).pages) * PDF_PAGE_TOKENS
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as image:  # the header only: no pixel is decoded
            width, height = image.size
    except Exception:  # a block we cannot read is not ours to judge; count nothing rather than fail a report
        return 0
    return max(anthropic_tokens(width, height), openai_tokens(width, height))


class AttachmentRenderer:
    """Blocks for stored attachments, for one provider family and model capability."""

    def __init__(self, store: AttachmentStore, provider: Literal["anthropic", "openai"], support: MediaSupport) -> None:
        """A renderer for one provider family and model.

        Args:
            store: The session's attachments.
            provider: The provider family whose blocks are built.
            support: What the model in use takes besides text.
        """
        self.store = store
        self.provider = provider
        self.support = support

    def __call__(self, ref: AttachmentRef) -> Sequence[Block]:
        try:
            if ref.kind == "image":
                return self._image(ref)
            if ref.kind == "pdf" and self._native_pdf(ref):
                data = self.store.read(ref.sha256)
                return (DocumentBlock(ref.media_type, data, neutralise(ref.name), ref.pages * PDF_PAGE_TOKENS),)
            return (self._text(ref),)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            note = f"[attached file {describe(ref)}: its stored copy cannot be read ({neutralise(reason)})]"
            return (TextBlock(trusted(note)),)

    def _native_pdf(self, ref: AttachmentRef) -> bool:
        return (
            self.support.pdf
            and self.provider == "anthropic"
            and ref.pages <= ANTHROPIC_PDF_MAX_PAGES
            and ref.size <= ANTHROPIC_PDF_MAX_BYTES
        )

    def _image(self, ref: AttachmentRef) -> Sequence[Block]:
        if not self.support.vision:
            return (
                TextBlock(
                    trusted(
                        f"[attached image {describe(ref)}: this model cannot see images, so only this note is sent;"
                        f" ask the user to describe it if it matters]"
                    )
                ),
            )
        rendition = next((r for r in ref.renditions if r.provider == self.provider), None)
        sha, media = (rendition.sha256, rendition.media_type) if rendition else (ref.sha256, ref.media_type)
        # the provider's formula for the image as sent
        if rendition is not None:
            tokens = rendition.tokens
        else:
            tokens = TOKENS[self.provider](ref.width, ref.height) if ref.width and ref.height else ref.tokens
        blocks: list[Block] = [ImageBlock(media, self.store.read(sha), tokens)]
        shown = f", sent at {rendition.width}x{rendition.height}" if rendition and rendition.width != ref.width else ""
        notes = [n for n in (ref.note,) if n]
        if shown or notes:
            blocks.append(
                TextBlock(
                    trusted(
                        f"[attached image {describe(ref)}{shown}{': ' + neutralise('; '.join(notes)) if notes else ''}]"
                    )
                )
            )
        return blocks

    def _text(self, ref: AttachmentRef) -> TextBlock:
        path = self.store.shown_text_path(ref)
        text = self.store.read_text(ref)
        header = f"[attached file {describe(ref)}"
        if ref.kind == "pdf":
            header += ", as text with page markers"
        elif ref.kind == "document":
            header += ", converted to text"
        if ref.note:
            header += f"; {neutralise(ref.note)}"
        if len(text) > INLINE_TEXT_CHARS:
            header += (
                f"; {len(text):,} characters, too long to show whole: its first {PREVIEW_CHARS:,} follow, and the"
                f" whole text is at {neutralise(path)} (open it with Read, offset and limit)"
            )
            body = defang(text, source=f"attachment {ref.name}", authority=Authority.USER_DATA, max_chars=PREVIEW_CHARS)
        else:
            body = defang(
                text, source=f"attachment {ref.name}", authority=Authority.USER_DATA, max_chars=20 * len(text) + 16
            )
        return TextBlock(trusted(f"{header}]\n{body}"))  # names and notes admitted, the text defanged
