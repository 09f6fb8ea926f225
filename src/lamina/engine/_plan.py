"""Plan approval and "Accept & Compact": the durable state machine of SPEC F16 as one table (pure).

A plan is submitted by the model, then accepted, rejected or cancelled by the user; accepted with
"Accept & Compact", it is dispatched only once a compaction focused on it completed. Every
transition is a fsynced `PlanState` entry, `advance` folds them and `next_step` says what the
engine must do next. The states drawn, and why a plan is never lost: `docs/plans.md`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypeAlias

import msgspec

from lamina.defang import escape_path, neutralise
from lamina.errors import UsageError
from lamina.session import (
    AssistantMessage,
    CompactionBoundary,
    LogEntry,
    PlanSnapshot,
    PlanState,
    PlanStateName,
    UserMessage,
)

__all__ = [
    "OPEN_STATES",
    "TRANSITIONS",
    "Plan",
    "PlanStateName",
    "PlanStep",
    "PlanTransitionError",
    "advance",
    "check_transition",
    "compaction_focus",
    "continuation_message",
    "execution_message",
    "next_step",
    "rejection_message",
]

Plan: TypeAlias = PlanSnapshot
"""A plan and where its approval stands."""

TRANSITIONS: Final[Mapping[PlanStateName, frozenset[PlanStateName]]] = {
    "submitted": frozenset({"accepted", "rejected", "cancelled"}),
    "accepted": frozenset({"awaiting_compaction", "dispatched", "cancelled"}),
    "awaiting_compaction": frozenset({"compacted", "failed", "cancelled"}),
    "compacted": frozenset({"dispatched", "cancelled"}),
    "dispatched": frozenset({"done", "failed", "cancelled"}),
    "failed": frozenset({"accepted", "rejected", "cancelled"}),
    "done": frozenset(),
    "rejected": frozenset(),
    "cancelled": frozenset(),
}
"""The states each state may move to (a failed plan may be accepted again only if it was never dispatched)."""

_TITLE_CHARS: Final = 200
"""Characters of a plan's title the messages quote."""

OPEN_STATES: Final = frozenset({"submitted", "failed"})
"""States in which a plan waits for the user's decision."""

PlanStep: TypeAlias = Literal["compact", "mark_compacted", "dispatch", "send", "continue"]
"""What the engine does next for an accepted plan: start (or redo) its compaction, record the
compaction that completed, record the dispatch, send the execution message of a recorded dispatch,
or ask the model to go on with a logged execution message it never answered (the plan is not sent again)."""


class PlanTransitionError(UsageError):
    """A plan decision that its state does not allow (accepting a plan that ran, rejecting none)."""


def check_transition(plan: Plan | None, to: PlanStateName, *, plan_id: str | None = None) -> Plan:
    """The plan, if it may move to `to` now.

    Raises:
        PlanTransitionError: There is no such plan, or its state does not lead to `to`.
    """
    if plan is None or (plan_id is not None and plan.plan_id != plan_id):
        raise PlanTransitionError(f"no plan {plan_id!r} to mark {to}" if plan_id else f"there is no plan to mark {to}")
    if to not in TRANSITIONS[plan.state]:
        raise PlanTransitionError(f"plan {plan.plan_id!r} is {plan.state}; it cannot become {to}")
    if to == "accepted" and plan.dispatched:
        raise PlanTransitionError(f"plan {plan.plan_id!r} was already dispatched; it is never dispatched twice")
    if to == "dispatched" and plan.compact and plan.state != "compacted":
        raise PlanTransitionError(f"plan {plan.plan_id!r} cannot be dispatched before its compaction completed")
    return plan


def advance(plan: Plan | None, entry: LogEntry) -> Plan | None:
    """The plan after `entry` (entries in log order; a compaction's snapshot restates it)."""
    match entry:
        case PlanState(state="submitted"):
            return Plan(
                plan_id=entry.plan_id,
                state="submitted",
                title=entry.title,
                plan_path=entry.plan_path,
                text=entry.text,
            )
        case PlanState() if plan is not None and entry.plan_id == plan.plan_id:
            changes: dict[str, object] = {"state": entry.state, "detail": entry.detail}
            if entry.state == "accepted":
                # a new acceptance starts over: its own compaction, its own draft
                changes |= {
                    "compact": entry.compact,
                    "draft_input": entry.draft_input,
                    "compaction_id": None,
                    "run_mode": entry.run_mode,
                    "return_mode": entry.return_mode,
                }
            elif entry.state == "compacted":
                changes["compaction_id"] = entry.compaction_id or plan.compaction_id
            elif entry.state == "dispatched":
                changes["dispatched"] = True
            return msgspec.structs.replace(plan, **changes)
        case CompactionBoundary(state=state, plan_id=made_for):
            current = state.plan if state.plan is not None else plan
            if current is not None and made_for == current.plan_id and current.state == "awaiting_compaction":
                return msgspec.structs.replace(current, compaction_id=entry.id)
            return current
        case UserMessage() if plan is not None and plan.state == "dispatched" and plan.message_id is None:
            # the first user message after a dispatch is the execution message (nothing else is sent
            # before a recorded dispatch has been completed)
            return msgspec.structs.replace(plan, message_id=entry.id)
        case AssistantMessage() if plan is not None and plan.message_id is not None and not plan.answered:
            return msgspec.structs.replace(plan, answered=True)
        case _:
            return plan


def next_step(plan: Plan | None) -> PlanStep | None:
    """What moves an accepted plan forward now; None when nothing is to be done without the user."""
    if plan is None:
        return None
    match plan.state:
        case "accepted":
            return "compact" if plan.compact else "dispatch"
        case "awaiting_compaction":
            # the boundary was written but the process stopped before recording it: never compact twice
            return "mark_compacted" if plan.compaction_id is not None else "compact"
        case "compacted":
            return "dispatch"
        case "dispatched":
            if plan.message_id is None:
                return "send"
            return None if plan.answered else "continue"
        case _:
            return None


def _quoted_title(plan: Plan) -> str:
    """The plan's title as the messages quote it: the model wrote it, so it is neutralised."""
    return neutralise(" ".join(plan.title.split()), max_chars=_TITLE_CHARS) if plan.title else ""


def execution_message(plan: Plan) -> str:
    """The user message that dispatches `plan`: its path and its text, with the instruction to carry it out.

    Lamina writes it in the user's role, but the plan is the model's text: its title, file name and
    text are neutralised (`lamina.defang`), so no tag or turn marker in them reaches the request as
    written (a `</pinned>`, a forged `<session_state>`, a `Human:` line).
    """
    where = f" (saved at {escape_path(plan.plan_path)})" if plan.plan_path else ""  # a file name the model chose
    title = f": {_quoted_title(plan)}" if plan.title else ""
    return (
        f"I approved the plan{title}{where}. Carry it out now, step by step, and check the result as it says.\n\n"
        f"{neutralise(plan.text)}"
    )


def continuation_message(plan: Plan) -> str:
    """The user message after a reload when the execution message was logged but never answered."""
    title = f' "{_quoted_title(plan)}"' if plan.title else ""
    return f"Carry out the approved plan{title} given above; the session stopped before you could start."


def compaction_focus(plan: Plan) -> str:
    """The focus of an "Accept & Compact" compaction: what the plan needs from the conversation."""
    title = f' "{_quoted_title(plan)}"' if plan.title else ""
    return f"the approved plan{title}: keep what carrying it out needs (decisions, constraints, files involved)"


def rejection_message(plan: Plan, feedback: str) -> str:
    """The user message that sends a rejected plan back to planning, with the user's feedback."""
    title = f' "{_quoted_title(plan)}"' if plan.title else ""
    return f"I did not approve the plan{title}. Revise it and submit it again.\n\n{feedback}".rstrip()
