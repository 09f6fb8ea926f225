"""Render targets: which request format to produce and its placement settings (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from lamina.errors import UsageError

CacheTtl: TypeAlias = Literal["5m", "1h"]


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


@dataclass(frozen=True, slots=True)
class OpenAIResponsesTarget:
    """OpenAI Responses."""

    model: str
    max_output_tokens: int | None = None
    prompt_cache_key: bool = True


@dataclass(frozen=True, slots=True)
class SdkManagedTarget:
    """A backend that owns the system prompt, resume and compaction (the Claude Agent SDK)."""


RenderTarget: TypeAlias = AnthropicTarget | OpenAIChatTarget | OpenAIResponsesTarget | SdkManagedTarget
