"""Pricing: the cost model, the session's pace it reads, and the models' list prices (pure).

The cost model (`_cost`) prices a context decision (a prune, a compaction, a turn's TTL) by its
expected bill in base-price tokens over the likely rest of the session, from a provider's cache
prices (`CachePrices`), the session's pace (`PaceTracker` folds it from the log) and the cache's
state; docs/compaction.md ("The cost model") tells it. `_editing` adds the provider's context editing
as an option of a prune (docs/providers.md, "Context editing"). The list prices (`_prices`: `PRICES`,
`cost_of`) put a turn's usage in US dollars for the CLI and the inspector.
"""

from __future__ import annotations

from lamina.pricing._backends import CompactionBackend, price_compaction_backend
from lamina.pricing._cost import (
    DEFAULT_PRICES,
    CachePrices,
    CacheState,
    DecisionOn,
    Outlook,
    PruneItem,
    SessionPace,
    choose_turn_ttl,
    decision_on,
    decisions_on,
    describe_decision,
    kept_default_ttl,
    price_compaction,
    price_prune,
    price_reasoning_replay,
)
from lamina.pricing._deferral_price import DeferralPrice, ToolChangePrice, price_deferral, price_tool_change
from lamina.pricing._editing import ContextEditing, PruneChoice, choose_prune_option
from lamina.pricing._pace import PaceTracker
from lamina.pricing._prewarm_price import PrewarmCall, price_prewarm
from lamina.pricing._prices import cost_of
from lamina.pricing._summary_routes import SummaryCall, SummaryRoute, call_prices, price_summary_call

__all__ = [
    "DEFAULT_PRICES",
    "CachePrices",
    "CacheState",
    "CompactionBackend",
    "ContextEditing",
    "DecisionOn",
    "DeferralPrice",
    "Outlook",
    "PaceTracker",
    "PrewarmCall",
    "PruneChoice",
    "PruneItem",
    "SessionPace",
    "SummaryCall",
    "SummaryRoute",
    "ToolChangePrice",
    "call_prices",
    "choose_prune_option",
    "choose_turn_ttl",
    "cost_of",
    "decision_on",
    "decisions_on",
    "describe_decision",
    "kept_default_ttl",
    "price_compaction",
    "price_compaction_backend",
    "price_deferral",
    "price_prewarm",
    "price_prune",
    "price_reasoning_replay",
    "price_summary_call",
    "price_tool_change",
]
