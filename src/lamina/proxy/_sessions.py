"""The proxy's sessions: each conversation a Lamina session, every request logged as sent upstream (I/O).

A conversation is known by its key (`ReadRequest.key`); its session id is `proxy-` and the key's
first 20 hex digits, so a restarted proxy, or a second one on a shared PostgreSQL store, finds the
same session. A request is its body as sent upstream (a session file named by its SHA-256, durable at
once), the user's typed message (`UserMessage`), a `proxy.request` entry, then an `AssistantMessage`
with the usage or a `proxy.error` entry, all synced before the client has the response's last bytes.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lamina.errors import SessionExistsError
from lamina.pricing import SessionPace
from lamina.proxy._exchange import ReadRequest, ReadResponse
from lamina.session import AssistantMessage, Custom, SessionLog, SessionStore, UserMessage

REQUEST_ENTRY: Final = "proxy.request"
"""The `Custom` entry naming one request as sent upstream."""
ERROR_ENTRY: Final = "proxy.error"
"""The `Custom` entry of a request the upstream refused (its status and its body's first bytes)."""
_ERROR_KEPT: Final = 2_000


def _pruned_ids(edits: tuple[Any, ...]) -> set[str]:
    return {
        str(call_id)
        for edit in edits
        if isinstance(edit, Mapping) and edit.get("edit") == "prune"
        for call_id in [*(edit.get("ids") or ()), *(edit.get("kept") or ())]
    }


def session_id_of(key: str) -> str:
    """The session id of the conversation whose key is `key`."""
    return f"proxy-{key[:20]}"


@dataclass(slots=True)
class _Open:
    log: SessionLog
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_user: str | None = None
    pruned: set[str] = field(default_factory=set)
    stored: set[str] = field(default_factory=set)
    """The body files known stored (named by their hash: never stat and hashed again)."""


@dataclass(frozen=True, slots=True)
class Logged:
    """One request logged: its session and its entry (the response is logged against them)."""

    session_id: str
    entry_id: str


class ProxySessions:
    """The open sessions of one proxy over one store; thread-safe (the server calls it from worker threads)."""

    def __init__(self, store: SessionStore, *, cwd: str = "", clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        """When each request comes, for the conversation's pace (the edits' prices)."""
        self.cwd = cwd
        """The working folder the sessions record (the proxy's own: a client does not say where it runs)."""
        self._open: dict[str, _Open] = {}
        self._times: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def idle_seconds(self, key: str) -> float | None:
        """Since the conversation's last request (None: none since this proxy started)."""
        with self._lock:
            times = self._times.get(key)
            return None if not times else self.clock() - times[-1]

    def pruned(self, request: ReadRequest) -> frozenset[str]:
        """The tool results pruned in the conversation so far (read from its log when it is first opened)."""
        return frozenset(self._session(request).pruned)

    def remember(self, request: ReadRequest, edits: tuple[Mapping[str, Any], ...]) -> None:
        """Keep the results `edits` pruned, to prune them again in the conversation's later requests."""
        session = self._session(request)
        with session.lock:
            session.pruned.update(_pruned_ids(edits))

    def pace(self, key: str) -> SessionPace:
        """The conversation's pace since this proxy started: the gaps between its requests."""
        with self._lock:
            times = list(self._times.get(key, ()))
        gaps = tuple(later - earlier for earlier, later in itertools.pairwise(times))
        return SessionPace(gaps=gaps, turns=len(times), calls=len(times))

    def log_request(
        self, request: ReadRequest, sent: bytes, *, path: str, edits: tuple[Mapping[str, Any], ...] = ()
    ) -> Logged:
        """Log `sent` (the body as the upstream gets it) in its conversation's session, durably."""
        session = self._session(request)
        with self._lock:
            self._times.setdefault(request.key, []).append(self.clock())
        digest = hashlib.sha256(sent).hexdigest()
        name = f"data/proxy/{digest}.json"
        with session.lock:
            if name not in session.stored and session.log.stat_file(name) is None:
                session.log.put_file(name, sent)
            session.stored.add(name)
            if request.user_text and request.user_text != session.last_user and request.api != "count_tokens":
                session.log.append(UserMessage(text=request.user_text), durable=False)
                session.last_user = request.user_text
            data = {
                "api": request.api,
                "path": path,
                "body": name,
                "sha256": digest,
                "bytes": len(sent),
                "model": request.model,
                "stream": request.stream,
                "edits": list(edits),
            }
            # in the kernel now (a killed proxy keeps it); synced to disk with the answer, one sync a request
            entry = session.log.append(Custom(name=REQUEST_ENTRY, data=data), durable=False)
        return Logged(session.log.id, entry.id)

    def log_response(self, logged: Logged, status: int, read: ReadResponse, raw_error: bytes = b"") -> None:
        """Log the response to `logged`'s request: its usage (2xx), or the upstream's refusal, durably."""
        session = self._open[logged.session_id]
        with session.lock:
            if 200 <= status < 300:
                if read.usage is None and not read.text:
                    session.log.flush()  # count_tokens, or a body without usage: the request entry says all there is
                    return
                entry: AssistantMessage | Custom = AssistantMessage(
                    text=read.text, model=read.model, usage=read.usage, stop_reason=read.stop_reason
                )
            else:
                body = raw_error[:_ERROR_KEPT].decode("utf-8", "replace")
                entry = Custom(name=ERROR_ENTRY, data={"request": logged.entry_id, "status": status, "body": body})
            session.log.append(entry, durable=True)

    def _session(self, request: ReadRequest) -> _Open:
        session_id = session_id_of(request.key)
        with self._lock:
            found = self._open.get(session_id)
            if found is not None:
                return found
            try:
                log = self.store.create(session_id=session_id, title=request.first_text[:200], cwd=self.cwd)
            except SessionExistsError:
                log = self.store.open(session_id, wait=5.0)
            opened = self._open[session_id] = _Open(log)
            for entry in log.entries_loaded():
                if isinstance(entry, Custom) and entry.name == REQUEST_ENTRY and isinstance(entry.data, Mapping):
                    opened.pruned.update(_pruned_ids(tuple(entry.data.get("edits") or ())))
            return opened

    def close(self) -> None:
        """Close every open session (the store stays open: its owner closes it)."""
        with self._lock:
            for session in self._open.values():
                with session.lock:
                    session.log.close()
            self._open.clear()
