"""The text of one-shot bridges: the recent conversation, newest first, within a token budget (pure).

Described in docs/session-log.md ("One-shot bridges").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from lamina.session._entries import AssistantMessage, CompactionBoundary, LogEntry, ToolCall, ToolResult, UserMessage
from lamina.session._tree import ProviderView
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

DEFAULT_BRIDGE_TOKENS: Final = 4_000
"""Tokens a bridge may take at most (F17: recovery and transfer are the last tier)."""
MESSAGE_CHARS: Final = 1_200
"""Characters kept of one message (its head); tool lines keep less."""
TOOL_CHARS: Final = 200
SUMMARY_CHARS: Final = 4_000


def _line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _bridge_line(entry: LogEntry, turn: int) -> str | None:
    """One line of the conversation for the model (`describe_entry` words entries for people), None to leave out."""
    match entry:
        case UserMessage(text=text, attachments=refs) as message:
            files = f" (attached: {', '.join(_line(r.name, 80) for r in refs)})" if refs else ""
            # a message Lamina wrote in the user's role (a plan's execution message) is not the user's words
            who = "Lamina wrote for the user" if message.by_lamina else "the user wrote"
            return f"- turn {turn}, {who}: {_line(text, MESSAGE_CHARS)}{files}"
        case AssistantMessage(text=text) if text.strip():
            return f"- turn {turn}, the assistant answered: {_line(text, MESSAGE_CHARS)}"
        case ToolCall(name=name, input=args):
            return f"- turn {turn}, the assistant called {_line(name, 80)} {_line(_json(args), TOOL_CHARS)}"
        case ToolResult(name=name, content=content, is_error=is_error):
            outcome = "failed" if is_error else "returned"
            return f"- turn {turn}, {_line(name, 80)} {outcome}: {_line(content, TOOL_CHARS)}"
        case _:
            return None


def _json(value: object) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, UnicodeEncodeError):
        return str(value)


def recent_conversation(
    entries: Sequence[LogEntry],
    *,
    heading: str,
    boundary: CompactionBoundary | None = None,
    budget_tokens: int = DEFAULT_BRIDGE_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> str:
    """`heading`, then the conversation of `entries` newest first, within `budget_tokens`.

    `entries` is a provider view or a path in order (oldest first); `boundary` is the compaction
    whose summary stands for what came before them, added last when every message fits. Turn
    numbers count the user messages of `entries` (1: the oldest one there).
    """
    turns: list[int] = []
    turn = 0
    for entry in entries:
        if isinstance(entry, UserMessage):
            turn += 1
        turns.append(max(turn, 1))
    lines: list[str] = []
    used = estimator.count(heading)
    left_out = 0
    for entry, number in zip(reversed(entries), reversed(turns), strict=True):
        line = _bridge_line(entry, number)
        if line is None:
            continue
        cost = estimator.count(line)
        if left_out or used + cost > budget_tokens:
            left_out += 1
            continue
        lines.append(line)
        used += cost
    if left_out:
        lines.append(f"({left_out} older messages left out)")
    elif boundary is not None and boundary.summary.strip():
        summary = _line(boundary.summary, SUMMARY_CHARS)
        if used + estimator.count(summary) <= budget_tokens:
            lines.append(f"- before these, in summary: {summary}")
    if not lines:
        lines.append("(no messages)")
    return heading + "\n" + "\n".join(lines)


BRANCH_SEED_HEADING: Final = (
    "This conversation continues from an earlier point of the session (a branch). The provider's copy "
    "of it was not kept, so here is the conversation up to that point, most recent first:"
)
TRANSFER_SUMMARY_HEADING: Final = (
    "This session was moved here from another machine; the provider's own copy of the conversation "
    "did not come along. The conversation so far, most recent first:"
)


def view_summary(
    view: ProviderView,
    *,
    heading: str,
    budget_tokens: int = DEFAULT_BRIDGE_TOKENS,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> str:
    """A bridge for a provider view: its entries newest first, then its compaction summary if room is left.

    Used with `BRANCH_SEED_HEADING` for the view at a branch point and with
    `TRANSFER_SUMMARY_HEADING` for an exported session's view.
    """
    return recent_conversation(
        view.entries, heading=heading, boundary=view.boundary, budget_tokens=budget_tokens, estimator=estimator
    )
