"""Provider sessions: resume the provider's own while it exists, recover in a fresh one when not (I/O: the log).

SPEC F11: a provider session that is gone (another machine, a cleaned cache, a conversation that
went on with another provider) is cleared durably and the fresh one gets, once, a recovery block
(`lamina.agent._recovery`) through the outbox, unless a branch seed or transfer summary bridges it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from lamina.agent._events import AgentEvent
from lamina.agent._recovery import RECOVERY_KIND, recovery_text
from lamina.context import TurnContext
from lamina.engine import CompactionOutcome, ContextEngine
from lamina.errors import ProviderSessionLostError
from lamina.placement import SdkManagedPrompt
from lamina.providers import (
    Completed,
    Provider,
    ProviderCompacted,
    ProviderSessionChanged,
    RetryPolicy,
    stream_with_retry,
)
from lamina.session import BRIDGE_KINDS, LogEntry, ProviderSession

SessionUpdate: TypeAlias = ProviderSession | None
"""Where the provider session resumes after the model call under way, once the provider accepted it."""


class ProviderSessions:
    """The provider-session methods of `Agent` (a mixin: the model call is the agent's)."""

    engine: ContextEngine
    provider: Provider
    retry: RetryPolicy
    recovery_tokens: int
    _session_update: SessionUpdate

    if TYPE_CHECKING:

        def _emit(self, event: AgentEvent) -> None: ...

        async def _model_call(self, turn: TurnContext, index: int) -> Completed: ...

    async def _model_call_recovering(self, turn: TurnContext, index: int) -> tuple[TurnContext, Completed]:
        """A model call; when the provider session to resume is gone, recover in a fresh one and retry once."""
        try:
            return turn, await self._model_call(turn, index)
        except ProviderSessionLostError as exc:
            before = self._entries_before(turn.user_entry_id)
            self._recover(before, f"session {exc.session_id} is gone", clear=True)
            turn = self.engine.reprepare(turn)  # the fresh session is told everything: stable, volatile, recovery
        return turn, await self._model_call(turn, index)  # exactly one retry: a second failure goes to the caller

    def _entries_before(self, entry_id: str) -> list[LogEntry]:
        """The provider view up to (not including) entry `entry_id`."""
        entries: list[LogEntry] = []
        for entry in self.engine.view:
            if entry.id == entry_id:
                break
            entries.append(entry)
        return entries

    def _check_provider_sessions(self) -> None:
        """Before a turn: forget the provider sessions that fell behind, and recover a missing one.

        Other providers' sessions are forgotten (the conversation goes on here, so they fall behind),
        and this one's when a branch seed or transfer summary waits (it bridges to a fresh one). A
        provider that resumes sessions but has none for a conversation already under way gets a
        recovery block (a session begun elsewhere, an id cleared by a crashed recovery, an older log).
        """
        name = self.provider.name
        for session in self.engine.provider_sessions.all():
            if session.provider != name:
                self.engine.provider_sessions.clear(session.provider, f"the conversation went on with {name}")
            elif self._bridge_pending():  # a branch seed or a transfer summary is for a fresh session
                self.engine.provider_sessions.clear(
                    name, "a pending branch seed or transfer summary starts a fresh one"
                )
        if not self.provider.capabilities.native_resume or self.engine.provider_sessions.get(name) is not None:
            return
        if not self._bridge_pending():  # a queued branch seed or transfer summary already bridges the gap
            self._recover(list(self.engine.view), f"{name} holds no session of this conversation", clear=False)

    def _recover(self, before: Sequence[LogEntry], reason: str, *, clear: bool) -> None:
        """Clear the provider's session (durably) and queue a recovery block of the messages in `before`.

        With `clear=False` nothing is recorded when there is nothing to recover (a new session).
        """
        boundary = self.engine.boundary
        block = recovery_text(
            before,
            summary=boundary.summary if boundary is not None else None,
            budget_tokens=self.recovery_tokens,
            estimator=self.engine.estimator,
            reason=reason,
        )
        if block is None and not clear:
            return
        self.engine.provider_sessions.clear(self.provider.name, reason)
        if block is not None and not self._bridge_pending():
            self.engine.queue_one_shot(RECOVERY_KIND, block.text, hidden=True)  # a bridge: hidden from transcripts

    def _bridge_pending(self) -> bool:
        return any(o.kind in BRIDGE_KINDS for o in self.engine.pending_one_shots)

    def _settle_provider_session(self) -> None:
        update, self._session_update = self._session_update, None
        if update is not None:
            self.engine.provider_sessions.set(update)

    async def _compact_provider_session(self, focus: str | None) -> CompactionOutcome:
        """`/compact` on an SDK-managed backend: the backend compacts its own session."""
        name = self.provider.name
        stored = self.engine.provider_sessions.get(name)
        if stored is None:
            return CompactionOutcome("nothing_to_compact", f"nothing to compact: {name} holds no session yet")
        prompt = "/compact" + (f" {' '.join(focus.split())}" if focus else "")
        request = SdkManagedPrompt(prompt, self.engine.session.id, resume=stored, command=True)
        compacted: ProviderCompacted | None = None
        try:
            async for event in stream_with_retry(self.provider, request, self.retry, on_retry=self._emit):
                match event:
                    case ProviderCompacted():
                        compacted = event
                        self.engine.provider_sessions.compacted(name, event.trigger, event.tokens_before)
                    case ProviderSessionChanged(session=session):
                        self._session_update = session
                    case _:
                        pass
        except ProviderSessionLostError:
            self.engine.provider_sessions.clear(name, "its session could not be resumed to compact it")
            return CompactionOutcome(
                "nothing_to_compact", f"{name} no longer has the session; the next turn starts a fresh one"
            )
        finally:
            self._settle_provider_session()
        if compacted is None:
            return CompactionOutcome("nothing_to_compact", f"{name} did not compact its session")
        before = f" from {compacted.tokens_before:,} tokens" if compacted.tokens_before else ""
        return CompactionOutcome("compacted", f"compacted by {name}{before}", tokens_before=compacted.tokens_before)
