"""Compaction's pieces around the pure `lamina.compaction`: its outcome, its events, the archive write (I/O)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lamina.compaction import (
    CutPoint,
    LaneUpdate,
    ServerSummariser,
    Summariser,
    SummaryResult,
    archive_name,
    archive_text,
    find_cut_point,
    parse_summary,
    turn_prefix_item,
    update_lane,
    update_ledger,
)
from lamina.errors import LaminaError
from lamina.pricing import Outlook
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    CostDecision,
    Ledger,
    LogEntry,
    SessionFiles,
    ToolCall,
    ToolResult,
    UserLane,
    UserMessage,
    server_block,
)
from lamina.tokens import TokenEstimator

CompactionStatus = Literal["compacted", "already_compacted", "nothing_to_compact", "not_enough_freed"]


CONVERSATION = (UserMessage, AssistantMessage, ToolCall, ToolResult)
_EMPTY_LANE = UserLane()


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """Compaction progress for a UI: `started`, `completed` or `failed`."""

    kind: Literal["started", "completed", "failed"]
    trigger: str
    message: str


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What a compaction request did."""

    status: CompactionStatus
    message: str
    boundary: CompactionBoundary | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    summary_by: str | None = None


def choose_cut(view: Sequence[LogEntry], *, keep_tokens: int, estimator: TokenEstimator, whole: bool) -> CutPoint:
    """Where a compaction cuts `view`.

    Args:
        view: The provider view to compact.
        keep_tokens: Recent tokens kept verbatim.
        estimator: Counts them.
        whole: Keep nothing verbatim (a plan runs in a fresh context).

    Returns:
        The cut point.
    """
    cut = find_cut_point(view, keep_tokens=keep_tokens, estimator=estimator)
    if whole:
        cut = dataclasses.replace(
            cut, first_kept_id=None, summarised=tuple(view), kept=(), split_turn_prefix=(), tokens_kept=0
        )
    return cut


def nothing_new(cut: CutPoint, boundary: CompactionBoundary | None) -> CompactionOutcome | None:
    """The outcome of a compaction with no conversation to summarise (None: there is some)."""
    if any(isinstance(e, CONVERSATION) for e in cut.summarised):
        return None
    if boundary is not None:
        return CompactionOutcome("already_compacted", "already compacted: nothing new to summarise")
    return CompactionOutcome("nothing_to_compact", "nothing to compact: the conversation fits the kept budget")


@dataclass(frozen=True, slots=True)
class Summarised:
    """A compaction's summary: the summariser's result, the ledger and the rendered summary text."""

    result: SummaryResult
    ledger: Ledger
    summary: str
    backend: CostDecision | None = None
    """A `ServerSummariser`'s choice of backend: who wrote the summary, and why (None: Lamina's, unchosen)."""


async def summarise(
    summariser: Summariser,
    cut: CutPoint,
    view: tuple[CompactionBoundary | None, str | None],
    *,
    focus: str | None,
    workspace: str,
    outlook: Outlook | None = None,
    rewrite_tokens: int = 0,
) -> Summarised:
    """Summarise what `cut` summarises after the view's `(boundary, summary)`, the split turn's prefix as one item.

    A `ServerSummariser` is given the latest block and the cost model's `outlook` (and what its
    block would make the next request write again, `rewrite_tokens`): it picks the backend.
    """
    boundary, previous_summary = view
    ledger = update_ledger(boundary.ledger if boundary else Ledger(), cut.summarised, workspace=workspace)
    previous = parse_summary(previous_summary) if previous_summary else None
    backend: CostDecision | None
    if isinstance(summariser, ServerSummariser):
        block = server_block(boundary.server) if boundary is not None else None
        result, backend = await summariser.compact_server(
            (block, previous_summary), cut.history, ledger, focus=focus, outlook=outlook, rewrite_tokens=rewrite_tokens
        )
    else:
        result = await summariser.summarise(previous, cut.history, ledger, focus=focus)
        backend = result.decision  # Lamina's summariser on the cache or fresh, priced (None: not weighed)
    structured = result.summary
    if cut.split_turn_prefix:  # one item, not a second summary: the next compaction reads it back
        item = turn_prefix_item(cut.split_turn_prefix)
        structured = dataclasses.replace(structured, in_progress=(*structured.in_progress, item))
    return Summarised(result, ledger, structured.render(), backend)


def lane_of_boundary(boundary: CompactionBoundary | None) -> UserLane:
    """The user's words lane a compaction starts from."""
    return boundary.lane if boundary else _EMPTY_LANE


def archive(
    update: LaneUpdate,
    entries: Sequence[LogEntry],
    budget: int,
    *,
    files: SessionFiles,
    previous: UserLane,
    estimator: TokenEstimator,
) -> tuple[UserLane, str | None]:
    """The lane of `update`, once its new messages are written whole to the data folder (I/O).

    Returns:
        The lane, and why the file could not be written (None: written, or nothing to write). When
        it cannot be written, the lane says so (the log still holds every message).
    """
    if not update.archive:
        return update.lane, None
    # a lone surrogate cannot be encoded: shown as "?" in the file (the log keeps the exact text)
    text = archive_text(update.archive).encode("utf-8", errors="replace")
    try:
        files.put_file(f"data/{archive_name(update.archive)}", text)
    except (OSError, LaminaError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        lane = update_lane(previous, entries, budget_tokens=budget, estimator=estimator, archive_failed=reason)
        return lane.lane, reason
    return update.lane, None


def completed_message(tokens_before: int, tokens_after: int, result: SummaryResult, words: UserLane) -> str:
    """What a completed compaction says: the tokens, who summarised, the user's words kept."""
    note = f" (fallback: {result.fallback_reason})" if result.fallback_reason else ""
    kept = f"; {len(words.messages)} user messages verbatim" if words.last_turn else ""
    if words.left_out:
        kept += f" ({words.left_out} older in data/user-messages/)"
    return f"compacted {tokens_before:,} → {tokens_after:,} tokens; summary by {result.by}{note}{kept}"
