"""The plot's series of a session: computed once per log position and extended when the log grows (pure).

Every session page asks for the plot's data, and again on each live update. `PlotSeries` keeps, per
shown leaf, the requests on its path and their summaries at the log position they were computed
for. Asked again at the same position it answers from what it holds; asked at a later position of
the same log (`SessionRequests.extend` kept it), it walks only the new entries: when the new leaf
descends from the old one, the path only grew, and only the new requests are rebuilt and
simulated. Anything else (another branch, a log that was rewritten) is computed afresh. The
answer is the same either way (`series_of` is the full computation, and the tests compare them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from lamina.serve._inspect import SessionIndex
from lamina.serve._model import RequestSeries, RequestSummary
from lamina.serve._plot_cache import PlotCache, SavedSeries
from lamina.serve._requests import NOT_LOGGED_TOOLS, SessionRequests, replay_note

SERIES_MAX: Final = 200
"""Requests the plot shows: the newest of the shown branch."""
_LEAVES: Final = 16
"""Shown leaves whose series is kept."""


def series_of(
    requests: SessionRequests, index: SessionIndex, leaf: str | None, *, limit: int = SERIES_MAX
) -> RequestSeries:
    """The plot's data for the path to `leaf` (None: the session's leaf), computed from nothing.

    Args:
        requests: The session's requests (memoised: a request is rebuilt and simulated once).
        index: The session's log, indexed.
        leaf: The shown leaf; None for the session's own.
        limit: The newest requests of the path shown.

    Returns:
        The newest `limit` requests on the path, their notes and how many the path holds.
    """
    on_path = {e.id for e in index.path(leaf)}
    indices = [i for i, call in enumerate(requests.calls()) if call.id in on_path]
    return _series(requests, leaf if leaf is not None else index.leaf_id, indices, {}, {}, limit)


def _series(
    requests: SessionRequests,
    leaf: str | None,
    indices: Sequence[int],
    held: dict[int, RequestSummary],
    replayed: dict[int, int],
    limit: int,
) -> RequestSeries:
    """The series of the requests `indices`; `held` (and `replayed`, where each one's replay started) are reused."""
    shown = indices[-limit:] if limit > 0 else []
    requests.simulate([i for i in shown if i not in held])  # held ones were simulated (by this server or one before)
    notes = [NOT_LOGGED_TOOLS] if any(not requests.tools_recorded(i) for i in shown) else []
    if len(shown) < len(indices):
        notes.append(f"The newest {len(shown):,} of the branch's {len(indices):,} requests.")
    if shown:
        first = replayed.get(shown[0])
        notes.append(replay_note(shown[0], requests.replayed_from(shown[0]) if first is None else first))
    summaries: list[RequestSummary] = []
    for i in shown:
        summary = held.get(i)
        if summary is None:
            summary = held[i] = requests.summary(i, on_path=True)
            replayed[i] = requests.replayed_from(i)
        summaries.append(summary)
    damaged = [s for s in summaries if s.damage is not None]
    if damaged:
        notes.append(f"{len(damaged):,} of these requests cannot be rebuilt from the log: {damaged[0].damage}")
    for stale in [i for i in held if i < (shown[0] if shown else 0)]:
        del held[stale]
        replayed.pop(stale, None)
    return RequestSeries(leaf_id=leaf, requests=summaries, on_path=len(indices), notes=notes)


@dataclass(slots=True)
class _Held:
    requests: SessionRequests
    position: int
    """How many entries the log had."""
    calls: int
    """How many requests the log had."""
    leaf: str | None
    on_path: set[str]
    indices: list[int]
    summaries: dict[int, RequestSummary]
    replayed: dict[int, int]
    series: RequestSeries


class PlotSeries:
    """The plot's data of one session, per shown leaf, kept and extended with the log (not thread-safe).

    With a `PlotCache`, each series is kept on disk too, and a leaf this object holds nothing for
    starts from the file (the same log position: answered; a longer log: extended).
    """

    def __init__(self, *, limit: int = SERIES_MAX, cache: PlotCache | None = None, session_id: str = "") -> None:
        self.limit = limit
        self.cache = cache
        self.session_id = session_id
        self._held: dict[str | None, _Held] = {}
        self.computed = 0
        """How many times a series was computed from nothing (the rest were answered or extended)."""

    def get(self, requests: SessionRequests, index: SessionIndex, leaf: str | None) -> RequestSeries:
        """The series for `leaf` (None: the session's leaf, wherever it now is) of the log `index` holds.

        Args:
            requests: The session's requests; the same object as last time when the log only grew.
            index: The session's log as it is now, indexed.
            leaf: The shown leaf; None for the session's own.

        Returns:
            What `series_of` gives for the same arguments.
        """
        held = self._held.get(leaf)
        position = len(index.entries)
        if held is None or held.requests is not requests:
            held = self._from_disk(requests, index, leaf) or held
        if held is not None and held.requests is requests:
            if held.position == position:
                return held.series
            if held.position < position and self._extend(held, requests, index, leaf):
                self._save(leaf, held, index)
                return held.series
        fresh = self._held[leaf] = self._fresh(requests, index, leaf)
        while len(self._held) > _LEAVES:
            del self._held[next(iter(self._held))]
        self._save(leaf, fresh, index)
        return fresh.series

    def _from_disk(self, requests: SessionRequests, index: SessionIndex, leaf: str | None) -> _Held | None:
        """What the cache file holds for `leaf`, when the log is the one it was computed on, or that log grown."""
        saved = self.cache.load(self.session_id, leaf) if self.cache is not None else None
        if saved is None or not 0 < saved.position <= len(index.entries) or saved.calls > requests.count:
            return None
        if index.entries[saved.position - 1].id != saved.last_id or (saved.leaf and not index.has(saved.leaf)):
            return None
        resolved = leaf if leaf is not None else index.leaf_id
        if saved.position == len(index.entries) and saved.leaf != resolved:
            return None  # the session's leaf moved (a rewind) with no entry written since: not this branch's series
        on_path = {e.id for e in index.path(saved.leaf)}
        held = self._held[leaf] = _Held(
            requests,
            saved.position,
            saved.calls,
            saved.leaf,
            on_path,
            list(saved.indices),
            dict(saved.summaries),
            dict(saved.replayed),
            saved.series,
        )
        return held

    def _save(self, leaf: str | None, held: _Held, index: SessionIndex) -> None:
        if self.cache is None or not index.entries:
            return
        saved = SavedSeries(
            position=held.position,
            last_id=index.entries[held.position - 1].id,
            calls=held.calls,
            leaf=held.leaf,
            indices=held.indices,
            summaries=held.summaries,
            replayed=held.replayed,
            series=held.series,
        )
        self.cache.save(self.session_id, leaf, saved)

    def _fresh(self, requests: SessionRequests, index: SessionIndex, leaf: str | None) -> _Held:
        self.computed += 1
        resolved = leaf if leaf is not None else index.leaf_id
        on_path = {e.id for e in index.path(resolved)}
        calls = requests.calls()
        indices = [i for i, call in enumerate(calls) if call.id in on_path]
        summaries: dict[int, RequestSummary] = {}
        replayed: dict[int, int] = {}
        series = _series(requests, resolved, indices, summaries, replayed, self.limit)
        return _Held(requests, len(index.entries), len(calls), resolved, on_path, indices, summaries, replayed, series)

    def _extend(self, held: _Held, requests: SessionRequests, index: SessionIndex, leaf: str | None) -> bool:
        """Take the entries appended since `held` was computed; False when the path did not only grow."""
        resolved = leaf if leaf is not None else index.leaf_id
        grown: list[str] = []
        current = resolved
        while current is not None and current != held.leaf:
            entry = index.by_id.get(current)
            if entry is None or index.position[current] < held.position:
                return False  # another branch, or an older entry: not an extension of the held path
            grown.append(current)
            current = entry.parent_id
        if current != held.leaf:
            return False
        held.on_path.update(grown)
        calls = requests.calls()
        held.indices.extend(i for i in range(held.calls, len(calls)) if calls[i].id in held.on_path)
        held.position, held.calls, held.leaf = len(index.entries), len(calls), resolved
        held.series = _series(requests, resolved, held.indices, held.summaries, held.replayed, self.limit)
        return True
