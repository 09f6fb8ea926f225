"""A request of a stored session rebuilt from the log, and the wire format its model was called in (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lamina.context import TurnContext
from lamina.placement import AnthropicTarget, OpenAIChatTarget, RenderTarget
from lamina.reports import ReplayedRequest
from lamina.session import AssistantMessage, LogEntry, TurnRecord

__all__ = ["Rebuilt", "format_of", "target_for"]


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """One request rebuilt from the log: the replayed turn, rendered for the wire format its model was called in."""

    index: int
    call: AssistantMessage
    replayed: ReplayedRequest
    target: RenderTarget
    body: Any
    current_start: int
    """Index of the first wire message of this turn (its user message) in the body's messages."""
    t_start: float
    notes: tuple[str, ...]

    @property
    def turn(self) -> TurnContext:
        """The turn the request carried, as the engine assembled it."""
        return self.replayed.turn

    @property
    def record(self) -> TurnRecord | None:
        """The turn's latest record (what its tail carried); None: the log has none."""
        return self.replayed.record

    @property
    def continuation(self) -> tuple[LogEntry, ...]:
        """The entries after the turn's user message: its turn record and the tool loop so far."""
        return self.replayed.continuation


def target_for(model: str) -> RenderTarget:
    """The wire format a model was most likely called in: OpenAI Chat for GPT and o-series names, else Anthropic.

    Args:
        model: The model's name as logged (a provider prefix such as `openai/` is ignored).

    Returns:
        The render target to rebuild its requests with.
    """
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return OpenAIChatTarget(model=model)
    return AnthropicTarget(model=model or "unknown")


def format_of(target: RenderTarget) -> str:
    """The wire format's name of a render target, as the simulators and the pages name it."""
    return "openai_chat" if isinstance(target, OpenAIChatTarget) else "anthropic"
