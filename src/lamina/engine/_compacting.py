"""Compaction as the engine runs it: one at a time, over the live view, its steps in `_compaction` (I/O: the log)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec

from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_USER_LANE_TOKENS,
    PrunePolicy,
    Summariser,
    entry_tokens,
    freed_enough,
    render_lane,
    update_lane,
)
from lamina.context import Authority, Part, ToolSpec
from lamina.engine import _compaction as steps
from lamina.engine._assemble import lane_of
from lamina.engine._compaction import CompactionEvent, CompactionOutcome
from lamina.engine._plan import check_transition, compaction_focus
from lamina.engine._recorder import Recorder
from lamina.engine._session_plans import SessionPlans
from lamina.engine._view import LiveView
from lamina.pricing import CachePrices, ContextEditing, Outlook, PaceTracker, choose_turn_ttl, price_compaction
from lamina.session import (
    CompactionBoundary,
    CostDecision,
    LogEntry,
    SessionLog,
    StateSnapshot,
    ToolOutputPruned,
    Usage,
)
from lamina.tokens import TokenEstimator

_log = logging.getLogger("lamina.compaction")
_CALIBRATION_WEIGHT = 0.3
_SUMMARY_TOKENS = 2_000
"""A summary's size before it is written, for the cost model (the template's sections, filled)."""
Trigger = Literal["manual", "threshold", "overflow"]


class Compactor:
    """The engine's compaction (`engine.compactor`): the context's tokens, what compacting would pay, the compaction.

    It keeps what the cost model reads (the prices, read at each decision; the session's pace and
    where the cache stands), so it also prunes old tool output before a turn when that pays and
    chooses each turn's breakpoint TTL; and it calibrates the token estimate from what the provider reports.
    """

    def __init__(
        self,
        session: SessionLog,
        *,
        record: Recorder,
        check_open: Callable[[], None],
        view: Callable[[], LiveView],
        fixed_parts: Callable[[], tuple[Sequence[Part], Sequence[ToolSpec]]],
        prices: Callable[[], CachePrices],
        clock: Callable[[], float],
        snapshot: Callable[[], StateSnapshot],
        plans: SessionPlans,
        estimator: TokenEstimator,
        prune: PrunePolicy | None,
    ) -> None:
        """A compactor over the engine's live view, recording through the engine.

        Args:
            session: The open session log (its id, its workspace, its data folder).
            record: The engine's write path.
            check_open: Raises `UsageError` when the engine is closed.
            view: The live provider view of the current path.
            fixed_parts: The stable parts and the tools the next request carries.
            prices: The prices the cost model decides with, read at each decision.
            clock: The time, in seconds since the epoch (the cache's state is priced from it).
            snapshot: The state a compaction boundary carries.
            plans: The session's plans (a plan's compaction moves it forward).
            estimator: Counts tokens.
            prune: When old tool output leaves the provider view (None: never).
        """
        self._session = session
        self._record = record
        self._check_open = check_open
        self._view = view
        self._fixed_parts = fixed_parts
        self._prices = prices
        self._clock = clock
        self._pace = PaceTracker()
        self._snapshot = snapshot
        self._plans = plans
        self.estimator = estimator
        """Counts tokens: the compaction's cut and estimates, and the agent's own figures."""
        self._lock: asyncio.Lock | None = None
        self.prune_policy = prune
        """When old tool output leaves the provider view before a turn (None: never; see `PrunePolicy`)."""
        self.context_editing: Callable[[], ContextEditing] = lambda: "lamina"
        """Whether a prune decision prices the provider's clearing too, read at each decision (`lamina`: never;
        the agent sets it from its provider: `priced` or `server` where the model has `clear_tool_uses`)."""
        self.calibration = 1.0
        """Reported input tokens per estimated token, learnt from the provider's usage."""
        self.hooks: list[Callable[[CompactionBoundary], None]] = []
        """Called after every compaction (skills and guides reset their read state here)."""
        self.listeners: list[Callable[[CompactionEvent], None]] = []
        """Told of each compaction's progress (`CompactionEvent`), a provider's own compactions too."""

    @property
    def cache_prices(self) -> CachePrices:
        """The prices the cost model decides with now (`ContextEngine(prices=...)`)."""
        return self._prices()

    def outlook(self) -> Outlook:
        """What the cost model prices a decision from now: the prices, the session's pace, the cache's state."""
        return Outlook(self._prices(), self._pace.pace(), self._pace.cache(self._clock(), self._view().tokens))

    def observe(self, entry: LogEntry, tokens_before: int, tokens_after: int, *, at: float | None = None) -> None:
        """Fold a recorded entry into the session's pace: `at` is when (now unless given), the tokens the history's."""
        if isinstance(entry, CompactionBoundary | ToolOutputPruned):
            self._pace.reset()  # the history was rewritten: nothing of it is cached until the next request
        self._pace.observe(entry, self._clock() if at is None else at, tokens_before, tokens_after)

    def resumed(self, history_tokens: int) -> None:
        """The session was opened again: its whole history counts as sent last."""
        self._pace.request_tokens = self._pace.turn_mark_tokens = history_tokens

    def turn_ttl(self) -> tuple[Literal["5m", "1h"] | None, CostDecision | None]:
        """This turn's breakpoint TTL and why; none where the cache has one lifetime (nothing is decided)."""
        if not self._prices().choose_ttl:
            return None, None
        return choose_turn_ttl(self.outlook(), turn_tokens=self._pace.turn_tokens())

    def prune(self, policy: PrunePolicy | None = None) -> ToolOutputPruned | None:
        """Prune old tool output from the provider view when it pays (`prepare_turn` calls this first).

        `policy` defaults to the compactor's (`prune=` at the engine's construction; None there and
        here: nothing). The log keeps every result; the recorded `ToolOutputPruned` says which ones
        requests show as a note from now on.
        """
        chosen = self._view().chosen_prune(
            self.prune_policy if policy is None else policy, self.outlook, self.context_editing()
        )
        return self._record(chosen) if chosen is not None else None

    def next_prune(self) -> ToolOutputPruned | None:
        """The prune the next turn would make now (nothing is recorded)."""
        return self._view().chosen_prune(self.prune_policy, self.outlook, self.context_editing())

    def context_tokens(self) -> int:
        """Estimated tokens of the next request: stable parts, tools, summary and the provider view."""
        stable, tools = self._fixed_parts()
        fixed = sum(self.estimator.count(p.text) for p in stable) + sum(
            self.estimator.count(t.name + t.description + str(t.input_schema)) for t in tools
        )
        return fixed + self._prelude_tokens() + self._view().tokens

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

    def price(
        self, *, threshold_tokens: int, keep_tokens: int = DEFAULT_KEEP_TOKENS
    ) -> tuple[Literal["compact", "wait"], CostDecision]:
        """Whether compacting now beats waiting for the threshold, on the cost model's estimate (nothing is logged).

        `lamina.pricing.price_compaction` over the engine's outlook: the history after is
        what the cut keeps and a summary's estimated size beyond the one it replaces; the
        summarising call reads what the cut summarises and the earlier summary fresh, or the
        session's request on the cache, whichever is cheaper (in base-price tokens).

        Args:
            threshold_tokens: The context's tokens, as `calibrated_context_tokens` counts them, at
                which a compaction is due (the context window less the reserve).
            keep_tokens: Recent tokens the compaction keeps verbatim.

        Returns:
            `compact` or `wait`, and the decision (to pass to `compact` as its `decision`).
        """
        live = self._view()
        view = live.tokens
        outside = self.context_tokens() - view  # stable parts, tools, summary and lane: not the history
        cut = steps.choose_cut(list(live.entries), keep_tokens=keep_tokens, estimator=self.estimator, whole=False)
        previous = self.estimator.count(live.summary or "")
        kept = view if steps.nothing_new(cut, live.boundary) is not None else min(view, cut.tokens_kept)
        outlook, p = self.outlook(), self._prices()
        cold = min(view, outlook.cache.cold_tokens(p))  # summarising on the cache reads the session's own request
        on_cache = (view + outside - cold) * p.read + cold * p.write_5m
        return price_compaction(
            outlook,
            tokens_after=kept + max(0, _SUMMARY_TOKENS - previous),  # the new summary replaces the earlier one
            threshold_tokens=max(0, round(threshold_tokens / self.calibration) - outside),
            turn_tokens=self._pace.turn_tokens(),
            summarised_tokens=round(min(max(0, view - kept) + previous, on_cache)),  # the cheaper route's price
            summary_tokens=_SUMMARY_TOKENS,
        )

    def _context_tokens(self) -> int:
        """The stable parts' tokens outside system content: a provider's block first makes them written again."""
        stable, _ = self._fixed_parts()
        system = (Authority.SYSTEM_RULE, Authority.USER_DATA)  # what goes in system-role content
        return sum(self.estimator.count(p.text) for p in stable if p.authority not in system)

    def _prelude_tokens(self) -> int:
        live = self._view()
        pinned = lane_of(live.boundary, data_dir=self._session.shown_path("data"))
        return self.estimator.count((live.summary or "") + (pinned or ""))

    def emit(self, event: CompactionEvent) -> None:
        """Tell the listeners, and the `lamina.compaction` logger, how a compaction goes."""
        # the boundary entry is the log's record of a completed compaction; events go to listeners
        # and to the `lamina.compaction` logger, so the session log gains exactly one entry
        level = logging.WARNING if event.kind == "failed" else logging.INFO
        _log.log(
            level, "session %s: compaction %s (%s): %s", self._session.id, event.kind, event.trigger, event.message
        )
        for listener in self.listeners:
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
            decision: The cost model's decision that asked for it (`price`), recorded on
                the boundary.

        Returns:
            What the compaction did.
        """
        self._check_open()
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if plan_id is not None:
                plan = check_transition(self._plans.latest, "compacted", plan_id=plan_id)
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
        live = self._view()
        view, boundary = list(live.entries), live.boundary
        cut = steps.choose_cut(view, keep_tokens=keep, estimator=self.estimator, whole=whole)
        if (nothing := steps.nothing_new(cut, boundary)) is not None:
            return nothing
        tokens_before = self.context_tokens()
        self.emit(CompactionEvent("started", trigger, f"compacting {tokens_before:,} tokens"))
        try:
            made = await steps.summarise(
                summariser,
                cut,
                (boundary, live.summary),
                focus=focus,
                workspace=self._session.info.cwd,
                outlook=self.outlook(),
                rewrite_tokens=self._context_tokens(),
            )
            previous_lane = steps.lane_of_boundary(boundary)
            update = update_lane(previous_lane, cut.summarised, budget_tokens=lane_tokens, estimator=self.estimator)
            kept_tokens = sum(entry_tokens(e, estimator=self.estimator) for e in cut.kept)
            data_dir = self._session.shown_path("data")
            pinned = render_lane(update.lane, data_dir=data_dir, legacy=made.ledger) or ""  # an estimate
            fixed = tokens_before - live.tokens - self._prelude_tokens()  # stable parts and tools
            tokens_after = fixed + kept_tokens + self.estimator.count(made.summary + pinned)
            if not whole and not freed_enough(tokens_before, tokens_after):
                message = f"compaction would free less than 5% ({tokens_before:,} → {tokens_after:,} tokens); stopped"
                self.emit(CompactionEvent("failed", trigger, message))
                return CompactionOutcome("not_enough_freed", message, None, tokens_before, tokens_after)
            lane, failed = steps.archive(
                update,
                cut.summarised,
                lane_tokens,
                files=self._session,
                previous=previous_lane,
                estimator=self.estimator,
            )
            if failed is not None:
                _log.warning("session %s: the user's messages could not be archived: %s", self._session.id, failed)
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
                server=made.result.server or msgspec.UNSET,  # the provider's block, byte for byte
                backend=msgspec.UNSET if made.backend is None else made.backend,
            )
            recorded = self._record(entry)
        except Exception as exc:
            self.emit(CompactionEvent("failed", trigger, str(exc)))
            raise
        for hook in self.hooks:
            hook(recorded)
        message = steps.completed_message(tokens_before, tokens_after, made.result, recorded.lane)
        self.emit(CompactionEvent("completed", trigger, message))
        return CompactionOutcome("compacted", message, recorded, tokens_before, tokens_after, made.result.by)

    def _complete_plan_compaction(self, plan_id: str, outcome: CompactionOutcome) -> None:
        """The engine moves the plan forward as soon as its compaction completed (no UI involved)."""
        plan = self._plans.latest
        if plan is None or plan.plan_id != plan_id or plan.state != "awaiting_compaction":
            return
        if outcome.status == "compacted" and plan.compaction_id is not None:
            self._plans.record("compacted", compaction_id=plan.compaction_id)
        elif outcome.status in ("already_compacted", "nothing_to_compact"):
            # nothing of the conversation is in view since the last boundary (or at all): the context is fresh
            latest = self._view().boundary
            boundary = latest.id if latest is not None else None
            self._plans.record("compacted", compaction_id=boundary, detail=outcome.message)
