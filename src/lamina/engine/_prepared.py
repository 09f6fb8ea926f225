"""Compactions prepared in the background: logged as prepared, applied later only if still valid (I/O: the log).

A prepared compaction is a `PreparedCompaction` entry: the view does not change. Applying it
records a `CompactionBoundary` naming it, with the state of the moment; a prepared compaction
whose covered entries are no longer the view's (a branch, another compaction) is discarded with
a `CompactionDiscarded` saying why. See docs/compaction.md, "Background compaction".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec

from lamina.compaction import SummaryResult, parse_summary
from lamina.engine._compaction import CONVERSATION, CompactionEvent, CompactionOutcome
from lamina.session import (
    CompactionBoundary,
    CompactionDiscarded,
    CostDecision,
    LogEntry,
    PreparedCompaction,
)

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from lamina.compaction import Summariser
    from lamina.engine._compaction import Made
    from lamina.engine._recorder import Recorder
    from lamina.engine._view import LiveView
    from lamina.session import StateSnapshot

PreparedTrigger = Literal["threshold", "idle"]
_NESTED_ID = "prepared"
"""The id of the boundary a prepared compaction holds (a log's ids are never empty; applying it stamps a real one)."""


def covered_digest(entries: Sequence[LogEntry], boundary: CompactionBoundary | None, first_kept_id: str | None) -> str:
    """A digest of the view's conversation entries before `first_kept_id` (all when None) and of its `boundary`."""
    digest = hashlib.sha256((boundary.id if boundary is not None else "").encode())
    for entry in entries:
        if first_kept_id is not None and entry.id == first_kept_id:
            break
        if isinstance(entry, CONVERSATION):
            digest.update(b"\n" + entry.id.encode())
    return digest.hexdigest()[:32]


def pending_in(entries: Sequence[LogEntry], boundary: CompactionBoundary | None) -> PreparedCompaction | None:
    """The latest prepared compaction a view (its `entries` after `boundary`) holds, neither applied nor discarded."""
    discarded: set[str] = set()
    for entry in reversed(entries):
        if boundary is not None and entry.ts < boundary.ts:
            break  # from before the view's boundary: applied by it, or made stale by it
        if isinstance(entry, CompactionDiscarded):
            discarded.add(entry.prepared_id)
        elif isinstance(entry, PreparedCompaction) and entry.id not in discarded:
            return entry
    return None


def invalid_reason(
    prepared: PreparedCompaction, entries: Sequence[LogEntry], boundary: CompactionBoundary | None
) -> str:
    """Why `prepared` cannot be applied to the view of `entries` after `boundary` ("" when it can)."""
    kept = prepared.boundary.first_kept_id
    if kept is not None and all(e.id != kept for e in entries):
        return "the entry it keeps from is no longer in the view (a branch or another compaction)"
    if covered_digest(entries, boundary, kept) != prepared.covers:
        return "what it summarises changed since (a branch or another compaction)"
    return ""


class _Compactor(Protocol):
    """What of the engine's `Compactor` its background compactions use (its private steps, one package)."""

    _record: Recorder
    _view: Callable[[], LiveView]
    _snapshot: Callable[[], StateSnapshot]

    def _compaction_lock(self) -> asyncio.Lock: ...
    async def _make(
        self, summariser: Summariser, *, trigger: str, focus: str | None, keep: int, lane_tokens: int, whole: bool,
        announce: bool = True,
    ) -> Made | CompactionOutcome: ...  # fmt: skip
    def _applied(self, recorded: CompactionBoundary, result: SummaryResult) -> CompactionOutcome: ...
    def context_tokens(self) -> int: ...
    def emit(self, event: CompactionEvent) -> None: ...


class PreparedCompactions:
    """The compactor's background compactions (`engine.compactor.prepared`): prepare, find, apply, discard."""

    def __init__(self, compactor: _Compactor) -> None:
        """The background compactions of `compactor`'s session."""
        self._compactor = compactor

    async def prepare(
        self,
        summariser: Summariser,
        *,
        trigger: PreparedTrigger,
        keep_tokens: int,
        user_lane_tokens: int,
        decision: CostDecision | None,
    ) -> PreparedCompaction | CompactionOutcome:
        """Make a compaction of the view as it is now, under the compaction lock, and return it unlogged.

        Returns:
            The prepared entry (log it with `record`, between turns), or why nothing was prepared.
        """
        compactor = self._compactor
        async with compactor._compaction_lock():
            live = compactor._view()
            if pending_in(live.entries, live.boundary) is not None:
                return CompactionOutcome("already_compacted", "a prepared compaction is waiting to be applied")
            entries, base = list(live.entries), live.boundary
            made = await compactor._make(
                summariser, trigger=f"{trigger}, background", focus=None, keep=keep_tokens,
                lane_tokens=user_lane_tokens, whole=False, announce=False,
            )  # fmt: skip
            if isinstance(made, CompactionOutcome):
                return made
            boundary = CompactionBoundary(
                id=_NESTED_ID,
                summary=made.summarised.summary,
                first_kept_id=made.first_kept_id,
                tokens_before=made.tokens_before,
                tokens_after=made.tokens_after,
                trigger="threshold",
                ledger=made.summarised.ledger,
                lane=made.lane,
                decision=msgspec.UNSET if decision is None else decision,
                server=made.summarised.result.server or msgspec.UNSET,
                backend=msgspec.UNSET if made.summarised.backend is None else made.summarised.backend,
            )
            covers = covered_digest(entries, base, made.first_kept_id)
            return PreparedCompaction(boundary=boundary, trigger=trigger, covers=covers)

    def record(self, prepared: PreparedCompaction) -> PreparedCompaction:
        """Log a prepared compaction (durably: after a crash it is found prepared, never applied)."""
        return self._compactor._record(prepared)

    def pending(self) -> PreparedCompaction | None:
        """The logged prepared compaction the current view could apply (checked with `check`), if any."""
        live = self._compactor._view()
        return pending_in(live.entries, live.boundary)

    def check(self, prepared: PreparedCompaction) -> str:
        """Why `prepared` cannot be applied now ("": it can)."""
        live = self._compactor._view()
        return invalid_reason(prepared, live.entries, live.boundary)

    def discard(self, prepared: PreparedCompaction, reason: str) -> CompactionDiscarded:
        """Log that `prepared` will never be applied, and why."""
        return self._compactor._record(CompactionDiscarded(prepared_id=prepared.id, reason=reason))

    def apply(self, prepared: PreparedCompaction) -> CompactionOutcome:
        """Apply a logged prepared compaction: a boundary naming it, with today's state; or discard it when invalid.

        Returns:
            `compacted` with the boundary, or `not_enough_freed` when it was discarded (the message says why).
        """
        compactor = self._compactor
        if reason := self.check(prepared):
            self.discard(prepared, reason)
            compactor.emit(CompactionEvent("failed", prepared.trigger, f"prepared compaction discarded: {reason}"))
            return CompactionOutcome("not_enough_freed", f"discarded: {reason}")
        grown = max(0, compactor.context_tokens() - prepared.boundary.tokens_before)  # what the turns since added
        boundary = msgspec.structs.replace(
            prepared.boundary,
            tokens_before=prepared.boundary.tokens_before + grown,
            tokens_after=prepared.boundary.tokens_after + grown,
            state=compactor._snapshot(),
            prepared_id=prepared.id,
        )
        recorded = compactor._record(boundary)
        result = SummaryResult(parse_summary(boundary.summary), "background")
        return compactor._applied(recorded, result)
