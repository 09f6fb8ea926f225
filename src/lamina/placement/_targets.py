"""Render targets: which request format to produce and its placement settings (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from lamina.errors import UsageError

CacheTtl: TypeAlias = Literal["5m", "1h"]
OpenAICacheTtl: TypeAlias = Literal["30m", "12h"]
"""OpenAI's cache lifetimes on GPT-5.6 and later (`prompt_cache_options.ttl`): a minimum, not a maximum."""
Effort: TypeAlias = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
"""How hard a model reasons: Anthropic's `output_config.effort`, OpenAI's `reasoning.effort` / `reasoning_effort`."""

_MIN_THINKING_BUDGET = 1024


@dataclass(frozen=True, slots=True)
class ReasoningConfig:
    """How the model reasons and what of its reasoning goes back; None leaves a setting to the model.

    Each provider reads what it has: Anthropic `thinking`, `budget_tokens`, `display` and `effort`;
    OpenAI Responses `effort` and `summary`; an OpenAI-compatible server `effort` (as
    `reasoning_effort`). `history` says whether completed turns send their reasoning back
    (`docs/reasoning.md`); the turn in progress always does.
    """

    thinking: Literal["enabled", "adaptive", "disabled"] | None = None
    """Anthropic's thinking type; `enabled` takes `budget_tokens`."""
    budget_tokens: int | None = None
    """Anthropic's thinking budget (at least 1024, below `max_tokens`) with `thinking="enabled"`."""
    display: Literal["summarized", "omitted"] | None = None
    """Anthropic: whether thinking text comes back (summarised) or only its signature."""
    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    """OpenAI Responses: reasoning summaries to return."""
    history: Literal["keep", "drop", "priced"] = "priced"
    """Completed turns' reasoning: sent back as it was (the cached prefix holds), left out, or (the
    default) whichever the cost model prices cheaper at each turn (the agent decides; a bare `render` keeps)."""

    def __post_init__(self) -> None:
        if self.budget_tokens is not None:
            if self.thinking != "enabled":
                raise UsageError("reasoning budget_tokens needs thinking 'enabled'")
            if self.budget_tokens < _MIN_THINKING_BUDGET:
                raise UsageError(f"reasoning budget_tokens must be at least {_MIN_THINKING_BUDGET}")
        if self.thinking == "enabled" and self.budget_tokens is None:
            raise UsageError("thinking 'enabled' needs budget_tokens (or use thinking 'adaptive')")

    @property
    def is_set(self) -> bool:
        """Whether anything is asked of the model (else nothing is sent and the model reasons as it does)."""
        return any(v is not None for v in (self.thinking, self.display, self.effort, self.summary))


@dataclass(frozen=True, slots=True)
class AnthropicTarget:
    """Anthropic Messages: stable system blocks cached, a rolling breakpoint on the history.

    `stable_ttl` applies to the tools + system prefix, `anthropic_cache_ttl` to the rolling
    breakpoints. The provider requires 1-hour entries before 5-minute ones, so the rolling TTL
    may not be longer than the stable one. `turn_ttl` is the TTL of the breakpoint on the current
    turn's user message: the next call of a tool loop comes within seconds, but the user's next
    turn may come after minutes, and that breakpoint is what it reads. None (the default) picks
    1 hour when `stable_ttl` is 1 hour, else the rolling TTL.
    """

    model: str
    max_tokens: int = 8192
    anthropic_cache_ttl: CacheTtl = "5m"
    stable_ttl: CacheTtl = "1h"
    turn_ttl: CacheTtl | None = None
    reasoning: ReasoningConfig = ReasoningConfig()
    context_edits: frozenset[str] = frozenset()
    """Server-side context edits a body may ask for (`clear_tool_uses_20250919`, `clear_thinking_20251015`):
    those the model has and the session's setting allows (`lamina.placement._context_edits`)."""
    anthropic_tool_search: Literal["bm25", "regex"] = "bm25"
    """The tool-search tool a request with deferred tools carries (`tool_search_tool_bm25` or `_regex`)."""
    tool_changes: bool = False
    """A change of the tool definitions mid-window goes as `tool_addition` / `tool_removal` blocks, the
    `tools` array kept (`Capabilities.tool_changes`; the provider sets it)."""

    @property
    def turn_breakpoint_ttl(self) -> CacheTtl:
        """The TTL the turn breakpoint gets (see `turn_ttl`)."""
        if self.turn_ttl is not None:
            return self.turn_ttl
        return "1h" if self.stable_ttl == "1h" else self.anthropic_cache_ttl

    def breakpoint_ttl(self, chosen: CacheTtl | None) -> CacheTtl:
        """The TTL the turn breakpoint gets when the session's cost model chose `chosen`.

        `turn_ttl`, when set, wins; a choice the other TTLs cannot take (1 hour with a 5-minute
        stable prefix, 5 minutes with a 1-hour rolling breakpoint) gives way to the default.
        """
        if self.turn_ttl is not None or chosen is None:
            return self.turn_breakpoint_ttl
        if (chosen == "1h" and self.stable_ttl == "5m") or (chosen == "5m" and self.anthropic_cache_ttl == "1h"):
            return self.turn_breakpoint_ttl
        return chosen

    def __post_init__(self) -> None:
        budget = self.reasoning.budget_tokens
        if budget is not None and budget >= self.max_tokens:
            raise UsageError(f"reasoning budget_tokens ({budget}) must be below max_tokens ({self.max_tokens})")
        if self.anthropic_cache_ttl == "1h" and self.stable_ttl == "5m":
            raise UsageError("anthropic_cache_ttl '1h' needs stable_ttl '1h' (1-hour entries must come first)")
        if self.turn_ttl == "1h" and self.stable_ttl == "5m":
            raise UsageError("turn_ttl '1h' needs stable_ttl '1h' (1-hour entries must come first)")
        if self.turn_ttl == "5m" and self.anthropic_cache_ttl == "1h":
            raise UsageError("turn_ttl '5m' needs anthropic_cache_ttl '5m' (1-hour entries must come first)")


@dataclass(frozen=True, slots=True)
class OpenAIChatTarget:
    """OpenAI Chat Completions (and OpenAI-compatible servers)."""

    model: str
    max_tokens: int | None = None
    prompt_cache_key: bool = True
    """Send the session id as `prompt_cache_key` (servers that reject it can turn this off)."""
    reasoning: ReasoningConfig = ReasoningConfig()
    cache_breakpoints: bool = False
    """The model caches by OpenAI's breakpoint regime (GPT-5.6 and later): explicit breakpoints and
    `prompt_cache_options` are sent (30 minutes: Chat Completions has no other TTL). The provider
    sets it from `Capabilities.cache_regime`."""


@dataclass(frozen=True, slots=True)
class OpenAIResponsesTarget:
    """OpenAI Responses."""

    model: str
    max_output_tokens: int | None = None
    prompt_cache_key: bool = True
    reasoning: ReasoningConfig = ReasoningConfig()
    cache_breakpoints: bool = False
    """The model caches by OpenAI's breakpoint regime (GPT-5.6 and later): explicit breakpoints,
    `prompt_cache_options` with a TTL, `prompt_cache_retention` for the 12-hour one. The provider
    sets it from `Capabilities.cache_regime`."""
    openai_cache_ttl: OpenAICacheTtl | None = None
    """The TTL of the turn's breakpoints with `cache_breakpoints`; None: the cost model's choice for
    the turn (its long TTL is 12 hours, its short one 30 minutes), 30 minutes without one."""
    encrypted_reasoning: bool | None = None
    """Ask for `reasoning.encrypted_content` (sent back with the next input, as `store` is false).
    None: for reasoning models (`o1`…, `gpt-5`…, `codex`…) or whenever `reasoning` is set."""

    @property
    def includes_encrypted_reasoning(self) -> bool:
        """Whether requests ask for the reasoning items' encrypted content."""
        if self.encrypted_reasoning is not None:
            return self.encrypted_reasoning
        name = self.model.rsplit("/", 1)[-1].lower()
        reasoning_model = name.startswith(("gpt-5", "codex")) or (name[:1] == "o" and name[1:2].isdigit())
        return reasoning_model or self.reasoning.is_set

    def breakpoint_ttl(self, chosen: CacheTtl | None) -> OpenAICacheTtl:
        """The TTL of the turn's breakpoint when the session's cost model chose `chosen` (its short or long TTL)."""
        if self.openai_cache_ttl is not None:
            return self.openai_cache_ttl
        return "12h" if chosen == "1h" else "30m"


@dataclass(frozen=True, slots=True)
class SdkManagedTarget:
    """A backend that owns the system prompt, resume and compaction (the Claude Agent SDK)."""


RenderTarget: TypeAlias = AnthropicTarget | OpenAIChatTarget | OpenAIResponsesTarget | SdkManagedTarget
