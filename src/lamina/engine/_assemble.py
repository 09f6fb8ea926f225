"""One turn assembly: the one place a `TurnContext` is built, from data alone (pure).

The engine's `prepare_turn`, `preview_turn` and `reprepare`, the inspector's rebuilt requests and
the composition report all call `assemble_turn`; the compaction summary and the user's words lane
are derived here (`summary_of`, `lane_of`), so a live turn and a turn rebuilt from the log show
them alike (invariant 1: what is logged is what is sent). `logged_turn` splits a logged request's
provider-view entries into the turn it carried, for the inspector and the composition report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from lamina.compaction import render_lane, render_ledger
from lamina.context import Authority, OneShot, Part, SafeText, Stability, StableContext, Tier, ToolSpec, TurnContext
from lamina.defang import neutralise, trusted
from lamina.session import CompactionBoundary, CostDecision, LogEntry, TurnRecord, UserMessage, server_block

__all__ = ["LoggedTurn", "assemble_turn", "lane_of", "logged_turn", "summary_of"]


def summary_of(boundary: CompactionBoundary | None) -> SafeText | None:
    """The compaction summary as requests show it: neutralised, also when an older Lamina stored it raw.

    Args:
        boundary: The latest compaction of the provider view (None: the session was not compacted).

    Returns:
        The summary put before the history, or None without a compaction.
    """
    return neutralise(boundary.summary) if boundary is not None else None


def lane_of(boundary: CompactionBoundary | None, *, data_dir: str) -> SafeText | None:
    """The user's words lane as requests show it: the pinned block after the summary (`render_lane`).

    Rendered once per lane and data folder (neutralising a full lane takes a while; a few are kept).

    Args:
        boundary: The latest compaction of the provider view (None: the session was not compacted).
        data_dir: The session's data folder, as the model's tools reach it (the lane's archives are under it).

    Returns:
        The pinned block, or None without a compaction or without user messages in its lane.
    """
    return _rendered_lane(boundary, data_dir) if boundary is not None else None


@lru_cache(maxsize=8)
def _rendered_lane(boundary: CompactionBoundary, data_dir: str) -> SafeText | None:
    return render_lane(boundary.lane, data_dir=data_dir, legacy=boundary.ledger)


def assemble_turn(
    *,
    turn_id: str,
    session_id: str,
    user: UserMessage | None,
    history: Sequence[LogEntry],
    stable: StableContext,
    volatile: Sequence[Part] = (),
    one_shots: Sequence[OneShot] = (),
    boundary: CompactionBoundary | None = None,
    data_dir: str = "data",
    tools: Sequence[ToolSpec] = (),
    stable_seen: bool = False,
    turn_ttl: Literal["5m", "1h"] | None = None,
    cost: CostDecision | None = None,
) -> TurnContext:
    """The one turn assembly: every `TurnContext` is built here, from data alone (pure).

    The summary and the user's words lane are derived from `boundary` here (`summary_of`,
    `lane_of`), so a live turn and a turn rebuilt from the log show them alike.

    Args:
        turn_id: The turn's id (logged in its `TurnRecord`).
        session_id: The session the turn belongs to.
        user: The turn's user message (None: a request with no user message, rebuilt from a log).
        history: Provider-view entries up to and including `user` (and, rebuilt, its record).
        stable: The stable parts the request carries (the cached prefix).
        volatile: The volatile parts this turn's tail carries.
        one_shots: The one-shot parts this turn's tail carries.
        boundary: The latest compaction of the provider view, if any.
        data_dir: The session's data folder, as the model's tools reach it.
        tools: The tool definitions the request carries.
        stable_seen: Whether this stable version was already sent in the current context window.
        turn_ttl: The TTL the cost model chose for the turn's cache breakpoint (None: the target's).
        cost: That choice's expected figures, logged with the turn.

    Returns:
        The frozen turn: logged as `record()`, rendered as is.
    """
    block = server_block(boundary.server) if boundary is not None else None
    return TurnContext(
        id=turn_id,
        session_id=session_id,
        user_entry_id=user.id if user is not None else "",
        user_text=user.text if user is not None else "",
        stable=stable,
        volatile=tuple(volatile),
        one_shots=tuple(one_shots),
        history=history,
        summary=summary_of(boundary),
        pinned=lane_of(boundary, data_dir=data_dir),
        server=block,
        server_prelude=render_ledger(boundary.ledger) if boundary is not None and block is not None else None,
        tools=tuple(tools),
        stable_seen=stable_seen,
        turn_ttl=turn_ttl,
        cost=cost,
    )


@dataclass(frozen=True, slots=True)
class LoggedTurn:
    """The turn a logged request carried, split out of the provider-view entries sent with it."""

    user: UserMessage | None
    """The turn's user message: the last one among the entries (None: there is none)."""
    history: Sequence[LogEntry]
    """The entries up to and including `user` (all of them without one)."""
    continuation: Sequence[LogEntry]
    """The entries after `user`: its turn record(s) and the tool loop so far."""
    record: TurnRecord | None
    """The latest turn record of `user` (what its tail carried); None: the log has none."""

    def assemble(
        self,
        *,
        session_id: str,
        stable: StableContext,
        boundary: CompactionBoundary | None,
        data_dir: str,
        tools: Sequence[ToolSpec] = (),
        turn_id: str = "",
    ) -> TurnContext:
        """The turn as the engine built it (`assemble_turn`), its tail read back from `record`.

        Args:
            session_id: The session the turn belongs to.
            stable: The stable prefix the request carried.
            boundary: The latest compaction before the request, if any.
            data_dir: The session's data folder, as the model's tools reach it.
            tools: The tool definitions the request carried (the log's latest `tools` record, or a stand-in).
            turn_id: The turn's id when there is no record to read it from.

        Returns:
            The rebuilt turn; rendered with `continuation`, it gives the request that was sent.
        """
        record = self.record
        return assemble_turn(
            turn_id=record.turn_id if record is not None else turn_id,
            session_id=session_id,
            user=self.user,
            history=self.history,
            stable=stable,
            # Lamina's own sentences, recorded as built; the tail admits them again when it renders
            volatile=tuple(_volatile_part(p.key, p.text) for p in record.volatile) if record is not None else (),
            one_shots=tuple(OneShot(p.part_id or "", p.key, p.text) for p in record.one_shots)
            if record is not None
            else (),
            boundary=boundary,
            data_dir=data_dir,
            tools=tools,
            turn_ttl=record.turn_ttl if record is not None and isinstance(record.turn_ttl, str) else None,
            cost=record.decision if record is not None and isinstance(record.decision, CostDecision) else None,
        )


def logged_turn(entries: Sequence[LogEntry]) -> LoggedTurn:
    """Split the provider-view entries a logged request carried into its turn.

    Args:
        entries: The request's provider view (prunes applied as the engine applied them), oldest first.

    Returns:
        The turn's user message, the history up to it, what follows it and its latest turn record.
    """
    user_at = next((i for i in range(len(entries) - 1, -1, -1) if isinstance(entries[i], UserMessage)), None)
    if user_at is None:
        return LoggedTurn(None, entries, (), None)
    user = entries[user_at]
    assert isinstance(user, UserMessage)
    history, continuation = entries[: user_at + 1], entries[user_at + 1 :]
    record = next(
        (e for e in reversed(continuation) if isinstance(e, TurnRecord) and e.user_entry_id == user.id),
        None,
    )
    return LoggedTurn(user, history, continuation, record)


def _volatile_part(key: str, text: str) -> Part:
    return Part(key, trusted(text), key, Authority.SYSTEM_RULE, Stability.VOLATILE, Tier.SESSION_STATE)
