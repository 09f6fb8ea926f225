"""Compaction's pure core: where to cut, the ledger and the user's words lane that travel with a summary, the summary.

A compaction prepares (pure: `find_cut_point`, `update_ledger`, `update_lane`, `summary_prompt` or
`deterministic_summary`), summarises (a provider, elsewhere), appends a `CompactionBoundary`
and rebuilds the view. Nothing here touches disk, network or clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily
from lamina.compaction._clearing import server_cleared, show_server_clearing
from lamina.compaction._cut import (
    DEFAULT_KEEP_TOKENS,
    DEFAULT_RESERVE,
    CutPoint,
    entry_tokens,
    find_cut_point,
    freed_enough,
    scaled_reserve,
    should_compact,
)
from lamina.compaction._deterministic import deterministic_summary, turn_prefix_item
from lamina.compaction._lane import (
    DEFAULT_USER_LANE_TOKENS,
    LaneUpdate,
    archive_name,
    archive_text,
    clip_text,
    render_lane,
    update_lane,
)
from lamina.compaction._ledger import (
    MAX_FILES,
    dropped_count,
    update_ledger,
)
from lamina.compaction._prune import (
    DEFAULT_PRUNE,
    PrunePolicy,
    apply_prunes,
    choose_prune,
    prunable_tokens,
    prune_floor,
    reread_chances,
)
from lamina.compaction._summary import StructuredSummary, parse_summary
from lamina.compaction._summary_prompt import cached_summary_instruction, render_ledger, summary_prompt

if TYPE_CHECKING:
    from lamina.compaction._on_cache import CachedPrefix, SummaryPrefix
    from lamina.compaction._server import BackendSetting, ServerSummariser
    from lamina.compaction._summarize import DeterministicSummariser, ProviderSummariser, Summariser, SummaryResult

# The summarisers call a provider, so they (and the placement code) load on first use: the rest is pure and cheap.
_LAZY: Final = dict.fromkeys(
    ("DeterministicSummariser", "ProviderSummariser", "Summariser", "SummaryResult"), "lamina.compaction._summarize"
) | dict.fromkeys(("BackendSetting", "ServerSummariser"), "lamina.compaction._server")
_LAZY_CACHE: Final = dict.fromkeys(("CachedPrefix", "SummaryPrefix"), "lamina.compaction._on_cache")


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY | _LAZY_CACHE, name)


__all__ = [
    "DEFAULT_KEEP_TOKENS",
    "DEFAULT_PRUNE",
    "DEFAULT_RESERVE",
    "DEFAULT_USER_LANE_TOKENS",
    "MAX_FILES",
    "BackendSetting",
    "CachedPrefix",
    "CutPoint",
    "DeterministicSummariser",
    "LaneUpdate",
    "ProviderSummariser",
    "PrunePolicy",
    "ServerSummariser",
    "StructuredSummary",
    "Summariser",
    "SummaryPrefix",
    "SummaryResult",
    "apply_prunes",
    "archive_name",
    "archive_text",
    "cached_summary_instruction",
    "choose_prune",
    "clip_text",
    "deterministic_summary",
    "dropped_count",
    "entry_tokens",
    "find_cut_point",
    "freed_enough",
    "parse_summary",
    "prunable_tokens",
    "prune_floor",
    "render_lane",
    "render_ledger",
    "reread_chances",
    "scaled_reserve",
    "server_cleared",
    "should_compact",
    "show_server_clearing",
    "summary_prompt",
    "turn_prefix_item",
    "update_lane",
    "update_ledger",
]
