"""Provider sessions as the engine exposes them (SPEC F11): where each provider resumes this path (I/O: the log)."""

from __future__ import annotations

from lamina.engine._compaction import CompactionEvent
from lamina.engine._host import EngineHost
from lamina.session import ProviderSession


class ResumeMixin(EngineHost):
    """The provider-session methods of `ContextEngine` (the state is `_sessions.ProviderSessions`)."""

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
