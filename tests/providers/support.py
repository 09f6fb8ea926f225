"""Shared helpers for provider tests: a real engine over a workspace long enough to be cached."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from lamina.engine import ContextEngine
from lamina.providers import Completed, ProviderEvent, TextDelta, ToolCallRequest
from lamina.session import AssistantMessage, ToolCall, ToolResult
from tests.support.engine import Clock, make_engine


def long_workspace(tmp_path: Path) -> Path:
    """A workspace whose AGENTS.md makes the stable prefix longer than the providers' 1024-token cache minimum."""
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    rules = "\n".join(f"- Rule {i}: keep functions small and name them after what they do." for i in range(120))
    (root / "AGENTS.md").write_text(f"# Project rules\n{rules}\n")
    return root


def new_engine(tmp_path: Path) -> ContextEngine:
    return make_engine(tmp_path, long_workspace(tmp_path), Clock())


async def collect(events: AsyncIterator[ProviderEvent]) -> list[ProviderEvent]:
    return [event async for event in events]


def completed(events: Sequence[ProviderEvent]) -> Completed:
    last = events[-1]
    assert isinstance(last, Completed), f"the last event is {last!r}, not Completed"
    assert sum(isinstance(e, Completed) for e in events) == 1
    return last


def streamed_text(events: Sequence[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def tool_calls(events: Sequence[ProviderEvent]) -> list[ToolCallRequest]:
    return [e for e in events if isinstance(e, ToolCallRequest)]


def record_reply(engine: ContextEngine, done: Completed, results: dict[str, str] | None = None) -> None:
    """Log a response and, for each of its tool calls, a result (`results` by tool name, else "ok")."""
    engine.record(AssistantMessage(text=done.text, usage=done.usage, stop_reason=done.stop_reason))
    for call in done.tool_calls:
        engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
    for call in done.tool_calls:
        content = (results or {}).get(call.name, "ok")
        engine.record(ToolResult(call_id=call.call_id, name=call.name, content=content))
