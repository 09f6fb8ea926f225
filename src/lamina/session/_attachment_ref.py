"""A stored attachment as the log refers to it, and its renditions per provider (pure data)."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

import msgspec

_Sha256: TypeAlias = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
"""A stored attachment's name: its sha256 in hex (checked on decode, so a log can never name another file)."""


class ImageRendition(msgspec.Struct, frozen=True, kw_only=True):
    """An image as prepared for one provider family: the stored bytes actually sent."""

    provider: Literal["anthropic", "openai"]
    sha256: _Sha256
    """Name of the stored file under the session's `attachments/` folder."""
    media_type: str
    """The media type of these bytes (true to them, also after a resize or a re-encode)."""
    width: int
    height: int
    size: int
    tokens: int
    """Input tokens by the provider's documented formula for an image of this size."""


class AttachmentRef(msgspec.Struct, frozen=True, kw_only=True):
    """A stored attachment as the log refers to it (never its bytes)."""

    sha256: _Sha256
    """Name of the stored original under the session's `attachments/` folder."""
    name: str
    media_type: str
    """Sniffed from the content, not taken from the name."""
    size: int
    kind: Literal["image", "pdf", "document", "text"]
    width: int = 0
    height: int = 0
    pages: int = 0
    text: Annotated[str, msgspec.Meta(pattern=r"^(data/attachments/[0-9a-f]{64}\.txt)?$")] = ""
    """The extracted text's file, relative to the session folder (`data/attachments/<sha256>.txt`), or ""."""
    text_chars: int = 0
    renditions: tuple[ImageRendition, ...] = ()
    note: str = ""
    """What the model should know about the conversion (an animation's first frame, a name that lied)."""
    tokens: int = 0
    """Estimated input tokens (images: the larger of the providers' formulas)."""
