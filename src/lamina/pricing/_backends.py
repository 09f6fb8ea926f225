"""Which compaction backend writes the summary: Lamina's summariser or the provider's own compaction, priced (pure).

Both read the summarised history once, fresh (base price), and write a summary that every later
request carries. They differ in what else they cost: Lamina's request carries its template, the
previous summary and the ledger; a provider's block must come first in the conversation, so on
Anthropic the stable context after it is written again at each compaction. Ties go to Lamina's
own (its summary is readable and moves to any provider). Described in docs/compaction.md.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

from lamina.pricing._cost import Outlook
from lamina.session import CostDecision

CompactionBackend: TypeAlias = Literal["lamina", "server"]
"""Who writes a compaction's summary: Lamina's summariser, or the provider's own compaction."""
_OUTPUT_PRICE: Final = 5.0
"""An output token in base-price input tokens (as `_cost` prices a summary)."""


def price_compaction_backend(
    outlook: Outlook,
    *,
    summarised_tokens: int,
    lamina_prompt_tokens: int,
    lamina_summary_tokens: int,
    server_summary_tokens: int,
    server_rewrite_tokens: int = 0,
) -> tuple[CompactionBackend, CostDecision]:
    """The backend whose compaction is expected to cost less over the rest of the session.

    Each bill: the summarising call (what it reads at the base price, the summary as output), the
    summary's write into the cache, and the summary carried by every later call
    (`Outlook.per_token_later`). The decision's `expected` is the chosen bill, `expected_nothing`
    the other's, so the choice is never worse than the other on this estimate.

    Args:
        outlook: The prices, the pace and the cache's state.
        summarised_tokens: The history the compaction summarises (both backends read it).
        lamina_prompt_tokens: What Lamina's summary request adds: its template, the previous summary, the ledger.
        lamina_summary_tokens: The size of Lamina's summary (an estimate before it is written).
        server_summary_tokens: The size of the provider's block (an estimate: the last one's, else Lamina's).
        server_rewrite_tokens: What the provider's block makes the next request write again besides
            itself (on Anthropic, the stable context that must follow the block).

    Returns:
        `lamina` or `server`, and the decision (`action`: `lamina_compaction` or `server_compaction`).
    """
    p = outlook.prices
    later = outlook.per_token_later()
    write = p.write_5m - p.read
    lamina = summarised_tokens + lamina_prompt_tokens + lamina_summary_tokens * (_OUTPUT_PRICE + write + later)
    server = summarised_tokens + server_summary_tokens * (_OUTPUT_PRICE + write + later) + server_rewrite_tokens * write
    chosen: CompactionBackend = "server" if server < lamina else "lamina"
    mine, other = (server, lamina) if chosen == "server" else (lamina, server)
    decision = CostDecision(
        action=f"{chosen}_compaction",
        expected=round(mine, 1),
        expected_nothing=round(other, 1),
        horizon=round(outlook.pace.requests_left),
        cache=outlook.cache.label(p),
    )
    return chosen, decision
