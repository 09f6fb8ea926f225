"""The inspector's read-only access to a session store, with what it derived kept while the log is unchanged (I/O).

Any store of the protocol, every session opened read-only. A loaded log is kept, with its index
and rebuilt requests, until it changes; a log that only grew keeps what was computed. Reads are
coalesced, one per session at a time. docs/inspector.md tells how a change is seen.
"""

from __future__ import annotations

import io
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from lamina.errors import LaminaError, SessionNotFoundError, UsageError
from lamina.serve._inspect import Prices, SessionIndex
from lamina.serve._model import RequestSeries, SessionRow
from lamina.serve._plot_cache import PlotCache
from lamina.serve._requests import SessionRequests
from lamina.serve._series import PlotSeries
from lamina.serve._status import Standing, standing_of
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    SessionStore,
    SessionSummary,
    StateChange,
    UserMessage,
    check_session_id,
)

_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")
_KEEP: Final = 8
"""Sessions kept loaded at once."""
THUMBNAIL_PX: Final = 160
MAX_THUMBNAIL_SOURCE: Final = 100 * 1024 * 1024
"""The largest stored image a thumbnail is made from (an attachment's own limit)."""


class NotFoundError(UsageError):
    """No session, entry, request or file by that name (the pages answer 404)."""


Version = tuple[int, int]
"""JSONL: the log's size and modification time; another store: the entry count and update time."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """A session's whole log, read once, and its index."""

    row: SessionRow
    index: SessionIndex
    problems: tuple[str, ...]
    attachments_dir: Path
    data_dir: Path
    version: Version
    standings: tuple[Standing, Standing]
    """Where the session stands with no process holding it, and with one (`StoreReader.row` picks)."""


class StoreReader:
    """Read-only access to one store for the inspector (thread-safe: pages are served from a thread pool)."""

    def __init__(self, store: SessionStore, *, prices: Prices | None = None, cache_dir: Path | None = None) -> None:
        self.store = store
        self.prices = prices
        self.plot_cache = PlotCache(cache_dir, store.location) if cache_dir is not None else None
        """The plot's series kept on disk (None: kept in memory only)."""
        self._lock = threading.Lock()
        self._loaded: OrderedDict[str, Loaded] = OrderedDict()
        self._requests: dict[str, tuple[Version, SessionRequests]] = {}
        self._rows: dict[str, tuple[Version, SessionRow, tuple[Standing, Standing]]] = {}
        self._plots: dict[str, PlotSeries] = {}
        self._session_locks: dict[str, tuple[threading.Lock, threading.RLock]] = {}
        """Per session: the lock of its log's read, and the lock of its rebuilt requests."""
        self.reads = 0
        """How many times a session's whole log was read (a change read by many pages counts once)."""

    def _locks(self, session_id: str) -> tuple[threading.Lock, threading.RLock]:
        with self._lock:
            locks = self._session_locks.get(session_id)
            if locks is None:
                locks = self._session_locks[session_id] = (threading.Lock(), threading.RLock())
            return locks

    def requests_lock(self, session_id: str) -> threading.RLock:
        """Held while a page works on the session's rebuilt requests (they are memoised, not thread-safe)."""
        return self._locks(session_id)[1]

    @staticmethod
    def _checked(session_id: str) -> str:
        try:
            return check_session_id(session_id)
        except UsageError:
            raise NotFoundError(f"no session {session_id!r}") from None

    def version(self, session_id: str) -> Version:
        """What changes when the session's log changes (raises `NotFoundError`)."""
        checked = self._checked(session_id)
        if isinstance(self.store, LocalSessionStore):
            try:
                stat = (self.store.folder_of(checked) / "log.jsonl").stat()
            except OSError:
                raise NotFoundError(f"no session {session_id!r}") from None
            return stat.st_size, stat.st_mtime_ns
        try:
            with self.store.open(checked, writable=False) as session:
                info = session.info
        except SessionNotFoundError:
            raise NotFoundError(f"no session {session_id!r}") from None
        return info.entry_count, int(info.updated_at * 1e6)

    def load(self, session_id: str) -> Loaded:
        """The session's whole log and index, read again only when the log changed (one read at a time)."""
        version = self.version(session_id)
        cached = self._cached(session_id, version)
        if cached is not None:
            return cached
        with self._locks(session_id)[0]:  # pages asking meanwhile wait here and take this read
            version = self.version(session_id)
            cached = self._cached(session_id, version)
            if cached is not None:
                return cached
            with self._lock:  # stale: let it go before the new read, so two copies are not held at once
                self._loaded.pop(session_id, None)
            return self._read(session_id, version)

    def _cached(self, session_id: str, version: Version) -> Loaded | None:
        with self._lock:
            cached = self._loaded.get(session_id)
            if cached is not None and cached.version == version:
                self._loaded.move_to_end(session_id)
                return cached
        return None

    def _read(self, session_id: str, version: Version) -> Loaded:
        with self._lock:
            self.reads += 1
        try:
            with self.store.open(self._checked(session_id), writable=False) as session:
                entries = session.entries()
                leaf = session.leaf_id
                meta = session.info
                problems = tuple(session.report.messages())
                attachments_dir, data_dir = session.attachments_dir, Path(session.shown_path("data"))
        except SessionNotFoundError:
            raise NotFoundError(f"no session {session_id!r}") from None
        index = SessionIndex(entries, leaf, prices=self.prices)
        totals = index.totals
        row = SessionRow(
            id=meta.id,
            title=meta.title or _title(index),
            cwd=meta.cwd,
            created_at=meta.created_at,
            updated_at=max(meta.updated_at, entries[-1].ts if entries else 0.0),
            entries=len(entries),
            turns=totals.turns,
            requests=totals.requests,
            input_tokens=totals.input_tokens,
            output_tokens=totals.output_tokens,
            cost_usd=totals.cost_usd,
            damaged=bool(problems),
            **_settings(index),
        )
        standings = _standings(index, leaf)
        loaded = Loaded(
            row=row,
            index=index,
            problems=problems,
            attachments_dir=attachments_dir,
            data_dir=data_dir,
            version=version,
            standings=standings,
        )
        with self._lock:
            self._loaded[session_id] = loaded
            self._loaded.move_to_end(session_id)
            while len(self._loaded) > _KEEP:
                gone, _ = self._loaded.popitem(last=False)
                self._requests.pop(gone, None)
                self._plots.pop(gone, None)
            self._rows[session_id] = (version, row, standings)
        return loaded

    def rows(self, query: str = "") -> list[SessionRow]:
        """Every session, newest first, with its totals; `query` keeps those whose id, title or workspace holds it."""
        needle = query.strip().lower()
        out: list[SessionRow] = []
        for summary in self.store.list():
            row = self._row(summary)
            if row.entries == 0 and not row.problem:
                continue
            if needle and not any(needle in field.lower() for field in (row.id, row.title, row.cwd)):
                continue
            out.append(row)
        out.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return out

    def _row(self, summary: SessionSummary) -> SessionRow:
        if summary.problem is None:
            try:
                version = self.version(summary.id)
                with self._lock:
                    cached = self._rows.get(summary.id)
                if cached is not None and cached[0] == version:
                    return self._with_status(cached[1], cached[2])
                loaded = self.load(summary.id)
                return self._with_status(loaded.row, loaded.standings)
            except (LaminaError, OSError) as exc:
                problem = str(exc)
        else:
            problem = summary.problem
        return SessionRow(
            id=summary.id,
            title=summary.title,
            cwd=summary.cwd,
            created_at=summary.created_at,
            updated_at=summary.updated_at,
            entries=summary.entry_count,
            turns=0,
            requests=0,
            input_tokens=0,
            output_tokens=0,
            cost_usd=None,
            problem=problem,
        )

    def row(self, loaded: Loaded) -> SessionRow:
        """The session's row with its status as of now (whether a process holds it open is looked at each time)."""
        return self._with_status(loaded.row, loaded.standings)

    def _with_status(self, row: SessionRow, standings: tuple[Standing, Standing]) -> SessionRow:
        standing = standings[self._writing(row.id)]
        return msgspec.structs.replace(row, status=standing.status, status_detail=standing.detail)

    def _writing(self, session_id: str) -> bool:
        if not isinstance(self.store, LocalSessionStore):
            return False  # another store cannot tell: a session is shown as at rest
        try:
            return self.store.in_use(session_id)
        except (LaminaError, OSError):
            return False

    def requests(self, loaded: Loaded) -> SessionRequests:
        """The session's requests, rebuilt and simulated once (kept while the log only grows).

        Work on them under `requests_lock`.
        """
        session_id = loaded.row.id
        with self._lock:
            held = self._requests.get(session_id)
            if held is not None and held[0] == loaded.version:
                return held[1]
            if held is not None and held[1].extend(loaded.index.entries):
                self._requests[session_id] = (loaded.version, held[1])
                return held[1]
            requests = SessionRequests(session_id, loaded.index.entries, data_dir=str(loaded.data_dir))
            self._requests[session_id] = (loaded.version, requests)
            return requests

    def series(self, loaded: Loaded, leaf: str | None) -> RequestSeries:
        """The plot's data for the path to `leaf` (None: the session's leaf), kept per log position."""
        session_id = loaded.row.id
        with self.requests_lock(session_id):
            requests = self.requests(loaded)
            with self._lock:
                plot = self._plots.get(session_id)
                if plot is None:
                    plot = self._plots[session_id] = PlotSeries(cache=self.plot_cache, session_id=session_id)
            return plot.get(requests, loaded.index, leaf)

    def thumbnail(self, loaded: Loaded, sha256: str) -> bytes:
        """A PNG thumbnail of an image the log attaches, read through the session's files (`attachments/`)."""
        if not _SHA256.fullmatch(sha256) or not _attached_image(loaded, sha256):
            raise NotFoundError("no such attachment")
        from PIL import Image

        try:
            with (
                self.store.open(loaded.row.id, writable=False) as session,
                session.open_file(f"attachments/{sha256}") as f,
            ):
                data = f.read(MAX_THUMBNAIL_SOURCE + 1)
        except (OSError, LaminaError):
            raise NotFoundError("no such attachment") from None
        if len(data) > MAX_THUMBNAIL_SOURCE:
            raise NotFoundError("attachment cannot be shown")
        try:
            with Image.open(io.BytesIO(data)) as image:
                image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
                out = io.BytesIO()
                image.convert("RGBA").save(out, format="PNG")
        except (OSError, ValueError, Image.DecompressionBombError):
            raise NotFoundError("attachment cannot be shown") from None
        return out.getvalue()


def _attached_image(loaded: Loaded, sha256: str) -> bool:
    return any(
        ref.sha256 == sha256 and ref.kind == "image"
        for entry in loaded.index.entries
        if isinstance(entry, UserMessage)
        for ref in entry.attachments
    )


def _standings(index: SessionIndex, leaf: str | None) -> tuple[Standing, Standing]:
    """Where the session stands with no process holding it, and with one (the lock is looked at when shown)."""
    path = index.path(leaf)
    return standing_of(path, writing=False), standing_of(path, writing=True)


def _settings(index: SessionIndex) -> dict[str, str]:
    """The model of the latest request and the mode recorded last."""
    entries = index.entries
    model = next((e.model for e in reversed(entries) if isinstance(e, AssistantMessage) and e.model), "")
    mode = next((e.value for e in reversed(entries) if isinstance(e, StateChange) and e.key == "mode"), "")
    return {"model": model, "mode": mode}


def _title(index: SessionIndex) -> str:
    first = next((e.text for e in index.entries if isinstance(e, UserMessage) and e.text.strip()), "")
    line = first.strip().split("\n", 1)[0]
    return line[:80]
