"""How the OpenAI adapters read a streamed reply: Chat Completions chunks and Responses events, into events.

`ChatReply` and `ResponsesReply` are fed one SDK event at a time (by `_sdk_stream.relay`) and yield
Lamina's events as they come; `completed()` gives the `Completed` that ends the stream.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from lamina.errors import ProviderError, TransientServerError
from lamina.providers._diagnostics import openai_cache_miss
from lamina.providers._openai_errors import classify_openai_error
from lamina.providers._provider import Completed, ProviderEvent, ReasoningDelta, TextDelta, ToolCallRequest
from lamina.providers._sdk_stream import call_input
from lamina.session import Reasoning, Usage

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.completion_usage import CompletionUsage
    from openai.types.responses import (
        Response,
        ResponseFunctionToolCall,
        ResponseReasoningItem,
        ResponseStreamEvent,
    )

_CHAT_STOP: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_INCOMPLETE_STOP: Final = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}
_CHAT_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible servers put their reasoning beside the content: DeepSeek, SGLang and vLLM before
0.10 `reasoning_content`, vLLM since `reasoning` (the first one set wins: some servers send both)."""
_SECTION: Final = "\n\n"
"""Between two passages of readable reasoning (summary parts, items) in the streamed reasoning."""


@dataclass
class _ChatCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ChatReply:
    provider: str
    server: str = ""
    """The server's URL, for the error of a stream that sent nothing."""
    chunks: int = 0
    """The chunks read so far."""
    text: list[str] = field(default_factory=list)
    calls: dict[int, _ChatCall] = field(default_factory=dict)
    done: list[ToolCallRequest] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = ""
    """The field the server's reasoning came in (the first delta that had some says)."""
    finish_reason: str | None = None
    usage: CompletionUsage | None = None
    model: str = ""

    @property
    def finished(self) -> bool:
        """Never before the stream ends: the usage chunk comes after the finish reason."""
        return False

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[ProviderEvent]:
        self.chunks += 1
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = chunk.usage
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            found = chat_reasoning(getattr(delta, "model_extra", None))  # pydantic 2: the fields the SDK lacks
            if found is not None:
                self.reasoning_field = self.reasoning_field or found[0]
                self.reasoning.append(found[1])
                yield ReasoningDelta(found[1])
            for piece in (delta.content, delta.refusal):
                if piece:
                    self.text.append(piece)
                    yield TextDelta(piece)
            for position, tool_call in enumerate(delta.tool_calls or ()):
                index = getattr(tool_call, "index", None)
                call = self.calls.setdefault(index if isinstance(index, int) else position, _ChatCall())
                call.call_id = call.call_id or (tool_call.id or "")
                function = tool_call.function
                if function is not None:
                    call.name = call.name or (function.name or "")  # sent once, with the first delta
                    if function.arguments:
                        call.arguments.append(function.arguments)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
                yield from self._finish_calls()

    def _finish_calls(self) -> Iterator[ToolCallRequest]:
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call.name:
                raise ProviderError(self.provider, f"tool call {index} has no function name")
            call_id = call.call_id or f"call_{secrets.token_hex(8)}"  # some compatible servers send none
            request = ToolCallRequest(call_id, call.name, _arguments(self.provider, call_id, "".join(call.arguments)))
            self.done.append(request)
            yield request
        self.calls.clear()

    def completed(self) -> Completed:
        if not self.chunks:
            raise empty_stream(self.provider, self.server)
        if self.finish_reason is None:
            raise TransientServerError(self.provider, "the stream ended before the choice finished")
        stop = _CHAT_STOP.get(self.finish_reason, self.finish_reason)
        if self.done and stop == "end_turn":  # some compatible servers say "stop" after tool calls
            stop = "tool_use"
        usage = Usage()  # for a compatible server that ignores `stream_options`
        if self.usage is not None:
            details = self.usage.completion_tokens_details
            usage = _usage(
                self.usage.prompt_tokens,
                self.usage.completion_tokens,
                self.usage.prompt_tokens_details,
                reasoning=(details.reasoning_tokens or 0) if details is not None else 0,
            )
        reasoning: tuple[Reasoning, ...] = ()
        if self.reasoning:
            text = "".join(self.reasoning)
            block = Reasoning(provider="openai-compat", kind="reasoning_content", text=text, field=self.reasoning_field)
            reasoning = (block,)
        return Completed(
            text="".join(self.text),
            tool_calls=tuple(self.done),
            stop_reason=stop,
            usage=usage,
            model=self.model,
            raw_stop_reason=self.finish_reason,
            reasoning=reasoning,
        )


def empty_stream(provider: str, server: str) -> TransientServerError:
    """A 200 whose stream closed with no event: the server failed (its chat template, often); tried twice in all."""
    where = f"{server}: " if server else ""
    error = TransientServerError(
        provider,
        f"{where}the server returned no events (HTTP 200 with an empty stream: its log says why; "
        "a chat template that failed on the request, often)",
    )
    error.max_attempts = 2
    return error


def chat_reasoning(extra: Mapping[str, object] | None) -> tuple[str, str] | None:
    """The reasoning a compatible server sent beside a message's content (or a delta's), and its field.

    Args:
        extra: The fields of a message or delta the SDK does not know (`model_extra`).

    Returns:
        `(field, text)` for the first of `reasoning_content` and `reasoning` that holds text; None if neither does.
    """
    for name in _CHAT_REASONING_FIELDS:
        value = (extra or {}).get(name)
        if isinstance(value, str) and value:
            return name, value
    return None


@dataclass
class _ReadableReasoning:
    """The readable reasoning streamed so far: a blank line between two passages (summary parts, items)."""

    last: tuple[str, str, int] | None = None
    items: set[str] = field(default_factory=set)
    """The reasoning items some of whose text was streamed."""

    def piece(self, item_id: str, part: tuple[str, int], delta: str) -> Iterator[ReasoningDelta]:
        if not delta:
            return
        key = (item_id, *part)
        if self.last is not None and key != self.last:
            yield ReasoningDelta(_SECTION)
        self.last = key
        self.items.add(item_id)
        yield ReasoningDelta(delta)


@dataclass
class ResponsesReply:
    provider: str
    text: list[str] = field(default_factory=list)
    calls: list[ToolCallRequest] = field(default_factory=list)
    reasoning: dict[int, Reasoning] = field(default_factory=dict)
    """The reasoning items by output index, each as `response.output_item.done` sent it (on `.added` the
    encrypted content may be incomplete)."""
    readable: _ReadableReasoning = field(default_factory=_ReadableReasoning)
    refused: bool = False
    final: Response | None = None

    @property
    def finished(self) -> bool:
        """Once the response has completed or stopped: what the stream sends after that is not read."""
        return self.final is not None

    def feed(self, event: ResponseStreamEvent) -> Iterator[ProviderEvent]:
        from openai.types.responses import (
            ResponseCompletedEvent,
            ResponseErrorEvent,
            ResponseFailedEvent,
            ResponseFunctionToolCall,
            ResponseIncompleteEvent,
            ResponseOutputItemDoneEvent,
            ResponseReasoningItem,
            ResponseReasoningSummaryTextDeltaEvent,
            ResponseReasoningTextDeltaEvent,
            ResponseRefusalDeltaEvent,
            ResponseTextDeltaEvent,
            ResponseToolSearchCall,
            ResponseToolSearchOutputItem,
        )

        if isinstance(event, ResponseTextDeltaEvent | ResponseRefusalDeltaEvent):
            self.refused = self.refused or isinstance(event, ResponseRefusalDeltaEvent)
            self.text.append(event.delta)
            yield TextDelta(event.delta)
        elif isinstance(event, ResponseReasoningSummaryTextDeltaEvent):
            yield from self.readable.piece(event.item_id, ("summary", event.summary_index), event.delta)
        elif isinstance(event, ResponseReasoningTextDeltaEvent):
            yield from self.readable.piece(event.item_id, ("text", event.content_index), event.delta)
        elif isinstance(event, ResponseOutputItemDoneEvent) and isinstance(event.item, ResponseFunctionToolCall):
            yield self._call(event.item)
        elif isinstance(event, ResponseOutputItemDoneEvent) and isinstance(event.item, ResponseReasoningItem):
            yield from self._reasoning(event.output_index, event.item)
        elif isinstance(event, ResponseOutputItemDoneEvent) and isinstance(
            event.item, ResponseToolSearchCall | ResponseToolSearchOutputItem
        ):  # the hosted tool search: its items go back as returned, or its loaded tools are not there
            self.reasoning[event.output_index] = Reasoning(
                provider="openai", kind="server_tool", item_id=event.item.id, data=event.item.to_json(indent=None)
            )
        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            self.final = event.response
            yield from self._leftovers()
        elif isinstance(event, ResponseFailedEvent):
            error = event.response.error
            raise classify_openai_error(self.provider, http=None, error=error.to_dict() if error else {}, headers=None)
        elif isinstance(event, ResponseErrorEvent):
            raise classify_openai_error(self.provider, http=None, error=event.to_dict(), headers=None)

    def _call(self, item: ResponseFunctionToolCall) -> ToolCallRequest:
        call = ToolCallRequest(item.call_id, item.name, _arguments(self.provider, item.call_id, item.arguments))
        self.calls.append(call)
        return call

    def _reasoning(self, index: int, item: ResponseReasoningItem) -> Iterator[ReasoningDelta]:
        """Keep a completed reasoning item; its readable text as one delta if none of it was streamed."""
        block = reasoning_item(item)
        self.reasoning[index] = block
        if item.id not in self.readable.items:
            yield from self.readable.piece(item.id, ("whole", 0), _SECTION.join(block.summary) or block.text)

    def _leftovers(self) -> Iterator[ProviderEvent]:
        """What the final response holds that no event announced (minimal compatible servers)."""
        if self.final is None:
            return
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
            ResponseReasoningItem,
        )

        seen = {c.call_id for c in self.calls}
        kept = {r.item_id for r in self.reasoning.values()}
        for index, item in enumerate(self.final.output):
            if isinstance(item, ResponseReasoningItem) and item.id not in kept:
                yield from self._reasoning(index, item)
            elif isinstance(item, ResponseFunctionToolCall) and item.call_id not in seen:
                yield self._call(item)
            elif isinstance(item, ResponseOutputMessage) and not self.text:
                for part in item.content:
                    if isinstance(part, ResponseOutputText) and part.text:
                        self.text.append(part.text)
                        yield TextDelta(part.text)

    def completed(self) -> Completed:
        final = self.final
        if final is None:
            raise TransientServerError(self.provider, "the stream ended before response.completed")
        reason = final.incomplete_details.reason if final.incomplete_details is not None else None
        if reason is not None:
            stop = _INCOMPLETE_STOP.get(reason, reason)
        elif self.refused:
            stop = "refusal"
        else:
            stop = "tool_use" if self.calls else "end_turn"
        usage = Usage()
        if final.usage is not None:
            # a compatible server may leave the details out: read them as optional
            details = getattr(final.usage, "output_tokens_details", None)
            usage = _usage(
                final.usage.input_tokens,
                final.usage.output_tokens,
                final.usage.input_tokens_details,
                reasoning=(getattr(details, "reasoning_tokens", 0) or 0) if details is not None else 0,
            )
        return Completed(
            text="".join(self.text),
            tool_calls=tuple(self.calls),
            stop_reason=stop,
            usage=usage,
            model=str(final.model),
            raw_stop_reason=reason or str(final.status or ""),
            reasoning=tuple(self.reasoning[i] for i in sorted(self.reasoning)),
            response_id=final.id,
            cache_miss=openai_cache_miss(getattr(final, "prompt_cache_diagnostics", None)),
        )


def reasoning_item(item: ResponseReasoningItem) -> Reasoning:
    """A Responses reasoning item as the log keeps it: id, summaries, encrypted content and text, byte for byte."""
    return Reasoning(
        provider="openai",
        kind="reasoning",
        item_id=item.id,
        summary=tuple(part.text for part in item.summary),
        data=item.encrypted_content or "",
        text="".join(part.text for part in getattr(item, "content", None) or ()),
    )


def _usage(input_tokens: int, output_tokens: int, details: object | None, *, reasoning: int = 0) -> Usage:
    """The usage of a response whose input count includes the tokens read from and written to the cache.

    `details.cached_tokens` were read; `details.cache_write_tokens` (GPT-5.6 and later) were written,
    billed as Anthropic's `cache_creation_input_tokens` are: what is left is plain input.
    """
    cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    written = (getattr(details, "cache_write_tokens", 0) or 0) if details is not None else 0
    return Usage(
        input=input_tokens - cached - written,
        output=output_tokens,
        cache_read=cached,
        cache_write=written,
        reasoning=reasoning,
    )


def _arguments(provider: str, call_id: str, raw: str) -> dict[str, Any]:
    return call_input(raw, provider, f"tool call {call_id}: arguments are", empty={})
