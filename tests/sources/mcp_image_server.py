"""An MCP server whose tool answers with image content, for the MCP image tests (stdio, official SDK).

`chart(kind)`: `png`, a text and a 64x48 PNG; `mixed`, a PNG, then text claiming to be a PNG, then
a JPEG whose header claims 60,000 x 60,000 pixels (a decompression bomb), then data that is not
base64; `huge`, a 2,600 x 1,400 PNG, larger than either provider takes.
"""

from __future__ import annotations

import base64
import io
import struct

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, TextContent
from PIL import Image

server = MCPServer("lamina-images")


def _picture(fmt: str, size: tuple[int, int]) -> bytes:
    gradient = Image.linear_gradient("L").resize(size)
    mirrored = gradient.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    picture = Image.merge("RGB", (gradient, Image.new("L", size, 90), mirrored))
    out = io.BytesIO()
    picture.save(out, format=fmt)
    return out.getvalue()


def _bomb() -> bytes:
    jpeg = _picture("JPEG", (64, 48))
    at = jpeg.index(b"\xff\xc0")  # the frame header: say 60,000 x 60,000 pixels
    return jpeg[: at + 5] + struct.pack(">HH", 60_000, 60_000) + jpeg[at + 9 :]


def _image(data: bytes, mime: str = "image/png") -> ImageContent:
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)


@server.tool()
def chart(kind: str) -> list[TextContent | ImageContent]:
    """Draw a chart and return it as an image."""
    if kind == "png":
        return [TextContent(type="text", text="The chart:"), _image(_picture("PNG", (64, 48)))]
    if kind == "huge":
        return [_image(_picture("PNG", (2_600, 1_400)))]
    return [
        _image(_picture("PNG", (64, 48))),
        _image(b"not an image at all, just words\n"),
        _image(_bomb(), "image/jpeg"),
        ImageContent(type="image", data="%%% not base64 %%%", mime_type="image/png"),
    ]


if __name__ == "__main__":
    server.run()
