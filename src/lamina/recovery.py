"""The recovery block a fresh provider session is told (pure): moved to `lamina.agent`, kept here for importers."""

from __future__ import annotations

from lamina.agent._recovery import DEFAULT_RECOVERY_TOKENS, RECOVERY_KIND, RecoveryBlock, recovery_text

__all__ = [
    "DEFAULT_RECOVERY_TOKENS",
    "RECOVERY_KIND",
    "RecoveryBlock",
    "recovery_text",
]
