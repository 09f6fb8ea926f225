"""OpenAI specifics: usage requests, compatible servers without a key, quota errors, stream error events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseErrorEvent

from lamina.errors import AuthenticationError, ContextOverflowError, RateLimitError
from lamina.placement import render
from lamina.providers import OpenAIChatProvider, provider_from_spec
from lamina.providers._openai_errors import map_openai_error
from lamina.providers._openai_replies import ResponsesReply as _ResponsesReply
from lamina.session import Usage
from tests.providers.support import collect, completed, new_engine
from tests.wire.fixtures import openai_chat_provider, openai_responses_provider
from tests.wire.script import Fail, Reply
from tests.wire.server import WireServer

CHAT: Any = {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]}


async def test_chat_asks_for_the_usage_chunk_and_sends_the_body_as_rendered(wire: WireServer, tmp_path: Path) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="ok"))
    async with openai_chat_provider(wire, max_tokens=500) as provider:
        body: Any = render(engine.prepare_turn("hello"), provider.target)
        done = completed(await collect(provider.stream(body)))
    sent = wire.requests[0].body
    assert sent == {**body, "stream": True, "stream_options": {"include_usage": True}}
    assert sent["prompt_cache_key"] == engine.session.id and sent["max_completion_tokens"] == 500
    assert done.usage.input > 0


async def test_responses_sends_the_body_as_rendered(wire: WireServer, tmp_path: Path) -> None:
    engine = new_engine(tmp_path)
    wire.script(Reply(text="ok"))
    async with openai_responses_provider(wire) as provider:
        body: Any = render(engine.prepare_turn("hello"), provider.target)
        await collect(provider.stream(body))
    assert wire.requests[0].body == {**body, "stream": True}


async def test_without_the_usage_chunk_usage_is_zero(wire: WireServer) -> None:
    wire.script(Reply(text="no usage here"))
    async with openai_chat_provider(wire, include_usage=False) as provider:
        done = completed(await collect(provider.stream(CHAT)))
    assert "stream_options" not in wire.requests[0].body and done.usage == Usage()


async def test_a_compatible_server_works_without_an_api_key(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = provider_from_spec(f"openai-compat:{wire.openai_url}#qwen3-coder")
    assert isinstance(provider, OpenAIChatProvider) and provider.name == "openai-compat"
    wire.script(Reply(text="hello from a local model"), Fail("overflow"))
    async with provider:
        body: Any = {**CHAT, "model": provider.target.model}
        done = completed(await collect(provider.stream(body)))
        with pytest.raises(ContextOverflowError, match=r"^openai-compat \(HTTP 400\)"):
            await collect(provider.stream(CHAT))
    sent = wire.requests[0]
    assert done.text == "hello from a local model" and sent.body["model"] == "qwen3-coder"
    assert sent.headers["authorization"] == "Bearer unused"
    assert provider.target.prompt_cache_key is False


async def test_openai_without_a_key_is_an_authentication_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    async with OpenAIChatProvider("gpt-5") as provider:
        with pytest.raises(AuthenticationError, match="no API key: set OPENAI_API_KEY"):
            await collect(provider.stream(CHAT))


async def test_responses_failed_mid_stream_maps_its_error_code(wire: WireServer) -> None:
    wire.script(Fail("rate_limit", in_stream=True))
    async with openai_responses_provider(wire) as provider:
        with pytest.raises(RateLimitError, match="Rate limit reached"):
            await collect(provider.stream({"model": "gpt-5", "input": "hi"}))


def test_a_top_level_error_event_is_classified_by_its_code() -> None:
    event = ResponseErrorEvent(
        type="error",
        code="context_length_exceeded",
        message="Your input exceeds the context window.",
        sequence_number=3,
    )
    with pytest.raises(ContextOverflowError, match="exceeds the context window"):
        list(_ResponsesReply("openai-responses").feed(event))


def test_insufficient_quota_is_a_rate_limit_that_is_not_retried() -> None:
    body = {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"}
    # built the way the SDK builds it: a real request, not a private constructor's None
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/responses")
    # the SDK at its floor types this an httpx.Request, newer ones an httpx2.Request: httpx runs on both
    error = map_openai_error(openai.APIError("quota", request=request, body=body))  # type: ignore[arg-type]
    assert isinstance(error, RateLimitError) and not error.retryable and "current quota" in str(error)


def test_errors_from_elsewhere_are_not_mapped() -> None:
    assert map_openai_error(ValueError("not ours")) is None
