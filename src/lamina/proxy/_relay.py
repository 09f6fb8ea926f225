"""The proxy's HTTP application: each request forwarded to its provider, its response relayed byte for byte (I/O).

With edits off, the upstream receives the client's body as it came and the client receives the
upstream's bytes as they came (the raw stream, still compressed if the upstream compressed it),
with the headers both sent, less the hop-by-hop ones. The request is logged before it is
forwarded; the response's usage is logged before the client receives its last chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import msgspec

from lamina.errors import MissingExtraError

try:
    import anyio.to_thread
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route
except ImportError as exc:
    raise MissingExtraError.of(exc, "the proxy (lamina proxy)", "proxy") from None

from lamina.proxy._edits import EditSettings, edit_request
from lamina.proxy._exchange import Api, ReadRequest, api_of, read_request, read_response
from lamina.proxy._sessions import Logged, ProxySessions

logger = logging.getLogger("lamina.proxy")
_T = TypeVar("_T")

_HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
"""Headers of one connection, not of the message: never forwarded (the length is the body's own)."""
_RESPONSE_DROPPED: Final = _HOP_BY_HOP - {b"content-length"}
"""The upstream's length is kept: the client receives its bytes as they were counted."""
_NO_DELAY: Final = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
"""A request's headers and body go out in two writes: without it, Nagle's algorithm holds the body for the
upstream's delayed ACK (about 40 ms a request)."""
_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@dataclass(frozen=True, slots=True)
class Upstreams:
    """Where the proxy forwards: Anthropic's paths (`/v1/messages…`) to one base URL, every other path to the other."""

    anthropic: str = "https://api.anthropic.com"
    openai: str = "https://api.openai.com"

    def url(self, path: str, query: str) -> str:
        """The upstream URL of a request to `path` (with its `query`)."""
        base = self.anthropic if path.startswith("/v1/messages") else self.openai
        return base.rstrip("/") + path + (f"?{query}" if query else "")


def create_proxy_app(
    upstreams: Upstreams,
    *,
    sessions: ProxySessions | None = None,
    edits: EditSettings | None = None,
    client: httpx.AsyncClient | None = None,
) -> Starlette:
    """The proxy's ASGI application, forwarding to `upstreams` and logging into `sessions` (None: no log).

    `client` is the upstream client (default: one owned by the application, closed when it stops).
    """
    settings = edits or EditSettings()
    upstream_client = client or httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(socket_options=_NO_DELAY),
        timeout=httpx.Timeout(600.0, connect=30.0),
        follow_redirects=False,
    )

    async def forward(request: Request) -> StreamingResponse:
        raw = await request.body()
        path = request.url.path
        read, sent, applied = _read_and_edit(request.method, path, raw, settings, sessions)
        logging: asyncio.Task[Logged | None] | None = None
        if read is not None and sessions is not None:
            # logged while the upstream answers: durable before the response's last bytes, not before it starts
            log = _safely(lambda: sessions.log_request(read, sent, path=path, edits=applied))
            logging = asyncio.create_task(_in_thread(log))
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in _HOP_BY_HOP]
        outgoing = httpx.Request(request.method, upstreams.url(path, request.url.query), headers=headers, content=sent)
        try:
            response = await upstream_client.send(outgoing, stream=True)
        except httpx.TransportError as exc:
            logger.warning("lamina proxy: %s %r: the upstream did not answer: %r", request.method, path, exc)
            if logging is not None:
                await logging
            api = read.api if read is not None else api_of(path)
            return StreamingResponse(_once(_unreachable(api, exc)), status_code=502, media_type="application/json")
        relayed = StreamingResponse(
            _relay(response, read, logging, sessions), status_code=response.status_code, headers=None
        )
        relayed.raw_headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _RESPONSE_DROPPED]
        return relayed

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if client is None:
                await upstream_client.aclose()

    route = Route("/{path:path}", forward, methods=_METHODS)
    return Starlette(routes=[route], lifespan=lifespan)


def _read_and_edit(
    method: str, path: str, raw: bytes, settings: EditSettings, sessions: ProxySessions | None
) -> tuple[ReadRequest | None, bytes, tuple[Mapping[str, Any], ...]]:
    """The request as read (None: not one of the APIs, or unreadable: then logged why), the body to send, the edits."""
    api = api_of(path) if method == "POST" else None
    if api is None:
        return None, raw, ()
    found = read_request(api, raw)
    if isinstance(found, str):
        logger.warning("lamina proxy: %s %r forwarded untouched: %s", method, path, found)
        return None, raw, ()
    if sessions is None or not settings.any:
        sent, applied = edit_request(found, raw, settings)
        return found, sent, applied
    pruned = sessions.pruned(found) if found.api == "anthropic" else frozenset()
    idle = sessions.idle_seconds(found.key)
    sent, applied = edit_request(found, raw, settings, pace=sessions.pace(found.key), idle_seconds=idle, pruned=pruned)
    if applied:
        sessions.remember(found, applied)
    return found, sent, applied


async def _relay(
    response: httpx.Response,
    read: ReadRequest | None,
    logging: asyncio.Task[Logged | None] | None,
    sessions: ProxySessions | None,
) -> AsyncIterator[bytes]:
    """The upstream's raw bytes as they come, the last chunk held until the request and its response are logged."""
    kept = bytearray()
    held: bytes | None = None
    try:
        async for chunk in response.aiter_raw():
            if not chunk:
                continue
            if logging is not None:
                kept += chunk
            if held is not None:
                yield held
            held = chunk
        logged = None if logging is None else await logging
        if logged is not None and sessions is not None and read is not None:
            body = _decoded(bytes(kept), response.headers.get("content-encoding", ""))
            stream = "text/event-stream" in response.headers.get("content-type", "")
            api, status = read.api, response.status_code
            # read in the guarded call too: a response of a shape the reader did not expect never costs
            # the client its last chunk
            await _in_thread(
                _safely(lambda: sessions.log_response(logged, status, read_response(api, body, stream=stream), body))
            )
        if held is not None:
            yield held
    finally:
        await response.aclose()


def _decoded(body: bytes, encoding: str) -> bytes:
    """`body` without its content encoding (gzip, deflate), to read the usage; as it is for any other."""
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return zlib.decompress(body)
    except zlib.error:
        logger.warning("lamina proxy: a %s response did not decompress; its usage is not logged", encoding)
    return body


async def _in_thread(call: Callable[[], _T]) -> _T:
    """`call()` in a worker thread (the store writes and syncs files)."""
    return await anyio.to_thread.run_sync(call)


def _safely(call: Callable[[], _T]) -> Callable[[], _T | None]:
    """`call`, whose failure is logged and not raised: a log that cannot be written never fails a request."""

    def run() -> _T | None:
        try:
            return call()
        except Exception:
            logger.exception("lamina proxy: the session log could not be written")
            return None

    return run


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _unreachable(api: Api | None, exc: Exception) -> bytes:
    """An error body in the shape of the client's API, for an upstream that could not be reached."""
    message = f"lamina proxy: the upstream could not be reached ({type(exc).__name__})"
    if api in ("anthropic", "count_tokens"):
        document: dict[str, Any] = {"type": "error", "error": {"type": "api_error", "message": message}}
    else:
        document = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    return msgspec.json.encode(document)
