"""Tool call ids in each provider's format, so one session can move between providers (pure).

Described in docs/placement.md ("Tool call ids across providers").
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
