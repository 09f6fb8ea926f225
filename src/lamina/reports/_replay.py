"""The one replay of a logged turn: a past request rebuilt from the log the way the engine built it (pure).

The composition of a logged session (`logged_requests`) and the inspector's rebuilt requests both
replay a request here; docs/reports.md tells how (the provider view, the prunes, the stable prefix,
the tool definitions the log recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from lamina.compaction import apply_prunes, show_server_clearing
from lamina.context import Part, StableContext, ToolSpec, TurnContext
from lamina.engine import logged_turn, prefix_context, recorded_tools
from lamina.session import AppliedEdit, CompactionBoundary, LogEntry, StateChange, TurnRecord, provider_view

__all__ = ["RecordedPrefixes", "RecordedTools", "ReplayedRequest", "replay_request"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ReplayedRequest:
    """One logged request rebuilt: the turn it carried, as the engine assembled it, and its tool loop so far."""

    turn: TurnContext
    """The turn as the model read it: results the server's context editing cleared shown cleared."""
    continuation: tuple[LogEntry, ...]
    """The entries after the turn's user message (its turn record and the tool loop so far)."""
    record: TurnRecord | None
    """The turn's latest record (what its tail carried); None: the log has none."""
    sent: tuple[LogEntry, ...]
    """The provider-view entries the request carried, old tool output shown as its note."""
    boundary: CompactionBoundary | None
    """The latest compaction before the request, if any."""
    stable_recorded: bool
    """Whether the log recorded the stable prefix the turn record names (else a stand-in was used)."""
    tools_recorded: bool = False
    """Whether the log recorded the tool definitions the request sent (else the `tools` given stood in)."""


def _state_read(entry: LogEntry, key: str, read: Callable[[StateChange], _T | None]) -> _T | None:
    """What `read` makes of `entry` when it is a `key` state change (None otherwise, or when unreadable)."""
    return read(entry) if isinstance(entry, StateChange) and entry.key == key else None


class RecordedPrefixes:
    """The stable prefixes a log recorded (its `stable` state changes), by digest; feed entries with `observe`."""

    def __init__(self) -> None:
        self._by_digest: dict[str, StableContext] = {}

    def observe(self, entry: LogEntry) -> None:
        """Keep the prefix `entry` records, when it is a `stable` state change that records one.

        Args:
            entry: Any log entry, in log order.
        """
        context = _state_read(entry, "stable", prefix_context)
        if context is not None:
            self._by_digest.setdefault(context.digest, context)

    def stable_for(self, record: TurnRecord | None, fallback: Sequence[Part] = ()) -> tuple[StableContext, bool]:
        """The stable prefix a turn record names, and whether the log recorded it.

        Args:
            record: The turn's record (None: the log has none).
            fallback: The stable parts to stand in when the log did not record the prefix.

        Returns:
            The recorded prefix with True, or `fallback` (under the record's version and digest) with False.
        """
        if record is None:
            return StableContext(tuple(fallback), 0, ""), False
        known = self._by_digest.get(record.stable_digest)
        if known is not None:
            return known, True
        return StableContext(tuple(fallback), record.stable_version, record.stable_digest), False


class RecordedTools:
    """The tool definitions a log recorded last (its `tools` state changes); feed entries with `observe`."""

    def __init__(self) -> None:
        self.current: tuple[ToolSpec, ...] | None = None
        """The definitions of the latest `tools` change observed (None: none yet, an older log)."""

    def observe(self, entry: LogEntry) -> None:
        """Take the definitions `entry` records, when it is a readable `tools` state change.

        Args:
            entry: Any log entry, in append order.
        """
        tools = _state_read(entry, "tools", recorded_tools)
        if tools is not None:
            self.current = tools


def _tools_on(path: Sequence[LogEntry]) -> tuple[ToolSpec, ...] | None:
    """The definitions of the latest `tools` change on the path (None: it has none)."""
    found = RecordedTools()
    for entry in path:
        found.observe(entry)
    return found.current


def replay_request(
    path: Sequence[LogEntry],
    *,
    prefixes: RecordedPrefixes,
    session_id: str = "",
    data_dir: str = "data",
    tools: Sequence[ToolSpec] = (),
    turn_id: str = "",
    fallback_stable: Sequence[Part] = (),
    recorded: Sequence[ToolSpec] | None = None,
    applied: Sequence[AppliedEdit] | None = None,
) -> ReplayedRequest:
    """The request a model call answered, rebuilt from the log as the engine built it.

    Args:
        path: The root-to-call path: every entry before the call's assistant message, oldest first.
        prefixes: The stable prefixes the log recorded (at least up to the call).
        session_id: The session the request belongs to.
        data_dir: The session's data folder, as the model's tools reach it.
        tools: The tool definitions to stand in when the log recorded none (an older log).
        turn_id: The turn's id when there is no turn record to read it from.
        fallback_stable: The stable parts to stand in when the log did not record the prefix.
        recorded: The tool definitions the log recorded last before the call, in append order
            (None: the latest `tools` change on `path` is taken).
        applied: The context edits the call's response said the server applied (`AssistantMessage.context_edits`;
            None: as the request asked).

    Returns:
        The rebuilt turn as the model read it; rendered with its `continuation`, it gives the request that was
        sent, save for the results the server's context editing cleared, shown as the server showed them
        (`show_server_clearing`).
    """
    view = provider_view(list(path))
    entries = apply_prunes(view.entries)  # old tool output shown as its note, as the engine sent it
    logged = logged_turn(show_server_clearing(entries, applied=applied))
    stable, stable_recorded = prefixes.stable_for(logged.record, fallback_stable)
    sent_tools = _tools_on(path) if recorded is None else tuple(recorded)
    turn = logged.assemble(
        session_id=session_id,
        stable=stable,
        boundary=view.boundary,
        data_dir=data_dir,
        tools=tools if sent_tools is None else sent_tools,
        turn_id=turn_id,
    )
    return ReplayedRequest(
        turn=turn,
        continuation=tuple(logged.continuation),
        record=logged.record,
        sent=tuple(entries),
        boundary=view.boundary,
        stable_recorded=stable_recorded,
        tools_recorded=sent_tools is not None,
    )
