"""Attachments: files the user gives with a message, stored once and shown right to each model (SPEC F10).

A file (by path or bytes) is typed from its content, checked, converted and stored
content-addressed in the session's `attachments/` folder by `AttachmentStore`; the log's user
message holds `AttachmentRef`s, never bytes (and so does a tool result, for the images a tool
returned: `AttachmentStore.add_images`). `AttachmentRenderer` turns a reference into the
blocks a given provider and model take: image and PDF blocks, or neutralised text, or a note.
Text and e-mail need nothing more; images, PDFs, Office, HTML and calendar files the `documents` extra.
"""

from lamina.attachments._attachment_store import (
    INLINE_TEXT_CHARS,
    AttachmentInput,
    AttachmentStore,
    NamedBytes,
)
from lamina.attachments._dropped import dropped_files
from lamina.attachments._limits import MAX_INPUT_PIXELS
from lamina.attachments._render import AttachmentRenderer, MediaSupport, media_tokens
from lamina.errors import AttachmentError
from lamina.session import AttachmentRef, ImageRendition

__all__ = [
    "INLINE_TEXT_CHARS",
    "MAX_INPUT_PIXELS",
    "AttachmentError",
    "AttachmentInput",
    "AttachmentRef",
    "AttachmentRenderer",
    "AttachmentStore",
    "ImageRendition",
    "MediaSupport",
    "NamedBytes",
    "dropped_files",
    "media_tokens",
]
