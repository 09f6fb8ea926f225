"""The proxy's prune of old tool results (Anthropic), priced by Lamina's cost model and stable once made (pure).

A result is a candidate when it is text, at least `PRUNE_FLOOR` tokens and older than the last
`KEEP_LAST` messages; only when the cache is cold (the conversation idle past five minutes),
`lamina.pricing.price_prune` decides which to take from the session's pace. A result pruned once is pruned in
every later request of the conversation, with the same note (made from the result the client sends
again), so the rewritten prefix stays cached. The `tool_result` block stays, with its `tool_use_id`:
a call is never separated from its result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from lamina.pricing import CachePrices, CacheState, Outlook, PruneItem, SessionPace, price_prune
from lamina.tokens import DEFAULT_ESTIMATOR

KEEP_LAST: Final = 4
"""The newest messages whose results are never pruned (the model is working with them)."""
PRUNE_FLOOR: Final = 400
"""The smallest result worth a note."""
_NOTE: Final = (
    "[lamina proxy: this tool result ({tokens} tokens) was pruned to keep the context small; "
    "run the tool again if you need it]"
)


def prune_results(
    body: Mapping[str, Any], *, pruned: frozenset[str], pace: SessionPace, idle_seconds: float | None
) -> tuple[Mapping[str, Any], frozenset[str], dict[str, Any] | None]:
    """`body` with its old results pruned, every result pruned before included; the ids now pruned; the record.

    `idle_seconds` is the time since the conversation's last request (None: not known, so nothing new
    is pruned: the cache may be warm from before the proxy started).
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body, pruned, None
    found = _results(messages)
    chosen: list[str] = []
    record: dict[str, Any] | None = None
    if idle_seconds is not None:
        chosen, record = _price(messages, found, pruned, pace, idle_seconds)
    taking = pruned | frozenset(chosen)
    if not taking & {call_id for call_id, *_ in found}:
        return body, pruned, None
    edited = [_pruned_message(m, taking) for m in messages]
    kept = sorted(taking & {call_id for call_id, *_ in found} - set(chosen))
    made: dict[str, Any] = record if record is not None else {"edit": "prune", "ids": [], "saved": 0.0, "cost": 0.0}
    return {**body, "messages": edited}, taking, {**made, "kept": kept}


def _results(messages: list[Any]) -> list[tuple[str, int, int, int]]:
    """The prunable results, oldest first: call id, message index, tokens, tokens from it to the end."""
    sizes = [DEFAULT_ESTIMATOR.count(msgspec.json.encode(m).decode()) for m in messages]
    out: list[tuple[str, int, int, int]] = []
    for i, message in enumerate(messages[: max(0, len(messages) - KEEP_LAST)]):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list) or message.get("role") != "user":
            continue
        for block in content:
            text = _text_of(block)
            call_id = block.get("tool_use_id") if isinstance(block, Mapping) else None
            if text is None or not isinstance(call_id, str):
                continue
            tokens = DEFAULT_ESTIMATOR.count(text)
            if tokens >= PRUNE_FLOOR:
                out.append((call_id, i, tokens, sum(sizes[i:])))
    return out


def _text_of(block: object) -> str | None:
    """A `tool_result` block's text when it is text only (None: not a result, or one with images, documents)."""
    if not isinstance(block, Mapping) or block.get("type") != "tool_result":
        return None
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(c, Mapping) and c.get("type") == "text" for c in content):
        return "\n".join(str(c.get("text", "")) for c in content)
    return None


def _price(
    messages: list[Any],
    found: list[tuple[str, int, int, int]],
    pruned: frozenset[str],
    pace: SessionPace,
    idle_seconds: float,
) -> tuple[list[str], dict[str, Any] | None]:
    prices = CachePrices.anthropic()
    if idle_seconds < prices.ttl_5m_seconds:
        # only on a cold cache: priced on a warm one, Claude Code's 12-turn session through the proxy billed
        # 8.8% more (its cache lives 5 minutes, the model's horizon and 1-hour history do not fit it yet)
        return [], None
    history = found[0][3] if found else 0
    last = DEFAULT_ESTIMATOR.count(msgspec.json.encode(messages[-1]).decode())
    cache = CacheState(idle_seconds=idle_seconds, history_tokens=history, since_request=last, since_turn_mark=last)
    outlook = Outlook(prices=prices, pace=pace, cache=cache)
    note = DEFAULT_ESTIMATOR.count(_NOTE)
    items = [
        PruneItem(call_id=cid, suffix_tokens=suffix, tokens=tokens, freed=max(0, tokens - note), reread_chance=0.1)
        for cid, _, tokens, suffix in found
        if cid not in pruned
    ]
    if not items:
        return [], None
    chosen, decision = price_prune(items, outlook, minimum_tokens=PRUNE_FLOOR)
    if not chosen:
        return [], None
    first = next(it for it in items if it.call_id == chosen[0])
    cost = max(0, first.suffix_tokens - cache.cold_tokens(prices)) * (prices.write_5m - prices.read)
    net = decision.expected_nothing - decision.expected
    freed = sum(it.freed for it in items if it.call_id in chosen)
    record = {"edit": "prune", "ids": chosen, "tokens": freed, "saved": round(net + cost, 1), "cost": round(cost, 1)}
    return chosen, record


def _pruned_message(message: Any, taking: frozenset[str]) -> Any:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list) or message.get("role") != "user":
        return message
    if not any(isinstance(b, Mapping) and b.get("tool_use_id") in taking for b in content):
        return message
    return {**message, "content": [_pruned_block(b, taking) for b in content]}


def _pruned_block(block: Any, taking: frozenset[str]) -> Any:
    text = _text_of(block)
    if text is None or block.get("tool_use_id") not in taking:
        return block
    return {**block, "content": _NOTE.format(tokens=DEFAULT_ESTIMATOR.count(text))}
