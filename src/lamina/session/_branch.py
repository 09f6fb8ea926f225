"""Branches: what a branch created at an entry holds, and what its first request will carry (pure).

Described in docs/session-log.md ("Branches").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lamina.session._entries import AssistantMessage, LogEntry, ToolCall, ToolResult, UserMessage

BranchStrategy = Literal["log", "seed", "native_fork"]
EntryKind = Literal["user", "assistant", "tool_call", "tool_result", "other"]


def entry_kind(entry: LogEntry) -> EntryKind:
    """What kind of entry a branch point is."""
    match entry:
        case UserMessage():
            return "user"
        case AssistantMessage():
            return "assistant"
        case ToolCall():
            return "tool_call"
        case ToolResult():
            return "tool_result"
        case _:
            return "other"


def open_tool_calls(path: Sequence[LogEntry]) -> tuple[str, ...]:
    """Ids of the tool calls at the end of `path` that have no result on it (a branch inside a tool loop).

    The renderers close them with an "interrupted" result, so the request stays well-formed and
    the model knows they did not run on this branch.
    """
    start = next((i for i in range(len(path) - 1, -1, -1) if isinstance(path[i], UserMessage | AssistantMessage)), 0)
    calls: dict[str, None] = {}
    for entry in path[start:]:
        if isinstance(entry, ToolCall):
            calls[entry.call_id] = None
        elif isinstance(entry, ToolResult):
            calls.pop(entry.call_id, None)
    return tuple(calls)


@dataclass(frozen=True, slots=True)
class Branch:
    """A branch just created: where it starts, what it holds, and what its next request carries."""

    session_id: str
    entry_id: str
    """The branch point: the last entry of the old path the branch keeps."""
    kind: EntryKind
    """What the branch point is: a user message, an assistant message, or a point inside a tool loop."""
    leaf_id: str
    """The new leaf: the branch point, the entry before a user message, or the branch seed's record."""
    abandoned_leaf_id: str | None
    """The leaf before the branch (its path stays in the log)."""
    in_view: bool
    """Whether the branch point was still in the provider view the model was being sent."""
    strategy: BranchStrategy
    view_entries: int
    """Entries of the branch's own provider view (what a log-rendered request sends as history)."""
    summarised: bool
    """Whether a compaction on the branch's own path stands for its oldest part."""
    open_calls: tuple[str, ...] = ()
    """Tool calls at the branch point without a result on the branch: sent as interrupted."""
    seed_id: str | None = None
    """The outbox id of the branch seed, when one was queued."""
    offered_text: str | None = None
    """At a user message: its text, offered back to send again or edit (the branch starts before it)."""

    @property
    def note(self) -> str:
        """One line saying whether the branch point is still in the provider view and what happens instead."""
        point = f"branch point {self.entry_id} ({self.kind.replace('_', ' ')})"
        history = f"{self.view_entries} entries" + (" after the compaction summary" if self.summarised else "")
        calls = (
            f"; {len(self.open_calls)} tool call(s) there have no result on this branch and are sent as interrupted"
            if self.open_calls
            else ""
        )
        match self.strategy:
            case "native_fork":
                how = "the provider forks its own transcript there"
            case "seed":
                how = (
                    "the provider keeps its own transcript and cannot fork there: a fresh provider session "
                    f"starts and the next turn carries a one-shot branch seed ({history}, most recent first)"
                )
            case "log":
                how = f"the next request sends the branch's history from the log ({history})"
        if self.kind == "user":
            calls += "; the branch starts before that message, whose text is offered back to send again or edit"
        if self.in_view:
            where = "is in the provider view"
            if self.strategy == "log":
                how += ", as it was sent before (the cached prefix up to it can be read again)"
        else:
            where = "is no longer in the provider view (a compaction summarised it, or it is on another branch)"
            if self.strategy == "log":
                how += ", not from the prompt cache; a turn over the compaction threshold compacts it first"
        return f"{point} {where}: {how}{calls}"
