"""Images prepared for each provider (pure: bytes in, bytes out, through Pillow).

Each provider family gets its own rendition, fitted to its documented limits; an image that needs
nothing is sent as it came, byte for byte. A large image is decoded reduced, and a decompression
bomb is refused before any pixel is decoded (`docs/attachments.md`).
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass
from typing import Final

from lamina.attachments._limits import (
    LIMITS,
    MAX_DECODED_PIXELS,
    MAX_INPUT_PIXELS,
    SENDABLE,
    TOKENS,
    ImageLimits,
    Provider,
    fit_size,
)
from lamina.errors import AttachmentError, MissingExtraError
from lamina.session import ImageRendition

try:
    from PIL import Image, UnidentifiedImageError
except ImportError as exc:
    raise MissingExtraError.of(exc, "an image attachment", "documents") from None


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """An image checked and prepared: its size as shown (orientation applied) and one rendition per provider."""

    width: int
    height: int
    note: str
    renditions: tuple[tuple[ImageRendition, bytes], ...]


_TRANSPOSE: Final = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
"""The turn each EXIF orientation asks for (as `ImageOps.exif_transpose` does it)."""


def _open(data: bytes, name: str) -> Image.Image:
    """The image, its header read and checked against `MAX_INPUT_PIXELS`; no pixel decoded yet."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # Lamina's own bounds follow
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError:  # over twice Pillow's own bound: refused before Lamina sees the size
        raise AttachmentError(
            name, f"the image has more than {MAX_INPUT_PIXELS:,} pixels, the most allowed (a decompression bomb?)"
        ) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise AttachmentError(name, f"the image is corrupt or truncated ({exc})") from None
    if image.width * image.height > MAX_INPUT_PIXELS:
        raise AttachmentError(
            name, f"the image has {image.width}x{image.height} pixels, more than {MAX_INPUT_PIXELS:,} allowed"
        )
    return image


def _decode(image: Image.Image, needed: tuple[int, int], name: str) -> Image.Image:
    """The pixels of `image`, decoded no larger than needed, then reduced to about twice `needed`.

    Decoded no larger than needed where the format allows (JPEG), at most `MAX_DECODED_PIXELS`,
    then reduced with a fast box filter.

    Args:
        image: The opened image.
        needed: The size (width, height) it will be stored at.
        name: The file's name, for errors.

    Returns:
        The decoded, reduced image.

    Raises:
        AttachmentError: More than `MAX_DECODED_PIXELS` to decode, or a corrupt or truncated image.
    """
    if image.format in {"JPEG", "MPO"}:
        image.draft(image.mode, needed)  # the decoder scales by 1/2, 1/4 or 1/8 while decoding
    if image.width * image.height > MAX_DECODED_PIXELS:
        raise AttachmentError(
            name,
            f"the image has {image.width}x{image.height} pixels, more than the {MAX_DECODED_PIXELS:,} Lamina decodes"
            f" (only a JPEG is decoded reduced)",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image.load()
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise AttachmentError(name, f"the image is corrupt or truncated ({exc})") from None
    factor = min(image.width // (2 * needed[0]), image.height // (2 * needed[1]))
    return image.reduce(factor) if factor >= 2 else image


def prepare_image(data: bytes, name: str) -> PreparedImage:
    """Check `data` decodes as an image and prepare one rendition per provider.

    A large image is decoded reduced and fitted to each provider's limits.

    Raises:
        AttachmentError: corrupt or truncated, more pixels than `MAX_INPUT_PIXELS` in its header,
            or more than `MAX_DECODED_PIXELS` to decode.
    """
    image = _open(data, name)
    source_format = image.format or ""
    try:
        frames = int(getattr(image, "n_frames", 1) or 1)
        animated = bool(getattr(image, "is_animated", False)) and frames > 1
        image.seek(0)
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise AttachmentError(name, f"the image is corrupt or truncated ({exc})") from None
    orientation = _orientation(image)
    turned = orientation in {5, 6, 7, 8}
    width, height = (image.height, image.width) if turned else image.size  # as shown
    fitted = [fit_size(width, height, LIMITS[provider]) for provider in LIMITS]
    needed = (max(w for w, _ in fitted), max(h for _, h in fitted))
    decoded = _decode(image, (needed[1], needed[0]) if turned else needed, name)
    transpose = _TRANSPOSE.get(orientation or 1)
    oriented = decoded.transpose(transpose) if transpose is not None else decoded
    note = f"animated image: only its first frame of {frames} is shown" if animated else ""
    renditions = tuple(
        _rendition(
            provider, data, oriented, (width, height), source_format, animated=animated, rotated=transpose is not None
        )
        for provider in LIMITS
    )
    return PreparedImage(width, height, note, renditions)


def _orientation(image: Image.Image) -> int | None:
    try:
        value = image.getexif().get(0x0112)
    except Exception:  # a broken EXIF block: treat as no orientation
        return None
    return int(value) if isinstance(value, int) else None


def _rendition(
    provider: Provider,
    original: bytes,
    image: Image.Image,
    shown: tuple[int, int],
    source_format: str,
    *,
    animated: bool,
    rotated: bool,
) -> tuple[ImageRendition, bytes]:
    """`image` (decoded, maybe reduced, of the size `shown` in full) as `provider` takes it."""
    limits = LIMITS[provider]
    size = fit_size(*shown, limits)
    untouched = (
        source_format in SENDABLE
        and not animated
        and not rotated
        and size == shown
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
