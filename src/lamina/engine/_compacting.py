"""Compaction as the engine runs it: one at a time, over the live view, its steps in `_compaction` (I/O)."""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

import msgspec

from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_USER_LANE_TOKENS,
    Summariser,
    entry_tokens,
    freed_enough,
    price_compaction,
    render_lane,
    update_lane,
)
from lamina.engine import _compaction as steps
from lamina.engine._assemble import lane_of
from lamina.engine._compaction import CompactionEvent, CompactionOutcome
from lamina.engine._host import EngineHost
from lamina.engine._plan import check_transition, compaction_focus
from lamina.session import CompactionBoundary, CostDecision, StateSnapshot, Usage

_log = logging.getLogger("lamina.compaction")
_CALIBRATION_WEIGHT = 0.3
_SUMMARY_TOKENS = 2_000
"""A summary's size before it is written, for the cost model (the template's sections, filled)."""
Trigger = Literal["manual", "threshold", "overflow"]


class CompactionMixin(EngineHost):
    """The compaction and token-accounting methods of `ContextEngine`."""

    @property
    def boundary(self) -> CompactionBoundary | None:
        """The latest compaction on the current path, if any."""
        return self._view.boundary

    def context_tokens(self) -> int:
        """Estimated tokens of the next request: stable parts, tools, summary and the provider view."""
        stable = self._stable.next(self._stable_source).parts
        fixed = sum(self.estimator.count(p.text) for p in stable) + sum(
            self.estimator.count(t.name + t.description + str(t.input_schema)) for t in self.tools
        )
        return fixed + self._prelude_tokens() + self._view.tokens

    def calibrated_context_tokens(self) -> int:
        """`context_tokens` scaled by what the provider reported for earlier requests (see `observe_usage`)."""
        return round(self.context_tokens() * self.calibration)

    def observe_usage(self, estimated: int, usage: Usage) -> None:
        """Calibrate the estimate from what the provider counted for a request.

        A moving average of reported / estimated, so one odd request does not swing it.

        Args:
            estimated: The request's estimated tokens.
            usage: The usage the provider reported for it.
        """
        reported = usage.input + usage.cache_read + usage.cache_write
        if estimated > 0 and reported > 0:
            self.calibration += _CALIBRATION_WEIGHT * (reported / estimated - self.calibration)

    def price_compaction(
        self, *, threshold_tokens: int, keep_tokens: int = DEFAULT_KEEP_TOKENS
    ) -> tuple[Literal["compact", "wait"], CostDecision]:
        """Whether compacting now beats waiting for the threshold, on the cost model's estimate (nothing is logged).

        `lamina.compaction.price_compaction` over the engine's outlook: the history after is
        what the cut keeps and a summary's estimated size beyond the one it replaces; the
        summarising call reads what the cut summarises and the earlier summary.

        Args:
            threshold_tokens: The context's tokens, as `calibrated_context_tokens` counts them, at
                which a compaction is due (the context window less the reserve).
            keep_tokens: Recent tokens the compaction keeps verbatim.

        Returns:
            `compact` or `wait`, and the decision (to pass to `compact` as its `decision`).
        """
        view = self._view.tokens
        outside = self.context_tokens() - view  # stable parts, tools, summary and lane: not the history
        cut = steps.choose_cut(list(self._view.entries), keep_tokens=keep_tokens, estimator=self.estimator, whole=False)
        previous = self.estimator.count(self._view.summary or "")
        kept = view if steps.nothing_new(cut, self._view.boundary) is not None else min(view, cut.tokens_kept)
        return price_compaction(
            self.outlook(),
            tokens_after=kept + max(0, _SUMMARY_TOKENS - previous),  # the new summary replaces the earlier one
            threshold_tokens=max(0, round(threshold_tokens / self.calibration) - outside),
            turn_tokens=self._pace.turn_tokens(),
            summarised_tokens=max(0, view - kept) + previous,
            summary_tokens=_SUMMARY_TOKENS,
        )

    def _prelude_tokens(self) -> int:
        pinned = lane_of(self._view.boundary, data_dir=self._data_dir())
        return self.estimator.count((self._view.summary or "") + (pinned or ""))

    def _emit_compaction(self, event: CompactionEvent) -> None:
        # the boundary entry is the log's record of a completed compaction; events go to listeners
        # and to the `lamina.compaction` logger, so the session log gains exactly one entry
        level = logging.WARNING if event.kind == "failed" else logging.INFO
        _log.log(level, "session %s: compaction %s (%s): %s", self.session.id, event.kind, event.trigger, event.message)
        for listener in self.compaction_listeners:
            listener(event)

    async def compact(
        self,
        summariser: Summariser,
        *,
        trigger: Trigger,
        focus: str | None = None,
        keep_tokens: int = DEFAULT_KEEP_TOKENS,
        user_lane_tokens: int = DEFAULT_USER_LANE_TOKENS,
        plan_id: str | None = None,
        force: bool = False,
        decision: CostDecision | None = None,
    ) -> CompactionOutcome:
        """Compact the provider view: one boundary entry appended, nothing removed from the log.

        The user's own messages from the summarised part join the user's words lane shown after
        the summary (newest first within `user_lane_tokens`); each compaction's messages are also
        written whole to a file under the session's `data/user-messages/`, before the boundary.

        At most one compaction runs per session (other processes cannot even write to it); a
        request that waited for one in flight finds nothing new and says "already compacted".

        Args:
            summariser: Writes the summary.
            trigger: What asked for it: `manual`, `threshold` or `overflow`.
            focus: What the summary should keep in view; a plan's compaction focuses on the plan.
            keep_tokens: Recent tokens kept verbatim.
            user_lane_tokens: Tokens of the user's words lane, newest first.
            plan_id: Accept & Compact: the plan must be awaiting its compaction; the whole view is
                summarised (the plan runs in a fresh context, so the 5% rule does not apply), the
                boundary names the plan, and the plan is marked `compacted` once the boundary is
                durable.
            force: Compact even a conversation that fits `keep_tokens` (`/compact --force`): the
                whole view is summarised and the 5% rule does not apply, as for a plan; call it
                between turns. Only an empty conversation (or nothing new since the last boundary)
                still has nothing to compact.
            decision: The cost model's decision that asked for it (`price_compaction`), recorded on
                the boundary.

        Returns:
            What the compaction did.
        """
        self._check_open()
        if self._compaction_lock is None:
            self._compaction_lock = asyncio.Lock()
        async with self._compaction_lock:
            if plan_id is not None:
                plan = check_transition(self._path.plan, "compacted", plan_id=plan_id)
                focus = focus or compaction_focus(plan)
            outcome = await self._compact_locked(
                summariser,
                trigger=trigger,
                focus=focus,
                keep=keep_tokens,
                lane_tokens=user_lane_tokens,
                plan_id=plan_id,
                whole=force or plan_id is not None,
                decision=decision,
            )
            if plan_id is not None:
                self._complete_plan_compaction(plan_id, outcome)
            return outcome

    async def _compact_locked(
        self,
        summariser: Summariser,
        *,
        trigger: Trigger,
        focus: str | None,
        keep: int,
        lane_tokens: int,
        plan_id: str | None,
        whole: bool,
        decision: CostDecision | None = None,
    ) -> CompactionOutcome:
        view, boundary = list(self._view.entries), self._view.boundary
        cut = steps.choose_cut(view, keep_tokens=keep, estimator=self.estimator, whole=whole)
        if (nothing := steps.nothing_new(cut, boundary)) is not None:
            return nothing
        tokens_before = self.context_tokens()
        self._emit_compaction(CompactionEvent("started", trigger, f"compacting {tokens_before:,} tokens"))
        try:
            made = await steps.summarise(
                summariser, cut, (boundary, self._view.summary), focus=focus, workspace=self.session.info.cwd
            )
            previous_lane = steps.lane_of_boundary(boundary)
            update = update_lane(previous_lane, cut.summarised, budget_tokens=lane_tokens, estimator=self.estimator)
            kept_tokens = sum(entry_tokens(e, estimator=self.estimator) for e in cut.kept)
            pinned = render_lane(update.lane, data_dir=self._data_dir(), legacy=made.ledger) or ""  # an estimate
            fixed = tokens_before - self._view.tokens - self._prelude_tokens()  # stable parts and tools
            tokens_after = fixed + kept_tokens + self.estimator.count(made.summary + pinned)
            if not whole and not freed_enough(tokens_before, tokens_after):
                message = f"compaction would free less than 5% ({tokens_before:,} → {tokens_after:,} tokens); stopped"
                self._emit_compaction(CompactionEvent("failed", trigger, message))
                return CompactionOutcome("not_enough_freed", message, None, tokens_before, tokens_after)
            lane, failed = steps.archive(
                update,
                cut.summarised,
                lane_tokens,
                files=self.session,
                previous=previous_lane,
                estimator=self.estimator,
            )
            if failed is not None:
                _log.warning("session %s: the user's messages could not be archived: %s", self.session.id, failed)
            entry = CompactionBoundary(
                summary=made.summary,
                first_kept_id=cut.first_kept_id,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                trigger=trigger,
                focus=focus,
                ledger=made.ledger,
                state=self._snapshot(),
                lane=lane,
                plan_id=plan_id,
                decision=msgspec.UNSET if decision is None else decision,
            )
            recorded = self.record(entry)
        except Exception as exc:
            self._emit_compaction(CompactionEvent("failed", trigger, str(exc)))
            raise
        for hook in self.compaction_hooks:
            hook(recorded)
        message = steps.completed_message(tokens_before, tokens_after, made.result, recorded.lane)
        self._emit_compaction(CompactionEvent("completed", trigger, message))
        return CompactionOutcome("compacted", message, recorded, tokens_before, tokens_after, made.result.by)

    def _snapshot(self) -> StateSnapshot:
        """The state a compaction boundary carries, for a resume that reads only from it on."""
        settings = self.settings.state
        return StateSnapshot(
            mode=settings.mode if settings.mode_recorded else None,
            sources=settings.sources,
            skills=self._path.skills,
            provider_sessions=self.provider_sessions.all(),
            stable=self._stable.state(),
            pending_one_shots=self._outbox.records(),
            plan=self._path.plan,
            model=settings.model,
            preset=settings.preset,
            preset_file=settings.preset_file,
        )

    def _complete_plan_compaction(self, plan_id: str, outcome: CompactionOutcome) -> None:
        """The engine moves the plan forward as soon as its compaction completed (no UI involved)."""
        plan = self._path.plan
        if plan is None or plan.plan_id != plan_id or plan.state != "awaiting_compaction":
            return
        if outcome.status == "compacted" and plan.compaction_id is not None:
            self.plans.record("compacted", compaction_id=plan.compaction_id)
        elif outcome.status in ("already_compacted", "nothing_to_compact"):
            # nothing of the conversation is in view since the last boundary (or at all): the context is fresh
            boundary = self._view.boundary.id if self._view.boundary is not None else None
            self.plans.record("compacted", compaction_id=boundary, detail=outcome.message)
