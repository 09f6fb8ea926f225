"""The inspector's plain responses: JSON, a download, an error page (pure)."""

from __future__ import annotations

from typing import Final

import msgspec

from lamina.errors import MissingExtraError
from lamina.serve._model import ErrorOut

try:
    from starlette.responses import HTMLResponse, Response
except ImportError as exc:
    raise MissingExtraError.of(exc, "the session inspector (lamina serve)", "serve") from None

__all__ = ["download", "error_page", "json_response"]

_JSON: Final = msgspec.json.Encoder()


def json_response(value: object, status: int = 200) -> Response:
    """`value` encoded as the API's JSON."""
    return Response(_JSON.encode(value), status_code=status, media_type="application/json")


def download(data: bytes, name: str, media_type: str) -> Response:
    """`data` as a file the browser saves as `name`, never cached."""
    return Response(
        data,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"},
    )


def error_page(status: int, message: str, api: bool) -> Response:
    """An error as the API's JSON (`api`) or as a small page, with `message` escaped."""
    if api:
        return json_response(ErrorOut(error=message), status)
    from markupsafe import escape

    body = f"<!doctype html><title>{status}</title><p>{escape(message)}</p><p><a href='/'>sessions</a></p>"
    return HTMLResponse(body, status_code=status)
