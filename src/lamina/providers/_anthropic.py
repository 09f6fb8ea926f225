"""The Anthropic Messages adapter on the official `anthropic` SDK (I/O: network).

`AnthropicProvider.stream` sends a body rendered for `AnthropicTarget` with `stream=True` and
maps the raw server-sent events: `text_delta` → `TextDelta`; a `tool_use` block's
`input_json_delta` pieces are joined and parsed at its `content_block_stop` → `ToolCallRequest`;
`thinking_delta` → `ReasoningDelta`, and each `thinking` block (its `signature_delta` joined) or
`redacted_thinking` block (whole at its start), and a tool search's blocks → `Completed.reasoning`, in order;
usage comes in `message_start` and `message_delta` (cumulative: the last value wins). SDK errors
become `ProviderError`s in `map_anthropic_error`; `_retry` retries, never the SDK (imported lazily).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NoReturn, cast

from lamina.errors import (
    MissingExtraError,
    TransientServerError,
    UsageError,
)
from lamina.placement import (
    CLEAR_TOOL_USES,
    CONTEXT_MANAGEMENT_BETA,
    AnthropicTarget,
    CacheTtl,
    ReasoningConfig,
    RenderedRequest,
    SdkManagedPrompt,
    tool_change_betas,
)
from lamina.pricing import ContextEditing
from lamina.providers._adapter import SdkAdapter
from lamina.providers._anthropic_errors import PROVIDER_NAME, map_anthropic_error
from lamina.providers._diagnostics import anthropic_cache_miss, asked_diagnostics
from lamina.providers._discovery import DISCOVERY_TIMEOUT, ModelCache, discover_anthropic
from lamina.providers._errors import require_sdk
from lamina.providers._model_table import shipped_capabilities
from lamina.providers._prewarm import anthropic_prewarm_body, raw_usage
from lamina.providers._provider import (
    Capabilities,
    Completed,
    ProviderEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
)
from lamina.providers._sdk_stream import call_input, relay
from lamina.providers._server_compaction import ServerCompacted, anthropic_compact
from lamina.session import AppliedEdit, CacheMiss, Reasoning, Usage

if TYPE_CHECKING:
    import anthropic
    from anthropic import AsyncStream
    from anthropic.types import (
        AnthropicBetaParam,
        RawContentBlockDeltaEvent,
        RawContentBlockStartEvent,
        RawMessageStreamEvent,
    )
    from anthropic.types.beta import (
        BetaRawContentBlockDeltaEvent,
        BetaRawContentBlockStartEvent,
        BetaRawMessageStreamEvent,
    )
    from anthropic.types.message_create_params import MessageCreateParamsStreaming


_FEATURE: Final = "the Anthropic provider"

INTERLEAVED_THINKING_BETA: Final = "interleaved-thinking-2025-05-14"
"""The `anthropic-beta` value that lets `enabled` thinking come between tool calls (automatic with `adaptive`)."""


class AnthropicProvider(SdkAdapter[AnthropicTarget, "anthropic.AsyncAnthropic"]):
    """A `Provider` for the Anthropic Messages API (or any server speaking it)."""

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_tokens: int = 8192,
        anthropic_cache_ttl: CacheTtl = "5m",
        stable_ttl: CacheTtl = "1h",
        capabilities: Capabilities | None = None,
        reasoning: ReasoningConfig | None = None,
        context_editing: ContextEditing = "priced",
    ) -> None:
        """Create the provider.

        Args:
            model: The model id sent with every request (the body's `model` comes from the target).
            client: An SDK client to use as is (the caller owns it and should build it with
                `max_retries=0`); otherwise one is built on first use from `api_key`,
                `base_url` and `timeout`.
            api_key: The API key; None reads `ANTHROPIC_API_KEY` (the SDK default).
            base_url: Another server speaking the Messages API; None uses the SDK default.
            timeout: Per-request timeout in seconds; None keeps the SDK default.
            max_tokens: Output limit rendered into every request.
            anthropic_cache_ttl: TTL of the rolling history breakpoints.
            stable_ttl: TTL of the tools + system prefix breakpoint.
            capabilities: What the model can do; None reads the shipped table (`discover` then asks the
                models endpoint).
            reasoning: Thinking and effort, and whether completed turns send their thinking back.
            context_editing: Which of the server's context edits requests may carry, of those the
                model has (`capabilities.context_editing`): all (`priced`, `server`), only
                `clear_thinking` (`lamina`: prunes are Lamina's own), none (`off`).
        """
        require_sdk("anthropic", _FEATURE, "anthropic")
        super().__init__(client, api_key, base_url, timeout)
        self._given = capabilities is not None
        defaults = Capabilities(max_output_tokens=max_tokens, vision=True, pdf_input=True, cache_regime="anthropic")
        self._capabilities = capabilities or shipped_capabilities("anthropic", model, defaults=defaults)
        self._context_editing = context_editing
        self._target = AnthropicTarget(
            model=model,
            max_tokens=max_tokens,
            anthropic_cache_ttl=anthropic_cache_ttl,
            stable_ttl=stable_ttl,
            reasoning=reasoning or ReasoningConfig(),
            context_edits=allowed_edits(self._capabilities, context_editing),
            tool_changes=self._capabilities.tool_changes,
        )

    @property
    def name(self) -> str:
        """`anthropic`."""
        return PROVIDER_NAME

    @property
    def context_editing(self) -> ContextEditing:
        """Which of the server's context edits requests may carry (`context_editing=`); the target follows a change."""
        return self._context_editing

    @context_editing.setter
    def context_editing(self, value: ContextEditing) -> None:
        self._context_editing = value
        self._target = dataclasses.replace(self._target, context_edits=allowed_edits(self._capabilities, value))

    async def discover(self, *, cache: ModelCache | None = None, timeout: float = DISCOVERY_TIMEOUT) -> Capabilities:
        """Read the model's capabilities from `GET /v1/models/{id}` (cached) and use them; never raises.

        Capabilities given to the constructor stay as given. See `lamina.providers.discover_capabilities`.
        """
        if not self._given:
            model, cache = self._target.model, cache or ModelCache()
            self._capabilities = await discover_anthropic(self._sdk, model, self._capabilities, cache, timeout)
            # what a body may ask for follows what the model turned out to have
            edits = allowed_edits(self._capabilities, self._context_editing)
            self._target = dataclasses.replace(
                self._target, context_edits=edits, tool_changes=self._capabilities.tool_changes
            )
        return self._capabilities

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Send `request` (an Anthropic Messages body) and yield its events; the last one is `Completed`."""
        if isinstance(request, SdkManagedPrompt) or "messages" not in request:
            raise UsageError(f"AnthropicProvider needs an Anthropic Messages body, got {type(request).__name__}")
        params = cast("MessageCreateParamsStreaming", {**request, "stream": True})
        reply = _Reply(diagnosed=asked_diagnostics(request))
        async with aclosing(relay(lambda: self._open(params), reply, _reraise)) as events:
            async for event in events:
                yield event

    async def server_compact(self, request: Mapping[str, Any]) -> ServerCompacted:
        """Send a standalone compaction request (beta `compact-2026-09-04`); the provider's signed block comes back."""
        return await anthropic_compact(self._sdk(), request)

    async def prewarm(self, request: Mapping[str, Any]) -> Usage:
        """Send `request` as a pre-warm (`max_tokens: 0`, not streamed): the cache written, nothing generated."""
        params: Any = anthropic_prewarm_body(request)
        client = self._sdk()
        changes = tool_change_betas(params)
        if "context_management" in params or changes:  # beta fields, as `_open` sends them
            managed = [CONTEXT_MANAGEMENT_BETA] if "context_management" in params else []
            betas = [b for b in dict.fromkeys([*managed, *changes]) if b]
            beta_create: Any = client.beta.messages.with_raw_response.create
            return await raw_usage(lambda: beta_create(**params, betas=betas), map_anthropic_error)
        create: Any = client.messages.with_raw_response.create
        return await raw_usage(
            lambda: create(**params, extra_headers=_beta_headers(params, client)), map_anthropic_error
        )

    async def _open(
        self, params: MessageCreateParamsStreaming
    ) -> AsyncStream[RawMessageStreamEvent] | AsyncStream[BetaRawMessageStreamEvent]:
        client = self._sdk()
        changes = tool_change_betas(params)  # tool_addition / tool_removal blocks: beta content
        if "context_management" in params or changes:  # a beta field: sent through the SDK's beta messages path
            managed = [CONTEXT_MANAGEMENT_BETA] if "context_management" in params else []
            own = [*_beta_headers(params, client).get("anthropic-beta", "").split(","), *managed, *changes]
            betas: list[AnthropicBetaParam] = [b for b in dict.fromkeys(own) if b]
            create: Any = client.beta.messages.create  # the same body, its beta fields typed by the beta params
            stream: AsyncStream[BetaRawMessageStreamEvent] = await create(**params, betas=betas)
            return stream
        return await client.messages.create(**params, extra_headers=_beta_headers(params, client))

    def _sdk(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            try:
                import anthropic
            except ImportError as exc:
                raise MissingExtraError.of(exc, _FEATURE, "anthropic") from None
            options: dict[str, Any] = {} if self._timeout is None else {"timeout": self._timeout}
            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key, base_url=self._base_url, max_retries=0, **options
            )
        return self._client


@dataclass
class _ToolBlock:
    call_id: str
    name: str
    initial: dict[str, Any]
    json_parts: list[str] = field(default_factory=list)


@dataclass
class _ThinkingBlock:
    """A `thinking` block as it streams (text and signature in pieces), or a `redacted_thinking` block."""

    redacted: bool = False
    text: list[str] = field(default_factory=list)
    signature: list[str] = field(default_factory=list)
    data: str = ""

    def reasoning(self) -> Reasoning:
        if self.redacted:
            return Reasoning(provider="anthropic", kind="redacted_thinking", data=self.data)
        return Reasoning(
            provider="anthropic", kind="thinking", text="".join(self.text), signature="".join(self.signature)
        )


@dataclass
class _ServerBlock:
    """A server tool's block (a tool search's `server_tool_use` or `tool_search_tool_result`), kept as returned."""

    block: dict[str, Any]
    """The block's fields as the server sent them (`to_dict`: only those it set)."""
    json_parts: list[str] = field(default_factory=list)
    """A `server_tool_use`'s input, streamed as `input_json_delta` pieces."""

    def reasoning(self) -> Reasoning:
        raw = "".join(self.json_parts)
        block = {**self.block, "input": json.loads(raw)} if raw.strip() else self.block
        return Reasoning(provider="anthropic", kind="server_tool", data=json.dumps(block, separators=(",", ":")))


@dataclass
class _Reply:
    """What the stream of one response has said so far."""

    text: list[str] = field(default_factory=list)
    thinking: list[_ThinkingBlock | _ServerBlock] = field(default_factory=list)
    """Every thinking, redacted thinking and server tool block, in the order the blocks started."""
    open_server: dict[int, _ServerBlock] = field(default_factory=dict)
    open_thinking: dict[int, _ThinkingBlock] = field(default_factory=dict)
    tools: dict[int, _ToolBlock] = field(default_factory=dict)
    calls: list[ToolCallRequest] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""
    stop_reason: str | None = None
    stopped: bool = False
    context_edits: tuple[AppliedEdit, ...] = ()
    diagnosed: bool = False
    """The request asked for cache diagnostics: `message_start` carries them."""
    response_id: str = ""
    cache_miss: CacheMiss | None = None

    @property
    def finished(self) -> bool:
        """Never: the stream is read to its end (`message_stop` is its last event)."""
        return False

    def feed(self, event: RawMessageStreamEvent | BetaRawMessageStreamEvent) -> Iterator[ProviderEvent]:
        # by the event's `type`: the beta path (context editing) streams the same events as beta classes
        if event.type == "message_start":
            self.model = event.message.model
            self.response_id = event.message.id
            if self.diagnosed:
                self.cache_miss = anthropic_cache_miss(event.message.diagnostics)
            self._count(event.message.usage)
        elif event.type == "content_block_start":
            yield from self._start(event)
        elif event.type == "content_block_delta":
            yield from self._delta(event)
        elif event.type == "content_block_stop":
            self.open_thinking.pop(event.index, None)
            self.open_server.pop(event.index, None)
            tool = self.tools.pop(event.index, None)
            if tool is not None:
                call = ToolCallRequest(tool.call_id, tool.name, _tool_input(tool))
                self.calls.append(call)
                yield call
        elif event.type == "message_delta":
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            self._count(event.usage)
            self.context_edits = applied_edits(getattr(event, "context_management", None)) or self.context_edits
        elif event.type == "message_stop":
            self.stopped = True

    def _start(self, event: RawContentBlockStartEvent | BetaRawContentBlockStartEvent) -> Iterator[ProviderEvent]:
        block = event.content_block
        if block.type == "tool_use":
            initial = block.input if isinstance(block.input, dict) else {}
            self.tools[event.index] = _ToolBlock(block.id, block.name, initial)
        elif block.type == "text" and block.text:
            self.text.append(block.text)
            yield TextDelta(block.text)
        elif block.type == "thinking":  # empty at the start, unless a server sends the block whole
            thinking = _ThinkingBlock(text=[block.thinking], signature=[block.signature])
            self.thinking.append(thinking)
            self.open_thinking[event.index] = thinking
            if block.thinking:
                yield ReasoningDelta(block.thinking)
        elif block.type == "redacted_thinking":  # no delta type: it always arrives whole
            self.thinking.append(_ThinkingBlock(redacted=True, data=block.data))
        elif block.type in ("server_tool_use", "tool_search_tool_result"):  # a tool search: kept as returned
            server = _ServerBlock(block.to_dict(mode="json"))
            self.thinking.append(server)
            self.open_server[event.index] = server

    def _delta(self, event: RawContentBlockDeltaEvent | BetaRawContentBlockDeltaEvent) -> Iterator[ProviderEvent]:
        delta = event.delta
        if delta.type == "text_delta":
            self.text.append(delta.text)
            yield TextDelta(delta.text)
        elif delta.type == "input_json_delta" and event.index in self.tools:
            self.tools[event.index].json_parts.append(delta.partial_json)
        elif delta.type == "input_json_delta" and event.index in self.open_server:
            self.open_server[event.index].json_parts.append(delta.partial_json)
        elif delta.type == "thinking_delta" and event.index in self.open_thinking:
            self.open_thinking[event.index].text.append(delta.thinking)
            if delta.thinking:
                yield ReasoningDelta(delta.thinking)
        elif delta.type == "signature_delta" and event.index in self.open_thinking:
            self.open_thinking[event.index].signature.append(delta.signature)

    def _count(self, usage: object) -> None:
        # message_start carries `Usage`, message_delta `MessageDeltaUsage`; both counts are cumulative.
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = getattr(usage, name, None)
            if isinstance(value, int):
                self.usage[name] = value
        thinking = getattr(getattr(usage, "output_tokens_details", None), "thinking_tokens", None)
        if isinstance(thinking, int):
            self.usage["thinking_tokens"] = thinking

    def completed(self) -> Completed:
        if not self.stopped:
            raise TransientServerError(PROVIDER_NAME, "the event stream ended before message_stop")
        stop = self.stop_reason or "end_turn"
        return Completed(
            text="".join(self.text),
            tool_calls=tuple(self.calls),
            stop_reason=stop,
            usage=Usage(
                input=self.usage.get("input_tokens", 0),
                output=self.usage.get("output_tokens", 0),
                cache_read=self.usage.get("cache_read_input_tokens", 0),
                cache_write=self.usage.get("cache_creation_input_tokens", 0),
                reasoning=self.usage.get("thinking_tokens", 0),
            ),
            model=self.model,
            raw_stop_reason=stop,
            reasoning=tuple(block.reasoning() for block in self.thinking),
            context_edits=self.context_edits,
            response_id=self.response_id,
            cache_miss=self.cache_miss,
        )


def _beta_headers(params: Mapping[str, Any], client: anthropic.AsyncAnthropic) -> dict[str, str]:
    """`anthropic-beta` with interleaved thinking (and the client's own) when the body turns `enabled` thinking on.

    With `enabled` thinking the model thinks only before its first tool call unless the beta is
    on; with `adaptive` thinking interleaving is automatic and no header is needed.
    """
    thinking = params.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return {}
    own = client.default_headers.get("anthropic-beta")
    betas = [b.strip() for b in own.split(",") if b.strip()] if isinstance(own, str) else []
    if INTERLEAVED_THINKING_BETA not in betas:
        betas.append(INTERLEAVED_THINKING_BETA)
    return {"anthropic-beta": ",".join(betas)}


def allowed_edits(capabilities: Capabilities, setting: ContextEditing) -> frozenset[str]:
    """The context edits a request may carry: those the model has, as the session's setting allows."""
    if setting == "off":
        return frozenset()
    if setting == "lamina":
        return capabilities.context_editing - {CLEAR_TOOL_USES}
    return capabilities.context_editing


def applied_edits(response: object) -> tuple[AppliedEdit, ...]:
    """The edits a response's `context_management` says the server applied (none when it has no such field)."""
    edits = getattr(response, "applied_edits", None) or ()
    return tuple(
        AppliedEdit(
            kind=str(edit.type),
            cleared_input_tokens=getattr(edit, "cleared_input_tokens", 0),
            cleared_tool_uses=getattr(edit, "cleared_tool_uses", 0),
            cleared_thinking_turns=getattr(edit, "cleared_thinking_turns", 0),
        )
        for edit in edits
    )


def _tool_input(tool: _ToolBlock) -> dict[str, Any]:
    subject = f"tool_use {tool.call_id} ({tool.name}): input is"
    return call_input("".join(tool.json_parts), PROVIDER_NAME, subject, empty=tool.initial)


def _reraise(exc: Exception) -> NoReturn:
    mapped = map_anthropic_error(exc)
    if mapped is None:
        raise exc
    raise mapped from exc
