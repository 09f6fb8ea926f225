"""Providers' documented image limits and token formulas (pure, no imaging library)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

Provider = Literal["anthropic", "openai"]

MAX_INPUT_PIXELS: Final = 150_000_000
"""Largest image accepted (width × height), checked from the header before any pixel is decoded."""
MAX_DECODED_PIXELS: Final = 50_000_000
"""Most pixels decoded into memory: a JPEG is decoded reduced (1/2, 1/4 or 1/8 of each side, to no
less than the largest rendition needs), any other format whole, so this bounds its size too."""


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

SENDABLE: Final = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
"""Formats both providers take, as Pillow names them."""


def anthropic_tokens(width: int, height: int) -> int:
    """Anthropic's documented estimate: width × height / 750."""
    return math.ceil(width * height / 750)


def openai_tokens(width: int, height: int) -> int:
    """OpenAI's documented high-detail cost: 85 plus 170 per 512-pixel tile (after its own scaling)."""
    w, h = fit_size(width, height, LIMITS["openai"])
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


TOKENS: Final = {"anthropic": anthropic_tokens, "openai": openai_tokens}


def fit_size(width: int, height: int, limits: ImageLimits) -> tuple[int, int]:
    """The size an image of `width` × `height` is scaled down to, within `limits`, keeping its aspect.

    Returns:
        The new width and height (the same when the image fits), each at least 1.
    """
    scale = min(1.0, limits.long_edge / max(width, height), math.sqrt(limits.max_pixels / (width * height)))
    if limits.short_edge:
        scale = min(scale, limits.short_edge / min(width, height))
    if scale >= 1.0:
        return width, height
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))
