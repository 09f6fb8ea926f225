"""The inspector's web application: pages, the JSON API, live updates; read-only over the store (I/O).

A Starlette application. Only GET routes exist; the store is opened read-only. Pages are rendered
by Jinja2 with autoescaping, so every text from a session (untrusted: a tool result may hold a
`<script>`) is shown as text. The Content-Security-Policy allows scripts from this server's
`/static/` files only (no inline script, no inline style, nothing from elsewhere). Bound to a
loopback address, the application answers only requests whose Host header names a loopback host,
so a web page elsewhere cannot reach it through DNS rebinding.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lamina.serve._inspect import Prices, SessionIndex
from lamina.serve._model import (
    LAYER_NAMES,
    EntryPage,
    ErrorOut,
    RequestSeries,
    SessionDetail,
    SessionList,
)
from lamina.serve._openapi import MAX_LIMIT, openapi_document
from lamina.serve._reader import Loaded, NotFoundError, StoreReader
from lamina.serve._requests import NOT_LOGGED_TOOLS, replay_note
from lamina.session import AttachmentRef, LogEntry, SessionStore

SERIES_MAX: Final = 200
"""Requests the plot shows: the newest of the shown branch."""
PAGE_ENTRIES: Final = 300
"""Timeline entries per page (the newest page is shown first)."""

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1", "[::1]")

_STATIC: Final = Path(__file__).parent / "static"
_JSON: Final = msgspec.json.Encoder()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class SecurityHeaders:
    """Adds the CSP and its companions to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in SECURITY_HEADERS if name not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HostCheck:
    """Refuses requests whose Host header names a host not in `allowed` (DNS rebinding guard)."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = frozenset(h.lower().strip("[]") for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or ())
            if host_name(headers.get(b"host", b"").decode("latin-1")) not in self.allowed:
                api = str(scope.get("path", "")).startswith("/api/")
                await _error_page(400, "Host not allowed", api)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(header: str) -> str:
    """The host name of a Host header, without port or IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _json(value: object, status: int = 200) -> Response:
    return Response(_JSON.encode(value), status_code=status, media_type="application/json")


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts else "-"


def _num(value: int | float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


class Inspector:
    """The routes over one store."""

    def __init__(self, reader: StoreReader, *, poll_seconds: float = 0.5, version: str = "0") -> None:
        self.reader = reader
        self.poll_seconds = poll_seconds
        self.version = version
        self.templates = Environment(
            loader=PackageLoader("lamina.serve", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(when=_when, num=_num, cost=_cost, pct=_pct)

    # -- helpers ---------------------------------------------------------------------------------

    def _page(self, name: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.templates.get_template(name).render(**context))

    @staticmethod
    def _session_id(request: Request) -> str:
        return str(request.path_params["session_id"])

    def _load(self, request: Request) -> Loaded:
        return self.reader.load(self._session_id(request))

    @staticmethod
    def _leaf(request: Request, loaded: Loaded) -> str | None:
        leaf = request.query_params.get("leaf") or None
        if leaf is not None and not loaded.index.has(leaf):
            raise NotFoundError(f"no entry {leaf!r} in session {loaded.row.id}")
        return leaf if leaf is not None else loaded.index.leaf_id

    @staticmethod
    def _int(request: Request, name: str, default: int, *, low: int, high: int | None = None) -> int:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise HTTPException(400, f"{name} must be an integer") from None
        if value < low or (high is not None and value > high):
            raise HTTPException(400, f"{name} must be between {low} and {high}" if high else f"{name} must be ≥ {low}")
        return value

    def _thumbnail(self, session_id: str) -> Callable[[AttachmentRef], str | None]:
        def url(ref: AttachmentRef) -> str | None:
            return f"/sessions/{session_id}/attachments/{ref.sha256}/thumbnail.png"

        return url

    def detail(self, loaded: Loaded, leaf: str | None) -> tuple[SessionDetail, list[LogEntry]]:
        index = loaded.index
        path = index.path(leaf)
        detail = SessionDetail(
            session=loaded.row,
            leaf_id=leaf,
            session_leaf_id=index.leaf_id,
            path_entries=len(path),
            branches=index.branches(),
            compactions=index.compactions(path),
            plans=index.plans(path),
            problems=list(loaded.problems),
        )
        return detail, path

    def _timeline(self, request: Request, loaded: Loaded, leaf: str | None, path: list[LogEntry]) -> dict[str, Any]:
        pages = max((len(path) + PAGE_ENTRIES - 1) // PAGE_ENTRIES, 1)
        page = self._int(request, "page", pages - 1, low=0, high=pages - 1)
        items = loaded.index.items(
            path, offset=page * PAGE_ENTRIES, limit=PAGE_ENTRIES, thumbnail=self._thumbnail(loaded.row.id)
        )
        return {
            "items": items,
            "page": page,
            "pages": pages,
            "leaf": leaf,
            "explicit_leaf": request.query_params.get("leaf"),
        }

    # -- pages -----------------------------------------------------------------------------------

    async def sessions_page(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        rows = await asyncio.to_thread(self.reader.rows, query)
        return self._page("sessions.html", rows=rows, query=query)

    async def session_page(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = self._leaf(request, loaded)
        detail, path = self.detail(loaded, leaf)
        timeline = self._timeline(request, loaded, leaf, path)
        return self._page("session.html", detail=detail, **timeline)

    async def timeline_fragment(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = self._leaf(request, loaded)
        detail, path = self.detail(loaded, leaf)
        timeline = self._timeline(request, loaded, leaf, path)
        return self._page("_live.html", detail=detail, **timeline)

    async def entry_page(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        item = self._entry(loaded, str(request.path_params["entry_id"]))
        return self._page("entry.html", session=loaded.row, item=item)

    def _entry(self, loaded: Loaded, entry_id: str) -> Any:
        index: SessionIndex = loaded.index
        entry = index.by_id.get(entry_id)
        if entry is None:
            raise NotFoundError(f"no entry {entry_id!r} in session {loaded.row.id}")
        in_view = entry_id in index.view_ids(index.path(index.leaf_id))
        return index.item(entry, in_view=in_view, thumbnail=self._thumbnail(loaded.row.id), whole=True)

    async def request_page(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        layers = await asyncio.to_thread(self._layers, loaded, request.path_params["index"])
        return self._page("request.html", session=loaded.row, req=layers, layer_names=LAYER_NAMES)

    def _layers(self, loaded: Loaded, raw_index: object) -> Any:
        requests = self.reader.requests(loaded)
        try:
            index = int(str(raw_index))
        except ValueError:
            raise NotFoundError("no such request") from None
        if not 0 <= index < requests.count:
            raise NotFoundError(f"no request {index} in session {loaded.row.id}")
        return requests.layers(index)

    async def thumbnail(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        data = await asyncio.to_thread(self.reader.thumbnail, loaded, str(request.path_params["sha256"]))
        return Response(data, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    async def events(self, request: Request) -> Response:
        """Server-sent events: `changed` whenever the session's log changes (polled, one `stat` each time)."""
        session_id = self._session_id(request)
        first = await asyncio.to_thread(self.reader.version, session_id)

        async def stream() -> AsyncIterator[str]:
            last = first
            quiet = 0.0
            yield "retry: 1000\n\n"
            while True:
                await asyncio.sleep(self.poll_seconds)
                try:
                    now = await asyncio.to_thread(self.reader.version, session_id)
                except NotFoundError:
                    yield "event: gone\ndata: {}\n\n"
                    return
                if now != last:
                    last, quiet = now, 0.0
                    yield f"event: changed\ndata: {_JSON.encode({'size': now[0]}).decode()}\n\n"
                else:
                    quiet += self.poll_seconds
                    if quiet >= 15:
                        quiet = 0.0
                        yield ": keep-alive\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    # -- the JSON API ----------------------------------------------------------------------------

    async def api_sessions(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        rows = await asyncio.to_thread(self.reader.rows, query)
        return _json(SessionList(sessions=rows, query=query))

    async def api_session(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        detail, _ = self.detail(loaded, self._leaf(request, loaded))
        return _json(detail)

    async def api_entries(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = self._leaf(request, loaded)
        offset = self._int(request, "offset", 0, low=0)
        limit = self._int(request, "limit", PAGE_ENTRIES, low=1, high=MAX_LIMIT)
        path = loaded.index.path(leaf)
        items = loaded.index.items(path, offset=offset, limit=limit, thumbnail=self._thumbnail(loaded.row.id))
        return _json(EntryPage(leaf_id=leaf, total=len(path), offset=offset, entries=items))

    async def api_entry(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        return _json(self._entry(loaded, str(request.path_params["entry_id"])))

    async def api_requests(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = self._leaf(request, loaded)
        series = await asyncio.to_thread(self._series, loaded, leaf)
        return _json(series)

    def _series(self, loaded: Loaded, leaf: str | None) -> RequestSeries:
        requests = self.reader.requests(loaded)
        on_path = {e.id for e in loaded.index.path(leaf)}
        indices = [i for i, call in enumerate(requests.calls()) if call.id in on_path]
        shown = indices[-SERIES_MAX:]
        requests.simulate(shown)
        notes = [NOT_LOGGED_TOOLS]
        if len(shown) < len(indices):
            notes.append(f"The newest {len(shown):,} of the branch's {len(indices):,} requests.")
        if shown:
            notes.append(replay_note(shown[0], requests.replayed_from(shown[0])))
        summaries = [requests.summary(i, on_path=True) for i in shown]
        return RequestSeries(leaf_id=leaf, requests=summaries, on_path=len(indices), notes=notes)

    async def api_request(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        layers = await asyncio.to_thread(self._layers, loaded, request.path_params["index"])
        return _json(layers)

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)

    async def openapi(self, request: Request) -> Response:
        return _json(openapi_document(self.version))


def _error_page(status: int, message: str, api: bool) -> Response:
    if api:
        return _json(ErrorOut(error=message), status)
    from markupsafe import escape

    body = f"<!doctype html><title>{status}</title><p>{escape(message)}</p><p><a href='/'>sessions</a></p>"
    return HTMLResponse(body, status_code=status)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lamina")
    except PackageNotFoundError:
        return "0"


def create_app(
    store: SessionStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    poll_seconds: float = 0.5,
    extra_hosts: tuple[str, ...] = (),
    prices: Prices | None = None,
) -> Starlette:
    """The inspector over `store`, for a server bound to `host`.

    On a loopback address only loopback Host headers are accepted (`extra_hosts` adds names).
    `prices` estimates each model call's cost (the sessions list shows none without it).
    """
    inspector = Inspector(StoreReader(store, prices=prices), poll_seconds=poll_seconds, version=_version())
    routes = [
        Route("/", inspector.sessions_page),
        Route("/sessions/{session_id}", inspector.session_page),
        Route("/sessions/{session_id}/live", inspector.timeline_fragment),
        Route("/sessions/{session_id}/entries/{entry_id}", inspector.entry_page),
        Route("/sessions/{session_id}/requests/{index}", inspector.request_page),
        Route("/sessions/{session_id}/attachments/{sha256}/thumbnail.png", inspector.thumbnail),
        Route("/sessions/{session_id}/events", inspector.events),
        Route("/favicon.ico", inspector.favicon),
        Route("/api/openapi.json", inspector.openapi),
        Route("/api/sessions", inspector.api_sessions),
        Route("/api/sessions/{session_id}", inspector.api_session),
        Route("/api/sessions/{session_id}/entries", inspector.api_entries),
        Route("/api/sessions/{session_id}/entries/{entry_id}", inspector.api_entry),
        Route("/api/sessions/{session_id}/requests", inspector.api_requests),
        Route("/api/sessions/{session_id}/requests/{index}", inspector.api_request),
        Mount("/static", StaticFiles(directory=_STATIC, follow_symlink=False), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error_page(404, str(exc), request.url.path.startswith("/api/"))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error_page(exc.status_code, str(exc.detail), request.url.path.startswith("/api/"))

    handlers: Mapping[Any, Callable[[Request, Exception], Any]] = {NotFoundError: not_found, HTTPException: http_error}
    middleware = [Middleware(SecurityHeaders)]
    if is_loopback(host):
        allowed = [*LOOPBACK_HOSTS, *extra_hosts]
        middleware.append(Middleware(HostCheck, allowed=tuple(allowed)))
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=dict(handlers))
    app.state.inspector = inspector
    app.state.port = port
    return app
