"""Moving a plan forward (SPEC F16): the state machine is `lamina.engine`, persisted by the engine (I/O: the log).

`PlanSteps` holds the agent's plan methods: accept, reject, cancel, and resume an accepted plan
from wherever it stopped (compact, dispatch exactly once, execute, mark done).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from lamina.agent._events import AgentEvent, PlanUpdate, TurnOutcome
from lamina.attachments import AttachmentInput
from lamina.engine import (
    CompactionOutcome,
    ContextEngine,
    Plan,
    continuation_message,
    execution_message,
    next_step,
    rejection_message,
)
from lamina.tools import PermissionMode

DEFAULT_PLAN_COMPACTION_TIMEOUT = 300.0
"""Seconds an "Accept & Compact" compaction may take before the plan is marked failed (the summary
request has its own, shorter timeout and falls back to the deterministic summary)."""


class PlanSteps:
    """The plan methods of `Agent` (a mixin: the loop's turn, compaction and mode are the agent's)."""

    engine: ContextEngine
    plan_compaction_timeout: float

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def _emit(self, event: AgentEvent) -> None: ...

        def set_mode(self, mode: PermissionMode | str) -> None: ...

        async def compact(
            self,
            focus: str | None = None,
            *,
            trigger: Literal["manual", "threshold", "overflow"] = "manual",
            plan_id: str | None = None,
        ) -> CompactionOutcome: ...

        async def _run_turn(
            self,
            user_text: str,
            attachments: Sequence[AttachmentInput] = (),
            *,
            skills: Sequence[str] = (),
            durable_message: bool = False,
            user_words: str | None = None,
        ) -> TurnOutcome: ...

    @property
    def plan(self) -> Plan | None:
        """The session's latest plan and where its approval stands."""
        return self.engine.plans.latest

    async def accept_plan(
        self,
        *,
        compact: bool = False,
        draft: str | None = None,
        mode: PermissionMode | str = PermissionMode.EXECUTE,
    ) -> TurnOutcome | None:
        """Accept the submitted plan and carry it out in `mode`, then go back to the mode before the plan.

        The mode before the plan is the session's mode now, or, in plan mode, the one before plan
        mode was entered (plan mode itself when there was none). Both are recorded with the
        acceptance, so a plan resumed after a crash runs and ends the same way.

        Args:
            compact: "Accept & Compact": the whole conversation is compacted first, with the plan
                as the focus, and the plan runs in that fresh context.
            draft: The user's unsent input, kept with the plan (restored on reload).
            mode: The permission mode the plan runs in: execute (the default: nothing is asked) or
                ask (each change is approved, as chat's "ask before each change").

        Returns:
            The execution turn's outcome; None when the compaction failed or timed out: the plan is
            then `failed`, with the reason, and can be accepted again.

        Raises:
            PlanTransitionError: No plan waits for a decision (none submitted, or it already ran).
        """
        self._check_open()
        run_mode = PermissionMode(mode).value
        current, before = self.engine.settings.mode, self.engine.settings.previous_mode
        back = before if current == PermissionMode.PLAN.value and before is not None else current
        self.engine.plans.record("accepted", compact=compact, draft_input=draft, run_mode=run_mode, return_mode=back)
        self._plan_moved()
        return await self.resume_plan()

    async def reject_plan(self, feedback: str) -> TurnOutcome:
        """Reject the submitted plan: back to planning, with `feedback` as the user's message.

        Raises:
            PlanTransitionError: No plan waits for a decision.
        """
        self._check_open()
        plan = self.engine.plans.record("rejected", detail=feedback)
        self._plan_moved()
        # Lamina's message around the user's feedback: only the feedback is the user's words
        return await self._run_turn(rejection_message(plan, feedback), user_words=feedback)

    def cancel_plan(self, reason: str = "") -> Plan:
        """Drop the latest plan (before it is done): it will not be carried out, or no further.

        Raises:
            PlanTransitionError: There is no plan, or it is already finished.
        """
        self._check_open()
        plan = self.engine.plans.record("cancelled", detail=reason)
        self._plan_moved()
        return plan

    async def resume_plan(self) -> TurnOutcome | None:
        """Move an accepted plan forward from wherever it stopped, also in a process started later.

        Compacts (again only if its compaction did not complete), records what completed, then
        dispatches the plan exactly once: the `dispatched` entry is durable before the execution
        message is written, and a dispatch whose message is already logged is never sent again.
        Returns the execution turn's outcome, or None when there was nothing to do or the
        compaction failed. A plan whose execution turn the process stopped in (it was answered,
        never finished) is not sent again, but the session goes back to the mode before the plan.
        """
        self._check_open()
        plan = self.engine.plans.latest
        if plan is not None and plan.state == "dispatched" and next_step(plan) is None:
            if plan.return_mode is not None and self.engine.settings.mode != plan.return_mode:
                self.set_mode(plan.return_mode)
            return None
        while (step := next_step(self.engine.plans.latest)) is not None:
            plan = self.engine.plans.latest
            assert plan is not None
            match step:
                case "compact":
                    if plan.state == "accepted":
                        self.engine.plans.record("awaiting_compaction")
                        self._plan_moved()
                    if not await self._compact_for_plan(plan.plan_id):
                        return None
                case "mark_compacted":
                    self.engine.plans.record("compacted", compaction_id=plan.compaction_id)
                case "dispatch":
                    self.engine.plans.record("dispatched")
                case "send":
                    return await self._execute_plan(plan, execution_message(plan))
                case "continue":
                    return await self._execute_plan(plan, continuation_message(plan))
            self._plan_moved()
        return None

    async def _compact_for_plan(self, plan_id: str) -> bool:
        """The plan's compaction under its timeout; on failure the plan is `failed` with the reason."""
        try:
            async with asyncio.timeout(self.plan_compaction_timeout):
                outcome = await self.compact(plan_id=plan_id)
        except TimeoutError:
            reason = f"the compaction took longer than {self.plan_compaction_timeout:g} s"
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
        self._plan_moved()
        return False

    async def _execute_plan(self, plan: Plan, message: str) -> TurnOutcome:
        """Send a dispatched plan's execution message (or its continuation) in its mode; mark it done.

        The plan runs in the mode chosen when it was accepted (execute for a plan an older Lamina
        accepted); once it is over (done, failed or interrupted) the session goes back to the mode
        before the plan, so no later request runs in the plan's mode unless the user chooses it.
        """
        run_mode = PermissionMode(plan.run_mode or PermissionMode.EXECUTE.value)
        if self.engine.settings.mode != run_mode.value:
            self.set_mode(run_mode)  # a recorded state change and a one-shot notice
        try:
            # Lamina's own message in the user's role: nothing in it is the user's words
            outcome = await self._run_turn(message, durable_message=True, user_words="")
        except asyncio.CancelledError:
            self._finish_plan(plan.plan_id, "cancelled", "the user interrupted its execution")
            raise
        except Exception as exc:
            self._finish_plan(plan.plan_id, "failed", f"its execution turn failed: {exc}")
            raise
        finally:
            if plan.return_mode is not None and self.engine.settings.mode != plan.return_mode:
                self.set_mode(plan.return_mode)
        self._finish_plan(plan.plan_id, "done", "")
        return outcome

    def _finish_plan(self, plan_id: str, to: Literal["done", "failed", "cancelled"], detail: str) -> None:
        plan = self.engine.plans.latest
        if plan is not None and plan.plan_id == plan_id and plan.state == "dispatched":
            self.engine.plans.record(to, detail=detail)
            self._plan_moved()

    def _plan_moved(self) -> None:
        if self.engine.plans.latest is not None:
            self._emit(PlanUpdate(self.engine.plans.latest))
