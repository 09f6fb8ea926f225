"""Where a session stands, read from its log and its writer lock: running, waiting, ended, failed, interrupted (pure).

The leaf's path says how the last turn ended: an answer (the turn is over), an error the agent
logged (`TURN_FAILED`), an interruption (the "interrupted" results and one-shot the agent records
when a turn is cancelled), or nothing (the turn stopped half way). Whether a process holds the
session open for writing tells a running turn from a stopped one, and a chat waiting for its user
from a session that ended. docs/inspector.md has the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from lamina.context import INTERRUPTED_RESULT
from lamina.session import (
    TURN_FAILED,
    AssistantMessage,
    Custom,
    LogEntry,
    OutboxRecord,
    PlanState,
    ToolCall,
    ToolResult,
    UserMessage,
)

Status = Literal["running", "waiting for the user", "ended", "failed", "interrupted", "empty"]

INTERRUPTION_KIND: Final = "interruption"
"""The one-shot the agent queues when a turn is cancelled."""


@dataclass(frozen=True, slots=True)
class Standing:
    """A session's status and what it says more (the error of a failed turn, what a running turn is doing)."""

    status: Status
    detail: str = ""


def standing_of(path: Sequence[LogEntry], *, writing: bool) -> Standing:
    """Where the session whose leaf ends `path` stands.

    Args:
        path: The entries from the root to the session's leaf.
        writing: Whether a process has the session open for writing now (a chat or a run).

    Returns:
        The status: `running` (a turn under way), `waiting for the user` (a process holds the session
        and its last turn is over), `ended` (no process holds it and its last turn is over), `failed`
        (its last turn logged an error, given as the detail), `interrupted` (its last turn was
        cancelled, or stopped half way with no process left), or `empty` (no message yet).
    """
    last: LogEntry | None = None
    failure = ""
    interrupted = False
    plan_waiting = False
    for entry in path:
        match entry:
            case UserMessage() | AssistantMessage() | ToolCall():
                last, failure, interrupted = entry, "", False
            case ToolResult(content=content):
                last, failure = entry, ""
                interrupted = content == INTERRUPTED_RESULT
            case Custom(name=name, data=data) if name == TURN_FAILED:
                failure = _error_words(data)
            case OutboxRecord(status="queued", kind=kind) if kind == INTERRUPTION_KIND:
                interrupted = True
            case PlanState(state=state):
                plan_waiting = state == "submitted"
            case _:
                pass
    if failure:
        return Standing("failed", failure)
    if interrupted:
        return Standing("interrupted", "the user interrupted the turn")
    if last is None:
        return Standing("waiting for the user" if writing else "empty")
    done = isinstance(last, AssistantMessage) or plan_waiting
    if done:
        detail = "a plan awaits a decision" if plan_waiting else ""
        return Standing("waiting for the user" if writing else "ended", detail)
    if writing:
        return Standing("running", "running a tool" if isinstance(last, ToolCall) else "waiting for the model")
    return Standing("interrupted", "the turn stopped half way: its process ended without logging an error")


def _error_words(data: object) -> str:
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, str) and error:
            return error
    return "an error (the log does not say which)"
