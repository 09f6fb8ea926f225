"""Branching: where a branch starts, and the seed that carries the conversation to it (pure)."""

from __future__ import annotations

import secrets

from lamina.errors import UsageError
from lamina.session import (
    BRANCH_SEED_HEADING,
    LogEntry,
    OutboxRecord,
    ProviderView,
    UserMessage,
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
