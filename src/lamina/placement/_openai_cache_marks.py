"""OpenAI's breakpoint regime (GPT-5.6 and later): where the explicit breakpoints go and the cache options (pure).

The same split as Anthropic's breakpoints: one at the end of the stable prefix, one on the current
turn's user message (the TTL the cost model chose), and the implicit one at the end of every request
(30 minutes: the tool loop's rolling entry). Described in docs/providers.md ("OpenAI's cache regime").
"""

from __future__ import annotations

from typing import Any

from lamina.placement._targets import CacheTtl, OpenAICacheTtl, OpenAIResponsesTarget

_ROLLING: OpenAICacheTtl = "30m"
"""The request's TTL, which the implicit breakpoint takes: the next call of a tool loop comes within seconds."""


def _marked(item: dict[str, Any], ttl: OpenAICacheTtl | None) -> dict[str, Any]:
    """`item` with a breakpoint on its last content part (copies: the unmarked item may be in a render cache)."""
    marker: dict[str, str] = {"mode": "explicit"} if ttl is None else {"mode": "explicit", "ttl": ttl}
    content = item["content"]
    return {**item, "content": [*content[:-1], {**content[-1], "prompt_cache_breakpoint": marker}]}


def _turn_index(items: list[dict[str, Any]], text_kind: str) -> int | None:
    """The current turn's user message: the newest user message with text (tool results are other items)."""
    for i in range(len(items) - 1, -1, -1):
        content = items[i].get("content")
        parts = content if items[i].get("role") == "user" and isinstance(content, list) else []
        if any(isinstance(p, dict) and p.get("type") == text_kind for p in parts):
            return i
    return None


def mark_responses(body: dict[str, Any], target: OpenAIResponsesTarget, chosen: CacheTtl | None, context: bool) -> None:
    """Add the breakpoints and the cache options to a Responses `body` (`context`: its first item is the stable one).

    The stable prefix's and the turn's breakpoints take the turn's TTL; the request's (the implicit
    breakpoint's) is 30 minutes. A 12-hour TTL also asks for `prompt_cache_retention: 24h`, the
    longest maximum retention, so that no shorter retention default caps the entry below its minimum.
    """
    ttl = target.breakpoint_ttl(chosen)
    items: list[dict[str, Any]] = list(body["input"])
    turn = _turn_index(items, "input_text")
    if turn is not None and not (context and turn == 0):
        items[turn] = _marked(items[turn], ttl)
    if context and items:
        items[0] = _marked(items[0], ttl)
    body["input"] = items
    body["prompt_cache_options"] = {"mode": "implicit", "ttl": _ROLLING}
    if ttl == "12h":
        body["prompt_cache_retention"] = "24h"


def mark_chat(body: dict[str, Any], context: bool) -> None:
    """Add the breakpoints and the cache options to a Chat Completions `body` (30 minutes: its only TTL).

    The stable prefix ends with the context message when there is one (`context`), else with the
    system message, whose text becomes one text part to carry the marker.
    """
    messages: list[dict[str, Any]] = list(body["messages"])
    system = 1 if messages and messages[0].get("role") == "system" else 0
    stable = system + context - 1
    turn = _turn_index(messages, "text")
    if turn is not None and turn > stable:
        messages[turn] = _marked(messages[turn], None)
    if stable >= 0:
        first = messages[stable]
        if isinstance(first.get("content"), str):
            first = {**first, "content": [{"type": "text", "text": first["content"]}]}
        messages[stable] = _marked(first, None)
    body["messages"] = messages
    body["prompt_cache_options"] = {"mode": "implicit", "ttl": _ROLLING}
