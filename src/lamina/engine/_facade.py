"""The context engine's facade: one session's turns prepared, recorded and committed.

`ContextEngine` is the I/O shell around the pure turn assembly: it reads the clock, asks the
workspace for the stable parts and appends to the session log; each piece of state it keeps in
memory (so a turn costs the same however long the history is) is a part of its own, folded from
what it records: the settings (`_state`), the outbox, the live view, the stable prefix, the
provider sessions; compaction's steps are `_compaction`'s.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Self

import msgspec

from lamina.assemble import assemble_turn, lane_of
from lamina.attachments import AttachmentInput, AttachmentRenderer, AttachmentStore, MediaSupport
from lamina.compaction import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_PRUNE,
    DEFAULT_USER_LANE_TOKENS,
    PrunePolicy,
    Summariser,
    apply_prunes,
    entry_tokens,
    freed_enough,
    render_lane,
    update_lane,
)
from lamina.engine import _compaction as steps
from lamina.engine._compaction import CompactionEvent, CompactionOutcome
from lamina.engine._outbox import Outbox, turn_one_shots
from lamina.engine._prefix import StablePrefix
from lamina.engine._sessions import ProviderSessions
from lamina.engine._state import PathState, SessionState, fold, fold_path
from lamina.engine._view import LiveView
from lamina.errors import UsageError
from lamina.messages import AttachmentBlocks
from lamina.parts import Part
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderCache,
    RenderedRequest,
    RenderTarget,
    render,
)
from lamina.plan import Plan, PlanStateName, check_transition, compaction_focus
from lamina.session import (
    AttachmentRef,
    Branch,
    CompactionBoundary,
    LogEntry,
    PlanState,
    ProviderView,
    SessionLog,
    StateChange,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    Usage,
    UserMessage,
)
from lamina.session._branch import entry_kind, open_tool_calls
from lamina.session._bridges import BRANCH_SEED_HEADING, view_summary
from lamina.session._entries import OutboxRecord, ProviderSession, StateSnapshot
from lamina.session._protocol import E
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator
from lamina.turn import (
    OneShot,
    StableContext,
    ToolSpec,
    TurnContext,
    VolatileInputs,
    build_volatile_parts,
    changed_volatile,
    pin_stable,
)

__all__ = ["ContextEngine", "StableSource"]

_log = logging.getLogger("lamina.compaction")

StableSource = Callable[[], Sequence[Part]]
"""Returns the current stable parts; expected to be cheap (the workspace layer caches)."""

_CALIBRATION_WEIGHT = 0.3
Trigger = Literal["manual", "threshold", "overflow"]


def _new_turn_id() -> str:
    return "turn_" + secrets.token_hex(6)


class ContextEngine:
    """Prepares, records and commits the turns of one open session.

    A context manager: `with ContextEngine(...) as engine:` closes it on the way out (`close`).
    The engine closes the session only when it owns it (`owns_session=True`, as `open_agent` makes
    it for the session it opens); a session the caller passed in is the caller's to close.
    """

    def __init__(
        self,
        session: SessionLog,
        *,
        stable_source: StableSource,
        tools: Sequence[ToolSpec] = (),
        time_zone: str = "UTC",
        mode: str | None = None,
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = _new_turn_id,
        prune: PrunePolicy | None = DEFAULT_PRUNE,
        owns_session: bool = False,
    ) -> None:
        self.session = session
        self._owns_session = owns_session
        self._closed = False
        self.tools = tuple(tools)
        self.prune_policy = prune
        """When old tool output leaves the provider view before a turn (None: never; see `PrunePolicy`)."""
        self.time_zone = time_zone
        self._stable_source = stable_source
        self._clock = clock
        self._new_id = new_id
        self._settings = SessionState()
        self._path = PathState()
        self._outbox = Outbox()
        self._stable = StablePrefix()
        self._sessions = ProviderSessions()
        self._render_cache = RenderCache()
        self.attachments = AttachmentStore(
            session.attachments_dir, session.data_dir, time_zone=time_zone, estimator=estimator
        )
        """The session's stored attachments."""
        self._media: MediaSupport | None = None
        self.estimator = estimator
        self.calibration = 1.0
        """Reported input tokens per estimated token, learnt from the provider's usage."""
        self.compaction_hooks: list[Callable[[CompactionBoundary], None]] = []
        """Called after every compaction (skills and guides reset their read state here)."""
        self.compaction_listeners: list[Callable[[CompactionEvent], None]] = []
        self.context_reset_hooks: list[Callable[[], None]] = []
        """Called when a provider compacted its own context (read state resets here, as after a compaction)."""
        self._compaction_lock: asyncio.Lock | None = None
        for entry in session.entries_loaded():
            self._track_session_wide(entry)
        self._rebuild_view()
        if mode is not None and not self._settings.mode_recorded:
            # the session's starting mode: recorded, but not a transition the model must be told about
            self.record(StateChange(key="mode", value=mode), durable=True)

    # -- state derived from the log: each part folds what concerns it ------------------------------

    def _track_session_wide(self, entry: LogEntry) -> None:
        """Fold an entry into what holds on every branch (append order): settings, stable inputs, sessions."""
        self._settings = fold(self._settings, entry)
        self._stable.observe(entry)
        self._sessions.observe(entry)

    def _track_path(self, entry: LogEntry) -> None:
        """Fold an entry of the current path into the conversation's state (path order)."""
        self._path = fold_path(self._path, entry)
        self._outbox.observe(entry)

    def _rebuild_view(self, view: ProviderView | None = None) -> None:
        """Take the provider view of the leaf from the session (or `view`, when the caller has it already)."""
        view = self.session.view() if view is None else view
        self._view = LiveView(view, self.estimator)
        self._path, self._outbox = PathState(), Outbox()
        if view.boundary is not None:
            self._track_path(view.boundary)
        for entry in self._view.entries[self._view.fresh_from :]:
            self._track_path(entry)
        self._sessions.follow(view.boundary, self._view.entries)

    # -- public API ------------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._settings.mode

    @property
    def active_sources(self) -> tuple[str, ...]:
        return self._settings.sources

    @property
    def view(self) -> Sequence[LogEntry]:
        """The provider view as it stands: the entries after the latest compaction (read-only, O(1) to take)."""
        return self._view.slice()

    @property
    def pending_one_shots(self) -> tuple[OneShot, ...]:
        """The one-shots the next turn carries: those queued on the current path and not delivered on it."""
        return self._outbox.carried()

    def close(self) -> None:
        """Let go of the engine; using it afterwards raises `UsageError`. Safe to call twice.

        Closes the session too when the engine owns it (`owns_session=True`); a session the caller
        passed in and still owns stays open, for the caller to close.
        """
        if self._closed:
            return
        self._closed = True
        if self._owns_session:
            self.session.close()

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"the context engine of session {self.session.id} is closed; open the session again")

    def record(self, entry: E, *, durable: bool | None = None) -> E:
        """Append an entry to the log and to the in-memory provider view.

        Raises:
            UsageError: The engine is closed.
        """
        self._check_open()
        stamped = self.session.append(entry, durable=durable)
        self._track_session_wide(stamped)
        if isinstance(stamped, CompactionBoundary):
            self._rebuild_view()
        elif isinstance(stamped, ToolOutputPruned):
            self._view.prune(stamped)
            self._render_cache = RenderCache()
        else:
            self._view.append(stamped)
            self._track_path(stamped)
        return stamped

    def queue_one_shot(self, kind: str, text: str, *, hidden: bool = False) -> str:
        """Queue a part to be delivered to the model exactly once; durable before this returns.

        `hidden` marks a one-shot bridge (a recovery block, a branch seed, a transfer summary; see
        `BRIDGE_KINDS`): the model gets it like any one-shot, a UI leaves it out of the transcript.
        The same part already pending (same kind and text: a message sent again after a branch
        before it mentions the same skill) is not queued twice; its id is returned.
        """
        queued = self._outbox.queued(kind, text, hidden=hidden)
        if isinstance(queued, str):
            return queued
        self.record(queued)
        return queued.part_id

    def set_mode(self, mode: str) -> None:
        """Change the permission mode: a state change, and a one-shot signal for the model."""
        if mode == self._settings.mode:
            return
        previous = self._settings.mode
        self.record(StateChange(key="mode", value=mode, previous=previous), durable=True)
        self.queue_one_shot("mode_transition", f"The permission mode changed from {previous} to {mode}.")

    @property
    def skills_in_use(self) -> tuple[str, ...]:
        """Names of the skills invoked in this session (they survive resumes and compactions)."""
        return self._path.skills

    def add_skills(self, names: Sequence[str]) -> None:
        """Record skills as in use (a state change), so a resumed session still knows them."""
        new = tuple(dict.fromkeys((*self._path.skills, *names)))
        if new != self._path.skills:
            self.record(StateChange(key="skills", value=",".join(new), previous=",".join(self._path.skills)))

    def set_sources(self, sources: Sequence[str]) -> None:
        """Set the active sources; newly activated ones are introduced once through the outbox."""
        new = tuple(dict.fromkeys(sources))
        if new == self._settings.sources:
            return
        added = [s for s in new if s not in self._settings.sources]
        self.record(
            StateChange(key="sources", value=",".join(new), previous=",".join(self._settings.sources)), durable=True
        )
        if added:
            self.queue_one_shot(
                "source_activated",
                f"Newly active sources: {', '.join(added)}. Read each source's guide before using its tools.",
            )

    # -- plans (the state machine is `lamina.plan`; every transition is fsynced before it has effect) --

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
    ) -> Plan:
        """Move the latest plan to state `to`: the entry is fsynced before this returns.

        `compact` and `draft_input` go with `accepted`, `compaction_id` with `compacted`; `detail`
        says why (a failure's reason, the user's feedback).

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

    def _refresh_stable(self) -> StableContext:
        """The stable context this turn renders, noticing (and recording) a change of the stable inputs."""
        found = self._stable.refresh(tuple(self._stable_source()), turn_since_boundary=self._view.turn_since_boundary)
        if found.change is not None:
            self.record(found.change)
        if found.update_text is not None:
            self.queue_one_shot("stable_update", found.update_text)
        return self._stable.settle(found.pinned)

    def _data_dir(self) -> str:
        return str(self.session.data_dir)

    def volatile_inputs(self) -> VolatileInputs:
        """The inputs of this turn's volatile parts, read now."""
        data_dir = self._data_dir()
        plans_dir = str(self.plans_dir)
        now = datetime.fromtimestamp(self._clock(), UTC)
        return VolatileInputs(
            now=now,
            time_zone=self.time_zone,
            permission_mode=self._settings.mode,
            plans_dir=plans_dir,
            data_dir=data_dir,
            active_sources=self._settings.sources,
        )

    @property
    def media(self) -> MediaSupport | None:
        """What the model takes besides text; None: what the target's official API takes."""
        return self._media

    @media.setter
    def media(self, value: MediaSupport | None) -> None:
        if value != self._media:
            self._media = value
            self._render_cache = RenderCache()  # completed turns were converted for the old model

    def attach(self, items: Sequence[AttachmentInput], *, base: Path | None = None) -> tuple[AttachmentRef, ...]:
        """Check, convert and store files for the next user message (see `AttachmentStore.add_all`).

        Raises:
            AttachmentError: a file cannot be used; nothing was stored and nothing logged.
        """
        return self.attachments.add_all(items, base=base)

    def attachment_blocks(self, target: RenderTarget) -> AttachmentBlocks:
        """How this session's attached files are shown in requests for `target` (and counted by reports)."""
        match target:
            case AnthropicTarget():
                support = self._media or MediaSupport(vision=True, pdf=True)
                return AttachmentRenderer(self.attachments, "anthropic", support)
            case OpenAIChatTarget() | OpenAIResponsesTarget():
                return AttachmentRenderer(self.attachments, "openai", self._media or MediaSupport(vision=True))
            case _:  # a text-only prompt: notes for images, converted text for documents
                return AttachmentRenderer(self.attachments, "anthropic", MediaSupport())

    def prepare_turn(
        self,
        user_text: str,
        attachments: Sequence[AttachmentRef | AttachmentInput] = (),
        *,
        user_words: str | None = None,
    ) -> TurnContext:
        """Build this turn's context exactly once, and log it as built.

        Appends the user message and a `TurnRecord` of the turn context. One-shot parts pending in
        the outbox are carried, and stay pending until `commit`. `attachments` are references from
        `attach`, or files to attach now: every file is stored durably before the user message
        that refers to it is logged. `user_words` marks a message Lamina wrote in the user's role
        (a plan's execution message): what of it the user typed ("" for nothing), so the user's
        words lane leaves Lamina's text out; None (the default) means the user typed all of it.

        Raises:
            AttachmentError: an attached file cannot be used; nothing was logged.
            UsageError: the engine is closed.
        """
        self._check_open()
        stored = iter(self.attach([a for a in attachments if not isinstance(a, AttachmentRef)]))
        refs = tuple(a if isinstance(a, AttachmentRef) else next(stored) for a in attachments)
        self.prune()
        stable = self._refresh_stable()
        stable_seen = self._view.stable_seen_digest == stable.digest
        words = msgspec.UNSET if user_words is None else user_words
        user = self.record(UserMessage(text=user_text, attachments=refs, user_words=words))
        turn = self._assemble(self._new_id(), user, self._view.slice(), stable, stable_seen)
        self.record(turn.record())
        return turn

    def prune(self, policy: PrunePolicy | None = None) -> ToolOutputPruned | None:
        """Prune old tool output from the provider view when it pays (`prepare_turn` calls this first).

        `policy` defaults to the engine's (`prune=` at construction; None there and here: nothing).
        The log keeps every result; the recorded `ToolOutputPruned` says which ones requests show
        as a note from now on.
        """
        chosen = self._view.chosen_prune(self.prune_policy if policy is None else policy)
        return self.record(chosen) if chosen is not None else None

    def preview_turn(self, user_text: str) -> TurnContext:
        """The turn `prepare_turn(user_text)` would build now, for reports: nothing is logged.

        Nothing is appended and no one-shot leaves the outbox; the user message is a stand-in that
        is not in the log. The stable parts are the cached prefix (the workspace's current ones
        before the first turn); a change of the stable inputs that the next turn would notice, and
        announce in a `stable_update` one-shot, is not shown. Old tool output the turn would prune
        is shown pruned.
        """
        self._check_open()
        stable = (
            self._stable.prefix
            if self._stable.prefix is not None
            else pin_stable(self._stable.latest, self._stable_source())[0]
        )
        entries = self._view.entries
        user = UserMessage(id="preview", parent_id=entries[-1].id if entries else None, text=user_text)
        prune = self._view.chosen_prune(self.prune_policy)
        view = apply_prunes([*entries, prune]) if prune is not None else entries  # what the turn would prune
        return self._assemble(
            "turn_preview", user, [*view, user], stable, self._view.stable_seen_digest == stable.digest
        )

    def _assemble(
        self, turn_id: str, user: UserMessage, history: Sequence[LogEntry], stable: StableContext, stable_seen: bool
    ) -> TurnContext:
        """The turn `assemble_turn` builds over the engine's state now: its volatile parts, outbox and view."""
        return assemble_turn(
            turn_id=turn_id,
            session_id=self.session.id,
            user=user,
            history=history,
            stable=stable,
            volatile=changed_volatile(build_volatile_parts(self.volatile_inputs()), self._view.last_seen),
            one_shots=self._outbox.carried(),
            boundary=self._view.boundary,
            data_dir=self._data_dir(),
            tools=self.tools,
            stable_seen=stable_seen,
        )

    def continuation(self, turn: TurnContext) -> Sequence[LogEntry]:
        """The entries appended since `turn` was prepared (its tool loop so far)."""
        return self._view.entries[len(turn.history) :]

    def request(self, turn: TurnContext, target: RenderTarget) -> RenderedRequest:
        """The next request of `turn` (its tool loop so far included), reusing completed turns' rendering."""
        self._check_open()
        blocks = self.attachment_blocks(target)
        return render(turn, target, continuation=self.continuation(turn), cache=self._render_cache, attachments=blocks)

    def commit(self, turn: TurnContext) -> None:
        """Mark the turn's one-shot parts delivered: the provider accepted a request carrying them.

        Call only after a provider accepted a request carrying `turn`. Each delivery record is
        fsynced before this returns (outbox records are critical entries); a one-shot whose
        delivery is recorded is never sent again. Committing twice is harmless.
        """
        for one_shot in turn.one_shots:
            delivered = self._outbox.delivery(one_shot, turn.id)
            if delivered is not None:
                self.record(delivered)

    # -- provider sessions (SPEC F11) --------------------------------------------------------------

    def provider_session(self, provider: str) -> ProviderSession | None:
        """The session `provider` keeps of this path's conversation, to resume through (None: none, or cleared).

        Marked `fork` when another path may have continued it since (a branch, a forked session, a
        point known only from a compaction's snapshot): the next turn forks it natively at this
        path's point (the SDK's `fork_session`) instead of continuing it, and records the new one.
        """
        return self._sessions.resume(provider, self._view.entries, self.session.info.forked_from)

    @property
    def provider_sessions(self) -> tuple[ProviderSession, ...]:
        """Every provider-side session stored for this session, one per provider."""
        return self._sessions.all()

    def set_provider_session(self, session: ProviderSession) -> None:
        """Persist where `session.provider` resumes next (a state change, durable); unchanged: nothing logged."""
        change = self._sessions.set_change(session)
        if change is not None:
            self.record(change, durable=True)

    def clear_provider_session(self, provider: str, reason: str) -> None:
        """Forget `provider`'s session (durably): its next turn starts a fresh one, told everything again."""
        self.record(self._sessions.clear_change(provider, reason), durable=True)

    def provider_compacted(self, provider: str, trigger: str, tokens_before: int) -> None:
        """Record that `provider` compacted its own context: the next tail restates everything, reads reset."""
        change = self._sessions.compacted_change(provider, trigger, tokens_before)
        self.record(change, durable=True)
        for hook in self.context_reset_hooks:
            hook()
        self._emit_compaction(CompactionEvent("completed", trigger, change.detail))

    def end_turn(self) -> None:
        """The turn boundary: everything the turn appended is made durable (one fsync)."""
        self.session.flush()

    # -- compaction ------------------------------------------------------------------------------

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
        """Calibrate the estimate: the provider counted `usage` for a request estimated at `estimated` tokens.

        A moving average of reported / estimated, so one odd request does not swing it.
        """
        reported = usage.input + usage.cache_read + usage.cache_write
        if estimated > 0 and reported > 0:
            self.calibration += _CALIBRATION_WEIGHT * (reported / estimated - self.calibration)

    def _prelude_tokens(self) -> int:
        pinned = lane_of(self._view.boundary, data_dir=self._data_dir())
        return self.estimator.count((self._view.summary or "") + (pinned or ""))

    def window_calls(self) -> tuple[tuple[ToolCall, ToolResult], ...]:
        """The tool calls of the current context window with their results, in order.

        The window starts after the latest compaction and after the latest reset of the provider's
        own context (a fresh or compacted provider session): what the model still has in front of
        it, so reads made there still count (a branch replays them as its prerequisites met).
        """
        return self._view.window_calls()

    def in_view(self, entry_id: str) -> bool:
        """Whether an entry is still in the provider view (a branch from it keeps the exact context)."""
        return any(e.id == entry_id for e in self._view.entries)

    def branch(self, entry_id: str, *, seed: bool = False) -> Branch:
        """Branch the session at `entry_id` and switch the provider view to the branch at once.

        The abandoned path stays in the log; from now on what is sent is what the branch holds, and
        the conversation's state (pending one-shots, the plan, the skills in use) is the branch's
        own; the user's settings (permission mode, active sources) stay as last set. At a user
        message the branch starts just before it, as Claude Code's rewind does: the message is not
        on the branch (it would be left unanswered there) and its text comes back in
        `Branch.offered_text`, to send again or edit. With `seed` (the provider keeps its own
        transcript and cannot fork there) a hidden one-shot branch seed is queued on the branch, in
        the same durable line that creates it: a crash leaves the old leaf, or the branch with its
        seed. Call between turns.

        Raises:
            UsageError: no such entry, or a user message that is the first entry of the log.
        """
        self._check_open()
        point = self.session.get(entry_id)
        abandoned = self.session.leaf_id
        was_in_view = self.in_view(entry_id) or (self._view.boundary is not None and self._view.boundary.id == entry_id)
        leaf_id = entry_id
        offered: str | None = None
        if isinstance(point, UserMessage):
            if point.parent_id is None:
                raise UsageError(f"entry {entry_id!r} is the session's first entry: there is nothing before it")
            leaf_id, offered = point.parent_id, point.typed or None
        view = self.session.view(leaf_id)  # walks back only to the branch's own latest compaction
        seed_id: str | None = None
        if seed:
            seed_id = "os_" + secrets.token_hex(6)
            text = view_summary(view, heading=BRANCH_SEED_HEADING, estimator=self.estimator)
            queued = OutboxRecord(part_id=seed_id, status="queued", kind="branch_seed", text=text, hidden=True)
            stamped = self.session.branch(leaf_id, first=queued)
            self._track_session_wide(stamped)
            self._rebuild_view()  # the seed's record is the leaf now
        else:
            self.session.branch(leaf_id)
            self._rebuild_view(view)
        return Branch(
            session_id=self.session.id,
            entry_id=entry_id,
            kind=entry_kind(point),
            leaf_id=self.session.leaf_id or leaf_id,
            abandoned_leaf_id=abandoned,
            in_view=was_in_view,
            strategy="seed" if seed else "log",
            view_entries=sum(isinstance(e, steps.CONVERSATION) for e in view.entries),
            summarised=view.boundary is not None,
            open_calls=open_tool_calls(view.entries),
            seed_id=seed_id,
            offered_text=offered,
        )

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
    ) -> CompactionOutcome:
        """Compact the provider view: one boundary entry appended, nothing removed from the log.

        The user's own messages from the summarised part join the user's words lane shown after
        the summary (newest first within `user_lane_tokens`); each compaction's messages are also
        written whole to a file under the session's `data/user-messages/`, before the boundary.

        At most one compaction runs per session (other processes cannot even write to it); a
        request that waited for one in flight finds nothing new and says "already compacted".

        With `plan_id` (Accept & Compact), the plan must be awaiting its compaction: the whole view
        is summarised (the plan runs in a fresh context, so the 5% rule does not apply), the
        boundary names the plan, and the plan is marked `compacted` once the boundary is durable.
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
            )
            if plan_id is not None:
                self._complete_plan_compaction(plan_id, outcome)
            return outcome

    def _complete_plan_compaction(self, plan_id: str, outcome: CompactionOutcome) -> None:
        """The engine moves the plan forward as soon as its compaction completed (no UI involved)."""
        plan = self._path.plan
        if plan is None or plan.plan_id != plan_id or plan.state != "awaiting_compaction":
            return
        if outcome.status == "compacted" and plan.compaction_id is not None:
            self.record_plan("compacted", compaction_id=plan.compaction_id)
        elif outcome.status in ("already_compacted", "nothing_to_compact"):
            # nothing of the conversation is in view since the last boundary (or at all): the context is fresh
            boundary = self._view.boundary.id if self._view.boundary is not None else None
            self.record_plan("compacted", compaction_id=boundary, detail=outcome.message)

    async def _compact_locked(
        self,
        summariser: Summariser,
        *,
        trigger: Trigger,
        focus: str | None,
        keep: int,
        lane_tokens: int,
        plan_id: str | None,
    ) -> CompactionOutcome:
        view, boundary = list(self._view.entries), self._view.boundary
        cut = steps.choose_cut(view, keep_tokens=keep, estimator=self.estimator, whole=plan_id is not None)
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
            if plan_id is None and not freed_enough(tokens_before, tokens_after):
                message = f"compaction would free less than 5% ({tokens_before:,} → {tokens_after:,} tokens); stopped"
                self._emit_compaction(CompactionEvent("failed", trigger, message))
                return CompactionOutcome("not_enough_freed", message, None, tokens_before, tokens_after)
            lane, failed = steps.archive(
                update,
                cut.summarised,
                lane_tokens,
                data_dir=self._data_dir(),
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
        settings = self._settings
        return StateSnapshot(
            mode=settings.mode if settings.mode_recorded else None,
            sources=settings.sources,
            skills=self._path.skills,
            provider_sessions=self._sessions.all(),
            stable=self._stable.state(),
            pending_one_shots=self._outbox.records(),
            plan=self._path.plan,
        )

    def reprepare(self, turn: TurnContext) -> TurnContext:
        """The same turn over the new provider view after a compaction in the middle of it.

        Keeps the turn's id, user message and one-shots: those already delivered in this turn stay
        in its tail for the rest of the turn (the model saw them; they are not delivered again and
        leave with the turn), and the ones queued since (the compaction's own notes) join them. The
        volatile parts are stated again (the compaction summarised the tails that carried them), and
        the new tail is logged as a new record for the same user message, so what is logged is still
        what is sent.
        """
        self._check_open()
        index = next((i for i, e in enumerate(self._view.entries) if e.id == turn.user_entry_id), None)
        if index is None:  # the compaction never cuts into the current turn; be safe anyway
            return turn
        user = self._view.entries[index]
        if not isinstance(user, UserMessage):
            return turn
        seen = self._view.last_seen_before(index)
        again = assemble_turn(
            turn_id=turn.id,
            session_id=turn.session_id,
            user=user,
            history=self._view.slice(index + 1),
            stable=self._stable.prefix or turn.stable,  # the compaction rebuilt the prefix with the latest version
            volatile=changed_volatile(build_volatile_parts(self.volatile_inputs()), seen),
            one_shots=turn_one_shots(turn.one_shots, self._outbox.carried()),
            boundary=self._view.boundary,
            data_dir=self._data_dir(),
            tools=turn.tools,
        )
        self.record(again.record())
        return again
