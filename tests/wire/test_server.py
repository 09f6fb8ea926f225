"""The wire server itself: its shapes pass the SDKs' strict validation, it rejects what the APIs reject."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest

from lamina.errors import InvalidRequestError
from lamina.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from tests.wire.fixtures import API_KEY, anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Reply, ToolUse
from tests.wire.server import ManualClock, WireServer

TOOLS_REPLY = Reply(text="Checking.", tool_calls=[ToolUse("Read", {"path": "a.py"}), ToolUse("Glob", {"pattern": "*"})])


def strict_anthropic(wire: WireServer) -> anthropic.AsyncAnthropic:
    # strict validation: every event and body the server sends must match the SDK's types exactly
    return anthropic.AsyncAnthropic(api_key=API_KEY, base_url=wire.url, max_retries=0, _strict_response_validation=True)


def strict_openai(wire: WireServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=API_KEY, base_url=wire.openai_url, max_retries=0, _strict_response_validation=True
    )


async def test_anthropic_shapes_pass_strict_sdk_validation(wire: WireServer) -> None:
    wire.script(TOOLS_REPLY, TOOLS_REPLY)
    client = strict_anthropic(wire)
    async with AnthropicProvider("claude-sonnet-5", client=client) as provider:
        body: Any = {"model": "claude-sonnet-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        events = [e async for e in provider.stream(body)]
    assert len(events) > 3
    message = await client.messages.create(**body)
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert message.stop_reason == "tool_use" and message.usage.cache_read_input_tokens == 0
    await client.close()


@pytest.mark.slow
async def test_openai_shapes_pass_strict_sdk_validation(wire: WireServer) -> None:
    wire.script(TOOLS_REPLY, TOOLS_REPLY, TOOLS_REPLY, TOOLS_REPLY)
    client = strict_openai(wire)
    chat: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}
    responses: Any = {"model": "gpt-5", "input": "hi"}
    async with OpenAIChatProvider("gpt-5", client=client) as chat_provider:
        assert len([e async for e in chat_provider.stream(chat)]) > 3
    async with OpenAIResponsesProvider("gpt-5", client=client) as responses_provider:
        assert len([e async for e in responses_provider.stream(responses)]) > 3
    completion = await client.chat.completions.create(**chat)
    assert completion.choices[0].finish_reason == "tool_calls"
    calls = completion.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls if c.type == "function"] == ["Read", "Glob"]
    response = await client.responses.create(**responses)
    assert [item.type for item in response.output] == ["message", "function_call", "function_call"]
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens == 0
    await client.close()


def _anthropic_body(messages: list[Any]) -> Any:
    return {"model": "claude-sonnet-5", "max_tokens": 64, "messages": messages}


MARK = {"type": "ephemeral"}
USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]}
RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
HELLO: Any = {"role": "user", "content": "hello"}


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [{"role": "user", "content": [{"type": "text", "text": f"t{i}", "cache_control": MARK} for i in range(5)]}],
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            [HELLO, USE, HELLO],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. "
            "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        ),
        (
            [HELLO, USE],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1.",
        ),
        (
            [HELLO, RESULT],
            "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1.",
        ),
    ],
)
async def test_anthropic_rejects_what_the_api_rejects(wire: WireServer, messages: list[Any], message: str) -> None:
    wire.script(Reply(text="not used"))
    async with anthropic_provider(wire) as provider:
        with pytest.raises(InvalidRequestError) as caught:
            [e async for e in provider.stream(_anthropic_body(messages))]
    assert message in str(caught.value) and caught.value.status == 400
    assert wire.pending == 1 and wire.requests[0].status == 400 and wire.requests[0].step is None


async def test_a_well_formed_tool_exchange_is_accepted(wire: WireServer) -> None:
    wire.script(Reply(text="fine"))
    async with anthropic_provider(wire) as provider:
        [e async for e in provider.stream(_anthropic_body([HELLO, USE, RESULT]))]
    assert wire.requests[0].status == 200


CALL = {"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [CALL]}],
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            "'tool_call_id'. The following tool_call_ids did not have response messages: call_1",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}],
            "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
        ),
    ],
)
async def test_chat_rejects_what_the_api_rejects(wire: WireServer, messages: list[Any], message: str) -> None:
    wire.script(Reply(text="not used"))
    async with openai_chat_provider(wire) as provider:
        with pytest.raises(InvalidRequestError, match=r"did not have response|preceeding") as caught:
            [e async for e in provider.stream({"model": "gpt-5", "messages": messages})]
    assert message in str(caught.value) and wire.pending == 1


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"type": "function_call", "call_id": "call_1", "name": "Read", "arguments": "{}"}], "No tool output found"),
        ([{"type": "function_call_output", "call_id": "call_9", "output": "ok"}], "No tool call found"),
    ],
)
async def test_responses_rejects_what_the_api_rejects(wire: WireServer, items: list[Any], message: str) -> None:
    wire.script(Reply(text="not used"))
    async with openai_responses_provider(wire) as provider:
        with pytest.raises(InvalidRequestError, match=message):
            [e async for e in provider.stream({"model": "gpt-5", "input": [{"role": "user", "content": "x"}, *items]})]


async def test_a_request_beyond_the_script_is_rejected_clearly(wire: WireServer) -> None:
    async with anthropic_provider(wire) as provider:
        with pytest.raises(InvalidRequestError, match="no scripted response left for request 1"):
            [e async for e in provider.stream(_anthropic_body([HELLO]))]


async def test_requests_are_recorded_with_headers_and_bodies(wire: WireServer) -> None:
    wire.script(Reply(text="a"), Reply(text="b"))
    async with anthropic_provider(wire) as provider:
        [e async for e in provider.stream(_anthropic_body([HELLO]))]
    async with openai_chat_provider(wire) as chat:
        chat_body: Any = {"model": "gpt-5", "messages": [HELLO]}
        [e async for e in chat.stream(chat_body)]
    first, second = wire.requests
    assert (first.api, first.path, second.api, second.path) == (
        "anthropic",
        "/v1/messages",
        "chat",
        "/v1/chat/completions",
    )
    assert API_KEY in first.headers.get("x-api-key", "") + first.headers.get("authorization", "")
    assert first.headers["content-type"] == "application/json"
    assert wire.bodies("chat") == [second.body] and second.body["messages"] == [HELLO]


async def test_the_server_clock_drives_cache_expiry(wire: WireServer, wire_clock: ManualClock) -> None:
    long_text = " ".join(f"word{i}" for i in range(3000))
    body: Any = {"model": "gpt-5", "messages": [{"role": "system", "content": long_text}, HELLO]}
    wire.script(Reply(text="1"), Reply(text="2"), Reply(text="3"))
    async with openai_chat_provider(wire) as provider:
        for advance in (0, 10, 400):  # the OpenAI simulator's idle TTL is 300 s
            wire_clock.advance(advance)
            [e async for e in provider.stream(body)]
    reads = [r.usage.read if r.usage else None for r in wire.requests]
    assert reads[0] == 0 and reads[1] is not None and reads[1] >= 1024 and reads[2] == 0


async def test_unknown_paths_are_404(wire: WireServer) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{wire.url}/v1/embeddings", json={})
    assert response.status_code == 404 and response.json()["error"]["type"] == "invalid_request_error"
