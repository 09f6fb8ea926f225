"""Why a request misses the prompt cache, predicted from the request before it and the cache simulator (pure).

The reasons are the providers' diagnostics' own (docs/providers.md, "Cache diagnostics"): the first
thing that differs from the previous request, in the order the prefix is hashed (model, tools,
system, the other prompt-affecting settings, messages), and, when nothing differs but less was read
than the previous request left cached, an expired cache (`ttl_expired`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

import msgspec

from lamina.cachesim._anthropic_cache import AnthropicCacheSimulator
from lamina.cachesim._cache_blocks import text_block, without_marker
from lamina.cachesim._openai_breakpoints import OpenAIBreakpointSimulator
from lamina.cachesim._openai_cache import OpenAICacheRules, OpenAICacheSimulator
from lamina.cachesim._simulator import CacheSimulator, CacheUsage, TimedRequest
from lamina.session import CacheMiss
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

MissFormat: TypeAlias = Literal["anthropic", "openai"]
"""Which provider's rules a request is compared by: Anthropic Messages, or OpenAI (Responses or Chat)."""

_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_MARKERS: Final = frozenset({"cache_control", "prompt_cache_breakpoint"})
_ANTHROPIC_SETTINGS: Final = ("thinking", "tool_choice")
"""Prompt-affecting settings besides model, system and tools: a change is `unavailable` (no diagnosis)."""
_OPENAI_SETTINGS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("prompt_cache_key_changed", ("prompt_cache_key",)),
    ("text_format_changed", ("text", "format")),
    ("reasoning_effort_changed", ("reasoning", "effort")),
    ("verbosity_changed", ("text", "verbosity")),
    ("service_tier_changed", ("service_tier",)),
)


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a request first differs from the one before it."""

    reason: str
    """`model_changed`, `tools_changed`, `system_changed`, `messages_changed`, `unavailable`, or an OpenAI word."""
    common_tokens: int
    """Tokens of the previous request's prefix before the first difference."""
    entry: int | None = None
    """For a message change: the 1-based position of the first message (input item) that differs."""


def _plain(value: object) -> object:
    """`value` without cache markers (a block's, or its content blocks'), so a moved marker is no change."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if k not in _MARKERS}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _message_units(body: Mapping[str, object]) -> list[object]:
    """The conversation, one unit per message or input item, markers stripped; a string content as its text block."""
    raw = body.get("messages") if "messages" in body else body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": [text_block(raw)]}]
    units: list[object] = []
    for message in raw if isinstance(raw, list) else []:
        if isinstance(message, Mapping) and isinstance(message.get("content"), str):
            message = {**message, "content": [text_block(str(message["content"]))]}
        units.append(_plain(message))
    return units


def _system_units(body: Mapping[str, object]) -> list[object]:
    system = body.get("system") if "system" in body else body.get("instructions")
    if isinstance(system, str):
        return [text_block(system)] if system else []
    return [without_marker(b) if isinstance(b, Mapping) else b for b in system] if isinstance(system, list) else []


def _setting(body: Mapping[str, object], path: Sequence[str]) -> object:
    value: object = body
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


class _Measure:
    """Token counts of units, memoised by their canonical bytes (a session repeats its prefix)."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self._estimator = estimator
        self._known: dict[bytes, int] = {}

    def key(self, unit: object) -> bytes:
        return _ENCODER.encode(unit)

    def tokens(self, units: Sequence[object]) -> int:
        total = 0
        for unit in units:
            key = self.key(unit)
            count = self._known.get(key)
            if count is None:
                count = self._known[key] = self._estimator.count(key.decode())
            total += count
        return total


def find_divergence(
    previous: Mapping[str, object],
    current: Mapping[str, object],
    *,
    fmt: MissFormat,
    estimator: TokenEstimator = DEFAULT_ESTIMATOR,
) -> Divergence | None:
    """The first difference between two request bodies, by the providers' documented diagnosis rules.

    Args:
        previous: The body of the request before.
        current: The body of this request.
        fmt: Whose rules: `anthropic` (model, tools, system, then `thinking` or `tool_choice` as
            `unavailable`, then messages) or `openai` (model, `prompt_cache_key`, tools, the text
            format, reasoning effort, verbosity, service tier, then the input, instructions first).
        estimator: Counts the tokens of the common prefix.

    Returns:
        Where they first differ; None when `current` only appends to `previous`.
    """
    return _divergence(previous, current, fmt, _Measure(estimator))


def _divergence(
    previous: Mapping[str, object], current: Mapping[str, object], fmt: MissFormat, measure: _Measure
) -> Divergence | None:
    if previous.get("model") != current.get("model") or previous.get("speed") != current.get("speed"):
        return Divergence("model_changed", 0)
    if fmt == "openai":
        for reason, path in _OPENAI_SETTINGS[:1]:
            if _setting(previous, path) != _setting(current, path):
                return Divergence(reason, 0)
    tools = [_plain(t) for t in _list(previous.get("tools"))]
    if tools != [_plain(t) for t in _list(current.get("tools"))]:
        return Divergence("tools_changed", 0)
    before = measure.tokens(tools)
    if fmt == "openai":
        for reason, path in _OPENAI_SETTINGS[1:]:
            if _setting(previous, path) != _setting(current, path):
                return Divergence(reason, before)
    system = _system_units(previous)
    if system != _system_units(current):
        # OpenAI's instructions are the start of its input: a change there is an input change
        return Divergence("system_changed" if fmt == "anthropic" else "messages_changed", before)
    before += measure.tokens(system)
    if fmt == "anthropic" and any(previous.get(k) != current.get(k) for k in _ANTHROPIC_SETTINGS):
        return Divergence("unavailable", before)
    old, new = _message_units(previous), _message_units(current)
    for i, unit in enumerate(old):
        if i >= len(new) or measure.key(unit) != measure.key(new[i]):
            return Divergence("messages_changed", before + measure.tokens(old[:i]), i + 1)
    return None


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def cache_held(
    fmt: MissFormat,
    *,
    read: int,
    write: int,
    total: int,
    openai_min: int = 1024,
    step: int = 128,
    breakpoints: bool = False,
) -> int:
    """The tokens a request left in the cache for the next one to read, from its usage.

    Args:
        fmt: Whose rules.
        read: Tokens it read from the cache.
        write: Tokens it wrote (Anthropic; OpenAI reports none).
        total: All its input tokens.
        openai_min: OpenAI's smallest cached prefix.
        step: OpenAI's hit increment past `openai_min`.
        breakpoints: OpenAI's breakpoint regime (GPT-5.6 and later), which bills its writes as Anthropic does.

    Returns:
        Anthropic and OpenAI's breakpoint regime: what it read and wrote (its prefix up to the last
        breakpoint); OpenAI before: its whole input, rounded down the way a hit on it is (0 under `openai_min`).
    """
    if fmt == "anthropic" or breakpoints:
        return read + write
    if total < openai_min:
        return 0
    return openai_min + step * ((total - openai_min) // step)


def settle_miss(reported: CacheMiss, *, held: int, read: int) -> CacheMiss:
    """A diagnosis of no divergence made `ttl_expired` when the request read less than the one before left cached.

    Args:
        reported: The diagnosis (a provider's, or a prediction) before the usage is looked at.
        held: What the previous request left cached (`cache_held`).
        read: What this request read.

    Returns:
        `reported`, or, when it says `none` and `read < held`, `ttl_expired` with the difference missed.
    """
    if reported.reason == "none" and read < held:
        return CacheMiss(reason="ttl_expired", missed_tokens=held - read)
    return reported


def _missed(fmt: MissFormat, divergence: Divergence, *, held: int, total: int, breakpoints: bool) -> int:
    """Where writes are billed: what the previous request held past the difference; else this one's input past it."""
    if divergence.reason == "unavailable":
        return 0
    return max(0, (held if fmt == "anthropic" or breakpoints else total) - divergence.common_tokens)


class CacheMissPredictor:
    """Lamina's account of a session's requests: each one's simulated usage, and why it missed, predicted.

    Feed the requests of one session in order; the first has nothing to be compared with.
    """

    def __init__(
        self,
        fmt: MissFormat,
        *,
        simulator: CacheSimulator | None = None,
        estimator: TokenEstimator = DEFAULT_ESTIMATOR,
        openai_rules: OpenAICacheRules | None = None,
        breakpoints: bool = False,
    ) -> None:
        """Start with an empty cache.

        Args:
            fmt: Whose rules the requests follow.
            simulator: The cache simulator to bill them with (None: a new one of `fmt`'s provider).
            estimator: Counts tokens.
            openai_rules: OpenAI's numbers, for the simulator built here and for `cache_held`.
            breakpoints: OpenAI's requests follow its breakpoint regime (GPT-5.6 and later).
        """
        self.fmt: MissFormat = fmt
        self.breakpoints = breakpoints
        self._rules = openai_rules or OpenAICacheRules()
        self._simulator = simulator or (
            AnthropicCacheSimulator(estimator=estimator)
            if fmt == "anthropic"
            else OpenAIBreakpointSimulator(estimator=estimator)
            if breakpoints
            else OpenAICacheSimulator(rules=self._rules, estimator=estimator)
        )
        self._measure = _Measure(estimator)
        self._previous: tuple[Mapping[str, object], int] | None = None

    def submit(self, request: TimedRequest) -> tuple[CacheUsage, CacheMiss | None]:
        """Simulate one request and predict why it missed.

        Args:
            request: The request, after the previous one submitted.

        Returns:
            Its simulated usage, and the predicted miss (None for the first request).

        Raises:
            CacheSimulationError: The simulator cannot take the request (see `lamina.cachesim`).
        """
        usage = self._simulator.submit(request)
        previous, self._previous = self._previous, (request.body, self._held(usage))
        if previous is None:
            return usage, None
        body, held = previous
        divergence = _divergence(body, request.body, self.fmt, self._measure)
        if divergence is None:
            return usage, settle_miss(CacheMiss(reason="none"), held=held, read=usage.read)
        missed = _missed(self.fmt, divergence, held=held, total=usage.total, breakpoints=self.breakpoints)
        return usage, CacheMiss(reason=divergence.reason, missed_tokens=missed, entry=divergence.entry)

    def _held(self, usage: CacheUsage) -> int:
        rules = self._rules
        return cache_held(
            self.fmt,
            read=usage.read,
            write=usage.write,
            total=usage.total,
            openai_min=rules.min_tokens,
            step=rules.increment,
            breakpoints=self.breakpoints,
        )


__all__ = ["CacheMissPredictor", "Divergence", "MissFormat", "cache_held", "find_divergence", "settle_miss"]
