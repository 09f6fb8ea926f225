"""Compaction's pure core: where to cut, the ledger that travels with a summary, and the summary itself.

A compaction prepares (pure: `find_cut_point`, `update_ledger`, `summary_prompt` or
`deterministic_summary`), summarises (a provider, elsewhere), appends a `CompactionBoundary`
and rebuilds the view. Nothing here touches disk, network or clock.
"""

from __future__ import annotations

from lamina.compaction.cut import CutPoint, entry_tokens, find_cut_point, freed_enough, should_compact
from lamina.compaction.ledger import (
    MAX_CONSTRAINTS,
    MAX_FILES,
    MAX_ITEM_CHARS,
    MAX_OPEN_TASKS,
    dropped_count,
    find_constraints,
    update_ledger,
)
from lamina.compaction.summary import (
    DEFAULT_MAX_SUMMARY_CHARS,
    StructuredSummary,
    deterministic_summary,
    parse_summary,
    summary_prompt,
)

__all__ = [
    "DEFAULT_MAX_SUMMARY_CHARS",
    "MAX_CONSTRAINTS",
    "MAX_FILES",
    "MAX_ITEM_CHARS",
    "MAX_OPEN_TASKS",
    "CutPoint",
    "StructuredSummary",
    "deterministic_summary",
    "dropped_count",
    "entry_tokens",
    "find_constraints",
    "find_cut_point",
    "freed_enough",
    "parse_summary",
    "should_compact",
    "summary_prompt",
    "update_ledger",
]
