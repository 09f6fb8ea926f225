"""Prompt-cache simulator: what each request reads, writes and pays under a provider's published cache rules (pure).

Feed timed request bodies one at a time to `AnthropicCacheSimulator` or `OpenAICacheSimulator`
(or a whole list to `simulate`); each `submit` returns a `CacheUsage`, and `summarise` folds a run
into a `CacheSummary`. This is how placement quality becomes a number. Nothing here reads a clock:
every time is a field of `TimedRequest` (seconds, any origin), and requests must arrive in
non-decreasing `t_start` order. One simulator instance is one cache namespace (an Anthropic
workspace, an OpenAI organisation).

Blocks. A body is flattened into content blocks: tool definitions, then system blocks, then the
content blocks of each message (a string `content` is one text block). A block's identity is its
role plus its canonical JSON (sorted keys, without `cache_control`, so moving a breakpoint never
changes identity); its token count is the estimator's count of that canonical text. Messages,
blocks and prefix hashes are memoised by canonical bytes per simulator instance, so a long session
costs little more than encoding each request once (memory grows with the distinct content seen).

Anthropic Messages rules (`AnthropicCacheRules` holds the numbers):

- The prefix is hashed block by block in the order tools → system → messages, so a changed tool
  invalidates everything after it. Level salts stand in for settings outside the blocks: `speed`
  is mixed in before the system blocks; `tool_choice`, `thinking`, `output_config.effort` and
  "an image is present" before the messages.
- Breakpoints are the blocks carrying `cache_control`, plus the last cacheable block when the
  body has a top-level `cache_control` (automatic caching). At most 4; 1h breakpoints must come
  before 5m ones; `ttl` is "5m" (default) or "1h"; thinking blocks and empty text blocks cannot
  carry one. Anything else raises `CacheBreakpointError`, where the API would answer HTTP 400.
  Only block-level markers count: a marker nested inside a tool_result's content is ignored (and
  stripped from identity).
- Reads: from each breakpoint the simulator walks back at most `lookback` (20) positions,
  counting the breakpoint itself, and stops at the first live entry. One position is one block,
  except that a run of consecutive `tool_use` blocks, or of `tool_result` blocks, is one position
  (the current rule; `group_tool_runs=False` gives the older one, one block per position).
  `A` is the longest prefix found; every entry found is refreshed for its own TTL.
- Writes happen only at breakpoints past `A` whose cumulative prefix reaches `min_tokens`. An entry
  lives from the writing request's `t_start` for its TTL and can be read only from the writer's
  `t_first_byte` on (parallel requests do not see each other's writes).
- Billing (the mixed-TTL rule): with `B` the last 1h breakpoint written (else `A`) and `C` the last
  breakpoint written (else `A`): read = A, write_1h = B − A, write_5m = C − B, uncached = total − C.

OpenAI rules (before GPT-5.6; `OpenAICacheRules`): Chat Completions bodies (`messages`) and
Responses bodies (`instructions` + `input`), with `tools` and the output schema first. Caching is
automatic: every prompt of at least `min_tokens` (1024) tokens is stored, partitioned by
(`model`, `prompt_cache_key`), for free. A later prompt's cached tokens are its longest common
prefix L with a live stored prompt, rounded down to 1024 + 128·k (0 when L < 1024). The common
prefix is taken at block granularity: a block that differs contributes nothing. Entries expire
after `idle_ttl_seconds` without use and at most `max_ttl_seconds` after creation, and are readable
from the storing request's first byte. Deterministic: no routing overflow, no random early
eviction. Reads cost `read_multiplier` (0.1 for the gpt-5 family; set 0.5 for gpt-4o, 0.25 for
gpt-4.1); writes are free and reported as 0.

Reusable tokens. `CacheUsage.reusable` measures what a perfect placement could have read, so that
a placement putting per-turn content before the history scores low: it is the sum of tokens of
this request's blocks whose (role, canonical content) occurred in some earlier request j that is
still inside that block's window in j, each block of this request counted at most once. The
window is per block: for Anthropic it runs from j's `t_start` for the longest TTL among the
entries j wrote or read at or after that block (an entry covers every block before it), and for
300 s (one 5-minute entry a perfect placement would write) when there is none; for OpenAI it is
the idle TTL. So a 1-hour entry on the system prompt keeps the system blocks reusable for an hour
but not the 5-minute history after it. `cache_efficiency` = read / reusable.

The code lives in `_cache_core` (requests, usage, the shared block ledger), `_cache_anthropic`
and `_cache_openai`; this module is the public face.

Not modelled: per-model thinking-block stripping, server tools' automatic writes, batch discounts,
routing overflow, OpenAI's GPT-5.6 explicit-breakpoint regime, Gemini and DeepSeek.
"""

from __future__ import annotations

from lamina.cachesim._anthropic import AnthropicCacheRules, AnthropicCacheSimulator
from lamina.cachesim._blocks import (
    message_items,
    openai_item,
    openai_message,
    system_items,
    text_block,
    tool_items,
    without_marker,
)
from lamina.cachesim._core import (
    CacheBreakpointError,
    CacheSimulationError,
    CacheSimulator,
    CacheSummary,
    CacheTtl,
    CacheUsage,
    TimedRequest,
    simulate,
    summarise,
)
from lamina.cachesim._openai import OpenAICacheRules, OpenAICacheSimulator

__all__ = [
    "AnthropicCacheRules",
    "AnthropicCacheSimulator",
    "CacheBreakpointError",
    "CacheSimulationError",
    "CacheSimulator",
    "CacheSummary",
    "CacheTtl",
    "CacheUsage",
    "OpenAICacheRules",
    "OpenAICacheSimulator",
    "TimedRequest",
    "message_items",
    "openai_item",
    "openai_message",
    "simulate",
    "summarise",
    "system_items",
    "text_block",
    "tool_items",
    "without_marker",
]
