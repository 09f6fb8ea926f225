"""Deferred tools priced: the schemas' tokens saved per request against the cache they cost (pure).

Sending every source tool's schema costs its tokens on every request (read from the cache, written
again on a cold start). Deferring them costs the stand-in (a tool-search tool, or Lamina's catalogue),
the schemas the model loads, each rewrite of the cached tail a load causes (Lamina's catalogue puts
a loaded schema in the `tools` array: everything after it is written again once), and, when the
choice changes the `tools` array of a session under way, one rewrite of its history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lamina.pricing._cost import Outlook


@dataclass(frozen=True, slots=True)
class DeferralPrice:
    """The expected bill, in base-price input tokens over the rest of the session, of each way to send source tools."""

    send_all: float
    """Every schema in every request."""
    deferred: float
    """The stand-in in every request, the loaded schemas and the rewrites they cause."""

    @property
    def defers(self) -> bool:
        """Whether deferring is expected to cost less (a tie keeps the schemas: nothing changes)."""
        return self.deferred < self.send_all


def price_deferral(
    outlook: Outlook,
    *,
    schema_tokens: int,
    stub_tokens: int,
    loaded_tokens: int = 0,
    rewrite_tokens: int = 0,
    current: Literal["all", "deferred"] = "all",
) -> DeferralPrice:
    """Price sending every source tool's schema against deferring them, from now on.

    Args:
        outlook: The prices, the session's pace and the cache's state.
        schema_tokens: The source tools' definitions, in tokens.
        stub_tokens: What deferring sends instead on every request (the search tool, the catalogue).
        loaded_tokens: The schemas the model is expected to load over the session.
        rewrite_tokens: The cached tokens each load writes again (0 where a load is appended in the tail).
        current: How the session sends them now: the other choice rewrites the history once.

    Returns:
        Both bills; `defers` says which is cheaper.
    """
    p = outlook.prices
    later = outlook.per_token_later()
    switch = outlook.cache.history_tokens * (p.write_5m - p.read)
    send_all = schema_tokens * (p.write_5m + later) + (switch if current == "deferred" else 0.0)
    deferred = (
        stub_tokens * (p.write_5m + later)
        + loaded_tokens * (p.write_5m + later / 2)  # loaded half way through the session, on average
        + rewrite_tokens * (p.write_5m - p.read)
        + (switch if current == "all" else 0.0)
    )
    return DeferralPrice(send_all=send_all, deferred=deferred)


@dataclass(frozen=True, slots=True)
class ToolChangePrice:
    """The expected bill, in base-price input tokens from now on, of the two ways to change the tool set mid-session."""

    rewrite: float
    """A new `tools` array: the cached history written again, then the new set in every request."""
    blocks: float
    """`tool_addition` / `tool_removal` blocks in the tail: the array kept, removed definitions still sent."""

    @property
    def keeps_cache(self) -> bool:
        """Whether the blocks are expected to cost no more than the rewrite (a tie keeps the cache)."""
        return self.blocks <= self.rewrite


def price_tool_change(
    outlook: Outlook, *, added_tokens: int, removed_tokens: int, block_tokens: int
) -> ToolChangePrice:
    """Price a change of the tool definitions sent as blocks against a rewrite of the `tools` array.

    Both bills count what the change adds over the session's requests as they are now. The rewrite
    writes the cached history again once, then sends the added definitions and saves the removed
    ones on every later request; the blocks rewrite nothing but stay in the history, with the
    added definitions inline, and the removed definitions stay in the `tools` array until the next
    compaction.

    Args:
        outlook: The prices, the session's pace and the cache's state.
        added_tokens: The definitions the change adds (a changed one counts as added and removed).
        removed_tokens: The definitions it removes.
        block_tokens: The blocks' own tokens besides the added definitions (the removals' references).

    Returns:
        Both bills; `keeps_cache` says whether the blocks are the choice.
    """
    p = outlook.prices
    later = outlook.per_token_later()
    rewrite = outlook.cache.history_tokens * (p.write_5m - p.read) + added_tokens * (p.write_5m + later)
    rewrite -= removed_tokens * later
    blocks = (added_tokens + block_tokens) * (p.write_5m + later)
    return ToolChangePrice(rewrite=rewrite, blocks=blocks)
