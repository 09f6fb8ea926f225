"""Placement: turning a turn context into provider requests, and simulating what they cost (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias, assert_never

from lamina.defang import render_block
from lamina.messages import Message, to_messages
from lamina.placement._anthropic import render_anthropic
from lamina.placement._openai import render_openai_chat, render_openai_responses
from lamina.placement._sdk_managed import SdkManagedPrompt, render_sdk_managed
from lamina.placement.cache_sim import (
    AnthropicCacheRules,
    AnthropicCacheSimulator,
    CacheSimulator,
    CacheSummary,
    CacheUsage,
    OpenAICacheRules,
    OpenAICacheSimulator,
    TimedRequest,
    simulate,
    summarise,
)
from lamina.placement.targets import (
    AnthropicTarget,
    CacheTtl,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    RenderTarget,
    SdkManagedTarget,
)
from lamina.session.entries import LogEntry
from lamina.turn import TurnContext

if TYPE_CHECKING:  # the SDKs are heavy to import; their types are only needed by the checker
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming


RenderedRequest: TypeAlias = (
    "MessageCreateParamsNonStreaming | CompletionCreateParamsNonStreaming | ResponseCreateParamsNonStreaming"
    " | SdkManagedPrompt"
)


def turn_messages(turn: TurnContext, continuation: Sequence[LogEntry] = ()) -> list[Message]:
    """The conversation a request carries: summary, history, this turn's message and tool loop so far."""
    prelude = render_block("compaction_summary", turn.summary) if turn.summary else None
    entries = [*turn.history, *continuation]
    return to_messages(entries, prelude=prelude, current_tail=(turn.user_entry_id, turn.tail))


def render(turn: TurnContext, target: RenderTarget, *, continuation: Sequence[LogEntry] = ()) -> RenderedRequest:
    """The request body for `turn` in `target`'s format.

    `continuation` holds the entries appended since the turn was prepared (the tool loop so far),
    so every model call of a turn renders from the same turn context.
    """
    match target:
        case AnthropicTarget():
            return render_anthropic(turn, turn_messages(turn, continuation), target)
        case OpenAIChatTarget():
            return render_openai_chat(turn, turn_messages(turn, continuation), target)
        case OpenAIResponsesTarget():
            return render_openai_responses(turn, turn_messages(turn, continuation), target)
        case SdkManagedTarget():
            return render_sdk_managed(turn)
        case _:
            assert_never(target)


__all__ = [
    "AnthropicCacheRules",
    "AnthropicCacheSimulator",
    "AnthropicTarget",
    "CacheSimulator",
    "CacheSummary",
    "CacheTtl",
    "CacheUsage",
    "OpenAICacheRules",
    "OpenAICacheSimulator",
    "OpenAIChatTarget",
    "OpenAIResponsesTarget",
    "RenderTarget",
    "RenderedRequest",
    "SdkManagedPrompt",
    "SdkManagedTarget",
    "TimedRequest",
    "render",
    "simulate",
    "summarise",
    "turn_messages",
]
