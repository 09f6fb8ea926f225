"""Model providers: the protocol, the Anthropic and OpenAI adapters, the scripted provider and retries (I/O: network).

The SDK-backed adapters (`AnthropicProvider`, `OpenAIChatProvider`, `OpenAIResponsesProvider`,
`ClaudeAgentProvider`) are imported on first use, and each imports its SDK (extra `anthropic`,
`openai`, `claude`; `MissingExtraError` names it) only on its first request: scripted or offline runs
never load one. The scripted provider is imported on first use too: it bills its usage with the
cache simulator (`lamina.cachesim`). `provider_from_spec` turns a command-line spec into a provider.
A provider's `capabilities` come from the shipped table (`models.toml`) until `discover_capabilities`
reads its models endpoint (cached in the user's cache folder by `ModelCache`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from lamina.errors import UsageError
from lamina.providers._diagnostics import ask_cache_diagnostics
from lamina.providers._prewarm import Prewarmer
from lamina.providers._provider import (
    CacheRegime,
    Capabilities,
    Completed,
    Provider,
    ProviderCompacted,
    ProviderEvent,
    ProviderSessionChanged,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
)
from lamina.providers._retry import RetryNotice, RetryPolicy, stream_with_retry
from lamina.providers._server_compaction import ServerCompacted, ServerCompactor

if TYPE_CHECKING:
    from lamina.placement import ReasoningConfig
    from lamina.providers._anthropic import AnthropicProvider
    from lamina.providers._claude_agent import ClaudeAgentProvider
    from lamina.providers._discovery import ModelCache, discover_capabilities
    from lamina.providers._openai import OpenAIChatProvider, OpenAIResponsesProvider
    from lamina.providers._scripted import (
        ScriptedError,
        ScriptedProvider,
        ScriptedResponse,
        ScriptedToolCall,
        ScriptError,
        ScriptExhaustedError,
        ScriptStep,
    )

_LAZY: Final = {
    "AnthropicProvider": "lamina.providers._anthropic",
    "ClaudeAgentProvider": "lamina.providers._claude_agent",
    "ModelCache": "lamina.providers._discovery",
    "discover_capabilities": "lamina.providers._discovery",
    "OpenAIChatProvider": "lamina.providers._openai",
    "OpenAIResponsesProvider": "lamina.providers._openai",
    # the scripted provider bills its usage with the cache simulator, which nothing else at run time needs
    **dict.fromkeys(
        (
            "ScriptedError",
            "ScriptedProvider",
            "ScriptedResponse",
            "ScriptedToolCall",
            "ScriptError",
            "ScriptExhaustedError",
            "ScriptStep",
        ),
        "lamina.providers._scripted",
    ),
}

_SPEC_FORMS: Final = (
    "anthropic:MODEL",
    "openai:MODEL",
    "openai-responses:MODEL",
    "openai-compat:URL#MODEL",
    "claude-agent:MODEL",
    "scripted:FILE",
)
"""The provider specs `provider_from_spec` understands."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def provider_from_spec(
    spec: str, *, reasoning: ReasoningConfig | None = None, max_output_tokens: int | None = None
) -> Provider:
    """The provider a command-line spec names.

    API keys come from the SDKs' usual environment variables (`ANTHROPIC_API_KEY`,
    `OPENAI_API_KEY`); an OpenAI-compatible server needs none.

    Args:
        spec: `anthropic:MODEL`, `openai:MODEL` (Chat Completions), `openai-responses:MODEL`,
            `openai-compat:URL#MODEL` (an OpenAI-compatible server), `claude-agent:MODEL` (the
            Claude Agent SDK, extra `claude`) or `scripted:FILE`.
        reasoning: How the model reasons (`lamina.placement.ReasoningConfig`; each provider reads what it
            has). The Anthropic and OpenAI providers take it; the Claude Agent SDK and a script take none.
        max_output_tokens: The most tokens an answer may have, sent with every request: Anthropic's
            `max_tokens`, OpenAI's `max_completion_tokens` (Chat) or `max_output_tokens` (Responses), a
            compatible server's `max_tokens`. None: each provider's own (Anthropic 8,192; OpenAI none; a
            compatible server a quarter of its window). The Claude Agent SDK and a script take none.

    Returns:
        The provider, built.

    Raises:
        UsageError: A spec of any other form, or a `max_output_tokens` below 1.
        MissingExtraError: The provider's extra is not installed (`anthropic`, `openai`, `claude`).
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not rest.strip():
        raise _bad_spec(spec, "expected KIND:VALUE")
    if max_output_tokens is not None and max_output_tokens < 1:
        raise UsageError(f"max_output_tokens must be a positive integer, not {max_output_tokens}")
    match kind:
        case "anthropic":
            from lamina.providers._anthropic import AnthropicProvider

            if max_output_tokens is None:
                return AnthropicProvider(rest, reasoning=reasoning)
            return AnthropicProvider(rest, reasoning=reasoning, max_tokens=max_output_tokens)
        case "openai":
            from lamina.providers._openai import OpenAIChatProvider

            return OpenAIChatProvider(rest, reasoning=reasoning, max_tokens=max_output_tokens)
        case "openai-responses":
            from lamina.providers._openai import OpenAIResponsesProvider

            return OpenAIResponsesProvider(rest, reasoning=reasoning, max_output_tokens=max_output_tokens)
        case "openai-compat":
            url, sep, model = rest.rpartition("#")
            if not sep or not model or not url.startswith(("http://", "https://")):
                raise _bad_spec(spec, "expected openai-compat:URL#MODEL with an http(s) URL")
            from lamina.providers._openai import OpenAIChatProvider

            # compatible servers do not route by prompt_cache_key, and some reject unknown fields
            return OpenAIChatProvider(
                model,
                base_url=url,
                prompt_cache_key=False,
                name="openai-compat",
                reasoning=reasoning,
                compatible=True,
                max_tokens=max_output_tokens,
            )
        case "claude-agent":
            from lamina.providers._claude_agent import ClaudeAgentProvider

            return ClaudeAgentProvider(rest)
        case "scripted":
            from lamina.providers._scripted import ScriptedProvider

            return ScriptedProvider.from_file(rest)
        case _:
            raise _bad_spec(spec, f"unknown provider {kind!r}")


def _bad_spec(spec: str, reason: str) -> UsageError:
    return UsageError(f"provider spec {spec!r}: {reason}; use one of {', '.join(_SPEC_FORMS)}")


__all__ = [
    "AnthropicProvider",
    "CacheRegime",
    "Capabilities",
    "ClaudeAgentProvider",
    "Completed",
    "ModelCache",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "Prewarmer",
    "Provider",
    "ProviderCompacted",
    "ProviderEvent",
    "ProviderSessionChanged",
    "ReasoningDelta",
    "RetryNotice",
    "RetryPolicy",
    "ScriptError",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedError",
    "ScriptedProvider",
    "ScriptedResponse",
    "ScriptedToolCall",
    "ServerCompacted",
    "ServerCompactor",
    "TextDelta",
    "ToolCallRequest",
    "ask_cache_diagnostics",
    "discover_capabilities",
    "provider_from_spec",
    "stream_with_retry",
]
