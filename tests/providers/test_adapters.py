"""Behaviour every SDK adapter shares, through the official SDKs against the local wire server.

Each test runs for `AnthropicProvider`, `OpenAIChatProvider` and `OpenAIResponsesProvider`.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lamina.errors import (
    AuthenticationError,
    ContextOverflowError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TransientServerError,
)
from lamina.placement import render
from lamina.providers import (
    AnthropicProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    RetryPolicy,
    stream_with_retry,
)
from lamina.session import Usage
from tests.providers.support import collect, completed, new_engine, record_reply, streamed_text, tool_calls
from tests.wire.fixtures import anthropic_provider, openai_chat_provider, openai_responses_provider
from tests.wire.script import Disconnect, Fail, Reply, ToolUse
from tests.wire.server import WireServer

AnyProvider = AnthropicProvider | OpenAIChatProvider | OpenAIResponsesProvider
FACTORIES: dict[str, Callable[..., AnyProvider]] = {
    "anthropic": anthropic_provider,
    "chat": openai_chat_provider,
    "responses": openai_responses_provider,
}


@pytest.fixture(params=sorted(FACTORIES))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make(api: str, wire: WireServer, **options: Any) -> AnyProvider:
    return FACTORIES[api](wire, **options)


def simple_body(provider: AnyProvider, text: str = "Say hello.") -> Any:
    match provider:
        case AnthropicProvider():
            return {"model": provider.target.model, "max_tokens": 256, "messages": [{"role": "user", "content": text}]}
        case OpenAIChatProvider():
            return {"model": provider.target.model, "messages": [{"role": "user", "content": text}]}
        case OpenAIResponsesProvider():
            return {"model": provider.target.model, "input": [{"role": "user", "content": text}], "store": False}


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def test_text_streams_in_deltas_then_one_completed(api: str, wire: WireServer) -> None:
    wire.script(Reply(text="Hello from the local wire server."))
    async with make(api, wire) as provider:
        events = await collect(provider.stream(simple_body(provider)))
    done = completed(events)
    assert sum(1 for e in events[:-1]) >= 3  # several deltas, not one blob
    assert streamed_text(events) == done.text == "Hello from the local wire server."
    assert done.stop_reason == "end_turn" and done.tool_calls == ()
    assert done.model == provider.target.model and done.usage.output > 0 and done.usage.input > 0
    assert wire.requests[0].body["stream"] is True and wire.requests[0].status == 200


async def test_a_tool_use_round_trip_through_a_real_turn(api: str, wire: WireServer, tmp_path: Path) -> None:
    engine = new_engine(tmp_path)
    wire.script(
        Reply(text="Let me read it.", tool_calls=[ToolUse("Read", {"path": "app.py"})]),
        Reply(text="It prints hi."),
    )
    async with make(api, wire) as provider:
        turn = engine.prepare_turn("What does app.py do?")
        first = await collect(provider.stream(render(turn, provider.target)))
        done = completed(first)
        assert [(c.name, dict(c.input)) for c in tool_calls(first)] == [("Read", {"path": "app.py"})]
        assert done.stop_reason == "tool_use" and done.tool_calls == tuple(tool_calls(first))
        record_reply(engine, done, {"Read": "print('hi')"})
        second = await collect(provider.stream(render(turn, provider.target, continuation=engine.continuation(turn))))
    assert completed(second).text == "It prints hi." and completed(second).stop_reason == "end_turn"
    assert [r.status for r in wire.requests] == [200, 200]  # the server checks every call has its result
    assert "print('hi')" in str(wire.requests[1].body) and done.tool_calls[0].call_id in str(wire.requests[1].body)


async def test_parallel_tool_calls_arrive_in_order_and_all_results_go_back(
    api: str, wire: WireServer, tmp_path: Path
) -> None:
    engine = new_engine(tmp_path)
    calls = [ToolUse("Read", {"path": "a.py"}), ToolUse("Grep", {"pattern": "TODO", "path": "."}), ToolUse("Glob", {})]
    wire.script(Reply(tool_calls=calls), Reply(text="Three results read."))
    async with make(api, wire) as provider:
        turn = engine.prepare_turn("Look around.")
        events = await collect(provider.stream(render(turn, provider.target)))
        done = completed(events)
        assert [(c.name, dict(c.input)) for c in done.tool_calls] == [(c.name, dict(c.input)) for c in calls]
        assert len({c.call_id for c in done.tool_calls}) == 3 and streamed_text(events) == ""
        record_reply(engine, done)
        await collect(provider.stream(render(turn, provider.target, continuation=engine.continuation(turn))))
    assert [r.status for r in wire.requests] == [200, 200]


async def test_usage_has_cache_fields_and_an_identical_request_reads_the_cache(
    api: str, wire: WireServer, tmp_path: Path
) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="one"), Reply(text="two"))
    async with make(api, wire) as provider:
        body = render(engine.prepare_turn("Fix the bug in app.py"), provider.target)
        first = completed(await collect(provider.stream(body)))
        second = completed(await collect(provider.stream(body)))
    billed = [r.usage for r in wire.requests if r.usage is not None]
    assert len(billed) == 2
    assert first.usage.cache_read == 0 and second.usage.cache_read == billed[1].read > 1024
    for done, usage in zip((first, second), billed, strict=True):
        assert done.usage.input + done.usage.cache_read + done.usage.cache_write == usage.total
        expected_write = usage.write if api == "anthropic" else 0  # OpenAI writes are free and not reported
        assert done.usage == Usage(
            input=usage.total - usage.read - expected_write,
            output=done.usage.output,
            cache_read=usage.read,
            cache_write=expected_write,
        )
    if api == "anthropic":
        assert first.usage.cache_write > 1024 and second.usage.cache_write == 0


@pytest.mark.parametrize("in_stream", [False, True])
async def test_overflow_is_a_context_overflow_error(api: str, wire: WireServer, in_stream: bool) -> None:
    wire.script(Fail("overflow", in_stream=in_stream))
    async with make(api, wire) as provider:
        with pytest.raises(ContextOverflowError) as caught:
            await collect(provider.stream(simple_body(provider)))
    assert not caught.value.retryable and caught.value.provider == provider.name
    assert caught.value.status == (None if in_stream else 400)
    assert any(w in str(caught.value) for w in ("prompt is too long", "maximum context length", "context window"))


async def test_retries_after_overload_and_rate_limit_honouring_retry_after(api: str, wire: WireServer) -> None:
    wire.script(Fail("overloaded"), Fail("rate_limit", retry_after=2.5), Reply(text="third time lucky"))
    sleeps = Sleeps()
    async with make(api, wire) as provider:
        retry = RetryPolicy(sleep=sleeps, random=lambda: 0.5, base_delay=1.0)
        events = await collect(stream_with_retry(provider, simple_body(provider), retry))
    assert completed(events).text == "third time lucky"
    assert sleeps.delays == [0.5, 2.5]
    assert [r.status for r in wire.requests] == [529 if api == "anthropic" else 503, 429, 200]


async def test_the_sdk_client_does_not_retry_by_itself(api: str, wire: WireServer) -> None:
    wire.script(Fail("overloaded", retry_after=1), Reply(text="not reached"))
    async with make(api, wire) as provider:
        with pytest.raises(OverloadedError) as caught:
            await collect(provider.stream(simple_body(provider)))
    assert caught.value.retry_after == 1.0 and caught.value.retryable
    assert len(wire.requests) == 1 and wire.pending == 1


async def test_a_rate_limit_carries_retry_after(api: str, wire: WireServer) -> None:
    wire.script(Fail("rate_limit", retry_after=12))
    async with make(api, wire) as provider:
        with pytest.raises(RateLimitError) as caught:
            await collect(provider.stream(simple_body(provider)))
    assert type(caught.value) is RateLimitError and caught.value.retry_after == 12.0 and caught.value.status == 429


async def test_a_wrong_api_key_is_a_clear_authentication_error(api: str, wire: WireServer) -> None:
    wire.api_key = "the-right-key"
    wire.script(Reply(text="not for you"))
    async with make(api, wire, api_key="a-wrong-key") as provider:
        with pytest.raises(AuthenticationError) as caught:
            await collect(provider.stream(simple_body(provider)))
    message = str(caught.value)
    assert caught.value.status == 401 and not caught.value.retryable
    assert message.startswith(f"{provider.name} (HTTP 401): ") and "check the API key" in message
    assert "a-wrong-key" in str(wire.requests[0].headers) and wire.pending == 1


async def test_an_error_inside_the_stream_before_any_output_is_retried(api: str, wire: WireServer) -> None:
    wire.script(Fail("overloaded", in_stream=True), Reply(text="recovered"))
    sleeps = Sleeps()
    async with make(api, wire) as provider:
        retry = RetryPolicy(sleep=sleeps, random=lambda: 0.25)
        events = await collect(stream_with_retry(provider, simple_body(provider), retry))
    assert streamed_text(events) == "recovered" and sleeps.delays == [0.25]
    assert [r.status for r in wire.requests] == [200, 200]


async def test_an_error_after_streamed_text_is_raised_not_retried(api: str, wire: WireServer) -> None:
    wire.script(Fail("server", in_stream=True, text_before="Half of the ans"), Reply(text="whole answer"))
    seen: list[Any] = []
    async with make(api, wire) as provider:
        with pytest.raises(TransientServerError):
            async for event in stream_with_retry(provider, simple_body(provider), RetryPolicy(sleep=Sleeps())):
                seen.append(event)
    assert streamed_text(seen) == "Half of the ans"  # shown once, never repeated by a retry
    assert len(wire.requests) == 1 and wire.pending == 1


async def test_max_tokens_is_the_normalised_stop_reason(api: str, wire: WireServer) -> None:
    wire.script(Reply(text="cut sh", stop_reason="max_tokens"))
    async with make(api, wire) as provider:
        done = completed(await collect(provider.stream(simple_body(provider))))
    assert done.stop_reason == "max_tokens" and done.text == "cut sh"


async def test_a_refused_connection_is_a_transient_error(api: str, wire: WireServer) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    provider: AnyProvider
    if api == "anthropic":
        provider = AnthropicProvider("claude-sonnet-5", api_key="k", base_url=url)
    elif api == "chat":
        provider = OpenAIChatProvider("gpt-5", api_key="k", base_url=f"{url}/v1")
    else:
        provider = OpenAIResponsesProvider("gpt-5", api_key="k", base_url=f"{url}/v1")
    async with provider:
        with pytest.raises(TransientServerError, match="connection failed") as caught:
            await collect(provider.stream(simple_body(provider)))
    assert caught.value.retryable and isinstance(caught.value, ProviderError)


async def test_a_connection_dropped_mid_stream_is_a_transient_error(api: str, wire: WireServer) -> None:
    wire.script(Disconnect())
    async with make(api, wire) as provider:
        with pytest.raises(TransientServerError, match=r"connection (lost|failed)") as caught:
            await collect(provider.stream(simple_body(provider)))
    assert caught.value.retryable
