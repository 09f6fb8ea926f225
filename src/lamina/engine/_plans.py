"""Plans: the session's latest plan and its transitions (the state machine: `_plan`; each is fsynced)."""

from __future__ import annotations

import secrets
from pathlib import Path

from lamina.engine._host import EngineHost
from lamina.engine._plan import Plan, PlanStateName, check_transition
from lamina.session import PlanState


class PlansMixin(EngineHost):
    """The plan methods of `ContextEngine`: every transition is recorded durably before it has effect."""

    @property
    def plans_dir(self) -> Path:
        """The session's plans folder: plan files, the only place plan mode may write."""
        return self.session.plans_dir

    @property
    def plan(self) -> Plan | None:
        """The session's latest plan and where its approval stands (None: no plan submitted yet)."""
        return self._path.plan

    def record_plan(
        self,
        to: PlanStateName,
        *,
        detail: str = "",
        compact: bool = False,
        draft_input: str | None = None,
        compaction_id: str | None = None,
        run_mode: str | None = None,
        return_mode: str | None = None,
    ) -> Plan:
        """Move the latest plan to state `to`: the entry is fsynced before this returns.

        Args:
            to: The state to move to.
            detail: Why (a failure's reason, the user's feedback).
            compact: With `accepted`: Accept & Compact.
            draft_input: With `accepted`: the user's unsent input, kept with the plan.
            compaction_id: With `compacted`: the compaction that summarised for the plan.
            run_mode: With `accepted`: the permission mode the plan runs in.
            return_mode: With `accepted`: the mode the session goes back to when the plan is over.

        Returns:
            The plan in its new state.

        Raises:
            PlanTransitionError: There is no plan, or its state does not lead to `to`.
        """
        plan = check_transition(self._path.plan, to)
        entry = PlanState(
            plan_id=plan.plan_id,
            state=to,
            detail=detail,
            compact=compact,
            draft_input=draft_input,
            compaction_id=compaction_id,
            run_mode=run_mode,
            return_mode=return_mode,
        )
        self.record(entry, durable=True)
        assert self._path.plan is not None
        return self._path.plan

    def submit_plan(self, *, title: str, plan_path: str, text: str) -> Plan:
        """Record a submitted plan (durable before this returns); it waits for the user's decision.

        A plan still waiting for a decision is cancelled first (replaced); one being carried out
        is marked done. A plan accepted but not yet dispatched cannot be replaced.

        Raises:
            PlanTransitionError: The latest plan is accepted and not dispatched yet.
        """
        current = self._path.plan
        if current is not None:
            if current.state == "dispatched":
                self.record_plan("done", detail="a new plan was submitted while it was carried out")
            elif current.state in ("submitted", "failed"):
                self.record_plan("cancelled", detail="replaced by a newer plan")
            elif current.state in ("accepted", "awaiting_compaction", "compacted"):
                check_transition(current, "submitted")  # raises: a plan on its way cannot be replaced
        plan_id = "plan_" + secrets.token_hex(6)
        self.record(PlanState(plan_id=plan_id, state="submitted", title=title, plan_path=plan_path, text=text))
        assert self._path.plan is not None
        return self._path.plan
