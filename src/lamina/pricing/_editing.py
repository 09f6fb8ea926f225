"""The provider's context editing as options of the cost model: Lamina's prune, the server's clearing, nothing (pure).

Anthropic's `clear_tool_uses` clears the oldest tool uses server-side, a contiguous run, with the same
cache consequence as Lamina's prune (the prompt changes from the first cleared result on). Each prune
decision prices the three and takes the cheapest; `clear_thinking` is priced from the reasoning
replay's choice. Described in docs/providers.md ("Context editing").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from lamina.pricing._cost import Outlook, PruneItem, _item_value, _mean_chance, price_prune
from lamina.session import CostDecision

__all__ = ["ContextEditing", "PruneChoice", "choose_prune_option", "price_server_clearing"]

ContextEditing: TypeAlias = Literal["priced", "lamina", "server", "off"]
"""Which prune a session makes: the cheapest (`priced`), only Lamina's (`lamina`), the server's where the
model has it (`server`), or none of the provider's context editing at all (`off`: no edit is sent)."""

PruneOption: TypeAlias = Literal["lamina", "server", "nothing"]

SERVER_PLACEHOLDER_TOKENS: Final = 8
"""Tokens of the placeholder a cleared result shows (a few words, against Lamina's note naming the call)."""


@dataclass(frozen=True, slots=True)
class PruneChoice:
    """What a prune decision chose: whose prune, which results, the server's guard, and the figures."""

    option: PruneOption
    call_ids: tuple[str, ...]
    """The results pruned (Lamina) or cleared (the server: every tool use up to the newest of them)."""
    decision: CostDecision
    clear_at_least: int = 0
    """For the server: the fewest tokens its clearing must free to pay the cache write it causes."""
    freed: int = 0
    """Tokens the prune frees, as estimated."""


def price_server_clearing(
    items: list[PruneItem], outlook: Outlook, *, minimum_tokens: int = 0, placeholder_tokens: int = 0
) -> tuple[int, float, int]:
    """How many of `items` the server should clear (its oldest ones: a prefix), the saving, and `clear_at_least`.

    The server clears from the oldest result on, every one up to where it stops, whatever its
    chance of being needed again, and shows each as a short placeholder. The cache is written
    again from the first cleared result (what it still held from there, as for Lamina's prune).
    Every stop is tried; the best saving wins, none (0) when nothing saves.

    `clear_at_least` is the break-even: the fewest freed tokens whose saving (written now, read and
    written again later) pays that rewrite, never above what the chosen run frees, so the server
    clears only when its own count agrees the clearing pays.

    Args:
        items: The results the server may clear, oldest first (after the ones it already clears).
        outlook: The prices, the pace and the cache's state.
        minimum_tokens: The clearing frees at least this many tokens (the policy's floor).
        placeholder_tokens: Tokens of what a cleared result shows.

    Returns:
        The number of items to clear (0: none), the expected saving, and `clear_at_least`.
    """
    if not items:
        return 0, 0.0, 0
    p = outlook.prices
    later = outlook.per_token_later()
    rewrite = max(0, items[0].suffix_tokens - outlook.cache.cold_tokens(p)) * (p.write_5m - p.read)
    gain, freed = 0.0, 0
    best_count, best_saving, best_freed = 0, 0.0, 0
    for count, item in enumerate(items, start=1):
        freed_here = max(0, item.tokens - placeholder_tokens)
        cleared = PruneItem(item.call_id, item.suffix_tokens, item.tokens, freed_here, item.reread_chance)
        gain += _item_value(cleared, outlook, later)
        freed += cleared.freed
        saving = gain - rewrite
        if freed >= minimum_tokens and saving > best_saving:
            best_count, best_saving, best_freed = count, saving, freed
    if not best_count:
        return 0, 0.0, 0
    per_token = p.write_5m + later
    at_least = min(best_freed, max(1, math.ceil(rewrite / per_token)))
    return best_count, best_saving, at_least


def choose_prune_option(
    items: list[PruneItem],
    outlook: Outlook,
    *,
    minimum_tokens: int = 0,
    server_items: list[PruneItem] | None = None,
    placeholder_tokens: int = SERVER_PLACEHOLDER_TOKENS,
    mode: ContextEditing = "priced",
) -> PruneChoice:
    """The cheapest of Lamina's prune, the server's `clear_tool_uses` and doing nothing, on one estimate.

    Lamina's prune is priced as ever (`price_prune`: the results worth taking, from the start
    that pays best); the server's clearing by `price_server_clearing` on `server_items` (None: the
    model has no context editing, or `mode` rules it out). Doing nothing saves nothing, so the
    choice is never worse than doing nothing on this estimate; a tie goes to Lamina's prune, then
    to nothing. `mode` `server` prefers the server's clearing whenever it saves; `lamina` and `off`
    never price it.

    Args:
        items: The results the policy allows Lamina to prune, oldest first.
        outlook: The prices, the pace and the cache's state.
        minimum_tokens: A prune frees at least this many tokens (the policy's floor).
        server_items: The results the server's clearing would take, oldest first (a contiguous run).
        placeholder_tokens: Tokens of the server's placeholder for a cleared result.
        mode: The session's setting (`ContextEditing`).

    Returns:
        The choice, with the decision to log.
    """
    ids, lamina = price_prune(items, outlook, minimum_tokens=minimum_tokens)
    lamina_saving = lamina.expected_nothing - lamina.expected if ids else 0.0
    server = server_items if server_items is not None and mode in ("priced", "server") else []
    count, server_saving, at_least = price_server_clearing(
        server, outlook, minimum_tokens=minimum_tokens, placeholder_tokens=placeholder_tokens
    )
    if count and (server_saving > lamina_saving or (mode == "server" and server_saving > 0)):
        taken = server[:count]
        decision = outlook.decision("clear_tool_uses", server_saving, reread=_mean_chance(taken))
        freed = sum(max(0, it.tokens - placeholder_tokens) for it in taken)
        return PruneChoice("server", tuple(it.call_id for it in taken), decision, at_least, freed)
    if ids:
        picked = set(ids)
        freed = sum(it.freed for it in items if it.call_id in picked)
        return PruneChoice("lamina", tuple(ids), lamina, freed=freed)
    return PruneChoice("nothing", (), lamina)
