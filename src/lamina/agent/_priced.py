"""Before a turn: the engine decides with the provider's prices, and compacts when due or when it pays (I/O: the log).

At the threshold (the context window less the reserve) a compaction is due, as always; in the
band below it, the cost model says whether compacting now beats waiting (it does after a gap
that left the cache cold, on a long history), and the boundary records that decision.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Literal

from lamina.compaction import should_compact
from lamina.engine import CompactionOutcome, ContextEngine
from lamina.placement import SdkManagedTarget
from lamina.pricing import CachePrices
from lamina.providers import Provider
from lamina.session import CostDecision

DEFAULT_COMPACTION_BAND: Final = 0.75
"""From this fraction of the compaction threshold on, the agent asks the cost model before each turn."""

_log = logging.getLogger("lamina.compaction")


class PricedCompaction:
    """The agent's methods that keep the engine's cost model on the session's provider (a mixin of `Agent`)."""

    engine: ContextEngine
    provider: Provider
    compaction_reserve: int
    compaction_band: float | None
    cache_prices: CachePrices | None
    keep_tokens: int

    if TYPE_CHECKING:

        async def compact(
            self,
            focus: str | None = None,
            *,
            trigger: Literal["manual", "threshold", "overflow"] = "manual",
            plan_id: str | None = None,
            force: bool = False,
            decision: CostDecision | None = None,
        ) -> CompactionOutcome: ...

    def _follow_provider_prices(self) -> None:
        """The engine decides with `cache_prices`, else with the prices of the provider the agent runs on now."""
        given = self.cache_prices  # else the provider's, read each turn: `/model` may have switched it
        self.engine.cache_prices = given if given is not None else CachePrices.for_target(self.provider.target)

    def _threshold(self) -> int:
        """The context's tokens above which a compaction is due."""
        return self.provider.capabilities.context_window - self.compaction_reserve

    def _over_threshold(self, tokens: int | None = None) -> bool:
        """Whether the context (`tokens`, counted now unless given) is over the threshold: a compaction is due."""
        tokens = self.engine.calibrated_context_tokens() if tokens is None else tokens
        window = self.provider.capabilities.context_window
        return should_compact(tokens, context_window=window, reserve=self.compaction_reserve)

    async def _compact_before_turn(self) -> None:
        """Compact before a turn when due (over the threshold), or in the band below it when the cost model says so."""
        self._follow_provider_prices()
        tokens = self.engine.calibrated_context_tokens()  # counted once: the stable parts and tools are counted too
        if self._over_threshold(tokens):
            await self.compact(trigger="threshold")
            return
        decision = self._priced_decision(tokens)
        if decision is not None:
            await self.compact(trigger="threshold", decision=decision)

    def _priced_decision(self, tokens: int) -> CostDecision | None:
        """The decision to compact a context of `tokens` now, in the band (None: outside it, off, or waiting pays)."""
        band, threshold = self.compaction_band, self._threshold()
        if band is None or isinstance(self.provider.target, SdkManagedTarget):  # that backend compacts its own
            return None
        if tokens < band * threshold:
            return None
        action, decision = self.engine.price_compaction(threshold_tokens=threshold, keep_tokens=self.keep_tokens)
        _log.debug(
            "session %s: %s (expected %s against %s, cache %s)",
            self.engine.session.id,
            action,
            decision.expected,
            decision.expected_nothing,
            decision.cache,
        )
        return decision if action == "compact" else None
