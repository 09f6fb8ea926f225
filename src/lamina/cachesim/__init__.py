"""Prompt-cache simulator: what each request reads, writes and pays under a provider's published cache rules (pure).

Feed timed request bodies to `AnthropicCacheSimulator`, `OpenAICacheSimulator` (OpenAI before
GPT-5.6) or `OpenAIBreakpointSimulator` (GPT-5.6 and later), or a list to `simulate`; each
`submit` returns a `CacheUsage`, and `summarise` folds a run into a `CacheSummary`. The rules as
modelled, and what is not, are in `docs/cache-simulator.md`.
"""

from __future__ import annotations

from lamina.cachesim._anthropic_cache import AnthropicCacheRules, AnthropicCacheSimulator
from lamina.cachesim._cache_blocks import (
    message_items,
    openai_item,
    openai_message,
    system_items,
    text_block,
    tool_items,
    without_marker,
)
from lamina.cachesim._miss import (
    CacheMissPredictor,
    Divergence,
    MissFormat,
    cache_held,
    find_divergence,
    settle_miss,
)
from lamina.cachesim._openai_breakpoints import OpenAIBreakpointRules, OpenAIBreakpointSimulator
from lamina.cachesim._openai_cache import OpenAICacheRules, OpenAICacheSimulator
from lamina.cachesim._simulator import (
    CacheBreakpointError,
    CacheSimulationError,
    CacheSimulator,
    CacheSummary,
    CacheUsage,
    TimedRequest,
    simulate,
    summarise,
)

__all__ = [
    "AnthropicCacheRules",
    "AnthropicCacheSimulator",
    "CacheBreakpointError",
    "CacheMissPredictor",
    "CacheSimulationError",
    "CacheSimulator",
    "CacheSummary",
    "CacheUsage",
    "Divergence",
    "MissFormat",
    "OpenAIBreakpointRules",
    "OpenAIBreakpointSimulator",
    "OpenAICacheRules",
    "OpenAICacheSimulator",
    "TimedRequest",
    "cache_held",
    "find_divergence",
    "message_items",
    "openai_item",
    "openai_message",
    "settle_miss",
    "simulate",
    "summarise",
    "system_items",
    "text_block",
    "tool_items",
    "without_marker",
]
