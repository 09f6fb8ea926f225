"""The wire server's cache diagnostics, by the providers' documented rules.

Anthropic (`diagnostics: {"previous_message_id": ...}`): the request named is looked up among those
this server answered; the first of tools, system, model (or `speed`), the other prompt-affecting
settings (`thinking`, `tool_choice`: `unavailable`) and messages that is not the same (cache
markers aside), or not only appended to, is the `cache_miss_reason`, with the tokens the named
request left cached past the common prefix (`cache_missed_input_tokens`); no divergence is
`diagnostics: null`, an unknown id `previous_message_not_found`. OpenAI Responses
(`prompt_cache_options.comparison_response_id`): the same walk in OpenAI's words (`cache_hit`,
`cache_miss` with a `reason`, `comparison_response_not_found`), the missed tokens being this
request's input past the common prefix. What each request left cached is what this server's cache
simulator billed it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from lamina.cachesim import CacheUsage, message_items, system_items, tool_items, without_marker
from lamina.tokens import DEFAULT_ESTIMATOR, TokenEstimator

_UNSET = object()


@dataclass(frozen=True)
class _Seen:
    body: Mapping[str, Any]
    usage: CacheUsage


@dataclass
class CacheDiagnostics:
    """The requests this server answered, by response id, and the diagnostics a later request asks for."""

    estimator: TokenEstimator = DEFAULT_ESTIMATOR
    seen: dict[str, _Seen] = field(default_factory=dict)
    openai_min: int = 1024

    def answer(self, api: str, body: Mapping[str, Any], usage: CacheUsage, n: int) -> dict[str, object]:
        """The response's diagnostics as keyword arguments (`{"diagnostics": ...}`, `{}` when not asked); remembers it.

        Args:
            api: `anthropic`, `chat` or `responses` (Chat Completions has no diagnostics).
            body: The request.
            usage: What the cache simulator billed it.
            n: The request's number, which names its response (`msg_wire_0003`, `resp_wire0003`).
        """
        if api == "chat":
            return {}
        found = self.anthropic(body) if api == "anthropic" else self.responses(body, usage)
        self.seen[f"msg_wire_{n:04d}" if api == "anthropic" else f"resp_wire{n:04d}"] = _Seen(body, usage)
        return {} if found is _UNSET else {"diagnostics": found}

    def anthropic(self, body: Mapping[str, Any]) -> object:
        """The response's `diagnostics` value, or `_UNSET` when the request did not ask (the field is left out)."""
        asked = body.get("diagnostics", _UNSET)
        if not isinstance(asked, Mapping):
            return _UNSET if asked is _UNSET else None
        previous_id = asked.get("previous_message_id")
        if previous_id is None:
            return None
        seen = self.seen.get(str(previous_id))
        if seen is None:
            return {"cache_miss_reason": {"type": "previous_message_not_found"}}
        found = self._first_change(seen.body, body, anthropic=True)
        if found is None:
            return None
        reason, common = found
        held = seen.usage.read + seen.usage.write
        miss: dict[str, Any] = {"type": reason}
        if reason != "unavailable":
            miss["cache_missed_input_tokens"] = max(0, held - common)
        return {"cache_miss_reason": miss}

    def responses(self, body: Mapping[str, Any], usage: CacheUsage) -> object:
        """The response's `prompt_cache_diagnostics`, or `_UNSET` when the request did not ask."""
        options = body.get("prompt_cache_options")
        if not isinstance(options, Mapping) or options.get("comparison_response_id") is None:
            return _UNSET
        seen = self.seen.get(str(options["comparison_response_id"]))
        if seen is None:
            return {"type": "comparison_response_not_found"}
        found = self._first_change(seen.body, body, anthropic=False)
        if found is None:
            return {"type": "cache_hit"}
        reason, common = found
        return {
            "type": "cache_miss",
            "reason": reason,
            "cache_missed_tokens": max(0, usage.total - common),
            "comparison_reusable_tokens": common,
        }

    # --- the walk -------------------------------------------------------------------------------

    def _first_change(
        self, old: Mapping[str, Any], new: Mapping[str, Any], *, anthropic: bool
    ) -> tuple[str, int] | None:
        """The first thing that changed and the tokens of the old request before it; None: only appended."""
        if (old.get("model"), old.get("speed")) != (new.get("model"), new.get("speed")):
            return "model_changed", 0
        if not anthropic and old.get("prompt_cache_key") != new.get("prompt_cache_key"):
            return "prompt_cache_key_changed", 0
        common = 0
        later = self._units(new, anthropic)
        for level, unit in self._units(old, anthropic):
            other = next(later, ("", None))
            if other != (level, unit):  # a level that gained a unit is the earlier of the two
                first = min(level, other[0] or level, key=_ORDER.index)
                return _reason(first, old, new, anthropic), common
            if level != "settings":
                common += self.estimator.count(json.dumps(unit, sort_keys=True))
        return None

    def _units(self, body: Mapping[str, Any], anthropic: bool) -> Iterator[tuple[str, object]]:
        """The prompt in prefix order, markers removed: tools, settings, system (instructions), the conversation."""
        for _, _, _, block in tool_items(list(body.get("tools") or [])):
            yield "tools", without_marker(block)
        if anthropic:
            for _, _, _, block in system_items(body.get("system")):
                yield "system", without_marker(block)
            yield "settings", [body.get(k) for k in _ANTHROPIC_SETTINGS]
            for m, message in enumerate(body.get("messages") or []):
                for _, _, role, block in message_items(message, f"messages[{m}]"):
                    yield "messages", [role, without_marker(block)]
            return
        yield "settings", [_at(body, path) for _, path in _OPENAI_SETTINGS]
        if body.get("instructions"):
            yield "input", ["instructions", body["instructions"]]
        raw = body.get("input")
        for item in [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or []):
            yield "input", _strip(item)


_ORDER = ("tools", "system", "settings", "messages", "input")
_ANTHROPIC_SETTINGS = ("thinking", "tool_choice")
_OPENAI_SETTINGS = (
    ("text_format_changed", ("text", "format")),
    ("reasoning_effort_changed", ("reasoning", "effort")),
    ("verbosity_changed", ("text", "verbosity")),
    ("service_tier_changed", ("service_tier",)),
)


def _reason(level: str, old: Mapping[str, Any], new: Mapping[str, Any], anthropic: bool) -> str:
    if level == "tools":
        return "tools_changed"
    if anthropic:
        return {"system": "system_changed", "settings": "unavailable"}.get(level, "messages_changed")
    if level == "settings":
        return next(reason for reason, path in _OPENAI_SETTINGS if _at(old, path) != _at(new, path))
    if any(isinstance(i, Mapping) and i.get("type") == "compaction" for i in new.get("input") or ()):
        return "context_compacted"
    return "input_changed"


def _at(body: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = body
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _strip(item: object) -> object:
    if isinstance(item, Mapping):
        return {k: _strip(v) for k, v in item.items() if k != "prompt_cache_breakpoint"}
    if isinstance(item, list):
        return [_strip(v) for v in item]
    return item
