"""The cache simulator is its own package: not loaded by `import lamina`, and counting blocks the way
`lamina.reports` counts them (one split of a body into blocks, `lamina.cachesim._cache_blocks`)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from lamina.cachesim import AnthropicCacheSimulator, CacheSimulator, OpenAICacheSimulator, TimedRequest
from lamina.placement import AnthropicTarget, OpenAIChatTarget, OpenAIResponsesTarget, RenderTarget
from lamina.reports import cache_layout


@pytest.mark.slow
def test_import_lamina_and_its_engine_do_not_load_the_simulator() -> None:
    code = (
        "import sys, lamina, lamina.engine, lamina.agent, lamina.placement\n"
        "print(sorted(m for m in sys.modules if m.startswith('lamina.cachesim')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
    assert not hasattr(__import__("lamina.placement").placement, "AnthropicCacheSimulator")


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": text, **extra}


ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-5",
    "tools": [{"name": "Read", "description": "Read a file. " * 40, "input_schema": {"type": "object"}}],
    "system": [_text("You are a careful engineer. " * 60, cache_control={"type": "ephemeral", "ttl": "1h"})],
    "messages": [
        {"role": "user", "content": "What is in app.py?"},
        {
            "role": "assistant",
            "content": [_text("Let me look."), {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [_text("x = 1\n" * 200, cache_control={"type": "ephemeral"})],
                },
                _text("Thanks.", cache_control={"type": "ephemeral"}),
            ],
        },
    ],
}

CHAT: dict[str, Any] = {
    "model": "gpt-5",
    "tools": [{"type": "function", "function": {"name": "Read", "description": "Read a file. " * 40}}],
    "messages": [
        {"role": "system", "content": "You are a careful engineer. " * 60},
        {"role": "user", "content": [{"type": "text", "text": "What is in app.py?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x = 1\n" * 200},
    ],
}

RESPONSES: dict[str, Any] = {
    "model": "gpt-5",
    "instructions": "You are a careful engineer. " * 60,
    "tools": [{"type": "function", "name": "Read", "description": "Read a file. " * 40}],
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is in app.py?"}]},
        {"type": "function_call", "call_id": "c1", "name": "Read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "x = 1\n" * 200},
    ],
}


def test_budget_and_simulator_count_the_same_tokens_in_every_format() -> None:
    cases: list[tuple[dict[str, Any], RenderTarget, CacheSimulator]] = [
        (ANTHROPIC, AnthropicTarget(model="claude-sonnet-5"), AnthropicCacheSimulator()),
        (CHAT, OpenAIChatTarget(model="gpt-5"), OpenAICacheSimulator()),
        (RESPONSES, OpenAIResponsesTarget(model="gpt-5"), OpenAICacheSimulator()),
    ]
    for body, target, simulator in cases:
        layout = cache_layout(body, target)  # type: ignore[arg-type]
        billed = simulator.submit(TimedRequest(0.0, body))
        assert layout.total_tokens == billed.total > 1000, target
        assert sum(block.tokens for block in layout.blocks) == billed.total
