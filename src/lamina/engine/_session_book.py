"""Provider sessions (SPEC F11): where each provider resumes the current path's conversation (I/O: the log)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from lamina.engine._compaction import CompactionEvent
from lamina.engine._recorder import Recorder
from lamina.session import CompactionBoundary, ForkOrigin, LogEntry, ProviderSession, ProviderView, StateChange


def provider_session_in_view(view: ProviderView, provider: str) -> ProviderSession | None:
    """Where `provider` resumes the path whose provider view is `view`.

    For a branch about to be made: a provider that forks natively can continue the branch from
    there (nothing injected) instead of a fresh session with a branch seed.

    Returns:
        The provider session; None when the provider keeps no session of the path.
    """
    return path_provider_sessions(view.boundary, view.entries)[0].get(provider)


def path_provider_sessions(
    boundary: CompactionBoundary | None, entries: Sequence[LogEntry]
) -> tuple[dict[str, ProviderSession], dict[str, str]]:
    """Where each provider resumes the path `entries` (a provider view), and the id of the path's latest record.

    A compaction's snapshot says where they stood at the boundary; the records after it move them on.
    """
    sessions = {s.provider: s for s in boundary.state.provider_sessions} if boundary is not None else {}
    # the boundary's snapshot stands for the records before it (it was written on this path)
    records = {name: boundary.id for name in sessions} if boundary is not None else {}
    after = boundary is None
    for entry in entries:
        after = after or (boundary is not None and entry.parent_id == boundary.id)
        if after and isinstance(entry, StateChange) and entry.key == "provider_session":
            records[entry.provider] = entry.id
            if entry.session is None:
                sessions.pop(entry.provider, None)
            else:
                sessions[entry.provider] = entry.session
    return sessions, records


def resets_seen(entry: LogEntry) -> bool:
    """A provider session cleared or compacted: what earlier tails said is no longer in the provider's context."""
    return (
        isinstance(entry, StateChange)
        and entry.key == "provider_session"
        and (entry.session is None or entry.compacted)
    )


class ProviderSessionBook:
    """Where each provider resumes this path's conversation, and the records that say so (`engine.provider_sessions`).

    Every change is a `provider_session` state change recorded durably through the engine.
    """

    def __init__(
        self,
        *,
        record: Recorder,
        view: Callable[[], Sequence[LogEntry]],
        origin: Callable[[], ForkOrigin | None],
        emit: Callable[[CompactionEvent], None],
    ) -> None:
        """No provider sessions yet: the engine folds the log's records in (`observe`, `follow`).

        Args:
            record: The engine's write path.
            view: The provider view of the current path (its entries).
            origin: Where the session was forked from (None: not a fork).
            emit: Tells the compaction listeners of a provider's own compaction.
        """
        self._record = record
        self._view = view
        self._origin = origin
        self._emit = emit
        self.reset_hooks: list[Callable[[], None]] = []
        """Called when a provider compacted its own context (read state resets here, as after a compaction)."""
        self._sessions: dict[str, ProviderSession] = {}
        self._path_records: dict[str, str] = {}
        """Per provider, the id of the latest `provider_session` record on the current path."""
        self._written_records: dict[str, str] = {}
        """Per provider, the id of the latest `provider_session` record in the log (any path)."""

    def observe(self, entry: LogEntry) -> None:
        """Fold an entry of the log, in append order (where each provider session was last written)."""
        match entry:
            case StateChange(key="provider_session", provider=provider, session=session, id=record_id):
                self._written_records[provider] = self._path_records[provider] = record_id
                if session is None:
                    self._sessions.pop(provider, None)
                else:
                    self._sessions[provider] = session
            case CompactionBoundary(state=state):
                self._sessions = {s.provider: s for s in state.provider_sessions}
                for session in state.provider_sessions:  # the snapshot is the latest word on these sessions
                    self._written_records[session.provider] = self._path_records[session.provider] = entry.id
            case _:
                pass

    def follow(self, boundary: CompactionBoundary | None, entries: Sequence[LogEntry]) -> None:
        """Take the sessions of the path whose provider view is `entries` after `boundary`."""
        self._sessions, self._path_records = path_provider_sessions(boundary, entries)

    def all(self) -> tuple[ProviderSession, ...]:
        """Every provider-side session stored for this path, one per provider."""
        return tuple(self._sessions.values())

    def get(self, provider: str) -> ProviderSession | None:
        """The session `provider` keeps of this path's conversation, to resume through (None: none, or cleared).

        Marked `fork` when another path may have continued it since (a branch, a forked session, a
        point known only from a compaction's snapshot): the next turn forks it natively at this
        path's point (the SDK's `fork_session`) instead of continuing it, and records the new one.
        """
        session = self._sessions.get(provider)
        if session is None or session.fork or not self._shared(provider, self._view(), self._origin()):
            return session
        return msgspec.structs.replace(session, fork=True)

    def _shared(self, provider: str, view: Sequence[LogEntry], origin: ForkOrigin | None) -> bool:
        """Whether this path's provider session may also be another path's (so it must be forked, not continued)."""
        record = self._path_records.get(provider)
        if record is None or self._written_records.get(provider) != record:
            return True  # another path wrote a later one, or it is known only from a compaction's snapshot
        if origin is None:
            return False
        ids = [e.id for e in view]  # a forked session: a record copied from the source is the source's too
        if record not in ids:
            return True
        return origin.entry_id in ids and ids.index(record) <= ids.index(origin.entry_id)

    def set(self, session: ProviderSession) -> None:
        """Persist where `session.provider` resumes next (a state change, durable); unchanged: nothing logged."""
        previous = self._sessions.get(session.provider)
        if previous == session:
            return
        change = StateChange(
            key="provider_session",
            value=session.session_id,
            previous=previous.session_id if previous is not None else None,
            provider=session.provider,
            session=session,
        )
        self._record(change, durable=True)

    def clear(self, provider: str, reason: str) -> None:
        """Forget `provider`'s session (durably): its next turn starts a fresh one, told everything again."""
        previous = self._sessions.get(provider)
        change = StateChange(
            key="provider_session",
            value="",
            previous=previous.session_id if previous is not None else None,
            detail=reason,
            provider=provider,
        )
        self._record(change, durable=True)

    def compacted(self, provider: str, trigger: str, tokens_before: int) -> None:
        """Record that `provider` compacted its own context: the next tail restates everything, reads reset."""
        session = self._sessions.get(provider)
        detail = f"{provider} compacted its context ({trigger}" + (
            f", {tokens_before:,} tokens before)" if tokens_before else ")"
        )
        change = StateChange(
            key="provider_session",
            value=session.session_id if session is not None else "",
            detail=detail,
            provider=provider,
            session=session,
            compacted=True,
        )
        self._record(change, durable=True)
        for hook in self.reset_hooks:
            hook()
        self._emit(CompactionEvent("completed", trigger, detail))
