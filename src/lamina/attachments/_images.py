"""Images prepared for each provider (pure: bytes in, bytes out, through Pillow).

Each provider family gets its own rendition, fitted to its documented limits: EXIF orientation
applied, an animation's first frame, a format the provider takes, and a media type that is the
type of the bytes actually sent. An image that needs nothing is sent as it came, byte for byte.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError

from lamina.attachments._limits import LIMITS, MAX_INPUT_PIXELS, SENDABLE, TOKENS, ImageLimits, Provider, fit_size
from lamina.errors import AttachmentError
from lamina.session._entries import ImageRendition


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
    size = fit_size(image.width, image.height, limits)
    untouched = (
        source_format in SENDABLE
        and not animated
        and not rotated
        and size == image.size
        and len(original) <= limits.max_bytes
    )
    if untouched:
        data, media = original, SENDABLE[source_format]
    else:
        data, media, size = _encode(image, size, source_format, limits)
    rendition = ImageRendition(
        provider=provider,
        sha256=hashlib.sha256(data).hexdigest(),
        media_type=media,
        width=size[0],
        height=size[1],
        size=len(data),
        tokens=TOKENS[provider](*size),
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
            return data, SENDABLE[fmt], size
        size = (max(1, size[0] * 3 // 4), max(1, size[1] * 3 // 4))  # still too many bytes: smaller
