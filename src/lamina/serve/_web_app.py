"""The inspector's web application: pages, the JSON API, live updates; read-only over the store (I/O).

A Starlette application with GET routes only, pages rendered by Jinja2 with autoescaping and every
value's controls made visible, no page over `max_page_bytes`; live updates shared by one watcher
per session. docs/inspector.md tells the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import msgspec

from lamina.errors import MissingExtraError, UsageError
from lamina.pricing import kept_default_ttl
from lamina.serve._inspect import Prices, SessionIndex, totals_of
from lamina.serve._model import (
    LAYER_NAMES,
    BranchTotals,
    EntryPage,
    ErrorOut,
    SessionDetail,
    SessionList,
)
from lamina.serve._openapi import MAX_LIMIT, openapi_document
from lamina.serve._reader import Loaded, NotFoundError, StoreReader, Version
from lamina.serve._requests import RequestDamageError
from lamina.serve._responses import download, error_page, json_response
from lamina.serve._security import HostCheck, SecurityHeaders, TokenCheck, host_rule, needs_token, token_cookie
from lamina.serve._shown import fit, middle, visible
from lamina.session import AttachmentRef, LogEntry, SessionStore

try:
    from jinja2 import Environment, PackageLoader, select_autoescape
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as exc:
    raise MissingExtraError.of(exc, "the session inspector (lamina serve)", "serve") from None

PAGE_ENTRIES: Final = 300
"""Timeline entries per page (the newest page is shown first)."""
PAGE_SESSIONS: Final = 200
"""Sessions per page of the sessions list."""
PAGE_BLOCKS: Final = 1_000
"""Blocks per page of a request's blocks table."""
KEPT_FRAGMENTS: Final = 8
"""Sessions whose latest live fragment is kept."""
KEEP_ALIVE_SECONDS: Final = 15.0
"""A quiet event stream sends a comment this often."""
MAX_PAGE_BYTES: Final = 2_000_000
"""The default bound of a page's size."""
SHOWN_BRANCHES: Final = 100
"""Branches the session page lists (the shown one and the session's leaf always; the API has all)."""
SHOWN_COMPACTIONS: Final = 10
"""Compactions of the shown branch the session page shows (the newest; the API has all)."""
SHOWN_ITEMS: Final = 50
"""Items of a list inside a section (a lane's messages, a plan's transitions, problems) the page shows."""

_T = TypeVar("_T")
_STATIC: Final = Path(__file__).parent / "static"
_JSON: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Bounds:
    """Bytes each part of a page may take (as sent: controls made visible, HTML-escaped), from the page's bound.

    The shares add up to less than the page: the rest is the pages' own markup.
    """

    page: int
    item_text: int
    """A timeline entry's text (the timeline pages `PAGE_ENTRIES` of them)."""
    item_parts: int
    """A timeline turn record's parts, together."""
    entry_text: int
    """The text on an entry's own page."""
    entry_parts: int
    """An entry's parts on its own page, together."""
    section: int
    """One text of the session page's other sections (a compaction's summary, a branch's label, ...)."""
    small: int
    """A short field from the log (a title, a path, a key, a model's name)."""
    part: int
    """A part's text on a request's page."""

    @classmethod
    def of(cls, page: int) -> Bounds:
        """The shares of a page of at most `page` bytes."""
        return cls(
            page=page,
            item_text=page * 40 // 100 // PAGE_ENTRIES,
            item_parts=page * 15 // 100 // PAGE_ENTRIES,
            entry_text=page * 60 // 100,
            entry_parts=page * 25 // 100,
            section=page // 200,
            small=max(page // 4_000, 80),
            part=page // 200,
        )


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

    def __init__(
        self,
        reader: StoreReader,
        *,
        poll_seconds: float = 0.5,
        version: str = "0",
        max_page_bytes: int = MAX_PAGE_BYTES,
        token_required: bool = False,
    ) -> None:
        self.reader = reader
        self.token_required = token_required
        self.poll_seconds = poll_seconds
        self.version = version
        self.bounds = Bounds.of(max_page_bytes)
        self.templates = Environment(
            loader=PackageLoader("lamina.serve", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=visible,
        )
        self.templates.filters.update(when=_when, num=_num, cost=_cost, pct=_pct, fit=fit, middle=middle)
        self.templates.globals.update(bounds=self.bounds)
        self.watches: dict[str, Watch] = {}
        self._fragments: OrderedDict[str, tuple[tuple[object, ...], asyncio.Task[str]]] = OrderedDict()
        """Per session, the live fragment of one log version and query, rendered once for all who ask."""
        self.renders = 0
        """How many live fragments were rendered (a change followed by many pages renders one)."""

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
        totals = totals_of(path, index.prices)
        detail = SessionDetail(
            session=self.reader.row(loaded),
            leaf_id=leaf,
            session_leaf_id=index.leaf_id,
            path_entries=len(path),
            branches=index.branches(),
            compactions=index.compactions(path),
            plans=index.plans(path),
            problems=list(loaded.problems),
            decisions=index.decisions(path),
            branch=BranchTotals(entries=len(path), **dataclasses.asdict(totals)),
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
        pages = max((len(rows) + PAGE_SESSIONS - 1) // PAGE_SESSIONS, 1)
        page = self._int(request, "page", 0, low=0, high=pages - 1)
        shown = rows[page * PAGE_SESSIONS : (page + 1) * PAGE_SESSIONS]
        return self._page("sessions.html", rows=shown, query=query, page=page, pages=pages, total=len(rows))

    async def session_page(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = self._leaf(request, loaded)
        detail, path = self.detail(loaded, leaf)
        timeline = self._timeline(request, loaded, leaf, path)
        return self._page("session.html", detail=detail, **self._shown_detail(detail), **timeline)

    async def timeline_fragment(self, request: Request) -> Response:
        """The live part of a session page, rendered once per log version and shared by the pages that ask."""
        loaded = await asyncio.to_thread(self._load, request)
        session_id = loaded.row.id
        key = (loaded.version, self.reader.row(loaded).status, str(request.query_params))
        held = self._fragments.get(session_id)
        if held is None or held[0] != key:
            task = asyncio.create_task(asyncio.to_thread(self._fragment, request, loaded))
            self._fragments[session_id] = held = (key, task)
            self._fragments.move_to_end(session_id)
            while len(self._fragments) > KEPT_FRAGMENTS:
                self._fragments.popitem(last=False)
            task.add_done_callback(lambda done: self._forget_failed(session_id, done))
        return HTMLResponse(await asyncio.shield(held[1]))

    def _forget_failed(self, session_id: str, done: asyncio.Task[str]) -> None:
        if done.cancelled() or done.exception() is not None:  # retrieved: the pages waiting raise it themselves
            held = self._fragments.get(session_id)
            if held is not None and held[1] is done:
                del self._fragments[session_id]

    def _fragment(self, request: Request, loaded: Loaded) -> str:
        self.renders += 1
        leaf = self._leaf(request, loaded)
        detail, path = self.detail(loaded, leaf)
        timeline = self._timeline(request, loaded, leaf, path)
        context = {"detail": detail, **self._shown_detail(detail), **timeline, "live": True}
        return self.templates.get_template("_live.html").render(**context)

    def _shown_detail(self, detail: SessionDetail) -> dict[str, Any]:
        """What the session page lists of the long lists: some branches, the newest compactions."""
        branches = detail.branches
        if len(branches) > SHOWN_BRANCHES:
            keep = {detail.leaf_id, detail.session_leaf_id}
            first = [b for b in branches if b.leaf_id in keep]
            rest = sorted((b for b in branches if b.leaf_id not in keep), key=lambda b: b.updated, reverse=True)
            branches = first + rest[: SHOWN_BRANCHES - len(first)]
        listed = [d for d in detail.decisions if not kept_default_ttl(d.on, d.action)]
        return {
            "shown_branches": branches,
            "shown_compactions": detail.compactions[-SHOWN_COMPACTIONS:],
            "shown_items": SHOWN_ITEMS,
            "listed_decisions": len(listed),
            "shown_decisions": listed[-SHOWN_ITEMS:],
        }

    async def entry_page(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        item = self._entry(loaded, str(request.path_params["entry_id"]))
        return self._page("entry.html", session=loaded.row, item=item)

    async def entry_raw(self, request: Request) -> Response:
        """An entry's whole text (or its `part`-th part's) as a text file: what a page cut, downloaded whole."""
        loaded = await asyncio.to_thread(self._load, request)
        item = self._entry(loaded, str(request.path_params["entry_id"]))
        text = item.text
        name = f"{item.id}.txt"
        if "part" in request.query_params:
            number = self._int(request, "part", 0, low=0, high=max(len(item.parts) - 1, 0))
            if not item.parts:
                raise NotFoundError(f"entry {item.id} has no parts")
            text, name = item.parts[number].text, f"{item.id}-part-{number}.txt"
        return download(text.encode(), name, "text/plain; charset=utf-8")

    def _entry(self, loaded: Loaded, entry_id: str) -> Any:
        index: SessionIndex = loaded.index
        entry = index.by_id.get(entry_id)
        if entry is None:
            raise NotFoundError(f"no entry {entry_id!r} in session {loaded.row.id}")
        in_view = entry_id in index.view_ids(index.path(index.leaf_id))
        return index.item(entry, in_view=in_view, thumbnail=self._thumbnail(loaded.row.id), whole=True)

    async def request_page(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        try:
            layers = await asyncio.to_thread(self._layers, loaded, request.path_params["index"])
        except RequestDamageError as exc:
            return self._page("damage.html", session=loaded.row, index=request.path_params["index"], damage=str(exc))
        pages = max((len(layers.blocks) + PAGE_BLOCKS - 1) // PAGE_BLOCKS, 1)
        page = self._int(request, "blocks", 0, low=0, high=pages - 1)
        blocks = layers.blocks[page * PAGE_BLOCKS : (page + 1) * PAGE_BLOCKS]
        return self._page(
            "request.html",
            session=loaded.row,
            req=layers,
            layer_names=LAYER_NAMES,
            blocks=blocks,
            blocks_page=page,
            blocks_pages=pages,
        )

    async def request_body(self, request: Request) -> Response:
        """A request's whole body as rebuilt (JSON): what its page cut, downloaded whole."""
        loaded = await asyncio.to_thread(self._load, request)
        index = self._request_index(loaded, request.path_params["index"])
        try:
            body = await asyncio.to_thread(self._locked, loaded, lambda: self.reader.requests(loaded).body(index))
        except RequestDamageError as exc:
            return json_response(ErrorOut(error=str(exc)), 422)
        return download(body, f"request-{index}.json", "application/json")

    def _locked(self, loaded: Loaded, work: Callable[[], _T]) -> _T:
        with self.reader.requests_lock(loaded.row.id):
            return work()

    def _request_index(self, loaded: Loaded, raw_index: object) -> int:
        try:
            index = int(str(raw_index))
        except ValueError:
            raise NotFoundError("no such request") from None
        count = self._locked(loaded, lambda: self.reader.requests(loaded).count)
        if not 0 <= index < count:
            raise NotFoundError(f"no request {index} in session {loaded.row.id}")
        return index

    def _layers(self, loaded: Loaded, raw_index: object) -> Any:
        index = self._request_index(loaded, raw_index)
        return self._locked(loaded, lambda: self.reader.requests(loaded).layers(index))

    async def thumbnail(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        data = await asyncio.to_thread(self.reader.thumbnail, loaded, str(request.path_params["sha256"]))
        return Response(data, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})

    async def events(self, request: Request) -> Response:
        """Server-sent events: `changed` whenever the session's log changes (one watcher per session polls it)."""
        session_id = self._session_id(request)
        first = await asyncio.to_thread(self.reader.version, session_id)
        watch = self.watches.get(session_id)
        if watch is None:
            watch = self.watches[session_id] = Watch(session_id, first)
        watch.followers += 1
        if watch.task is None or watch.task.done():
            watch.task = asyncio.create_task(self._watch(watch))

        async def stream() -> AsyncIterator[str]:
            seen = watch.changes
            try:
                yield "retry: 1000\n\n"
                while True:
                    if watch.changes == seen and not watch.gone:
                        try:
                            await asyncio.wait_for(watch.changed.wait(), KEEP_ALIVE_SECONDS)
                        except TimeoutError:
                            yield ": keep-alive\n\n"
                            continue
                    if watch.gone:
                        yield "event: gone\ndata: {}\n\n"
                        return
                    if watch.changes != seen:
                        seen = watch.changes
                        yield f"event: changed\ndata: {_JSON.encode({'size': watch.version[0]}).decode()}\n\n"
            finally:
                watch.followers -= 1

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        )

    async def _watch(self, watch: Watch) -> None:
        """Poll one session for all its followers until none is left."""
        try:
            while watch.followers > 0:
                await asyncio.sleep(self.poll_seconds)
                try:
                    now = await asyncio.to_thread(self.reader.version, watch.session_id)
                except NotFoundError:
                    watch.gone = True
                    watch.signal()
                    return
                if now != watch.version:
                    watch.version = now
                    watch.changes += 1
                    watch.signal()
        finally:
            if self.watches.get(watch.session_id) is watch and (watch.gone or watch.followers <= 0):
                del self.watches[watch.session_id]

    # -- the JSON API ----------------------------------------------------------------------------

    async def api_sessions(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        rows = await asyncio.to_thread(self.reader.rows, query)
        return json_response(SessionList(sessions=rows, query=query))

    async def api_session(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        detail, _ = self.detail(loaded, self._leaf(request, loaded))
        return json_response(detail)

    async def api_entries(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = self._leaf(request, loaded)
        offset = self._int(request, "offset", 0, low=0)
        limit = self._int(request, "limit", PAGE_ENTRIES, low=1, high=MAX_LIMIT)
        path = loaded.index.path(leaf)
        items = loaded.index.items(path, offset=offset, limit=limit, thumbnail=self._thumbnail(loaded.row.id))
        return json_response(EntryPage(leaf_id=leaf, total=len(path), offset=offset, entries=items))

    async def api_entry(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        return json_response(self._entry(loaded, str(request.path_params["entry_id"])))

    async def api_requests(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        leaf = request.query_params.get("leaf") or None
        self._leaf(request, loaded)  # a leaf not in the log: 404
        series = await asyncio.to_thread(self.reader.series, loaded, leaf)
        return json_response(series)

    async def api_request(self, request: Request) -> Response:
        loaded = await asyncio.to_thread(self._load, request)
        try:
            layers = await asyncio.to_thread(self._layers, loaded, request.path_params["index"])
        except RequestDamageError as exc:
            return json_response(ErrorOut(error=str(exc)), 422)
        return json_response(layers)

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)

    async def openapi(self, request: Request) -> Response:
        return json_response(openapi_document(self.version, token_required=self.token_required))


@dataclass(slots=True)
class Watch:
    """One session's watcher: its log's version as last seen, and how many changes it saw since it started."""

    session_id: str
    version: Version
    changes: int = 0
    gone: bool = False
    followers: int = 0
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def signal(self) -> None:
        """Wake every follower waiting for a change (each then waits on a fresh event)."""
        event, self.changed = self.changed, asyncio.Event()
        event.set()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lamina")
    except PackageNotFoundError:
        return "0"


def _machine_names() -> tuple[str, ...]:
    """This machine's host name, and its name on the local network (`NAME.local`) when it has no domain."""
    name = socket.gethostname().lower()
    return (name, f"{name}.local") if name and "." not in name else (name,)


def create_app(
    store: SessionStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    poll_seconds: float = 0.5,
    extra_hosts: tuple[str, ...] = (),
    prices: Prices | None = None,
    max_page_bytes: int = MAX_PAGE_BYTES,
    token: str | None = None,
    cache_dir: Path | None = None,
) -> Starlette:
    """The inspector over `store`, for a server bound to `host` on `port`.

    Only Host headers the address allows are answered (`host_rule`: on loopback the loopback names;
    `extra_hosts` adds names). Bound to any other address, every request needs `token`, kept in a
    cookie after the first visit. `prices` estimates each model call's cost (the sessions list shows
    none without it). No page is larger than about `max_page_bytes`: longer texts are cut, with a
    link that downloads them whole. `cache_dir` keeps each session's plot data on disk by log position,
    so a server started later does not compute it again (None: kept in memory only).

    Raises:
        UsageError: `host` is not a loopback address and no `token` is given (or an empty one).
    """
    if token is not None and not token:
        raise UsageError("the inspector's token is empty: give a random one (secrets.token_urlsafe(32))")
    if token is None and needs_token(host):
        raise UsageError(
            f"an inspector bound to {host or 'every address'} needs a token: create_app(store, host=..., "
            "token=secrets.token_urlsafe(32)), then open /?token=TOKEN"
        )
    inspector = Inspector(
        StoreReader(store, prices=prices, cache_dir=cache_dir),
        poll_seconds=poll_seconds,
        version=_version(),
        max_page_bytes=max_page_bytes,
        token_required=token is not None,
    )
    routes = [
        Route("/", inspector.sessions_page),
        Route("/sessions/{session_id}", inspector.session_page),
        Route("/sessions/{session_id}/live", inspector.timeline_fragment),
        Route("/sessions/{session_id}/entries/{entry_id}", inspector.entry_page),
        Route("/sessions/{session_id}/entries/{entry_id}/raw", inspector.entry_raw),
        Route("/sessions/{session_id}/requests/{index}", inspector.request_page),
        Route("/sessions/{session_id}/requests/{index}/body.json", inspector.request_body),
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
        return error_page(404, str(exc), request.url.path.startswith("/api/"))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error_page(exc.status_code, str(exc.detail), request.url.path.startswith("/api/"))

    handlers: Mapping[Any, Callable[[Request, Exception], Any]] = {NotFoundError: not_found, HTTPException: http_error}
    rule = host_rule(host, extra=extra_hosts, machine=_machine_names())
    middleware = [Middleware(SecurityHeaders), Middleware(HostCheck, rule=rule)]
    if token is not None:
        middleware.append(Middleware(TokenCheck, token=token, cookie=token_cookie(port)))
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=dict(handlers))
    app.state.inspector = inspector
    app.state.port = port
    return app
