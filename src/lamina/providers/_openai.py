"""OpenAI adapters on the official `openai` SDK: Chat Completions and Responses (I/O: network).

Both work against OpenAI-compatible servers through `base_url`; `map_openai_error` (in
`_openai_errors`) is the one place SDK exceptions become `ProviderError`s, and the SDK client never
retries (the SDK is imported on the first request). Both read the model's reasoning (Responses
reasoning items, a compatible server's `reasoning_content` or `reasoning`). How each stream is read,
and how usage is counted, is in `docs/providers.md`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NoReturn, Self, cast

from lamina.errors import (
    AuthenticationError,
    MissingExtraError,
    ProviderError,
    TransientServerError,
    UsageError,
)
from lamina.placement import (
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    ReasoningConfig,
    RenderedRequest,
    SdkManagedPrompt,
)
from lamina.providers._diagnostics import openai_cache_miss
from lamina.providers._errors import require_sdk
from lamina.providers._openai_errors import classify_openai_error, map_openai_error
from lamina.providers._provider import (
    Capabilities,
    Completed,
    ProviderEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
)
from lamina.providers._sdk_stream import relay
from lamina.session import Reasoning, Usage

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
    from openai.types.completion_usage import CompletionUsage
    from openai.types.responses import (
        Response,
        ResponseFunctionToolCall,
        ResponseReasoningItem,
        ResponseStreamEvent,
    )
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

_FEATURE: Final = "the OpenAI provider"
_UNUSED_KEY: Final = "unused"
"""Sent to OpenAI-compatible servers when no key is configured: they ignore it, the SDK insists on one."""

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


class _OpenAIProvider:
    """The SDK client and settings both OpenAI adapters share."""

    def __init__(
        self,
        *,
        name: str,
        client: openai.AsyncOpenAI | None,
        api_key: str | None,
        base_url: str | None,
        timeout: float | None,
        capabilities: Capabilities | None,
        max_output_tokens: int | None,
    ) -> None:
        require_sdk("openai", _FEATURE, "openai")
        self._name = name
        self._client = client
        self._owns_client = client is None
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        # vision is assumed on OpenAI itself only (no `base_url`)
        self._capabilities = capabilities or Capabilities(
            max_output_tokens=max_output_tokens or 8192, vision=base_url is None
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def aclose(self) -> None:
        """Close the SDK client if this provider built it."""
        if self._client is not None and self._owns_client:
            await self._client.close()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:
                raise MissingExtraError.of(exc, _FEATURE, "openai") from None
            api_key = self._api_key
            if api_key is None and self._base_url is not None and not os.environ.get("OPENAI_API_KEY"):
                api_key = _UNUSED_KEY
            options: dict[str, Any] = {} if self._timeout is None else {"timeout": self._timeout}
            try:
                self._client = openai.AsyncOpenAI(api_key=api_key, base_url=self._base_url, max_retries=0, **options)
            except openai.OpenAIError as exc:
                if "api_key" not in str(exc) and "credentials" not in str(exc).lower():
                    raise
                raise AuthenticationError(self._name, "no API key: set OPENAI_API_KEY or pass api_key") from exc
        return self._client

    def _body(self, request: RenderedRequest, key: str) -> dict[str, Any]:
        if isinstance(request, SdkManagedPrompt) or key not in request:
            raise UsageError(f"{type(self).__name__} needs a body with {key!r}, got {type(request).__name__}")
        return dict(request)

    def _reraise(self, exc: Exception) -> NoReturn:
        mapped = map_openai_error(exc, provider=self._name)
        if mapped is None:
            raise exc
        raise mapped from exc


class OpenAIChatProvider(_OpenAIProvider):
    """A `Provider` for OpenAI Chat Completions and OpenAI-compatible servers."""

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_tokens: int | None = None,
        prompt_cache_key: bool = True,
        include_usage: bool = True,
        name: str = "openai",
        capabilities: Capabilities | None = None,
        reasoning: ReasoningConfig | None = None,
    ) -> None:
        """Create the provider.

        Args:
            model: The model id (the body's `model` comes from the target).
            client: An SDK client to use as is (the caller owns it and should build it with
                `max_retries=0`); otherwise one is built on first use.
            api_key: The API key; None reads `OPENAI_API_KEY` (the SDK default). With a
                `base_url` and no key anywhere, a placeholder is sent.
            base_url: An OpenAI-compatible server, e.g. `http://localhost:8000/v1`.
            timeout: Per-request timeout in seconds; None keeps the SDK default.
            max_tokens: Output limit rendered as `max_completion_tokens`.
            prompt_cache_key: Send the session id as `prompt_cache_key` (turn off for servers
                that reject unknown fields).
            include_usage: Ask for the usage chunk (`stream_options.include_usage`).
            name: Provider name in messages and errors (`openai`, `openai-compat`, ...).
            capabilities: What the model can do.
            reasoning: Effort (`reasoning_effort`), and whether completed turns send a server's
                reasoning back.
        """
        super().__init__(
            name=name,
            client=client,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            capabilities=capabilities,
            max_output_tokens=max_tokens,
        )
        self._target = OpenAIChatTarget(
            model=model,
            max_tokens=max_tokens,
            prompt_cache_key=prompt_cache_key,
            reasoning=reasoning or ReasoningConfig(),
        )
        self._include_usage = include_usage

    @property
    def target(self) -> OpenAIChatTarget:
        """The placement target whose bodies this provider accepts."""
        return self._target

    @property
    def reasoning(self) -> ReasoningConfig:
        """How the model reasons (sent with every request from now on when set)."""
        return self._target.reasoning

    @reasoning.setter
    def reasoning(self, value: ReasoningConfig) -> None:
        self._target = dataclasses.replace(self._target, reasoning=value)

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Send `request` (a Chat Completions body) and yield its events; the last one is `Completed`."""
        body = self._body(request, "messages")
        body["stream"] = True
        if self._include_usage:
            body["stream_options"] = {**body.get("stream_options", {}), "include_usage": True}
        client, params = self._sdk(), cast("CompletionCreateParamsStreaming", body)
        reply = _ChatReply(self._name)
        async with aclosing(relay(lambda: client.chat.completions.create(**params), reply, self._reraise)) as events:
            async for event in events:
                yield event


@dataclass
class _ChatCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _ChatReply:
    provider: str
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


class OpenAIResponsesProvider(_OpenAIProvider):
    """A `Provider` for the OpenAI Responses API (stateless: the whole input every time)."""

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_output_tokens: int | None = None,
        prompt_cache_key: bool = True,
        name: str = "openai-responses",
        capabilities: Capabilities | None = None,
        reasoning: ReasoningConfig | None = None,
    ) -> None:
        """Create the provider; the arguments are those of `OpenAIChatProvider` (`reasoning`: effort and summaries)."""
        super().__init__(
            name=name,
            client=client,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            capabilities=capabilities,
            max_output_tokens=max_output_tokens,
        )
        self._target = OpenAIResponsesTarget(
            model=model,
            max_output_tokens=max_output_tokens,
            prompt_cache_key=prompt_cache_key,
            reasoning=reasoning or ReasoningConfig(),
        )

    @property
    def target(self) -> OpenAIResponsesTarget:
        """The placement target whose bodies this provider accepts."""
        return self._target

    @property
    def reasoning(self) -> ReasoningConfig:
        """How the model reasons (sent with every request from now on when set)."""
        return self._target.reasoning

    @reasoning.setter
    def reasoning(self, value: ReasoningConfig) -> None:
        self._target = dataclasses.replace(self._target, reasoning=value)

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Send `request` (a Responses body) and yield its events; the last one is `Completed`."""
        body = self._body(request, "input")
        body["stream"] = True
        client, params = self._sdk(), cast("ResponseCreateParamsStreaming", body)
        reply = _ResponsesReply(self._name)
        async with aclosing(relay(lambda: client.responses.create(**params), reply, self._reraise)) as events:
            async for event in events:
                yield event


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
class _ResponsesReply:
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
    """The usage of a response whose input count includes the tokens read from the cache (`details.cached_tokens`)."""
    cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return Usage(input=input_tokens - cached, output=output_tokens, cache_read=cached, reasoning=reasoning)


def _arguments(provider: str, call_id: str, raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ProviderError(provider, f"tool call {call_id}: arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ProviderError(provider, f"tool call {call_id}: arguments are not a JSON object")
    return value
