"""Lamina: a context engine for LLM agents.

Lamina decides, every turn of an agent session, what the model sees, where it goes in the request
(cache-friendly prefix or per-turn tail), when it is loaded (now, on demand, exactly once) and what
survives compaction, while the whole session history stays durable on disk.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from lamina._lazy import load_lazily

if TYPE_CHECKING:
    from lamina.agent import (
        Agent,
        AgentEvent,
        AgentOptions,
        ModelCallFinished,
        ToolFinished,
        ToolStarted,
        TurnOutcome,
        open_agent,
    )
    from lamina.attachments import NamedBytes
    from lamina.compaction import Summariser
    from lamina.context import Authority, Part, Stability, Tier, ToolSpec, TurnContext
    from lamina.engine import CompactionOutcome, ContextEngine
    from lamina.errors import (
        AttachmentError,
        AuthenticationError,
        ContextOverflowError,
        LaminaError,
        OverloadedError,
        ProviderError,
        RateLimitError,
        SessionCorruptError,
        SessionIOError,
        SessionLockedError,
        SessionNotFoundError,
        UsageError,
    )
    from lamina.placement import (
        AnthropicTarget,
        OpenAIChatTarget,
        OpenAIResponsesTarget,
        SdkManagedTarget,
    )
    from lamina.providers import Provider, ScriptedProvider, provider_from_spec
    from lamina.session import LocalSessionStore, SessionStore
    from lamina.tools import PermissionMode, ToolPipeline
    from lamina.workspace import WorkspaceContext, find_context_files, nearest_context_files

# Names are imported on first use (PEP 562), so `import lamina` (and `lamina --help`) stays fast:
# the loop, the sources' MCP client and the placement code load only when something needs them.
_LAZY: Final = {
    "Agent": "lamina.agent",
    "AgentEvent": "lamina.agent",
    "AgentOptions": "lamina.agent",
    "ModelCallFinished": "lamina.agent",
    "ToolFinished": "lamina.agent",
    "ToolStarted": "lamina.agent",
    "TurnOutcome": "lamina.agent",
    "open_agent": "lamina.agent",
    "NamedBytes": "lamina.attachments",
    "Summariser": "lamina.compaction",
    "CompactionOutcome": "lamina.engine",
    "ContextEngine": "lamina.engine",
    "AttachmentError": "lamina.errors",
    "AuthenticationError": "lamina.errors",
    "ContextOverflowError": "lamina.errors",
    "LaminaError": "lamina.errors",
    "OverloadedError": "lamina.errors",
    "ProviderError": "lamina.errors",
    "RateLimitError": "lamina.errors",
    "SessionCorruptError": "lamina.errors",
    "SessionIOError": "lamina.errors",
    "SessionLockedError": "lamina.errors",
    "SessionNotFoundError": "lamina.errors",
    "UsageError": "lamina.errors",
    "Authority": "lamina.context",
    "Part": "lamina.context",
    "Stability": "lamina.context",
    "Tier": "lamina.context",
    "AnthropicTarget": "lamina.placement",
    "OpenAIChatTarget": "lamina.placement",
    "OpenAIResponsesTarget": "lamina.placement",
    "SdkManagedTarget": "lamina.placement",
    "Provider": "lamina.providers",
    "ScriptedProvider": "lamina.providers",
    "provider_from_spec": "lamina.providers",
    "LocalSessionStore": "lamina.session",
    "SessionStore": "lamina.session",
    "PermissionMode": "lamina.tools",
    "ToolPipeline": "lamina.tools",
    "ToolSpec": "lamina.context",
    "TurnContext": "lamina.context",
    "WorkspaceContext": "lamina.workspace",
    "find_context_files": "lamina.workspace",
    "nearest_context_files": "lamina.workspace",
}


def __getattr__(name: str) -> object:
    return load_lazily(globals(), __name__, _LAZY, name)


# a library logs, it does not print: applications choose handlers for the `lamina` loggers
logging.getLogger("lamina").addHandler(logging.NullHandler())

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentOptions",
    "AnthropicTarget",
    "AttachmentError",
    "AuthenticationError",
    "Authority",
    "CompactionOutcome",
    "ContextEngine",
    "ContextOverflowError",
    "LaminaError",
    "LocalSessionStore",
    "ModelCallFinished",
    "NamedBytes",
    "OpenAIChatTarget",
    "OpenAIResponsesTarget",
    "OverloadedError",
    "Part",
    "PermissionMode",
    "Provider",
    "ProviderError",
    "RateLimitError",
    "ScriptedProvider",
    "SdkManagedTarget",
    "SessionCorruptError",
    "SessionIOError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionStore",
    "Stability",
    "Summariser",
    "Tier",
    "ToolFinished",
    "ToolPipeline",
    "ToolSpec",
    "ToolStarted",
    "TurnContext",
    "TurnOutcome",
    "UsageError",
    "WorkspaceContext",
    "find_context_files",
    "nearest_context_files",
    "open_agent",
    "provider_from_spec",
]
