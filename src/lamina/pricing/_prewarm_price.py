"""Whether a pre-warm pays: a request that writes the prefix the next turn reads, priced against waiting (pure).

Without a pre-warm, the next turn's first request reads what the cache still holds when it comes
and writes the rest. A pre-warm reads the warm part and writes the cold part now, under a fresh
TTL; the next request then reads the whole prefix if it comes within that TTL, else writes it all
again. It pays when the expected bill with it is lower: before a warm prefix expires (a read now
saves a rewrite later), rarely right after a compaction (the write is made either way; a pre-warm
only moves it off the user's time). Described in docs/compaction.md ("Pre-warm").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lamina.pricing._cost import Outlook
from lamina.session import CostDecision


@dataclass(frozen=True, slots=True, kw_only=True)
class PrewarmCall:
    """The prefix a pre-warm would write, in tokens, and how long what is cached of it still lives."""

    warm_tokens: int
    """Of the prefix, what the cache holds now (read by the pre-warm, or by the next request while it lives)."""
    cold_tokens: int
    """Of the prefix, what the cache does not hold (written by the pre-warm, or by the next request)."""
    warm_left: float
    """Seconds until the warm part expires if nothing reads it."""
    ttl_seconds: float
    """The TTL the pre-warm writes under (the next request reads the whole prefix within it)."""
    write_price: float
    """The price of a written token under that TTL, in base-price tokens."""


def _later(outlook: Outlook, seconds: float) -> float:
    """The chance that the next request comes more than `seconds` from now, the idle time so far given."""
    pace, idle = outlook.pace, outlook.cache.idle_seconds or 0.0
    still = pace.chance_longer(idle)
    return pace.chance_longer(idle + seconds) / still if still > 0 else 0.0


def price_prewarm(outlook: Outlook, call: PrewarmCall) -> tuple[Literal["prewarm", "wait"], CostDecision]:
    """Whether a pre-warm now is expected to cost less than letting the next request write the prefix.

    With `W` warm and `C` cold tokens, `P(s)` the chance that the next request comes after `s`
    seconds (from the session's gaps, given the idle time so far), `r` the read and `w` the write
    price:

        without = W x (r + P(warm_left) x (w - r)) + C x w
        with    = W x r + C x w_ttl + (W + C) x (r + P(ttl) x (w - r))

    The decision's `expected` is the chosen bill (`prewarm` or `wait`), `expected_nothing` the other.
    """
    p = outlook.prices
    r, w = p.read, p.write_5m
    warm, cold = call.warm_tokens, call.cold_tokens
    without = warm * (r + _later(outlook, call.warm_left) * (w - r)) + cold * w
    with_it = warm * r + cold * call.write_price + (warm + cold) * (r + _later(outlook, call.ttl_seconds) * (w - r))
    action: Literal["prewarm", "wait"] = "prewarm" if with_it < without else "wait"
    mine, other = (with_it, without) if action == "prewarm" else (without, with_it)
    return action, CostDecision(
        action="prewarm" if action == "prewarm" else "no_prewarm",
        expected=round(mine, 1),
        expected_nothing=round(other, 1),
        horizon=1,
        cache=outlook.cache.label(p),
    )
