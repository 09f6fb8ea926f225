"""Placement: turning a turn context into provider requests (pure). What they cost is `lamina.cachesim`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, assert_never

from lamina.context import (
    AttachmentBlocks,
    Message,
    TextBlock,
    ToolSpec,
    TurnContext,
    attached_blocks,
    attachment_note,
    split_turns,
    to_messages,
)
from lamina.placement._anthropic_render import render_anthropic, wire_messages
from lamina.placement._context_edits import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    CONTEXT_MANAGEMENT_BETA,
    SERVER_CLEARED_NOTE,
    clear_thinking_edit,
    clear_tool_uses_edit,
    context_management,
    server_clearing,
    with_context_edits,
)
from lamina.placement._openai_render import (
    chat_wire_messages,
    render_openai_chat,
    render_openai_responses,
    responses_wire_items,
)
from lamina.placement._reasoning import ReasoningOwner, foreign_reasoning, reasoning_owner, replayed
from lamina.placement._sdk_managed import SdkManagedPrompt, render_sdk_managed
from lamina.placement._server_blocks import compaction_request, prelude_wire
from lamina.placement._targets import (
    AnthropicTarget,
    CacheTtl,
    Effort,
    OpenAICacheTtl,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    ReasoningConfig,
    RenderTarget,
    SdkManagedTarget,
)
from lamina.placement._tool_changes import (
    INLINE_TOOLS_BETA,
    TOOL_CHANGES_BETA,
    recorded_tools,
    request_tools,
    tool_change_betas,
    tool_changes,
    with_change_blocks,
)
from lamina.session import AssistantMessage, LogEntry, ToolCall, UserMessage

if TYPE_CHECKING:  # the SDKs are heavy to import; their types are only needed by the checker
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming


RenderedRequest: TypeAlias = (
    "MessageCreateParamsNonStreaming | CompletionCreateParamsNonStreaming | ResponseCreateParamsNonStreaming"
    " | SdkManagedPrompt"
)


WireConverter: TypeAlias = Callable[[Sequence[Message]], list[dict[str, Any]]]


class RenderCache:
    """A memo of wire messages for completed turns, so a request costs O(new entries) to build.

    Entries are immutable and a completed turn's messages never change, so a turn's conversion
    is keyed by its first and last entry ids and reused by every later request. Purely a memo:
    rendering with or without it gives the same body.
    """

    def __init__(self) -> None:
        """An empty memo."""
        self._memo: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
        # per target kind: entries consumed, the last of them, and their wire messages
        self._prefix: dict[str, tuple[int, LogEntry | None, list[dict[str, Any]]]] = {}

    def past_wire(
        self,
        kind: str,
        past: Sequence[LogEntry],
        convert: WireConverter,
        attachments: AttachmentBlocks = attachment_note,
    ) -> Sequence[dict[str, Any]]:
        """Wire messages of the completed turns `past`, extending the last result when `past` extends it.

        The result is the cache's own list: read it, copy it, never change it.
        """
        done, last, wire = self._prefix.get(kind, (0, None, []))
        if done > len(past) or (done and past[done - 1] is not last):
            done, wire = 0, []  # another view (a branch, a compaction): start over, segments still memoised
        if done < len(past):
            wire.extend(
                m for segment in split_turns(past[done:]) for m in self.wire(kind, segment, convert, attachments)
            )
            self._prefix[kind] = (len(past), past[-1], wire)
        return wire

    def wire(
        self,
        kind: str,
        segment: Sequence[LogEntry],
        convert: WireConverter,
        attachments: AttachmentBlocks = attachment_note,
    ) -> list[dict[str, Any]]:
        """Wire messages of one turn's `segment`, converted once and memoised by its first and last entry ids.

        The result is the cache's own list: read it, copy it, never change it.
        """
        key = (kind, segment[0].id, segment[-1].id, len(segment))
        cached = self._memo.get(key)
        if cached is None:
            cached = self._memo[key] = convert(to_messages(segment, attachments=attachments))
        return cached


def _wire(
    turn: TurnContext,
    owner: ReasoningOwner,
    convert: WireConverter,
    continuation: Sequence[LogEntry],
    cache: RenderCache | None,
    attachments: AttachmentBlocks,
    history: Literal["keep", "drop"],
) -> list[dict[str, Any]]:
    """The conversation's wire messages: completed turns with their reasoning as `history` says, this turn whole."""

    def convert_past(messages: Sequence[Message]) -> list[dict[str, Any]]:
        return convert(replayed(messages, owner, current=False, history=history))

    def convert_open(messages: Sequence[Message]) -> list[dict[str, Any]]:
        return convert(replayed(messages, owner, current=False, history=history, open_loop=True))

    past, now = turn.segments(continuation)
    wire = prelude_wire(turn, owner, convert)  # a provider's compaction block first, to its own provider
    # before the turn's first answer, a last turn that ended in tool calls (interrupted, or a branch
    # inside its loop) has them answered by this turn's message: its last step's reasoning stays whole
    last = _last_turn(past) if history == "drop" else ()
    open_segment = last if last and _ends_in_calls(last, now) else ()
    closed = past[: len(past) - len(open_segment)]
    if cache is None:
        for segment in split_turns(closed):
            wire += convert_past(to_messages(segment, attachments=attachments))
        if open_segment:
            wire += convert_open(to_messages(open_segment, attachments=attachments))
    else:  # memoised per format and reasoning choice: a different choice is a different conversion
        wire += cache.past_wire(f"{owner}/{history}", closed, convert_past, attachments)
        if open_segment:
            wire += cache.wire(f"{owner}/{history}/open", open_segment, convert_open, attachments)
    now_messages = to_messages(now, current_tail=(turn.user_entry_id, turn.tail_parts()), attachments=attachments)
    wire += convert(replayed(now_messages, owner, current=True))
    return wire


def _attached_text(turn: TurnContext, attachments: AttachmentBlocks) -> list[str]:
    """This turn's attachments as text, for a backend whose prompt is text only."""
    user = next((e for e in reversed(turn.history) if e.id == turn.user_entry_id), None)
    if not isinstance(user, UserMessage):
        return []
    return [b.text for b in attached_blocks(user, attachments) if isinstance(b, TextBlock)]


def _last_turn(past: Sequence[LogEntry]) -> Sequence[LogEntry]:
    """The last turn of `past` (from its last user message on; all of it without one), found from the end."""
    start = next((i for i in range(len(past) - 1, -1, -1) if isinstance(past[i], UserMessage)), 0)
    return past[start:]


def _ends_in_calls(segment: Sequence[LogEntry], now: Sequence[LogEntry]) -> bool:
    """Whether `segment`'s last model step made tool calls and `now` holds no answer of the model yet."""
    if any(isinstance(e, AssistantMessage | ToolCall) for e in now):
        return False
    last = next((e for e in reversed(segment) if isinstance(e, AssistantMessage | ToolCall)), None)
    return isinstance(last, ToolCall)


def _history(reasoning: ReasoningConfig) -> Literal["keep", "drop"]:
    """What completed turns do with their reasoning: a priced choice not made by an agent keeps it."""
    return "drop" if reasoning.history == "drop" else "keep"


def _request_tools(turn: TurnContext, continuation: Sequence[LogEntry]) -> tuple[ToolSpec, ...]:
    """The definitions a request sends whole: a change recorded in the turn's tool loop, else the turn's."""
    return request_tools([*turn.history, *continuation], turn.tools, from_index=len(turn.history))


def _with_tools(turn: TurnContext, tools: tuple[ToolSpec, ...]) -> TurnContext:
    return turn if tools == turn.tools else dataclasses.replace(turn, tools=tools)


def render(
    turn: TurnContext,
    target: RenderTarget,
    *,
    continuation: Sequence[LogEntry] = (),
    cache: RenderCache | None = None,
    attachments: AttachmentBlocks = attachment_note,
) -> RenderedRequest:
    """The request body for `turn` in `target`'s format.

    `continuation` holds the entries appended since the turn was prepared (the tool loop so far),
    so every model call of a turn renders from the same turn context. `cache` (optional) reuses
    the conversion of completed turns across requests. `attachments` shows the user's attached
    files (`lamina.attachments.AttachmentRenderer` for the model in use; by default a note each).
    """
    match target:
        case AnthropicTarget(reasoning=reasoning):
            entries = [*turn.history, *continuation]
            tools, changes = tool_changes(entries, turn.tools) if target.tool_changes else (turn.tools, [])
            turn = _with_tools(turn, tools if target.tool_changes else _request_tools(turn, continuation))
            wire = _wire(turn, "anthropic", wire_messages, continuation, cache, attachments, _history(reasoning))
            if changes:
                prelude = len(prelude_wire(turn, "anthropic", wire_messages))
                wire = with_change_blocks(wire, entries, changes, prelude=prelude)
            body = render_anthropic(turn, wire, target)
            return with_context_edits(body, [*turn.history, *continuation], target) if target.context_edits else body
        case OpenAIChatTarget(reasoning=reasoning):
            history = _history(reasoning)
            turn = _with_tools(turn, _request_tools(turn, continuation))
            wire = _wire(turn, "openai-compat", chat_wire_messages, continuation, cache, attachments, history)
            return render_openai_chat(turn, wire, target)
        case OpenAIResponsesTarget(reasoning=reasoning):
            turn = _with_tools(turn, _request_tools(turn, continuation))
            wire = _wire(turn, "openai", responses_wire_items, continuation, cache, attachments, _history(reasoning))
            return render_openai_responses(turn, wire, target)
        case SdkManagedTarget():
            return render_sdk_managed(turn, _attached_text(turn, attachments))
        case _:
            assert_never(target)


__all__ = [
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "CONTEXT_MANAGEMENT_BETA",
    "INLINE_TOOLS_BETA",
    "SERVER_CLEARED_NOTE",
    "TOOL_CHANGES_BETA",
    "AnthropicTarget",
    "CacheTtl",
    "Effort",
    "OpenAICacheTtl",
    "OpenAIChatTarget",
    "OpenAIResponsesTarget",
    "ReasoningConfig",
    "ReasoningOwner",
    "RenderCache",
    "RenderTarget",
    "RenderedRequest",
    "SdkManagedPrompt",
    "SdkManagedTarget",
    "WireConverter",
    "clear_thinking_edit",
    "clear_tool_uses_edit",
    "compaction_request",
    "context_management",
    "foreign_reasoning",
    "reasoning_owner",
    "recorded_tools",
    "render",
    "replayed",
    "server_clearing",
    "tool_change_betas",
]
