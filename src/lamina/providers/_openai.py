"""OpenAI adapters on the official `openai` SDK: Chat Completions and Responses (I/O: network).

Both work against OpenAI-compatible servers through `base_url`; `map_openai_error` (in
`_openai_errors`) is the one place SDK exceptions become `ProviderError`s, and the SDK client never
retries (the SDK is imported on the first request). Both read the model's reasoning (Responses
reasoning items, a compatible server's `reasoning_content` or `reasoning`). How each stream is read,
and how usage is counted, is in `docs/providers.md`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar, cast

from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    MissingExtraError,
    UsageError,
)
from lamina.placement import (
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    ReasoningConfig,
    RenderedRequest,
    SdkManagedPrompt,
)
from lamina.providers._adapter import SdkAdapter
from lamina.providers._compat_wire import conservative_body, output_cap, overflow_window
from lamina.providers._discovery import DISCOVERY_TIMEOUT, ModelCache, discover_openai_compatible
from lamina.providers._errors import require_sdk
from lamina.providers._model_table import openai_capabilities
from lamina.providers._openai_errors import map_openai_error
from lamina.providers._openai_replies import ChatReply, ResponsesReply
from lamina.providers._prewarm import openai_prewarm_body, raw_usage
from lamina.providers._provider import (
    Capabilities,
    ProviderEvent,
)
from lamina.providers._sdk_stream import relay
from lamina.providers._server_compaction import ServerCompacted, openai_compact
from lamina.session import Usage

if TYPE_CHECKING:
    import openai
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

_FEATURE: Final = "the OpenAI provider"
_UNUSED_KEY: Final = "unused"
"""Sent to OpenAI-compatible servers when no key is configured: they ignore it, the SDK insists on one."""


_Target = TypeVar("_Target", OpenAIChatTarget, OpenAIResponsesTarget)


class _OpenAIProvider(SdkAdapter[_Target, "openai.AsyncOpenAI"]):
    """The SDK client and settings both OpenAI adapters share."""

    def __init__(
        self,
        target: _Target,
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
        super().__init__(client, api_key, base_url, timeout)
        self._name = name
        self._given = capabilities is not None
        chat = isinstance(target, OpenAIChatTarget)
        self._capabilities = capabilities or openai_capabilities(
            target.model, compatible=base_url is not None, max_output_tokens=max_output_tokens, chat=chat
        )
        self._model = target.model
        self._compatible = False
        """A local or other compatible server (`compatible=True`): the conservative wire, windows from its errors."""
        breakpoints = self._capabilities.cache_regime == "openai-breakpoints"  # known once the capabilities are
        self._target = dataclasses.replace(target, cache_breakpoints=breakpoints)

    @property
    def name(self) -> str:
        return self._name

    async def discover(self, *, cache: ModelCache | None = None, timeout: float = DISCOVERY_TIMEOUT) -> Capabilities:
        """Read a compatible server's window in `/v1/models` (OpenAI's reports none) once per process; never raises."""
        if not self._given and self._base_url is not None:
            found, cache = self._capabilities, cache or ModelCache()
            self._capabilities = await discover_openai_compatible(
                self._sdk, self._model, found, cache, timeout, probe=self._compatible
            )
        return self._capabilities

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
        if isinstance(mapped, ContextOverflowError) and self._compatible:
            mapped = self._learn_window(mapped, getattr(exc, "body", None))
        raise mapped from exc

    def _learn_window(self, error: ContextOverflowError, body: object) -> ContextOverflowError:
        """A compatible server's overflow that names its window: the window is used from now on, and said."""
        found = overflow_window(body, str(error))
        if found is None:
            return error
        window, needed = found
        if not self._given:
            source = f"{self._base_url}: its overflow error"
            self._capabilities = dataclasses.replace(self._capabilities, context_window=window, source=source)
        asked = f", the request needs {needed:,}" if needed is not None else ""
        said = str(error).partition(": ")[2]  # the server's words, without the provider and status
        message = f"the server's context window is {window:,} tokens{asked} ({said})"
        return ContextOverflowError(self._name, message, status=error.status, body=error.body)


class OpenAIChatProvider(_OpenAIProvider[OpenAIChatTarget]):
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
        compatible: bool = False,
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
            compatible: `base_url` is a local or other OpenAI-compatible server (`openai-compat:` specs):
                text-only content goes as a string, `max_tokens` is always sent (the setting, else a
                quarter of the window), `tool_choice: "auto"` with tools; the window is read from the
                server's own endpoints and from its overflow errors.
        """
        target = OpenAIChatTarget(
            model=model,
            max_tokens=max_tokens,
            prompt_cache_key=prompt_cache_key,
            reasoning=reasoning or ReasoningConfig(),
        )
        super().__init__(
            target,
            name=name,
            client=client,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            capabilities=capabilities,
            max_output_tokens=max_tokens,
        )
        self._include_usage = include_usage
        self._max_tokens = max_tokens
        self._compatible = compatible and base_url is not None

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Send `request` (a Chat Completions body) and yield its events; the last one is `Completed`."""
        body = self._body(request, "messages")
        if self._compatible:  # a local server: the wire every one of them reads
            body = conservative_body(body, max_tokens=output_cap(self._capabilities, self._max_tokens))
        body["stream"] = True
        if self._include_usage:
            body["stream_options"] = {**body.get("stream_options", {}), "include_usage": True}
        client, params = self._sdk(), cast("CompletionCreateParamsStreaming", body)
        reply = ChatReply(self._name, server=str(client.base_url))
        async with aclosing(relay(lambda: client.chat.completions.create(**params), reply, self._reraise)) as events:
            async for event in events:
                yield event


class OpenAIResponsesProvider(_OpenAIProvider[OpenAIResponsesTarget]):
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
        target = OpenAIResponsesTarget(
            model=model,
            max_output_tokens=max_output_tokens,
            prompt_cache_key=prompt_cache_key,
            reasoning=reasoning or ReasoningConfig(),
        )
        super().__init__(
            target,
            name=name,
            client=client,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            capabilities=capabilities,
            max_output_tokens=max_output_tokens,
        )

    async def server_compact(self, request: Mapping[str, Any]) -> ServerCompacted:
        """Send a `/responses/compact` body; its user messages and its encrypted compaction item come back."""
        return await openai_compact(self._sdk(), request, name=self._name)

    async def prewarm(self, request: Mapping[str, Any]) -> Usage:
        """Send `request` as a pre-warm (`prompt_cache_options.prewarm`; GPT-5.6 and later): nothing generated."""
        body: Any = openai_prewarm_body(request)
        create: Any = self._sdk().responses.with_raw_response.create
        return await raw_usage(lambda: create(**body), lambda exc: map_openai_error(exc, provider=self._name))

    async def stream(self, request: RenderedRequest) -> AsyncIterator[ProviderEvent]:
        """Send `request` (a Responses body) and yield its events; the last one is `Completed`."""
        body = self._body(request, "input")
        body["stream"] = True
        client, params = self._sdk(), cast("ResponseCreateParamsStreaming", body)
        reply = ResponsesReply(self._name)
        async with aclosing(relay(lambda: client.responses.create(**params), reply, self._reraise)) as events:
            async for event in events:
                yield event
