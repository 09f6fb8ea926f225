"""The context engine: one session's turn preparation, one-shot outbox, commit and compaction.

`ContextEngine` (`_facade`) keeps the turn and its one write path, over parts that each own one
piece of state: the session-state folds (`_state`), the outbox, the live view and its prune tally
(`_view`), the stable prefix (`_prefix`). It owns the parts users call, each built with the
engine's write path and read accessors: `SessionSettings` (`engine.settings`), `SessionPlans`
(`engine.plans`), `Compactor` (`engine.compactor`, its steps in `_compaction`) and
`ProviderSessionBook` (`engine.provider_sessions`).
"""

from __future__ import annotations

from lamina.engine._assemble import LoggedTurn, assemble_turn, logged_turn
from lamina.engine._compacting import Compactor
from lamina.engine._compaction import CompactionEvent, CompactionOutcome, CompactionStatus
from lamina.engine._facade import ContextEngine, StableSource
from lamina.engine._plan import (
    OPEN_STATES,
    Plan,
    PlanStateName,
    PlanStep,
    PlanTransitionError,
    advance,
    continuation_message,
    execution_message,
    next_step,
    rejection_message,
)
from lamina.engine._prefix import prefix_context
from lamina.engine._session_book import ProviderSessionBook, provider_session_in_view
from lamina.engine._session_plans import SessionPlans
from lamina.engine._settings import SessionSettings
from lamina.engine._state import RecordedSettings, recorded_settings
from lamina.engine._tooldefs import recorded_tools

__all__ = [
    "OPEN_STATES",
    "CompactionEvent",
    "CompactionOutcome",
    "CompactionStatus",
    "Compactor",
    "ContextEngine",
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
    "continuation_message",
    "execution_message",
    "logged_turn",
    "next_step",
    "prefix_context",
    "provider_session_in_view",
    "recorded_settings",
    "recorded_tools",
    "rejection_message",
]
