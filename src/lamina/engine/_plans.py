"""Plans as the engine keeps them: the session's latest plan and its transitions, each fsynced (I/O: the log)."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from lamina.engine._plan import Plan, PlanStateName, check_transition
from lamina.engine._recorder import Recorder
from lamina.engine._state import PathState
from lamina.session import PlanState


class SessionPlans:
    """The session's plans (`engine.plans`): every transition is recorded durably before it has effect.

    The machine is `_plan` (its one transition table); the latest plan is the current path's fold.
    """

    def __init__(self, *, record: Recorder, path: Callable[[], PathState]) -> None:
        """The plans of the current path, read through `path`, moved through `record`.

        Args:
            record: The engine's write path.
            path: The current path's state (its latest plan).
        """
        self._record = record
        self._path = path

    @property
    def latest(self) -> Plan | None:
        """The session's latest plan and where its approval stands (None: no plan submitted yet)."""
        return self._path().plan

    def record(
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
        plan = check_transition(self.latest, to)
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
        self._record(entry, durable=True)
        return self._moved()

    def submit(self, *, title: str, plan_path: str, text: str) -> Plan:
        """Record a submitted plan (durable before this returns); it waits for the user's decision.

        A plan still waiting for a decision is cancelled first (replaced); one being carried out
        is marked done. A plan accepted but not yet dispatched cannot be replaced.

        Raises:
            PlanTransitionError: The latest plan is accepted and not dispatched yet.
        """
        current = self.latest
        if current is not None:
            if current.state == "dispatched":
                self.record("done", detail="a new plan was submitted while it was carried out")
            elif current.state in ("submitted", "failed"):
                self.record("cancelled", detail="replaced by a newer plan")
            elif current.state in ("accepted", "awaiting_compaction", "compacted"):
                check_transition(current, "submitted")  # raises: a plan on its way cannot be replaced
        plan_id = "plan_" + secrets.token_hex(6)
        self._record(PlanState(plan_id=plan_id, state="submitted", title=title, plan_path=plan_path, text=text))
        return self._moved()

    def _moved(self) -> Plan:
        plan = self.latest
        assert plan is not None  # the entry just recorded is a plan's
        return plan
