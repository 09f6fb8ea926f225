"""When the agent compacts: due at the threshold, and in the band below it when the cost model says it pays (pure).

At the threshold (the context window less the reserve) a compaction is due, as always; in the
band below it, the engine's cost model says whether compacting now beats waiting (it does after a
gap that left the cache cold, on a long history), and the boundary records that decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from lamina.compaction import DEFAULT_RESERVE, scaled_reserve, should_compact
from lamina.session import CostDecision

DEFAULT_COMPACTION_BAND: Final = 0.75
"""From this fraction of the compaction threshold on, the agent asks the cost model before each turn."""

Timing: TypeAlias = Literal["due", "price", "wait"]
"""Before a turn: compact (over the threshold), ask the cost model whether it pays (in the band), or wait."""


@dataclass(frozen=True, slots=True)
class CompactionTiming:
    """The agent's compaction policy, from numbers alone: due, worth pricing, or wait; and whether a price pays."""

    reserve: int = DEFAULT_RESERVE
    """Compact when the context is above the context window less this many tokens (the default scales down
    with a small window: `lamina.compaction.scaled_reserve`)."""
    band: float | None = DEFAULT_COMPACTION_BAND
    """From this fraction of the threshold on, a compaction is priced before each turn; None: only at the threshold."""

    def reserve_for(self, context_window: int) -> int:
        """The reserve for `context_window` (`lamina.compaction.scaled_reserve`: the default scales down)."""
        return scaled_reserve(self.reserve, context_window)

    def threshold(self, context_window: int) -> int:
        """The context's tokens above which a compaction is due."""
        return context_window - self.reserve_for(context_window)

    def due(self, tokens: int, context_window: int) -> bool:
        """Whether a context of `tokens` is over the threshold: a compaction is due.

        Raises:
            UsageError: `context_window` is not positive or the reserve is negative.
        """
        return should_compact(tokens, context_window=context_window, reserve=self.reserve_for(context_window))

    def before_turn(self, tokens: int, context_window: int, *, backend_compacts: bool = False) -> Timing:
        """What to do before a turn about a context of `tokens`.

        Args:
            tokens: The context's tokens, as the engine counts them calibrated.
            context_window: The model's context window.
            backend_compacts: The backend compacts its own session (SDK-managed): nothing is priced.

        Returns:
            `due` over the threshold; `price` in the band below it; `wait` otherwise.
        """
        if self.due(tokens, context_window):
            return "due"
        if self.band is None or backend_compacts or tokens < self.band * self.threshold(context_window):
            return "wait"
        return "price"

    @staticmethod
    def pays(action: Literal["compact", "wait"], decision: CostDecision) -> CostDecision | None:
        """The decision to compact with, when the cost model's `action` says compacting now pays; else None."""
        return decision if action == "compact" else None
