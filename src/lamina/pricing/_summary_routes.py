"""How a compaction's summarising call goes: a fresh request, on the session's cached prefix, or the server's (pure).

A fresh request reads the summarised history again at the base price; a request on the cache
sends the session's own request (its system, tools and messages, byte for byte) with the summary
instruction at its end, so it reads what the cache holds at the read price; the provider's own
compaction reads the history fresh too. Each is priced with what its summary costs later, and the
cheapest is taken. Described in docs/compaction.md ("Summarising on the cache").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from lamina.pricing._cost import Outlook
from lamina.session import CostDecision

SummaryRoute: TypeAlias = Literal["fresh", "cached", "server"]
"""How the summarising call goes: a fresh request, a request on the session's cached prefix, the provider's own."""
_OUTPUT_PRICE: Final = 5.0
"""An output token in base-price input tokens (as `_cost` prices a summary)."""
_ACTIONS: Final[dict[SummaryRoute, str]] = {
    "fresh": "lamina_compaction",
    "cached": "lamina_cached_compaction",
    "server": "server_compaction",
}
_NAMES: Final[dict[SummaryRoute, str]] = {"fresh": "fresh", "cached": "on the cache", "server": "server"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryCall:
    """What a compaction's summarising call reads and writes by each route it can take, in tokens."""

    fresh_tokens: int
    """The input of a fresh request: the summarised history as data, the template, the previous summary, the ledger."""
    summary_tokens: int
    """The summary Lamina's summariser writes (an estimate before it is written)."""
    cached_tokens: int | None = None
    """The session's cached prefix a request on the cache reads again (None: no such route)."""
    cached_new_tokens: int = 0
    """What a request on the cache adds after the prefix (the newest answer, the instruction): written."""
    server_tokens: int | None = None
    """The input of the provider's own compaction (None: the model has none Lamina sends, or it is not wanted)."""
    server_summary_tokens: int = 0
    """The provider's block (an estimate: the last one's, else Lamina's summary's)."""
    server_rewrite_tokens: int = 0
    """What the provider's block makes the next request write again besides itself (on Anthropic, the stable
    context that must follow the block)."""


def call_prices(outlook: Outlook, call: SummaryCall) -> dict[SummaryRoute, float]:
    """What the summarising call itself costs by each route `call` has, in base-price tokens.

    Its input (fresh and server: at the base price; on the cache: what the cache still holds at
    the read price, the rest and what the request adds at the write price) and its summary as output.
    """
    p = outlook.prices
    prices: dict[SummaryRoute, float] = {"fresh": call.fresh_tokens + call.summary_tokens * _OUTPUT_PRICE}
    if call.cached_tokens is not None:
        cold = min(call.cached_tokens, outlook.cache.cold_tokens(p))
        read = (call.cached_tokens - cold) * p.read + (cold + call.cached_new_tokens) * p.write_5m
        prices["cached"] = read + call.summary_tokens * _OUTPUT_PRICE
    if call.server_tokens is not None:
        prices["server"] = call.server_tokens + call.server_summary_tokens * _OUTPUT_PRICE
    return prices


def route_bills(outlook: Outlook, call: SummaryCall) -> dict[SummaryRoute, float]:
    """The expected bill of each route over the rest of the session, in base-price tokens.

    The call's own price (`call_prices`), then the summary's write into the cache and its read by
    every later call (`Outlook.per_token_later`), and what a server block makes the next request
    write again.
    """
    later = outlook.prices.write_5m - outlook.prices.read + outlook.per_token_later()
    bills = call_prices(outlook, call)
    for route in bills:
        summary = call.server_summary_tokens if route == "server" else call.summary_tokens
        bills[route] += summary * later
    if "server" in bills:
        bills["server"] += call.server_rewrite_tokens * (outlook.prices.write_5m - outlook.prices.read)
    return bills


def price_summary_call(outlook: Outlook, call: SummaryCall) -> tuple[SummaryRoute, CostDecision]:
    """The cheapest route for a compaction's summarising call, and the decision to log.

    Ties go to the fresh request, then to the cache (a fresh request depends on no cache; Lamina's
    summary is readable and moves to any provider). The decision's `expected` is the chosen route's
    bill over the rest of the session, `expected_nothing` the next cheapest's (the chosen one's when
    it is the only route), and its `reason` names each route's summarising call and its own price,
    cheapest first, so the choice is never worse than another on this estimate.
    """
    bills = route_bills(outlook, call)
    prices = call_prices(outlook, call)
    order: tuple[SummaryRoute, ...] = ("fresh", "cached", "server")
    ranked = sorted(bills, key=lambda r: (bills[r], order.index(r)))
    chosen = ranked[0]
    other = bills[ranked[1]] if len(ranked) > 1 else bills[chosen]
    return chosen, CostDecision(
        action=_ACTIONS[chosen],
        expected=round(bills[chosen], 1),
        expected_nothing=round(other, 1),
        horizon=round(outlook.pace.requests_left),
        cache=outlook.cache.label(outlook.prices),
        reason="summarising call " + ", ".join(f"{_NAMES[r]} {prices[r]:,.0f}" for r in ranked),
    )
