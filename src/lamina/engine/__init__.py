"""The context engine: one session's turn preparation, one-shot outbox, commit and compaction.

`ContextEngine` (`_facade`) is the I/O shell over parts that each own one piece of state: the
session-state folds (`_state`), the outbox, the live view and its prune tally (`_view`), the
stable prefix (`_prefix`), provider sessions (`_sessions`); compaction's steps are `_compaction`.
Its methods beyond a turn's are grouped in mixins over `_host`: `_settings`, `_media`, `_plans`,
`_compacting`, `_branching`, `_resume`.
"""

from __future__ import annotations

from lamina.engine._assemble import LoggedTurn, assemble_turn, lane_of, logged_turn, summary_of
from lamina.engine._compaction import CompactionEvent, CompactionOutcome, CompactionStatus
from lamina.engine._facade import ContextEngine, StableSource
from lamina.engine._plan import (
    OPEN_STATES,
    TRANSITIONS,
    Plan,
    PlanStateName,
    PlanStep,
    PlanTransitionError,
    advance,
    check_transition,
    compaction_focus,
    continuation_message,
    execution_message,
    next_step,
    rejection_message,
)
from lamina.engine._plans import SessionPlans
from lamina.engine._prefix import prefix_context
from lamina.engine._session_book import ProviderSessionBook, provider_session_in_view
from lamina.engine._settings import SessionSettings
from lamina.engine._state import RecordedSettings, recorded_settings
from lamina.engine._tooldefs import recorded_tools
from lamina.engine._view import HistorySlice

__all__ = [
    "OPEN_STATES",
    "TRANSITIONS",
    "CompactionEvent",
    "CompactionOutcome",
    "CompactionStatus",
    "ContextEngine",
    "HistorySlice",
    "LoggedTurn",
    "Plan",
    "PlanStateName",
    "PlanStep",
    "PlanTransitionError",
    "ProviderSessionBook",
    "RecordedSettings",
    "SessionPlans",
    "SessionSettings",
    "StableSource",
    "advance",
    "assemble_turn",
    "check_transition",
    "compaction_focus",
    "continuation_message",
    "execution_message",
    "lane_of",
    "logged_turn",
    "next_step",
    "prefix_context",
    "provider_session_in_view",
    "recorded_settings",
    "recorded_tools",
    "rejection_message",
    "summary_of",
]
