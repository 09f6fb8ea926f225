"""The agent: drives turns of one session through a provider and the tool pipeline (I/O: provider, tools, log).

Private modules: `_loop` (`Agent`: the turn loop) and its members `_plans`, `_provider_sessions`,
`_model_calls` (the send chain), `_priced` (`CompactionTiming`, pure), `_background` (compactions off the
user's time), `_warming` (the summariser on the cached prefix, the pre-warm) and `_lifetime`; `_events`,
`_recovery` (pure), `_activation` (skills and sources), `_agent_options`, `_tool_sets` (pure),
`_tool_catalogue`, `_fit` (`prefix_problem`, pure) and `_wiring` (`open_agent`, `open_engine`).
"""

from __future__ import annotations

from lamina.agent._activation import Activation, SkillCatalogue, SkillToolsRule, SkillWarning
from lamina.agent._agent_options import AgentOptions
from lamina.agent._events import (
    AgentEvent,
    BackgroundCompaction,
    ModelCallFinished,
    PlanUpdate,
    Thinking,
    ToolFinished,
    ToolProgress,
    ToolStarted,
    TurnOutcome,
)
from lamina.agent._fit import prefix_problem
from lamina.agent._loop import Agent
from lamina.agent._recovery import RecoveryBlock, recovery_text
from lamina.agent._tool_sets import ToolDeferral, ToolSet, choose_tool_set
from lamina.agent._warming import Prewarmed, PrewarmSetting
from lamina.agent._wiring import open_agent, open_engine

__all__ = [
    "Activation",
    "Agent",
    "AgentEvent",
    "AgentOptions",
    "BackgroundCompaction",
    "ModelCallFinished",
    "PlanUpdate",
    "PrewarmSetting",
    "Prewarmed",
    "RecoveryBlock",
    "SkillCatalogue",
    "SkillToolsRule",
    "SkillWarning",
    "Thinking",
    "ToolDeferral",
    "ToolFinished",
    "ToolProgress",
    "ToolSet",
    "ToolStarted",
    "TurnOutcome",
    "choose_tool_set",
    "open_agent",
    "open_engine",
    "prefix_problem",
    "recovery_text",
]
