"""Tiny entry factories and a deterministic clock for session tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from lamina.session import AssistantMessage, ToolCall, ToolResult, Usage, UserMessage


def counter_ids(prefix: str = "e") -> Callable[[], str]:
    numbers = itertools.count(1)
    return lambda: f"{prefix}{next(numbers):06d}"


class FakeClock:
    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def exchange(n: int) -> list[UserMessage | AssistantMessage | ToolCall | ToolResult]:
    """A realistic turn: a request, a tool call and its result, an answer."""
    return [
        UserMessage(text=f"Please fix the failing test number {n} in tests/test_app.py"),
        AssistantMessage(text="Let me look at the test first.", model="scripted", usage=Usage(input=1200, output=40)),
        ToolCall(call_id=f"call_{n}", name="Read", input={"path": "tests/test_app.py"}),
        ToolResult(call_id=f"call_{n}", name="Read", content="def test_app():\n    assert app() == 2\n"),
        AssistantMessage(
            text=f"Fixed test {n}.", model="scripted", usage=Usage(input=80, output=20, cache_read=1200, cache_write=0)
        ),
    ]
