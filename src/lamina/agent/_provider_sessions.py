"""Provider sessions: resume the provider's own while it exists, recover in a fresh one when not (I/O: the log).

SPEC F11: a provider session that is gone (another machine, a cleaned cache, a conversation that
went on with another provider) is cleared durably and the fresh one gets, once, a recovery block
(`lamina.agent._recovery`) through the outbox, unless a branch seed or transfer summary bridges it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from itertools import takewhile

from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS, RECOVERY_KIND, recovery_text
from lamina.context import TurnContext
from lamina.engine import CompactionOutcome, ContextEngine, provider_session_in_view
from lamina.errors import ProviderSessionLostError
from lamina.placement import RenderedRequest, SdkManagedPrompt
from lamina.providers import Completed, Provider, ProviderCompacted, ProviderEvent, ProviderSessionChanged
from lamina.session import BRIDGE_KINDS, AssistantMessage, Branch, ProviderSession


@dataclass(slots=True)
class SessionRecovery:
    """The agent's provider sessions: where each resumes, and the recovery of one that is gone.

    Built with what it needs: the engine (its provider-session book, view and outbox), the
    provider the agent runs on now (`/model` may switch it) and the agent's stream of a request.
    """

    engine: ContextEngine
    provider: Callable[[], Provider]
    stream: Callable[[RenderedRequest], AsyncIterator[ProviderEvent]]
    """A request sent, retried as the agent retries, its events out."""
    _update: ProviderSession | None = field(default=None, init=False, repr=False)
    """Where the provider session resumes after the model call under way, once the provider accepted it."""

    def begin(self, request: RenderedRequest) -> RenderedRequest:
        """A model call begins with `request`: told where the provider's own session resumes (SDK-managed backends)."""
        self._update = None
        if not isinstance(request, SdkManagedPrompt):  # the log says where the provider session resumes
            return request
        stored = self.engine.provider_sessions.get(self.provider().name)
        return dataclasses.replace(request, resume=stored, new_session=stored is None)

    def observe(self, event: ProviderSessionChanged | ProviderCompacted) -> None:
        """The provider compacted its session (recorded now), or says where it resumes (recorded by `settle`)."""
        match event:
            case ProviderCompacted(trigger=trigger, tokens_before=tokens):
                self.engine.provider_sessions.compacted(self.provider().name, trigger, tokens)
            case ProviderSessionChanged(session=session):  # once the provider accepted the call carrying the turn
                self._update = session

    def settle(self) -> None:
        """Record where the provider session resumes (after the commit of the turn the call carried)."""
        update, self._update = self._update, None
        if update is not None:
            self.engine.provider_sessions.set(update)

    async def call(
        self,
        turn: TurnContext,
        model_call: Callable[[TurnContext], Awaitable[Completed]],
        *,
        recovery_tokens: int = DEFAULT_RECOVERY_TOKENS,
    ) -> tuple[TurnContext, Completed]:
        """A model call; when the provider session to resume is gone, recover in a fresh one and retry once.

        Args:
            turn: The turn the call sends.
            model_call: The call (the agent's), of a turn.
            recovery_tokens: Budget of the recovery block the fresh provider session gets.

        Returns:
            The turn as sent (prepared again after a recovery) and the provider's answer.
        """
        try:
            return turn, await model_call(turn)
        except ProviderSessionLostError as exc:
            reason = f"session {exc.session_id} is gone"
            self._recover(reason, before=turn.user_entry_id, clear=True, budget=recovery_tokens)
            turn = self.engine.reprepare(turn)  # the fresh session is told everything: stable, volatile, recovery
        return turn, await model_call(turn)  # exactly one retry: a second failure goes to the caller

    def before_turn(self, recovery_tokens: int = DEFAULT_RECOVERY_TOKENS) -> None:
        """Before a turn: forget the provider sessions that fell behind, and recover a missing one.

        Other providers' sessions are forgotten (the conversation goes on here, so they fall behind),
        and this one's when a branch seed or transfer summary waits (it bridges to a fresh one). A
        provider that resumes sessions but has none for a conversation already under way gets a
        recovery block (a session begun elsewhere, an id cleared by a crashed recovery, an older log).
        """
        provider = self.provider()
        name = provider.name
        for session in self.engine.provider_sessions.all():
            if session.provider != name:
                self.engine.provider_sessions.clear(session.provider, f"the conversation went on with {name}")
            elif self._bridge_pending():  # a branch seed or a transfer summary is for a fresh session
                self.engine.provider_sessions.clear(
                    name, "a pending branch seed or transfer summary starts a fresh one"
                )
        if not provider.capabilities.native_resume or self.engine.provider_sessions.get(name) is not None:
            return
        if not self._bridge_pending():  # a queued branch seed or transfer summary already bridges the gap
            reason = f"{name} holds no session of this conversation"
            self._recover(reason, before=None, clear=False, budget=recovery_tokens)

    def branch(self, entry_id: str) -> Branch:
        """The engine's branch at `entry_id`, the provider's own session forked there if it can be (`Agent.branch`)."""
        capabilities = self.provider().capabilities
        if capabilities.native_fork and self._forks_at(entry_id):
            # the branch's path keeps the provider session as it stood after that answer: its next
            # turn forks it there (`provider_session` marks it `fork`), nothing injected
            return dataclasses.replace(self.engine.branch(entry_id, seed=False), strategy="native_fork")
        return self.engine.branch(entry_id, seed=capabilities.native_resume)

    def _forks_at(self, entry_id: str) -> bool:
        """Whether the provider's own session can be forked exactly at `entry_id`.

        It can at an answer that ends a turn whose provider session the log recorded (at a user
        message, the provider never saw it).
        """
        session = self.engine.session
        if not isinstance(session.get(entry_id), AssistantMessage):
            return False
        return provider_session_in_view(session.view(entry_id), self.provider().name) is not None

    async def compact(self, focus: str | None) -> CompactionOutcome:
        """`/compact` on an SDK-managed backend: the backend compacts its own session."""
        name = self.provider().name
        stored = self.engine.provider_sessions.get(name)
        if stored is None:
            return CompactionOutcome("nothing_to_compact", f"nothing to compact: {name} holds no session yet")
        prompt = "/compact" + (f" {' '.join(focus.split())}" if focus else "")
        request = SdkManagedPrompt(prompt, self.engine.session.id, resume=stored, command=True)
        compacted: ProviderCompacted | None = None
        try:
            async for event in self.stream(request):
                if isinstance(event, ProviderCompacted | ProviderSessionChanged):
                    self.observe(event)
                    compacted = event if isinstance(event, ProviderCompacted) else compacted
        except ProviderSessionLostError:
            self.engine.provider_sessions.clear(name, "its session could not be resumed to compact it")
            return CompactionOutcome(
                "nothing_to_compact", f"{name} no longer has the session; the next turn starts a fresh one"
            )
        finally:
            self.settle()
        if compacted is None:
            return CompactionOutcome("nothing_to_compact", f"{name} did not compact its session")
        before = f" from {compacted.tokens_before:,} tokens" if compacted.tokens_before else ""
        return CompactionOutcome("compacted", f"compacted by {name}{before}", tokens_before=compacted.tokens_before)

    def _recover(self, reason: str, *, before: str | None, clear: bool, budget: int) -> None:
        """Clear the provider's session (durably) and queue a recovery block of the provider view before entry `before`.

        The block is made of the log's provider view (its messages and the latest summary), up to
        (not including) entry `before`, the message being sent (None: all of it). With
        `clear=False` nothing is recorded when there is nothing to recover (a new session).
        """
        view = self.engine.session.view()
        block = recovery_text(
            list(takewhile(lambda entry: entry.id != before, view.entries)),
            summary=view.boundary.summary if view.boundary is not None else None,
            budget_tokens=budget,
            estimator=self.engine.compactor.estimator,
            reason=reason,
        )
        if block is None and not clear:
            return
        self.engine.provider_sessions.clear(self.provider().name, reason)
        if block is not None and not self._bridge_pending():
            self.engine.queue_one_shot(RECOVERY_KIND, block.text, hidden=True)  # a bridge: hidden from transcripts

    def _bridge_pending(self) -> bool:
        return any(o.kind in BRIDGE_KINDS for o in self.engine.pending_one_shots)
