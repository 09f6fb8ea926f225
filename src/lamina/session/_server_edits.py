"""What the log keeps of a provider's server-side context edits (Anthropic's context editing) (pure).

A prune the server makes is a `ToolOutputPruned` carrying a `ServerClearing`: the requests keep the
results and ask the server to clear them; what each response said it cleared is an `AppliedEdit`
on its `AssistantMessage`. Described in docs/providers.md ("Context editing").
"""

from __future__ import annotations

import msgspec


class ServerClearing(msgspec.Struct, frozen=True, kw_only=True):
    """How a prune is made by the provider (`clear_tool_uses_20250919`) rather than by Lamina.

    Every later request sends the results whole with an edit that clears every tool use up to the
    prune's newest one (`keep`: the tool uses after it), so the model sees them cleared.
    """

    clear_at_least: int = 0
    """The fewest tokens the server must free, or it clears nothing (the cost model's break-even)."""
    exclude_tools: tuple[str, ...] = ()
    """Tools whose uses the server never clears."""
    clear_tool_inputs: bool = False
    """Whether the cleared calls' inputs are cleared too."""


class AppliedEdit(msgspec.Struct, frozen=True, kw_only=True):
    """One context edit a response said the server applied (`context_management.applied_edits`)."""

    kind: str
    """The edit's type: `clear_tool_uses_20250919` or `clear_thinking_20251015`."""
    cleared_input_tokens: int = 0
    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0
