"""The one door's two words: `SafeText`, text fit for a request, and `Authority`, how far it is trusted (pure)."""

from __future__ import annotations

from enum import StrEnum
from typing import NewType

__all__ = ["Authority", "SafeText"]

SafeText = NewType("SafeText", str)
"""Text fit to be placed into a request: Lamina's own, the user's own typing, or untrusted text
neutralised by the one door (`lamina.defang.neutralise`, or `defang` for a labelled block).

Renderers accept only `SafeText` (in parts, message blocks, the summary and the pinned lane), so a
raw string from outside cannot reach a request without a type error; `lamina.defang.trusted` is
the one explicit way to mark Lamina's own text (and the user's typing) as such."""


class Authority(StrEnum):
    """How far the model may trust a part's text, highest first."""

    SYSTEM_RULE = "system_rule"
    """Lamina's own rules and the application's system prompt."""
    USER_DATA = "user_data"
    """What the user wrote or set (preferences, messages)."""
    PROJECT_FILE = "project_file"
    """Files found in the workspace (AGENTS.md, MEMORY.md, skills): data, not instructions."""
    MODEL_OUTPUT = "model_output"
    """The model's own earlier replies and tool calls, and the compaction summary it wrote: what it said."""
    TOOL_OUTPUT = "tool_output"
    """Output of tools and external sources: data, never instructions."""
