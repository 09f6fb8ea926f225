"""The plan machine's one transition table (pure): which state leads where, and what a move needs."""

from __future__ import annotations

from typing import get_args

import pytest

from lamina.engine import Plan, PlanTransitionError, next_step
from lamina.engine._plan import TRANSITIONS, check_transition
from lamina.session import PlanStateName

# --- the table (pure) ----------------------------------------------------------------------------------


def _plan(state: str, **fields: object) -> Plan:
    return Plan(plan_id="p1", state=state, **fields)  # type: ignore[arg-type]


def test_every_state_is_in_the_table_and_finished_states_lead_nowhere() -> None:
    assert set(TRANSITIONS) == set(get_args(PlanStateName))
    assert all(targets <= set(TRANSITIONS) for targets in TRANSITIONS.values())
    for finished in ("done", "rejected", "cancelled"):
        assert TRANSITIONS[finished] == frozenset()
    # every state before the dispatch can be cancelled; nothing is dispatched from submitted or failed
    for state in ("submitted", "accepted", "awaiting_compaction", "compacted", "failed"):
        assert "cancelled" in TRANSITIONS[state]
        assert "dispatched" not in TRANSITIONS[state] or state in ("accepted", "compacted")


def test_accept_and_compact_cannot_dispatch_before_its_compaction() -> None:
    with pytest.raises(PlanTransitionError, match="before its compaction completed"):
        check_transition(_plan("accepted", compact=True), "dispatched")
    check_transition(_plan("accepted", compact=False), "dispatched")
    check_transition(_plan("compacted", compact=True), "dispatched")


def test_a_failed_plan_is_accepted_again_only_if_it_never_ran() -> None:
    check_transition(_plan("failed"), "accepted")
    with pytest.raises(PlanTransitionError, match="never dispatched twice"):
        check_transition(_plan("failed", dispatched=True), "accepted")
    with pytest.raises(PlanTransitionError, match="no plan"):
        check_transition(None, "accepted")


@pytest.mark.parametrize(
    ("plan", "step"),
    [
        (_plan("submitted"), None),
        (_plan("accepted", compact=True), "compact"),
        (_plan("accepted"), "dispatch"),
        (_plan("awaiting_compaction", compact=True), "compact"),
        (_plan("awaiting_compaction", compact=True, compaction_id="b1"), "mark_compacted"),
        (_plan("compacted", compact=True, compaction_id="b1"), "dispatch"),
        (_plan("dispatched", dispatched=True), "send"),
        (_plan("dispatched", dispatched=True, message_id="m1"), "continue"),
        (_plan("dispatched", dispatched=True, message_id="m1", answered=True), None),
        (_plan("failed"), None),
        (_plan("done", dispatched=True, message_id="m1"), None),
    ],
)
def test_next_step_moves_an_accepted_plan_forward_from_wherever_it_stopped(plan: Plan, step: str | None) -> None:
    assert next_step(plan) == step
