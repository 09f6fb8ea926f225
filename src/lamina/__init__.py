"""Lamina: a context engine for LLM agents.

Lamina decides, every turn of an agent session, what the model sees, where it goes in the request
(cache-friendly prefix or per-turn tail), when it is loaded (now, on demand, exactly once) and what
survives compaction, while the whole session history stays durable on disk.
"""

from __future__ import annotations

import logging

from lamina.agent import Agent, AgentEvent, ModelCallFinished, ToolFinished, ToolStarted, TurnOutcome, open_agent
from lamina.compaction.summarize import DeterministicSummariser, ProviderSummariser, Summariser
from lamina.defang import defang
from lamina.engine import CompactionEvent, CompactionOutcome, ContextEngine
from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    LaminaError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    SessionCorruptError,
    SessionLockedError,
    SessionNotFoundError,
    UsageError,
)
from lamina.parts import Authority, Part, Stability, Tier
from lamina.placement import (
    AnthropicTarget,
    OpenAIChatTarget,
    OpenAIResponsesTarget,
    SdkManagedTarget,
    render,
)
from lamina.providers import Provider, ScriptedProvider, provider_from_spec
from lamina.session.store import LocalSessionStore, SessionStore
from lamina.tools import PermissionMode, ToolPipeline
from lamina.turn import ToolSpec, TurnContext
from lamina.workspace import WorkspaceContext, find_context_files, nearest_context_files

# a library logs, it does not print: applications choose handlers for the `lamina` loggers
logging.getLogger("lamina").addHandler(logging.NullHandler())

__all__ = [
    "Agent",
    "AgentEvent",
    "AnthropicTarget",
    "AuthenticationError",
    "Authority",
    "CompactionEvent",
    "CompactionOutcome",
    "ContextEngine",
    "ContextOverflowError",
    "DeterministicSummariser",
    "LaminaError",
    "LocalSessionStore",
    "ModelCallFinished",
    "OpenAIChatTarget",
    "OpenAIResponsesTarget",
    "OverloadedError",
    "Part",
    "PermissionMode",
    "Provider",
    "ProviderError",
    "ProviderSummariser",
    "RateLimitError",
    "ScriptedProvider",
    "SdkManagedTarget",
    "SessionCorruptError",
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
    "defang",
    "find_context_files",
    "nearest_context_files",
    "open_agent",
    "provider_from_spec",
    "render",
]
