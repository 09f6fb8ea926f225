"""Images prepared for each provider (pure: bytes in, bytes out, through Pillow).

Each provider family gets its own rendition, fitted to its documented limits: EXIF orientation
applied, an animation's first frame, a format the provider takes, and a media type that is the
type of the bytes actually sent. An image that needs nothing is sent as it came, byte for byte.
"""

from __future__ import annotations

import hashlib
import io
import math
import warnings
from dataclasses import dataclass
from typing import Final, Literal

from PIL import Image, ImageOps, UnidentifiedImageError

from lamina.errors import AttachmentError
from lamina.session.entries import ImageRendition

Provider = Literal["anthropic", "openai"]

MAX_INPUT_PIXELS: Final = 50_000_000
"""Largest image accepted (width × height), checked from the header before any pixel is decoded."""


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """One provider's documented image limits."""

    long_edge: int
    """Longest side in pixels."""
    short_edge: int
    """Shortest side in pixels (0: no limit of its own)."""
    max_pixels: int
    max_bytes: int
    """Largest encoded image the API takes."""


LIMITS: Final[dict[Provider, ImageLimits]] = {
    # Anthropic vision guide: images over 1568 px on the long edge or ~1.15 megapixels are scaled
    # down by the API anyway; the API refuses images over 5 MB.
    "anthropic": ImageLimits(long_edge=1568, short_edge=0, max_pixels=1_150_000, max_bytes=5 * 1024 * 1024),
    # OpenAI vision guide (high detail): fitted into 2048 x 2048, then the short side to 768 px.
    "openai": ImageLimits(long_edge=2048, short_edge=768, max_pixels=2048 * 768, max_bytes=20 * 1024 * 1024),
}

_SENDABLE: Final = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
"""Formats both providers take, as Pillow names them."""


def anthropic_tokens(width: int, height: int) -> int:
    """Anthropic's documented estimate: width × height / 750."""
    return math.ceil(width * height / 750)


def openai_tokens(width: int, height: int) -> int:
    """OpenAI's documented high-detail cost: 85 plus 170 per 512-pixel tile (after its own scaling)."""
    w, h = _fit(width, height, LIMITS["openai"])
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


_TOKENS: Final = {"anthropic": anthropic_tokens, "openai": openai_tokens}


def _fit(width: int, height: int, limits: ImageLimits) -> tuple[int, int]:
    scale = min(1.0, limits.long_edge / max(width, height), math.sqrt(limits.max_pixels / (width * height)))
    if limits.short_edge:
        scale = min(scale, limits.short_edge / min(width, height))
    if scale >= 1.0:
        return width, height
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """An image checked and prepared: its size as shown (orientation applied) and one rendition per provider."""

    width: int
    height: int
    note: str
    renditions: tuple[tuple[ImageRendition, bytes], ...]


def _open(data: bytes, name: str) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > MAX_INPUT_PIXELS:
                raise AttachmentError(
                    name, f"the image has {image.width}x{image.height} pixels, more than {MAX_INPUT_PIXELS:,} allowed"
                )
            image.load()
    except AttachmentError:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise AttachmentError(name, f"the image is too large to decode safely ({exc})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise AttachmentError(name, f"the image is corrupt or truncated ({exc})") from None
    return image


def prepare_image(data: bytes, name: str) -> PreparedImage:
    """Check `data` decodes as an image and prepare one rendition per provider.

    Raises:
        AttachmentError: corrupt or truncated, or more pixels than `MAX_INPUT_PIXELS`.
    """
    image = _open(data, name)
    source_format = image.format or ""
    frames = int(getattr(image, "n_frames", 1) or 1)
    animated = bool(getattr(image, "is_animated", False)) and frames > 1
    image.seek(0)
    rotated = _orientation(image) not in (None, 1)
    oriented = ImageOps.exif_transpose(image) if rotated else image
    width, height = oriented.size
    note = f"animated image: only its first frame of {frames} is shown" if animated else ""
    renditions = tuple(
        _rendition(provider, data, oriented, source_format, animated=animated, rotated=rotated)
        for provider in ("anthropic", "openai")
    )
    return PreparedImage(width, height, note, renditions)


def _orientation(image: Image.Image) -> int | None:
    try:
        value = image.getexif().get(0x0112)
    except Exception:  # a broken EXIF block: treat as no orientation
        return None
    return int(value) if isinstance(value, int) else None


def _rendition(
    provider: Provider, original: bytes, image: Image.Image, source_format: str, *, animated: bool, rotated: bool
) -> tuple[ImageRendition, bytes]:
    limits = LIMITS[provider]
    size = _fit(image.width, image.height, limits)
    untouched = (
        source_format in _SENDABLE
        and not animated
        and not rotated
        and size == image.size
        and len(original) <= limits.max_bytes
    )
    if untouched:
        data, media = original, _SENDABLE[source_format]
    else:
        data, media, size = _encode(image, size, source_format, limits)
    rendition = ImageRendition(
        provider=provider,
        sha256=hashlib.sha256(data).hexdigest(),
        media_type=media,
        width=size[0],
        height=size[1],
        size=len(data),
        tokens=_TOKENS[provider](*size),
    )
    return rendition, data


def _encode(
    image: Image.Image, size: tuple[int, int], source_format: str, limits: ImageLimits
) -> tuple[bytes, str, tuple[int, int]]:
    """Resized and encoded: JPEG stays JPEG, WebP stays WebP, everything else becomes PNG."""
    fmt = source_format if source_format in {"JPEG", "WEBP"} else "PNG"
    while True:
        frame = image if size == image.size else image.resize(size, Image.Resampling.LANCZOS)
        if fmt == "JPEG" and frame.mode not in {"RGB", "L"}:
            frame = frame.convert("RGB")
        elif frame.mode not in {"1", "L", "LA", "P", "RGB", "RGBA"}:
            frame = frame.convert("RGBA" if "A" in frame.mode else "RGB")
        out = io.BytesIO()
        options: dict[str, object] = {"quality": 90} if fmt in {"JPEG", "WEBP"} else {"optimize": True}
        frame.save(out, format=fmt, **options)
        data = out.getvalue()
        if len(data) <= limits.max_bytes or min(size) <= 16:
            return data, _SENDABLE[fmt], size
        size = (max(1, size[0] * 3 // 4), max(1, size[1] * 3 // 4))  # still too many bytes: smaller
