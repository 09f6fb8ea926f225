"""The context engine: one session's turn preparation, one-shot outbox and commit.

`ContextEngine` is the I/O shell around the pure turn assembly: it reads the clock, asks the
workspace for the stable parts, appends to the session log, and keeps the provider view and the
outbox in memory so that preparing a turn costs the same however long the history is. The loop
around it (providers, tools) only calls `prepare_turn`, `record`, `request_messages` and
`commit`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import overload

from lamina.parts import Part
from lamina.placement import RenderCache, RenderedRequest, RenderTarget, render
from lamina.session.entries import (
    CompactionBoundary,
    Entry,
    LogEntry,
    OutboxRecord,
    StateChange,
    TurnRecord,
    UserMessage,
)
from lamina.session.store import JsonlSession
from lamina.turn import (
    OneShot,
    StableContext,
    ToolSpec,
    TurnContext,
    VolatileInputs,
    build_volatile_parts,
    changed_volatile,
    pin_stable,
)

StableSource = Callable[[], Sequence[Part]]
"""Returns the current stable parts; expected to be cheap (the workspace layer caches)."""


class HistorySlice(Sequence[LogEntry]):
    """A fixed-length, read-only view of the engine's append-only provider view (O(1) to take)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[LogEntry], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[LogEntry]: ...
    def __getitem__(self, index: int | slice) -> LogEntry | Sequence[LogEntry]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._items[index]

    def __iter__(self) -> Iterator[LogEntry]:
        items = self._items
        for i in range(self._length):
            yield items[i]


def _new_turn_id() -> str:
    return "turn_" + secrets.token_hex(6)


class ContextEngine:
    """Prepares, records and commits the turns of one open session."""

    def __init__(
        self,
        session: JsonlSession,
        *,
        stable_source: StableSource,
        tools: Sequence[ToolSpec] = (),
        time_zone: str = "UTC",
        mode: str | None = None,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = _new_turn_id,
    ) -> None:
        self.session = session
        self.tools = tuple(tools)
        self.time_zone = time_zone
        self._stable_source = stable_source
        self._clock = clock
        self._new_id = new_id
        self._mode = "ask"
        self._sources: tuple[str, ...] = ()
        self._stable: StableContext | None = None
        self._pending: dict[str, OneShot] = {}
        self._render_cache = RenderCache()
        self._mode_recorded = False
        for entry in session.entries_loaded():
            self._track_session_wide(entry)
        self._rebuild_view()
        if mode is not None and not self._mode_recorded:
            # the session's starting mode: recorded, but not a transition the model must be told about
            self.record(StateChange(key="mode", value=mode), durable=True)

    # -- state derived from the log --------------------------------------------------------------

    def _track_session_wide(self, entry: LogEntry) -> None:
        match entry:
            case OutboxRecord(status="queued", part_id=pid, kind=kind, text=text):
                self._pending[pid] = OneShot(pid, kind, text)
            case OutboxRecord(status="delivered", part_id=pid):
                self._pending.pop(pid, None)
            case StateChange(key="mode", value=value):
                self._mode = value
                self._mode_recorded = True
            case StateChange(key="sources", value=value):
                self._sources = tuple(s for s in value.split(",") if s)
            case StateChange(key="stable", value=value):
                version, _, digest = value.partition(":")
                self._recorded_stable = (int(version), digest)
            case _:
                pass

    _recorded_stable: tuple[int, str] | None = None

    def _rebuild_view(self) -> None:
        view = self.session.view()
        self._view: list[LogEntry] = list(view.entries)
        self._summary = view.boundary.summary if view.boundary else None
        self._last_seen: dict[str, str] = {}
        self._stable_seen_digest: str | None = None
        for entry in self._view:
            self._track_view(entry)

    def _track_view(self, entry: LogEntry) -> None:
        if isinstance(entry, TurnRecord):
            for part in entry.volatile:
                self._last_seen[part.key] = part.text
            self._stable_seen_digest = entry.stable_digest

    # -- public API ------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def active_sources(self) -> tuple[str, ...]:
        return self._sources

    @property
    def pending_one_shots(self) -> tuple[OneShot, ...]:
        return tuple(self._pending.values())

    def record(self, entry: Entry, *, durable: bool | None = None) -> Entry:
        """Append an entry to the log and to the in-memory provider view."""
        stamped = self.session.append(entry, durable=durable)
        self._track_session_wide(stamped)
        if isinstance(stamped, CompactionBoundary):
            self._rebuild_view()
        else:
            self._view.append(stamped)
            self._track_view(stamped)
        return stamped

    def queue_one_shot(self, kind: str, text: str) -> str:
        """Queue a part to be delivered to the model exactly once; durable before this returns."""
        part_id = "os_" + secrets.token_hex(6)
        self.record(OutboxRecord(part_id=part_id, status="queued", kind=kind, text=text))
        return part_id

    def set_mode(self, mode: str) -> None:
        """Change the permission mode: a state change, and a one-shot signal for the model."""
        if mode == self._mode:
            return
        previous = self._mode
        self.record(StateChange(key="mode", value=mode, previous=previous), durable=True)
        self.queue_one_shot("mode_transition", f"The permission mode changed from {previous} to {mode}.")

    def set_sources(self, sources: Sequence[str]) -> None:
        """Set the active sources; newly activated ones are introduced once through the outbox."""
        new = tuple(dict.fromkeys(sources))
        if new == self._sources:
            return
        added = [s for s in new if s not in self._sources]
        self.record(StateChange(key="sources", value=",".join(new), previous=",".join(self._sources)), durable=True)
        if added:
            self.queue_one_shot(
                "source_activated",
                f"Newly active sources: {', '.join(added)}. Read each source's guide before using its tools.",
            )

    def _refresh_stable(self) -> StableContext:
        parts = tuple(self._stable_source())
        current = self._stable
        if current is None and self._recorded_stable is not None:
            version, digest = self._recorded_stable
            if StableContext.digest_of(parts) == digest:
                current = StableContext(parts, version, digest)
                self._stable = current
                return current
            current = StableContext((), version, digest)
        pinned, change = pin_stable(current, parts)
        if change is not None:
            detail = f"version {pinned.version}: {change.describe()}"
            previous = f"{current.version}:{current.digest}" if current else None
            self.record(
                StateChange(key="stable", value=f"{pinned.version}:{pinned.digest}", previous=previous, detail=detail)
            )
        self._stable = pinned
        return pinned

    def volatile_inputs(self) -> VolatileInputs:
        """The inputs of this turn's volatile parts, read now."""
        data_dir = str(self.session.folder / "data")
        plans_dir = str(self.session.folder / "plans")
        now = datetime.fromtimestamp(self._clock(), UTC)
        return VolatileInputs(
            now=now,
            time_zone=self.time_zone,
            permission_mode=self._mode,
            plans_dir=plans_dir,
            data_dir=data_dir,
            active_sources=self._sources,
        )

    def prepare_turn(self, user_text: str) -> TurnContext:
        """Build this turn's context exactly once, and log it as built.

        Appends the user message and a `TurnRecord` of the turn context. One-shot parts pending in
        the outbox are carried, and stay pending until `commit`.
        """
        stable = self._refresh_stable()
        stable_seen = self._stable_seen_digest == stable.digest
        user = self.record(UserMessage(text=user_text))
        turn = TurnContext(
            id=self._new_id(),
            session_id=self.session.id,
            user_entry_id=user.id,
            user_text=user_text,
            stable=stable,
            volatile=changed_volatile(build_volatile_parts(self.volatile_inputs()), self._last_seen),
            one_shots=tuple(self._pending.values()),
            history=HistorySlice(self._view, len(self._view)),
            summary=self._summary,
            tools=self.tools,
            stable_seen=stable_seen,
        )
        self.record(turn.record())
        return turn

    def continuation(self, turn: TurnContext) -> Sequence[LogEntry]:
        """The entries appended since `turn` was prepared (its tool loop so far)."""
        return self._view[len(turn.history) :]

    def request(self, turn: TurnContext, target: RenderTarget) -> RenderedRequest:
        """The next request of `turn` (its tool loop so far included), reusing completed turns' rendering."""
        return render(turn, target, continuation=self.continuation(turn), cache=self._render_cache)

    def commit(self, turn: TurnContext) -> None:
        """Mark the turn's one-shot parts delivered: the provider accepted a request carrying them.

        Call only after a provider accepted a request carrying `turn`. Each delivery record is
        fsynced before this returns (outbox records are critical entries); a one-shot whose
        delivery is recorded is never sent again. Committing twice is harmless.
        """
        for one_shot in turn.one_shots:
            if one_shot.part_id in self._pending:
                delivered = OutboxRecord(
                    part_id=one_shot.part_id, status="delivered", turn_id=turn.id, kind=one_shot.kind
                )
                self.record(delivered)

    def end_turn(self) -> None:
        """The turn boundary: everything the turn appended is made durable (one fsync)."""
        self.session.flush()
