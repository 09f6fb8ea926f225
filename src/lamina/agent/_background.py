"""Compaction off the user's time: prepared in the background, applied at a later turn's start (I/O: the engine).

At a turn's end, when the next turn would cross the threshold (or the band's price says compact),
and when an idle session's cache has gone cold, a task makes the compaction while the user reads
and types; it is logged as prepared (`PreparedCompaction`) and applied, if still valid, when the
next turn starts. A turn never waits for it unless the context no longer fits without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final, Literal, Protocol

from lamina.agent._events import AgentEvent, BackgroundCompaction
from lamina.agent._priced import CompactionTiming, Timing
from lamina.agent._warming import Warming
from lamina.compaction import Summariser
from lamina.engine import CompactionOutcome, ContextEngine
from lamina.placement import SdkManagedTarget
from lamina.providers import Provider
from lamina.session import CompactionClaims, CostDecision, PreparedCompaction

_log = logging.getLogger("lamina.compaction")
_CLAIM_SECONDS: Final = 600.0
"""How long a host's claim on a session's compaction lasts (PostgreSQL): a summary's own longest timeout."""
_COLD_MARGIN: Final = 0.05
"""Seconds past the cache's expiry before an idle session is compacted (its cache is cold by then)."""

Trigger = Literal["threshold", "idle"]


_LANE_SHARE: Final = 4
"""The user's words lane takes at most 1/4 of the context window, whatever its configured budget."""


class CompactionSettings(Protocol):
    """What of the agent its compactions read, at each use (`Agent`'s fields)."""

    engine: ContextEngine
    provider: Provider
    summariser: Summariser | None
    compaction_reserve: int
    compaction_band: float | None
    keep_tokens: int
    user_lane_tokens: int
    background_compaction: bool


def timing_of(agent: CompactionSettings) -> CompactionTiming:
    """The compaction policy of the agent's `compaction_reserve` and `compaction_band` (pure)."""
    return CompactionTiming(agent.compaction_reserve, agent.compaction_band)


def summariser_of(agent: CompactionSettings, warming: Warming) -> Summariser:
    """The summariser the agent's compactions use: its `summariser`, or the session's own provider, on the cache."""
    return warming.summariser(agent.summariser, agent.engine.session.id)


def limits_of(agent: CompactionSettings) -> tuple[int, int, int]:
    """The context window, the tokens a compaction keeps and the user's words lane's budget."""
    window = agent.provider.capabilities.context_window
    # a small model's window cannot hold 20,000 tokens of earlier messages beside the kept ones
    return window, agent.keep_tokens, min(agent.user_lane_tokens, window // _LANE_SHARE)


def _backend_compacts(agent: CompactionSettings) -> bool:
    """Whether the backend compacts its own session (SDK-managed): Lamina does not."""
    return isinstance(agent.provider.target, SdkManagedTarget)


class BackgroundCompactions:
    """The agent's compactions off the user's time: started at a turn's end or when idle, applied at a turn's start.

    At most one runs per session (the engine's compaction lock; on PostgreSQL a claim, so two
    hosts on one session run one). A result made while a turn runs is logged once the turn ends.
    """

    def __init__(
        self,
        agent: CompactionSettings,
        *,
        emit: Callable[[AgentEvent], None],
        compact: Callable[..., Awaitable[CompactionOutcome]],
        closed: Callable[[], bool],
        warming: Warming,
    ) -> None:
        """The background compactions of `agent`'s session; `compact(decision=...)` compacts inline."""
        self._agent = agent
        self._warming = warming
        self._engine = agent.engine
        self._emit = emit
        self._compact = compact
        self._closed = closed
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Task[None] | None = None
        self._ready: PreparedCompaction | None = None  # made while a turn ran, not yet logged
        self._turn_running = False
        self._tokens_at_start: int | None = None

    @property
    def running(self) -> bool:
        """Whether a background compaction is being made now."""
        return self._task is not None and not self._task.done()

    async def before_turn(self) -> None:
        """Before a turn: apply a prepared compaction, or compact when due or when the band's price says it pays.

        A background compaction still running is waited for only when the context no longer fits.
        """
        self._stop_idle()
        self._log_ready()
        agent, compactor = self._agent, self._engine.compactor
        tokens = compactor.calibrated_context_tokens()  # counted once: the stable parts and tools are counted too
        window = agent.provider.capabilities.context_window  # an SDK-managed backend compacts its own session
        timing = timing_of(agent).before_turn(tokens, window, backend_compacts=_backend_compacts(agent))
        # else the turn goes on uncompacted: the context still fits
        if (timing == "due" or not self.running) and await self._settle_or_compact(timing, window):
            tokens = compactor.calibrated_context_tokens()  # counted again only when a compaction ran
        self._turn_running = True
        self._tokens_at_start = tokens

    async def _settle_or_compact(self, timing: Timing, window: int) -> bool:
        """Apply the prepared compaction (waiting for a running one); else compact when due or when it pays.

        Returns:
            Whether a compaction was applied or attempted (the context's tokens may have changed).
        """
        outcome = await self.settle()
        if outcome is not None and outcome.status == "compacted":
            return True
        if timing == "wait":
            return False
        if timing == "due":
            await self._compact()
            return True
        agent, compactor = self._agent, self._engine.compactor
        action, priced = compactor.price(
            threshold_tokens=timing_of(agent).threshold(window), keep_tokens=agent.keep_tokens
        )
        _log.debug(
            "session %s: %s (expected %s against %s, cache %s)",
            *(self._engine.session.id, action, priced.expected, priced.expected_nothing, priced.cache),
        )
        if (decision := timing_of(agent).pays(action, priced)) is not None:
            await self._compact(decision=decision)
            return True
        return False

    async def settle(self) -> CompactionOutcome | None:
        """Wait for a running background compaction, then apply the prepared one (`/compact` and a due context).

        Returns:
            The outcome of applying it (or of discarding it: `not_enough_freed`); None when none was prepared.
        """
        if self._task is not None:  # its own failure or cancellation is not this caller's
            await asyncio.wait({self._task})
        self._log_ready(force=True)
        prepared = self._engine.compactor.prepared.pending()
        if prepared is None:
            return None
        outcome = self._engine.compactor.prepared.apply(prepared)
        kind: Literal["applied", "discarded"] = "applied" if outcome.status == "compacted" else "discarded"
        self._emit(BackgroundCompaction(kind, prepared.trigger, outcome.message))
        return outcome

    def turn_ended(self) -> None:
        """At a turn's end: log a result made meanwhile, start a compaction the next turn needs, watch for idleness."""
        self._turn_running = False
        self._log_ready()
        if (
            not self._agent.background_compaction
            or self.running
            or self._engine.compactor.prepared.pending() is not None
        ):
            return
        if (decision := self._wanted(idle=False)) is not None:
            self._start("threshold", decision[1])
        else:
            self._idle = asyncio.get_running_loop().create_task(self._watch_idle())

    def close(self) -> None:
        """Stop what runs in the background (a result not yet logged is lost: the next turn compacts again)."""
        self._stop_idle()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _wanted(self, *, idle: bool) -> tuple[bool, CostDecision | None] | None:
        """Whether to compact now: (True, its decision) when due or when the cost model says it pays; else None."""
        agent = self._agent
        if _backend_compacts(agent):
            return None
        compactor = self._engine.compactor
        window, keep, _ = limits_of(agent)
        tokens = compactor.calibrated_context_tokens()
        grown = 0 if idle or self._tokens_at_start is None else max(0, tokens - self._tokens_at_start)
        timing = timing_of(agent).before_turn(tokens + grown, window)  # as the next turn will find it
        if timing == "due":
            return True, None
        if timing == "wait":
            return None
        action, priced = compactor.price(threshold_tokens=timing_of(agent).threshold(window), keep_tokens=keep)
        decision = timing_of(agent).pays(action, priced)
        return (True, decision) if decision is not None else None

    def _start(self, trigger: Trigger, decision: CostDecision | None) -> None:
        session = self._engine.session
        claims = session if isinstance(session, CompactionClaims) else None
        if claims is not None and not claims.claim_compaction(_CLAIM_SECONDS):
            _log.info("session %s: another host is compacting it; not compacting here", session.id)
            return
        self._emit(BackgroundCompaction("started", trigger, "compacting in the background"))
        self._task = asyncio.get_running_loop().create_task(self._prepare(trigger, decision, claims))

    async def _prepare(self, trigger: Trigger, decision: CostDecision | None, claims: CompactionClaims | None) -> None:
        session = self._engine.session
        _, keep, lane = limits_of(self._agent)
        try:
            made = await self._engine.compactor.prepared.prepare(
                summariser_of(self._agent, self._warming),
                trigger=trigger,
                keep_tokens=keep,
                user_lane_tokens=lane,
                decision=decision,
            )
        except Exception as exc:  # the next turn compacts as it would have: nothing is lost
            _log.warning("session %s: background compaction failed: %s", session.id, exc, exc_info=True)
            self._emit(BackgroundCompaction("discarded", trigger, f"background compaction failed: {exc}"))
            return
        finally:
            if claims is not None:
                claims.release_compaction()
        if isinstance(made, CompactionOutcome):
            self._emit(BackgroundCompaction("discarded", trigger, made.message))
            return
        self._ready = made
        self._log_ready()

    def _log_ready(self, *, force: bool = False) -> None:
        """Log the prepared compaction made meanwhile, between turns (or at once when `force`: between model calls)."""
        ready = self._ready
        if ready is None or (self._turn_running and not force):
            return
        self._ready = None
        if self._closed():
            return
        logged = self._engine.compactor.prepared.record(ready)
        tokens = f"{logged.boundary.tokens_before:,} → {logged.boundary.tokens_after:,} tokens"
        self._emit(BackgroundCompaction("ready", logged.trigger, f"compaction ready ({tokens})"))

    async def _watch_idle(self) -> None:
        """Once the cache has gone cold (the cost model's clock), compact when it pays: no rewrite is lost then."""
        compactor = self._engine.compactor
        expires = self._warming.expires_in()  # the last turn's TTL, the long one where the cost model chose it
        if expires is None:
            return
        await asyncio.sleep(expires)
        await asyncio.sleep(_COLD_MARGIN)
        if self._turn_running or self.running or self._closed() or compactor.prepared.pending() is not None:
            return
        outlook = compactor.outlook()
        if outlook.cache.label(outlook.prices) != "cold":
            return
        if (wanted := self._wanted(idle=True)) is not None:
            self._start("idle", wanted[1])

    def _stop_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
