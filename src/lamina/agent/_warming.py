"""The agent's calls about the prompt cache: the summariser on the session's prefix, and the pre-warm (I/O: provider).

The summariser reads the session's cached prefix (`CachedPrefix`: the session's next request with
the summary instruction as its message); a pre-warm writes the prefix the next turn will read, on
Anthropic with `max_tokens: 0`, on OpenAI Responses (GPT-5.6 and later) with `prewarm`, when the
setting and the cost model say so. Described in docs/compaction.md ("Pre-warm").
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from lamina.compaction import CachedPrefix, ProviderSummariser, ServerSummariser, Summariser
from lamina.engine import CompactionOutcome, ContextEngine
from lamina.errors import LaminaError
from lamina.placement import (
    AnthropicTarget,
    CacheTtl,
    OpenAIResponsesTarget,
    RenderTarget,
    SdkManagedPrompt,
    SdkManagedTarget,
)
from lamina.pricing import PrewarmCall, price_prewarm
from lamina.providers import Prewarmer, Provider
from lamina.session import CostDecision, Usage

_log = logging.getLogger("lamina.compaction")
PrewarmSetting: TypeAlias = Literal["off", "priced", "always"]
"""When a pre-warm is sent: never; when the cost model expects it to save more than it costs; always where it can."""
DEFAULT_PREWARM: PrewarmSetting = "priced"
_STAND_IN = "(the next message)"
"""The user's message a pre-warm's request is rendered with, then left out."""
_SUMMARY_ROOM = 8_192 + 2_000
"""Tokens a summarising request on the cache adds to the session's context: its output, its instruction."""


@dataclass(frozen=True, slots=True)
class Prewarmed:
    """A pre-warm considered: whether it was sent, the decision (None: not priced, `always`), what it was billed."""

    sent: bool
    decision: CostDecision | None = None
    usage: Usage | None = None


def prewarm_body(request: Mapping[str, Any], target: RenderTarget, ttl: CacheTtl) -> dict[str, Any] | None:
    """The session's next request without its user message and tail, the history's end marked (None: no history).

    Anthropic: the last history message's last block gets a breakpoint with `ttl` (the next turn's,
    where its first request reads); OpenAI Responses: the implicit breakpoint on the latest item does it.
    """
    key = "messages" if isinstance(target, AnthropicTarget) else "input"
    items = list(request.get(key) or ())
    at = next((i for i in range(len(items) - 1, -1, -1) if _STAND_IN in json.dumps(items[i])), 0)
    if at == 0 or "tool_result" in json.dumps(items[at]):  # nothing before it, or merged with the history
        return None
    items = items[:at]  # the stand-in user message goes, and the volatile tail after it
    if isinstance(target, AnthropicTarget) and isinstance(items[-1].get("content"), list) and items[-1]["content"]:
        content = list(items[-1]["content"])
        if "cache_control" not in content[-1]:
            mark = {"type": "ephemeral", "ttl": ttl}
            content[-1] = {**content[-1], "cache_control": mark}
        items[-1] = {**items[-1], "content": content}
    return {**request, key: items}


def can_prewarm(provider: Provider) -> bool:
    """Whether `provider` takes a pre-warm: Anthropic without thinking, OpenAI Responses of the breakpoint regime."""
    target = provider.target
    if not isinstance(provider, Prewarmer):
        return False
    if isinstance(target, AnthropicTarget):  # the API refuses a pre-warm with extended thinking
        return target.reasoning.thinking not in ("enabled", "adaptive")
    return isinstance(target, OpenAIResponsesTarget) and target.cache_breakpoints


@dataclass(frozen=True, slots=True)
class Warming:
    """The agent's summariser on the session's cached prefix, and its pre-warm (`Agent.prewarm` is the setting)."""

    engine: ContextEngine
    provider: Callable[[], Provider]
    setting: Callable[[], PrewarmSetting]

    def prefix(self, provider: Provider) -> CachedPrefix | None:
        """The session's cached prefix now, for `provider`.

        None: `provider` is no longer the agent's, an SDK-managed backend, or no room left in the window.
        """
        if provider is not self.provider():  # the agent moved on (`/model`): its request is for another API
            return None
        target = provider.target
        compactor = self.engine.compactor
        if isinstance(target, SdkManagedTarget):
            return None
        if compactor.calibrated_context_tokens() + _SUMMARY_ROOM > provider.capabilities.context_window:
            return None  # an overflow: the session's own request cannot take the instruction and the summary

        def render(text: str) -> Any:
            return self.engine.request(self.engine.preview_turn(text), target)

        return CachedPrefix(render, compactor.context_tokens(), compactor.outlook(), target)

    def summariser(self, given: Summariser | None, session_id: str) -> Summariser:
        """`given` (or the provider's own summariser) reading the session's cached prefix where it can.

        A `ProviderSummariser` (a `ServerSummariser`'s fallback included) of the agent's provider
        without a prefix of its own is given the session's.
        """
        summariser = given or ProviderSummariser(self.provider(), session_id=session_id)
        inner = summariser.fallback if isinstance(summariser, ServerSummariser) else summariser
        if isinstance(inner, ProviderSummariser) and inner.prefix is None and inner.provider is self.provider():
            inner.prefix = functools.partial(self.prefix, inner.provider)
        return summariser

    async def after_compaction(self, outcome: CompactionOutcome, *, between_turns: bool) -> CompactionOutcome:
        """Pre-warm the compacted prefix when the compaction ran between turns (the next request is not on its way)."""
        if outcome.status == "compacted" and between_turns:
            await self.prewarm()
        return outcome

    async def prewarm(self) -> Prewarmed:
        """Write the prefix the next turn reads, when the setting (and with `priced`, the cost model) says so.

        Call it between turns: after a compaction, or before the warm prefix expires (`expires_in`).
        A failed pre-warm is logged and changes nothing: the next turn writes the prefix itself.
        """
        provider, setting = self.provider(), self.setting()
        if setting == "off" or not can_prewarm(provider):
            return Prewarmed(False)
        target = provider.target
        chosen, _ = self.engine.compactor.turn_ttl()  # the TTL the next turn's breakpoint would get
        ttl: CacheTtl = target.breakpoint_ttl(chosen) if isinstance(target, AnthropicTarget) else "5m"
        request = self.engine.request(self.engine.preview_turn(_STAND_IN), target)
        body = None if isinstance(request, SdkManagedPrompt) else prewarm_body(request, target, ttl)
        if body is None:
            return Prewarmed(False)
        decision = None
        if setting == "priced":
            action, decision = price_prewarm(self.engine.compactor.outlook(), self._call(ttl))
            if action == "wait":
                return Prewarmed(False, decision)
        assert isinstance(provider, Prewarmer)
        try:
            usage = await provider.prewarm(body)
        except LaminaError as exc:  # a pre-warm is an optimisation: the next turn writes the prefix itself
            _log.warning("session %s: the pre-warm failed: %s", self.engine.session.id, exc)
            return Prewarmed(False, decision)
        _log.info(
            "session %s: pre-warmed (read %d, wrote %d)", self.engine.session.id, usage.cache_read, usage.cache_write
        )
        return Prewarmed(True, decision, usage)

    def expires_in(self) -> float | None:
        """Seconds until the history's cache entry expires if nothing reads it (None: nothing was sent).

        The TTL is the last turn's breakpoint's (the long one where the cost model chose it).
        """
        outlook = self.engine.compactor.outlook()
        idle = outlook.cache.idle_seconds
        if idle is None:
            return None
        p = outlook.prices
        long = p.choose_ttl and outlook.cache.turn_mark_ttl == "1h"
        return max(0.0, (p.ttl_1h_seconds if long else p.ttl_5m_seconds) - idle)

    def _call(self, ttl: CacheTtl) -> PrewarmCall:
        outlook = self.engine.compactor.outlook()
        p = outlook.prices
        total = self.engine.compactor.context_tokens()
        # never sent: nothing of it is cached, the stable parts included
        cold = total if outlook.cache.idle_seconds is None else min(total, outlook.cache.cold_tokens(p))
        long = ttl == "1h" and p.choose_ttl
        return PrewarmCall(
            warm_tokens=total - cold,
            cold_tokens=cold,
            warm_left=self.expires_in() or 0.0,
            ttl_seconds=p.ttl_1h_seconds if long else p.ttl_5m_seconds,
            write_price=p.write(ttl),
        )
