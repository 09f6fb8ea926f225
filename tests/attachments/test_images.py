"""Large images decoded reduced and fitted to each provider; decompression bombs refused in Lamina's words."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from PIL import Image

from lamina.attachments import AttachmentError, AttachmentStore, NamedBytes
from lamina.attachments._limits import LIMITS


@pytest.fixture
def store(tmp_path: Path) -> AttachmentStore:
    return AttachmentStore(tmp_path / "session" / "attachments", tmp_path / "session" / "data")


def _jpeg(size: tuple[int, int], *, orientation: int | None = None) -> bytes:
    picture = Image.linear_gradient("L").resize(size, Image.Resampling.NEAREST)
    out = io.BytesIO()
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    picture.save(out, format="JPEG", quality=80, exif=exif.tobytes())
    return out.getvalue()


def _claims(jpeg: bytes, width: int, height: int) -> bytes:
    """`jpeg` with its frame header (SOF0) saying `width` x `height`: a bomb's header, a few kB of data."""
    at = jpeg.index(b"\xff\xc0")
    return jpeg[: at + 5] + struct.pack(">HH", height, width) + jpeg[at + 9 :]


@pytest.mark.slow
def test_a_108_megapixel_photo_is_decoded_reduced_and_fitted_to_each_provider(store: AttachmentStore) -> None:
    (ref,) = store.add_all([NamedBytes("phone.jpg", _jpeg((12_000, 9_000)))])
    assert (ref.kind, ref.width, ref.height) == ("image", 12_000, 9_000)
    for rendition in ref.renditions:
        limits = LIMITS[rendition.provider]
        sent = Image.open(io.BytesIO(store.read(rendition.sha256)))
        assert sent.size == (rendition.width, rendition.height) and sent.format == "JPEG"
        assert max(sent.size) <= limits.long_edge and sent.width * sent.height <= limits.max_pixels
        assert rendition.size <= limits.max_bytes
        assert rendition.width / rendition.height == pytest.approx(12_000 / 9_000, rel=0.01)
    top, bottom = sent.getpixel((0, 0)), sent.getpixel((0, sent.height - 1))  # one grey level each (mode L)
    assert isinstance(top, int) and isinstance(bottom, int)
    assert top < 40 and bottom > 215  # the picture, not noise


@pytest.mark.slow
def test_a_large_photo_taken_sideways_is_turned_upright(store: AttachmentStore) -> None:
    (ref,) = store.add_all([NamedBytes("tall.jpg", _jpeg((10_000, 6_000), orientation=6))])
    assert (ref.width, ref.height) == (6_000, 10_000)
    assert all(r.height > r.width for r in ref.renditions)


@pytest.mark.parametrize(
    ("claimed", "reason"),
    [
        ((12_500, 12_500), r"the image has 12500x12500 pixels, more than 150,000,000 allowed"),
        ((60_000, 60_000), r"the image has more than 150,000,000 pixels, the most allowed \(a decompression bomb\?\)"),
    ],
)
def test_a_jpeg_bomb_is_refused_from_its_header_in_laminas_words(
    store: AttachmentStore, claimed: tuple[int, int], reason: str
) -> None:
    with pytest.raises(AttachmentError, match=reason) as caught:
        store.add_all([NamedBytes("bomb.jpg", _claims(_jpeg((64, 48)), *claimed))])
    assert "DOS attack" not in str(caught.value) and "bomb.jpg" in str(caught.value)


def test_a_png_too_large_to_decode_whole_is_refused_in_laminas_words(store: AttachmentStore) -> None:
    out = io.BytesIO()
    Image.new("1", (8_000, 7_000)).save(out, format="PNG")  # 56 megapixels in a few kB
    with pytest.raises(AttachmentError, match="8000x7000 pixels, more than the 50,000,000 Lamina decodes"):
        store.add_all([NamedBytes("flat.png", out.getvalue())])
