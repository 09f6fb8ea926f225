"""The agent's send chain: one model call of a turn, retried once after a compaction or a recovery (I/O: provider).

A context overflow is compacted (by the agent) and the call sent again once; a provider session
that is gone is recovered in a fresh one (`SessionRecovery`) and the call sent again once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from lamina.agent._cache_watch import CacheWatch
from lamina.agent._events import AgentEvent, ModelCallFinished, Thinking
from lamina.agent._provider_sessions import SessionRecovery
from lamina.agent._reasoning_replay import ReasoningReplay
from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS
from lamina.agent._warming import Warming
from lamina.context import TurnContext
from lamina.engine import CompactionOutcome, ContextEngine
from lamina.errors import ContextOverflowError
from lamina.placement import RenderedRequest
from lamina.providers import (
    Completed,
    Provider,
    ProviderCompacted,
    ProviderEvent,
    ProviderSessionChanged,
    ReasoningDelta,
    TextDelta,
)


@dataclass(frozen=True, slots=True)
class ModelCalls:
    """Sends a turn to the provider the agent runs on now, and streams the answer back.

    Built with what it needs: the engine (the request, the counts it learns from), the provider
    (`/model` may switch it), the provider sessions, the agent's stream of a request, its
    compaction on an overflow and its events.
    """

    engine: ContextEngine
    provider: Callable[[], Provider]
    sessions: SessionRecovery
    stream: Callable[[RenderedRequest], AsyncIterator[ProviderEvent]]
    """A request sent, retried as the agent retries, its events out."""
    compact: Callable[[], Awaitable[CompactionOutcome]]
    """Compacts the session after a context overflow."""
    emit: Callable[[AgentEvent], None]
    warming: Warming
    """The calls about the cache besides the turn's: the summariser on the session's prefix, the pre-warm."""
    replay: ReasoningReplay = field(default_factory=ReasoningReplay)
    """Completed turns' reasoning, kept or dropped as priced (`ReasoningConfig(history="priced")`)."""
    watch: CacheWatch = field(default_factory=CacheWatch)
    """Asks for the provider's cache diagnostics and checks each answer against the simulator (`watch.last`)."""

    async def send(
        self, turn: TurnContext, index: int, *, recovery_tokens: int = DEFAULT_RECOVERY_TOKENS
    ) -> tuple[TurnContext, Completed]:
        """Model call `index` of `turn`; on a context overflow, compact and send once more (a second is an error).

        Args:
            turn: The turn to send.
            index: The call's number in the turn.
            recovery_tokens: Budget of the recovery block a fresh provider session gets.

        Returns:
            The turn as sent (prepared again after a compaction or a recovery) and the answer.

        Raises:
            ContextOverflowError: The request is too long, and compacting did not help.
        """
        name = self.provider().name
        try:
            return await self.sessions.call(turn, partial(self._call, index=index), recovery_tokens=recovery_tokens)
        except ContextOverflowError as overflow:
            outcome = await self.compact()
            if outcome.status != "compacted":
                from lamina.agent._fit import overflow_message

                message = overflow_message(overflow, outcome.message, turn, self.provider().capabilities)
                raise ContextOverflowError(name, message, status=overflow.status) from None
            turn = self.engine.reprepare(turn)
        try:
            return turn, await self._call(turn, index)
        except ContextOverflowError as exc:
            raise ContextOverflowError(
                name, f"the request is still too long after compaction ({exc})", status=exc.status
            ) from exc

    async def _call(self, turn: TurnContext, index: int) -> Completed:
        provider = self.provider()
        target = self.replay.target(self.engine, turn, provider.target)  # a priced reasoning choice made
        request = self.watch.prepare(self.sessions.begin(self.engine.request(turn, target)), provider)
        estimated = self.engine.compactor.context_tokens()
        completed: Completed | None = None
        async for event in self.stream(request):
            match event:
                case TextDelta() | ReasoningDelta():
                    self.emit(event)
                case ProviderSessionChanged() | ProviderCompacted():
                    self.sessions.observe(event)
                case Completed():
                    completed = event
                case _:
                    pass
        if completed is None:
            raise RuntimeError(f"provider {provider.name} ended a response without completing it")
        self.watch.check(request, completed, provider, turn.history)
        self.engine.compactor.observe_usage(estimated, completed.usage)  # the estimator learns the provider's counts
        if completed.reasoning:
            self.emit(Thinking(index, completed.reasoning, completed.usage.reasoning))
        self.emit(ModelCallFinished(index, completed.usage, completed.stop_reason))
        return completed
