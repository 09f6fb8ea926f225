"""Skills and sources in a session: moved to `lamina.agent`, kept here for importers."""

from __future__ import annotations

from lamina.agent._activation import Activation, SkillCatalogue, SkillToolsRule, SkillWarning, nearest_context_paths

__all__ = [
    "Activation",
    "SkillCatalogue",
    "SkillToolsRule",
    "SkillWarning",
    "nearest_context_paths",
]
