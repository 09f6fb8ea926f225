"""The wire server's cache diagnostics, read through the providers on the official SDKs."""

from __future__ import annotations

from typing import Any

from lamina.providers import Completed
from lamina.session import CacheMiss
from tests.providers.support import collect, completed
from tests.wire.fixtures import anthropic_provider, openai_responses_provider
from tests.wire.script import Reply
from tests.wire.server import WireServer

RULES = "\n".join(f"Rule {i}: keep functions small and name them after what they do." for i in range(150))


def _messages(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


def _anthropic(previous: str | None, *texts: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}],
        "tools": tools or [],
        "messages": _messages(*texts),
        "diagnostics": {"previous_message_id": previous},
    }


async def _send(wire: WireServer, *bodies: dict[str, Any]) -> list[Completed]:
    wire.script(*(Reply(text="ok") for _ in bodies))
    async with anthropic_provider(wire) as provider:
        return [completed(await collect(provider.stream(body))) for body in bodies]  # type: ignore[arg-type]


async def test_anthropic_diagnostics_follow_the_documented_rules(wire: WireServer) -> None:
    grep = [{"name": "Grep", "description": "Search.", "input_schema": {"type": "object"}}]
    first, same, tools, unknown = await _send(
        wire,
        _anthropic(None, "hi"),
        _anthropic("msg_wire_0001", "hi", "hello", "next"),
        _anthropic("msg_wire_0002", "hi", "hello", "next", tools=grep),
        _anthropic("msg_gone", "hi"),
    )
    assert first.response_id == "msg_wire_0001" and first.cache_miss == CacheMiss(reason="none")
    assert same.cache_miss == CacheMiss(reason="none")
    assert tools.cache_miss is not None and tools.cache_miss.reason == "tools_changed"
    assert tools.cache_miss.missed_tokens == same.usage.cache_read + same.usage.cache_write
    assert unknown.cache_miss == CacheMiss(reason="not_found")


async def test_a_request_that_does_not_ask_gets_no_diagnostics(wire: WireServer) -> None:
    body = _anthropic(None, "hi")
    del body["diagnostics"]
    (done,) = await _send(wire, body)
    assert done.cache_miss is None and done.response_id == "msg_wire_0001"


async def test_a_rewritten_message_is_messages_changed(wire: WireServer) -> None:
    _, edited = await _send(
        wire, _anthropic(None, "hi", "hello", "more"), _anthropic("msg_wire_0001", "hi", "HELLO", "more", "x", "y")
    )
    assert edited.cache_miss is not None and edited.cache_miss.reason == "messages_changed"


def _responses(compare: str | None, *texts: str, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5", "instructions": RULES, "input": _messages(*texts), **more}
    if compare is not None:
        body["prompt_cache_options"] = {"comparison_response_id": compare}
    return body


async def test_openai_diagnostics_in_its_own_words(wire: WireServer) -> None:
    bodies = [
        _responses(None, "hi"),
        _responses("resp_wire0001", "hi", "hello", "next"),
        _responses("resp_wire0002", "hi", "HELLO", "next"),
        _responses("resp_wire0003", "hi", "HELLO", "next", text={"verbosity": "low"}),
        _responses("resp_gone", "hi"),
    ]
    wire.script(*(Reply(text="ok") for _ in bodies))
    async with openai_responses_provider(wire) as provider:
        found = [completed(await collect(provider.stream(b))) for b in bodies]  # type: ignore[arg-type]
    assert [f.cache_miss.reason if f.cache_miss else None for f in found] == [
        None,  # nothing asked
        "none",  # cache_hit
        "messages_changed",  # input_changed
        "verbosity_changed",
        "not_found",
    ]
    assert found[0].response_id == "resp_wire0001"
    changed = found[2].cache_miss
    assert changed is not None and 0 < changed.missed_tokens < found[2].usage.input + found[2].usage.cache_read
