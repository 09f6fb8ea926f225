"""Provider sessions: where each provider resumes the current path's conversation."""

from __future__ import annotations

from collections.abc import Sequence

from lamina.session import CompactionBoundary, LogEntry, ProviderView, StateChange
from lamina.session._entries import ProviderSession


def provider_session_in_view(view: ProviderView, provider: str) -> ProviderSession | None:
    """Where `provider` resumes the path whose provider view is `view` (None: it keeps no session of it).

    For a branch about to be made: a provider that forks natively can continue the branch from
    there (nothing injected) instead of a fresh session with a branch seed.
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
