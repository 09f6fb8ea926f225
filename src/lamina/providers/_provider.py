"""The provider protocol: send a rendered request, stream events, report usage (I/O at the edge).

A provider takes a request body rendered for its `target` (see `lamina.placement`) and yields
`ProviderEvent`s: text deltas and tool calls as they arrive, then exactly one `Completed` with the
stop reason and usage. Errors are the typed `ProviderError` subclasses of `lamina.errors`, mapped
from the SDK's exceptions in one place per provider. Retries of transient errors happen in
`lamina.providers._retry`, not in the SDK clients (which are built with `max_retries=0`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from lamina.placement import RenderedRequest, RenderTarget
from lamina.session import AppliedEdit, CacheMiss, ProviderSession, Reasoning, Usage

CacheRegime: TypeAlias = Literal["anthropic", "openai-automatic", "openai-breakpoints", "none"]
"""How a model's prompt cache works: Anthropic's breakpoints, OpenAI's automatic prefix cache (before GPT-5.6),
OpenAI's explicit and implicit breakpoints with TTL options and billed writes (GPT-5.6 and later), or none known."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider/model can do, for placement, attachment and context-feature decisions.

    Every provider-side context feature (context editing, server compaction, diagnostics, tool search)
    is used only where these say the model has it.
    """

    context_window: int = 200_000
    max_output_tokens: int = 8_192
    vision: bool = False
    pdf_input: bool = False
    native_resume: bool = False
    native_fork: bool = False
    thinking: bool = False
    context_editing: frozenset[str] = frozenset()
    """Server-side edits the model accepts: `clear_tool_uses_20250919`, `clear_thinking_20251015`."""
    server_compaction: frozenset[str] = frozenset()
    """Provider compaction forms: `compact_20260112` (Anthropic's inline edit), `summarize` (its standalone
    request), `responses_compact` (OpenAI's `/responses/compact`), `responses_inline` (its threshold)."""
    cache_diagnostics: bool = False
    cache_regime: CacheRegime = "none"
    tool_search: bool = False
    """Deferred tools (`defer_loading`) found through the provider's own tool-search tool."""
    tool_changes: bool = False
    """`tool_addition`/`tool_removal` blocks change the tool set mid-conversation."""
    system_clear_at: bool = False
    """Mid-conversation system messages with `clear_at`."""
    source: str = ""
    """Where these figures came from (`models endpoint, 2026-12-07`, `shipped table`); empty: the defaults."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's text, as streamed."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's readable reasoning (thinking text, a reasoning summary), as streamed."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A complete tool call the model made (arguments parsed)."""

    call_id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Completed:
    """The end of one model response."""

    text: str
    tool_calls: tuple[ToolCallRequest, ...]
    stop_reason: str
    """Normalised: `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `refusal` or the provider's own word."""
    usage: Usage
    model: str = ""
    raw_stop_reason: str = field(default="", compare=False)
    reasoning: tuple[Reasoning, ...] = ()
    """The response's reasoning blocks, in order, exactly as returned (signatures, encrypted content)."""
    context_edits: tuple[AppliedEdit, ...] = ()
    """What the provider's context editing cleared before the model read the request (`applied_edits`)."""
    response_id: str = ""
    """The provider's id of the response (`msg_...`, `resp_...`; empty: none given)."""
    cache_miss: CacheMiss | None = None
    """The provider's cache diagnostics, when the request asked for them and the response had them."""


@dataclass(frozen=True, slots=True)
class ProviderSessionChanged:
    """The provider-side session to resume the next turn through (sent before `Completed`); persist it."""

    session: ProviderSession


@dataclass(frozen=True, slots=True)
class ProviderCompacted:
    """The provider compacted its own context during the turn (the Claude Agent SDK's compaction)."""

    trigger: str
    """`auto` or `manual`, as the provider says."""
    tokens_before: int = 0


ProviderEvent: TypeAlias = (
    TextDelta | ReasoningDelta | ToolCallRequest | ProviderSessionChanged | ProviderCompacted | Completed
)


class Provider(Protocol):
    """A model backend Lamina can drive."""

    @property
    def name(self) -> str:
        """Short provider name for messages and logs (`anthropic`, `openai`, `scripted`, ...)."""
        ...

    @property
    def target(self) -> RenderTarget:
        """The placement target whose bodies this provider accepts."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What the model in use can do (context window, images, PDFs), for placement and attachments."""
        ...

    def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Send `request` and yield its events; the last one is `Completed`."""
        ...
