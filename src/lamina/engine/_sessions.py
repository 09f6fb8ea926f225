"""Provider sessions: where each provider resumes the current path's conversation (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

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


class ProviderSessions:
    """Where each provider resumes this path's conversation, and which records in the log say so."""

    def __init__(self) -> None:
        """No provider sessions yet: the log's records fill them."""
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

    def get(self, provider: str) -> ProviderSession | None:
        """The session stored for `provider` on this path, as recorded."""
        return self._sessions.get(provider)

    def all(self) -> tuple[ProviderSession, ...]:
        """Every provider-side session stored for this path, one per provider."""
        return tuple(self._sessions.values())

    def resume(self, provider: str, view: Sequence[LogEntry], origin: ForkOrigin | None) -> ProviderSession | None:
        """The session to resume through, marked `fork` when another path may have continued it since."""
        session = self._sessions.get(provider)
        if session is None or session.fork or not self._shared(provider, view, origin):
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

    def set_change(self, session: ProviderSession) -> StateChange | None:
        """The record that stores `session` (None: unchanged, nothing to record)."""
        previous = self._sessions.get(session.provider)
        if previous == session:
            return None
        return StateChange(
            key="provider_session",
            value=session.session_id,
            previous=previous.session_id if previous is not None else None,
            provider=session.provider,
            session=session,
        )

    def clear_change(self, provider: str, reason: str) -> StateChange:
        """The record that forgets `provider`'s session."""
        previous = self._sessions.get(provider)
        return StateChange(
            key="provider_session",
            value="",
            previous=previous.session_id if previous is not None else None,
            detail=reason,
            provider=provider,
        )

    def compacted_change(self, provider: str, trigger: str, tokens_before: int) -> StateChange:
        """The record that says `provider` compacted its own context (its `detail` says how)."""
        session = self._sessions.get(provider)
        detail = f"{provider} compacted its context ({trigger}" + (
            f", {tokens_before:,} tokens before)" if tokens_before else ")"
        )
        return StateChange(
            key="provider_session",
            value=session.session_id if session is not None else "",
            detail=detail,
            provider=provider,
            session=session,
            compacted=True,
        )
