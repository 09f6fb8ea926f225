"""The context engine's facade: one session's turns prepared, recorded and committed (I/O: the session log).

`ContextEngine` is the I/O shell around the pure turn assembly: it reads the clock, asks the
workspace for the stable parts and appends to the session log; each piece of state it keeps in
memory (so a turn costs the same however long the history is) is a part of its own, folded from
what it records: the outbox, the live view, the stable prefix; and it owns the parts users call
(`settings`, `plans`, `compactor`, `provider_sessions`), each built with only what it needs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Self

import msgspec

from lamina.attachments import AttachmentInput, AttachmentStore, MediaSupport
from lamina.compaction import DEFAULT_PRUNE, PrunePolicy, apply_prunes
from lamina.context import (
    AttachmentBlocks,
    OneShot,
    Part,
    StableContext,
    ToolSpec,
    TurnContext,
    VolatileInputs,
)
from lamina.engine._assembler import TurnAssembler
from lamina.engine._branching import branch_session
from lamina.engine._compacting import Compactor
from lamina.engine._media import RequestRenderer
from lamina.engine._outbox import turn_one_shots
from lamina.engine._prefix import StablePrefix
from lamina.engine._recorder import E
from lamina.engine._session_book import ProviderSessionBook
from lamina.engine._session_plans import SessionPlans
from lamina.engine._settings import SessionSettings
from lamina.engine._state import boundary_state
from lamina.engine._tooldefs import ToolDefinitions
from lamina.engine._view import LiveView
from lamina.errors import UsageError
from lamina.placement import RenderedRequest, RenderTarget
from lamina.pricing import DEFAULT_PRICES, CachePrices
from lamina.session import (
    AttachmentRef,
    Branch,
    CompactionBoundary,
    LogEntry,
    ProviderView,
    SessionLog,
    StateChange,
    ToolCall,
    ToolOutputPruned,
    ToolResult,
    UserMessage,
)
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

__all__ = ["ContextEngine", "StableSource"]


StableSource = Callable[[], Sequence[Part]]
"""Returns the current stable parts; expected to be cheap (the workspace layer caches)."""


def _new_turn_id() -> str:
    return "turn_" + secrets.token_hex(6)


def _default_prices() -> CachePrices:
    return DEFAULT_PRICES


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
        prices: Callable[[], CachePrices] = _default_prices,
        media: Callable[[], MediaSupport] | None = None,
    ) -> None:
        """Open the engine over a session: its state folded from the log, its provider view built.

        Args:
            session: The open session log.
            stable_source: Returns the current stable parts (system prompt, project files, catalogues).
            tools: The tools the model may call.
            time_zone: The user's time zone, for the date in the tail and converted attachments.
            mode: The permission mode to record when the session has none yet.
            estimator: Counts tokens.
            clock: The time, in seconds since the epoch.
            new_id: Makes a turn id.
            prune: When old tool output leaves the provider view (None: never).
            owns_session: Whether closing the engine closes the session.
            prices: The prices the cost model decides prunes, TTLs and compactions with, read at each
                decision (Anthropic's by default; `open_agent` reads its provider's, followed across `/model`).
            media: What the model takes besides text, read at each request (None: what the target's API takes).
        """
        self.session = session
        self._owns_session = owns_session
        self._closed = False
        self.tools = tuple(tools)
        self.time_zone = time_zone
        self.estimator = estimator
        self._stable_source = stable_source
        self._clock = clock
        self._new_id = new_id
        self._stable, self._tool_definitions = StablePrefix(), ToolDefinitions()
        self.attachments = AttachmentStore(
            session.attachments_dir, session.data_dir, time_zone=time_zone, estimator=estimator, files=session
        )
        """The session's stored attachments."""
        self._requests = RequestRenderer(self.attachments, media)
        self.settings = SessionSettings(
            record=self.record, queue_one_shot=self.queue_one_shot, path=lambda: self._view.path
        )
        """The user's settings: permission mode, sources, skills in use, model and preset (each change recorded)."""
        self.plans = SessionPlans(record=self.record, path=lambda: self._view.path)
        """The session's plans: the latest one and its transitions (`Plan`)."""
        self.compactor = Compactor(
            session,
            record=self.record,
            check_open=self._check_open,
            view=lambda: self._view,
            fixed_parts=lambda: (self._stable.next(self._stable_source).parts, self.tools),
            prices=prices,
            clock=clock,
            snapshot=lambda: boundary_state(
                self.settings.state,
                self._view.path,
                self.provider_sessions.all(),
                self._stable.state(),
                self._view.outbox.records(),
            ),
            plans=self.plans,
            estimator=estimator,
            prune=prune,
        )
        """Compaction: the context's tokens, what compacting would pay, prunes, compactions and their listeners."""
        self._turns = TurnAssembler(
            session,
            settings=self.settings,
            view=lambda: self._view,
            tools=lambda: self.tools,
            clock=clock,
            time_zone=time_zone,
        )
        self.provider_sessions = ProviderSessionBook(
            record=self.record,
            view=lambda: self._view.entries,
            origin=lambda: session.info.forked_from,
            emit=self.compactor.emit,
        )
        """Where each provider resumes this path's conversation (SPEC F11), one session per provider."""
        for entry in session.entries_loaded():
            self._track_session_wide(entry)
            self.compactor.observe(entry, 0, 0, at=entry.ts)
        self._rebuild_view()
        self.compactor.resumed(self._view.tokens)
        if mode is not None and not self.settings.state.mode_recorded:
            # the session's starting mode: recorded, but not a transition the model must be told about
            self.record(StateChange(key="mode", value=mode), durable=True)

    # -- state derived from the log: each part folds what concerns it ------------------------------

    def _track_session_wide(self, entry: LogEntry) -> None:
        """Fold an entry into what holds on every branch (append order): settings, stable inputs, sessions."""
        self.settings.observe(entry)
        self._stable.observe(entry)
        self._tool_definitions.observe(entry)
        self.provider_sessions.observe(entry)

    def _rebuild_view(self, view: ProviderView | None = None) -> None:
        """Take the provider view of the leaf from the session (or `view`, when the caller has it already)."""
        view = self.session.view() if view is None else view
        self._view = LiveView(view, self.estimator)  # the path's state and outbox folded too
        self.provider_sessions.follow(view.boundary, self._view.entries)

    # -- public API ------------------------------------------------------------------------------

    @property
    def view(self) -> Sequence[LogEntry]:
        """The provider view as it stands: the entries after the latest compaction (read-only, O(1) to take)."""
        return self._view.slice()

    @property
    def boundary(self) -> CompactionBoundary | None:
        """The latest compaction on the current path, if any."""
        return self._view.boundary

    @property
    def pending_one_shots(self) -> tuple[OneShot, ...]:
        """The one-shots the next turn carries: those queued on the current path and not delivered on it."""
        return self._view.outbox.carried()

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
        before = self._view.tokens
        if isinstance(stamped, CompactionBoundary):
            self._rebuild_view()
        elif isinstance(stamped, ToolOutputPruned):
            self._view.prune(stamped)
            self._requests.forget()
        else:
            self._view.append(stamped)
        self.compactor.observe(stamped, before, self._view.tokens)
        return stamped

    def queue_one_shot(self, kind: str, text: str, *, hidden: bool = False) -> str:
        """Queue a part to be delivered to the model exactly once; durable before this returns.

        `hidden` marks a one-shot bridge (a recovery block, a branch seed, a transfer summary; see
        `BRIDGE_KINDS`): the model gets it like any one-shot, a UI leaves it out of the transcript.
        The same part already pending (same kind and text: a message sent again after a branch
        before it mentions the same skill) is not queued twice; its id is returned.
        """
        queued = self._view.outbox.queued(kind, text, hidden=hidden)
        if isinstance(queued, str):
            return queued
        self.record(queued)
        return queued.part_id

    def _refresh_stable(self) -> StableContext:
        """The stable context this turn renders, noticing (and recording) a change of the stable inputs."""
        found = self._stable.refresh(tuple(self._stable_source()), turn_since_boundary=self._view.turn_since_boundary)
        if found.change is not None:
            self.record(found.change)
        if found.update_text is not None:
            self.queue_one_shot("stable_update", found.update_text)
        return self._stable.settle(found.pinned)

    def volatile_inputs(self) -> VolatileInputs:
        """The inputs of this turn's volatile parts, read now."""
        return self._turns.volatile_inputs()

    def prepare_turn(
        self,
        user_text: str,
        attachments: Sequence[AttachmentRef | AttachmentInput] = (),
        *,
        user_words: str | None = None,
    ) -> TurnContext:
        """Build this turn's context exactly once, and log it as built.

        Appends the user message and a `TurnRecord` of the turn context. One-shot parts pending in
        the outbox are carried, and stay pending until `commit`.

        Args:
            user_text: The user message's text.
            attachments: References from `attachments.add_all`, or files to attach now: every file is stored
                durably before the user message that refers to it is logged.
            user_words: For a message Lamina wrote in the user's role (a plan's execution message),
                what of it the user typed ("" for nothing), so the user's words lane leaves
                Lamina's text out; None (the default) means the user typed all of it.

        Returns:
            The turn's context, as logged.

        Raises:
            AttachmentError: An attached file cannot be used; nothing was logged.
            UsageError: The engine is closed.
        """
        self._check_open()
        stored = iter(self.attachments.add_all([a for a in attachments if not isinstance(a, AttachmentRef)]))
        refs = tuple(a if isinstance(a, AttachmentRef) else next(stored) for a in attachments)
        self.compactor.prune()
        stable = self._refresh_stable()
        self.set_tools(self.tools)
        stable_seen = self._view.stable_seen_digest == stable.digest
        words = msgspec.UNSET if user_words is None else user_words
        user = self.record(UserMessage(text=user_text, attachments=refs, user_words=words))
        # a provider with one cache lifetime (OpenAI) has no TTL to choose: nothing is decided, nothing logged
        ttl = self.compactor.turn_ttl()
        turn = self._turns.assemble(self._new_id(), user, self._view.slice(), stable, stable_seen=stable_seen, ttl=ttl)
        self.record(turn.record())
        return turn

    def set_tools(self, tools: Sequence[ToolSpec]) -> None:
        """Send `tools` from the next request on, recording them now when they changed.

        In a turn's tool loop the turn's next request sends them (a loaded tool appended to the `tools`
        array, or `tool_addition` / `tool_removal` blocks where the model takes them).
        """
        self.tools = tuple(tools)
        # recorded once per version, so a request rebuilt from the log sends them again
        for change in self._tool_definitions.changes(self.tools, self._view.entries, self.compactor.outlook):
            self.record(change)

    def preview_turn(self, user_text: str) -> TurnContext:
        """The turn `prepare_turn(user_text)` would build now, for reports: nothing is logged.

        Nothing is appended and no one-shot leaves the outbox; the user message is a stand-in that
        is not in the log. The stable parts are the cached prefix (the workspace's current ones
        before the first turn); a change of the stable inputs that the next turn would notice, and
        announce in a `stable_update` one-shot, is not shown. Old tool output the turn would prune
        is shown pruned.
        """
        self._check_open()
        stable = self._stable.shown(self._stable_source)
        entries = self._view.entries
        user = UserMessage(id="preview", parent_id=entries[-1].id if entries else None, text=user_text)
        prune = self.compactor.next_prune()
        view = apply_prunes([*entries, prune]) if prune is not None else entries  # what the turn would prune
        seen = self._view.stable_seen_digest == stable.digest
        return self._turns.assemble("turn_preview", user, [*view, user], stable, stable_seen=seen)

    def continuation(self, turn: TurnContext) -> Sequence[LogEntry]:
        """The entries appended since `turn` was prepared (its tool loop so far)."""
        return self._view.entries[len(turn.history) :]

    def request(self, turn: TurnContext, target: RenderTarget) -> RenderedRequest:
        """The next request of `turn` (its tool loop so far included), reusing completed turns' rendering."""
        self._check_open()
        return self._requests.render(turn, target, self.continuation(turn))

    def attachment_blocks(self, target: RenderTarget) -> AttachmentBlocks:
        """How this session's attached files are shown in requests for `target` (and counted by reports)."""
        return self._requests.blocks(target)

    def commit(self, turn: TurnContext) -> None:
        """Mark the turn's one-shot parts delivered: the provider accepted a request carrying them.

        Call only after a provider accepted a request carrying `turn`. Each delivery record is
        fsynced before this returns (outbox records are critical entries); a one-shot whose
        delivery is recorded is never sent again. Committing twice is harmless.
        """
        for one_shot in turn.one_shots:
            delivered = self._view.outbox.delivery(one_shot, turn.id)
            if delivered is not None:
                self.record(delivered)

    def end_turn(self) -> None:
        """The turn boundary: everything the turn appended is made durable (one fsync)."""
        self.session.flush()

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
        again = self._turns.assemble(
            turn.id,
            user,
            self._view.slice(index + 1),
            self._stable.prefix or turn.stable,  # the compaction rebuilt the prefix with the latest version
            seen=self._view.last_seen_before(index),
            one_shots=turn_one_shots(turn.one_shots, self._view.outbox.carried()),
            tools=self.tools,  # a change recorded in the turn's loop (`set_tools`) holds after the compaction
            ttl=(turn.turn_ttl, turn.cost),
        )
        self.record(again.record())
        return again

    def window_calls(self) -> tuple[tuple[ToolCall, ToolResult], ...]:
        """The tool calls of the current context window with their results, in order.

        The window starts after the latest compaction and the latest reset of the provider's own context
        (a fresh or compacted provider session): reads made there still count (a branch replays them).
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
        `Branch.offered_text`, to send again or edit. With `seed` the branch seed is queued on the
        branch in the same durable line that creates it: a crash leaves the old leaf, or the branch
        with its seed. Call between turns.

        Args:
            entry_id: The entry to branch at.
            seed: Queue a hidden one-shot branch seed on the branch, for a provider that keeps its
                own transcript and cannot fork there.

        Returns:
            The branch, with the user message's text to offer again when it branched at one.

        Raises:
            UsageError: No such entry, or a user message that is the first entry of the log.
        """
        self._check_open()
        boundary = self._view.boundary
        in_view = self.in_view(entry_id) or (boundary is not None and boundary.id == entry_id)
        made, view, seeded = branch_session(
            self.session, entry_id, seed=seed, estimator=self.estimator, in_view=in_view
        )
        if seeded is not None:
            self._track_session_wide(seeded)
            self._rebuild_view()  # the seed's record is the leaf now
        else:
            self._rebuild_view(view)
        return made
