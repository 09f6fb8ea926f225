"""Anthropic thinking through `AnthropicProvider` and the agent, against the wire server (which signs and checks it).

The server's signatures are deterministic for a response number (`ThinkingSigner.block`), so a test
can say which signature each block must carry; the server refuses any block sent back changed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.agent import AgentOptions, open_agent
from lamina.engine import ContextEngine
from lamina.placement import ReasoningConfig, render
from lamina.providers import AnthropicProvider, Capabilities, Completed, ReasoningDelta, RetryPolicy, TextDelta
from lamina.session import (
    AssistantMessage,
    LocalSessionStore,
    Reasoning,
    ToolCall,
    ToolResult,
    decode_entry,
    encode_entry,
)
from tests.conftest import examples
from tests.providers.support import collect, completed, long_workspace, new_engine
from tests.support.engine import Clock, make_engine
from tests.wire.fixtures import API_KEY, anthropic_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import WireServer

ENABLED = ReasoningConfig(thinking="enabled", budget_tokens=2048)
BETA = "interleaved-thinking-2025-05-14"


def _signed(wire: WireServer, text: str, n: int) -> Reasoning:
    """The thinking block the server sends as response `n` for `text`, as Lamina logs it."""
    block = wire.anthropic_thinking.block(text, redacted=False, n=n)
    return Reasoning(provider="anthropic", kind="thinking", text=text, signature=block["signature"])


def _redacted(wire: WireServer, text: str, n: int) -> Reasoning:
    block = wire.anthropic_thinking.block(text, redacted=True, n=n)
    return Reasoning(provider="anthropic", kind="redacted_thinking", data=block["data"])


def _record(engine: ContextEngine, done: Completed) -> None:
    """Log a response with its reasoning, and an "ok" result for each of its tool calls."""
    engine.record(
        AssistantMessage(text=done.text, usage=done.usage, stop_reason=done.stop_reason, reasoning=done.reasoning)
    )
    for call in done.tool_calls:
        engine.record(ToolCall(call_id=call.call_id, name=call.name, input=dict(call.input)))
    for call in done.tool_calls:
        engine.record(ToolResult(call_id=call.call_id, name=call.name, content="ok"))


def _thinking_blocks(body: Any) -> list[Any]:
    return [b for m in body["messages"] for b in m["content"] if isinstance(b, dict) and b["type"].endswith("thinking")]


async def test_streamed_thinking_is_reasoning_deltas_then_one_signed_block(wire: WireServer, tmp_path: Path) -> None:
    thought = "The user asks for the output, so read app.py first."
    wire.script(Reply(reasoning=thought, text="It prints hi."))
    async with anthropic_provider(wire, reasoning=ENABLED) as provider:
        events = await collect(provider.stream(render(new_engine(tmp_path).prepare_turn("hi"), provider.target)))
    done = completed(events)
    deltas = [e for e in events if isinstance(e, ReasoningDelta)]
    assert len(deltas) >= 2 and "".join(d.text for d in deltas) == thought
    assert events.index(deltas[-1]) < min(events.index(e) for e in events if isinstance(e, TextDelta))
    assert done.reasoning == (_signed(wire, thought, 1),) and done.text == "It prints hi."
    assert 0 < done.usage.reasoning < done.usage.output  # thinking_tokens, a part of the output


async def test_a_redacted_block_is_kept_whole_and_streams_no_text(wire: WireServer) -> None:
    wire.script(Reply(reasoning="unsafe to show", redacted=True, text="Answer."))
    async with anthropic_provider(wire) as provider:
        events = await collect(provider.stream({"model": "m", "max_tokens": 4096, "messages": [_user()]}))
    assert completed(events).reasoning == (_redacted(wire, "unsafe to show", 1),)
    assert not any(isinstance(e, ReasoningDelta) for e in events)


async def test_no_thinking_leaves_reasoning_empty(wire: WireServer) -> None:
    wire.script(Reply(text="Plain."))
    async with anthropic_provider(wire) as provider:
        done = completed(await collect(provider.stream({"model": "m", "max_tokens": 10, "messages": [_user()]})))
    assert done.reasoning == () and done.usage.reasoning == 0


async def test_the_interleaved_beta_goes_with_enabled_thinking_only(wire: WireServer, tmp_path: Path) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    no_editing = Capabilities(thinking=True)  # context editing would add its own beta
    async with anthropic_provider(wire, reasoning=ENABLED, capabilities=no_editing) as provider:
        await collect(provider.stream(render(engine.prepare_turn("hi"), provider.target)))
        provider.reasoning = ReasoningConfig(thinking="adaptive")  # interleaving is automatic: no beta
        await collect(provider.stream(render(engine.prepare_turn("hi"), provider.target)))
    client = anthropic.AsyncAnthropic(
        api_key=API_KEY, base_url=wire.url, max_retries=0, default_headers={"anthropic-beta": "context-1m-2025-08-07"}
    )
    async with AnthropicProvider(
        "claude-sonnet-5", client=client, reasoning=ENABLED, capabilities=no_editing
    ) as provider:
        await collect(provider.stream(render(engine.prepare_turn("hi"), provider.target)))
    await client.close()
    sent = wire.requests
    assert sent[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent[0].headers["anthropic-beta"] == BETA
    assert sent[1].body["thinking"] == {"type": "adaptive"} and "anthropic-beta" not in sent[1].headers
    assert sent[2].headers["anthropic-beta"] == f"context-1m-2025-08-07,{BETA}"  # the client's own betas kept


@pytest.mark.slow
def test_any_thinking_text_round_trips_byte_for_byte_through_parse_log_and_render(tmp_path: Path) -> None:
    workspace = long_workspace(tmp_path)
    clock = Clock()

    async def round_trip(wire: WireServer, thought: str) -> None:
        engine = make_engine(tmp_path, workspace, clock)
        n = len(wire.requests) + 1
        wire.script(Reply(reasoning=thought, tool_calls=[ToolUse("Read", {"path": "a.py"})]), Reply(text="ok"))
        async with anthropic_provider(wire, reasoning=ENABLED) as provider:
            turn = engine.prepare_turn("go")
            done = completed(await collect(provider.stream(render(turn, provider.target))))
            assert done.reasoning == (_signed(wire, thought, n),)
            _record(engine, done)
            [logged] = [e for e in engine.session.entries() if isinstance(e, AssistantMessage)]
            assert decode_entry(encode_entry(logged)) == logged and logged.reasoning == done.reasoning
            body: Any = render(turn, provider.target, continuation=engine.continuation(turn))
            assert _thinking_blocks(body) == [
                {"type": "thinking", "thinking": thought, "signature": done.reasoning[0].signature}
            ]
            await collect(provider.stream(body))
        assert wire.requests[-1].status == 200  # the signature verified: the text came back unchanged

    with WireServer() as wire:

        @settings(max_examples=examples(25))
        @given(st.text(min_size=1))
        def check(thought: str) -> None:
            asyncio.run(round_trip(wire, thought))

        check()


@pytest.mark.slow
async def test_a_tool_loop_with_interleaved_thinking_is_accepted_and_logged(tmp_path: Path, wire: WireServer) -> None:
    workspace = long_workspace(tmp_path)
    (workspace / "app.py").write_text("print('hi')\n")
    thoughts = ["Find the entry point first.", "Read it to see what it prints.", "It prints hi; say so."]
    wire.script(
        Reply(reasoning=thoughts[0], tool_calls=[ToolUse("Glob", {"pattern": "*.py"})]),
        Reply(reasoning=thoughts[1], redacted=True, tool_calls=[ToolUse("Read", {"path": "app.py"})]),
        Reply(reasoning=thoughts[2], text="app.py prints hi."),
        Reply(reasoning="A second question.", text="Still hi."),
    )
    store = LocalSessionStore(tmp_path / "store")
    keep = dataclasses.replace(ENABLED, history="keep")  # completed turns send their thinking back, for the last check
    async with anthropic_provider(wire, reasoning=keep) as provider:
        options = AgentOptions(retry=RetryPolicy(sleep=_no_sleep))
        with open_agent(store, provider, workspace=workspace, options=options) as agent:
            assert (await agent.run_turn("What does app.py print?")).text == "app.py prints hi."
            assert (await agent.run_turn("And now?")).text == "Still hi."
            session_id = agent.engine.session.id
    assert [r.status for r in wire.requests] == [200, 200, 200, 200]  # every signature verified, none dropped
    assert all(BETA in r.headers["anthropic-beta"].split(",") for r in wire.requests)
    expected = [
        (_signed(wire, thoughts[0], 1),),
        (_redacted(wire, thoughts[1], 2),),
        (_signed(wire, thoughts[2], 3),),
        (_signed(wire, "A second question.", 4),),
    ]
    with LocalSessionStore(tmp_path / "store").open(session_id) as reopened:  # read back from disk
        logged = [e.reasoning for e in reopened.entries() if isinstance(e, AssistantMessage)]
    assert logged == expected
    sent_back = _thinking_blocks(wire.requests[-1].body)  # completed turns keep their thinking (history="keep")
    assert [b.get("signature") or b.get("data") for b in sent_back] == [
        r.signature or r.data for blocks in expected[:3] for r in blocks
    ]


async def _no_sleep(_: float) -> None:
    return None


def _user() -> anthropic.types.MessageParam:
    return {"role": "user", "content": "hi"}
