"""Reports on a turn and a session: its budget by tier and cache region, and its composition (pure).

Both, and the inspector, share the one replay of a logged turn (`replay_request`) and the one walk
of a rendered request (`body_blocks`); docs/reports.md tells them.
"""

from __future__ import annotations

from lamina.reports._body_walk import BodyBlock, block_tokens, body_blocks
from lamina.reports._budget import (
    NEXT_MESSAGE,
    TIER_LABELS,
    Breakpoint,
    BudgetReport,
    CacheLayout,
    CacheRegion,
    LayoutBlock,
    TierTokens,
    budget_of_turn,
    cache_layout,
    tool_tokens,
)
from lamina.reports._composition import (
    KINDS,
    Component,
    LoggedRequest,
    RequestComposition,
    SessionComposition,
    compose_entries,
    compose_turn,
    logged_requests,
    session_json,
)
from lamina.reports._misses import CacheMissReport, explain_miss, session_misses
from lamina.reports._replay import RecordedPrefixes, RecordedTools, ReplayedRequest, replay_request

__all__ = [
    "KINDS",
    "NEXT_MESSAGE",
    "TIER_LABELS",
    "BodyBlock",
    "Breakpoint",
    "BudgetReport",
    "CacheLayout",
    "CacheMissReport",
    "CacheRegion",
    "Component",
    "LayoutBlock",
    "LoggedRequest",
    "RecordedPrefixes",
    "RecordedTools",
    "ReplayedRequest",
    "RequestComposition",
    "SessionComposition",
    "TierTokens",
    "block_tokens",
    "body_blocks",
    "budget_of_turn",
    "cache_layout",
    "compose_entries",
    "compose_turn",
    "explain_miss",
    "logged_requests",
    "replay_request",
    "session_json",
    "session_misses",
    "tool_tokens",
]
