"""The agent: drives turns of one session through a provider and the tool pipeline (I/O: provider, tools, log).

Private modules, one per step: `_loop` (`Agent` and its turn loop), `_events` (what a turn
reports), `_plans` (moving an accepted plan forward), `_priced` (compacting when it pays, at the
provider's prices), `_provider_sessions` (resuming a provider's own session, or recovering in a
fresh one), `_recovery` (the recovery block's text, pure), `_activation` (skills and sources in a
session) and `_wiring` (`open_agent`, `open_engine`).
"""

from __future__ import annotations

from lamina.agent._activation import Activation, SkillCatalogue, SkillToolsRule, SkillWarning, nearest_context_paths
from lamina.agent._events import (
    AgentEvent,
    ModelCallFinished,
    PlanUpdate,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnOutcome,
)
from lamina.agent._loop import Agent
from lamina.agent._plans import DEFAULT_PLAN_COMPACTION_TIMEOUT
from lamina.agent._priced import DEFAULT_COMPACTION_BAND
from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS, RECOVERY_KIND, RecoveryBlock, recovery_text
from lamina.agent._wiring import open_agent, open_engine, session_engine

__all__ = [
    "DEFAULT_COMPACTION_BAND",
    "DEFAULT_PLAN_COMPACTION_TIMEOUT",
    "DEFAULT_RECOVERY_TOKENS",
    "RECOVERY_KIND",
    "Activation",
    "Agent",
    "AgentEvent",
    "ModelCallFinished",
    "PlanUpdate",
    "RecoveryBlock",
    "SkillCatalogue",
    "SkillToolsRule",
    "SkillWarning",
    "ToolFinished",
    "ToolProgress",
    "ToolStarted",
    "TurnOutcome",
    "nearest_context_paths",
    "open_agent",
    "open_engine",
    "recovery_text",
    "session_engine",
]
