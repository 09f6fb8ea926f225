"""The edits the proxy may make to a request, each off by default and priced before it is made (pure).

With every edit off the body is forwarded as the client sent it, byte for byte. The one edit so far
are Anthropic's: the rolling breakpoint a client left out (the last block of the last message, within
the four the API allows), and the one-hour TTL on the client's tools and system breakpoints, each made
when the cost model says its premium is less than what it saves (the session's pace says how likely
the next request comes within each lifetime). Only `cache_control` changes; every other value (signed
thinking, compaction blocks, server tools, tool references) is decoded and encoded again unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from lamina.pricing import CachePrices, SessionPace
from lamina.proxy._exchange import ReadRequest
from lamina.proxy._result_notes import prune_results
from lamina.tokens import DEFAULT_ESTIMATOR

MAX_BREAKPOINTS: Final = 4
"""Anthropic refuses a request with a fifth `cache_control` block."""
_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})
"""Blocks the API refuses a `cache_control` on (a signed block is never touched)."""


@dataclass(frozen=True, slots=True)
class EditSettings:
    """Which edits the proxy may make (all off: an exact pass-through)."""

    breakpoints: bool = False
    """Anthropic: add the rolling cache breakpoint a client left out, within the four the API allows, when priced."""
    ttl: bool = False
    """Anthropic: hold the client's tools and system breakpoints for an hour, when the session's pace says it pays."""
    prune: bool = False
    """Anthropic: replace old tool results by a note when the cost model says it pays (the same ones ever after)."""

    @property
    def any(self) -> bool:
        """Whether any edit is on."""
        return self.breakpoints or self.ttl or self.prune


def edit_request(
    read: ReadRequest,
    raw: bytes,
    settings: EditSettings,
    *,
    pace: SessionPace | None = None,
    idle_seconds: float | None = None,
    pruned: frozenset[str] = frozenset(),
) -> tuple[bytes, tuple[Mapping[str, Any], ...]]:
    """The body to forward for `read` (whose bytes are `raw`), and the edits made (none: `raw` itself).

    `pace`, `idle_seconds` (since the conversation's last request) and `pruned` (the results pruned in
    it before, pruned again) are the conversation's, as the proxy saw it.
    """
    if not settings.any or read.api != "anthropic":
        return raw, ()
    pace = pace or SessionPace()
    body: Mapping[str, Any] = read.body
    made: list[Mapping[str, Any]] = []
    if settings.prune or pruned:  # a result pruned once stays pruned, or the cached prefix would change back
        body, _, record = prune_results(
            body, pruned=pruned, pace=pace, idle_seconds=idle_seconds if settings.prune else None
        )
        made += [record] if record is not None else []
    for on, edit in ((settings.breakpoints, _rolling_breakpoint), (settings.ttl, _long_ttl)):
        done = edit(body, pace) if on else None
        if done is not None:
            body, record = done
            made.append(record)
    return (msgspec.json.encode(body), tuple(made)) if made else (raw, ())


def count_breakpoints(body: Mapping[str, Any]) -> int:
    """The `cache_control` marks of an Anthropic body: tools, system blocks, message blocks, and the top level's."""
    marks = 1 if body.get("cache_control") is not None else 0
    system, tools = body.get("system"), body.get("tools")
    blocks: list[Any] = [*(tools if isinstance(tools, list) else []), *(system if isinstance(system, list) else [])]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        blocks += content if isinstance(content, list) else []
    return marks + sum(1 for b in blocks if isinstance(b, Mapping) and b.get("cache_control") is not None)


def _long_ttl(body: Mapping[str, Any], pace: SessionPace) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """`body` with its tools' and system's breakpoints held for an hour, and the record; None when not paying.

    Only where the client named no TTL on them; they come before every message's breakpoint, so a
    one-hour mark never follows a five-minute one (which the API refuses).
    """
    system = body.get("system")
    tools, blocks = body.get("tools"), system if isinstance(system, list) else []
    stable = [b for b in [*(tools if isinstance(tools, list) else []), *blocks] if isinstance(b, Mapping)]
    marks = [b["cache_control"] for b in stable if isinstance(b.get("cache_control"), Mapping)]
    if body.get("cache_control") is not None or not marks or any("ttl" in m for m in marks):
        return None
    tokens = DEFAULT_ESTIMATOR.count(msgspec.json.encode([tools, system]).decode())
    saved, cost = _price_long(tokens, pace)
    record = {"edit": "ttl_1h", "at": "tools and system", "tokens": tokens, "saved": round(saved, 1)}
    if saved <= cost:
        return None
    longer = {**body}
    if isinstance(tools, list):
        longer["tools"] = [_held(t) for t in tools]
    if isinstance(system, list):
        longer["system"] = [_held(b) for b in system]
    return longer, {**record, "cost": round(cost, 1)}


def _held(block: Any) -> Any:
    """`block` with its breakpoint held for an hour (a block without one as it is)."""
    if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping):
        return {**block, "cache_control": {**block["cache_control"], "ttl": "1h"}}
    return block


def _price_long(tokens: int, pace: SessionPace, prices: CachePrices | None = None) -> tuple[float, float]:
    """What holding `tokens` for an hour saves and costs over the session's likely rest, in base-price tokens.

    Each write costs the one-hour premium (the first, and one after each gap past an hour); each gap
    between five minutes and an hour reads them instead of writing them again.
    """
    p = prices or CachePrices.anthropic()
    later = pace.requests_left
    middle = pace.chance_longer(p.ttl_5m_seconds) - pace.chance_longer(p.ttl_1h_seconds)
    saved = later * middle * tokens * (p.write_5m - p.read)
    cost = tokens * (p.write_1h - p.write_5m) * (1.0 + later * pace.chance_longer(p.ttl_1h_seconds))
    return saved, cost


def _rolling_breakpoint(body: Mapping[str, Any], pace: SessionPace) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """`body` with its last message's last block marked, and the edit's record; None when not allowed or not paying."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or count_breakpoints(body) >= MAX_BREAKPOINTS:
        return None
    last = messages[-1]
    content = last.get("content") if isinstance(last, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[-1], Mapping):
        return None  # a string message has no block to mark (turning it into one is a rewrite)
    block = content[-1]
    if block.get("type") in _UNMARKABLE or block.get("cache_control") is not None:
        return None
    tokens = _tokens_since_last_mark(messages)
    saved, cost = _price(tokens, pace)
    record: dict[str, Any] = {
        "edit": "breakpoint",
        "at": f"messages[{len(messages) - 1}].content[{len(content) - 1}]",
        "tokens": tokens,
        "saved": round(saved, 1),
        "cost": round(cost, 1),
    }
    if saved <= cost:
        return None
    marked = [*messages[:-1], {**last, "content": [*content[:-1], {**block, "cache_control": {"type": "ephemeral"}}]}]
    return {**body, "messages": marked}, record


def _tokens_since_last_mark(messages: list[Any]) -> int:
    """The tokens after the client's last breakpoint in the messages (what the added one makes cacheable)."""
    after: list[Any] = []
    for message in reversed(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        blocks = content if isinstance(content, list) else [content]
        for block in reversed(blocks):
            if isinstance(block, Mapping) and block.get("cache_control") is not None:
                return DEFAULT_ESTIMATOR.count(msgspec.json.encode(after).decode())
            after.append(block)
    return DEFAULT_ESTIMATOR.count(msgspec.json.encode(after).decode())


def _price(tokens: int, pace: SessionPace, prices: CachePrices | None = None) -> tuple[float, float]:
    """What marking `tokens` saves and costs, in base-price input tokens.

    It costs the write premium on them now; it saves, when the next request comes within the cache's
    lifetime, reading them instead of sending them again.
    """
    p = prices or CachePrices.anthropic()
    cost = tokens * (p.write_5m - 1.0)
    saved = (1.0 - pace.chance_longer(p.ttl_5m_seconds)) * tokens * (1.0 - p.read)
    return saved, cost
