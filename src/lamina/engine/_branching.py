"""Branching: where a branch starts, its seed, and the log moved onto it (I/O: the log)."""

from __future__ import annotations

import secrets

from lamina.engine._compaction import CONVERSATION
from lamina.errors import UsageError
from lamina.session import (
    BRANCH_SEED_HEADING,
    Branch,
    LogEntry,
    OutboxRecord,
    ProviderView,
    SessionLog,
    UserMessage,
    entry_kind,
    open_tool_calls,
    view_summary,
)
from lamina.tokens import TokenEstimator


def branch_leaf(point: LogEntry) -> tuple[str, str | None]:
    """Where a branch at `point` starts, and the user's text to offer again (None: none).

    At a user message the branch starts just before it, as Claude Code's rewind does: the message
    is not on the branch (it would be left unanswered there) and its text comes back.

    Raises:
        UsageError: `point` is a user message that is the first entry of the log.
    """
    if not isinstance(point, UserMessage):
        return point.id, None
    if point.parent_id is None:
        raise UsageError(f"entry {point.id!r} is the session's first entry: there is nothing before it")
    return point.parent_id, point.typed or None


def branch_seed(view: ProviderView, estimator: TokenEstimator) -> OutboxRecord:
    """The hidden one-shot that seeds a branch whose view is `view` (for a provider that cannot fork there)."""
    text = view_summary(view, heading=BRANCH_SEED_HEADING, estimator=estimator)
    return OutboxRecord(
        part_id="os_" + secrets.token_hex(6), status="queued", kind="branch_seed", text=text, hidden=True
    )


def branch_session(
    session: SessionLog, entry_id: str, *, seed: bool, estimator: TokenEstimator, in_view: bool
) -> tuple[Branch, ProviderView, OutboxRecord | None]:
    """Move the log's leaf to a branch at `entry_id` (with its seed, in the same durable line, when asked).

    Args:
        session: The open session log.
        entry_id: The entry to branch at.
        seed: Queue a hidden one-shot branch seed on the branch.
        estimator: Counts the seed's tokens.
        in_view: Whether the branch point is still in the provider view the model was being sent.

    Returns:
        The branch, its provider view (before the seed), and the seed's record as the log stamped it.

    Raises:
        UsageError: No such entry, or a user message that is the first entry of the log.
    """
    point, abandoned = session.get(entry_id), session.leaf_id
    leaf_id, offered = branch_leaf(point)
    view = session.view(leaf_id)  # walks back only to the branch's own latest compaction
    first = branch_seed(view, estimator) if seed else None
    stamped = session.branch(leaf_id, first=first) if first is not None else session.branch(leaf_id)
    made = Branch(
        session_id=session.id,
        entry_id=entry_id,
        kind=entry_kind(point),
        leaf_id=session.leaf_id or leaf_id,
        abandoned_leaf_id=abandoned,
        in_view=in_view,
        strategy="seed" if seed else "log",
        view_entries=sum(isinstance(e, CONVERSATION) for e in view.entries),
        summarised=view.boundary is not None,
        open_calls=open_tool_calls(view.entries),
        seed_id=first.part_id if first is not None else None,
        offered_text=offered,
    )
    return made, view, stamped
