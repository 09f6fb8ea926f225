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
