"""Completed turns' reasoning, kept or dropped as the cost model prices it (`ReasoningConfig(history="priced")`).

Decided once per turn, at its first model call (a tool loop keeps the choice: its completed turns do
not change), from what the last request sent: see `lamina.pricing.price_reasoning_replay`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lamina.context import TurnContext, split_turns
from lamina.engine import ContextEngine
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    ReasoningOwner,
    RenderTarget,
    reasoning_owner,
)
from lamina.pricing import price_reasoning_replay
from lamina.session import AssistantMessage, LogEntry, ToolCall, ToolResult, UserMessage
from lamina.tokens import TokenEstimator

_log = logging.getLogger("lamina.agent")


@dataclass(frozen=True, slots=True)
class ReplayFigures:
    """What the choice is priced from, in estimated tokens."""

    reasoning: int
    """The completed turns' reasoning of the provider, as sent when kept."""
    drop_rewrite: int
    """What dropping changes of the prefix the last request sent (the reasoning removed not counted)."""
    keep_rewrite: int
    """What keeping changes of it (reasoning the last request left out, and what follows it)."""


def replay_figures(
    past: Sequence[LogEntry], owner: ReasoningOwner, estimator: TokenEstimator, *, dropped_before: bool
) -> ReplayFigures:
    """The figures of the keep-or-drop choice over the completed turns `past`.

    Args:
        past: The completed turns' entries, in order.
        owner: The provider the request goes to (only its reasoning is ever sent).
        estimator: Counts tokens.
        dropped_before: Whether the last turn chose to drop: then the last request sent only the
            reasoning of the turn that has just completed (it was the turn being sent).

    Returns:
        The figures.
    """
    turns = split_turns(past)
    sizes: list[tuple[int, int, bool]] = []  # per entry: other tokens, reasoning tokens, in the last turn
    for number, segment in enumerate(turns):
        last = number == len(turns) - 1
        for entry in segment:
            other, reasoning = _sizes(entry, owner, estimator)
            sizes.append((other, reasoning, last))
    total_reasoning = sum(r for _, r, _ in sizes)

    def tail_from(index: int | None, *, with_reasoning: bool) -> int:
        if index is None:
            return 0
        return sum(o + (r if with_reasoning else 0) for o, r, _ in sizes[index:])

    sent = [i for i, (_, r, last) in enumerate(sizes) if r and (last or not dropped_before)]
    left_out = [i for i, (_, r, last) in enumerate(sizes) if r and dropped_before and not last]
    return ReplayFigures(
        reasoning=total_reasoning,
        drop_rewrite=tail_from(sent[0] if sent else None, with_reasoning=False),
        keep_rewrite=tail_from(left_out[0] if left_out else None, with_reasoning=True),
    )


def _sizes(entry: LogEntry, owner: ReasoningOwner, estimator: TokenEstimator) -> tuple[int, int]:
    """An entry's tokens as sent: (everything but its reasoning, its reasoning of `owner`)."""
    match entry:
        case AssistantMessage(text=text, reasoning=reasoning):
            blocks = [r for r in reasoning if r.provider == owner]
            sent = sum(estimator.count(r.text + r.signature + r.data + "".join(r.summary)) for r in blocks)
            return estimator.count(text), sent
        case UserMessage(text=text):
            return estimator.count(text), 0
        case ToolCall(name=name, input=arguments):
            return estimator.count(name) + estimator.count(str(arguments)), 0
        case ToolResult(content=content):
            return estimator.count(content), 0
        case _:
            return 0, 0


@dataclass(slots=True)
class ReasoningReplay:
    """The agent's keep-or-drop choice for completed turns' reasoning, priced at each turn's first call."""

    turn_id: str | None = None
    choice: Literal["keep", "drop"] | None = None
    """The last turn's choice (None before the first)."""

    def target(self, engine: ContextEngine, turn: TurnContext, target: RenderTarget) -> RenderTarget:
        """`target` with its reasoning history decided, when it asks for the priced choice (else as it is)."""
        owner = reasoning_owner(target)
        if owner is None or not isinstance(target, AnthropicTarget | OpenAIChatTarget | OpenAIResponsesTarget):
            return target
        reasoning = target.reasoning
        if reasoning.history != "priced":
            return target
        if self.choice is None or turn.id != self.turn_id:
            past, _ = turn.segments()
            figures = replay_figures(past, owner, engine.compactor.estimator, dropped_before=self.choice == "drop")
            self.choice, decision = price_reasoning_replay(
                engine.compactor.outlook(),
                reasoning_tokens=figures.reasoning,
                drop_rewrite_tokens=figures.drop_rewrite,
                keep_rewrite_tokens=figures.keep_rewrite,
            )
            self.turn_id = turn.id
            _log.debug("session %s: completed turns' reasoning %s (%s)", turn.session_id, self.choice, decision)
        chosen: Literal["keep", "drop"] = self.choice or "keep"
        return dataclasses.replace(target, reasoning=dataclasses.replace(reasoning, history=chosen))
