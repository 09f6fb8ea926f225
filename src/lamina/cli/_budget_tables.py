"""The tables `lamina context`, `lamina sessions budget` and `/context` share: tiers, classes (I/O: the console)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from lamina.cli._console import out, safe
from lamina.context import Part, Stability, Tier
from lamina.pricing import decisions_on, describe_decision, kept_default_ttl
from lamina.reports import TIER_LABELS, BudgetReport, CacheMissReport
from lamina.session import AssistantMessage, CostDecision, LogEntry
from lamina.tokens import DEFAULT_ESTIMATOR


def tier_label(tier: Tier) -> str:
    """A tier as the reports show it: its number and label."""
    return f"{tier.value} {TIER_LABELS[tier]}"


def part_tokens(part: Part) -> int:
    """The estimated tokens of a part's text."""
    return part.token_count(DEFAULT_ESTIMATOR)


def section(title: str, explanation: str, console: Console = out) -> None:
    """A report section's heading: a blank line, the title in bold, the explanation dimmed."""
    console.print()
    console.print(f"[bold]{title}[/bold]", highlight=False)
    console.print(f"[dim]{explanation}[/dim]", highlight=False)


def class_totals(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Parts and tokens per stability class, every class present, in `Stability` order."""
    rows: list[dict[str, Any]] = []
    for stability in Stability:
        chosen = [p for p in parts if p.stability is stability]
        rows.append({"class": stability.value, "parts": len(chosen), "tokens": sum(map(part_tokens, chosen))})
    return rows


def print_classes(parts: Sequence[Part], console: Console = out) -> None:
    """Everything the request carries (tool definitions and the conversation too) by stability class."""
    section(
        "Stability classes",
        "Every part of the request, tool definitions and conversation included: stable (cached prefix), volatile "
        "(this turn's tail), on_demand (skills, guides and documents the model read), one_shot (sent once), "
        "compactable (history, tool results and attached files, summarised by a compaction). Counted on each "
        "part's text (an image or PDF sent as media: the provider's estimate), as the budget is.",
        console,
    )
    table = Table(box=None)
    table.add_column("class", no_wrap=True)
    table.add_column("parts", justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    for row in class_totals(parts):
        table.add_row(row["class"], f"{row['parts']:,}", f"{row['tokens']:,}")
    console.print(table)


def print_budget(budget: BudgetReport, console: Console = out, *, note: str | None = None) -> None:
    """The budget by tier (also `/context` in `lamina chat`, for the live session's next request)."""
    section(
        "Budget by tier",
        "The context budget's priority order, rules first, one-shot parts last. Counted on the text of each part"
        + (note or "; the cache layout counts blocks as sent (JSON), so its total is a little higher."),
        console,
    )
    table = Table(box=None)
    table.add_column("tier", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("spent on", overflow="fold")
    for tier in budget.tiers:
        table.add_row(tier_label(tier.tier), f"{tier.tokens:,}", safe(", ".join(tier.items)))
        if tier.reasoning:  # the model's thinking replayed: a row of its own, inside its tier's tokens
            table.add_row("  of which reasoning", f"{tier.reasoning:,}", "the model's thinking and reasoning summaries")
    table.add_row("[bold]total[/bold]", f"[bold]{budget.total:,}[/bold]", "")
    console.print(table)


def budget_json(budget: BudgetReport) -> dict[str, Any]:
    """The budget by tier as `lamina context --json` and `lamina sessions budget --json` print it."""
    return {
        "tiers": [
            {
                "tier": int(t.tier),
                "name": TIER_LABELS[t.tier],
                "tokens": t.tokens,
                "items": t.items,
                "reasoning_tokens": t.reasoning,
            }
            for t in budget.tiers
        ],
        "total_tokens": budget.total,
    }


def decisions(entries: Sequence[LogEntry]) -> list[tuple[str, CostDecision]]:
    """The priced context decisions logged in `entries`: what they were on, and their figures, oldest first."""
    return [found for entry in entries for found in decisions_on(entry)]


def decisions_json(found: Sequence[tuple[str, CostDecision]]) -> list[dict[str, Any]]:
    """The decisions as `--json` prints them: what they were on, their figures, and in words."""
    return [{"on": on, **msgspec.to_builtins(d), "words": describe_decision(d)} for on, d in found]


def print_decisions(found: Sequence[tuple[str, CostDecision]], console: Console = out) -> None:
    """The prunes, TTLs and compactions the cost model decided, with the expected bills that decided them.

    Each compaction's backend (who wrote its summary) follows the table in words: it may have been
    chosen by a setting rather than by the figures.
    """
    backends = [d for on, d in found if on == "compaction backend"]
    found = [(on, d) for on, d in found if on != "compaction backend"]
    prunes = [(on, d) for on, d in found if not kept_default_ttl(on, d.action)]
    section(
        "Context decisions",
        f"{len(found):,} priced by their expected bill over the rest of the session (base-price tokens); "
        "turns that kept their provider's default turn TTL (1 hour on Anthropic, 30 minutes on OpenAI) are not listed.",
        console,
    )
    if prunes:
        console.print(_decision_table(prunes))
    for d in backends:
        console.print(f"compaction backend: {safe(describe_decision(d))}", highlight=False)


def _decision_table(prunes: Sequence[tuple[str, CostDecision]]) -> Table:
    table = Table(box=None)
    for column in ("on", "chosen", "expected", "doing nothing", "calls ahead", "cache", "re-read chance"):
        table.add_column(column, justify="right" if column not in ("on", "chosen", "cache") else "left", no_wrap=True)
    for on, d in prunes:
        table.add_row(
            on,
            d.action,
            f"{d.expected:,.0f}",
            f"{d.expected_nothing:,.0f}",
            str(d.horizon),
            d.cache,
            f"{d.reread_chance:.0%}",
        )
    return table


def misses_json(found: Sequence[tuple[AssistantMessage, CacheMissReport]]) -> list[dict[str, Any]]:
    """The calls that missed the cache as `--json` prints them: the call, the reason, its source, in words."""
    return [
        {
            "entry": call.id,
            "turn_id": call.turn_id,
            "reason": r.reason,
            "missed_tokens": r.missed_tokens,
            "at_entry": r.entry,
            "source": r.source,
            "agrees": r.agrees,
            "words": r.words,
        }
        for call, r in found
    ]


def print_misses(found: Sequence[tuple[AssistantMessage, CacheMissReport]], console: Console = out) -> None:
    """Why each turn missed the cache: the provider's diagnosis, else the simulator's prediction (marked)."""
    section(
        "Why turns missed the cache",
        f"{len(found):,} model calls read less than the call before them left cached. The provider's diagnosis "
        "where it gave one; '(predicted)': the cache simulator's, where it did not; 'agrees': both said the same.",
        console,
    )
    if not found:
        return
    table = Table(box=None)
    for column in ("call", "why", "agrees"):
        table.add_column(column, no_wrap=column != "why", overflow="fold")
    for call, r in found:
        agrees = "" if r.agrees is None else ("yes" if r.agrees else "no")
        table.add_row(safe(call.id), safe(r.words), agrees)
    console.print(table)
