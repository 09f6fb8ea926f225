"""Tool call ids in each provider's format, so one session can move between providers (pure).

A session's log keeps every tool call id as the provider that made it gave it, and a later
request may go to another provider: Anthropic accepts only `[A-Za-z0-9_-]` in `tool_use.id`
("String should match pattern '^[a-zA-Z0-9_-]+$'"; an OpenAI-compatible server may hand out
`functions.Read:0`), OpenAI Chat Completions at most 40 characters in `tool_calls[].id` (an
OpenAI-compatible server may hand out 46), and Responses at most 64 in `call_id`. An id the target
accepts is sent as it is; any other is replaced by `call_` and a hash of it: the same id always
maps to the same replacement, so a call and its result stay paired and the request's bytes stay
the same from one request to the next (the cached prefix survives).
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

_ANTHROPIC: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OPENAI_CHAT_MAX: Final = 40
_OPENAI_RESPONSES_MAX: Final = 64


def _replacement(call_id: str) -> str:
    return "call_" + hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def anthropic_call_id(call_id: str) -> str:
    """`call_id` as Anthropic's `tool_use.id` / `tool_use_id` accepts it."""
    return call_id if _ANTHROPIC.fullmatch(call_id) else _replacement(call_id)


def openai_chat_call_id(call_id: str) -> str:
    """`call_id` as Chat Completions' `tool_calls[].id` / `tool_call_id` accepts it."""
    return call_id if 0 < len(call_id) <= _OPENAI_CHAT_MAX else _replacement(call_id)


def openai_responses_call_id(call_id: str) -> str:
    """`call_id` as a Responses `function_call` / `function_call_output` accepts it."""
    return call_id if 0 < len(call_id) <= _OPENAI_RESPONSES_MAX else _replacement(call_id)
