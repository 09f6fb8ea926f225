"""Moving a plan forward (SPEC F16): the state machine is `lamina.engine`, persisted by the engine (I/O: the log).

`PlanRunner` is the agent's plan runner: accept, reject, cancel, and resume an accepted plan from
wherever it stopped (compact, dispatch exactly once, execute, mark done).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from lamina.agent._events import AgentEvent, PlanUpdate, TurnOutcome
from lamina.engine import CompactionOutcome, ContextEngine, Plan, continuation_message, execution_message, next_step
from lamina.tools import PermissionMode

DEFAULT_PLAN_COMPACTION_TIMEOUT = 300.0
"""Seconds an "Accept & Compact" compaction may take before the plan is marked failed (the summary
request has its own, shorter timeout and falls back to the deterministic summary)."""


@dataclass(frozen=True, slots=True)
class PlanRunner:
    """The agent's plan runner: records each step of the session's plan and carries an accepted one out.

    Built with what it needs of the agent: its plan compaction, a turn sending Lamina's own
    message, the mode switch and its events.
    """

    engine: ContextEngine
    compact: Callable[[str], Awaitable[CompactionOutcome]]
    """Compacts the whole conversation for the plan of this id (its focus)."""
    send: Callable[[str], Awaitable[TurnOutcome]]
    """Runs a turn on Lamina's own message (durable before any request carries it; no user words in it)."""
    set_mode: Callable[[PermissionMode], None]
    emit: Callable[[AgentEvent], None]

    @property
    def plan(self) -> Plan | None:
        """The session's latest plan and where its approval stands."""
        return self.engine.plans.latest

    @property
    def waiting(self) -> bool:
        """Whether an accepted plan waits for its next step (its process stopped before it was carried out)."""
        return next_step(self.engine.plans.latest) is not None

    def accept(self, *, compact: bool, draft: str | None, mode: PermissionMode | str) -> None:
        """Record the plan accepted, to run in `mode` and then go back to the mode before the plan.

        The mode before the plan is the session's mode now, or, in plan mode, the one before plan
        mode was entered (plan mode itself when there was none). Both are recorded with the
        acceptance, so a plan resumed after a crash runs and ends the same way.

        Raises:
            PlanTransitionError: No plan waits for a decision.
        """
        run_mode = PermissionMode(mode).value
        current, before = self.engine.settings.mode, self.engine.settings.previous_mode
        back = before if current == PermissionMode.PLAN.value and before is not None else current
        self.engine.plans.record("accepted", compact=compact, draft_input=draft, run_mode=run_mode, return_mode=back)
        self._moved()

    def record(self, to: Literal["rejected", "cancelled"], detail: str) -> Plan:
        """Record the plan rejected (with the user's feedback) or cancelled (with the reason).

        Raises:
            PlanTransitionError: No plan can make that step.
        """
        plan = self.engine.plans.record(to, detail=detail)
        self._moved()
        return plan

    async def resume(self, timeout: float = DEFAULT_PLAN_COMPACTION_TIMEOUT) -> TurnOutcome | None:
        """Move an accepted plan forward from wherever it stopped, also in a process started later.

        Compacts (again only if its compaction did not complete), records what completed, then
        dispatches the plan exactly once: the `dispatched` entry is durable before the execution
        message is written, and a dispatch whose message is already logged is never sent again.
        A plan whose execution turn the process stopped in (it was answered, never finished) is
        not sent again, but the session goes back to the mode before the plan.

        Args:
            timeout: Seconds its compaction may take; beyond, the plan fails and can be accepted again.

        Returns:
            The execution turn's outcome; None when there was nothing to do or the compaction failed.
        """
        plan = self.engine.plans.latest
        if plan is not None and plan.state == "dispatched" and next_step(plan) is None:
            self._back(plan)
            return None
        while (step := next_step(self.engine.plans.latest)) is not None:
            plan = self.engine.plans.latest
            assert plan is not None
            match step:
                case "compact":
                    if plan.state == "accepted":
                        self.engine.plans.record("awaiting_compaction")
                        self._moved()
                    if not await self._compacted(plan.plan_id, timeout):
                        return None
                case "mark_compacted":
                    self.engine.plans.record("compacted", compaction_id=plan.compaction_id)
                case "dispatch":
                    self.engine.plans.record("dispatched")
                case "send":
                    return await self._execute(plan, execution_message(plan))
                case "continue":
                    return await self._execute(plan, continuation_message(plan))
            self._moved()
        return None

    def after_turn(self) -> None:
        """After a user's turn: a plan whose execution turn died (it was answered) is done, the session went on."""
        plan = self.engine.plans.latest
        if plan is not None and plan.state == "dispatched" and plan.answered:
            self._finish(plan.plan_id, "done", "the session went on after its execution was interrupted")

    async def _compacted(self, plan_id: str, timeout: float) -> bool:
        """The plan's compaction under its timeout; on failure the plan is `failed` with the reason."""
        try:
            async with asyncio.timeout(timeout):
                outcome = await self.compact(plan_id)
        except TimeoutError:
            reason = f"the compaction took longer than {timeout:g} s"
        except Exception as exc:  # whatever stopped it, the plan must not run half-prepared
            reason = f"the compaction failed: {exc}"
        else:
            reason = f"the compaction did not complete: {outcome.message}"
        plan = self.engine.plans.latest
        if plan is None or plan.plan_id != plan_id:
            return False
        if plan.state == "compacted" or plan.compaction_id is not None:
            return True  # completed (its boundary is durable), whatever was raised after it
        self.engine.plans.record("failed", detail=reason)
        self._moved()
        return False

    async def _execute(self, plan: Plan, message: str) -> TurnOutcome:
        """Send a dispatched plan's execution message (or its continuation) in its mode; mark it done.

        The plan runs in the mode chosen when it was accepted (execute for a plan an older Lamina
        accepted); once it is over (done, failed or interrupted) the session goes back to the mode
        before the plan, so no later request runs in the plan's mode unless the user chooses it.
        """
        run_mode = PermissionMode(plan.run_mode or PermissionMode.EXECUTE.value)
        if self.engine.settings.mode != run_mode.value:
            self.set_mode(run_mode)  # a recorded state change and a one-shot notice
        try:
            outcome = await self.send(message)
        except asyncio.CancelledError:
            self._finish(plan.plan_id, "cancelled", "the user interrupted its execution")
            raise
        except Exception as exc:
            self._finish(plan.plan_id, "failed", f"its execution turn failed: {exc}")
            raise
        finally:
            self._back(plan)
        self._finish(plan.plan_id, "done", "")
        return outcome

    def _back(self, plan: Plan) -> None:
        """Back to the mode before the plan, if the session is not in it."""
        if plan.return_mode is not None and self.engine.settings.mode != plan.return_mode:
            self.set_mode(PermissionMode(plan.return_mode))

    def _finish(self, plan_id: str, to: Literal["done", "failed", "cancelled"], detail: str) -> None:
        plan = self.engine.plans.latest
        if plan is not None and plan.plan_id == plan_id and plan.state == "dispatched":
            self.engine.plans.record(to, detail=detail)
            self._moved()

    def _moved(self) -> None:
        if self.engine.plans.latest is not None:
            self.emit(PlanUpdate(self.engine.plans.latest))
